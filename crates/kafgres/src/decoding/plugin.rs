//! The `kafgres` logical decoding output plugin.
//!
//! Postgres loads it by library name when a slot with plugin `kafgres` is
//! decoded. It ignores table changes and non-transactional messages; for each
//! transactional message whose prefix is one of `sql_bridge::message`'s, it
//! writes one binary output: the envelope (kind, commit end LSN, commit time)
//! followed by the message body unchanged. The transaction's commit LSN and
//! time are known here because the reorder buffer replays a transaction's
//! messages only once its commit record is decoded.

use std::ffi::CStr;

use kafgres_broker::sql_bridge::message::{encode_envelope, KIND_OFFSETS, KIND_SEND, OFFSETS_PREFIX, SEND_PREFIX};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Microseconds from the Unix epoch to Postgres's epoch (2000-01-01).
const POSTGRES_EPOCH_UNIX_MS: i64 = 946_684_800_000;

#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn _PG_output_plugin_init(cb: *mut pg_sys::OutputPluginCallbacks) {
    let cb = &mut *cb;
    cb.startup_cb = Some(startup);
    cb.begin_cb = Some(begin);
    cb.change_cb = Some(change);
    cb.commit_cb = Some(commit);
    cb.message_cb = Some(message);
}

#[pg_guard]
unsafe extern "C-unwind" fn startup(
    _ctx: *mut pg_sys::LogicalDecodingContext,
    options: *mut pg_sys::OutputPluginOptions,
    _is_init: bool,
) {
    (*options).output_type = pg_sys::OutputPluginOutputType::OUTPUT_PLUGIN_BINARY_OUTPUT;
    (*options).receive_rewrites = false;
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(_ctx: *mut pg_sys::LogicalDecodingContext, _txn: *mut pg_sys::ReorderBufferTXN) {}

#[pg_guard]
unsafe extern "C-unwind" fn commit(
    _ctx: *mut pg_sys::LogicalDecodingContext,
    _txn: *mut pg_sys::ReorderBufferTXN,
    _commit_lsn: pg_sys::XLogRecPtr,
) {
}

#[pg_guard]
unsafe extern "C-unwind" fn change(
    _ctx: *mut pg_sys::LogicalDecodingContext,
    _txn: *mut pg_sys::ReorderBufferTXN,
    _relation: pg_sys::Relation,
    _change: *mut pg_sys::ReorderBufferChange,
) {
}

#[pg_guard]
unsafe extern "C-unwind" fn message(
    ctx: *mut pg_sys::LogicalDecodingContext,
    txn: *mut pg_sys::ReorderBufferTXN,
    _message_lsn: pg_sys::XLogRecPtr,
    transactional: bool,
    prefix: *const std::ffi::c_char,
    message_size: pg_sys::Size,
    message: *const std::ffi::c_char,
) {
    if !transactional || txn.is_null() || prefix.is_null() {
        return;
    }
    let kind = match CStr::from_ptr(prefix).to_bytes() {
        p if p == SEND_PREFIX.as_bytes() => KIND_SEND,
        p if p == OFFSETS_PREFIX.as_bytes() => KIND_OFFSETS,
        _ => return,
    };
    let txn = &*txn;
    let commit_time_ms = txn.xact_time.commit_time / 1000 + POSTGRES_EPOCH_UNIX_MS;
    let mut envelope = Vec::with_capacity(17);
    encode_envelope(&mut envelope, kind, txn.end_lsn, commit_time_ms);
    pg_sys::OutputPluginPrepareWrite(ctx, true);
    let out = (*ctx).out;
    pg_sys::appendBinaryStringInfo(out, envelope.as_ptr().cast(), envelope.len() as i32);
    if message_size > 0 {
        pg_sys::appendBinaryStringInfo(out, message, message_size as i32);
    }
    pg_sys::OutputPluginWrite(ctx, true);
}
