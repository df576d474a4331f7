//! Sparse per-segment indexes, kept in memory and written to files when the
//! segment is flushed with its indexes (Kafka's layouts, big-endian, no
//! header):
//!
//! ```text
//! <base>.index      8-byte entries:  relative offset u32 | position u32
//! <base>.timeindex 12-byte entries:  timestamp i64      | relative offset u32
//! ```
//!
//! An offset entry maps the base offset of a batch (relative to the
//! segment's base offset) to the byte where the batch starts. (Kafka
//! indexes a batch's last offset; the base offset lets a lookup land on the
//! batch holding the offset without reading the previous one.) A time entry
//! says: the largest timestamp in the segment up to this point is
//! `timestamp`, first reached in the batch starting at `relative offset`.
//! Entries are added every `index.interval.bytes` of batches, and a final
//! time entry when the segment is rolled or checkpointed, so that the last
//! time entry of a flushed segment is its largest timestamp.
//!
//! The files are not checksummed (as in Kafka): they are flushed with their
//! segment at roll and at checkpoints, checked for shape when loaded, and
//! rebuilt by scanning the segment when anything is off (see
//! [`crate::recovery`]). Entries live in memory as a `Vec` (8 or 12 bytes
//! each, about 0.5% of the segment at the default interval); files are never
//! memory-mapped, so a damaged file cannot fault the process.
//!
//! **Write-behind, no descriptor held.** While the log is open the entries
//! in memory are the index; a file receives the entries added since its last
//! write only at [`IndexFile::sync`] (a roll, a checkpoint, a clean close,
//! a recovery), opened for that and closed again. That is exactly what the
//! recovery protocol trusts: index entries below the recovery point, which
//! those same moments write (see [`crate::recovery`]); entries added after
//! it were only ever in the page cache and are rebuilt by the scan after a
//! crash either way. So a partition holds one open file (its segments'
//! `.log`s) instead of three per segment, and 10,000 partitions fit under a
//! 20,000-descriptor limit (with three each they ran out: "Too many open
//! files" at about 6,600, `scripts/bench/scale_bench.py`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_record::BATCH_HEADER_BYTES;

use crate::error::LogError;
use crate::storage::{Storage, StorageFile};

/// An entry's fixed-size encoding.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const BYTES: usize;
    fn encode(&self) -> Vec<u8>;
    fn decode(bytes: &[u8]) -> Self;
    /// Whether `self` may follow `prev` in a well-formed index.
    fn may_follow(&self, prev: &Self) -> bool;
    fn relative_offset(&self) -> u32;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp_ms: i64,
    pub relative_offset: u32,
}

impl IndexEntry for OffsetEntry {
    const BYTES: usize = 8;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
        out
    }
    fn decode(b: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
    fn may_follow(&self, prev: &Self) -> bool {
        self.relative_offset > prev.relative_offset && self.position > prev.position
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

impl IndexEntry for TimeEntry {
    const BYTES: usize = 12;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12);
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out
    }
    fn decode(b: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[..8]);
        TimeEntry {
            timestamp_ms: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
    fn may_follow(&self, prev: &Self) -> bool {
        self.timestamp_ms > prev.timestamp_ms && self.relative_offset >= prev.relative_offset
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

/// An index file and its entries in memory (the file written behind, see
/// the module documentation).
#[derive(Debug)]
pub struct IndexFile<E> {
    path: PathBuf,
    storage: Arc<dyn Storage>,
    entries: Vec<E>,
    /// The file's first `in_file` entries are `entries[..in_file]`; what it
    /// holds after them is stale until the next [`Self::sync`] rewrites it.
    in_file: usize,
}

/// Why a loaded index file is not trusted.
pub type IndexDefect = String;

impl<E: IndexEntry> IndexFile<E> {
    /// Creates the file if it is missing (a segment's files exist from its
    /// start), without reading it or keeping it open.
    pub(crate) fn open(storage: &Arc<dyn Storage>, path: &Path) -> Result<Self, LogError> {
        storage.open(path, true).map_err(LogError::io(path))?;
        Ok(IndexFile { path: path.to_path_buf(), storage: Arc::clone(storage), entries: Vec::new(), in_file: 0 })
    }

    /// The file, opened for one operation.
    fn file(&self) -> Result<Arc<dyn StorageFile>, LogError> {
        self.storage.open(&self.path, true).map_err(LogError::io(&self.path))
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn last(&self) -> Option<&E> {
        self.entries.last()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file was renamed (the handle is unchanged).
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Reads the whole file and checks it: whole entries only, each one may
    /// follow the previous, and `in_bounds` holds for every entry. On a
    /// defect, nothing is kept and the reason is returned.
    pub(crate) fn load(&mut self, in_bounds: impl Fn(&E) -> bool) -> Result<Result<(), IndexDefect>, LogError> {
        self.entries.clear();
        self.in_file = 0;
        let Some(bytes) = self.read_all(&*self.file()?)? else {
            return Ok(Err("larger than any index of a segment could be".to_string()));
        };
        if bytes.len() % E::BYTES != 0 {
            return Ok(Err(format!("{} bytes is not a whole number of {}-byte entries", bytes.len(), E::BYTES)));
        }
        let mut entries: Vec<E> = Vec::with_capacity(bytes.len() / E::BYTES);
        for (i, chunk) in bytes.chunks_exact(E::BYTES).enumerate() {
            let e = E::decode(chunk);
            if entries.last().is_some_and(|prev| !e.may_follow(prev)) {
                return Ok(Err(format!("entry {i} ({e:?}) does not follow {:?}", entries[i - 1])));
            }
            if !in_bounds(&e) {
                return Ok(Err(format!("entry {i} ({e:?}) points past the end of the segment")));
            }
            entries.push(e);
        }
        self.in_file = entries.len();
        self.entries = entries;
        Ok(Ok(()))
    }

    /// Keeps the longest well-formed prefix of the file whose entries satisfy
    /// `keep`, and cuts the file there (for a segment trusted up to a point).
    pub(crate) fn load_prefix(&mut self, keep: impl Fn(&E) -> bool) -> Result<usize, LogError> {
        self.entries.clear();
        self.in_file = 0;
        let file = self.file()?;
        let bytes = self.read_all(&*file)?.unwrap_or_default();
        for chunk in bytes.chunks_exact(E::BYTES) {
            let e = E::decode(chunk);
            if self.entries.last().is_some_and(|prev| !e.may_follow(prev)) || !keep(&e) {
                break;
            }
            self.entries.push(e);
        }
        let kept = self.entries.len();
        if (kept * E::BYTES) as u64 != file.len().map_err(LogError::io(&self.path))? {
            file.set_len((kept * E::BYTES) as u64).map_err(LogError::io(&self.path))?;
        }
        self.in_file = kept;
        Ok(kept)
    }

    /// The file's bytes, or `None` if it is too large to be an index.
    fn read_all(&self, file: &dyn StorageFile) -> Result<Option<Vec<u8>>, LogError> {
        let len = file.len().map_err(LogError::io(&self.path))?;
        // u32 positions bound a segment to 4 GiB and an entry covers at least
        // one batch header: a larger file is garbage, not something to
        // allocate for.
        if len > (u64::from(u32::MAX) / BATCH_HEADER_BYTES as u64 + 1) * E::BYTES as u64 {
            return Ok(None);
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0).map_err(LogError::io(&self.path))?;
        Ok(Some(bytes))
    }

    /// Appends an entry in memory; the file gets it at the next [`Self::sync`].
    pub(crate) fn append(&mut self, entry: E) {
        // Lookups bisect the entries; loading refuses a file where they do
        // not increase, and the segment only adds entries for later batches.
        assert!(
            self.entries.last().is_none_or(|prev| entry.may_follow(prev)),
            "{}: index entry {entry:?} does not follow {:?}",
            self.path.display(),
            self.entries.last()
        );
        self.entries.push(entry);
    }

    /// Drops entries from `len` on, in memory and (if it has them) in the file.
    pub(crate) fn truncate(&mut self, len: usize) -> Result<(), LogError> {
        self.entries.truncate(len);
        if len < self.in_file {
            self.file()?.set_len((len * E::BYTES) as u64).map_err(LogError::io(&self.path))?;
            self.in_file = len;
        }
        Ok(())
    }

    /// Empties the file and forgets its entries (a new segment's files, cut
    /// in case an earlier life of its base offset left some).
    pub(crate) fn clear(&mut self) -> Result<(), LogError> {
        self.entries.clear();
        self.file()?.set_len(0).map_err(LogError::io(&self.path))?;
        self.in_file = 0;
        Ok(())
    }

    /// Writes the entries the file lacks, cuts what it holds past them, and
    /// makes it durable (fdatasync).
    pub(crate) fn sync(&mut self) -> Result<(), LogError> {
        let file = self.file()?;
        let pending: Vec<u8> = self.entries[self.in_file..].iter().flat_map(|e| e.encode()).collect();
        if !pending.is_empty() {
            file.write_all_at(&pending, (self.in_file * E::BYTES) as u64).map_err(LogError::io(&self.path))?;
        }
        let len = (self.entries.len() * E::BYTES) as u64;
        if file.len().map_err(LogError::io(&self.path))? != len {
            file.set_len(len).map_err(LogError::io(&self.path))?;
        }
        file.sync_data().map_err(LogError::io(&self.path))?;
        self.in_file = self.entries.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::memory::MemStorage;

    #[test]
    fn entries_round_trip_and_defects_are_named() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        storage.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/0.index");
        let mut index = IndexFile::<OffsetEntry>::open(&storage, path).unwrap();
        index.append(OffsetEntry { relative_offset: 0, position: 0 });
        index.append(OffsetEntry { relative_offset: 5, position: 4096 });
        index.sync().unwrap();
        let mut again = IndexFile::<OffsetEntry>::open(&storage, path).unwrap();
        assert_eq!(again.load(|_| true).unwrap(), Ok(()));
        assert_eq!(again.entries(), index.entries());
        assert!(again.load(|e| e.position < 4096).unwrap().unwrap_err().contains("past the end"));
        let file = storage.open(path, false).unwrap();
        file.write_all_at(&[0, 0, 0, 1, 0, 0, 0, 1], 16).unwrap();
        assert!(again.load(|_| true).unwrap().unwrap_err().contains("does not follow"));
        file.set_len(20).unwrap();
        assert!(again.load(|_| true).unwrap().unwrap_err().contains("whole number"));
        assert_eq!(again.load_prefix(|e| e.position < 100).unwrap(), 1);
        assert_eq!(file.len().unwrap(), 8, "the untrusted rest of the file is cut");
    }

    #[test]
    #[should_panic(expected = "does not follow")]
    fn appending_an_entry_that_does_not_increase_is_a_bug() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        storage.create_dir_all(Path::new("/d")).unwrap();
        let mut index = IndexFile::<TimeEntry>::open(&storage, Path::new("/d/0.timeindex")).unwrap();
        index.append(TimeEntry { timestamp_ms: 10, relative_offset: 3 });
        index.append(TimeEntry { timestamp_ms: 10, relative_offset: 4 });
    }

    #[test]
    fn the_file_gets_the_entries_at_sync_and_loses_what_a_truncation_drops() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        storage.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/0.index");
        let file_len = || storage.open(path, false).unwrap().len().unwrap();
        // Leftovers of an earlier file: rewritten from the start at the first sync.
        storage.open(path, true).unwrap().write_all_at(&[9; 40], 0).unwrap();
        let mut index = IndexFile::<OffsetEntry>::open(&storage, path).unwrap();
        let entry = |i: u32| OffsetEntry { relative_offset: i * 10, position: i * 4096 };
        for i in 0..3 {
            index.append(entry(i));
        }
        assert_eq!(file_len(), 40, "appends stay in memory");
        index.sync().unwrap();
        assert_eq!(file_len(), 24, "a sync writes every entry and cuts the stale rest");
        index.append(entry(3));
        index.truncate(2).unwrap();
        assert_eq!(file_len(), 16, "a truncation below what the file holds cuts the file at once");
        index.append(entry(5));
        index.sync().unwrap();
        let mut again = IndexFile::<OffsetEntry>::open(&storage, path).unwrap();
        assert_eq!(again.load(|_| true).unwrap(), Ok(()));
        assert_eq!(again.entries(), [entry(0), entry(1), entry(5)]);
        again.clear().unwrap();
        assert_eq!((file_len(), again.entries().len()), (0, 0));
    }
}
