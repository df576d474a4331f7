//! The variable-length integers inside records (zigzag varints, as in
//! protobuf) and the byte fields they prefix (length -1: null).
//!
//! Readers advance the slice past what they read and return `None` on
//! truncated input, a varint longer than its type allows, or a length that
//! runs past the input; they never panic and never allocate.

/// Zigzag varint (i32) as used inside records.
#[inline]
pub fn read_varint(buf: &mut &[u8]) -> Option<i32> {
    let raw = read_unsigned_var(buf, 5)?;
    let raw = u32::try_from(raw).ok()?;
    Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Zigzag varlong (i64) as used inside records.
#[inline]
pub fn read_varlong(buf: &mut &[u8]) -> Option<i64> {
    let raw = read_unsigned_var(buf, 10)?;
    Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

#[inline(always)]
fn read_unsigned_var(buf: &mut &[u8], max_bytes: usize) -> Option<u64> {
    // Most varints in a record are one or two bytes (small deltas, lengths
    // under 8 KiB, no headers): answered without the loop.
    if let Some((pair, rest)) = buf.split_first_chunk::<2>() {
        let word = u16::from_le_bytes(*pair);
        if word & 0x80 == 0 {
            *buf = &buf[1..];
            return Some(u64::from(word & 0x7f));
        }
        if word & 0x8000 == 0 {
            *buf = rest;
            return Some(u64::from(word & 0x7f) | (u64::from(word >> 8) << 7));
        }
    } else if let [last] = **buf {
        // A record's last field, its header count, is usually one byte.
        if last < 0x80 {
            *buf = &[];
            return Some(u64::from(last));
        }
    }
    read_unsigned_var_long(buf, max_bytes)
}

fn read_unsigned_var_long(buf: &mut &[u8], max_bytes: usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A varint-length-prefixed byte field: `Some(None)` for null (-1).
#[inline]
pub fn read_bytes<'a>(buf: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    let len = read_varint(buf)?;
    match len {
        -1 => Some(None),
        n if n < -1 || n as usize > buf.len() => None,
        n => {
            let (field, rest) = buf.split_at(n as usize);
            *buf = rest;
            Some(Some(field))
        }
    }
}

pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_unsigned_var(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned_var(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_unsigned_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes a varint-length-prefixed byte field (`None`: null).
pub fn put_bytes(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zigzag_puts_small_magnitudes_in_one_byte() {
        for (v, encoded) in [(0, vec![0]), (-1, vec![1]), (1, vec![2]), (-64, vec![0x7f]), (64, vec![0x80, 1])] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, encoded, "{v}");
        }
    }

    #[test]
    fn truncated_and_over_long_input_is_refused() {
        assert_eq!(read_varint(&mut &[0x80u8][..]), None, "continuation bit with nothing after");
        assert_eq!(read_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..]), None, "six bytes for an i32");
        assert_eq!(read_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0x7f][..]), None, "35 bits for an i32");
        let mut field = vec![];
        put_varint(&mut field, 5);
        field.extend_from_slice(b"abc");
        assert_eq!(read_bytes(&mut &field[..]), None, "a length past the input");
        let mut negative = vec![];
        put_varint(&mut negative, -2);
        assert_eq!(read_bytes(&mut &negative[..]), None, "lengths below -1 mean nothing");
    }

    proptest! {
        #[test]
        fn what_is_put_reads_back(a in any::<i32>(), b in any::<i64>(), field in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))) {
            let mut out = Vec::new();
            put_varint(&mut out, a);
            put_varlong(&mut out, b);
            put_bytes(&mut out, field.as_deref());
            let mut buf = &out[..];
            prop_assert_eq!(read_varint(&mut buf), Some(a));
            prop_assert_eq!(read_varlong(&mut buf), Some(b));
            prop_assert_eq!(read_bytes(&mut buf), Some(field.as_deref()));
            prop_assert!(buf.is_empty());
        }

        /// The one- and two-byte paths answer as the byte-by-byte loop
        /// does, value and bytes consumed, on any input: short, truncated,
        /// over-long, a varint that ends the buffer.
        #[test]
        fn the_fast_paths_agree_with_the_loop(bytes in proptest::collection::vec(any::<u8>(), 0..12), wide in any::<bool>()) {
            let max_bytes = if wide { 10 } else { 5 };
            let (mut fast, mut slow) = (&bytes[..], &bytes[..]);
            prop_assert_eq!(read_unsigned_var(&mut fast, max_bytes), read_unsigned_var_long(&mut slow, max_bytes));
            prop_assert_eq!(fast.len(), slow.len());
        }
    }

    #[test]
    fn a_varint_that_ends_the_buffer_is_read() {
        for v in [0, -1, 63, 64, -65, 8191, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut buf = &out[..];
            assert_eq!(read_varint(&mut buf), Some(v), "{v}");
            assert!(buf.is_empty(), "{v}");
        }
    }
}
