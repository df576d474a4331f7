//! Kafka Connect schemas for captured changes (`kafgres.capture(...,
//! schemas => true)`, docs/cdc.md): the key and value of each record as
//! Kafka's JSON converter writes them with `schemas.enable = true`,
//! `{"schema": ..., "payload": ...}`, with the schemas Debezium's PostgreSQL
//! connector gives the same table. Sink connectors that need a schema (a
//! JDBC sink, Debezium's `ExtractNewRecordState`) read them.
//!
//! The column types come from SQL (`kafgres._capture_connect_fields`, next
//! to the value mapping they must agree with); this module renders them once
//! per table shape and session, in the key order the JSON converter writes
//! (type, fields or items, optional, name, version, parameters, default,
//! field), and keeps the text: a schema costs a lookup per change, not a
//! catalog query.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use serde_json::Value;

use super::send::fail;

/// The name Debezium puts first in schema names (its `topic.prefix`); the
/// envelope's `source.name` says the same.
pub const LOGICAL_NAME: &str = "kafgres";

/// Shapes kept per session before the cache starts over.
const CACHED_SHAPES_MAX: usize = 256;

/// Debezium 3.6's `source` block of a PostgreSQL change, as its schema.
const SOURCE_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"},{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"},{"type":"string","optional":true,"field":"origin"},{"type":"int64","optional":true,"field":"origin_lsn"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"}"#;

/// The envelope's `transaction` block (always null here, as Debezium's
/// without `provide.transaction.metadata`), and the fields after it.
const ENVELOPE_TAIL: &str = r#"{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"}"#;

/// One column as a Connect field.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    /// `{"type": ..., "name": ..., ...}` without optionality and field name.
    pub schema: Value,
    pub optional: bool,
    pub default: Option<Value>,
}

/// The rendered schemas of one table shape.
#[derive(Debug)]
pub struct Schemas {
    /// Of the record key; None when the table has no key columns.
    pub key: Option<String>,
    /// Of a Debezium envelope.
    pub envelope: String,
    /// Of a `row` format value.
    pub row: String,
}

impl Schemas {
    /// `key_columns` in key order; `columns` the published ones (None: all).
    pub fn render(
        fields: &[Field],
        key_columns: Option<&[String]>,
        columns: Option<&[String]>,
        schema_name: &str,
        table_name: &str,
    ) -> Schemas {
        let prefix = format!("{LOGICAL_NAME}.{schema_name}.{table_name}");
        let published: Vec<&Field> = fields.iter().filter(|f| columns.is_none_or(|c| c.contains(&f.name))).collect();
        let key = key_columns.filter(|k| !k.is_empty()).map(|names| {
            let key_fields: Vec<&Field> = names.iter().filter_map(|n| fields.iter().find(|f| f.name == *n)).collect();
            struct_schema(&key_fields, false, &format!("{prefix}.Key"), None, None)
        });
        let value_name = format!("{prefix}.Value");
        let mut envelope = String::with_capacity(1024);
        let _ = write!(
            envelope,
            "{{\"type\":\"struct\",\"fields\":[{},{},{SOURCE_SCHEMA},{ENVELOPE_TAIL}],\"optional\":false,\"name\":{},\"version\":2}}",
            struct_schema(&published, true, &value_name, None, Some("before")),
            struct_schema(&published, true, &value_name, None, Some("after")),
            json_text(&format!("{prefix}.Envelope")),
        );
        Schemas { key, envelope, row: struct_schema(&published, false, &value_name, None, None) }
    }
}

fn json_text(s: &str) -> String {
    Value::from(s).to_string()
}

fn struct_schema(fields: &[&Field], optional: bool, name: &str, version: Option<i64>, field: Option<&str>) -> String {
    let mut out = String::from("{\"type\":\"struct\",\"fields\":[");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        render_type(&mut out, &f.schema, f.optional, f.default.as_ref(), Some(&f.name));
    }
    let _ = write!(out, "],\"optional\":{optional},\"name\":{}", json_text(name));
    if let Some(v) = version {
        let _ = write!(out, ",\"version\":{v}");
    }
    if let Some(f) = field {
        let _ = write!(out, ",\"field\":{}", json_text(f));
    }
    out.push('}');
    out
}

/// A type schema in the JSON converter's key order.
fn render_type(out: &mut String, schema: &Value, optional: bool, default: Option<&Value>, field: Option<&str>) {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("string");
    let _ = write!(out, "{{\"type\":{}", json_text(kind));
    if let Some(items) = schema.get("items") {
        out.push_str(",\"items\":");
        let items_optional = items.get("optional").and_then(Value::as_bool).unwrap_or(true);
        render_type(out, items, items_optional, None, None);
    }
    let _ = write!(out, ",\"optional\":{optional}");
    if let Some(name) = schema.get("name") {
        let _ = write!(out, ",\"name\":{name}");
    }
    if let Some(version) = schema.get("version") {
        let _ = write!(out, ",\"version\":{version}");
    }
    if let Some(parameters) = schema.get("parameters") {
        let _ = write!(out, ",\"parameters\":{parameters}");
    }
    if let Some(default) = default {
        let _ = write!(out, ",\"default\":{default}");
    }
    if let Some(field) = field {
        let _ = write!(out, ",\"field\":{}", json_text(field));
    }
    out.push('}');
}

thread_local! {
    static CACHE: RefCell<HashMap<String, Rc<Schemas>>> = RefCell::new(HashMap::new());
}

/// The schemas of a table shape, from this session's cache or the catalog.
/// `signature` changes with any column's name, type or nullability
/// (`kafgres._capture_shape`), so an ALTER TABLE is seen at its first change.
pub fn schemas_for(
    schema_name: &str,
    table_name: &str,
    signature: &str,
    key_columns: Option<&[String]>,
    columns: Option<&[String]>,
) -> Rc<Schemas> {
    let cache_key = format!("{schema_name}\0{table_name}\0{signature}\0{key_columns:?}\0{columns:?}");
    if let Some(found) = CACHE.with(|c| c.borrow().get(&cache_key).cloned()) {
        return found;
    }
    let fields = load_fields(schema_name, table_name);
    let schemas = Rc::new(Schemas::render(&fields, key_columns, columns, schema_name, table_name));
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHED_SHAPES_MAX {
            cache.clear();
        }
        cache.insert(cache_key, Rc::clone(&schemas));
    });
    schemas
}

const LOAD_FIELDS: &str = "SELECT field::text, field_schema::text, optional, default_value::text \
     FROM kafgres._capture_connect_fields(pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.' || \
     pg_catalog.quote_ident($2)))";

fn load_fields(schema_name: &str, table_name: &str) -> Vec<Field> {
    let loaded = Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(LOAD_FIELDS, None, &[schema_name.into(), table_name.into()])? {
            let name = row.get::<String>(1)?.unwrap_or_default();
            let schema = row.get::<String>(2)?.unwrap_or_default();
            let optional = row.get::<bool>(3)?.unwrap_or(true);
            let default = row.get::<String>(4)?;
            out.push((name, schema, optional, default));
        }
        Ok::<_, pgrx::spi::Error>(out)
    });
    let rows = loaded.unwrap_or_else(|e| {
        fail(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("kafgres: reading the columns of {schema_name}.{table_name} for Connect schemas: {e}"),
            "the capture's table must exist; see kafgres.capture_status",
        )
    });
    rows.into_iter()
        .map(|(name, schema, optional, default)| Field {
            name,
            schema: serde_json::from_str(&schema).unwrap_or(Value::Null),
            optional,
            default: default.and_then(|d| serde_json::from_str(&d).ok()),
        })
        .collect()
}

/// `{"schema": <schema>, "payload": <payload>}`.
pub fn with_schema(schema: &str, payload: &str) -> String {
    let mut out = String::with_capacity(schema.len() + payload.len() + 24);
    let _ = write!(out, "{{\"schema\":{schema},\"payload\":{payload}}}");
    out
}
