//! Per-transaction state of a backend that sends: topic metadata read once
//! per transaction, the sticky partition of keyless records, and the
//! bridge's messages this transaction logged. Cleared at every transaction
//! end by callbacks registered once per backend.
//!
//! At pre-commit (and pre-prepare) a transaction that logged any message
//! logs the end message with how many its committed subtransactions logged:
//! the count drops the messages of subtransactions rolled back to a
//! savepoint (a subtransaction callback tracks them). At commit it wakes the
//! SQL bridge.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::pg_sys;

/// A topic as `send()` needs it.
#[derive(Debug, Clone, Copy)]
pub struct TopicInfo {
    pub partition_count: i32,
    pub message_bytes_max: usize,
}

#[derive(Default)]
struct TxnState {
    /// Records were sent (read-your-writes waits for them after commit).
    sent: bool,
    /// Messages logged by this transaction's committed and open
    /// subtransactions.
    messages: u32,
    /// Open subtransactions that started after the first message, with the
    /// count at their start (a rollback to them restores it).
    savepoints: Vec<(pg_sys::SubTransactionId, u32)>,
    topics: HashMap<String, TopicInfo>,
    sticky_partition: HashMap<String, i32>,
}

thread_local! {
    static STATE: RefCell<TxnState> = RefCell::new(TxnState::default());
    static CALLBACK_REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static RANDOM: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The commit end LSN of this backend's last transaction that sent.
    static LAST_SEND_COMMIT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Where this backend's last sending transaction's commit record ends (0:
/// none yet).
pub fn last_send_commit() -> u64 {
    LAST_SEND_COMMIT.get()
}

/// Waits until this session's committed sends are in the log: read-your-
/// writes for `kafgres.read` and `consume`. Returns whether they are.
pub fn own_sends_applied(timeout: std::time::Duration) -> bool {
    let target = last_send_commit();
    if target == 0 {
        return true;
    }
    match crate::bridge::shared::shared() {
        Some(bridge) => bridge.applied_lsn() >= target || bridge.wait_for_applied(target, timeout),
        None => false,
    }
}

/// Read-your-writes: before `function` reads, waits (up to
/// `kafgres.read_your_writes_timeout`) until this session's committed sends
/// are in the log; raises an error saying why when they are not.
pub fn require_own_sends(function: &str) {
    let timeout_ms = crate::gucs::READ_YOUR_WRITES_TIMEOUT_MS.get();
    if timeout_ms == 0 || last_send_commit() == 0 {
        return;
    }
    if own_sends_applied(std::time::Duration::from_millis(timeout_ms as u64)) {
        return;
    }
    let state = crate::bridge::shared::shared().map(|b| b.status());
    let why = state.map_or_else(
        || "the SQL bridge's shared memory is missing".to_string(),
        |s| {
            if s.message.is_empty() {
                s.state.name().to_string()
            } else {
                format!("{}: {}", s.state.name(), s.message)
            }
        },
    );
    super::send::fail(
        pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("{function}: the records this session sent are not in the log yet (the SQL bridge is {why})"),
        "see SELECT * FROM kafgres.sql_bridge_status; set kafgres.read_your_writes_timeout = 0 to read without waiting",
    );
}

fn ensure_callback() {
    if !CALLBACK_REGISTERED.get() {
        // SAFETY: registering callbacks is allowed at any time in a backend;
        // they live as long as the process (never unregistered).
        unsafe {
            pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(at_subtransaction_event), std::ptr::null_mut());
        }
        CALLBACK_REGISTERED.set(true);
    }
}

/// Notes that this transaction logged one of the bridge's messages; `record`
/// when it was a record (not a consumer offset).
pub fn mark_logged(record: bool) {
    ensure_callback();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.messages = s.messages.saturating_add(1);
        s.sent |= record;
    });
}

pub fn cached_topic(name: &str) -> Option<TopicInfo> {
    STATE.with(|s| s.borrow().topics.get(name).copied())
}

pub fn cache_topic(name: &str, info: TopicInfo) {
    ensure_callback();
    STATE.with(|s| s.borrow_mut().topics.insert(name.to_string(), info));
}

/// The partition keyless records of `topic` go to in this transaction:
/// chosen at random on first use, then kept (Kafka's sticky partitioner).
pub fn sticky_partition(topic: &str, partition_count: i32) -> i32 {
    ensure_callback();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        *s.sticky_partition
            .entry(topic.to_string())
            .or_insert_with(|| (next_random() % partition_count.max(1) as u64) as i32)
    })
}

fn next_random() -> u64 {
    RANDOM.with(|r| {
        let mut x = r.get();
        if x == 0 {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            x = (now as u64) ^ ((std::process::id() as u64) << 32) | 1;
        }
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// Tracks savepoints opened after the first message, so that a rollback to
/// one drops the messages logged since.
///
/// # Safety
///
/// Only Postgres calls this, as the subtransaction callback `ensure_callback`
/// registers, on the backend's only thread (it is `unsafe` because that is the
/// type Postgres's callback list takes; the body itself needs no promise).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    subid: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        match event {
            pg_sys::SubXactEvent::SUBXACT_EVENT_START_SUB if s.messages > 0 || !s.savepoints.is_empty() => {
                let messages = s.messages;
                s.savepoints.push((subid, messages));
            }
            pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB
                if s.savepoints.last().is_some_and(|(id, _)| *id == subid) =>
            {
                s.savepoints.pop();
            }
            pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => match s.savepoints.iter().position(|(id, _)| *id == subid)
            {
                Some(i) => {
                    s.messages = s.savepoints[i].1;
                    s.savepoints.truncate(i);
                }
                // Started before the first message: nothing was logged then.
                None => {
                    s.messages = 0;
                    s.savepoints.clear();
                }
            },
            _ => {}
        }
    });
}

/// Logs the end message at pre-commit, and after a commit flushes the commit
/// record and wakes the bridge; clears the state at every end.
///
/// # Safety
///
/// Only Postgres calls this, as the transaction callback `ensure_callback`
/// registers, on the backend's only thread, with the transaction state the
/// event names (inside it at pre-commit; just committed at commit).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    if matches!(event, pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE) {
        // Still inside the transaction: the end message is part of it. An
        // error here aborts the transaction, as it should.
        let messages = STATE.with(|s| s.borrow().messages);
        if messages > 0 {
            let end = kafgres_bridge::EndMessage { messages };
            super::send::log_message(kafgres_bridge::message::END_PREFIX, &end.encode());
        }
        return;
    }
    let ended = matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_PREPARE
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    );
    if !ended {
        return;
    }
    let state = STATE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if state.messages > 0 && event == pg_sys::XactEvent::XACT_EVENT_COMMIT {
        // With synchronous_commit = off the commit record may not be flushed
        // yet, and the bridge reads only flushed WAL: flush it, so records
        // reach consumers now and never before their transaction is durable.
        // SAFETY: XactLastCommitEnd is this backend's own global, which
        // RecordTransactionCommit has just set (this is XACT_EVENT_COMMIT);
        // XLogNeedsFlush and XLogFlush may run in any backend outside a
        // critical section, and commit callbacks run after it has ended.
        let end = unsafe {
            let end = pg_sys::XactLastCommitEnd;
            if end != 0 && pg_sys::XLogNeedsFlush(end) {
                pg_sys::XLogFlush(end);
            }
            end
        };
        if state.sent {
            LAST_SEND_COMMIT.set(end);
        }
        if let Some(bridge) = crate::bridge::shared::shared() {
            bridge.note_commit_waiting();
            bridge.wake_bridge();
        }
    }
}
