//! Kafka wire format, as Kafgres reads and writes it.
//!
//! This crate owns the bytes between a socket and the broker's API handlers:
//! - [`frame`]: the 4-byte length prefix, checked against a limit before any
//!   allocation;
//! - [`header`]: request headers (API key, version, correlation id, client id)
//!   and response headers, with the header version each API/version uses;
//! - [`error_code`]: every Kafka error code by name, derived from
//!   `kafka-protocol`'s `ResponseError`, for every crate to import;
//! - [`guard`]: a schema walk of each request body that rejects impossible array
//!   counts and truncated fields *before* `kafka-protocol` decodes it (its array
//!   decoders reserve capacity straight from wire lengths);
//! - [`messages`]: Kafka 4.4's versions of served messages beyond what
//!   `kafka-protocol` 0.18 encodes, on top of the crate's own types.
//!
//! It must not do I/O, spawn threads, or know about Postgres; the message body
//! types themselves come from the `kafka-protocol` crate (wrapped by
//! [`messages`] where Kafka 4.4 goes further). Record batches are
//! opaque bytes here (the guard checks only their length prefix): their
//! format is the `kafgres-record` crate's, which the broker applies to them.

pub mod api_key;
pub mod error_code;
pub mod frame;
pub mod guard;
pub mod header;
pub mod messages;

pub use api_key::ApiKey;
