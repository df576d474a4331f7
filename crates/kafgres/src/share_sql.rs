//! The SQL behind share groups (KIP-932): each share-partition's stored
//! state in `kafgres.share_partitions`, loaded at startup and replaced by
//! the broker in batches (Kafka's share coordinator's ShareSnapshot), and
//! each group's configs (`kafgres.group_configs`, IncrementalAlterConfigs on
//! a GROUP resource). Call inside `run_in_transaction`.
//!
//! A row's `state_batches` is a JSON array of `[first_offset, last_offset,
//! state, delivery_count]` (Kafka's record state ids: 0 available, 1
//! acquired, 2 acknowledged, 4 archived). A write replaces a row only with a
//! higher `state_version` (the broker's writes of several partitions may
//! reach Postgres in any order), and skips partitions of a topic that is gone
//! (the topic's rows went with it: a foreign key's ON DELETE CASCADE). A row
//! with `start_offset` -1 and no batches is a tombstone: the group's offsets
//! there were deleted (DeleteShareGroupOffsets), and its version stays so
//! that no older write brings them back.

use std::collections::BTreeMap;

use kafgres_broker::catalog::{GroupConfigRecord, ShareStateRecord, UNSET_START_OFFSET};
use kafgres_broker::share::{RecordState, StateBatch};
use pgrx::spi::Spi;
use uuid::Uuid;

const LOAD: &str = "SELECT group_id, topic_id::text, partition, state_version, start_offset, state_batches::text \
     FROM kafgres.share_partitions ORDER BY 1, 2, 3";
const UPSERT: &str = "INSERT INTO kafgres.share_partitions AS s \
     (group_id, topic_id, partition, state_version, start_offset, state_batches, updated_at) \
     SELECT g, t::uuid, p, v, o, b::jsonb, now() \
     FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::int8[], $6::text[]) AS u(g, t, p, v, o, b) \
     WHERE EXISTS (SELECT 1 FROM kafgres.topics x WHERE x.topic_id = u.t::uuid) \
     ON CONFLICT (group_id, topic_id, partition) DO UPDATE SET state_version = excluded.state_version, \
     start_offset = excluded.start_offset, state_batches = excluded.state_batches, updated_at = now() \
     WHERE s.state_version < excluded.state_version";

const LOAD_GROUP_CONFIGS: &str = "SELECT group_id, configs::text FROM kafgres.group_configs ORDER BY 1";
// An empty set removes the row (every config back to its default).
const SET_GROUP_CONFIGS: &str =
    "WITH gone AS (DELETE FROM kafgres.group_configs WHERE group_id = $1 AND $2::jsonb = '{}') \
     INSERT INTO kafgres.group_configs AS c (group_id, configs, updated_at) SELECT $1, $2::jsonb, now() \
     WHERE $2::jsonb <> '{}' \
     ON CONFLICT (group_id) DO UPDATE SET configs = excluded.configs, updated_at = now()";

/// Every group's configs set by IncrementalAlterConfigs; a row that is not a
/// JSON object of strings is skipped with a warning.
pub fn load_group_configs() -> Result<Vec<GroupConfigRecord>, String> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(LOAD_GROUP_CONFIGS, None, &[])? {
            let group_id: String = row.get(1)?.unwrap_or_default();
            let configs: String = row.get(2)?.unwrap_or_default();
            match serde_json::from_str::<BTreeMap<String, String>>(&configs) {
                Ok(configs) => out.push((group_id, configs)),
                Err(e) => pgrx::warning!(
                    "kafgres: the configs of group {group_id} in kafgres.group_configs are not read ({e}); \
                     the group uses the defaults"
                ),
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .map_err(|e| format!("loading kafgres.group_configs: {e}"))
}

/// Replaces a group's configs (the whole set; empty removes them).
pub fn set_group_configs(group_id: &str, configs: &BTreeMap<String, String>) -> Result<(), String> {
    let json = serde_json::to_string(configs).map_err(|e| format!("encoding the configs of group {group_id}: {e}"))?;
    Spi::connect_mut(|client| {
        client.update(SET_GROUP_CONFIGS, None, &[group_id.to_owned().into(), json.into()])?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("storing the configs of group {group_id}: {e}"))
}

fn batches_json(batches: &[StateBatch]) -> String {
    let rows: Vec<serde_json::Value> = batches
        .iter()
        .map(|b| serde_json::json!([b.first_offset, b.last_offset, b.state as i8, b.delivery_count]))
        .collect();
    serde_json::Value::Array(rows).to_string()
}

/// The batches of a stored row; `None` if the text is not what the broker writes.
fn parse_batches(text: &str) -> Option<Vec<StateBatch>> {
    let rows: Vec<(i64, i64, i8, i16)> = serde_json::from_str(text).ok()?;
    rows.into_iter()
        .map(|(first_offset, last_offset, state, delivery_count)| {
            let state = RecordState::from_id(state)?;
            (first_offset <= last_offset).then_some(StateBatch { first_offset, last_offset, state, delivery_count })
        })
        .collect()
}

/// Every stored share-partition. A row the broker cannot read (edited by
/// hand) is skipped with a warning: that share-partition starts again from
/// `share.auto.offset.reset`.
pub fn load_share_states() -> Result<Vec<ShareStateRecord>, String> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(LOAD, None, &[])? {
            let group_id: String = row.get(1)?.unwrap_or_default();
            let topic_id: String = row.get(2)?.unwrap_or_default();
            let partition: i32 = row.get(3)?.unwrap_or(-1);
            let version: i64 = row.get(4)?.unwrap_or(0);
            let start_offset: i64 = row.get(5)?.unwrap_or(-1);
            let batches: String = row.get(6)?.unwrap_or_default();
            // A start offset of -1 without batches is the tombstone of deleted
            // offsets (DeleteShareGroupOffsets): loaded, so its version stays.
            let tombstone = start_offset == UNSET_START_OFFSET;
            match (Uuid::parse_str(&topic_id), parse_batches(&batches)) {
                (Ok(topic_id), Some(batches))
                    if partition >= 0 && (start_offset >= 0 || (tombstone && batches.is_empty())) =>
                {
                    out.push(ShareStateRecord { group_id, topic_id, partition, version, start_offset, batches })
                }
                _ => pgrx::warning!(
                    "kafgres: kafgres.share_partitions row ({group_id}, {topic_id}, {partition}) is not a state \
                     Kafgres understands; that share-partition starts again from share.auto.offset.reset"
                ),
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .map_err(|e| format!("loading kafgres.share_partitions: {e}"))
}

/// Deletes every share-partition state of a group (DeleteGroups).
pub fn delete_share_group(group_id: &str) -> Result<(), String> {
    Spi::connect_mut(|client| {
        client.update(
            "DELETE FROM kafgres.share_partitions WHERE group_id = $1",
            None,
            &[group_id.to_owned().into()],
        )?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("deleting the share-partitions of group {group_id}: {e}"))
}

/// Stores a batch of share-partition states with one statement.
pub fn write_share_states(states: &[ShareStateRecord]) -> Result<(), String> {
    let groups: Vec<String> = states.iter().map(|s| s.group_id.clone()).collect();
    let topics: Vec<String> = states.iter().map(|s| s.topic_id.to_string()).collect();
    let partitions: Vec<i32> = states.iter().map(|s| s.partition).collect();
    let versions: Vec<i64> = states.iter().map(|s| s.version).collect();
    let starts: Vec<i64> = states.iter().map(|s| s.start_offset).collect();
    let batches: Vec<String> = states.iter().map(|s| batches_json(&s.batches)).collect();
    Spi::connect_mut(|client| {
        client.update(
            UPSERT,
            None,
            &[groups.into(), topics.into(), partitions.into(), versions.into(), starts.into(), batches.into()],
        )?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("storing {} share-partition states: {e}", states.len()))
}
