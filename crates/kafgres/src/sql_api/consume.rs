//! `kafgres.consume(group_id, topic, max_records, wait)`: a consumer group
//! driven from SQL, its progress committed with the caller's transaction.
//!
//! The group's offsets are rows of `kafgres.consumer_offsets`. A call locks
//! the rows of the partitions it will read (`FOR UPDATE SKIP LOCKED`: two
//! sessions consuming one group split the partitions instead of reading the
//! same records), fetches from the committed offsets through the broker and
//! moves the offsets past what it returns, in the caller's transaction.
//! Commit: consumed, together with whatever the caller wrote. Rollback: the
//! records come again. The broker's coordinator learns the new offsets from
//! a transactional logical message decoded at commit, like `send()`'s records.

// pgrx reads each function's SQL result columns from the literal
// `TableIterator<(name!(..), ..)>` in its signature; an alias would hide them.
#![allow(clippy::type_complexity)]

use std::time::Duration;

use kafgres_bridge::message::{OffsetCommitMessage, OFFSETS_PREFIX};
use kafgres_client::{ClientError, Record};
use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::Spi;
use pgrx::PgSqlErrorCode;

use super::broker_link::{require_broker_database, with_broker};
use super::read::{check_max_records, FETCH_BYTES};
use super::rows::{bytes_row, text_row, BytesRow, TextRow};
use super::send::{fail, log_message};
use super::txn_state;

#[pg_extern(name = "consume", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn consume_bytes(
    group_id: &str,
    topic: &str,
    max_records: default!(i32, 100),
    wait: default!(Interval, "'0'"),
) -> TableIterator<
    'static,
    (
        name!(partition, i32),
        name!(offset, i64),
        name!(timestamp, Option<TimestampWithTimeZone>),
        name!(key, Option<Vec<u8>>),
        name!(value, Option<Vec<u8>>),
        name!(headers, pgrx::JsonB),
    ),
> {
    let consumed = consume(group_id, topic, max_records, wait);
    TableIterator::new(consumed.iter().map(|(p, r)| bytes_row(*p, r)).collect::<Vec<BytesRow>>())
}

#[pg_extern(name = "consume_text", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn consume_text(
    group_id: &str,
    topic: &str,
    max_records: default!(i32, 100),
    wait: default!(Interval, "'0'"),
) -> TableIterator<
    'static,
    (
        name!(partition, i32),
        name!(offset, i64),
        name!(timestamp, Option<TimestampWithTimeZone>),
        name!(key, Option<String>),
        name!(value, Option<String>),
        name!(headers, pgrx::JsonB),
    ),
> {
    let consumed = consume(group_id, topic, max_records, wait);
    TableIterator::new(consumed.iter().map(|(p, r)| text_row(*p, r)).collect::<Vec<TextRow>>())
}

fn consume(group_id: &str, topic: &str, max_records: i32, wait: Interval) -> Vec<(i32, Record)> {
    super::txn_state::require_own_sends("kafgres.consume");
    require_broker_database("kafgres.consume");
    check_max_records(max_records);
    if group_id.is_empty() || group_id.len() > 255 {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "a group id must be 1 to 255 bytes".into(),
            "pass the consumer group's name",
        );
    }
    let wait = interval_duration(wait);
    let partition_count = topic_partition_count(topic);
    let group = with_broker("kafgres.consume", |c| c.describe_group(group_id));
    // Under the ACLs, READ on the group (READ on the topic the broker asks
    // of every fetch, as the calling role).
    super::broker_link::require_operation(
        "kafgres.consume",
        group.authorized_operations,
        kafgres_broker::acl::Operation::Read,
        &format!("group \"{group_id}\""),
    );
    if group.members > 0 {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_IN_USE,
            format!("consumer group \"{group_id}\" has {} live Kafka member(s) (state {})", group.members, group.state),
            "stop the group's Kafka consumers first, or consume from SQL with another group id",
        );
    }
    ensure_offset_rows(group_id, topic, partition_count);
    // Look first, lock second: only partitions that have something to give
    // are locked, so concurrent consumers of the group split the partitions
    // with data instead of the first one holding them all.
    let committed = offset_rows(group_id, topic, partition_count, None);
    let probe = fetch_records(topic, &committed, max_records as usize, Duration::ZERO);
    let committed_of = |p: i32| committed.iter().find(|(q, _)| *q == p).map_or(-1, |(_, o)| *o);
    let wanted: Vec<i32> = probe
        .iter()
        // A new partition's -1 reads from 0: moving it there is no progress.
        .filter(|(p, records, next)| !records.is_empty() || *next != committed_of(*p).max(0))
        .map(|(p, _, _)| *p)
        .collect();
    if wanted.is_empty() {
        if wait.is_zero() {
            return Vec::new();
        }
        // Nothing yet: hold every partition no other session holds and
        // long-poll them together.
        let positions = offset_rows(group_id, topic, partition_count, Some(None));
        if positions.is_empty() {
            return Vec::new();
        }
        let consumed = fetch_records(topic, &positions, max_records as usize, wait);
        commit_positions(group_id, topic, &positions, &consumed);
        return flatten(consumed);
    }
    let locked = offset_rows(group_id, topic, partition_count, Some(Some(&wanted)));
    let mut consumed = Vec::with_capacity(locked.len());
    let mut taken = 0usize;
    for &(partition, fresh) in &locked {
        let room = (max_records as usize).saturating_sub(taken);
        let probed = probe.iter().find(|(p, _, _)| *p == partition);
        let entry = match probed {
            // Nobody committed between the look and the lock: the look stands.
            Some((p, records, next)) if committed_of(partition) == fresh && records.len() <= room => {
                (*p, records.clone(), *next)
            }
            _ if room == 0 => continue,
            _ => match fetch_records(topic, &[(partition, fresh)], room, Duration::ZERO).pop() {
                Some(entry) => entry,
                None => continue,
            },
        };
        taken += entry.1.len();
        consumed.push(entry);
    }
    commit_positions(group_id, topic, &locked, &consumed);
    flatten(consumed)
}

fn flatten(consumed: Vec<(i32, Vec<Record>, i64)>) -> Vec<(i32, Record)> {
    consumed.into_iter().flat_map(|(p, records, _)| records.into_iter().map(move |r| (p, r))).collect()
}

pub(super) fn interval_duration(wait: Interval) -> Duration {
    let micros = wait.as_micros();
    if micros < 0 || wait.months() != 0 {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "wait must be a non-negative interval without months".into(),
            "for example wait => '5 seconds'",
        );
    }
    Duration::from_micros(micros.min(3_600_000_000) as u64)
}

fn topic_partition_count(topic: &str) -> i32 {
    match Spi::get_one_with_args::<i32>("SELECT partition_count FROM kafgres.topics WHERE name = $1", &[topic.into()]) {
        Ok(Some(n)) => n,
        Ok(None) | Err(pgrx::spi::SpiError::InvalidPosition) => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("topic \"{topic}\" does not exist"),
            "create it first: SELECT kafgres.create_topic(name, partitions)",
        ),
        Err(e) => error!("kafgres: cannot read topic \"{topic}\": {e}"),
    }
}

/// Makes sure the group has a row per partition of the topic.
fn ensure_offset_rows(group_id: &str, topic: &str, partition_count: i32) {
    Spi::run_with_args(
        // Only partitions without a row: an INSERT .. ON CONFLICT on a row
        // another consumer has locked would wait for it, and the SKIP LOCKED
        // below would never get to skip.
        "INSERT INTO kafgres.consumer_offsets (group_id, topic, partition, committed_offset) \
         SELECT $1, $2, p, -1 FROM generate_series(0, $3 - 1) AS p \
         WHERE NOT EXISTS (SELECT 1 FROM kafgres.consumer_offsets o \
                           WHERE o.group_id = $1 AND o.topic = $2 AND o.partition = p) \
         ON CONFLICT DO NOTHING",
        &[group_id.into(), topic.into(), partition_count.into()],
    )
    .unwrap_or_else(|e| error!("kafgres: cannot prepare the offsets of group \"{group_id}\": {e}"));
}

/// The group's (partition, committed offset or -1) rows. `lock`: `None`
/// reads without locking; `Some(None)` locks every row no other session
/// holds; `Some(Some(partitions))` locks those of `partitions` no other
/// session holds. Locked rows come back at their latest committed version.
fn offset_rows(group_id: &str, topic: &str, partition_count: i32, lock: Option<Option<&[i32]>>) -> Vec<(i32, i64)> {
    let only: Option<Vec<i32>> = lock.flatten().map(<[i32]>::to_vec);
    let query = match lock {
        None => {
            "SELECT partition, committed_offset FROM kafgres.consumer_offsets \
             WHERE group_id = $1 AND topic = $2 AND partition < $3 AND ($4::int4[] IS NULL OR partition = ANY($4)) \
             ORDER BY partition"
        }
        Some(_) => {
            "SELECT partition, committed_offset FROM kafgres.consumer_offsets \
             WHERE group_id = $1 AND topic = $2 AND partition < $3 AND ($4::int4[] IS NULL OR partition = ANY($4)) \
             ORDER BY partition FOR UPDATE SKIP LOCKED"
        }
    };
    Spi::connect(|client| {
        let rows = client.select(
            query,
            None,
            &[group_id.into(), topic.into(), partition_count.into(), only.clone().into()],
        )?;
        let mut positions = Vec::new();
        for row in rows {
            let partition: Option<i32> = row.get(1)?;
            let offset: Option<i64> = row.get(2)?;
            if let (Some(p), Some(o)) = (partition, offset) {
                positions.push((p, o));
            }
        }
        Ok::<_, pgrx::spi::SpiError>(positions)
    })
    .unwrap_or_else(|e| error!("kafgres: cannot read the offsets of group \"{group_id}\": {e}"))
}

/// Fetches from every locked partition at once (one request, so a wait wakes
/// on the first record in any of them). Per partition: the records taken and
/// the position to commit.
fn fetch_records(
    topic: &str,
    positions: &[(i32, i64)],
    max_records: usize,
    wait: Duration,
) -> Vec<(i32, Vec<Record>, i64)> {
    let mut start: Vec<(i32, i64)> = positions.iter().map(|&(p, o)| (p, o.max(0))).collect();
    let mut results = Vec::new();
    let mut waited = false;
    // At most: a first look, a retry after resetting out-of-range positions,
    // and one long poll.
    for _ in 0..3 {
        let long_poll = !waited && !wait.is_zero() && !results.is_empty();
        let max_wait = if long_poll { wait } else { Duration::ZERO };
        waited |= long_poll;
        let answers = with_broker("kafgres.consume", |c| c.fetch_many(topic, &start, FETCH_BYTES, max_wait));
        results.clear();
        let mut taken = 0usize;
        let mut moved = false;
        for (&(partition, position), answer) in start.iter().zip(answers) {
            match answer {
                Ok(fetched) => {
                    let mut records = fetched.records;
                    let room = max_records.saturating_sub(taken);
                    let truncated = records.len() > room;
                    records.truncate(room);
                    taken += records.len();
                    // Past the last record returned; past the whole fetch
                    // (control batches included) only if nothing was cut.
                    let next = match (records.last(), truncated) {
                        (Some(last), true) => last.offset + 1,
                        (None, true) => position,
                        (last, false) => fetched.next_offset.max(last.map_or(position, |r| r.offset + 1)),
                    };
                    results.push((partition, records, next));
                }
                // Below the log start (retention): continue from the start,
                // as auto.offset.reset=earliest; past the end (the topic was
                // recreated): from the end.
                Err(ClientError::OffsetOutOfRange { log_start_offset, log_end_offset, .. }) => {
                    let reset = if position < log_start_offset { log_start_offset } else { log_end_offset };
                    results.push((partition, Vec::new(), reset));
                    moved = true;
                }
                Err(e) => super::broker_link::raise("kafgres.consume", e),
            }
        }
        if taken > 0 {
            break;
        }
        start = results.iter().map(|(p, _, next)| (*p, *next)).collect();
        if !moved && (waited || wait.is_zero()) {
            break;
        }
    }
    results
}

/// Moves the offsets of partitions whose position changed, in the caller's
/// transaction, and logs them for the broker's coordinator.
fn commit_positions(group_id: &str, topic: &str, positions: &[(i32, i64)], consumed: &[(i32, Vec<Record>, i64)]) {
    for (partition, _, next) in consumed {
        let committed = positions.iter().find(|(p, _)| p == partition).map_or(-1, |(_, o)| *o);
        if *next == committed {
            continue;
        }
        Spi::run_with_args(
            "UPDATE kafgres.consumer_offsets SET committed_offset = $4, leader_epoch = -1, metadata = NULL, \
             committed_at = now() WHERE group_id = $1 AND topic = $2 AND partition = $3",
            &[group_id.into(), topic.into(), (*partition).into(), (*next).into()],
        )
        .unwrap_or_else(|e| error!("kafgres: cannot store the offset of group \"{group_id}\": {e}"));
        let message = OffsetCommitMessage {
            group_id: group_id.to_string(),
            topic: topic.to_string(),
            partition: *partition,
            offset: *next,
        };
        log_message(OFFSETS_PREFIX, &message.encode());
        txn_state::mark_logged(false);
    }
}
