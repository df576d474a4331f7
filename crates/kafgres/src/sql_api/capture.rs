//! The per-change work of change data capture (docs/cdc.md): the capture
//! triggers of crates/kafgres/sql/capture.sql turn a change into row images
//! (to_jsonb, with Debezium's value mapping applied in SQL where a column
//! needs it), and `_capture_send` makes the record of it (key, envelope,
//! headers), checks its size against the topic, and sends it as
//! `kafgres.send` does, with the tombstone after a delete. In Rust because it
//! runs once per changed row inside the writer's transaction: as PL/pgSQL it
//! cost 30 µs of the 40 a captured row took.
//!
//! Row images arrive as jsonb text and their values are kept as written
//! (`RawValue`): no number goes through a float.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fmt::Write;

use pgrx::prelude::*;
use pgrx::{pg_sys, JsonB, PgSqlErrorCode};
use serde_json::value::RawValue;

use super::connect_schema::{schemas_for, with_schema, LOGICAL_NAME};
use super::jsonb_text::JsonbText;
use super::send::{fail, send_record, topic_info};

type RowImage = BTreeMap<String, Box<RawValue>>;

/// Sends one change: `op` is Debezium's (c, u, d, r for a snapshot row, t);
/// `before`/`after` the row images as the envelope carries them,
/// `raw_after` the row as to_jsonb wrote it (the `row` format's value);
/// `settings` the capture's trigger arguments (topic, format, columns text,
/// dead-letter topic, tombstones, schemas), `columns` the columns published
/// (NULL: all), `shape` what the triggers know of the table (key columns,
/// version, the signature of its columns).
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn _capture_send(
    op: &str,
    before: Option<JsonbText>,
    after: Option<JsonbText>,
    raw_after: Option<JsonbText>,
    settings: Vec<Option<String>>,
    columns: Option<Vec<Option<String>>>,
    shape: JsonB,
    schema_name: &str,
    table_name: &str,
    snapshot: &str,
) {
    let setting = |i: usize| settings.get(i).cloned().flatten().unwrap_or_default();
    let (topic, format, dead_letter) = (setting(0), setting(1), setting(3));
    let tombstones = setting(4) != "false";
    let connect_schemas = setting(5) == "true";
    let columns: Option<Vec<String>> = columns.map(|c| c.into_iter().flatten().collect());
    let before = before.map(|b| row_image(&b.0));
    let after = after.map(|a| row_image(&a.0));

    let key = if op == "t" { None } else { record_key(&shape.0, after.as_ref().or(before.as_ref())) };
    // SAFETY: in a transaction (a trigger's or a snapshot chunk's), which
    // writes and so has or gets an xid, as pg_current_xact_id() gives one.
    let xid = unsafe { pg_sys::GetTopTransactionId() }.into_inner();
    let headers = JsonB(serde_json::json!([
        ["kafgres.op", op],
        ["kafgres.table", format!("{}.{}", quote_ident(schema_name), quote_ident(table_name))],
        ["kafgres.xid", xid.to_string()],
        ["kafgres.commit_lsn", null],
        ["kafgres.commit_ts_ms", null],
    ]));
    let value = if format == "debezium" {
        Some(envelope(
            op,
            before.as_ref(),
            after.as_ref(),
            columns.as_deref(),
            &shape.0,
            schema_name,
            table_name,
            snapshot,
            xid,
        ))
    } else if matches!(op, "c" | "u" | "r") {
        raw_after.map(|a| object_text(&row_image(&a.0), columns.as_deref()))
    } else {
        None
    };
    let (key, value) = if connect_schemas {
        let key_columns: Option<Vec<String>> = shape
            .0
            .get("key")
            .and_then(|k| k.as_array())
            .map(|names| names.iter().filter_map(|n| n.as_str().map(str::to_string)).collect());
        let signature = shape.0.get("signature").and_then(|s| s.as_str()).unwrap_or_default();
        let schemas = schemas_for(schema_name, table_name, signature, key_columns.as_deref(), columns.as_deref());
        let value_schema = if format == "debezium" { &schemas.envelope } else { &schemas.row };
        (
            key.map(|k| schemas.key.as_deref().map_or(k.clone(), |s| with_schema(s, &k))),
            value.map(|v| with_schema(value_schema, &v)),
        )
    } else {
        (key, value)
    };

    // Too large for the topic: to the dead-letter topic with the reason, or
    // the statement fails. (send_record checks exactly; this leaves room for
    // the headers and the batch's framing.)
    let limit = topic_info(&topic).message_bytes_max;
    let size = value.as_ref().map_or(0, String::len) + key.as_ref().map_or(0, String::len) + 512;
    if size > limit {
        if dead_letter.is_empty() {
            fail(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "kafgres: a change of {}.{} (about {size} bytes) does not fit topic \"{topic}\" (max.message.bytes {limit})",
                    quote_ident(schema_name),
                    quote_ident(table_name)
                ),
                "raise the topic's max.message.bytes, or capture with a dead_letter_topic",
            );
        }
        let letter = serde_json::json!({
            "reason": format!("about {size} bytes, more than max.message.bytes {limit} of topic \"{topic}\""),
            "topic": topic,
            "table": format!("{schema_name}.{table_name}"),
            "op": op,
            "key": key.as_deref().map(|k| RawValue::from_string(k.to_string()).ok()),
            "bytes": size,
        });
        send_record(
            &dead_letter,
            key.map(String::into_bytes),
            Some(letter.to_string().into_bytes()),
            Some(headers),
            None,
        );
        return;
    }
    let key_bytes = key.map(String::into_bytes);
    let tombstone = op == "d" && format == "debezium" && tombstones && key_bytes.is_some();
    let tombstone_headers = tombstone.then(|| JsonB(headers.0.clone()));
    send_record(&topic, key_bytes.clone(), value.map(String::into_bytes), Some(headers), None);
    if tombstone {
        send_record(&topic, key_bytes, None, tombstone_headers, None);
    }
}

fn row_image(json: &str) -> RowImage {
    serde_json::from_str(json).unwrap_or_else(|e| {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("kafgres: a captured row is not a JSON object: {e}"),
            "capture triggers pass to_jsonb of the row",
        )
    })
}

/// The record key: the key columns of the shape in key order, compact, as
/// Debezium's JSON converter writes it (`{"id":1}`); None without key columns.
fn record_key(shape: &serde_json::Value, row: Option<&RowImage>) -> Option<String> {
    let (Some(names), Some(row)) = (shape.get("key").and_then(|k| k.as_array()), row) else {
        return None;
    };
    let mut key = String::from("{");
    for (i, name) in names.iter().filter_map(|n| n.as_str()).enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push_str(&serde_json::Value::from(name).to_string());
        key.push(':');
        key.push_str(row.get(name).map_or("null", |v| v.get()));
    }
    key.push('}');
    Some(key)
}

/// A row image as a JSON object, only `columns` when given.
fn object_text(row: &RowImage, columns: Option<&[String]>) -> String {
    let mut out = String::from("{");
    let mut first = true;
    for (name, value) in row {
        if columns.is_some_and(|c| !c.iter().any(|n| n == name)) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&serde_json::Value::from(name.as_str()).to_string());
        out.push(':');
        out.push_str(value.get());
    }
    out.push('}');
    out
}

/// Debezium's envelope as its JSON converter writes it without schemas.
#[allow(clippy::too_many_arguments)]
fn envelope(
    op: &str,
    before: Option<&RowImage>,
    after: Option<&RowImage>,
    columns: Option<&[String]>,
    shape: &serde_json::Value,
    schema_name: &str,
    table_name: &str,
    snapshot: &str,
    xid: u32,
) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (now_ms, now_us, now_ns) = (now.as_millis(), now.as_micros(), now.as_nanos());
    // SAFETY: reads the WAL insert position (pg_current_wal_insert_lsn()).
    let lsn = unsafe { pg_sys::GetXLogInsertRecPtr() };
    let image = |row: Option<&RowImage>| row.map_or_else(|| "null".to_string(), |r| object_text(r, columns));
    let text = |s: &str| serde_json::Value::from(s).to_string();
    let mut out = String::with_capacity(512);
    let _ = write!(
        out,
        "{{\"before\":{},\"after\":{},\"source\":{{\"version\":{},\"connector\":\"postgresql\",\"name\":\"{LOGICAL_NAME}\",\
         \"ts_ms\":{now_ms},\"snapshot\":{},\"db\":{},\"sequence\":null,\"ts_us\":{now_us},\"ts_ns\":{now_ns},\
         \"schema\":{},\"table\":{},\"txId\":{xid},\"lsn\":{lsn},\"xmin\":null,\"origin\":null,\"origin_lsn\":null}},\
         \"transaction\":null,\"op\":{},\"ts_ms\":{now_ms},\"ts_us\":{now_us},\"ts_ns\":{now_ns}}}",
        image(before),
        image(after),
        shape.get("version").map_or_else(|| "null".to_string(), |v| v.to_string()),
        text(snapshot),
        text(&database_name()),
        text(schema_name),
        text(table_name),
        text(op),
    );
    out
}

fn database_name() -> String {
    // SAFETY: MyDatabaseId is set in a backend that runs SQL; the name is
    // palloc'd in the current memory context.
    unsafe {
        let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        if name.is_null() {
            return String::new();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

fn quote_ident(name: &str) -> String {
    let Ok(c) = CString::new(name) else { return name.to_string() };
    // SAFETY: quote_identifier reads a NUL-terminated string and returns it
    // or a palloc'd quoted copy.
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(c.as_ptr())).to_string_lossy().into_owned() }
}
