//! Logical decoding of the messages SQL sessions write: the output plugin and
//! the worker's decoder.
//!
//! - [`plugin`]: the `kafgres` output plugin (`_PG_output_plugin_init`), which
//!   turns each transactional logical message with a `kafgres.*` prefix into
//!   an envelope carrying its transaction's commit LSN and time;
//! - [`decoder`]: the slot the worker owns and a decoding context it keeps
//!   open, read up to the WAL flush point whenever a committing sender sets
//!   the worker's latch (no polling).
//!
//! The meaning of the messages and what happens to them is in
//! `kafgres_broker::sql_bridge`; the design is in docs/sql.md.

pub mod decoder;
pub mod plugin;

/// The replication slot the worker owns (one per cluster: the worker serves
/// one database).
pub const SLOT_NAME: &str = "kafgres";
/// The output plugin's name: the library that provides it.
pub const PLUGIN_NAME: &str = "kafgres";
