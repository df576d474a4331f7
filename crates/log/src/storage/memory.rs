//! Files in memory with a model of what a power loss keeps.
//!
//! Each file (inode) holds two images: `written`, what processes read back,
//! and `durable`, what the disk holds after the last `sync_data`. The
//! namespace is kept twice as well: `names` (what `list_dir` shows) and
//! `durable_names` (what the directory holds on disk after the last
//! `sync_dir`). [`MemStorage::crash`] returns a new storage built from the
//! durable images only (optionally with some unsynced bytes surviving, the
//! way a real disk may have written back part of the page cache), which a
//! test then reopens the log on. Handles of the old storage keep working on
//! the old images, so a test can drop the pre-crash log whenever it likes.
//!
//! Simplification, documented: directories are durable as soon as they are
//! created (the log never relies on creating directories durably; the
//! broker does that with the real file system).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Storage, StorageFile};

#[derive(Debug, Default)]
struct InodeData {
    written: Vec<u8>,
    durable: Vec<u8>,
    /// The lowest byte that may differ between `written` and `durable`
    /// (`usize::MAX` when both agree), so a sync copies only the dirty tail.
    dirty_from: usize,
}

#[derive(Debug, Default)]
struct Inode(Mutex<InodeData>);

impl Inode {
    fn lock(&self) -> MutexGuard<'_, InodeData> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug, Default)]
struct MemState {
    dirs: BTreeSet<PathBuf>,
    names: BTreeMap<PathBuf, Arc<Inode>>,
    durable_names: BTreeMap<PathBuf, Arc<Inode>>,
}

/// An in-memory file system; clones share the same files.
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    state: Arc<Mutex<MemState>>,
    bytes_read: Arc<AtomicU64>,
}

/// What survives a simulated power loss besides the synced bytes and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only what was synced survives (the strictest case).
    DropUnsynced,
    /// Everything written survives (a process kill: the page cache is kept).
    KeepUnsynced,
    /// Per file, chosen by the seed: nothing unsynced, all of it, a prefix of
    /// it, or the new length with zeros instead of data (the size reached the
    /// disk, the data did not). Names still need `sync_dir`.
    Torn { seed: u64 },
}

impl MemStorage {
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new storage holding what a power loss (or kill) would have left.
    pub fn crash(&self, mode: CrashMode) -> MemStorage {
        let state = self.lock();
        let mut rng = SplitMix(match mode {
            CrashMode::Torn { seed } => seed,
            _ => 0,
        });
        let names = match mode {
            CrashMode::KeepUnsynced => &state.names,
            _ => &state.durable_names,
        };
        let mut copies: HashMap<*const Inode, Arc<Inode>> = HashMap::new();
        let mut new_names = BTreeMap::new();
        for (path, inode) in names {
            let copy = copies.entry(Arc::as_ptr(inode)).or_insert_with(|| {
                let data = inode.lock();
                let image = match mode {
                    CrashMode::DropUnsynced => data.durable.clone(),
                    CrashMode::KeepUnsynced => data.written.clone(),
                    CrashMode::Torn { .. } => torn_image(&data, &mut rng),
                };
                Arc::new(Inode(Mutex::new(InodeData {
                    written: image.clone(),
                    durable: image,
                    dirty_from: usize::MAX,
                })))
            });
            new_names.insert(path.clone(), Arc::clone(copy));
        }
        MemStorage {
            state: Arc::new(Mutex::new(MemState {
                dirs: state.dirs.clone(),
                durable_names: new_names.clone(),
                names: new_names,
            })),
            bytes_read: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The written contents of a file, if it exists.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        self.lock().names.get(path).map(|i| i.lock().written.clone())
    }

    /// Replaces a file's contents, durably (tests craft crash images with it).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) {
        let mut state = self.lock();
        let inode = Arc::new(Inode(Mutex::new(InodeData {
            written: bytes.to_vec(),
            durable: bytes.to_vec(),
            dirty_from: usize::MAX,
        })));
        state.names.insert(path.to_path_buf(), Arc::clone(&inode));
        state.durable_names.insert(path.to_path_buf(), inode);
    }

    /// Removes a file, durably.
    pub fn delete_file(&self, path: &Path) {
        let mut state = self.lock();
        state.names.remove(path);
        state.durable_names.remove(path);
    }

    /// Bytes read through all handles so far (recovery tests check that a
    /// clean open reads no segment data).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }
}

fn torn_image(data: &InodeData, rng: &mut SplitMix) -> Vec<u8> {
    if data.dirty_from == usize::MAX {
        return data.durable.clone();
    }
    let stable = data.dirty_from.min(data.durable.len()).min(data.written.len());
    match rng.next_u64() % 4 {
        0 => data.durable.clone(),
        1 => data.written.clone(),
        2 => {
            let cut = stable + (rng.next_u64() as usize) % (data.written.len() - stable + 1);
            data.written[..cut].to_vec()
        }
        _ => {
            let mut image = data.durable[..stable].to_vec();
            image.resize(data.written.len(), 0);
            image
        }
    }
}

/// A small deterministic generator (SplitMix64), so crash images are
/// reproducible from a seed without a dependency.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[derive(Debug)]
struct MemFile {
    inode: Arc<Inode>,
    bytes_read: Arc<AtomicU64>,
}

impl StorageFile for MemFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        let data = self.inode.lock();
        let start = usize::try_from(position).unwrap_or(usize::MAX).min(data.written.len());
        let n = buf.len().min(data.written.len() - start);
        buf[..n].copy_from_slice(&data.written[start..start + n]);
        self.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<usize> {
        let mut data = self.inode.lock();
        let start = usize::try_from(position).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let end = start + buf.len();
        if data.written.len() < end {
            let old = data.written.len();
            data.dirty_from = data.dirty_from.min(old);
            data.written.resize(end, 0);
        }
        data.written[start..end].copy_from_slice(buf);
        data.dirty_from = data.dirty_from.min(start);
        Ok(buf.len())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.inode.lock().written.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut data = self.inode.lock();
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let from = len.min(data.written.len());
        data.dirty_from = data.dirty_from.min(from);
        data.written.resize(len, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut data = self.inode.lock();
        if data.dirty_from != usize::MAX {
            let keep = data.dirty_from.min(data.written.len()).min(data.durable.len());
            let InodeData { written, durable, .. } = &mut *data;
            durable.truncate(keep);
            durable.extend_from_slice(&written[keep..]);
            data.dirty_from = usize::MAX;
        }
        Ok(())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} does not exist", path.display()))
}

impl Storage for MemStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut state = self.lock();
        let inode = match state.names.get(path) {
            Some(inode) => Arc::clone(inode),
            None if create => {
                if !path.parent().is_some_and(|p| state.dirs.contains(p)) {
                    return Err(not_found(path.parent().unwrap_or(path)));
                }
                let inode = Arc::new(Inode(Mutex::new(InodeData { dirty_from: usize::MAX, ..InodeData::default() })));
                state.names.insert(path.to_path_buf(), Arc::clone(&inode));
                inode
            }
            None => return Err(not_found(path)),
        };
        Ok(Arc::new(MemFile { inode, bytes_read: Arc::clone(&self.bytes_read) }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let inode = state.names.remove(from).ok_or_else(|| not_found(from))?;
        state.names.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        // Only the name goes; handles keep the inode alive, as on Linux.
        self.lock().names.remove(path).map(|_| ()).ok_or_else(|| not_found(path))
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(state
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let MemState { names, durable_names, .. } = &mut *state;
        durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, inode) in names.iter().filter(|(p, _)| p.parent() == Some(dir)) {
            durable_names.insert(p.clone(), Arc::clone(inode));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_power_loss_keeps_only_synced_bytes_and_names() {
        let fs = MemStorage::new();
        let dir = Path::new("/p");
        fs.create_dir_all(dir).unwrap();
        let f = fs.open(&dir.join("a"), true).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        assert!(fs.crash(CrashMode::DropUnsynced).list_dir(dir).unwrap().is_empty(), "name not synced");
        fs.sync_dir(dir).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(b" world", 5).unwrap();
        let after = fs.crash(CrashMode::DropUnsynced);
        assert_eq!(after.read_file(&dir.join("a")).unwrap(), b"hello");
        assert_eq!(fs.crash(CrashMode::KeepUnsynced).read_file(&dir.join("a")).unwrap(), b"hello world");
        f.set_len(2).unwrap();
        f.sync_data().unwrap();
        assert_eq!(fs.crash(CrashMode::DropUnsynced).read_file(&dir.join("a")).unwrap(), b"he");
    }

    #[test]
    fn removed_files_stay_readable_through_open_handles() {
        let fs = MemStorage::new();
        let dir = Path::new("/p");
        fs.create_dir_all(dir).unwrap();
        let f = fs.open(&dir.join("a"), true).unwrap();
        f.write_all_at(b"data", 0).unwrap();
        fs.remove(&dir.join("a")).unwrap();
        let mut buf = [0u8; 4];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"data");
        assert!(fs.open(&dir.join("a"), false).is_err());
    }

    #[test]
    fn an_unsynced_rename_is_undone_by_a_power_loss() {
        let fs = MemStorage::new();
        let dir = Path::new("/p");
        fs.create_dir_all(dir).unwrap();
        fs.write_file(&dir.join("old"), b"1");
        let f = fs.open(&dir.join("tmp"), true).unwrap();
        f.write_all_at(b"2", 0).unwrap();
        f.sync_data().unwrap();
        fs.rename(&dir.join("tmp"), &dir.join("old")).unwrap();
        assert_eq!(fs.crash(CrashMode::DropUnsynced).read_file(&dir.join("old")).unwrap(), b"1");
        fs.sync_dir(dir).unwrap();
        assert_eq!(fs.crash(CrashMode::DropUnsynced).read_file(&dir.join("old")).unwrap(), b"2");
    }
}
