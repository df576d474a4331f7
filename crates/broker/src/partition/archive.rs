//! A partition's side of segment archiving (`crate::archive`): which closed
//! segments are not archived yet, the checkpoint that says how far archiving
//! got, and the hold it puts on retention.

use std::path::Path;
use std::sync::atomic::Ordering;

use kafgres_log::segment::{index_file_name, segment_file_name, time_index_file_name};

use super::Partition;
use crate::archive::ClosedSegment;
use crate::topics::PARTITION_METADATA_FILE;

/// The partition's archiving checkpoint: the base offset of the first
/// segment not archived yet, as text. Missing: nothing archived.
pub const ARCHIVE_CHECKPOINT_FILE: &str = "archived-offset-checkpoint";

/// Reads the checkpoint of the partition in `dir`; -1 when there is none (or
/// it cannot be read: archiving then starts again from the oldest segment,
/// which an archive command must accept, as PostgreSQL's must).
pub(super) fn read_checkpoint(dir: &Path) -> i64 {
    std::fs::read_to_string(dir.join(ARCHIVE_CHECKPOINT_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(-1)
}

impl Partition {
    /// The closed segments archiving has not covered, oldest first; none
    /// while archiving is off. While nothing of the partition is archived
    /// yet, the first carries the partition's `partition.metadata` (its topic
    /// id) before its own files, so an archive restored past the base backup
    /// (PITR) holds what the broker needs to load the partition, archived
    /// once, as part of a segment the checkpoint then covers.
    pub fn unarchived_segments(&self) -> Vec<ClosedSegment> {
        if !self.housekeeping.archive().enabled() {
            return Vec::new();
        }
        let from = self.archived_before.load(Ordering::Acquire);
        let log = self.lock_log();
        let segments = log.segments();
        let dir = log.dir();
        segments
            .windows(2)
            .filter(|w| w[0].base_offset() >= from)
            .enumerate()
            .map(|(i, w)| {
                let base = w[0].base_offset();
                let metadata = (i == 0 && from < 0).then_some(PARTITION_METADATA_FILE.to_string());
                ClosedSegment {
                    base_offset: base,
                    next_base_offset: w[1].base_offset(),
                    files: metadata
                        .into_iter()
                        .chain([segment_file_name(base), index_file_name(base), time_index_file_name(base)])
                        .map(|name| dir.join(name))
                        .filter(|path| path.exists())
                        .collect(),
                }
            })
            .collect()
    }

    /// Records that every segment below `next_base_offset` is archived:
    /// the checkpoint file first (written whole, then renamed), then memory.
    pub fn mark_archived(&self, next_base_offset: i64) -> std::io::Result<()> {
        let dir = self.lock_log().dir().to_path_buf();
        let tmp = dir.join(format!("{ARCHIVE_CHECKPOINT_FILE}.tmp"));
        std::fs::write(&tmp, format!("{next_base_offset}\n"))?;
        std::fs::File::open(&tmp)?.sync_data()?;
        std::fs::rename(&tmp, dir.join(ARCHIVE_CHECKPOINT_FILE))?;
        self.archived_before.fetch_max(next_base_offset, Ordering::AcqRel);
        Ok(())
    }

    /// Segments starting at or past this offset are kept (retention and
    /// DeleteRecords leave their files) until archived; `i64::MAX` while
    /// archiving is off.
    pub fn archive_hold(&self) -> i64 {
        if self.housekeeping.archive().enabled() {
            self.archived_before.load(Ordering::Acquire)
        } else {
            i64::MAX
        }
    }

    /// Lets retention look again (a segment was archived).
    pub fn wake_housekeeping(&self) {
        self.housekeeping.wake();
    }
}
