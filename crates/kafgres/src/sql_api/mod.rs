//! The SQL functions users call: producing inside a transaction ([`send`]);
//! the rest of the SQL surface lives beside it. Every function is `SECURITY
//! DEFINER` with a pinned `search_path` and revoked from PUBLIC by the
//! install script: grant `EXECUTE` to the roles that should use it.
//!
//! Functions here run in ordinary backends: they never reach the broker's
//! memory, only the WAL (logical messages), the catalog tables and, for reads,
//! the broker's Kafka listener on loopback.

pub mod admin;
pub mod broker_link;
mod capture;
mod connect_schema;
pub mod consume;
mod jsonb_text;
pub mod read;
mod row_filter;
mod rows;
pub use rows::{timestamp, POSTGRES_EPOCH_UNIX_US};
pub mod send;
mod share_consume;
mod txn_state;
