//! The SQL bridge's shared memory: how backends wake it and wait for it,
//! what the status view shows, and the groups whose offsets SQL committed
//! (for the broker worker to reload).
//!
//! One block, allocated and zeroed by the postmaster at startup (all zero is
//! a valid "no bridge yet" state), read and written by the bridge worker,
//! the broker worker and any backend:
//!
//! - the bridge's PGPROC number: a transaction that sent sets its latch at
//!   commit;
//! - the WAL position up to which every committed send is in the log, and a
//!   condition variable broadcast when it moves: `kafgres.read`, `consume`
//!   and `wait_for_sends` sleep on it until the session's own sends are there;
//! - the state of the bridge (a code, since when, counters and the last error
//!   or gap, as text) for `kafgres.sql_bridge_status`;
//! - a bounded queue of consumer group ids whose offsets `kafgres.consume`
//!   committed, drained by the broker worker; when it is full, a flag asks for
//!   every group instead (never a silent drop).
//!
//! Text and the queue are guarded by a spin lock on an atomic flag, held only
//! to copy a few hundred bytes; everything else is atomics.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Longest status message kept (longer ones are cut at a character boundary).
const MESSAGE_BYTES_MAX: usize = 480;
/// Group ids queued for the broker before the queue asks for all groups.
const GROUP_QUEUE_DEPTH: usize = 64;
/// Group ids longer than this are not queued one by one (the broker reloads
/// every group instead).
const GROUP_ID_BYTES_MAX: usize = 250;

/// What the bridge is doing, as the status view names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BridgeState {
    /// No bridge worker has started since the server did.
    NotStarted = 0,
    /// Waiting for `CREATE EXTENSION kafgres` in `kafgres.database`.
    WaitingForExtension = 1,
    /// Reading the WAL and applying sends as they commit.
    Running = 2,
    /// The broker cannot be reached; retried with a backoff.
    WaitingForBroker = 3,
    /// Something failed (the message says what); retried with a backoff.
    Failing = 4,
    /// Stopped by a shutdown or a signal.
    Stopped = 5,
}

impl BridgeState {
    pub fn name(self) -> &'static str {
        match self {
            BridgeState::NotStarted => "not started",
            BridgeState::WaitingForExtension => "waiting for the extension",
            BridgeState::Running => "running",
            BridgeState::WaitingForBroker => "waiting for the broker",
            BridgeState::Failing => "failing",
            BridgeState::Stopped => "stopped",
        }
    }

    fn from_code(code: u32) -> BridgeState {
        match code {
            1 => BridgeState::WaitingForExtension,
            2 => BridgeState::Running,
            3 => BridgeState::WaitingForBroker,
            4 => BridgeState::Failing,
            5 => BridgeState::Stopped,
            _ => BridgeState::NotStarted,
        }
    }
}

/// The block. `repr(C)` and only atomics, byte arrays and a Postgres
/// condition variable: valid when zeroed, shared by address.
///
/// What other processes change behind a `&BridgeShared` (the condition
/// variable, which Postgres's C code writes; the text and the queue, written
/// under `lock`) is in an `UnsafeCell`: without one, Rust may assume memory
/// behind a shared reference never changes. `UnsafeCell<T>` has `T`'s layout,
/// so the block is the same bytes either way.
#[repr(C)]
pub struct BridgeShared {
    /// PGPROC number + 1 of the running bridge (0: none).
    procno_plus_one: AtomicI32,
    pid: AtomicI32,
    state: AtomicU32,
    state_since_ms: AtomicI64,
    /// Every transaction committed before this is in the log.
    applied_lsn: AtomicU64,
    /// Where the bridge would resume reading (its slot's position).
    restart_lsn: AtomicU64,
    /// How far the bridge has read.
    read_lsn: AtomicU64,
    last_applied_ms: AtomicI64,
    /// Commit time of the newest transaction applied, and of the oldest one
    /// read and committed but not applied yet (0: none waits): the delivery
    /// lag in time, as `pg_stat_replication`'s lags are in time.
    last_commit_ms: AtomicI64,
    pending_commit_ms: AtomicI64,
    transactions_applied: AtomicU64,
    records_applied: AtomicU64,
    records_dropped: AtomicU64,
    incomplete_transactions: AtomicU64,
    errors: AtomicU64,
    /// Starts in a row within a minute of each other, and the last start, for
    /// the restart backoff.
    failures: AtomicU32,
    last_failure_ms: AtomicI64,
    applied_changed: UnsafeCell<pg_sys::ConditionVariable>,
    lock: AtomicBool,
    message_len: AtomicU32,
    message: UnsafeCell<[u8; MESSAGE_BYTES_MAX]>,
    groups_len: AtomicU32,
    groups_overflowed: AtomicBool,
    group_lens: UnsafeCell<[u8; GROUP_QUEUE_DEPTH]>,
    groups: UnsafeCell<[[u8; GROUP_ID_BYTES_MAX]; GROUP_QUEUE_DEPTH]>,
}

static BLOCK: AtomicPtr<BridgeShared> = AtomicPtr::new(std::ptr::null_mut());
static mut PREVIOUS_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREVIOUS_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// Called from `_PG_init` while preloading.
pub fn init() {
    // SAFETY: _PG_init runs once per process, on its only thread, before any
    // hook can be called; chaining keeps other libraries' hooks.
    unsafe {
        PREVIOUS_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request);
        PREVIOUS_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(startup);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request() {
    // SAFETY: called by Postgres in its shmem_request_hook, the one place
    // RequestAddinShmemSpace may run.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST_HOOK {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<BridgeShared>());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn startup() {
    // SAFETY: called by Postgres in its shmem_startup_hook; AddinShmemInitLock
    // (MainLWLockArray[21]) serializes ShmemInitStruct between processes, and
    // the block is initialised once, by whoever creates it.
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP_HOOK {
            previous();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let block =
            pg_sys::ShmemInitStruct(c"kafgres sql bridge".as_ptr(), std::mem::size_of::<BridgeShared>(), &mut found)
                .cast::<BridgeShared>();
        if !found {
            std::ptr::write_bytes(block.cast::<u8>(), 0, std::mem::size_of::<BridgeShared>());
            pg_sys::ConditionVariableInit(UnsafeCell::raw_get(&raw const (*block).applied_changed));
        }
        BLOCK.store(block, Ordering::Release);
        pg_sys::LWLockRelease(lock);
    }
}

/// The block, or `None` when the library was not preloaded.
pub fn shared() -> Option<&'static BridgeShared> {
    let block = BLOCK.load(Ordering::Acquire);
    // SAFETY: set once at startup to a shared-memory block that lives as long
    // as the server; every field is safe to share (atomics, a condition
    // variable used only through Postgres's functions, bytes under `lock`).
    unsafe { block.as_ref() }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A copy of the status, for the view.
#[derive(Debug, Clone)]
pub struct Status {
    pub state: BridgeState,
    pub pid: i32,
    pub state_since_ms: i64,
    pub applied_lsn: u64,
    pub restart_lsn: u64,
    pub read_lsn: u64,
    pub last_applied_ms: i64,
    pub last_commit_ms: i64,
    pub pending_commit_ms: i64,
    pub transactions_applied: u64,
    pub records_applied: u64,
    pub records_dropped: u64,
    pub incomplete_transactions: u64,
    pub errors: u64,
    pub message: String,
}

impl BridgeShared {
    fn with_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        while self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        let result = f();
        self.lock.store(false, Ordering::Release);
        result
    }

    /// Records this process as the running bridge.
    pub fn register_bridge(&self) {
        // SAFETY: MyProc and MyProcPid are set for every background worker
        // before its main function runs; read on the main thread.
        let (procno, pid) = unsafe { ((*pg_sys::MyProc).pgprocno, pg_sys::MyProcPid) };
        self.pid.store(pid, Ordering::SeqCst);
        self.procno_plus_one.store(procno + 1, Ordering::SeqCst);
    }

    pub fn unregister_bridge(&self) {
        self.procno_plus_one.store(0, Ordering::SeqCst);
        self.pid.store(0, Ordering::SeqCst);
    }

    /// Sets the bridge's latch (a commit callback may call it: it cannot fail).
    pub fn wake_bridge(&self) {
        let procno = self.procno_plus_one.load(Ordering::SeqCst) - 1;
        set_latch_of(procno);
    }

    pub fn set_state(&self, state: BridgeState, message: &str) {
        if self.state.swap(state as u32, Ordering::SeqCst) != state as u32 {
            self.state_since_ms.store(now_ms(), Ordering::SeqCst);
        }
        self.set_message(message);
    }

    pub fn state(&self) -> BridgeState {
        BridgeState::from_code(self.state.load(Ordering::SeqCst))
    }

    pub fn set_message(&self, message: &str) {
        let mut end = message.len().min(MESSAGE_BYTES_MAX);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = &message.as_bytes()[..end];
        let base = self.message.get().cast::<u8>();
        self.with_lock(|| {
            // SAFETY: the lock gives this process sole access to `message`;
            // `end` is at most its length.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, bytes.len()) };
            self.message_len.store(bytes.len() as u32, Ordering::Relaxed);
        });
    }

    pub fn count_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_incomplete(&self, n: u64) {
        self.incomplete_transactions.fetch_add(n, Ordering::Relaxed);
    }

    /// Publishes progress after a round and wakes every session waiting for it.
    pub fn publish_applied(&self, applied_lsn: u64, restart_lsn: u64, transactions: u64, records: u64, dropped: u64) {
        self.restart_lsn.store(restart_lsn, Ordering::SeqCst);
        let before = self.applied_lsn.fetch_max(applied_lsn, Ordering::SeqCst);
        if transactions > 0 {
            self.transactions_applied.fetch_add(transactions, Ordering::Relaxed);
            self.records_applied.fetch_add(records, Ordering::Relaxed);
            self.last_applied_ms.store(now_ms(), Ordering::Relaxed);
        }
        self.records_dropped.fetch_add(dropped, Ordering::Relaxed);
        if applied_lsn > before {
            // SAFETY: the condition variable was initialised with the block;
            // broadcasting takes its own spin lock and sets waiters' latches.
            unsafe { pg_sys::ConditionVariableBroadcast(self.applied_changed.get()) };
        }
    }

    /// A transaction that sent committed (its commit callback): from now on
    /// something waits, unless something already did. Cannot fail.
    pub fn note_commit_waiting(&self) {
        let _ = self.pending_commit_ms.compare_exchange(0, now_ms().max(1), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// What waits now (0: nothing), read by the bridge before it reads the
    /// WAL: every commit noted by then is in what that read finds.
    pub fn pending_commit_ms(&self) -> i64 {
        self.pending_commit_ms.load(Ordering::SeqCst)
    }

    /// A round of committed transactions is about to be applied: the oldest
    /// commit among them waits from now on, unless an older one was noted.
    /// Returns what waits now, for [`Self::publish_delivered`].
    pub fn publish_pending(&self, oldest_commit_ms: i64) -> i64 {
        match self.pending_commit_ms.compare_exchange(0, oldest_commit_ms.max(1), Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => oldest_commit_ms.max(1),
            Err(current) => current,
        }
    }

    /// What waited (`waited`, as read before the WAL or returned by
    /// `publish_pending`) was delivered, up to a commit at `newest_commit_ms`
    /// (0: nothing was to deliver). A commit noted since stays waiting.
    pub fn publish_delivered(&self, waited: i64, newest_commit_ms: i64) {
        if newest_commit_ms > 0 {
            self.last_commit_ms.fetch_max(newest_commit_ms, Ordering::SeqCst);
        }
        if waited != 0 {
            let _ = self.pending_commit_ms.compare_exchange(waited, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    pub fn publish_read(&self, read_lsn: u64) {
        self.read_lsn.store(read_lsn, Ordering::Relaxed);
    }

    pub fn applied_lsn(&self) -> u64 {
        self.applied_lsn.load(Ordering::SeqCst)
    }

    /// Sleeps until `applied_lsn` reaches `target` or `timeout` passes (or an
    /// interrupt is raised, which ends the statement). Returns whether it got there.
    pub fn wait_for_applied(&self, target: u64, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let cv = self.applied_changed.get();
        // SAFETY: the condition variable lives in shared memory for the life
        // of the server; the prepare/sleep/cancel sequence is Postgres's own
        // protocol, and ConditionVariableTimedSleep checks for interrupts.
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        let reached = loop {
            if self.applied_lsn() >= target {
                break true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break false;
            }
            let left_ms = left.as_millis().clamp(1, i64::from(i32::MAX) as u128) as std::ffi::c_long;
            // SAFETY: as above.
            unsafe { pg_sys::ConditionVariableTimedSleep(cv, left_ms, pg_sys::PG_WAIT_EXTENSION) };
        };
        // SAFETY: as above.
        unsafe { pg_sys::ConditionVariableCancelSleep() };
        reached
    }

    pub fn status(&self) -> Status {
        let base = self.message.get().cast_const().cast::<u8>();
        let message = self.with_lock(|| {
            let len = (self.message_len.load(Ordering::Relaxed) as usize).min(MESSAGE_BYTES_MAX);
            // SAFETY: under the lock, the first `len` bytes are a whole UTF-8
            // string written by `set_message`.
            String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(base, len) }).into_owned()
        });
        Status {
            state: self.state(),
            pid: self.pid.load(Ordering::SeqCst),
            state_since_ms: self.state_since_ms.load(Ordering::SeqCst),
            applied_lsn: self.applied_lsn(),
            restart_lsn: self.restart_lsn.load(Ordering::SeqCst),
            read_lsn: self.read_lsn.load(Ordering::Relaxed),
            last_applied_ms: self.last_applied_ms.load(Ordering::Relaxed),
            last_commit_ms: self.last_commit_ms.load(Ordering::Relaxed),
            pending_commit_ms: self.pending_commit_ms.load(Ordering::Relaxed),
            transactions_applied: self.transactions_applied.load(Ordering::Relaxed),
            records_applied: self.records_applied.load(Ordering::Relaxed),
            records_dropped: self.records_dropped.load(Ordering::Relaxed),
            incomplete_transactions: self.incomplete_transactions.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            message,
        }
    }

    /// Called at every start of the bridge worker: how long to wait first
    /// (the rule of `crate::wake::quick_start_delay`).
    pub fn start_delay(&self) -> std::time::Duration {
        let last = self.last_failure_ms.swap(now_ms(), Ordering::SeqCst);
        crate::wake::quick_start_delay(now_ms() - last, &self.failures)
    }

    /// Queues the groups whose offsets SQL committed, for the broker worker.
    pub fn queue_groups<'a>(&self, groups: impl IntoIterator<Item = &'a str>) {
        let slots = self.groups.get();
        let lens = self.group_lens.get();
        self.with_lock(|| {
            // SAFETY: the lock gives this process sole access to the queue's
            // arrays while these references live.
            let (slots, lens) = unsafe { (&mut *slots, &mut *lens) };
            for group in groups {
                let len = (self.groups_len.load(Ordering::Relaxed) as usize).min(GROUP_QUEUE_DEPTH);
                let bytes = group.as_bytes();
                if bytes.len() > GROUP_ID_BYTES_MAX || len >= GROUP_QUEUE_DEPTH {
                    self.groups_overflowed.store(true, Ordering::Relaxed);
                    continue;
                }
                let queued = (0..len).any(|i| &slots[i][..usize::from(lens[i])] == bytes);
                if queued {
                    continue;
                }
                slots[len][..bytes.len()].copy_from_slice(bytes);
                lens[len] = bytes.len() as u8;
                self.groups_len.store(len as u32 + 1, Ordering::Relaxed);
            }
        });
    }

    /// Takes the queued groups: `None` means "every group" (the queue overflowed).
    pub fn take_groups(&self) -> Option<Vec<String>> {
        let slots = self.groups.get().cast_const();
        let lens = self.group_lens.get().cast_const();
        self.with_lock(|| {
            // SAFETY: as in `queue_groups`.
            let (slots, lens) = unsafe { (&*slots, &*lens) };
            let len = (self.groups_len.swap(0, Ordering::Relaxed) as usize).min(GROUP_QUEUE_DEPTH);
            if self.groups_overflowed.swap(false, Ordering::Relaxed) {
                return None;
            }
            Some(
                (0..len)
                    .map(|i| {
                        let n = usize::from(lens[i]).min(GROUP_ID_BYTES_MAX);
                        String::from_utf8_lossy(&slots[i][..n]).into_owned()
                    })
                    .collect(),
            )
        })
    }
}

/// Sets the latch of the process with PGPROC number `procno` (no-op for a
/// negative or out-of-range number). Cannot fail: safe in commit callbacks.
pub fn set_latch_of(procno: i32) {
    if procno < 0 {
        return;
    }
    // SAFETY: ProcGlobal is set up before any backend or worker runs; the
    // number is checked against allProcCount; SetLatch on another process's
    // latch is how Postgres wakes processes (a stale number wakes an innocent
    // process, which every wait loop tolerates). The latch is reached by a
    // raw pointer, never a `&mut`: its owner changes it concurrently.
    unsafe {
        let global = pg_sys::ProcGlobal;
        if global.is_null() || procno as u32 >= (*global).allProcCount {
            return;
        }
        pg_sys::SetLatch(&raw mut (*(*global).allProcs.add(procno as usize)).procLatch);
    }
}
