//! `kafgres.read`: records of one partition as rows, by offset or by time,
//! for ad-hoc queries. Reads go through the broker (see [`super::broker_link`])
//! and return only what Kafka consumers could read: durable records below the
//! high watermark. Nothing is committed or remembered.

// pgrx reads each function's SQL result columns from the literal
// `TableIterator<(name!(..), ..)>` in its signature; an alias would hide them.
#![allow(clippy::type_complexity)]

use std::time::Duration;

use kafgres_client::{ClientError, OffsetSpec, Record};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::broker_link::{require_broker_database, with_broker};
use super::rows::{bytes_row, text_row, unix_ms, BytesRow, TextRow};
use super::send::fail;

/// Bytes asked for per fetch.
pub const FETCH_BYTES: i32 = 1 << 20;
/// Most records one call returns.
const MAX_RECORDS_LIMIT: i32 = 100_000;

#[pg_extern(name = "read", stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn read_bytes(
    topic: &str,
    partition: i32,
    from_offset: default!(i64, 0),
    max_records: default!(i32, 100),
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
    let records = read_from(topic, partition, from_offset, max_records, None);
    TableIterator::new(records.iter().map(|r| bytes_row(partition, r)).collect::<Vec<BytesRow>>())
}

#[pg_extern(name = "read_text", stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn read_text(
    topic: &str,
    partition: i32,
    from_offset: default!(i64, 0),
    max_records: default!(i32, 100),
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
    let records = read_from(topic, partition, from_offset, max_records, None);
    TableIterator::new(records.iter().map(|r| text_row(partition, r)).collect::<Vec<TextRow>>())
}

/// Records with a timestamp in `[from_time, to_time)` (to the end when
/// `to_time` is NULL), starting at the first offset whose timestamp is at or
/// after `from_time` (ListOffsets by time, as Kafka consumers seek).
#[pg_extern(name = "read", stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn read_by_time(
    topic: &str,
    partition: i32,
    from_time: TimestampWithTimeZone,
    to_time: default!(Option<TimestampWithTimeZone>, "NULL"),
    max_records: default!(i32, 100),
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
    require_broker_database("kafgres.read");
    super::txn_state::require_own_sends("kafgres.read");
    let from_ms = unix_ms(from_time);
    let (start, _) = with_broker("kafgres.read", |c| c.list_offsets(topic, partition, OffsetSpec::Timestamp(from_ms)));
    let records =
        if start < 0 { Vec::new() } else { read_from(topic, partition, start, max_records, to_time.map(unix_ms)) };
    TableIterator::new(records.iter().map(|r| bytes_row(partition, r)).collect::<Vec<BytesRow>>())
}

/// Reads up to `max_records` from `offset`, stopping at the high watermark,
/// and before the first record at or past `until_ms` when given.
pub fn read_from(topic: &str, partition: i32, offset: i64, max_records: i32, until_ms: Option<i64>) -> Vec<Record> {
    super::txn_state::require_own_sends("kafgres.read");
    require_broker_database("kafgres.read");
    check_max_records(max_records);
    if offset < 0 {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("offset {offset} is negative"),
            "offsets start at 0; see kafgres.partition_status for each partition's log start",
        );
    }
    let wanted = max_records as usize;
    let mut records: Vec<Record> = Vec::new();
    let mut position = offset;
    while records.len() < wanted {
        let fetched = with_broker("kafgres.read", |c| {
            match c.fetch(topic, partition, position, FETCH_BYTES, Duration::ZERO) {
                // A position past the end is an empty read, as in SQL.
                Err(ClientError::OffsetOutOfRange { log_end_offset, .. }) if position >= log_end_offset => Ok(None),
                other => other.map(Some),
            }
        });
        let Some(fetched) = fetched else { break };
        if fetched.records.is_empty() && fetched.next_offset <= position {
            break;
        }
        for record in fetched.records {
            if until_ms.is_some_and(|until| record.timestamp >= until) || records.len() >= wanted {
                return records;
            }
            records.push(record);
        }
        position = fetched.next_offset;
        if position >= fetched.high_watermark {
            break;
        }
    }
    records
}

pub fn check_max_records(max_records: i32) {
    if !(1..=MAX_RECORDS_LIMIT).contains(&max_records) {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("max_records {max_records} is out of range"),
            &format!("ask for 1 to {MAX_RECORDS_LIMIT} records per call"),
        );
    }
}
