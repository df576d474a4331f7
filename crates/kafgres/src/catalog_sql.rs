//! The SQL the control plane runs, prepared once per worker and kept
//! (`SPI_keepplan`), and the transaction wrapper that turns any Postgres error
//! into a value so one failed request never takes the worker down.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use kafgres_broker::catalog::{CommittedOffset, TopicRecord, TransactionRecord};
use kafgres_broker::sasl::scram::ScramCredential;
use pgrx::pg_sys::{self, PgBuiltInOids};
use pgrx::spi::{OwnedPreparedStatement, Spi};
use pgrx::PgTryBuilder;

pub struct CatalogPlans {
    load_topics: OwnedPreparedStatement,
    insert_topic: OwnedPreparedStatement,
    delete_topic: OwnedPreparedStatement,
    set_partition_count: OwnedPreparedStatement,
    set_topic_configs: OwnedPreparedStatement,
    cluster_id: OwnedPreparedStatement,
    load_offsets: OwnedPreparedStatement,
    upsert_offsets: OwnedPreparedStatement,
    delete_group_offsets: OwnedPreparedStatement,
    delete_partition_offsets: OwnedPreparedStatement,
    allocate_producer_ids: OwnedPreparedStatement,
    load_transactions: OwnedPreparedStatement,
    store_transaction: OwnedPreparedStatement,
    scram_credential: OwnedPreparedStatement,
}

const LOAD_TOPICS: &str =
    "SELECT topic_id::text, name, partition_count, configs::text FROM kafgres.topics ORDER BY name";
const INSERT_TOPIC: &str = "INSERT INTO kafgres.topics (topic_id, name, partition_count, configs) \
     VALUES ($1::uuid, $2, $3, $4::jsonb) ON CONFLICT (name) DO NOTHING RETURNING 1";
// A topic's committed offsets (and the SQL bridge's sequences for it) go
// with it, in the same statement.
const DELETE_TOPIC: &str = "WITH gone AS (DELETE FROM kafgres.topics WHERE topic_id = $1::uuid RETURNING name), \
     offsets AS (DELETE FROM kafgres.consumer_offsets o USING gone WHERE o.topic = gone.name), \
     sequences AS (DELETE FROM kafgres.sql_bridge_sequences s USING gone WHERE s.topic = gone.name) \
     SELECT 1 FROM gone";
// All groups' offsets (startup), or one group's ($1 not NULL: reloaded after
// a failed write).
const LOAD_OFFSETS: &str = "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata, \
     (extract(epoch FROM committed_at) * 1000)::bigint FROM kafgres.consumer_offsets \
     WHERE $1::text IS NULL OR group_id = $1";
// One statement for a whole batch of commits, whatever its size.
const UPSERT_OFFSETS: &str = "INSERT INTO kafgres.consumer_offsets AS o \
     (group_id, topic, partition, committed_offset, leader_epoch, metadata, committed_at) \
     SELECT g, t, p, c, e, m, to_timestamp(ts / 1000.0) \
     FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::int4[], $6::text[], $7::int8[]) AS u(g, t, p, c, e, m, ts) \
     ON CONFLICT (group_id, topic, partition) DO UPDATE SET committed_offset = excluded.committed_offset, \
     leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, committed_at = excluded.committed_at";
const DELETE_GROUP_OFFSETS: &str = "DELETE FROM kafgres.consumer_offsets WHERE group_id = $1";
const DELETE_PARTITION_OFFSETS: &str = "DELETE FROM kafgres.consumer_offsets o \
     USING unnest($2::text[], $3::int4[]) AS u(t, p) WHERE o.group_id = $1 AND o.topic = u.t AND o.partition = u.p";
// Partition counts only grow (CreatePartitions); the guard in SQL keeps a
// racing request from shrinking one.
const SET_PARTITION_COUNT: &str = "UPDATE kafgres.topics SET partition_count = $2 \
     WHERE topic_id = $1::uuid AND partition_count <= $2 RETURNING 1";
// AlterConfigs and IncrementalAlterConfigs: the broker sends the whole new set.
const SET_TOPIC_CONFIGS: &str = "UPDATE kafgres.topics SET configs = $2::jsonb WHERE topic_id = $1::uuid RETURNING 1";
const CLUSTER_ID: &str = "SELECT cluster_id FROM kafgres.cluster";
const LOAD_TRANSACTIONS: &str = "SELECT transactional_id, producer_id, producer_epoch, timeout_ms, state, \
     partitions::text, groups, pending_offsets::text, (extract(epoch FROM started_at) * 1000)::bigint, \
     (extract(epoch FROM updated_at) * 1000)::bigint FROM kafgres.transactions ORDER BY transactional_id";
const DELETE_TRANSACTION: &str = "DELETE FROM kafgres.transactions WHERE transactional_id = $1";
const STORE_TRANSACTION: &str = "INSERT INTO kafgres.transactions AS t (transactional_id, producer_id, \
     producer_epoch, timeout_ms, state, partitions, groups, pending_offsets, started_at, updated_at) \
     VALUES ($1, $2, $3::int2, $4, $5, $6::jsonb, $7::text[], $8::jsonb, to_timestamp($9 / 1000.0), now()) \
     ON CONFLICT (transactional_id) DO UPDATE SET producer_id = excluded.producer_id, \
     producer_epoch = excluded.producer_epoch, timeout_ms = excluded.timeout_ms, state = excluded.state, \
     partitions = excluded.partitions, groups = excluded.groups, pending_offsets = excluded.pending_offsets, \
     started_at = excluded.started_at, updated_at = now()";
// SASL: a role's password verifier and whether it may log in now. `rolname =
// $1` compares name with text without truncating $1 to NAMEDATALEN.
// pg_authid is readable by superusers only: the worker runs as the bootstrap
// superuser (BackgroundWorkerInitializeConnection without a user name).
const SCRAM_CREDENTIAL: &str = "SELECT rolpassword, rolcanlogin, \
     (rolvaliduntil IS NULL OR rolvaliduntil > clock_timestamp()) FROM pg_catalog.pg_authid WHERE rolname = $1";
// Reserves a block of producer ids; the row lock orders concurrent callers.
const ALLOCATE_PRODUCER_IDS: &str = "UPDATE kafgres.cluster SET next_producer_id = next_producer_id + $1 \
     RETURNING next_producer_id - $1";

impl CatalogPlans {
    /// Prepares every statement; call inside a transaction, after the schema exists.
    pub fn prepare() -> Result<CatalogPlans, String> {
        Spi::connect(|client| {
            let text = PgBuiltInOids::TEXTOID.oid();
            let int4 = PgBuiltInOids::INT4OID.oid();
            let text_array = PgBuiltInOids::TEXTARRAYOID.oid();
            let int4_array = PgBuiltInOids::INT4ARRAYOID.oid();
            let int8_array = PgBuiltInOids::INT8ARRAYOID.oid();
            Ok(CatalogPlans {
                load_topics: client.prepare(LOAD_TOPICS, &[])?.keep(),
                insert_topic: client.prepare_mut(INSERT_TOPIC, &[text, text, int4, text])?.keep(),
                delete_topic: client.prepare_mut(DELETE_TOPIC, &[text])?.keep(),
                set_partition_count: client.prepare_mut(SET_PARTITION_COUNT, &[text, int4])?.keep(),
                set_topic_configs: client.prepare_mut(SET_TOPIC_CONFIGS, &[text, text])?.keep(),
                cluster_id: client.prepare(CLUSTER_ID, &[])?.keep(),
                load_offsets: client.prepare(LOAD_OFFSETS, &[text])?.keep(),
                upsert_offsets: client
                    .prepare_mut(
                        UPSERT_OFFSETS,
                        &[text_array, text_array, int4_array, int8_array, int4_array, text_array, int8_array],
                    )?
                    .keep(),
                delete_group_offsets: client.prepare_mut(DELETE_GROUP_OFFSETS, &[text])?.keep(),
                delete_partition_offsets: client
                    .prepare_mut(DELETE_PARTITION_OFFSETS, &[text, text_array, int4_array])?
                    .keep(),
                allocate_producer_ids: client
                    .prepare_mut(ALLOCATE_PRODUCER_IDS, &[PgBuiltInOids::INT8OID.oid()])?
                    .keep(),
                load_transactions: client.prepare(LOAD_TRANSACTIONS, &[])?.keep(),
                scram_credential: client.prepare(SCRAM_CREDENTIAL, &[text])?.keep(),
                store_transaction: client
                    .prepare_mut(
                        STORE_TRANSACTION,
                        &[
                            text,
                            PgBuiltInOids::INT8OID.oid(),
                            int4,
                            int4,
                            text,
                            text,
                            text_array,
                            text,
                            PgBuiltInOids::INT8OID.oid(),
                        ],
                    )?
                    .keep(),
            })
        })
        .map_err(|e: pgrx::spi::Error| format!("preparing catalog statements: {e}"))
    }

    pub fn load_topics(&self) -> Result<Vec<TopicRecord>, String> {
        Spi::connect(|client| {
            let rows = client.select(&self.load_topics, None, &[])?;
            let mut topics = Vec::new();
            for row in rows {
                let id: String = row.get(1)?.unwrap_or_default();
                let name: String = row.get(2)?.unwrap_or_default();
                let partition_count: i32 = row.get(3)?.unwrap_or(0);
                let configs: String = row.get(4)?.unwrap_or_else(|| "{}".into());
                topics.push((id, name, partition_count, configs));
            }
            Ok::<_, pgrx::spi::Error>(topics)
        })
        .map_err(|e| format!("loading topics: {e}"))?
        .into_iter()
        .map(|(id, name, partition_count, configs)| {
            let topic_id = uuid::Uuid::parse_str(&id).map_err(|e| format!("topic {name}: bad id {id}: {e}"))?;
            let configs: BTreeMap<String, String> =
                serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&configs)
                    .map_err(|e| format!("topic {name}: bad configs: {e}"))?
                    .into_iter()
                    .map(|(k, v)| (k, v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())))
                    .collect();
            Ok(TopicRecord { topic_id, name, partition_count, configs })
        })
        .collect()
    }

    /// Inserts a topic; `Ok(false)` when a topic of that name already exists.
    pub fn insert_topic(&self, topic: &TopicRecord) -> Result<bool, String> {
        let configs = serde_json::to_string(&topic.configs).map_err(|e| e.to_string())?;
        Spi::connect_mut(|client| {
            let inserted = client.update(
                &self.insert_topic,
                None,
                &[
                    topic.topic_id.to_string().into(),
                    topic.name.clone().into(),
                    topic.partition_count.into(),
                    configs.into(),
                ],
            )?;
            Ok::<_, pgrx::spi::Error>(!inserted.is_empty())
        })
        .map_err(|e| format!("inserting topic {}: {e}", topic.name))
    }

    /// Deletes a topic; `Ok(false)` when no topic has that id.
    pub fn delete_topic(&self, topic_id: uuid::Uuid) -> Result<bool, String> {
        Spi::connect_mut(|client| {
            let deleted = client.update(&self.delete_topic, None, &[topic_id.to_string().into()])?;
            Ok::<_, pgrx::spi::Error>(!deleted.is_empty())
        })
        .map_err(|e| format!("deleting topic {topic_id}: {e}"))
    }

    /// Raises a topic's partition count; `Ok(false)` when no such topic (or it
    /// already has more).
    pub fn set_partition_count(&self, topic_id: uuid::Uuid, partition_count: i32) -> Result<bool, String> {
        Spi::connect_mut(|client| {
            let updated = client.update(
                &self.set_partition_count,
                None,
                &[topic_id.to_string().into(), partition_count.into()],
            )?;
            Ok::<_, pgrx::spi::Error>(!updated.is_empty())
        })
        .map_err(|e| format!("updating the partition count of topic {topic_id}: {e}"))
    }

    /// Replaces a topic's config overrides; `Ok(false)` when no such topic.
    pub fn set_topic_configs(&self, topic_id: uuid::Uuid, configs: &BTreeMap<String, String>) -> Result<bool, String> {
        let configs = serde_json::to_string(configs).map_err(|e| e.to_string())?;
        Spi::connect_mut(|client| {
            let updated =
                client.update(&self.set_topic_configs, None, &[topic_id.to_string().into(), configs.into()])?;
            Ok::<_, pgrx::spi::Error>(!updated.is_empty())
        })
        .map_err(|e| format!("updating the configs of topic {topic_id}: {e}"))
    }

    /// Every group's committed offsets, or only `group`'s.
    pub fn load_offsets(&self, group: Option<&str>) -> Result<Vec<CommittedOffset>, String> {
        Spi::connect(|client| {
            let rows = client.select(&self.load_offsets, None, &[group.into()])?;
            let mut offsets = Vec::new();
            for row in rows {
                offsets.push(CommittedOffset {
                    group_id: row.get(1)?.unwrap_or_default(),
                    topic: row.get(2)?.unwrap_or_default(),
                    partition: row.get(3)?.unwrap_or(0),
                    offset: row.get(4)?.unwrap_or(-1),
                    leader_epoch: row.get(5)?.unwrap_or(-1),
                    metadata: row.get(6)?,
                    commit_timestamp_ms: row.get(7)?.unwrap_or(0),
                });
            }
            Ok::<_, pgrx::spi::Error>(offsets)
        })
        .map_err(|e| format!("loading committed offsets: {e}"))
    }

    /// Upserts a batch of committed offsets with one statement.
    pub fn upsert_offsets(&self, offsets: &[&CommittedOffset]) -> Result<(), String> {
        let column = |f: &dyn Fn(&CommittedOffset) -> String| offsets.iter().map(|o| f(o)).collect::<Vec<String>>();
        let groups = column(&|o| o.group_id.clone());
        let topics = column(&|o| o.topic.clone());
        let partitions: Vec<i32> = offsets.iter().map(|o| o.partition).collect();
        let committed: Vec<i64> = offsets.iter().map(|o| o.offset).collect();
        let epochs: Vec<i32> = offsets.iter().map(|o| o.leader_epoch).collect();
        let metadata: Vec<Option<String>> = offsets.iter().map(|o| o.metadata.clone()).collect();
        let timestamps: Vec<i64> = offsets.iter().map(|o| o.commit_timestamp_ms).collect();
        Spi::connect_mut(|client| {
            client.update(
                &self.upsert_offsets,
                None,
                &[
                    groups.into(),
                    topics.into(),
                    partitions.into(),
                    committed.into(),
                    epochs.into(),
                    metadata.into(),
                    timestamps.into(),
                ],
            )?;
            Ok::<_, pgrx::spi::Error>(())
        })
        .map_err(|e| format!("storing {} committed offsets: {e}", offsets.len()))
    }

    pub fn delete_offsets(&self, group_id: &str, partitions: Option<&[(String, i32)]>) -> Result<(), String> {
        Spi::connect_mut(|client| {
            match partitions {
                None => client.update(&self.delete_group_offsets, None, &[group_id.to_owned().into()])?,
                Some(p) => {
                    let topics: Vec<String> = p.iter().map(|(t, _)| t.clone()).collect();
                    let indexes: Vec<i32> = p.iter().map(|(_, i)| *i).collect();
                    client.update(
                        &self.delete_partition_offsets,
                        None,
                        &[group_id.to_owned().into(), topics.into(), indexes.into()],
                    )?
                }
            };
            Ok::<_, pgrx::spi::Error>(())
        })
        .map_err(|e| format!("deleting offsets of group {group_id}: {e}"))
    }

    /// Reserves `count` producer ids and returns the first (durable at commit).
    pub fn allocate_producer_ids(&self, count: i64) -> Result<i64, String> {
        Spi::connect_mut(|client| {
            let rows = client.update(&self.allocate_producer_ids, Some(1), &[count.into()])?;
            let mut first = None;
            for row in rows {
                first = row.get::<i64>(1)?;
            }
            Ok::<_, pgrx::spi::Error>(first)
        })
        .map_err(|e| format!("reserving {count} producer ids: {e}"))?
        .ok_or_else(|| "kafgres.cluster is empty".to_owned())
    }

    /// Every transactional id's stored state.
    pub fn load_transactions(&self) -> Result<Vec<TransactionRecord>, String> {
        let rows = Spi::connect(|client| {
            let rows = client.select(&self.load_transactions, None, &[])?;
            let mut out = Vec::new();
            for row in rows {
                let id: String = row.get(1)?.unwrap_or_default();
                let producer_id: i64 = row.get(2)?.unwrap_or(-1);
                let producer_epoch: i16 = row.get(3)?.unwrap_or(0);
                let timeout_ms: i32 = row.get(4)?.unwrap_or(60_000);
                let state: String = row.get(5)?.unwrap_or_default();
                let partitions: String = row.get(6)?.unwrap_or_else(|| "[]".into());
                let groups: Vec<String> = row.get::<Vec<String>>(7)?.unwrap_or_default();
                let pending: String = row.get(8)?.unwrap_or_else(|| "[]".into());
                let started_ms: i64 = row.get(9)?.unwrap_or(0);
                let updated_ms: i64 = row.get(10)?.unwrap_or(started_ms);
                out.push((
                    id,
                    producer_id,
                    producer_epoch,
                    timeout_ms,
                    state,
                    partitions,
                    groups,
                    pending,
                    (started_ms, updated_ms),
                ));
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
        .map_err(|e| format!("loading transactions: {e}"))?;
        rows.into_iter()
            .map(
                |(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    timeout_ms,
                    state,
                    partitions,
                    groups,
                    pending,
                    (started_ms, updated_ms),
                )| {
                    let partitions: Vec<(String, i32)> = serde_json::from_str(&partitions)
                        .map_err(|e| format!("transactional id {transactional_id}: bad partitions: {e}"))?;
                    let pending: Vec<serde_json::Value> = serde_json::from_str(&pending)
                        .map_err(|e| format!("transactional id {transactional_id}: bad pending offsets: {e}"))?;
                    let pending_offsets = pending
                        .iter()
                        .map(|v| CommittedOffset {
                            group_id: v["group"].as_str().unwrap_or_default().to_owned(),
                            topic: v["topic"].as_str().unwrap_or_default().to_owned(),
                            partition: v["partition"].as_i64().unwrap_or(0) as i32,
                            offset: v["offset"].as_i64().unwrap_or(-1),
                            leader_epoch: v["leader_epoch"].as_i64().unwrap_or(-1) as i32,
                            metadata: v["metadata"].as_str().map(str::to_owned),
                            commit_timestamp_ms: v["committed_ms"].as_i64().unwrap_or(0),
                        })
                        .collect();
                    Ok(TransactionRecord {
                        transactional_id,
                        producer_id,
                        producer_epoch,
                        timeout_ms,
                        state,
                        partitions,
                        groups,
                        pending_offsets,
                        started_ms,
                        updated_ms,
                    })
                },
            )
            .collect()
    }

    /// Forgets a transactional id (expired).
    pub fn delete_transaction(&self, transactional_id: &str) -> Result<(), String> {
        Spi::connect_mut(|client| {
            client.update(DELETE_TRANSACTION, None, &[transactional_id.to_owned().into()])?;
            Ok::<_, pgrx::spi::Error>(())
        })
        .map_err(|e| format!("forgetting transactional id {transactional_id}: {e}"))
    }

    /// Inserts or replaces a transactional id's state.
    pub fn store_transaction(&self, r: &TransactionRecord) -> Result<(), String> {
        let partitions = serde_json::to_string(&r.partitions).map_err(|e| e.to_string())?;
        let pending: Vec<serde_json::Value> = r
            .pending_offsets
            .iter()
            .map(|o| {
                serde_json::json!({
                    "group": o.group_id, "topic": o.topic, "partition": o.partition, "offset": o.offset,
                    "leader_epoch": o.leader_epoch, "metadata": o.metadata, "committed_ms": o.commit_timestamp_ms,
                })
            })
            .collect();
        let pending = serde_json::to_string(&pending).map_err(|e| e.to_string())?;
        Spi::connect_mut(|client| {
            client.update(
                &self.store_transaction,
                None,
                &[
                    r.transactional_id.clone().into(),
                    r.producer_id.into(),
                    i32::from(r.producer_epoch).into(),
                    r.timeout_ms.into(),
                    r.state.clone().into(),
                    partitions.into(),
                    r.groups.clone().into(),
                    pending.into(),
                    r.started_ms.into(),
                ],
            )?;
            Ok::<_, pgrx::spi::Error>(())
        })
        .map_err(|e| format!("storing transactional id {}: {e}", r.transactional_id))
    }

    /// A role's SCRAM-SHA-256 credential, `None` when it has none it may log in with.
    pub fn scram_credential(&self, username: &str) -> Result<Option<ScramCredential>, String> {
        Spi::connect(|client| {
            let rows = client.select(&self.scram_credential, Some(1), &[username.to_owned().into()])?;
            let mut found = None;
            for row in rows {
                let password: Option<String> = row.get(1)?;
                let can_login: bool = row.get(2)?.unwrap_or(false);
                let valid: bool = row.get(3)?.unwrap_or(false);
                found = ScramCredential::from_role(password.as_deref(), can_login, valid);
            }
            Ok::<_, pgrx::spi::Error>(found)
        })
        .map_err(|e| format!("reading the credential of role {username:?}: {e}"))
    }

    pub fn cluster_id(&self) -> Result<String, String> {
        Spi::connect(|client| {
            let rows = client.select(&self.cluster_id, Some(1), &[])?;
            let mut id = None;
            for row in rows {
                id = row.get::<String>(1)?;
            }
            Ok::<_, pgrx::spi::Error>(id)
        })
        .map_err(|e| format!("reading cluster id: {e}"))?
        .ok_or_else(|| "kafgres.cluster is empty".to_owned())
    }
}

/// The first column of a read-only query's first row. pgrx's `Spi::get_one`
/// runs every query as a possible write and so takes a transaction id, which
/// a hot standby refuses ("cannot assign TransactionIds during recovery"):
/// the workers' reads, which run on standbys too, go through this.
pub fn read_one<A: pgrx::datum::FromDatum + pgrx::datum::IntoDatum>(
    query: &str,
) -> Result<Option<A>, pgrx::spi::Error> {
    Spi::connect(|client| client.select(query, Some(1), &[])?.first().get_one::<A>())
}

/// The cluster id in `kafgres.cluster`, read without a prepared plan (which
/// a re-created table would invalidate).
pub fn read_cluster_id() -> Result<String, String> {
    read_one::<String>("SELECT cluster_id FROM kafgres.cluster")
        .map_err(|e| format!("reading the cluster id: {e}"))?
        .ok_or_else(|| "kafgres.cluster is empty".to_owned())
}

/// Whether `CREATE EXTENSION kafgres` has run in this database.
pub fn extension_installed() -> Result<bool, String> {
    read_one::<bool>("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'kafgres')")
        .map(|v| v.unwrap_or(false))
        .map_err(|e| format!("checking for the extension: {e}"))
}

/// The version of the kafgres extension installed in this database, if any.
pub fn installed_extension_version() -> Result<Option<String>, String> {
    read_one::<String>("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafgres'")
        .map_err(|e| format!("checking the extension's version: {e}"))
}

/// What to tell an operator whose catalog this library cannot read: an
/// older schema is updated in place (ALTER EXTENSION keeps every topic,
/// offset and transaction); anything else names both versions.
pub fn schema_mismatch_advice(installed: Option<&str>) -> String {
    let library = env!("CARGO_PKG_VERSION");
    match installed {
        Some(v) if v != library => format!(
            "the kafgres schema in this database is version {v} and this library is {library}: run ALTER EXTENSION \
             kafgres UPDATE (it keeps every topic, record, offset and transaction)"
        ),
        Some(_) => format!(
            "the kafgres schema is version {library}, as this library, but does not match it (was it edited by \
             hand?): run ALTER EXTENSION kafgres UPDATE if an update is pending"
        ),
        None => "the kafgres extension is not installed: run CREATE EXTENSION kafgres".to_string(),
    }
}

/// Runs `body` in its own transaction. Commits when it returns `Ok`; rolls
/// back when it returns `Err` or raises a Postgres error, which comes back as
/// `Err(message)` instead of ending the worker.
///
/// Call it only on a worker's main thread, outside any transaction.
pub fn run_in_transaction<R>(body: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    // SAFETY: the workers call this on their main thread (pgrx's wrappers
    // check), between transactions: the start sequence of a background
    // worker's transaction, as worker_spi runs it (a snapshot pushed for SPI).
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| {
        let value = body()?;
        // SAFETY: the transaction and the snapshot pushed above are still
        // current (`body` returned normally); popping then committing ends
        // them in the order they were started.
        unsafe {
            pg_sys::PopActiveSnapshot();
            pg_sys::CommitTransactionCommand();
        }
        Ok(value)
    }))
    .catch_others(|caught| Err(caught_message(caught)))
    .execute();
    if outcome.is_err() {
        // SAFETY: the ERROR or Err left the transaction open (pgrx has already
        // copied and flushed the error state); aborting it is what Postgres's
        // own error recovery does, and it also releases the snapshot, any
        // LWLocks and the SPI connection the failed body held.
        unsafe {
            if pg_sys::IsTransactionOrTransactionBlock() {
                pg_sys::AbortCurrentTransaction();
            }
        }
    }
    outcome
}

fn caught_message(caught: pgrx::pg_sys::panic::CaughtError) -> String {
    use pgrx::pg_sys::panic::CaughtError;
    match caught {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => r.message().to_owned(),
        CaughtError::RustPanic { ereport, .. } => format!("panic: {}", ereport.message()),
    }
}
