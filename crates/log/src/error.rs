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
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}
