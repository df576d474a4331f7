//! A storage wrapper that injects faults: fail the Nth write, sync or
//! namespace change (rename, remove), tear the Nth write (write part of it,
//! then fail), or shorten every write.
//!
//! Writes are counted across all files opened through the wrapper (each
//! `write_at` call is one write); syncs count both `sync_data` and
//! `sync_dir`. "Nth" counts from the moment the fault is armed, the next
//! operation being the first. An injected failure is reported as an EIO-like
//! error and has no effect on the inner storage (a failed sync syncs
//! nothing), except a torn write, which does write its prefix.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{eio, Storage, StorageFile};

#[derive(Debug, Default, Clone)]
struct Plan {
    writes: u64,
    syncs: u64,
    fail_write_at: Option<u64>,
    tear_write_at: Option<(u64, usize)>,
    fail_sync_at: Option<u64>,
    renames_and_removes: u64,
    fail_namespace_op_at: Option<u64>,
    /// Once a sync failed, fail every later one too (a disk that went bad).
    sticky_sync_failure: bool,
    sync_failed: bool,
    write_bytes_max: Option<usize>,
    /// Every `start_writeback` asked for: (position, length).
    writebacks: Vec<(u64, u64)>,
    /// Every `reserve` asked for: (position, length).
    reservations: Vec<(u64, u64)>,
    /// `reserve` fails (as a file system without `fallocate` would).
    refuse_reservations: bool,
}

/// The fault plan shared by a [`FaultyStorage`] and its files.
#[derive(Debug, Default)]
pub struct Faults(Mutex<Plan>);

impl Faults {
    fn lock(&self) -> MutexGuard<'_, Plan> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `nth` write from now fails without writing anything.
    pub fn fail_write(&self, nth: u64) {
        let mut p = self.lock();
        p.fail_write_at = Some(p.writes + nth);
    }

    /// The `nth` write from now writes its first `keep_bytes` bytes, then fails.
    pub fn tear_write(&self, nth: u64, keep_bytes: usize) {
        let mut p = self.lock();
        p.tear_write_at = Some((p.writes + nth, keep_bytes));
    }

    /// The `nth` sync from now fails; with `sticky`, so does every later one.
    pub fn fail_sync(&self, nth: u64, sticky: bool) {
        let mut p = self.lock();
        p.fail_sync_at = Some(p.syncs + nth);
        p.sticky_sync_failure = sticky;
    }

    /// The `nth` rename or remove from now fails without effect.
    pub fn fail_namespace_op(&self, nth: u64) {
        let mut p = self.lock();
        p.fail_namespace_op_at = Some(p.renames_and_removes + nth);
    }

    /// Renames and removes seen so far.
    pub fn namespace_ops(&self) -> u64 {
        self.lock().renames_and_removes
    }

    fn on_namespace_op(&self) -> io::Result<()> {
        let mut p = self.lock();
        p.renames_and_removes += 1;
        if p.fail_namespace_op_at == Some(p.renames_and_removes) {
            return Err(eio("injected rename/remove failure"));
        }
        Ok(())
    }

    /// Every write accepts at most `bytes_max` bytes (callers must loop).
    pub fn short_writes(&self, bytes_max: Option<usize>) {
        self.lock().write_bytes_max = bytes_max;
    }

    /// The writeback ranges asked for so far, in order.
    pub fn writebacks(&self) -> Vec<(u64, u64)> {
        self.lock().writebacks.clone()
    }

    /// The block reservations asked for so far, in order.
    pub fn reservations(&self) -> Vec<(u64, u64)> {
        self.lock().reservations.clone()
    }

    /// Every `reserve` from now fails with `Unsupported`.
    pub fn refuse_reservations(&self) {
        self.lock().refuse_reservations = true;
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        let mut p = self.lock();
        *p = Plan { writes: p.writes, syncs: p.syncs, renames_and_removes: p.renames_and_removes, ..Plan::default() };
    }

    /// `(writes, syncs)` seen so far.
    pub fn counts(&self) -> (u64, u64) {
        let p = self.lock();
        (p.writes, p.syncs)
    }

    fn on_sync(&self) -> io::Result<()> {
        let mut p = self.lock();
        p.syncs += 1;
        if p.fail_sync_at == Some(p.syncs) || (p.sync_failed && p.sticky_sync_failure) {
            p.sync_failed = true;
            return Err(eio("injected sync failure"));
        }
        Ok(())
    }
}

/// Wraps a storage; see the module doc.
#[derive(Debug, Clone)]
pub struct FaultyStorage {
    inner: Arc<dyn Storage>,
    faults: Arc<Faults>,
}

impl FaultyStorage {
    pub fn new(inner: Arc<dyn Storage>) -> FaultyStorage {
        FaultyStorage { inner, faults: Arc::new(Faults::default()) }
    }

    pub fn faults(&self) -> Arc<Faults> {
        Arc::clone(&self.faults)
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    faults: Arc<Faults>,
}

impl StorageFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.inner.read_at(buf, position)
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<usize> {
        let (fail, tear, limit) = {
            let mut p = self.faults.lock();
            p.writes += 1;
            let n = p.writes;
            (p.fail_write_at == Some(n), p.tear_write_at.filter(|(at, _)| *at == n), p.write_bytes_max)
        };
        if fail {
            return Err(eio("injected write failure"));
        }
        if let Some((_, keep)) = tear {
            self.inner.write_all_at(&buf[..keep.min(buf.len())], position)?;
            return Err(eio("injected torn write"));
        }
        let len = limit.map_or(buf.len(), |l| l.max(1).min(buf.len()));
        self.inner.write_at(&buf[..len], position)
    }

    fn start_writeback(&self, position: u64, len: u64) -> io::Result<()> {
        self.faults.lock().writebacks.push((position, len));
        self.inner.start_writeback(position, len)
    }

    fn reserve(&self, position: u64, len: u64) -> io::Result<()> {
        let mut p = self.faults.lock();
        p.reservations.push((position, len));
        if p.refuse_reservations {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "injected: no fallocate here"));
        }
        drop(p);
        self.inner.reserve(position, len)
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.faults.on_sync()?;
        self.inner.sync_data()
    }
}

impl Storage for FaultyStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open(path, create)?;
        Ok(Arc::new(FaultyFile { inner, faults: Arc::clone(&self.faults) }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.faults.on_namespace_op()?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.faults.on_namespace_op()?;
        self.inner.remove(path)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.faults.on_sync()?;
        self.inner.sync_dir(dir)
    }
}
