//! Records as SQL rows: the column types every reading function returns.

use kafgres_client::Record;
use pgrx::prelude::*;
use pgrx::JsonB;

/// Microseconds from the Unix epoch to Postgres's epoch (2000-01-01).
pub const POSTGRES_EPOCH_UNIX_US: i64 = 946_684_800_000_000;

/// (partition, offset, timestamp, key, value, headers) with byte keys and values.
pub type BytesRow = (i32, i64, Option<TimestampWithTimeZone>, Option<Vec<u8>>, Option<Vec<u8>>, JsonB);
/// The same with text keys and values (invalid UTF-8 replaced).
pub type TextRow = (i32, i64, Option<TimestampWithTimeZone>, Option<String>, Option<String>, JsonB);

pub fn timestamp(ms: i64) -> Option<TimestampWithTimeZone> {
    if ms < 0 {
        return None;
    }
    let micros = ms.checked_mul(1000)?.checked_sub(POSTGRES_EPOCH_UNIX_US)?;
    TimestampWithTimeZone::try_from(micros).ok()
}

/// Unix milliseconds of a timestamptz.
pub fn unix_ms(t: TimestampWithTimeZone) -> i64 {
    (t.into_inner() + POSTGRES_EPOCH_UNIX_US).div_euclid(1000)
}

/// Headers as a jsonb array of `[name, value]` pairs (names may repeat;
/// values are text, invalid UTF-8 replaced, or null).
pub fn headers_json(record: &Record) -> JsonB {
    let pairs = record
        .headers
        .iter()
        .map(|(name, value)| {
            let value = value.as_ref().map_or(serde_json::Value::Null, |v| {
                serde_json::Value::String(String::from_utf8_lossy(v).into_owned())
            });
            serde_json::Value::Array(vec![serde_json::Value::String(name.clone()), value])
        })
        .collect();
    JsonB(serde_json::Value::Array(pairs))
}

pub fn bytes_row(partition: i32, r: &Record) -> BytesRow {
    (
        partition,
        r.offset,
        timestamp(r.timestamp),
        r.key.as_ref().map(|k| k.to_vec()),
        r.value.as_ref().map(|v| v.to_vec()),
        headers_json(r),
    )
}

pub fn text_row(partition: i32, r: &Record) -> TextRow {
    let text = |b: &bytes::Bytes| String::from_utf8_lossy(b).into_owned();
    (partition, r.offset, timestamp(r.timestamp), r.key.as_ref().map(text), r.value.as_ref().map(text), headers_json(r))
}
