//! [`replace_file_atomically`] under a power loss after every step it takes,
//! and with each step failing: the file is always the old one or the new one,
//! whole (or absent, if it was absent before), never torn or missing.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::faulty::{Faults, FaultyStorage};
use super::memory::{CrashMode, MemStorage};
use super::{replace_file_atomically, Storage, StorageFile};
use crate::error::LogError;

const DIR: &str = "/partition";
const OLD: &[u8] = b"old contents, synced long ago\n";
const NEW: &[u8] = b"the new contents, longer than the old ones\n";

fn crash_modes() -> Vec<CrashMode> {
    let torn = (0..16).map(|seed| CrashMode::Torn { seed });
    [CrashMode::DropUnsynced, CrashMode::KeepUnsynced].into_iter().chain(torn).collect()
}

/// A storage with a file at `DIR/f` holding `old` durably (none if `None`).
fn storage_with(old: Option<&[u8]>) -> (MemStorage, PathBuf) {
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new(DIR)).expect("a directory in memory");
    let path = Path::new(DIR).join("f");
    if let Some(old) = old {
        mem.write_file(&path, old);
    }
    (mem, path)
}

/// What a power loss in `mode` after `step` left of the watched file.
type Image = (&'static str, CrashMode, Option<Vec<u8>>);

/// Every image of the watched file that a power loss would leave, taken
/// after each call the routine makes, under every crash mode.
#[derive(Debug)]
struct Images {
    mem: MemStorage,
    watched: PathBuf,
    seen: Mutex<Vec<Image>>,
}

impl Images {
    fn power_loss_after(&self, step: &'static str) {
        for mode in crash_modes() {
            let image = self.mem.crash(mode).read_file(&self.watched);
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).push((step, mode, image));
        }
    }
}

/// MemStorage, losing power (in every way) after each operation.
#[derive(Debug)]
struct CrashAfterEachStep(Arc<Images>);

#[derive(Debug)]
struct CrashFile {
    inner: Arc<dyn StorageFile>,
    images: Arc<Images>,
}

impl StorageFile for CrashFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.inner.read_at(buf, position)
    }
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<usize> {
        let n = self.inner.write_at(buf, position)?;
        self.images.power_loss_after("write");
        Ok(n)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)?;
        self.images.power_loss_after("truncate");
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()?;
        self.images.power_loss_after("fdatasync");
        Ok(())
    }
}

impl Storage for CrashAfterEachStep {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.0.mem.create_dir_all(dir)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inner = self.0.mem.open(path, create)?;
        self.0.power_loss_after("open");
        Ok(Arc::new(CrashFile { inner, images: Arc::clone(&self.0) }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.mem.rename(from, to)?;
        self.0.power_loss_after("rename");
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.mem.remove(path)?;
        self.0.power_loss_after("remove");
        Ok(())
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.mem.list_dir(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.0.mem.sync_dir(dir)?;
        self.0.power_loss_after("directory fsync");
        Ok(())
    }
}

#[test]
fn a_power_loss_after_any_step_leaves_the_old_file_or_the_new_one() {
    for old in [Some(OLD), None] {
        let (mem, path) = storage_with(old);
        // A leftover of an earlier attempt, longer than the new contents.
        mem.write_file(&Path::new(DIR).join("f.tmp"), &[0xAA; 200]);
        let images = Arc::new(Images { mem: mem.clone(), watched: path.clone(), seen: Mutex::new(Vec::new()) });
        replace_file_atomically(&CrashAfterEachStep(Arc::clone(&images)), &path, NEW).expect("no fault injected");
        let seen = images.seen.lock().unwrap_or_else(|p| p.into_inner());
        let steps: Vec<&str> = seen.iter().map(|s| s.0).filter(|s| *s != "write").collect();
        assert!(steps.contains(&"rename") && steps.contains(&"fdatasync"), "every step was crashed after: {steps:?}");
        for (step, mode, image) in seen.iter() {
            assert!(
                image.as_deref() == old || image.as_deref() == Some(NEW),
                "after {step} ({mode:?}) the file is {image:?}, neither the old one nor the new one"
            );
            let durable_swap = *step == "directory fsync";
            if *mode == CrashMode::DropUnsynced {
                let expected = if durable_swap { Some(NEW) } else { old };
                assert_eq!(image.as_deref(), expected, "after {step}, only what was synced survives");
            }
        }
        assert_eq!(mem.read_file(&path).as_deref(), Some(NEW));
    }
}

/// The steps that can fail, each armed on fresh faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failing {
    Write,
    TornWrite,
    DataSync,
    Rename,
    DirectorySync,
}

impl Failing {
    const ALL: [Failing; 5] =
        [Failing::Write, Failing::TornWrite, Failing::DataSync, Failing::Rename, Failing::DirectorySync];

    fn arm(self, faults: &Faults) {
        match self {
            Failing::Write => faults.fail_write(1),
            Failing::TornWrite => faults.tear_write(1, NEW.len() / 2),
            // Syncs count fdatasync and directory fsync alike: the file's comes first.
            Failing::DataSync => faults.fail_sync(1, false),
            Failing::Rename => faults.fail_namespace_op(1),
            Failing::DirectorySync => faults.fail_sync(2, false),
        }
    }

    /// The file the error must name.
    fn failed_path(self) -> PathBuf {
        match self {
            Failing::Write | Failing::TornWrite | Failing::DataSync => Path::new(DIR).join("f.tmp"),
            Failing::Rename => Path::new(DIR).join("f"),
            Failing::DirectorySync => PathBuf::from(DIR),
        }
    }
}

#[test]
fn a_failing_step_leaves_the_old_file_or_the_new_one_and_a_retry_finishes() {
    for old in [Some(OLD), None] {
        for failing in Failing::ALL {
            let (mem, path) = storage_with(old);
            mem.write_file(&Path::new(DIR).join("f.tmp"), &[0xAA; 200]);
            let faulty = FaultyStorage::new(Arc::new(mem.clone()));
            failing.arm(&faulty.faults());
            match replace_file_atomically(&faulty, &path, NEW) {
                Err(LogError::Io { path: named, .. }) => assert_eq!(named, failing.failed_path(), "{failing:?}"),
                other => panic!("{failing:?}: expected an I/O error, got {other:?}"),
            }
            // Only a failed directory fsync comes after the rename.
            let live = if failing == Failing::DirectorySync { Some(NEW) } else { old };
            assert_eq!(mem.read_file(&path).as_deref(), live, "{failing:?}: what readers see");
            for mode in crash_modes() {
                let image = mem.crash(mode).read_file(&path);
                let expected = match mode {
                    CrashMode::KeepUnsynced => live,
                    // Nothing of the new file was made durable under its name.
                    CrashMode::DropUnsynced | CrashMode::Torn { .. } => old,
                };
                assert_eq!(image.as_deref(), expected, "{failing:?}, then a power loss ({mode:?})");
            }
            faulty.faults().clear();
            replace_file_atomically(&faulty, &path, NEW).expect("the retry meets no fault");
            assert_eq!(mem.crash(CrashMode::DropUnsynced).read_file(&path).as_deref(), Some(NEW), "{failing:?}");
        }
    }
}

#[test]
fn short_writes_still_write_the_whole_file() {
    let (mem, path) = storage_with(Some(OLD));
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    faulty.faults().short_writes(Some(3));
    replace_file_atomically(&faulty, &path, NEW).expect("short writes are retried");
    assert_eq!(mem.crash(CrashMode::DropUnsynced).read_file(&path).as_deref(), Some(NEW));
}
