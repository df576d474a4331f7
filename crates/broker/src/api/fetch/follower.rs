//! Fetch from a follower (a standby's broker): `replica_id` ≥ 0.
//!
//! A follower reads past the high watermark, up to the log end, and its
//! fetch offset in each partition is its acknowledgement: it fetches again
//! only once what it appended is fdatasync'd, so it holds every record below
//! that offset durably. The long poll is woken by appends (not by the high
//! watermark, which under a synchronous policy waits for this very fetch),
//! and by catalog changes: a follower also fetches the catalog version as
//! partition 0 of [`CATALOG_TOPIC_ID`] and re-reads the leader's metadata
//! when the version moved.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafgres_wire::error_code;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};

use super::{FinishOnDrop, FETCH_WAIT_MS_MAX};
use crate::api::handler::Answer;
use crate::partition::{FetchWaiter, Partition};
use crate::replication::{check_leader_epoch, ReplicationState, CATALOG_TOPIC_ID};
use crate::splice::FileRanges;
use crate::topics::Topics;
use kafgres_log::LogError;

struct Wanted {
    topic_index: usize,
    partition: Option<Arc<Partition>>,
    partition_index: i32,
    fetch_offset: i64,
    partition_bytes_max: i32,
    current_leader_epoch: i32,
    /// Set when the follower's log diverged from this one before its fetch
    /// offset: where this leader's history of its last epoch ends.
    diverging: Option<(i32, i64)>,
}

pub(super) async fn handle(
    topics: &Topics,
    replication: &ReplicationState,
    replica_id: i32,
    request: FetchRequest,
) -> Answer<FetchResponse> {
    let name = match request.rack_id.as_str() {
        "" => format!("node{replica_id}"),
        rack => rack.to_owned(),
    };
    let mut response = FetchResponse::default();
    let mut wanted = Vec::new();
    let mut catalog: Option<(usize, i64)> = None;
    for topic in &request.topics {
        let topic_index = response.responses.len();
        let mut out = FetchableTopicResponse::default();
        out.topic_id = topic.topic_id;
        out.topic = topic.topic.clone();
        response.responses.push(out);
        if topic.topic_id == CATALOG_TOPIC_ID {
            catalog = Some((topic_index, topic.partitions.first().map_or(0, |p| p.fetch_offset)));
            continue;
        }
        let found = topics.get_by_id(&topic.topic_id);
        for p in &topic.partitions {
            let partition = found.as_ref().and_then(|t| t.partition(p.partition).cloned());
            let mut diverging = None;
            if let Some(partition) = &partition {
                // The fetch offset acknowledges what lies below it only if the
                // follower's log is this one's up to there: its last epoch
                // must end, in this log's history, at or after that offset.
                // Otherwise it holds records this log does not (a diverged
                // tail), which must never count as copies of ours.
                diverging = diverged(partition, p.fetch_offset, p.last_fetched_epoch);
                if diverging.is_none() && p.fetch_offset <= partition.log_end_offset() {
                    partition.follower_fetched(&name, p.fetch_offset);
                }
            }
            wanted.push(Wanted {
                topic_index,
                partition,
                partition_index: p.partition,
                fetch_offset: p.fetch_offset,
                partition_bytes_max: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                diverging,
            });
        }
    }
    let lag_records: i64 =
        wanted.iter().filter_map(|w| w.partition.as_ref().map(|p| (p.log_end_offset() - w.fetch_offset).max(0))).sum();
    replication.saw_follower(&name, replica_id, lag_records == 0, lag_records);

    let waiter = Arc::new(FetchWaiter::default());
    let _finish = FinishOnDrop(&waiter);
    for w in &wanted {
        if let Some(p) = &w.partition {
            p.register_append_waiter(&waiter);
        }
    }
    topics.register_catalog_waiter(&waiter);
    let wait_ms = request.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let max_bytes = if request.max_bytes <= 0 { i32::MAX as usize } else { request.max_bytes as usize };
    let leader_epoch = replication.leader_epoch();
    let mut ranges = FileRanges::default();
    loop {
        let (partitions, total, any_error) = read_all(&wanted, leader_epoch, max_bytes, &mut ranges);
        let catalog_moved = catalog.is_some_and(|(_, seen)| topics.catalog_version() > seen);
        let timed_out = tokio::time::Instant::now() >= deadline || topics.draining();
        if total > 0 || any_error || catalog_moved || timed_out || wait_ms == 0 {
            for (topic_index, data) in partitions {
                response.responses[topic_index].partitions.push(data);
            }
            if let Some((topic_index, _)) = catalog {
                let mut data = PartitionData::default();
                data.partition_index = 0;
                data.high_watermark = topics.catalog_version();
                data.log_start_offset = 0;
                data.last_stable_offset = data.high_watermark;
                data.records = Some(Bytes::new());
                response.responses[topic_index].partitions.push(data);
            }
            return Answer::Spliced { response, ranges, woken_at: None };
        }
        if tokio::time::timeout_at(deadline, waiter.notified()).await.is_err() {
            continue;
        }
    }
}

/// KIP-595's check of a follower's position: `Some((epoch, end))` when this
/// log's history of `last_fetched_epoch` ends before `fetch_offset` (or
/// names an older epoch): the follower must cut its log there. `(-1, -1)`:
/// this log has no history of that epoch at all (it is newer than all of
/// ours), which the follower must not resolve by cutting.
fn diverged(partition: &Partition, fetch_offset: i64, last_fetched_epoch: i32) -> Option<(i32, i64)> {
    if last_fetched_epoch < 0 || fetch_offset <= 0 {
        return None;
    }
    let (epoch, end) = partition.end_offset_for_epoch(last_fetched_epoch);
    (epoch != last_fetched_epoch || end < fetch_offset).then_some((epoch, end))
}

fn read_all(
    wanted: &[Wanted],
    leader_epoch: i32,
    max_bytes: usize,
    ranges: &mut FileRanges,
) -> (Vec<(usize, PartitionData)>, usize, bool) {
    ranges.clear();
    let mut out = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    let mut any_error = false;
    for w in wanted {
        let mut data = PartitionData::default();
        data.partition_index = w.partition_index;
        data.high_watermark = -1;
        data.last_stable_offset = -1;
        data.log_start_offset = -1;
        data.preferred_read_replica = BrokerId(-1);
        data.records = Some(Bytes::new());
        let Some(p) = &w.partition else {
            // The topic is gone (or its id is one this leader never had):
            // the follower drops its copy when the catalog says so.
            data.error_code = error_code::UNKNOWN_TOPIC_ID;
            any_error = true;
            out.push((w.topic_index, data));
            continue;
        };
        if let Err(code) = check_leader_epoch(w.current_leader_epoch, leader_epoch) {
            data.error_code = code;
            any_error = true;
            out.push((w.topic_index, data));
            continue;
        }
        if let Some((epoch, end)) = w.diverging {
            data.high_watermark = p.high_watermark().offset;
            data.log_start_offset = p.log_start_offset();
            if epoch < 0 {
                // No history of its epoch here: nothing to cut to. The
                // follower asks OffsetForLeaderEpoch, gets the same answer,
                // and stops copying the partition (it says so).
                data.error_code = error_code::OFFSET_OUT_OF_RANGE;
            } else {
                data.diverging_epoch.epoch = epoch;
                data.diverging_epoch.end_offset = end;
            }
            any_error = true;
            out.push((w.topic_index, data));
            continue;
        }
        data.high_watermark = p.high_watermark().offset;
        data.last_stable_offset = p.last_stable_offset();
        data.log_start_offset = p.log_start_offset();
        let budget = (w.partition_bytes_max.max(0) as u64).min(max_bytes.saturating_sub(total) as u64);
        if total > 0 && budget == 0 {
            out.push((w.topic_index, data));
            continue;
        }
        let records =
            p.read_for_follower(w.fetch_offset, budget).and_then(|slice| match ranges.placeholder(slice.clone()) {
                Some(placeholder) => Ok(placeholder),
                None => slice.read_to_vec().map(Bytes::from),
            });
        match records {
            Ok(bytes) => {
                total += bytes.len();
                data.records = Some(bytes);
            }
            Err(LogError::OffsetOutOfRange { .. }) => {
                data.error_code = error_code::OFFSET_OUT_OF_RANGE;
                any_error = true;
            }
            Err(e) => {
                log::error!("follower fetch from {}-{} failed: {e}", p.topic, p.index);
                data.error_code = error_code::KAFKA_STORAGE_ERROR;
                any_error = true;
            }
        }
        out.push((w.topic_index, data));
    }
    (out, total, any_error)
}
