//! Kafka's record-batch format (magic v2), the unit Kafgres stores and serves.
//!
//! This crate owns the bytes of a batch, for everyone who reads or writes
//! them — the produce path, the partition log, the client, the fuzz targets:
//! - `batch.rs`, re-exported here: the 61-byte header view ([`BatchHeader`]),
//!   validation ([`validate_produced_batches`] for the produce path,
//!   [`validate_batches`] for stored batches: lengths, magic, CRC-32C, record
//!   count against lastOffsetDelta, each record's framing and offset deltas),
//!   and the patches the broker makes in place (base offset, leader epoch,
//!   LogAppendTime);
//! - [`records`]: single records read out of a stored batch, and a batch
//!   rebuilt from a subset of them (the log cleaner);
//! - [`build`]: batches encoded from records (the SQL producer, the
//!   benchmark, tests);
//! - [`compression`]: the codecs Kafka's clients write, decompressed never
//!   past a caller's cap;
//! - [`control`]: transaction markers, the control batches that end a
//!   transaction in a partition;
//! - [`varint`]: the zigzag varints and length-prefixed fields of records.
//!
//! It must not do I/O, know protocol requests or Kafka error codes (a
//! [`BatchError`] says what is wrong; the broker maps it to an error code),
//! use tokio or know about Postgres. The partition log and the broker both
//! stand on it, as Kafka's storage layer stands on its record classes and
//! never on its request classes; the wire crate does not need it (record
//! batches are opaque bytes in a request).

mod batch;
pub mod build;
pub mod compression;
pub mod control;
pub mod records;
pub mod varint;

pub use batch::{
    batch_crc, peek_offset_and_size, record_timestamps, record_timestamps_decompressing, rewrite_crc, set_base_offset,
    set_log_append_time, set_partition_leader_epoch, validate_batches, validate_produced_batches, BatchError,
    BatchHeader, ValidatedBatches, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES, BATCH_OVERHEAD_BYTES_MAX,
    BATCH_STAMPED_HEAD_BYTES, MAGIC_V2,
};
pub use compression::DecompressLimit;
