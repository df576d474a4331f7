//! The SQL the control plane runs, prepared once per worker and kept
//! (`SPI_keepplan`), and the transaction wrapper that turns any Postgres error
//! into a value so one failed request never takes the worker down.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use kafgres_broker::catalog::TopicRecord;
use pgrx::pg_sys::{self, PgBuiltInOids};
use pgrx::spi::{OwnedPreparedStatement, Spi};
use pgrx::PgTryBuilder;

pub struct CatalogPlans {
    load_topics: OwnedPreparedStatement,
    insert_topic: OwnedPreparedStatement,
    delete_topic: OwnedPreparedStatement,
    set_partition_count: OwnedPreparedStatement,
    cluster_id: OwnedPreparedStatement,
}

const LOAD_TOPICS: &str =
    "SELECT topic_id::text, name, partition_count, configs::text FROM kafgres.topics ORDER BY name";
const INSERT_TOPIC: &str = "INSERT INTO kafgres.topics (topic_id, name, partition_count, configs) \
     VALUES ($1::uuid, $2, $3, $4::jsonb) ON CONFLICT (name) DO NOTHING RETURNING 1";
const DELETE_TOPIC: &str = "DELETE FROM kafgres.topics WHERE topic_id = $1::uuid RETURNING 1";
// Partition counts only grow (CreatePartitions); the guard in SQL keeps a
// racing request from shrinking one.
const SET_PARTITION_COUNT: &str = "UPDATE kafgres.topics SET partition_count = $2 \
     WHERE topic_id = $1::uuid AND partition_count <= $2 RETURNING 1";
const CLUSTER_ID: &str = "SELECT cluster_id FROM kafgres.cluster";

impl CatalogPlans {
    /// Prepares every statement; call inside a transaction, after the schema exists.
    pub fn prepare() -> Result<CatalogPlans, String> {
        Spi::connect(|client| {
            let text = PgBuiltInOids::TEXTOID.oid();
            let int4 = PgBuiltInOids::INT4OID.oid();
            Ok(CatalogPlans {
                load_topics: client.prepare(LOAD_TOPICS, &[])?.keep(),
                insert_topic: client.prepare_mut(INSERT_TOPIC, &[text, text, int4, text])?.keep(),
                delete_topic: client.prepare_mut(DELETE_TOPIC, &[text])?.keep(),
                set_partition_count: client.prepare_mut(SET_PARTITION_COUNT, &[text, int4])?.keep(),
                cluster_id: client.prepare(CLUSTER_ID, &[])?.keep(),
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
            let configs: BTreeMap<String, String> = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&configs)
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
            let updated =
                client.update(&self.set_partition_count, None, &[topic_id.to_string().into(), partition_count.into()])?;
            Ok::<_, pgrx::spi::Error>(!updated.is_empty())
        })
        .map_err(|e| format!("updating the partition count of topic {topic_id}: {e}"))
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

/// Whether `CREATE EXTENSION kafgres` has run in this database.
pub fn extension_installed() -> Result<bool, String> {
    Spi::get_one::<bool>("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'kafgres')")
        .map(|v| v.unwrap_or(false))
        .map_err(|e| format!("checking for the extension: {e}"))
}

/// Runs `body` in its own transaction. Commits when it returns `Ok`; rolls
/// back when it returns `Err` or raises a Postgres error, which comes back as
/// `Err(message)` instead of ending the worker.
pub fn run_in_transaction<R>(body: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| {
        let value = body()?;
        unsafe {
            pg_sys::PopActiveSnapshot();
            pg_sys::CommitTransactionCommand();
        }
        Ok(value)
    }))
    .catch_others(|caught| Err(caught_message(caught)))
    .execute();
    if outcome.is_err() {
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
