//! Writing request bodies by hand, field by field as the Kafka protocol guide lays them out (not
//! from the guard's tables), and the assertions the `hostile*.rs` tests make about them.

use super::{alloc, decode_measured};
use crate::guard::{check_request_body, GuardError};

/// A body written field by field.
#[derive(Default)]
pub(super) struct Wire(Vec<u8>);

impl Wire {
    pub(super) fn new() -> Self {
        Wire::default()
    }
    pub(super) fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    pub(super) fn i8(self, v: i8) -> Self {
        self.raw(&v.to_be_bytes())
    }
    pub(super) fn i16(self, v: i16) -> Self {
        self.raw(&v.to_be_bytes())
    }
    pub(super) fn i32(self, v: i32) -> Self {
        self.raw(&v.to_be_bytes())
    }
    pub(super) fn i64(self, v: i64) -> Self {
        self.raw(&v.to_be_bytes())
    }
    pub(super) fn uuid(self) -> Self {
        self.raw(&[7; 16])
    }
    pub(super) fn uvarint(mut self, mut v: u32) -> Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    /// A classic string.
    pub(super) fn string(self, s: &str) -> Self {
        let len = i16::try_from(s.len()).expect("short");
        self.i16(len).raw(s.as_bytes())
    }
    /// A compact string.
    pub(super) fn compact_string(self, s: &str) -> Self {
        let len = u32::try_from(s.len()).expect("short");
        self.uvarint(len + 1).raw(s.as_bytes())
    }
    /// An empty tagged-field section.
    pub(super) fn no_tags(self) -> Self {
        self.uvarint(0)
    }
    /// A classic array count of i32::MAX.
    pub(super) fn huge_count(self) -> Self {
        self.i32(i32::MAX)
    }
    /// A compact array count of u32::MAX - 1 (varint u32::MAX).
    pub(super) fn huge_compact_count(self) -> Self {
        self.uvarint(u32::MAX)
    }
    /// A few stray bytes after the hostile count.
    pub(super) fn tail(self) -> Vec<u8> {
        self.raw(&[1, 2, 3, 4, 5, 6]).0
    }
    pub(super) fn done(self) -> Vec<u8> {
        self.0
    }
}

pub(super) fn guard(api_key: i16, version: i16, body: &[u8]) -> Result<(), GuardError> {
    let (verdict, allocations) = alloc::measure(|| check_request_body(api_key, version, body));
    assert_eq!(allocations.count, 0, "the guard allocated");
    verdict
}

#[track_caller]
pub(super) fn assert_array_too_long(api_key: i16, version: i16, body: &[u8], structure: &str, field: &str) {
    match guard(api_key, version, body) {
        Err(GuardError::ArrayTooLong { field: at, count, .. }) => {
            assert_eq!((at.structure, at.field), (structure, field));
            assert!(count >= u64::from(u32::MAX >> 1), "count {count}");
        }
        other => panic!("api key {api_key} v{version}: expected ArrayTooLong, got {other:?}"),
    }
}

#[track_caller]
pub(super) fn assert_truncated(api_key: i16, version: i16, body: &[u8], structure: &str, field: &str) {
    match guard(api_key, version, body) {
        Err(GuardError::Truncated { field: at, .. }) => {
            assert_eq!((at.structure, at.field), (structure, field));
        }
        other => panic!("api key {api_key} v{version}: expected Truncated, got {other:?}"),
    }
    // Lengths of strings and bytes are checked by kafka-protocol itself (these decode to
    // `StrBytes`/`Bytes`), so the decoder can run here and must refuse too.
    assert!(decode_measured(api_key, version, body).0.is_err());
}

#[track_caller]
pub(super) fn assert_accepted_and_decoded(api_key: i16, version: i16, body: &[u8]) {
    assert_eq!(guard(api_key, version, body), Ok(()));
    let (decoded, _) = decode_measured(api_key, version, body);
    assert_eq!(decoded, Ok(()));
}
