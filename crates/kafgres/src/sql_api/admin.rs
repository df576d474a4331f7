//! Administration from SQL: topics (through the broker's CreateTopics,
//! DeleteTopics, CreatePartitions and IncrementalAlterConfigs, so log directories and the catalog
//! stay in step; they take effect at once, not at commit) and the functions
//! behind the `kafgres.partition_status` and `kafgres.consumer_groups` views.

use pgrx::prelude::*;
use pgrx::spi::Spi;
use pgrx::{JsonB, PgSqlErrorCode};

use super::broker_link::{require_broker_database, with_broker};
use super::send::fail;
use crate::gucs;

#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn create_topic(name: &str, partitions: default!(i32, 1), configs: default!(JsonB, "'{}'")) -> pgrx::Uuid {
    require_broker_database("kafgres.create_topic");
    let serde_json::Value::Object(map) = &configs.0 else {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("configs must be a JSON object, not {}", configs.0),
            "for example '{\"retention.ms\": \"86400000\"}'",
        );
    };
    let configs: Vec<(String, String)> =
        map.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect();
    let id = with_broker("kafgres.create_topic", |c| c.create_topic(name, partitions, &configs));
    pgrx::Uuid::from_bytes(*id.as_bytes())
}

/// Changes a topic's configs (IncrementalAlterConfigs): each key of
/// `configs` is set to its value, a JSON null deletes the override (back to
/// the default); configs not named keep their value.
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn alter_topic(name: &str, configs: JsonB) {
    require_broker_database("kafgres.alter_topic");
    let serde_json::Value::Object(map) = &configs.0 else {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("configs must be a JSON object, not {}", configs.0),
            "for example '{\"retention.ms\": \"86400000\", \"max.message.bytes\": null}'",
        );
    };
    let configs: Vec<(String, Option<String>)> = map
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::Null => (k.clone(), None),
            serde_json::Value::String(s) => (k.clone(), Some(s.clone())),
            other => (k.clone(), Some(other.to_string())),
        })
        .collect();
    with_broker("kafgres.alter_topic", |c| c.alter_topic_configs(name, &configs));
}

#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn delete_topic(name: &str) {
    require_broker_database("kafgres.delete_topic");
    with_broker("kafgres.delete_topic", |c| c.delete_topic(name));
}

#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn add_partitions(name: &str, total: i32) {
    require_broker_database("kafgres.add_partitions");
    with_broker("kafgres.add_partitions", |c| c.create_partitions(name, total));
}

/// Every partition of every topic: log start and end (from the broker) and
/// the bytes its files take on disk.
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]

fn _partition_status() -> TableIterator<
    'static,
    (
        name!(topic, String),
        name!(partition, i32),
        name!(log_start_offset, i64),
        name!(log_end_offset, i64),
        name!(size_bytes, i64),
    ),
> {
    require_broker_database("kafgres.partition_status");
    let topics: Vec<(String, i32)> = Spi::connect(|client| {
        let rows = client.select("SELECT name, partition_count FROM kafgres.topics ORDER BY name", None, &[])?;
        let mut topics = Vec::new();
        for row in rows {
            if let (Some(name), Some(count)) = (row.get::<String>(1)?, row.get::<i32>(2)?) {
                topics.push((name, count));
            }
        }
        Ok::<_, pgrx::spi::SpiError>(topics)
    })
    .unwrap_or_else(|e| error!("kafgres: cannot list topics: {e}"));
    let pairs: Vec<(&str, i32)> =
        topics.iter().flat_map(|(name, count)| (0..*count).map(move |p| (name.as_str(), p))).collect();
    if pairs.is_empty() {
        return TableIterator::new(Vec::new());
    }
    let bounds = with_broker("kafgres.partition_status", |c| c.log_bounds(&pairs));
    let log_dir = gucs::log_dir();
    let rows: Vec<_> = bounds
        .into_iter()
        .map(|b| {
            let size = directory_bytes(&kafgres_broker::topics::partition_dir(&log_dir, &b.topic, b.partition));
            (b.topic, b.partition, b.log_start_offset, b.log_end_offset, size)
        })
        .collect();
    TableIterator::new(rows)
}

/// The groups the broker coordinates (Kafka consumers and SQL consumers).
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _group_status() -> TableIterator<
    'static,
    (name!(group_id, String), name!(state, String), name!(protocol_type, String), name!(members, i32)),
> {
    require_broker_database("kafgres.consumer_groups");
    let groups = with_broker("kafgres.consumer_groups", |c| {
        let listed = c.list_groups()?;
        let mut described = Vec::with_capacity(listed.len());
        for g in listed {
            let info = c.describe_group(&g.group_id)?;
            described.push((g.group_id, info.state, g.protocol_type, info.members as i32));
        }
        Ok(described)
    });
    TableIterator::new(groups)
}

fn directory_bytes(dir: &std::path::Path) -> i64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).map(|m| m.len() as i64).sum::<i64>()
        })
        .unwrap_or(0)
}
