//! Zero-copy Fetch answers: record bytes go from the segment file to the
//! socket with `sendfile(2)`, never through user space.
//!
//! The Fetch handler does not read the records. For each partition's file
//! range it puts a *placeholder* into the response: a `Bytes` of the right
//! length pointing into [`PLACEHOLDER`], a static zero region that is never
//! read (it lives in .bss and costs no memory). The response is then encoded
//! into a [`SpliceBuf`], which copies every field as usual but recognises a
//! placeholder by its address when the encoder writes it, and records the
//! file range in its place. The connection writes the encoded parts in order:
//! bytes with `write`, file ranges with `sendfile`. Lengths and framing come
//! out exactly as if the records had been copied, because the encoder saw
//! slices of the right length.
//!
//! Ranges of files without an OS file (simulated storage in tests), ranges
//! longer than the placeholder region, and answers with more ranges than it
//! has distinct addresses fall back to copying; so do ranges shorter than
//! [`COPIED_BELOW_BYTES`], where copying is the cheaper way.

use bytes::{BufMut, Bytes, BytesMut};
use kafgres_log::ReadSlice;
use kafka_protocol::protocol::buf::ByteBufMut;

/// The longest range sent without copying (a Fetch partition is usually at
/// most `max.partition.fetch.bytes`, 1 MiB, and a response `fetch.max.bytes`,
/// 50 MiB).
pub const RANGE_BYTES_MAX: usize = 64 << 20;
/// Ranges shorter than this are read into the response instead: for the
/// few records a consumer at the log end gets, one `pread` and one send
/// cost less than corking, sending the header, `sendfile`, the tail and
/// uncorking (five calls, the last pushing the packet).
pub const COPIED_BELOW_BYTES: usize = 16 << 10;
/// Distinct placeholders per response (each starts one byte further in).
const RANGES_MAX: usize = 64 << 10;
static PLACEHOLDER: [u8; RANGE_BYTES_MAX + RANGES_MAX] = [0; RANGE_BYTES_MAX + RANGES_MAX];

/// A piece of an encoded response, in sending order.
#[derive(Debug)]
pub enum ResponsePart {
    Bytes(Bytes),
    File(ReadSlice),
}

impl ResponsePart {
    pub fn len(&self) -> usize {
        match self {
            ResponsePart::Bytes(b) => b.len(),
            ResponsePart::File(s) => s.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The file ranges a response refers to, by placeholder.
#[derive(Debug, Default)]
pub struct FileRanges {
    ranges: Vec<ReadSlice>,
}

impl FileRanges {
    /// Forgets the ranges of an earlier attempt (a long poll reads again).
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// A placeholder for `slice`, or `None` if it must be copied.
    pub fn placeholder(&mut self, slice: ReadSlice) -> Option<Bytes> {
        let len = slice.len as usize;
        let sendable = slice.file.as_ref().is_some_and(|f| f.as_std_file().is_some());
        if !sendable || !(COPIED_BELOW_BYTES..=RANGE_BYTES_MAX).contains(&len) || self.ranges.len() >= RANGES_MAX {
            return None;
        }
        let start = self.ranges.len();
        self.ranges.push(slice);
        Some(Bytes::from_static(&PLACEHOLDER[start..start + len]))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// An encoding buffer that turns placeholders into file ranges.
pub struct SpliceBuf {
    parts: Vec<ResponsePart>,
    tail: BytesMut,
    /// Bytes in `parts`.
    sealed: usize,
    ranges: Vec<Option<ReadSlice>>,
}

impl SpliceBuf {
    pub fn new(capacity: usize, ranges: FileRanges) -> SpliceBuf {
        SpliceBuf {
            parts: Vec::new(),
            tail: BytesMut::with_capacity(capacity),
            sealed: 0,
            ranges: ranges.ranges.into_iter().map(Some).collect(),
        }
    }

    /// The encoded parts; `Err` if a placeholder was never written (the
    /// response and its ranges do not belong together).
    pub fn finish(mut self) -> Result<Vec<ResponsePart>, String> {
        if self.ranges.iter().any(Option::is_some) {
            return Err("a file range of the response was never encoded".into());
        }
        if !self.tail.is_empty() {
            self.parts.push(ResponsePart::Bytes(self.tail.split().freeze()));
        }
        Ok(self.parts)
    }

    /// Writes a big-endian i32 over bytes already encoded (a length prefix
    /// reserved at the start).
    pub fn patch_i32(&mut self, at: usize, value: i32) -> Result<(), String> {
        let bytes = value.to_be_bytes();
        match self.parts.first_mut() {
            Some(ResponsePart::Bytes(first)) if first.len() >= at + 4 => {
                let mut patched = BytesMut::from(&first[..]);
                patched[at..at + 4].copy_from_slice(&bytes);
                *first = patched.freeze();
                Ok(())
            }
            None if self.tail.len() >= at + 4 => {
                self.tail[at..at + 4].copy_from_slice(&bytes);
                Ok(())
            }
            _ => Err("the length prefix is not in the first part".into()),
        }
    }

    fn placeholder_index(&self, src: &[u8]) -> Option<usize> {
        let base = PLACEHOLDER.as_ptr() as usize;
        let at = src.as_ptr() as usize;
        if src.is_empty() || at < base || at >= base + PLACEHOLDER.len() {
            return None;
        }
        let index = at - base;
        self.ranges.get(index)?.as_ref().filter(|r| r.len as usize == src.len())?;
        Some(index)
    }
}

// SAFETY: every method delegates to `tail`, a BytesMut, whose BufMut
// implementation upholds the contract; `put_slice` only adds the
// recognition of placeholders.
unsafe impl BufMut for SpliceBuf {
    fn remaining_mut(&self) -> usize {
        self.tail.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: our caller promises that `cnt` bytes of the last
        // `chunk_mut` are initialised; that chunk is `tail`'s own, so the
        // promise holds for `tail` unchanged.
        unsafe { self.tail.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.tail.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.placeholder_index(src).and_then(|i| self.ranges[i].take()) {
            Some(range) => {
                if !self.tail.is_empty() {
                    let head = self.tail.split().freeze();
                    self.sealed += head.len();
                    self.parts.push(ResponsePart::Bytes(head));
                }
                self.sealed += range.len as usize;
                self.parts.push(ResponsePart::File(range));
            }
            None => self.tail.extend_from_slice(src),
        }
    }
}

// Message encoders only append (gaps are used by record-batch encoding, not
// here); seeking is supported within the unsealed tail.
impl ByteBufMut for SpliceBuf {
    fn offset(&self) -> usize {
        self.sealed + self.tail.len()
    }

    fn seek(&mut self, offset: usize) {
        let within = offset.saturating_sub(self.sealed);
        self.tail.resize(within, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let start = r.start.saturating_sub(self.sealed);
        let end = r.end.saturating_sub(self.sealed);
        &mut self.tail[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafgres_log::storage::FileStorage;

    fn file_slice(dir: &std::path::Path, content: &[u8], position: u64, len: u64) -> ReadSlice {
        let path = dir.join("seg");
        std::fs::write(&path, content).expect("writes");
        let file = FileStorage::shared().open(&path, false).expect("opens");
        ReadSlice { file: Some(file), path, position, len }
    }

    #[test]
    fn placeholders_become_file_ranges_in_order_and_everything_else_is_copied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ranges = FileRanges::default();
        let content = vec![7u8; COPIED_BELOW_BYTES + 10];
        let len = COPIED_BELOW_BYTES as u64;
        let a = ranges.placeholder(file_slice(dir.path(), &content, 2, len)).expect("sendable");
        let b = ranges.placeholder(file_slice(dir.path(), &content, 0, len)).expect("sendable");
        let mut buf = SpliceBuf::new(64, ranges);
        buf.put_i32(0);
        buf.put_slice(b"head");
        buf.put_slice(&a);
        buf.put_slice(b"mid");
        buf.put_slice(&b);
        buf.put_slice(b"end");
        assert_eq!(buf.offset(), 4 + 4 + COPIED_BELOW_BYTES + 3 + COPIED_BELOW_BYTES + 3);
        let total = buf.offset() as i32;
        buf.patch_i32(0, total - 4).expect("patches");
        let parts = buf.finish().expect("complete");
        let shape: Vec<String> = parts
            .iter()
            .map(|p| match p {
                ResponsePart::Bytes(b) => format!("bytes {:?}", &b[..]),
                ResponsePart::File(s) => format!("file {}+{}", s.position, s.len),
            })
            .collect();
        assert_eq!(
            shape,
            [
                format!("bytes {:?}", &[&(total - 4).to_be_bytes()[..], b"head"].concat()[..]),
                format!("file 2+{len}"),
                format!("bytes {:?}", &b"mid"[..]),
                format!("file 0+{len}"),
                format!("bytes {:?}", &b"end"[..]),
            ]
        );
    }

    #[test]
    fn a_missing_placeholder_is_an_error_and_short_or_simulated_ranges_are_copied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let content = vec![7u8; COPIED_BELOW_BYTES];
        let len = COPIED_BELOW_BYTES as u64;
        let mut ranges = FileRanges::default();
        let _unused = ranges.placeholder(file_slice(dir.path(), &content, 0, len)).expect("sendable");
        assert!(SpliceBuf::new(8, ranges).finish().is_err());
        let mut ranges = FileRanges::default();
        let simulated = ReadSlice { file: None, path: dir.path().join("x"), position: 0, len };
        assert!(ranges.placeholder(simulated).is_none());
        assert!(ranges.placeholder(file_slice(dir.path(), &content, 1, len - 1)).is_none(), "short: copied");
        assert!(ranges.is_empty());
    }
}
