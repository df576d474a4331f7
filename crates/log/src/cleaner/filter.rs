//! The two passes of a round: the offset map over the dirty section, and the
//! filter that decides, batch by batch, what a group's output holds.

use std::borrow::Cow;
use std::collections::HashMap;

use kafgres_record::records::{parse_records, rebuild_batch, records_section};
use kafgres_record::{BatchHeader, DecompressLimit, BATCH_HEADER_BYTES};

use super::{min_option, CleanerConfig, Plan, SegmentRef};
use crate::error::LogError;
use crate::segment::Segment;

/// Bytes a map entry costs besides its key (hash table slot, `Vec` header,
/// offset): what `offset_map_bytes_max` counts along with the keys.
const ENTRY_OVERHEAD_BYTES: u64 = 48;

/// Key → offset of its latest record in the dirty section `[first dirty,
/// end_offset)`. Keys are kept whole (Kafka keeps a 16-byte digest and
/// accepts the collision risk; a whole key cannot collide).
#[derive(Debug)]
pub(super) struct OffsetMap {
    latest: HashMap<Vec<u8>, i64>,
    bytes: u64,
    /// The first segment (index in the plan) the map does not cover.
    pub(super) end_index: usize,
    pub(super) end_offset: i64,
}

impl OffsetMap {
    pub(super) fn build(plan: &Plan, config: &CleanerConfig) -> Result<OffsetMap, LogError> {
        let end_offset = plan.segments.last().map_or(plan.first_dirty_offset, |s| s.next_base);
        let mut map = OffsetMap {
            latest: HashMap::new(),
            bytes: 0,
            end_index: plan.segments.len(),
            end_offset: end_offset.max(plan.first_dirty_offset),
        };
        let limit = DecompressLimit { bytes_max: config.batch_decompressed_bytes_max };
        for (i, segment) in plan.segments.iter().enumerate().skip(plan.dirty_from) {
            // A segment's keys take at most its size (plus the entries):
            // stop before one that might not fit.
            let bound = segment.size_bytes.saturating_mul(2);
            if i > plan.dirty_from && map.bytes.saturating_add(bound) > config.offset_map_bytes_max {
                map.end_index = i;
                map.end_offset = segment.base.max(plan.first_dirty_offset);
                break;
            }
            for_each_batch(segment, |header, batch| {
                if header.is_control() || header.is_transactional() || header.last_offset() < plan.first_dirty_offset {
                    return Ok(());
                }
                let Some(section) = decode(segment, header, batch, limit) else { return Ok(()) };
                let records = match parse_records(header, &section) {
                    Ok(records) => records,
                    Err(e) => {
                        log::warn!("{}: batch {} not compacted: {e}", segment.path.display(), header.base_offset);
                        return Ok(());
                    }
                };
                for r in records {
                    let offset = header.base_offset + i64::from(r.offset_delta);
                    if let (Some(key), true) = (r.key, offset >= plan.first_dirty_offset) {
                        map.insert(key, offset);
                    }
                }
                Ok(())
            })?;
        }
        Ok(map)
    }

    fn insert(&mut self, key: &[u8], offset: i64) {
        match self.latest.get_mut(key) {
            Some(latest) => *latest = (*latest).max(offset),
            None => {
                self.bytes += key.len() as u64 + ENTRY_OVERHEAD_BYTES;
                self.latest.insert(key.to_vec(), offset);
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.latest.len()
    }

    fn latest(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(key).copied()
    }
}

/// What one group's pass found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct GroupStats {
    /// The output differs from the input (a record removed, a horizon set,
    /// or segments merged).
    pub(super) changed: bool,
    pub(super) records_removed: u64,
    pub(super) tombstones_removed: u64,
    /// The earliest delete horizon among the tombstones kept.
    pub(super) horizon_ms: Option<i64>,
}

enum Outcome {
    Keep,
    Drop,
    Rewrite(Vec<u8>),
}

pub(super) struct Filter<'a> {
    pub(super) plan: &'a Plan,
    pub(super) map: &'a OffsetMap,
    pub(super) now_ms: i64,
    pub(super) config: &'a CleanerConfig,
}

impl Filter<'_> {
    /// Filters the batches of `inputs` in order, appending what stays to
    /// `out` (page cache) with its index entries; without `out`, only says
    /// what would change.
    pub(super) fn run(&self, inputs: &[SegmentRef], mut out: Option<&mut Segment>) -> Result<GroupStats, LogError> {
        let mut stats = GroupStats { changed: inputs.len() > 1, ..GroupStats::default() };
        let limit = DecompressLimit { bytes_max: self.config.batch_decompressed_bytes_max };
        for segment in inputs {
            for_each_batch(segment, |header, batch| {
                let rewritten = match self.filter_batch(segment, header, batch, limit, &mut stats) {
                    Outcome::Keep => None,
                    Outcome::Drop => return Ok(()),
                    Outcome::Rewrite(bytes) => Some(bytes),
                };
                let Some(out) = out.as_deref_mut() else { return Ok(()) };
                let bytes = rewritten.as_deref().unwrap_or(batch);
                let new_header = BatchHeader::parse(bytes).map_err(|e| bad_batch(segment, header, e))?;
                // The segments were trusted, not scanned: a base offset (not
                // under the CRC) damaged on disk is found here.
                if !out.may_note(&new_header) {
                    return Err(bad_batch(segment, header, "its offsets do not follow the batches before it"));
                }
                let position = out.size_bytes;
                out.write_at_end(bytes)?;
                out.note_batch(&new_header, position, self.plan.index_interval_bytes);
                Ok(())
            })?;
        }
        Ok(stats)
    }

    fn filter_batch(
        &self,
        segment: &SegmentRef,
        header: &BatchHeader,
        batch: &[u8],
        limit: DecompressLimit,
        stats: &mut GroupStats,
    ) -> Outcome {
        if header.is_control() || header.is_transactional() {
            return Outcome::Keep;
        }
        let Some(section) = decode(segment, header, batch, limit) else { return Outcome::Keep };
        let records = match parse_records(header, &section) {
            Ok(records) => records,
            Err(e) => {
                log::warn!("{}: batch {} kept whole: {e}", segment.path.display(), header.base_offset);
                return Outcome::Keep;
            }
        };
        let horizon = header.delete_horizon_ms();
        let mut kept = Vec::with_capacity(records.len());
        for r in &records {
            let offset = header.base_offset + i64::from(r.offset_delta);
            let latest = r.key.is_none_or(|key| self.map.latest(key).is_none_or(|o| offset >= o));
            let expired = r.is_tombstone() && r.key.is_some() && horizon.is_some_and(|h| self.now_ms >= h);
            if latest && !expired {
                kept.push(*r);
            } else {
                stats.records_removed += 1;
                stats.tombstones_removed += u64::from(r.is_tombstone());
            }
        }
        let keeps_tombstone = kept.iter().any(|r| r.is_tombstone() && r.key.is_some());
        let new_horizon = match (keeps_tombstone, horizon) {
            (true, None) => Some(self.now_ms.saturating_add(self.config.delete_retention_ms)),
            _ => horizon,
        };
        if keeps_tombstone {
            stats.horizon_ms = min_option(stats.horizon_ms, new_horizon);
        }
        let last_of_producer = header.has_producer_id()
            && self.plan.producer_last_offsets.get(&header.producer_id) == Some(&header.last_offset());
        if kept.is_empty() && !last_of_producer {
            stats.changed = true;
            return Outcome::Drop;
        }
        if kept.len() == records.len() && new_horizon == horizon {
            return Outcome::Keep;
        }
        stats.changed = true;
        Outcome::Rewrite(rebuild_batch(header, &kept, new_horizon))
    }
}

/// The records section of a batch, or `None` (with a warning) when it cannot
/// be decompressed under the cap: the caller then leaves the batch whole.
fn decode<'b>(
    segment: &SegmentRef,
    header: &BatchHeader,
    batch: &'b [u8],
    limit: DecompressLimit,
) -> Option<Cow<'b, [u8]>> {
    match records_section(batch, limit) {
        Ok(section) => Some(section),
        Err(e) => {
            log::warn!("{}: batch {} kept whole: {e}", segment.path.display(), header.base_offset);
            None
        }
    }
}

fn bad_batch(segment: &SegmentRef, header: &BatchHeader, e: impl std::fmt::Display) -> LogError {
    LogError::BadBatch { path: segment.path.clone(), position: 0, reason: format!("batch {}: {e}", header.base_offset) }
}

/// Calls `visit(header, whole batch)` for each batch of a closed segment,
/// reading one batch at a time.
fn for_each_batch(
    segment: &SegmentRef,
    mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut position = 0u64;
    let mut head = [0u8; BATCH_HEADER_BYTES];
    let mut buf = Vec::new();
    let io = |e| LogError::Io { path: segment.path.clone(), source: e };
    while position < segment.size_bytes {
        let bad = |reason: String| LogError::BadBatch { path: segment.path.clone(), position, reason };
        if segment.size_bytes - position < BATCH_HEADER_BYTES as u64 {
            return Err(bad("shorter than a batch header".into()));
        }
        segment.file.read_exact_at(&mut head, position).map_err(io)?;
        let header = BatchHeader::parse(&head).map_err(|e| bad(e.to_string()))?;
        let total = header.total_bytes() as u64;
        if total < BATCH_HEADER_BYTES as u64 || total > segment.size_bytes - position {
            return Err(bad(format!("batch length {} runs past the segment", header.batch_length)));
        }
        buf.resize(total as usize, 0);
        segment.file.read_exact_at(&mut buf, position).map_err(io)?;
        visit(&header, &buf)?;
        position += total;
    }
    Ok(())
}
