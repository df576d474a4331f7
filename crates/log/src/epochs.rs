//! The leader epoch history of a partition (Kafka's leader-epoch cache):
//! which leader epoch wrote which offsets, so that a follower can ask a new
//! leader where its own latest epoch ends (OffsetForLeaderEpoch) and cut what
//! it holds past that point instead of keeping records the leader never had.
//!
//! The history is an ordered list of `(epoch, start offset)`, both strictly
//! increasing: epoch `E` wrote the offsets from its start up to the next
//! entry's start (the last one up to the log end). A batch's
//! `partitionLeaderEpoch` says the epoch that wrote it; an append whose epoch
//! is higher than the latest adds `(epoch, base offset of its first batch of
//! that epoch)`, one lower is refused (a deposed leader, or a follower fed
//! batches out of order, must not write under an old epoch).
//!
//! The history follows the log: a truncation of the end drops the entries
//! starting at or after the new end; a move of the log start drops the entries
//! wholly below it and starts the one covering it there; opening drops the
//! entries starting past the log end (they describe batches recovery cut).
//! An entry may start exactly at the log end: an epoch that began and wrote
//! nothing yet (its first append failed or a crash took its batch, or
//! DeleteRecords emptied the log), like the entry Kafka adds when a leader
//! is elected; the next higher epoch at that offset replaces it.
//!
//! File: `leader-epoch-checkpoint`, the checkpoint text layout of
//! [`crate::checkpoint`]:
//!
//! ```text
//! kafgres-checkpoint 1
//! epoch <E> start <S>        one line per entry, ascending
//! crc32c <8 hex digits>
//! ```
//!
//! written by `replace_file_atomically` before the first batch of a new
//! epoch is written, so the file on disk always holds an entry for every
//! epoch in the log (the file changes once per epoch, plus after truncations
//! and moves of the log start). Missing or damaged (layout, CRC, entries not
//! increasing), it is rebuilt at open from the batch headers of the segments
//! (headers only, never record data); otherwise it is trusted, and the
//! headers recovery walks after the last producer snapshot add any newer
//! epoch they carry.

use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::{decode_lines, encode_lines, read_whole, write_atomically};
use crate::error::LogError;
use crate::storage::Storage;

pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`: the answer for an
/// epoch the history cannot place.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
/// A bound on the file read at open (about 30 bytes per entry: a partition
/// would need some 100,000 leader changes still in its retained log to reach
/// it). A larger file reads as damaged and is rebuilt from the headers.
const EPOCH_FILE_BYTES_MAX: u64 = 4 << 20;

/// One leader epoch and the first offset it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The ordered `(epoch, start offset)` list; see the module doc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochHistory {
    entries: Vec<EpochEntry>,
}

/// What a batch of `epoch` at `base_offset` does to the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpochStep {
    /// Same epoch as the latest: nothing to record.
    Same,
    /// A new, higher epoch starting at the batch.
    New(EpochEntry),
    /// Lower than the latest, negative, or at an offset below the latest
    /// entry's start: refused.
    Refused { latest: i32 },
}

impl LeaderEpochHistory {
    /// Builds a history from entries, or `None` if they are not strictly
    /// increasing in both fields or an epoch or offset is negative.
    pub(crate) fn from_entries(entries: Vec<EpochEntry>) -> Option<LeaderEpochHistory> {
        let increasing = entries.windows(2).all(|w| w[1].epoch > w[0].epoch && w[1].start_offset > w[0].start_offset);
        let non_negative = entries.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0);
        (increasing && non_negative).then_some(LeaderEpochHistory { entries })
    }

    /// Oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.latest().map(|e| e.epoch)
    }

    /// The epoch that wrote `offset`: the entry with the largest start at or
    /// below it (`None` below the first entry). The history does not know
    /// the log end; [`crate::PartitionLog::epoch_of`] bounds the offset by it.
    pub fn epoch_of(&self, offset: i64) -> Option<i32> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// OffsetForLeaderEpoch, Kafka's `LeaderEpochFileCache.endOffsetFor`:
    /// `(epoch, end offset)` for a follower whose latest epoch is `requested`.
    ///
    /// - `requested` is the latest epoch: `(latest, log_end)`;
    /// - `requested` is -1, or later than every epoch (or the history is
    ///   empty): `(-1, -1)`;
    /// - otherwise the end is the start of the first entry with a higher
    ///   epoch, and the epoch is the largest one at or below `requested`, or
    ///   `requested` itself when it is below the first entry.
    pub fn end_offset_for_epoch(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        let epoch = higher.checked_sub(1).map_or(requested, |floor| self.entries[floor].epoch);
        (epoch, next.start_offset)
    }

    /// What a batch of `epoch` starting at `base_offset` would do (see
    /// [`EpochStep`]); nothing changes until [`Self::push`].
    pub(crate) fn step(&self, epoch: i32, base_offset: i64) -> EpochStep {
        match self.latest() {
            _ if epoch < 0 => EpochStep::Refused { latest: self.latest_epoch().unwrap_or(UNDEFINED_EPOCH) },
            None => EpochStep::New(EpochEntry { epoch, start_offset: base_offset }),
            Some(latest) if epoch == latest.epoch => EpochStep::Same,
            Some(latest) if epoch > latest.epoch && base_offset >= latest.start_offset => {
                EpochStep::New(EpochEntry { epoch, start_offset: base_offset })
            }
            Some(latest) => EpochStep::Refused { latest: latest.epoch },
        }
    }

    /// Adds an entry [`Self::step`] returned as new. A latest entry at the
    /// same start offset wrote nothing (its append failed after the entry
    /// was stored) and is replaced, as Kafka's cache replaces it.
    pub(crate) fn push(&mut self, entry: EpochEntry) {
        if self.latest().is_some_and(|l| l.start_offset == entry.start_offset && l.epoch < entry.epoch) {
            self.entries.pop();
        }
        // Lookups bisect the entries by both fields.
        assert!(
            self.latest().is_none_or(|l| entry.epoch > l.epoch && entry.start_offset > l.start_offset),
            "epoch entry {entry:?} does not follow {:?}",
            self.latest()
        );
        self.entries.push(entry);
    }

    /// Records a batch read back from the log (recovery, rebuild): a higher
    /// epoch at or after the latest entry's start is added; the same epoch,
    /// or a batch before the latest entry (the walk started earlier than
    /// the history's end), changes nothing; a lower epoch after the latest
    /// entry's start contradicts the history and is only logged.
    pub(crate) fn observe(&mut self, epoch: i32, base_offset: i64) {
        if self.latest().is_some_and(|l| base_offset < l.start_offset) {
            return;
        }
        match self.step(epoch, base_offset) {
            EpochStep::New(entry) => self.push(entry),
            EpochStep::Same => {}
            EpochStep::Refused { latest } => {
                log::warn!(
                    "a batch at offset {base_offset} has leader epoch {epoch}, below the latest {latest}; ignored"
                )
            }
        }
    }

    /// Drops the entries starting at or after `end` (the log was cut
    /// there). Returns whether anything changed.
    pub(crate) fn truncate_from_end(&mut self, end: i64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Drops the entries wholly below `start` and makes the one covering it
    /// start there (the log start moved). Returns whether anything changed.
    pub(crate) fn truncate_from_start(&mut self, start: i64) -> bool {
        let covering = self.entries.partition_point(|e| e.start_offset <= start);
        let Some(last_below) = covering.checked_sub(1) else { return false };
        if self.entries[last_below].start_offset == start && last_below == 0 {
            return false;
        }
        let epoch = self.entries[last_below].epoch;
        self.entries.drain(..=last_below);
        self.entries.insert(0, EpochEntry { epoch, start_offset: start });
        true
    }

    fn encode(&self) -> Vec<u8> {
        let lines: Vec<String> =
            self.entries.iter().map(|e| format!("epoch {} start {}", e.epoch, e.start_offset)).collect();
        encode_lines(&lines)
    }

    fn decode(bytes: &[u8]) -> Option<LeaderEpochHistory> {
        let entries = decode_lines(bytes)?
            .into_iter()
            .map(|line| {
                let mut words = line.split(' ');
                let entry = match (words.next(), words.next(), words.next(), words.next()) {
                    (Some("epoch"), Some(epoch), Some("start"), Some(start)) => {
                        EpochEntry { epoch: epoch.parse().ok()?, start_offset: start.parse().ok()? }
                    }
                    _ => return None,
                };
                words.next().is_none().then_some(entry)
            })
            .collect::<Option<Vec<_>>>()?;
        LeaderEpochHistory::from_entries(entries)
    }

    /// Replaces the file with this history (atomically).
    pub(crate) fn store(&self, storage: &Arc<dyn Storage>, dir: &Path) -> Result<(), LogError> {
        write_atomically(storage, dir, LEADER_EPOCH_FILE, &self.encode())
    }

    /// The stored history: `Ok(None)` when the file is missing or damaged
    /// (warned), which the caller answers by rebuilding from the headers.
    pub(crate) fn load(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<LeaderEpochHistory>, LogError> {
        let path = dir.join(LEADER_EPOCH_FILE);
        let Some(bytes) = read_whole(storage, &path, EPOCH_FILE_BYTES_MAX)? else { return Ok(None) };
        let history = LeaderEpochHistory::decode(&bytes);
        if history.is_none() {
            log::warn!("{} is damaged (bad layout, CRC or order); rebuilding it from the log", path.display());
        }
        Ok(history)
    }
}

#[cfg(test)]
mod tests;
