//! Kafka's default partitioner for keyed records: `toPositive(murmur2(key)) %
//! partitions`, with the Java client's `Utils.murmur2` (seed 0x9747b28c).
//! librdkafka's `murmur2_random` partitioner computes the same.

/// Kafka's 32-bit murmur2 of `data`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() >= 3 {
            h ^= (tail[2] as u32) << 16;
        }
        if tail.len() >= 2 {
            h ^= (tail[1] as u32) << 8;
        }
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for `key`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn matches_the_java_client() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "murmur2({:?})", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitions_stay_in_range() {
        for n in [1, 2, 3, 7, 1000] {
            for key in [&b""[..], b"a", b"key-1", b"\xff\xfe\xfd"] {
                let p = partition_for_key(key, n);
                assert!((0..n).contains(&p), "{p} of {n}");
            }
        }
    }
}
