//! The file-system port: every byte the log reads or writes goes through
//! [`Storage`] and [`StorageFile`].
//!
//! Three implementations:
//! - [`FileStorage`]: the real one, `std::fs` plus positional I/O (`pread`,
//!   `pwrite`, `fdatasync`);
//! - [`memory::MemStorage`]: files in memory that remember, besides what was
//!   written, what was made durable (by `sync_data` for contents and
//!   `sync_dir` for names), so a test can simulate a power loss and reopen
//!   the log on exactly what a disk would have kept;
//! - [`faulty::FaultyStorage`]: wraps another storage and fails the Nth write
//!   or sync, tears writes or shortens them.
//!
//! The log holds an `Arc<dyn Storage>` and `Arc<dyn StorageFile>` handles,
//! not a generic parameter: handles escape the log (a fetch reads a
//! [`crate::ReadSlice`] outside the log lock, the broker's flusher fdatasyncs
//! outside it), and a type parameter would leak into every broker type that
//! holds a log. One virtual call per syscall costs nothing next to the
//! syscall.
//!
//! Semantics every implementation keeps (the log relies on them):
//! - removing or renaming a file never invalidates open handles: a reader
//!   holding a segment keeps reading it after retention unlinked it (Linux
//!   keeps an unlinked inode alive until its last descriptor closes);
//! - a new name (create, rename, remove) is durable only after `sync_dir` of
//!   its directory; file contents only after `sync_data` of the file.
//!
//! Small files that must never be seen half written (checkpoints, producer
//! snapshots, the broker's owner and partition metadata files) are written
//! by one routine on top of the port, [`replace_file_atomically`], so every
//! implementation models it step by step: the memory image's power loss keeps
//! the old file or the new one, and the faulty storage can fail each step.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::error::LogError;

pub mod faulty;
pub mod memory;
#[cfg(test)]
mod tests;

/// An open file, read and written at explicit positions.
#[allow(clippy::len_without_is_empty)] // a file's length is a number to use, not a test
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// Reads at `position`; returns fewer bytes than asked only at end of file.
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize>;
    /// Writes at `position` (page cache only); may write fewer bytes than given.
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<usize>;
    fn len(&self) -> io::Result<u64>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the contents durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Starts writing the dirty pages of `[position, position + len)` to
    /// disk without waiting for them (Linux `sync_file_range` with
    /// `SYNC_FILE_RANGE_WRITE`). Makes nothing durable: that is `sync_data`'s
    /// job. The default (simulated files) does nothing.
    fn start_writeback(&self, _position: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Allocates the file's blocks for `[position, position + len)` ahead
    /// of the writes that will fill them, without changing its length
    /// (Linux `fallocate` with `FALLOC_FL_KEEP_SIZE`: the blocks are
    /// allocated unwritten and read as zeros until written). Makes nothing
    /// durable and is never needed for correctness; a file system without
    /// it answers `Unsupported`. The default (simulated files) does nothing.
    fn reserve(&self, _position: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Writes `bufs` one after the other at `position` (page cache only);
    /// may write fewer bytes than given. The default writes the first
    /// non-empty slice alone, which is correct for any file; the real file
    /// overrides it with one `pwritev`.
    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], position: u64) -> io::Result<usize> {
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(first) => self.write_at(first, position),
            None => Ok(0),
        }
    }
    /// The OS file behind this handle, for zero-copy sends (sendfile); `None`
    /// for simulated files, whose callers fall back to copying.
    fn as_std_file(&self) -> Option<&File> {
        None
    }

    fn read_exact_at(&self, mut buf: &mut [u8], mut position: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, position) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file")),
                Ok(n) => {
                    buf = &mut buf[n..];
                    position += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// [`Self::write_vectored_at`] until every slice is written.
    fn write_all_vectored_at(&self, mut bufs: &mut [IoSlice<'_>], mut position: u64) -> io::Result<()> {
        IoSlice::advance_slices(&mut bufs, 0);
        while !bufs.is_empty() {
            match self.write_vectored_at(bufs, position) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the file accepted no bytes")),
                Ok(n) => {
                    IoSlice::advance_slices(&mut bufs, n);
                    position += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut position: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, position) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the file accepted no bytes")),
                Ok(n) => {
                    buf = &buf[n..];
                    position += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A directory tree of files (the partition directories).
pub trait Storage: Send + Sync + fmt::Debug {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Opens a file for reading and writing; with `create`, a missing file is
    /// created empty, otherwise it is `NotFound`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// Replaces `to` atomically (POSIX rename).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// The names of the files in `dir` (not sorted).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes creations, renames and removals in `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStorage;

impl FileStorage {
    pub fn shared() -> Arc<dyn Storage> {
        Arc::new(FileStorage)
    }
}

/// Linux's limit on the slices of one `pwritev` (UIO_MAXIOV).
const IOV_MAX: usize = 1024;

#[derive(Debug)]
struct RealFile(File);

impl StorageFile for RealFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.0.read_at(buf, position)
    }
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<usize> {
        self.0.write_at(buf, position)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn start_writeback(&self, position: u64, len: u64) -> io::Result<()> {
        let (Ok(offset), Ok(nbytes)) = (libc::off64_t::try_from(position), libc::off64_t::try_from(len)) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "writeback range beyond off64_t"));
        };
        // SAFETY: a plain syscall on this file's open descriptor.
        let rc = unsafe { libc::sync_file_range(self.0.as_raw_fd(), offset, nbytes, libc::SYNC_FILE_RANGE_WRITE) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    fn reserve(&self, position: u64, len: u64) -> io::Result<()> {
        let (Ok(offset), Ok(length)) = (libc::off_t::try_from(position), libc::off_t::try_from(len)) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "reserved range beyond off_t"));
        };
        // SAFETY: a plain syscall on this file's open descriptor.
        let rc = unsafe { libc::fallocate(self.0.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, length) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], position: u64) -> io::Result<usize> {
        // pwritev takes at most IOV_MAX slices; the rest go in the next call.
        let count = bufs.len().min(IOV_MAX) as libc::c_int;
        let offset = libc::off_t::try_from(position)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "write position beyond off_t"))?;
        // SAFETY: IoSlice is ABI-compatible with struct iovec on Unix (std
        // guarantees it), `count` slices are valid for reading for the call,
        // and the descriptor is this file's, open for writing.
        let written = unsafe { libc::pwritev(self.0.as_raw_fd(), bufs.as_ptr().cast::<libc::iovec>(), count, offset) };
        usize::try_from(written).map_err(|_| io::Error::last_os_error())
    }
    fn as_std_file(&self) -> Option<&File> {
        Some(&self.0)
    }
}

impl Storage for FileStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).write(true).create(create).truncate(false).open(path)?;
        Ok(Arc::new(RealFile(file)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // fsync, not fdatasync: a directory's entries are its data and its
        // metadata alike, and some file systems only honour fsync here.
        File::open(dir)?.sync_all()
    }
}

/// Suffix of the file [`replace_file_atomically`] writes before renaming it
/// into place; one left behind is a replacement a crash interrupted, and
/// carries nothing the old file does not (the log removes them at open).
pub const TMP_SUFFIX: &str = ".tmp";

/// Replaces the file at `path` with `bytes` so that a crash at any moment
/// leaves either the old file or the new one, whole (or no file, if there was
/// none before):
/// 1. write `<name>.tmp` (created, or truncated if an earlier attempt left it);
/// 2. fdatasync it;
/// 3. rename it over `<name>`;
/// 4. fsync the directory.
///
/// Each step runs only after the one before succeeded. Until step 3 the old
/// file is untouched; the rename swaps in a file whose bytes are already
/// durable; step 4 makes the swap itself durable (before it, a power loss
/// brings the old file back). The error names the file of the step that
/// failed; after it, `path` is still the old file (steps 1–3) or already the
/// new one (step 4), and a `.tmp` may be left behind.
pub fn replace_file_atomically(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        let source = io::Error::new(io::ErrorKind::InvalidInput, "not a path to a file in a directory");
        return Err(LogError::Io { path: path.to_path_buf(), source });
    };
    // `Path::new("f").parent()` is the empty path, which names no directory to fsync.
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let mut tmp_name = name.to_os_string();
    tmp_name.push(TMP_SUFFIX);
    let tmp = path.with_file_name(tmp_name);
    let file = storage.open(&tmp, true).map_err(LogError::io(&tmp))?;
    file.set_len(0).map_err(LogError::io(&tmp))?;
    file.write_all_at(bytes, 0).map_err(LogError::io(&tmp))?;
    file.sync_data().map_err(LogError::io(&tmp))?;
    storage.rename(&tmp, path).map_err(LogError::io(path))?;
    storage.sync_dir(dir).map_err(LogError::io(dir))
}

/// An injected or simulated I/O error, reported like a disk error (EIO).
pub(crate) fn eio(what: &str) -> io::Error {
    io::Error::other(format!("EIO: {what}"))
}
