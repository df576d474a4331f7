//! Swapping a cleaned group in (steps 2–5 of the module doc's protocol) and
//! finishing, at open, a swap a crash interrupted after its commit point.

use std::io::ErrorKind;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use super::{segment_names, LogAccess, Plan, SegmentRef, CLEANED_SUFFIX, SWAP_FILE};
use crate::checkpoint::{decode_offsets, encode_offsets, read_whole, write_atomically};
use crate::error::LogError;
use crate::partition::PartitionLog;
use crate::segment::{Segment, LOG_SUFFIX};
use crate::storage::Storage;

const SWAP_KEYS: [&str; 2] = ["base", "end"];

/// Steps 2–4 under the lock. `None`: the group's segments changed meanwhile
/// (retention), the output was dropped. `Some`: the base offsets of the
/// replaced segments other than the first, whose files step 5 unlinks.
pub(super) fn swap_in(
    log: &mut impl LogAccess,
    plan: &Plan,
    group: Range<usize>,
    output: Segment,
) -> Result<Option<Vec<i64>>, LogError> {
    let inputs = &plan.segments[group];
    log.with_log(|l| {
        if l.cleaner.truncations != plan.truncations {
            // The end was cut meanwhile; the group may hold batches past it.
            remove_cleaned(l.storage(), l.dir(), inputs[0].base);
            return Ok(None);
        }
        l.swap_group(inputs, output)
    })
}

impl PartitionLog {
    fn swap_group(&mut self, inputs: &[SegmentRef], mut output: Segment) -> Result<Option<Vec<i64>>, LogError> {
        if let Some(reason) = self.failure() {
            remove_cleaned(self.storage(), self.dir(), inputs[0].base);
            return Err(LogError::Failed { dir: self.dir().to_path_buf(), reason: reason.to_string() });
        }
        let first = inputs[0].base;
        let end = inputs[inputs.len() - 1].next_base;
        let segments = self.segments();
        let at = segments.iter().position(|s| s.base_offset() == first);
        let unchanged = at.is_some_and(|i| {
            segments.len() > i + inputs.len()
                && segments[i + inputs.len()].base_offset() == end
                && inputs
                    .iter()
                    .zip(&segments[i..])
                    .all(|(input, s)| s.base_offset() == input.base && Arc::ptr_eq(&input.file, s.file()))
        });
        let Some(i) = at.filter(|_| unchanged) else {
            remove_cleaned(self.storage(), self.dir(), first);
            return Ok(None);
        };
        let storage = Arc::clone(self.storage());
        let dir = self.dir().to_path_buf();
        self.or_fail("swapping in a compacted segment", |log| {
            write_atomically(
                &storage,
                &dir,
                SWAP_FILE,
                &encode_offsets(&[(SWAP_KEYS[0], first), (SWAP_KEYS[1], end)]),
            )?;
            for name in segment_names(first) {
                let from = dir.join(format!("{name}{CLEANED_SUFFIX}"));
                let to = dir.join(&name);
                storage.rename(&from, &to).map_err(LogError::io(&to))?;
            }
            output.set_final_paths(&dir);
            output.created_ms = inputs[0].created_ms;
            let replaced = log.replace_segments(i..i + inputs.len(), output);
            Ok(Some(replaced.iter().skip(1).map(|s| s.base_offset()).collect()))
        })
    }
}

/// Step 5, without the lock; a failure makes the log refuse writes (its
/// reopening finishes the swap from `cleaner-swap`).
pub(super) fn finish_swap(log: &mut impl LogAccess, plan: &Plan, replaced: &[i64]) -> Result<(), LogError> {
    let result = finish(&plan.storage, &plan.dir, replaced);
    if let Err(e) = &result {
        log.with_log(|l| l.mark_failed("finishing a compaction swap", e));
    }
    result
}

fn finish(storage: &Arc<dyn Storage>, dir: &Path, replaced: &[i64]) -> Result<(), LogError> {
    for &base in replaced {
        for name in segment_names(base) {
            remove_if_present(storage, &dir.join(name))?;
        }
    }
    storage.sync_dir(dir).map_err(LogError::io(dir))?;
    remove_if_present(storage, &dir.join(SWAP_FILE))?;
    storage.sync_dir(dir).map_err(LogError::io(dir))
}

fn remove_if_present(storage: &Arc<dyn Storage>, path: &Path) -> Result<(), LogError> {
    match storage.remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::Io { path: path.to_path_buf(), source: e }),
    }
}

/// Drops a group's output that will not be swapped in (best effort: a
/// leftover is removed at the next open).
pub(super) fn remove_cleaned(storage: &Arc<dyn Storage>, dir: &Path, base: i64) {
    for name in segment_names(base) {
        let path = dir.join(format!("{name}{CLEANED_SUFFIX}"));
        if let Err(e) = storage.remove(&path) {
            if e.kind() != ErrorKind::NotFound {
                log::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// At open, before anything else reads the directory: if `cleaner-swap`
/// exists, a crash came after a swap's commit point. Finish it: rename the
/// group's remaining `.cleaned` files over its first segment's, unlink the
/// segments in `(base, end)`, then remove `cleaner-swap`. Returns the
/// `(base, end)` finished. (`.cleaned` files without it are removed by the
/// directory listing that follows.)
pub(crate) fn finish_interrupted_swap(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<(i64, i64)>, LogError> {
    let path = dir.join(SWAP_FILE);
    let Some(bytes) = read_whole(storage, &path, 4096)? else { return Ok(None) };
    let Some(v) = decode_offsets(&path, &bytes, &SWAP_KEYS) else {
        // Written atomically, so damaged by something else: the old
        // segments are still whole unless renames happened, which only a
        // whole file allows. Keep what is there.
        remove_if_present(storage, &path)?;
        storage.sync_dir(dir).map_err(LogError::io(dir))?;
        return Ok(None);
    };
    let (base, end) = (v[0], v[1]);
    log::warn!("{}: finishing the compaction swap of offsets [{base}, {end}) a crash interrupted", dir.display());
    for name in segment_names(base) {
        let from = dir.join(format!("{name}{CLEANED_SUFFIX}"));
        match storage.rename(&from, &dir.join(&name)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(LogError::Io { path: from, source: e }),
        }
    }
    let names = storage.list_dir(dir).map_err(LogError::io(dir))?;
    let replaced: Vec<i64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(LOG_SUFFIX)?.parse::<i64>().ok())
        .filter(|b| *b > base && *b < end)
        .collect();
    finish(storage, dir, &replaced)?;
    Ok(Some((base, end)))
}
