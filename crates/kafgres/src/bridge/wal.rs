//! The bridge's WAL reader: a plain `XLogReader` over the server's own WAL,
//! turned into the few [`WalEvent`]s the assembler needs.
//!
//! No logical decoding: the bridge needs only its own logical messages (the
//! record carries the writing xid and the bytes), the ends of transactions
//! (commit records list their committed subtransactions) and the oldest
//! running xid of running-transactions records. So it works with
//! `wal_level = replica`, holds back no catalog rows, and reads the same way
//! on a promoted standby, across the timeline switch, as on the primary
//! (`read_local_xlog_page_no_wait` follows timelines).
//!
//! Reading stops at the end of flushed WAL (replayed WAL on a standby) and
//! resumes after the last whole record on the next call.

use std::ops::ControlFlow;

use kafgres_bridge::{MessageKind, WalEvent};
use pgrx::pg_sys;
use pgrx::PgTryBuilder;

unsafe extern "C-unwind" {
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
    #[link_name = "wal_segment_open"]
    fn c_wal_segment_open(
        state: *mut pg_sys::XLogReaderState,
        next_seg: pg_sys::XLogSegNo,
        tli: *mut pg_sys::TimeLineID,
    );
    #[link_name = "wal_segment_close"]
    fn c_wal_segment_close(state: *mut pg_sys::XLogReaderState);
}

/// `xl_logical_message` (replication/message.h), which pgrx's bindings leave
/// out; the prefix (NUL-terminated, `prefix_size` bytes with the NUL) and
/// then the message follow it.
///
/// `transactional` is a C `bool`, read as a byte: a Rust `bool` read from
/// WAL bytes that were anything but 0 or 1 would be undefined behaviour.
#[repr(C)]
struct XlLogicalMessage {
    db_id: pg_sys::Oid,
    transactional: u8,
    prefix_size: usize,
    message_size: usize,
}

/// The only record type of `RM_LOGICALMSG_ID`.
const XLOG_LOGICAL_MESSAGE: u8 = 0x00;

/// Why a read stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The WAL could not be read (a segment removed, a damaged record): the
    /// message says what; the reader must be reopened.
    Wal { at: u64, message: String },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Wal { at, message } => write!(f, "cannot read WAL at {}: {message}", lsn_text(*at)),
        }
    }
}

pub struct WalReader {
    reader: *mut pg_sys::XLogReaderState,
    end_of_wal: *mut pg_sys::ReadLocalXLogPageNoWaitPrivate,
    /// Where the next call starts reading (a record start), until the first read.
    begin_at: Option<u64>,
    database: pg_sys::Oid,
}

impl WalReader {
    /// A reader that starts at `start`, a record start (a position the bridge
    /// stored from an earlier read, or one [`WalReader::first_record_at_or_after`]
    /// found).
    pub fn open(start: u64) -> WalReader {
        // SAFETY: called on the worker's main thread; the reader and its
        // private data live in TopMemoryContext for the life of the reader
        // (freed in Drop), and the callbacks are Postgres's own.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(pg_sys::TopMemoryContext);
            let end_of_wal: *mut pg_sys::ReadLocalXLogPageNoWaitPrivate =
                pg_sys::palloc0(std::mem::size_of::<pg_sys::ReadLocalXLogPageNoWaitPrivate>()).cast();
            let mut routine = pg_sys::XLogReaderRoutine {
                page_read: Some(c_read_local_xlog_page_no_wait),
                segment_open: Some(c_wal_segment_open),
                segment_close: Some(c_wal_segment_close),
            };
            let reader =
                pg_sys::XLogReaderAllocate(pg_sys::wal_segment_size, std::ptr::null(), &mut routine, end_of_wal.cast());
            pg_sys::MemoryContextSwitchTo(old);
            if reader.is_null() {
                pgrx::error!("kafgres: out of memory allocating a WAL reader");
            }
            WalReader { reader, end_of_wal, begin_at: Some(start), database: pg_sys::MyDatabaseId }
        }
    }

    /// The first record starting at or after `lsn` (`None` if no whole record
    /// is there yet): where to resume after WAL was lost.
    pub fn first_record_at_or_after(&mut self, lsn: u64) -> Result<Option<u64>, ReadError> {
        let reader = self.reader;
        let end_of_wal = self.end_of_wal;
        catch(lsn, || {
            // SAFETY: the reader is ours and idle (no read in progress).
            unsafe {
                (*end_of_wal).end_of_wal = false;
                let found = pg_sys::XLogFindNextRecord(reader, lsn);
                Ok(if found == pg_sys::InvalidXLogRecPtr as u64 { None } else { Some(found) })
            }
        })
    }

    /// Starts the next read at `lsn` instead (a record start).
    pub fn restart_at(&mut self, lsn: u64) {
        self.begin_at = Some(lsn);
    }

    /// The end of the last whole record read: every record before it has
    /// been handed to `sink`. Also a valid place to start reading again.
    pub fn position(&self) -> u64 {
        match self.begin_at {
            Some(at) => at,
            // SAFETY: `reader` is the live XLogReaderState allocated in `open`
            // and freed only in Drop; a WalReader holds raw pointers, so it is
            // neither Send nor Sync and this read is on the thread that owns
            // it, with no read in progress.
            None => unsafe { (*self.reader).EndRecPtr },
        }
    }

    /// Reads records up to the end of available WAL, handing every event to
    /// `sink`, which may stop the read early (the record it stopped at is
    /// read again next time).
    pub fn read_available(
        &mut self,
        mut sink: impl FnMut(WalEvent<'_>) -> ControlFlow<()>,
    ) -> Result<ReadSummary, ReadError> {
        let reader = self.reader;
        let end_of_wal = self.end_of_wal;
        let database = self.database;
        let begin_at = self.begin_at.take();
        let at = begin_at.unwrap_or_else(|| self.position());
        let result = catch(at, || {
            let mut summary = ReadSummary::default();
            // SAFETY: the reader is ours; every pointer read below is into the
            // record XLogReadRecord just returned, valid until the next call.
            unsafe {
                if let Some(at) = begin_at {
                    pg_sys::XLogBeginRead(reader, at);
                }
                (*end_of_wal).end_of_wal = false;
                loop {
                    let before = (*reader).EndRecPtr;
                    let mut errm: *mut std::ffi::c_char = std::ptr::null_mut();
                    let record = pg_sys::XLogReadRecord(reader, &mut errm);
                    if !errm.is_null() {
                        let message = std::ffi::CStr::from_ptr(errm).to_string_lossy().into_owned();
                        return Err(ReadError::Wal { at: (*reader).EndRecPtr, message });
                    }
                    if record.is_null() {
                        // The end of available WAL (or a record not wholly
                        // there yet): start after the last whole one next time.
                        break;
                    }
                    summary.records += 1;
                    if let ControlFlow::Break(()) = dispatch(reader, database, &mut sink) {
                        // Read this record again next time.
                        summary.stopped_early = true;
                        return Ok((summary, Some((*reader).ReadRecPtr.max(before))));
                    }
                }
            }
            Ok((summary, None))
        });
        match result {
            Ok((summary, again_at)) => {
                if let Some(at) = again_at {
                    self.begin_at = Some(at);
                }
                Ok(summary)
            }
            Err(e) => {
                // A failed read leaves the reader's position uncertain: the
                // caller reopens from its checkpoint.
                self.begin_at = Some(at);
                Err(e)
            }
        }
    }
}

/// What one [`WalReader::read_available`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadSummary {
    pub records: u64,
    /// The sink stopped the read before the end of WAL.
    pub stopped_early: bool,
}

impl Drop for WalReader {
    fn drop(&mut self) {
        // SAFETY: the reader was allocated by XLogReaderAllocate and is freed
        // once; its private data was palloc'd in TopMemoryContext.
        unsafe {
            pg_sys::XLogReaderFree(self.reader);
            pg_sys::pfree(self.end_of_wal.cast());
        }
    }
}

/// Runs `body`, turning a Postgres ERROR raised inside (WALRead raises one for
/// a missing segment) into a [`ReadError`].
fn catch<T>(at: u64, body: impl FnOnce() -> Result<T, ReadError>) -> Result<T, ReadError> {
    PgTryBuilder::new(std::panic::AssertUnwindSafe(body))
        .catch_others(|caught| {
            use pgrx::pg_sys::panic::CaughtError;
            let message = match caught {
                CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => r.message().to_owned(),
                CaughtError::RustPanic { ereport, .. } => ereport.message().to_owned(),
            };
            Err(ReadError::Wal { at, message })
        })
        .execute()
}

/// Hands the current record to `sink` if it is one the bridge cares about.
///
/// # Safety
/// `reader` must have just returned a record from `XLogReadRecord`.
unsafe fn dispatch(
    reader: *mut pg_sys::XLogReaderState,
    database: pg_sys::Oid,
    sink: &mut impl FnMut(WalEvent<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    // SAFETY: per the function's contract, `record` and its main data are
    // valid until the next XLogReadRecord; the data lengths come from the
    // record header Postgres checked (CRC and length).
    unsafe {
        let decoded = &*(*reader).record;
        let header = &decoded.header;
        let info = header.xl_info;
        // A record without main data (XLOG_SWITCH, for one) has a NULL
        // main_data, which from_raw_parts must not be given even for length 0.
        let data: &[u8] = if decoded.main_data.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(decoded.main_data.cast::<u8>(), decoded.main_data_len as usize)
        };
        match u32::from(header.xl_rmid) {
            pg_sys::RmgrIds::RM_LOGICALMSG_ID => {
                if info & !(pg_sys::XLR_INFO_MASK as u8) != XLOG_LOGICAL_MESSAGE {
                    return ControlFlow::Continue(());
                }
                let Some((kind, body)) = logical_message(data, database) else { return ControlFlow::Continue(()) };
                sink(WalEvent::Message { xid: header.xl_xid.into_inner(), lsn: (*reader).ReadRecPtr, kind, body })
            }
            pg_sys::RmgrIds::RM_XACT_ID => {
                let op = u32::from(info) & pg_sys::XLOG_XACT_OPMASK;
                match op {
                    pg_sys::XLOG_XACT_COMMIT | pg_sys::XLOG_XACT_COMMIT_PREPARED => {
                        let mut parsed = pg_sys::xl_xact_parsed_commit::default();
                        pg_sys::ParseCommitRecord(info, decoded.main_data.cast(), &mut parsed);
                        let xid =
                            if op == pg_sys::XLOG_XACT_COMMIT_PREPARED { parsed.twophase_xid } else { header.xl_xid }
                                .into_inner();
                        let subxids = xid_slice(parsed.subxacts, parsed.nsubxacts);
                        let commit_time_ms = (parsed.xact_time + crate::sql_api::POSTGRES_EPOCH_UNIX_US) / 1000;
                        sink(WalEvent::Commit { xid, subxids, end_lsn: (*reader).EndRecPtr, commit_time_ms })
                    }
                    pg_sys::XLOG_XACT_ABORT | pg_sys::XLOG_XACT_ABORT_PREPARED => {
                        let mut parsed = pg_sys::xl_xact_parsed_abort::default();
                        pg_sys::ParseAbortRecord(info, decoded.main_data.cast(), &mut parsed);
                        let xid =
                            if op == pg_sys::XLOG_XACT_ABORT_PREPARED { parsed.twophase_xid } else { header.xl_xid }
                                .into_inner();
                        sink(WalEvent::Abort { xid, subxids: xid_slice(parsed.subxacts, parsed.nsubxacts) })
                    }
                    _ => ControlFlow::Continue(()),
                }
            }
            pg_sys::RmgrIds::RM_STANDBY_ID
                if u32::from(info & !(pg_sys::XLR_INFO_MASK as u8)) == pg_sys::XLOG_RUNNING_XACTS =>
            {
                if data.len() < std::mem::size_of::<pg_sys::xl_running_xacts>() {
                    return ControlFlow::Continue(());
                }
                let running = std::ptr::read_unaligned(data.as_ptr().cast::<pg_sys::xl_running_xacts>());
                sink(WalEvent::RunningXacts { oldest_running_xid: running.oldestRunningXid.into_inner() })
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

/// The kind and body of a transactional logical message of `database` with
/// one of the bridge's prefixes.
fn logical_message(data: &[u8], database: pg_sys::Oid) -> Option<(MessageKind, &[u8])> {
    let head = std::mem::size_of::<XlLogicalMessage>();
    if data.len() < head {
        return None;
    }
    // SAFETY: `data` holds at least the header's bytes; read unaligned, as
    // WAL data carries no alignment promise to Rust; every field is an
    // integer, valid for any bytes.
    let message = unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<XlLogicalMessage>()) };
    if message.transactional == 0 || message.db_id != database {
        return None;
    }
    let rest = &data[head..];
    let prefix = rest.get(..message.prefix_size)?;
    let body = rest.get(message.prefix_size..message.prefix_size.checked_add(message.message_size)?)?;
    let prefix = prefix.strip_suffix(&[0]).unwrap_or(prefix);
    MessageKind::from_prefix(prefix).map(|kind| (kind, body))
}

/// # Safety
/// `xids` must point at `count` xids (or be null with `count` 0).
unsafe fn xid_slice<'a>(xids: *mut pg_sys::TransactionId, count: std::ffi::c_int) -> &'a [u32] {
    if xids.is_null() || count <= 0 {
        return &[];
    }
    // SAFETY: per the function's contract.
    unsafe { std::slice::from_raw_parts(xids.cast_const().cast::<u32>(), count as usize) }
}

pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}
