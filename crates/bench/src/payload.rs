//! Record values: filler bytes for the throughput workloads and a send-time
//! stamp for the end-to-end one.

/// `size` bytes of cheap pseudo-random filler (xorshift), so that a broker or
/// a link that compresses cannot make the numbers look better than they are.
pub fn filler(size: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let take = (size - out.len()).min(8);
        out.extend_from_slice(&state.to_le_bytes()[..take]);
    }
    out
}

/// Size of the end-to-end stamp: run id, then send time, both little-endian u64.
pub const STAMP_BYTES: usize = 16;

/// Writes the stamp into the first [`STAMP_BYTES`] of `value` (which must be
/// at least that long). `sent_ns` is nanoseconds since the run's own
/// monotonic origin: producer and consumer run in the same process, so no
/// clock synchronisation is involved.
pub fn write_stamp(value: &mut [u8], run_id: u64, sent_ns: u64) {
    value[..8].copy_from_slice(&run_id.to_le_bytes());
    value[8..STAMP_BYTES].copy_from_slice(&sent_ns.to_le_bytes());
}

/// The send time from a stamped value, if it carries this run's id (a topic
/// may hold records from other runs or other writers).
pub fn read_stamp(value: &[u8], run_id: u64) -> Option<u64> {
    let id = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    if id != run_id {
        return None;
    }
    Some(u64::from_le_bytes(value.get(8..STAMP_BYTES)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_has_the_exact_size() {
        for size in [0, 1, 7, 8, 9, 100, 1024] {
            assert_eq!(filler(size, 42).len(), size);
        }
        assert_ne!(filler(64, 1), vec![0u8; 64]);
    }

    #[test]
    fn stamp_round_trips_and_rejects_other_runs() {
        let mut value = filler(100, 3);
        write_stamp(&mut value, 7, 123_456_789);
        assert_eq!(read_stamp(&value, 7), Some(123_456_789));
        assert_eq!(read_stamp(&value, 8), None);
        assert_eq!(read_stamp(&value[..10], 7), None);
    }
}
