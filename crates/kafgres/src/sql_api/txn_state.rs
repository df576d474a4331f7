//! Per-transaction state of a backend that sends: topic metadata read once
//! per transaction, the sticky partition of keyless records, and whether the
//! worker must be woken at commit. Cleared at every transaction end by a
//! transaction callback registered once per backend.

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
    sent: bool,
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

fn ensure_callback() {
    if !CALLBACK_REGISTERED.get() {
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
        CALLBACK_REGISTERED.set(true);
    }
}

/// Notes that this transaction logged a record: wake the worker at commit.
pub fn mark_sent() {
    ensure_callback();
    STATE.with(|s| s.borrow_mut().sent = true);
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

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
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
    let sent = STATE.with(|s| std::mem::take(&mut *s.borrow_mut()).sent);
    if sent && event == pg_sys::XactEvent::XACT_EVENT_COMMIT {
        // With synchronous_commit = off the commit record may not be flushed
        // yet, and the worker decodes only flushed WAL: flush it, so records
        // reach consumers now and never before their transaction is durable.
        let end = pg_sys::XactLastCommitEnd;
        if end != 0 && pg_sys::XLogNeedsFlush(end) {
            pg_sys::XLogFlush(end);
        }
        LAST_SEND_COMMIT.set(end);
        crate::wake::set_worker_latch();
    }
}
