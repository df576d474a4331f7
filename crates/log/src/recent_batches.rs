//! Where the newest batches of the active segment start, kept in memory.
//!
//! The offset index is sparse (one entry per `index.interval.bytes`), so a
//! lookup reads batch headers forward from the entry before the wanted
//! offset: with small batches that is dozens of `pread`s per fetch, under the
//! partition lock an append waits for. A consumer that keeps up fetches at
//! the log end, which is always among the batches appended since the last
//! index entry, so remembering exactly those makes its lookup a bisection in
//! memory. The list is bounded by [`RECENT_BATCHES_MAX`] whatever the index
//! interval; a lookup it cannot answer falls back to the index walk.
//!
//! It holds nothing the files do not: it is rebuilt by appends only, and
//! anything that rewrites a segment's tail (a rolled-back append, a reset
//! before recovery scans) cuts or clears it. A segment that takes no more
//! appends frees it.

/// The most batches remembered per segment; the older half is dropped when
/// full, so the newest are always kept (tail fetches need those).
pub const RECENT_BATCHES_MAX: usize = 256;

/// A batch's offsets and where it starts in the segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RecentBatch {
    base_offset: i64,
    last_offset: i64,
    position: u64,
}

/// Consecutive batches at the end of a segment, in file order, with no
/// batch of the file between two of them.
#[derive(Debug, Default)]
pub(crate) struct RecentBatches {
    batches: Vec<RecentBatch>,
}

impl RecentBatches {
    /// Records the batch written at `position`, which must directly follow
    /// the last one recorded (appends do).
    pub(crate) fn push(&mut self, base_offset: i64, last_offset: i64, position: u64) {
        // Lookups bisect the list by offset and truncate it by position.
        assert!(
            self.batches.last().is_none_or(|b| position > b.position && base_offset > b.last_offset),
            "batch at byte {position}, offset {base_offset}, does not follow {:?}",
            self.batches.last()
        );
        if self.batches.len() >= RECENT_BATCHES_MAX {
            self.batches.drain(..RECENT_BATCHES_MAX / 2);
        }
        self.batches.push(RecentBatch { base_offset, last_offset, position });
    }

    pub(crate) fn clear(&mut self) {
        self.batches.clear();
    }

    /// Frees the list of a segment that takes no more appends (rolled, or
    /// written by the cleaner): a partition keeps many closed segments, and
    /// their lookups walk the index like any lookup before the tail.
    pub(crate) fn release(&mut self) {
        self.batches = Vec::new();
    }

    /// Forgets the batches at or after byte `size` (their bytes were cut).
    pub(crate) fn truncate_to(&mut self, size: u64) {
        let keep = self.batches.partition_point(|b| b.position < size);
        self.batches.truncate(keep);
    }

    /// The position of the first remembered batch whose last offset is at or
    /// past `offset` — the batch holding it, or the next one after a gap in
    /// offsets (a compacted segment) — if the list covers `offset`: `None`
    /// when `offset` is before the first remembered batch or after the last.
    pub(crate) fn position_of(&self, offset: i64) -> Option<u64> {
        let first = self.batches.first()?;
        if offset < first.base_offset {
            return None;
        }
        let i = self.batches.partition_point(|b| b.last_offset < offset);
        self.batches.get(i).map(|b| b.position)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.batches.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches of 3 offsets and 100 bytes each, from offset `base` at byte `at`.
    fn filled(count: usize, base: i64, at: u64) -> RecentBatches {
        let mut recent = RecentBatches::default();
        for i in 0..count {
            recent.push(base + 3 * i as i64, base + 3 * i as i64 + 2, at + 100 * i as u64);
        }
        recent
    }

    #[test]
    fn finds_the_batch_holding_an_offset() {
        let recent = filled(4, 10, 500);
        assert_eq!(recent.position_of(10), Some(500));
        assert_eq!(recent.position_of(12), Some(500));
        assert_eq!(recent.position_of(13), Some(600));
        assert_eq!(recent.position_of(21), Some(800));
        // Before the first and past the last: not covered.
        assert_eq!(recent.position_of(9), None);
        assert_eq!(recent.position_of(22), None);
        assert_eq!(RecentBatches::default().position_of(0), None);
    }

    #[test]
    fn an_offset_in_a_gap_finds_the_next_batch() {
        let mut recent = RecentBatches::default();
        recent.push(0, 1, 0);
        recent.push(5, 6, 100); // offsets 2..=4 were compacted away
        assert_eq!(recent.position_of(3), Some(100));
    }

    #[test]
    fn stays_bounded_and_keeps_the_newest() {
        let count = RECENT_BATCHES_MAX * 3 + 7;
        let recent = filled(count, 0, 0);
        assert!(recent.len() <= RECENT_BATCHES_MAX);
        let last = count as i64 - 1;
        assert_eq!(recent.position_of(3 * last), Some(100 * last as u64));
        assert_eq!(recent.position_of(0), None, "the oldest were dropped");
    }

    #[test]
    fn truncation_forgets_cut_batches() {
        let mut recent = filled(4, 0, 0);
        recent.truncate_to(200);
        assert_eq!(recent.len(), 2);
        assert_eq!(recent.position_of(5), Some(100));
        assert_eq!(recent.position_of(6), None);
        recent.clear();
        assert_eq!(recent.position_of(0), None);
    }

    #[test]
    #[should_panic(expected = "does not follow")]
    fn a_batch_that_does_not_follow_the_last_one_is_a_bug() {
        let mut recent = filled(2, 0, 0);
        recent.push(4, 6, 150);
    }

    #[test]
    fn release_frees_the_memory() {
        let mut recent = filled(RECENT_BATCHES_MAX, 0, 0);
        recent.release();
        assert_eq!((recent.position_of(0), recent.batches.capacity()), (None, 0));
    }
}
