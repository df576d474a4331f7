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
/// segment not archived yet and the timeline it was archived on, as text
/// (`<offset> <timeline>`). Missing: nothing archived.
pub const ARCHIVE_CHECKPOINT_FILE: &str = "archived-offset-checkpoint";

/// Reads the checkpoint of the partition in `dir`; -1 when there is none (or
/// it cannot be read: archiving then starts again from the oldest segment,
/// which an archive command must accept, as PostgreSQL's must), and when it
/// was written on another timeline than `timeline`: a standby promoted (its
/// checkpoint came from the old primary with a base backup) archives every
/// segment it holds, so that its timeline's archive is whole on its own. A
/// checkpoint without a timeline (written before it had one) is taken as is.
pub(super) fn read_checkpoint(dir: &Path, timeline: u32) -> i64 {
    let Ok(text) = std::fs::read_to_string(dir.join(ARCHIVE_CHECKPOINT_FILE)) else {
        return -1;
    };
    let mut fields = text.split_whitespace();
    let Some(Ok(offset)) = fields.next().map(str::parse::<i64>) else {
        return -1;
    };
    match fields.next().map(str::parse::<u32>) {
        None => offset,
        Some(Ok(written_on)) if written_on == timeline => offset,
        Some(_) => -1,
    }
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
        let timeline = self.housekeeping.archive().timeline();
        std::fs::write(&tmp, format!("{next_base_offset} {timeline}\n"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_of_another_timeline_archives_again_from_the_oldest() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_checkpoint(dir.path(), 1), -1, "none yet");
        std::fs::write(dir.path().join(ARCHIVE_CHECKPOINT_FILE), "4096 1\n").expect("write");
        assert_eq!(read_checkpoint(dir.path(), 1), 4096);
        assert_eq!(read_checkpoint(dir.path(), 2), -1, "promoted: a new timeline");
        std::fs::write(dir.path().join(ARCHIVE_CHECKPOINT_FILE), "4096\n").expect("write");
        assert_eq!(read_checkpoint(dir.path(), 2), 4096, "written before checkpoints had a timeline");
        std::fs::write(dir.path().join(ARCHIVE_CHECKPOINT_FILE), "garbage").expect("write");
        assert_eq!(read_checkpoint(dir.path(), 1), -1);
    }
}
