//! The Kafgres data plane: everything between a client's socket and a
//! partition's log, in plain Rust on a tokio runtime.
//!
//! - [`server`]: the listeners and the connection limits; [`listener`]: the
//!   listeners' security protocols (Kafka's four) and endpoints; [`tls`]: the
//!   TLS listeners' certificates, handshake and client-certificate roles;
//!   [`connection`]: one client's read-dispatch-write loop with the frame
//!   limit, and [`wake_threshold`]: how much of a request its socket holds
//!   before the kernel wakes the reader; [`limits`]: the broker-wide request
//!   memory budget and the connections per address;
//! - [`dispatch`]: header, served-version check, pre-decode guard, decode,
//!   handler, encode; [`api`]: one module per Kafka API, each declaring its
//!   key, versions, the services it uses and its handler, and the one list of
//!   served APIs;
//! - [`context`]: the services a broker is made of ([`BrokerContext`]) and how
//!   a handler is given the ones it declares;
//! - [`topics`] and [`partition`]: the in-memory registry of topics and, per
//!   partition, its log, high watermark, group-commit flusher and the waiters
//!   woken when data becomes visible; [`topic_admin`]: topic creation,
//!   growth, reconfiguration and deletion, catalog first;
//! - [`archive`]: `kafgres.archive_command` for every closed segment, and
//!   the hold it puts on retention until a segment is archived;
//! - [`producer_ids`]: producer ids for InitProducerId, reserved from the
//!   catalog in blocks (the sequence state itself lives in each partition's log);
//! - [`acl`]: Kafka's ACLs over Postgres roles, and the authorizer every
//!   handler asks before it acts; [`quota`]: client byte-rate quotas and the
//!   throttle time a request earns;
//! - [`sasl`] authenticates connections before dispatch, against the
//!   catalog's credentials (PostgreSQL roles): SASL/SCRAM-SHA-256, and PLAIN
//!   and OAUTHBEARER over TLS; [`oauth`] checks the bearer tokens (JWTs,
//!   against a key set) and [`ident`] turns a certificate's or a token's
//!   subject into a role (PostgreSQL's `pg_ident.conf` maps);
//! - [`log_dir`]: which database the log directory belongs to, and the
//!   partition directories no topic claims (removed at startup);
//! - [`group`] (pure) and [`group_service`], [`txn`]: the group and
//!   transaction coordinators; [`share`]: share groups (KIP-932), their
//!   membership, sessions and share-partition states;
//! - [`prometheus`]: the `/metrics` endpoint, rendering what the data plane
//!   already counts in the Prometheus text format;
//! - [`settings`]: the settings a reload changes while the broker serves;
//! - [`telemetry`]: client telemetry (KIP-714): what clients are asked to
//!   push, and the latest values they pushed, in memory and bounded;
//! - [`delegation`]: delegation tokens (KIP-48): created, renewed, expired
//!   and described by their APIs, stored by the catalog, cached for SCRAM
//!   logins with `tokenauth=true`, removed as they expire;
//! - [`catalog`]: the narrow port to persistent metadata (Postgres tables in
//!   production, memory in tests).
//!
//! Each layer uses only the ones below it: `server` (→ `tls`) → `connection` (→ `sasl`)
//! → `dispatch` → `api` → the services (`topics`, `topic_admin`,
//! `group_service`, `txn`, `producer_ids`, `config`) → `partition`, `group`,
//! `catalog`. Handlers never see the whole broker: they get the services they
//! declare, and only `server`, `connection` and `dispatch` hold the
//! [`BrokerContext`].
//!
//! It must never call into Postgres, block on SQL, or install signal handlers:
//! the host (the `kafgres` extension's background worker) gives it a
//! [`catalog::Catalog`] and a runtime, and owns every Postgres call.

pub mod acl;
pub mod api;
pub mod archive;
pub mod catalog;
pub mod config;
pub mod connection;
pub mod context;
pub mod delegation;
pub mod dispatch;
pub mod dynamic_config;
pub mod group;
pub mod group_service;
pub mod ident;
pub mod limits;
pub mod listener;
pub mod log_dir;
pub mod metrics;
pub mod oauth;
pub mod partition;
pub mod producer_ids;
pub mod prometheus;
pub mod quota;
pub mod replication;
pub mod sasl;
pub mod server;
pub mod settings;
pub mod share;
pub mod splice;
pub mod telemetry;
pub mod tls;
pub mod topic_admin;
pub mod topic_config;
pub mod topics;
pub mod txn;
pub mod wake_threshold;

pub use catalog::{Catalog, CatalogError, MemoryCatalog, TopicRecord};
pub use config::{BrokerConfig, FlushPolicy};
pub use context::BrokerContext;
pub use server::Broker;

/// Wall-clock milliseconds since the Unix epoch (record timestamps, segment ages).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
