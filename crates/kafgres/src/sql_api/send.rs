//! `kafgres.send(topic, value, key, headers, partition)`: logs one record as
//! a transactional logical message; it reaches the topic if and only if the
//! calling transaction commits (see docs/sql.md).
//!
//! Overloads take the value as `bytea`, `text` or `jsonb` (keys as `bytea`
//! or `text`); headers are a jsonb object `{"name": "value"}` or an array of
//! `[name, value]` pairs (for repeated names). Returns the partition chosen:
//! the given one, Kafka's murmur2 partition of the key, or for keyless records
//! one partition per transaction.

use kafgres_bridge::message::{SendMessage, SEND_PREFIX};
use kafgres_bridge::partitioner::partition_for_key;
use kafgres_broker::topic_config::MESSAGE_BYTES_MAX_DEFAULT;
use kafgres_record::BATCH_OVERHEAD_BYTES_MAX;
use pgrx::prelude::*;
use pgrx::spi::Spi;
use pgrx::{pg_sys, JsonB, PgLogLevel, PgSqlErrorCode};

use super::jsonb_text::JsonbText;
use super::txn_state::{self, TopicInfo};

const HEADER_NAME_BYTES_MAX: usize = u16::MAX as usize;

unsafe extern "C-unwind" {
    // replication/message.h, which pgrx's bindings leave out. Declared by
    // hand, so pgrx does not wrap it: call it only through
    // `pg_guard_ffi_boundary` (see `log_message`).
    fn LogLogicalMessage(
        prefix: *const std::ffi::c_char,
        message: *const std::ffi::c_char,
        size: usize,
        transactional: bool,
    ) -> pg_sys::XLogRecPtr;
}

#[pg_extern(name = "send", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn send_bytea(
    topic: Option<&str>,
    value: Option<&[u8]>,
    key: default!(Option<&[u8]>, "NULL"),
    headers: default!(Option<JsonB>, "NULL"),
    partition: default!(Option<i32>, "NULL"),
) -> i32 {
    send_record(required(topic, "topic"), key.map(<[u8]>::to_vec), value.map(<[u8]>::to_vec), headers, partition)
}

#[pg_extern(name = "send", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn send_text(
    topic: Option<&str>,
    value: Option<&str>,
    key: default!(Option<&str>, "NULL"),
    headers: default!(Option<JsonB>, "NULL"),
    partition: default!(Option<i32>, "NULL"),
) -> i32 {
    let topic = required(topic, "topic");
    send_record(topic, key.map(|k| k.as_bytes().to_vec()), value.map(|v| v.as_bytes().to_vec()), headers, partition)
}

#[pg_extern(name = "send", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn send_jsonb(
    topic: Option<&str>,
    value: Option<JsonbText>,
    key: default!(Option<&str>, "NULL"),
    headers: default!(Option<JsonB>, "NULL"),
    partition: default!(Option<i32>, "NULL"),
) -> i32 {
    let value = value.map(|v| v.0.into_bytes());
    send_record(required(topic, "topic"), key.map(|k| k.as_bytes().to_vec()), value, headers, partition)
}

/// Sends many values at once (one call, one catalog lookup): `values[i]`
/// with `keys[i]` when keys are given. Returns how many records were sent.
#[pg_extern(name = "send_batch", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn send_batch(
    topic: Option<&str>,
    values: Option<Vec<Option<String>>>,
    keys: default!(Option<Vec<Option<String>>>, "NULL"),
) -> i64 {
    let topic = required(topic, "topic");
    let values = required(values, "values");
    if let Some(keys) = &keys {
        if keys.len() != values.len() {
            fail(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{} keys given for {} values", keys.len(), values.len()),
                "pass one key per value, or no keys",
            );
        }
    }
    for (i, value) in values.iter().enumerate() {
        let key = keys.as_ref().and_then(|k| k[i].as_ref()).map(|k| k.as_bytes().to_vec());
        send_record(topic, key, value.as_ref().map(|v| v.as_bytes().to_vec()), None, None);
    }
    values.len() as i64
}

pub(super) fn send_record(
    topic: &str,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Option<JsonB>,
    partition: Option<i32>,
) -> i32 {
    super::broker_link::require_broker_database("kafgres.send");
    if !wal_level_is_enough() {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "kafgres.send needs wal_level = replica or logical (the SQL bridge's slot retains WAL)".into(),
            "set wal_level = replica in postgresql.conf and restart PostgreSQL",
        );
    }
    // SAFETY: RecoveryInProgress only reads shared state under its own spin
    // lock; any backend may call it, and SQL functions run on the backend's
    // only thread.
    if unsafe { pg_sys::RecoveryInProgress() } {
        fail(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "kafgres.send cannot run on a standby".into(),
            "send from the primary",
        );
    }
    let info = topic_info(topic);
    let partition = match (partition, &key) {
        (Some(p), _) if !(0..info.partition_count).contains(&p) => fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("topic \"{topic}\" has no partition {p}"),
            &format!("its partitions are 0 to {}", info.partition_count - 1),
        ),
        (Some(p), _) => p,
        (None, Some(key)) => partition_for_key(key, info.partition_count),
        (None, None) => txn_state::sticky_partition(topic, info.partition_count),
    };
    let message = SendMessage {
        topic: topic.to_string(),
        partition,
        timestamp_ms: now_ms(),
        key,
        value,
        headers: headers.map(|h| parse_headers(&h.0)).unwrap_or_default(),
    };
    let size = message.estimated_record_bytes() + BATCH_OVERHEAD_BYTES_MAX;
    if size > info.message_bytes_max {
        fail(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "a record of about {size} bytes exceeds max.message.bytes of topic \"{topic}\" ({} bytes)",
                info.message_bytes_max
            ),
            "send a smaller record, or raise the topic's max.message.bytes",
        );
    }
    log_message(SEND_PREFIX, &message.encode());
    txn_state::mark_logged(true);
    partition
}

/// A topic's `max.message.bytes`, as `send` checks it (read once per
/// transaction, with its other facts): for SQL that needs the limit before
/// sending (change capture sends a change too large for it to its
/// dead-letter topic). Raises `undefined_object` for a topic that does not exist.
#[pg_extern(stable, parallel_unsafe)]
#[search_path(pg_catalog, kafgres)]
fn _topic_message_bytes_max(topic: &str) -> i64 {
    i64::try_from(topic_info(topic).message_bytes_max).unwrap_or(i64::MAX)
}

/// Waits until every record this session sent in committed transactions is
/// in the log (readable by consumers, `kafgres.read` included), or until
/// `timeout`; returns whether it got there. `kafgres.read` and `consume` do
/// this by themselves; sends never need it. Sleeps on the bridge's condition
/// variable, woken when the bridge applies a round (a statement cancel ends it).
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn wait_for_sends(timeout: default!(pgrx::datum::Interval, "'10 seconds'")) -> bool {
    let timeout = std::time::Duration::from_micros(timeout.as_micros().clamp(0, 3_600_000_000) as u64);
    txn_state::own_sends_applied(timeout)
}

/// Whether the WAL carries what the bridge needs (replica or logical): with
/// `minimal` no replication slot can retain it.
pub fn wal_level_is_enough() -> bool {
    // SAFETY: a plain read of a GUC variable on the backend's own thread.
    unsafe { pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32 }
}

/// Writes `body` into the WAL as a transactional logical message.
pub fn log_message(prefix: &str, body: &[u8]) {
    let prefix = std::ffi::CString::new(prefix).expect("prefixes have no NUL");
    // SAFETY: called from SQL functions and the pre-commit callback, on the
    // backend's only thread and inside its transaction, which a transactional
    // message needs (it takes the transaction's xid). Postgres copies the
    // NUL-terminated `prefix` and `body.len()` bytes of `body` into the WAL
    // record before returning, so both borrows outlive the call. It can raise
    // an ERROR (no xid left, out of memory): the guard turns that longjmp into
    // a Rust panic that pgrx reports as the ERROR, instead of jumping over
    // these frames and their destructors (`prefix`), as a bare call would.
    unsafe {
        pg_sys::ffi::pg_guard_ffi_boundary(|| {
            LogLogicalMessage(prefix.as_ptr(), body.as_ptr().cast(), body.len(), true)
        })
    };
}

/// The topic's partition count and size limit, read once per transaction.
pub(super) fn topic_info(topic: &str) -> TopicInfo {
    use kafgres_broker::acl::Operation;
    if let Some(info) = txn_state::cached_topic(topic) {
        return info;
    }
    let row = Spi::get_two_with_args::<i32, String>(
        "SELECT partition_count, configs->>'max.message.bytes' FROM kafgres.topics WHERE name = $1",
        &[topic.into()],
    );
    let info = match row {
        Ok((Some(partition_count), limit)) => TopicInfo {
            partition_count,
            message_bytes_max: limit.and_then(|l| l.trim().parse().ok()).unwrap_or(MESSAGE_BYTES_MAX_DEFAULT),
        },
        Ok((None, _)) | Err(pgrx::spi::SpiError::InvalidPosition) => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("topic \"{topic}\" does not exist"),
            "create it first: SELECT kafgres.create_topic(name, partitions)",
        ),
        Err(e) => error!("kafgres: cannot read topic \"{topic}\": {e}"),
    };
    // Under the ACLs, the caller must be allowed to WRITE the topic: asked
    // of the broker (one rulebook for Kafka and SQL) once per topic and
    // transaction, with the topic's other facts. The SQL bridge delivers
    // as the internal principal what was checked here.
    if crate::gucs::AUTHORIZER.get() != crate::gucs::AuthorizerGuc::None {
        let found = super::broker_link::with_broker("kafgres.send", |c| c.metadata(Some(&[topic])));
        let authorized = found.iter().find(|t| t.error_code == 0).map_or(i32::MIN, |t| t.authorized_operations);
        super::broker_link::require_operation(
            "kafgres.send",
            authorized,
            Operation::Write,
            &format!("topic \"{topic}\""),
        );
    }
    txn_state::cache_topic(topic, info);
    info
}

/// Headers from `{"name": "value", ...}` or `[["name", "value"], ...]`.
/// JSON null is a null header value; other non-string values are sent as
/// their JSON text.
fn parse_headers(json: &serde_json::Value) -> Vec<(String, Option<Vec<u8>>)> {
    let value_bytes = |v: &serde_json::Value| match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.as_bytes().to_vec()),
        other => Some(other.to_string().into_bytes()),
    };
    let headers: Vec<(String, Option<Vec<u8>>)> = match json {
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), value_bytes(v))).collect(),
        serde_json::Value::Array(pairs) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([serde_json::Value::String(k), v]) => (k.clone(), value_bytes(v)),
                _ => fail(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("header {pair} is not a [name, value] pair"),
                    "pass headers as {\"name\": \"value\"} or [[\"name\", \"value\"], ...]",
                ),
            })
            .collect(),
        other => fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("headers must be a JSON object or array, not {other}"),
            "pass headers as {\"name\": \"value\"} or [[\"name\", \"value\"], ...]",
        ),
    };
    if let Some((name, _)) = headers.iter().find(|(name, _)| name.len() > HEADER_NAME_BYTES_MAX) {
        fail(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("a header name of {} bytes is too long", name.len()),
            "header names must be under 64 KiB",
        );
    }
    headers
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The value of an argument that must not be NULL (the functions cannot be
/// STRICT: a NULL key or value is meaningful).
#[track_caller]
fn required<T>(argument: Option<T>, name: &str) -> T {
    match argument {
        Some(value) => value,
        None => fail(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{name} must not be NULL"),
            &format!("pass a {name}"),
        ),
    }
}

/// Raises an SQL error with a hint.
#[track_caller]
pub fn fail(code: PgSqlErrorCode, message: String, hint: &str) -> ! {
    pgrx::pg_sys::panic::ErrorReport::new(code, message, "kafgres").set_hint(hint).report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) does not return")
}
