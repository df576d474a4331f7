//! What a follower and leader-epoch fencing need from the log: appending
//! batches copied from a leader as they are, and the leader epoch history
//! (see [`crate::epochs`]). Truncating a diverged tail is in `truncate.rs`.

use std::io::IoSlice;

use kafgres_record::BatchHeader;

use super::append::check_described;
use super::{AppendResult, PartitionLog};
use crate::epochs::LeaderEpochHistory;
use crate::error::LogError;

impl PartitionLog {
    /// Appends batches copied byte for byte from a leader (a follower's
    /// fetch). Their base offsets and partition leader epochs are kept, never
    /// re-stamped; the caller has validated them (CRC included) as for a
    /// produce, and `headers` are what validation returned for `batches`.
    ///
    /// The first batch must start at or after the log end
    /// ([`LogError::BelowLogEnd`] otherwise: the caller truncates, or fetches
    /// from the log end), and each batch at or after the previous one's end
    /// (a compacted leader leaves gaps between batches; a gap is kept). A
    /// segment roll starts the new segment at the first batch. A leader
    /// epoch higher than the latest extends the leader epoch history before
    /// anything is written; one lower is [`LogError::StaleLeaderEpoch`].
    /// Indexes, rolls, the history and the producer state (sequences,
    /// transactions opened and ended by control batches, aborted lists) are
    /// kept by the same code as the leader's [`PartitionLog::append`], so a
    /// follower promoted to leader answers retried batches and
    /// `read_committed` fetches as the old leader did. Nothing is written
    /// when an error is returned before the write.
    pub fn append_replicated(
        &mut self,
        batches: &[u8],
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> Result<AppendResult, LogError> {
        self.refuse_if_failed()?;
        check_described(batches, headers)?;
        let log_end = self.next_offset();
        let mut end = log_end;
        let mut pos = 0usize;
        for (i, h) in headers.iter().enumerate() {
            let size = h.total_bytes();
            // The header must be the one in the bytes: the bytes are written
            // as they are, and the indexes and producer state follow the header.
            let in_bytes = batches.get(pos..pos + size).and_then(|b| BatchHeader::parse(b).ok());
            if in_bytes.is_none_or(|b| b != *h) {
                return Err(LogError::BadAppend(format!("the header of the batch at byte {pos} is not its bytes'")));
            }
            if h.last_offset_delta < 0 || h.base_offset < 0 {
                return Err(LogError::BadAppend(format!(
                    "a batch at offset {} with last offset delta {}",
                    h.base_offset, h.last_offset_delta
                )));
            }
            if h.base_offset < end {
                return Err(match i {
                    0 => LogError::BelowLogEnd { base_offset: h.base_offset, log_end },
                    _ => LogError::BadAppend(format!(
                        "a batch at offset {} does not follow the previous one, which ends at {end}",
                        h.base_offset
                    )),
                });
            }
            end = h.base_offset.checked_add(i64::from(h.last_offset_delta) + 1).ok_or(LogError::OffsetOverflow(end))?;
            pos += size;
        }
        if let Some(first) = headers.first() {
            // One segment holds the append (relative offsets are u32).
            if end - first.base_offset > i64::from(u32::MAX) {
                return Err(LogError::BadAppend(format!(
                    "offsets {} to {end} span more than one segment can index",
                    first.base_offset
                )));
            }
        }
        self.write_batches(batches, headers, &mut [IoSlice::new(batches)], now_ms)
    }

    /// The leader epoch history: which epoch wrote which offsets.
    pub fn leader_epochs(&self) -> &LeaderEpochHistory {
        &self.epochs
    }

    /// The epoch of the latest leader that wrote to this log (`None`: none did).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// The leader epoch that wrote `offset`, for offsets in
    /// `[log start, log end)` (`None` outside, or below the first entry of a
    /// follower whose log starts with a gap).
    pub fn epoch_of(&self, offset: i64) -> Option<i32> {
        if offset < self.log_start_offset || offset >= self.next_offset() {
            return None;
        }
        self.epochs.epoch_of(offset)
    }

    /// OffsetForLeaderEpoch as a leader answers a follower whose latest
    /// epoch is `requested`: `(epoch, end offset)` per
    /// [`LeaderEpochHistory::end_offset_for_epoch`], with this log's end as
    /// the end of the latest epoch. (A consumer's answer is bounded by the
    /// high watermark, which the caller knows and the log does not.)
    pub fn end_offset_for_epoch(&self, requested: i32) -> (i32, i64) {
        self.epochs.end_offset_for_epoch(requested, self.next_offset())
    }
}
