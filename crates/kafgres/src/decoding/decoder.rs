//! The worker's decoder: it owns the `kafgres` slot and keeps one decoding
//! context open for its whole life, as a walsender does, so each byte of WAL
//! is decoded once (the SQL functions `pg_logical_slot_*_changes` would start
//! again from the slot's restart point on every call).
//!
//! Reading stops at the WAL flush point (`read_local_xlog_page_no_wait`) and
//! resumes at the last record's end on the next call. The slot is confirmed
//! only up to what the applier reports durable in the log.

use std::cell::RefCell;
use std::ffi::CString;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::{PLUGIN_NAME, SLOT_NAME};

unsafe extern "C-unwind" {
    // replication/decode.h, which pgrx's bindings leave out.
    fn LogicalDecodingProcessRecord(ctx: *mut pg_sys::LogicalDecodingContext, record: *mut pg_sys::XLogReaderState);
    // The C functions themselves (pgrx wraps them as Rust functions, which
    // cannot be handed to Postgres as callbacks).
    #[link_name = "read_local_xlog_page_no_wait"]
    fn c_read_local_xlog_page_no_wait(
        state: *mut pg_sys::XLogReaderState,
        target_page: pg_sys::XLogRecPtr,
        req_len: std::ffi::c_int,
        target_rec: pg_sys::XLogRecPtr,
        cur_page: *mut std::ffi::c_char,
    ) -> std::ffi::c_int;
    #[link_name = "read_local_xlog_page"]
    fn c_read_local_xlog_page(
        state: *mut pg_sys::XLogReaderState,
        target_page: pg_sys::XLogRecPtr,
        req_len: std::ffi::c_int,
        target_rec: pg_sys::XLogRecPtr,
        cur_page: *mut std::ffi::c_char,
    ) -> std::ffi::c_int;
    #[link_name = "wal_segment_open"]
    fn c_wal_segment_open(
        state: *mut pg_sys::XLogReaderState,
        next_seg: pg_sys::XLogSegNo,
        tli: *mut pg_sys::TimeLineID,
    );
    #[link_name = "wal_segment_close"]
    fn c_wal_segment_close(state: *mut pg_sys::XLogReaderState);
}

thread_local! {
    /// Outputs written by the plugin during one `decode_available` call.
    static OUTPUTS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    /// Their total size, kept as they are written (summing per record would
    /// make a large round quadratic).
    static OUTPUT_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What one call decoded.
pub struct Decoded {
    /// One plugin output per message, in commit order.
    pub outputs: Vec<Vec<u8>>,
}

pub struct WalDecoder {
    ctx: *mut pg_sys::LogicalDecodingContext,
    end_of_wal: *mut pg_sys::ReadLocalXLogPageNoWaitPrivate,
    /// Where the next call starts reading (a record start).
    resume_at: Option<pg_sys::XLogRecPtr>,
}

/// Whether `wal_level = logical`: without it there is nothing to decode.
pub fn wal_level_is_logical() -> bool {
    unsafe { pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_LOGICAL as i32 }
}

/// Lets this process load the `kafgres` output plugin. Recent minor
/// releases of Postgres only load plugins named in `output_plugin_libraries`
/// (a superuser setting, default `pgoutput, test_decoding`); the worker adds
/// its own plugin for its own session, leaving the server's setting alone.
/// Releases without the setting need nothing.
pub fn allow_own_output_plugin() {
    let name = c"output_plugin_libraries";
    unsafe {
        let current = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        if current.is_null() {
            return;
        }
        let current = std::ffi::CStr::from_ptr(current).to_string_lossy().into_owned();
        if current.split(',').any(|lib| lib.trim() == PLUGIN_NAME) {
            return;
        }
        let wanted =
            if current.trim().is_empty() { PLUGIN_NAME.to_string() } else { format!("{current}, {PLUGIN_NAME}") };
        let wanted = CString::new(wanted).expect("setting has no NUL");
        pg_sys::SetConfigOption(
            name.as_ptr(),
            wanted.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
        );
    }
}

/// Creates the slot if it does not exist, as a walsender's
/// CREATE_REPLICATION_SLOT does: ephemeral until its start point is found,
/// then persistent. Finding the start point waits until every transaction
/// running now has ended. Call outside a transaction.
pub fn ensure_slot() -> Result<(), String> {
    let name = CString::new(SLOT_NAME).expect("slot name has no NUL");
    unsafe {
        let existing = pg_sys::SearchNamedReplicationSlot(name.as_ptr(), true);
        if !existing.is_null() {
            let data = &(*existing).data;
            let plugin = std::ffi::CStr::from_ptr(data.plugin.data.as_ptr()).to_string_lossy().into_owned();
            if plugin != PLUGIN_NAME || data.database != pg_sys::MyDatabaseId {
                return Err(format!(
                    "replication slot \"{SLOT_NAME}\" exists with plugin \"{plugin}\" for another use; \
                     drop it (SELECT pg_drop_replication_slot('{SLOT_NAME}')) so the broker can create its own"
                ));
            }
            return Ok(());
        }
    }
    log!("kafgres: creating logical replication slot \"{SLOT_NAME}\" (waits for running transactions to end)");
    let plugin = CString::new(PLUGIN_NAME).expect("plugin name has no NUL");
    pgrx::PgTryBuilder::new(|| unsafe {
        pg_sys::ReplicationSlotCreate(name.as_ptr(), true, pg_sys::ReplicationSlotPersistency::RS_EPHEMERAL, false);
        let mut routine = pg_sys::XLogReaderRoutine {
            page_read: Some(c_read_local_xlog_page),
            segment_open: Some(c_wal_segment_open),
            segment_close: Some(c_wal_segment_close),
        };
        let ctx = pg_sys::CreateInitDecodingContext(
            plugin.as_ptr(),
            std::ptr::null_mut(),
            false,
            pg_sys::InvalidXLogRecPtr as pg_sys::XLogRecPtr,
            &mut routine,
            None,
            None,
            None,
        );
        pg_sys::DecodingContextFindStartpoint(ctx);
        pg_sys::FreeDecodingContext(ctx);
        pg_sys::ReplicationSlotPersist();
        pg_sys::ReplicationSlotRelease();
        Ok(())
    })
    .catch_others(|caught| {
        // An ephemeral slot is dropped when released.
        unsafe {
            if !pg_sys::MyReplicationSlot.is_null() {
                pg_sys::ReplicationSlotRelease();
            }
        }
        Err(match caught {
            pgrx::pg_sys::panic::CaughtError::PostgresError(r) | pgrx::pg_sys::panic::CaughtError::ErrorReport(r) => {
                r.message().to_owned()
            }
            pgrx::pg_sys::panic::CaughtError::RustPanic { ereport, .. } => ereport.message().to_owned(),
        })
    })
    .execute()
}

impl WalDecoder {
    /// Acquires the slot and opens the decoding context at the slot's restart
    /// point (transactions committed before its confirmed point are skipped by
    /// Postgres). Call outside a transaction; raises an ERROR if the slot is
    /// in use or invalid.
    pub fn start() -> WalDecoder {
        let name = CString::new(SLOT_NAME).expect("slot name has no NUL");
        unsafe {
            pg_sys::ReplicationSlotAcquire(name.as_ptr(), true);
            let old = pg_sys::MemoryContextSwitchTo(pg_sys::TopMemoryContext);
            let mut routine = pg_sys::XLogReaderRoutine {
                page_read: Some(c_read_local_xlog_page_no_wait),
                segment_open: Some(c_wal_segment_open),
                segment_close: Some(c_wal_segment_close),
            };
            let ctx = pg_sys::CreateDecodingContext(
                pg_sys::InvalidXLogRecPtr as pg_sys::XLogRecPtr,
                std::ptr::null_mut(),
                false,
                &mut routine,
                Some(prepare_write),
                Some(write),
                None,
            );
            // read_local_xlog_page_no_wait reports the end of WAL through the
            // reader's private data (logical decoding itself does not use it).
            let end_of_wal: *mut pg_sys::ReadLocalXLogPageNoWaitPrivate =
                pg_sys::palloc0(std::mem::size_of::<pg_sys::ReadLocalXLogPageNoWaitPrivate>()).cast();
            (*(*ctx).reader).private_data = end_of_wal.cast();
            pg_sys::MemoryContextSwitchTo(old);
            let slot = &*pg_sys::MyReplicationSlot;
            let restart_lsn = slot.data.restart_lsn;
            if restart_lsn == pg_sys::InvalidXLogRecPtr as pg_sys::XLogRecPtr {
                error!("kafgres: replication slot \"{SLOT_NAME}\" has no WAL reserved (invalidated?); drop it to start over");
            }
            log!(
                "kafgres: decoding slot \"{SLOT_NAME}\" from {} (confirmed up to {})",
                lsn_text(restart_lsn),
                lsn_text(slot.data.confirmed_flush)
            );
            WalDecoder { ctx, end_of_wal, resume_at: Some(restart_lsn) }
        }
    }

    /// Decodes the WAL flushed so far, stopping early once the outputs exceed
    /// `output_bytes_max` (always at a record boundary, so a transaction's
    /// messages are never split between calls).
    pub fn decode_available(&mut self, output_bytes_max: usize) -> Decoded {
        OUTPUTS.with(|o| o.borrow_mut().clear());
        OUTPUT_BYTES.set(0);
        unsafe {
            let reader = (*self.ctx).reader;
            if let Some(at) = self.resume_at.take() {
                pg_sys::XLogBeginRead(reader, at);
            }
            (*self.end_of_wal).end_of_wal = false;
            // The reader allocates its decode buffer lazily in the current
            // context and keeps it across calls: it must be a context that
            // lives as long as the decoder, never one reset between calls.
            let long_lived = (*self.ctx).context;
            let old = pg_sys::MemoryContextSwitchTo(long_lived);
            loop {
                let mut errm: *mut std::ffi::c_char = std::ptr::null_mut();
                let record = pg_sys::XLogReadRecord(reader, &mut errm);
                if !errm.is_null() {
                    let message = std::ffi::CStr::from_ptr(errm).to_string_lossy().into_owned();
                    pg_sys::MemoryContextSwitchTo(old);
                    error!("kafgres: cannot read WAL for logical decoding: {message}");
                }
                if record.is_null() {
                    // The flush point (or a record not wholly flushed yet):
                    // start from the end of the last whole record next time.
                    self.resume_at = Some((*reader).EndRecPtr);
                    break;
                }
                LogicalDecodingProcessRecord(self.ctx, reader);
                // Decoding a commit runs (and aborts) a transaction, which
                // leaves CurrentMemoryContext at TopMemoryContext.
                pg_sys::MemoryContextSwitchTo(long_lived);
                if OUTPUT_BYTES.get() >= output_bytes_max {
                    break;
                }
            }
            pg_sys::MemoryContextSwitchTo(old);
        }
        Decoded { outputs: OUTPUTS.with(|o| std::mem::take(&mut *o.borrow_mut())) }
    }

    /// Tells Postgres everything up to `lsn` is consumed: the slot's WAL and
    /// catalog retention may advance past it.
    pub fn confirm(&self, lsn: u64) {
        unsafe { pg_sys::LogicalConfirmReceivedLocation(lsn as pg_sys::XLogRecPtr) };
    }

    /// The end of the last whole record decoded: every transaction that
    /// committed before it has been handed out.
    pub fn position(&self) -> u64 {
        unsafe { (*(*self.ctx).reader).EndRecPtr }
    }

    /// The slot's restart point: the oldest WAL it keeps.
    pub fn restart_point(&self) -> u64 {
        unsafe { (*pg_sys::MyReplicationSlot).data.restart_lsn }
    }

    /// The slot's confirmed position.
    pub fn confirmed(&self) -> u64 {
        unsafe { (*pg_sys::MyReplicationSlot).data.confirmed_flush }
    }
}

impl Drop for WalDecoder {
    fn drop(&mut self) {
        unsafe {
            pg_sys::FreeDecodingContext(self.ctx);
            pg_sys::ReplicationSlotRelease();
        }
    }
}

pub fn lsn_text(lsn: pg_sys::XLogRecPtr) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

#[pg_guard]
unsafe extern "C-unwind" fn prepare_write(
    ctx: *mut pg_sys::LogicalDecodingContext,
    _lsn: pg_sys::XLogRecPtr,
    _xid: pg_sys::TransactionId,
    _last_write: bool,
) {
    pg_sys::resetStringInfo((*ctx).out);
}

#[pg_guard]
unsafe extern "C-unwind" fn write(
    ctx: *mut pg_sys::LogicalDecodingContext,
    _lsn: pg_sys::XLogRecPtr,
    _xid: pg_sys::TransactionId,
    _last_write: bool,
) {
    let out = &*(*ctx).out;
    let bytes = std::slice::from_raw_parts(out.data.cast::<u8>(), out.len.max(0) as usize);
    OUTPUT_BYTES.set(OUTPUT_BYTES.get() + bytes.len());
    OUTPUTS.with(|o| o.borrow_mut().push(bytes.to_vec()));
}
