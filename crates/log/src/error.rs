//! Errors of the partition log, each carrying the path or offsets involved.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange { requested: i64, log_start: i64, log_end: i64 },
    #[error("segment file name {0} is not a base offset")]
    BadSegmentName(PathBuf),
    #[error("batch offsets overflow i64 at {0}")]
    OffsetOverflow(i64),
    #[error("{bytes} bytes of batches in one append; a segment holds at most {bytes_max}")]
    BatchTooLarge { bytes: u64, bytes_max: u64 },
    /// An earlier write, sync or roll failed in a way that leaves the files
    /// in an unknown state (after a failed fsync the page cache may have
    /// dropped the data). The log refuses writes until it is reopened, which
    /// runs recovery.
    #[error("the log in {dir} refuses writes after an earlier failure: {reason}")]
    Failed { dir: PathBuf, reason: String },
    /// An append whose parsed headers do not describe its bytes (a caller's
    /// bug: validation returns both together); nothing was written.
    #[error("append refused: {0}")]
    BadAppend(String),
    /// A batch whose leader epoch is older than the partition's latest (or
    /// negative): a deposed leader, or a follower fed batches out of order.
    /// Nothing was written.
    #[error("a batch at offset {offset} has leader epoch {epoch}, older than the latest epoch {latest} or negative")]
    StaleLeaderEpoch { epoch: i32, latest: i32, offset: i64 },
    /// A follower's append whose first batch starts below the log end: the
    /// follower must truncate or fetch from the log end. Nothing was written.
    #[error("a replicated batch at offset {base_offset} starts below the log end {log_end}")]
    BelowLogEnd { base_offset: i64, log_end: i64 },
    /// A truncation that would leave the log end below the log start or
    /// below the offset the caller said must be kept. Nothing was changed.
    #[error(
        "truncating to offset {requested} would end the log at {new_end}, below the log start {log_start} or the \
         offset {end_offset_min} that must be kept"
    )]
    TruncationRefused { requested: i64, new_end: i64, log_start: i64, end_offset_min: i64 },
    /// A stored batch that does not parse where recovery kept it (found by
    /// the cleaner, which then leaves the partition as it is).
    #[error("{path}: unreadable batch at byte {position}: {reason}")]
    BadBatch { path: PathBuf, position: u64, reason: String },
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}
