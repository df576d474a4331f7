//! The Kafgres data plane: everything between a client's socket and a
//! partition's log, in plain Rust on a tokio runtime.
//!
//! - [`server`]: the listener and the connection limit; [`connection`]: one
//!   client's read-dispatch-write loop with the frame limit;
//! - [`dispatch`]: header, served-version check, pre-decode guard, decode,
//!   handler, encode; [`api`]: one module per Kafka API;
//! - [`topics`] and [`partition`]: the in-memory registry of topics and, per
//!   partition, its log, high watermark, group-commit flusher and the waiters
//!   woken when data becomes visible;
//! - [`producer_ids`]: producer ids for InitProducerId, reserved from the
//!   catalog in blocks (the sequence state itself lives in each partition's log);
//! - [`sasl`]: SASL/SCRAM-SHA-256 authentication of connections against the
//!   catalog's credentials (PostgreSQL roles), before dispatch;
//! - [`log_dir`]: which database the log directory belongs to, and the
//!   partition directories no topic claims (removed at startup);
//! - [`catalog`]: the narrow port to persistent metadata (Postgres tables in
//!   production, memory in tests).
//!
//! It must never call into Postgres, block on SQL, or install signal handlers:
//! the host (the `kafgres` extension's background worker) gives it a
//! [`catalog::Catalog`] and a runtime, and owns every Postgres call.

pub mod api;
pub mod catalog;
pub mod config;
pub mod connection;
pub mod dispatch;
pub mod group;
pub mod group_service;
pub mod log_dir;
pub mod metrics;
pub mod partition;
pub mod producer_ids;
pub mod sasl;
pub mod server;
pub mod splice;
pub mod topic_config;
pub mod topics;
pub mod txn;

pub use catalog::{Catalog, CatalogError, MemoryCatalog, TopicRecord};
pub use config::{BrokerConfig, FlushPolicy};
pub use server::{Broker, BrokerContext};

/// Wall-clock milliseconds since the Unix epoch (record timestamps, segment ages).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
