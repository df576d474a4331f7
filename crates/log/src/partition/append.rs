//! Appends: the leader's (offsets and leader epoch assigned here), its
//! transaction markers, and the one routine through which they and a
//! follower's [`PartitionLog::append_replicated`] write, so that both keep
//! the segments, indexes, rolls, leader epoch history and producer state the
//! same way.

use std::io::IoSlice;

use kafgres_record::control::{encode_marker_batch, marker_of, Marker, MARKER_PEEK_BYTES};
use kafgres_record::{
    set_base_offset, set_partition_leader_epoch, BatchHeader, BATCH_HEADER_BYTES, BATCH_STAMPED_HEAD_BYTES,
};

use super::{AppendResult, PartitionLog, SEGMENT_BYTES_LIMIT};
use crate::epochs::EpochStep;
use crate::error::LogError;
use crate::producer::{SequenceCheck, TxnEnd};

impl PartitionLog {
    /// Appends validated batches, assigning consecutive offsets: each batch
    /// is written with its base offset and `leader_epoch` stamped into its
    /// first [`BATCH_STAMPED_HEAD_BYTES`] and the rest taken from `batches` as they
    /// are (one `pwritev`; the records are not copied). `headers` are the
    /// batches' parsed headers in order, as validation returned them. If a
    /// write fails, what reached the files is cut again before returning.
    ///
    /// A `leader_epoch` higher than the partition's latest starts a new
    /// entry of the leader epoch history, stored before any byte is written;
    /// a lower (or negative) one is refused with
    /// [`LogError::StaleLeaderEpoch`] and nothing is written.
    pub fn append(
        &mut self,
        batches: &[u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendResult, LogError> {
        self.refuse_if_failed()?;
        check_described(batches, headers)?;
        let mut offset = self.next_offset();
        let mut pos = 0usize;
        let mut stored = Vec::with_capacity(headers.len());
        let mut heads = Vec::with_capacity(headers.len());
        for h in headers {
            let size = h.total_bytes();
            let batch =
                batches.get(pos..pos + size).filter(|b| b.len() >= BATCH_STAMPED_HEAD_BYTES).ok_or_else(|| {
                    LogError::BadAppend(format!("a {size}-byte batch at byte {pos} of a {}-byte append", batches.len()))
                })?;
            let mut head = [0u8; BATCH_STAMPED_HEAD_BYTES];
            head.copy_from_slice(&batch[..BATCH_STAMPED_HEAD_BYTES]);
            set_base_offset(&mut head, offset);
            set_partition_leader_epoch(&mut head, leader_epoch);
            heads.push(head);
            let mut h = *h;
            h.base_offset = offset;
            h.partition_leader_epoch = leader_epoch;
            offset = h.next_offset();
            if offset < 0 {
                return Err(LogError::OffsetOverflow(offset));
            }
            stored.push(h);
            pos += size;
        }
        let mut slices = Vec::with_capacity(2 * headers.len());
        let mut rel = 0usize;
        for (head, h) in heads.iter().zip(&stored) {
            slices.push(IoSlice::new(head));
            slices.push(IoSlice::new(&batches[rel + BATCH_STAMPED_HEAD_BYTES..rel + h.total_bytes()]));
            rel += h.total_bytes();
        }
        self.write_batches(batches, &stored, &mut slices, now_ms)
    }

    /// Appends a transaction marker for `producer_id` (its commit or abort in
    /// this partition) and ends the producer's open transaction here. A
    /// marker from an epoch older than the producer's is refused with
    /// [`SequenceCheck::InvalidEpoch`] in the result's `Err` side.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        end: TxnEnd,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Result<AppendResult, SequenceCheck>, LogError> {
        let marker = match end {
            TxnEnd::Commit => Marker::Commit,
            TxnEnd::Abort => Marker::Abort,
        };
        let batch = encode_marker_batch(producer_id, producer_epoch, marker, coordinator_epoch, now_ms);
        let header = BatchHeader::parse(&batch).map_err(|e| LogError::Failed {
            dir: self.dir.clone(),
            reason: format!("encoding a transaction marker: {e}"),
        })?;
        let check = self.producers.check_sequence(&header);
        if check != SequenceCheck::Ok {
            return Ok(Err(check));
        }
        // The write below ends the transaction from the marker's own bytes,
        // as opening does when it reads the marker back.
        Ok(Ok(self.append(&batch, &[header], leader_epoch, now_ms)?))
    }

    /// Writes batches whose offsets and leader epochs are final: `stored`
    /// are their headers as they will be on disk, `slices` their bytes (the
    /// heads possibly stamped, the rest from `batches`). Rolls first if
    /// needed, stores a leader epoch history that grew before writing, then
    /// writes, indexes, and updates the producer state from the headers
    /// (and, for a control batch, its marker), as recovery would rebuild it.
    pub(super) fn write_batches(
        &mut self,
        batches: &[u8],
        stored: &[BatchHeader],
        slices: &mut [IoSlice<'_>],
        now_ms: i64,
    ) -> Result<AppendResult, LogError> {
        self.clock_ms = self.clock_ms.max(now_ms);
        let (Some(first), Some(last)) = (stored.first(), stored.last()) else {
            let end = self.end_position();
            return Ok(AppendResult { base_offset: end.offset, last_offset: end.offset - 1, end });
        };
        let grown = self.grown_epochs(stored)?;
        self.maybe_roll(batches.len() as u64, first.base_offset, last.next_offset(), now_ms)?;
        if let Some(epochs) = grown {
            // Before the bytes: a batch on disk always has its epoch in the
            // stored history. After a failure the file may hold the new entry
            // or not; only reopening (which drops entries at or past the log
            // end) says which, so the log refuses writes until then.
            self.or_fail("storing the leader epoch history", |log| epochs.store(&log.storage, &log.dir))?;
            self.epochs = epochs;
        }
        let interval = self.config.index_interval_bytes;
        let (ahead, limit) = (self.config.reserve_ahead_bytes, self.config.segment_bytes_max.min(SEGMENT_BYTES_LIMIT));
        let active = self.active_mut();
        active.reserve_ahead(batches.len() as u64, ahead, limit);
        let mark = active.mark();
        let start = active.size_bytes;
        // The bytes first, all of them; then the batches are noted (in memory
        // only, so a failure is the write's, before anything was noted).
        if let Err(e) = active.write_slices_at_end(slices) {
            if let Err(undo) = active.roll_back(mark) {
                self.failed = Some(format!("cutting a failed append: {undo}"));
            }
            return Err(e);
        }
        let mut rel = 0u64;
        for h in stored {
            active.note_batch(h, start + rel, interval);
            rel += h.total_bytes() as u64;
        }
        // Each batch starts at or after the previous one's end: what the
        // producer state, the high watermark and the caller's answer assume.
        assert_eq!(
            active.next_offset,
            last.next_offset(),
            "{}: the segment ends where the append's offsets end",
            active.path.display()
        );
        active.start_writeback_if_due();
        let mut rel = 0usize;
        for h in stored {
            let body =
                rel + BATCH_HEADER_BYTES..(rel + h.total_bytes()).min(rel + BATCH_HEADER_BYTES + MARKER_PEEK_BYTES);
            match batches.get(body).and_then(|body| marker_of(h, body)) {
                Some(Marker::Commit) => self.producers.record_marker(h, TxnEnd::Commit, now_ms),
                Some(Marker::Abort) => self.producers.record_marker(h, TxnEnd::Abort, now_ms),
                None => self.producers.record_at(h, now_ms),
            }
            rel += h.total_bytes();
        }
        Ok(AppendResult { base_offset: first.base_offset, last_offset: last.last_offset(), end: self.end_position() })
    }

    /// The leader epoch history with the epochs `stored` start, if any does;
    /// an epoch going back is refused. (The usual append carries the latest
    /// epoch and costs one comparison per batch.)
    fn grown_epochs(&self, stored: &[BatchHeader]) -> Result<Option<crate::epochs::LeaderEpochHistory>, LogError> {
        let latest = self.epochs.latest_epoch();
        if stored.iter().all(|h| Some(h.partition_leader_epoch) == latest) {
            return Ok(None);
        }
        let mut epochs = self.epochs.clone();
        for h in stored {
            match epochs.step(h.partition_leader_epoch, h.base_offset) {
                EpochStep::Same => {}
                EpochStep::New(entry) => epochs.push(entry),
                EpochStep::Refused { latest } => {
                    return Err(LogError::StaleLeaderEpoch {
                        epoch: h.partition_leader_epoch,
                        latest,
                        offset: h.base_offset,
                    })
                }
            }
        }
        Ok(Some(epochs))
    }

    /// Rolls before an append of `incoming_bytes` covering offsets
    /// `[first_offset, end_offset)` if the active segment is full, old, or
    /// could not hold those offsets relative to its base; the new segment
    /// starts at `first_offset`.
    fn maybe_roll(
        &mut self,
        incoming_bytes: u64,
        first_offset: i64,
        end_offset: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let active = self.active();
        let offsets_overflow = !active.fits_relative(end_offset);
        if active.size_bytes == 0 && !offsets_overflow {
            return Ok(());
        }
        let full = active.size_bytes + incoming_bytes > self.config.segment_bytes_max.min(SEGMENT_BYTES_LIMIT);
        let old = now_ms - active.created_ms >= self.config.segment_age_ms_max;
        if full || old || offsets_overflow {
            self.roll_at(first_offset, now_ms)?;
        }
        Ok(())
    }
}

/// Refuses an append larger than a segment, or whose headers do not
/// describe exactly its bytes (they would be acknowledged and never written,
/// or written without being indexed).
pub(super) fn check_described(batches: &[u8], headers: &[BatchHeader]) -> Result<(), LogError> {
    let total = batches.len() as u64;
    if total > SEGMENT_BYTES_LIMIT {
        return Err(LogError::BatchTooLarge { bytes: total, bytes_max: SEGMENT_BYTES_LIMIT });
    }
    let described: usize = headers.iter().map(BatchHeader::total_bytes).sum();
    if described != batches.len() {
        return Err(LogError::BadAppend(format!(
            "the headers describe {described} bytes of a {}-byte append",
            batches.len()
        )));
    }
    Ok(())
}
