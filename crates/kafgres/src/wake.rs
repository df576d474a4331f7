//! Waking the broker worker from another backend.
//!
//! The worker publishes its pid in shared memory before it checks whether the
//! schema exists, and `CREATE EXTENSION kafgres` registers a commit callback
//! that sends it SIGUSR1 (which sets a background worker's latch). So a worker
//! that found no schema sleeps on its latch, with no timer, until the schema's
//! transaction commits.
//!
//! The worker also publishes its PGPROC number: a transaction that sent
//! records from SQL sets the worker's latch when it commits (no signal when
//! the latch is already set), so the worker decodes the commit at once.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, register_xact_callback, PgAtomic, PgXactCallbackEvent};

// SAFETY: PgAtomic::new asks for a shared-memory name no other allocation
// uses. These five names and the blocks of `shared_metrics` and
// `bridge::shared` are this library's only ones, all distinct, and all
// prefixed with "kafgres", this extension's namespace, so as not to meet
// another library's.
static WORKER_PID: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"kafgres_worker_pid") };
/// When the broker worker last started (ms since the Unix epoch), and how
/// many times in a row it started within a minute of the previous start.
// SAFETY: a unique name, as above.
static WORKER_LAST_START_MS: PgAtomic<AtomicI64> = unsafe { PgAtomic::new(c"kafgres_worker_last_start") };
// SAFETY: a unique name, as above.
static WORKER_QUICK_STARTS: PgAtomic<AtomicU32> = unsafe { PgAtomic::new(c"kafgres_worker_quick_starts") };
/// How many times a transaction that ran the extension's install or update
/// script committed since the server started: a running broker that sees it
/// change checks that its catalog is still the one it loaded.
// SAFETY: a unique name, as above.
static SCHEMA_GENERATION: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"kafgres_schema_generation") };
/// The worker's PGPROC number, -1 when none runs.
// SAFETY: a unique name, as above.
static WORKER_PROCNO: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"kafgres_worker_procno") };

/// Set in the postmaster when the library is preloaded; backends inherit it
/// by fork. Without preloading there is no shared slot and no worker to wake.
static SHARED_MEMORY_REQUESTED: AtomicBool = AtomicBool::new(false);

pub fn init_shared_memory() {
    pg_shmem_init!(WORKER_PID);
    pg_shmem_init!(WORKER_PROCNO = AtomicI32::new(-1));
    pg_shmem_init!(WORKER_LAST_START_MS);
    pg_shmem_init!(WORKER_QUICK_STARTS);
    pg_shmem_init!(SCHEMA_GENERATION);
    SHARED_MEMORY_REQUESTED.store(true, Ordering::SeqCst);
}

/// How long a starting broker worker waits first: nothing for its first
/// start or the first restart within a minute of a start, then 1, 2, 4 ...
/// 60 s for each further one in a row (a worker terminated or failing again
/// and again backs off instead of looping).
pub fn start_delay() -> std::time::Duration {
    let last = WORKER_LAST_START_MS.get().swap(crate::bridge::shared::now_ms(), Ordering::SeqCst);
    quick_start_delay(crate::bridge::shared::now_ms() - last, WORKER_QUICK_STARTS.get())
}

/// The backoff rule both workers use: `since_last_ms` since the previous
/// start, `streak` counting starts in a row within a minute.
pub fn quick_start_delay(since_last_ms: i64, streak: &AtomicU32) -> std::time::Duration {
    if since_last_ms > 60_000 {
        streak.store(0, Ordering::SeqCst);
        return std::time::Duration::ZERO;
    }
    // The first restart after a start goes at once; the ones after it wait
    // 1, 2, 4 ... 60 s.
    match streak.fetch_add(1, Ordering::SeqCst) {
        0 => std::time::Duration::ZERO,
        n => std::time::Duration::from_secs(1 << (n - 1).min(6)).min(std::time::Duration::from_secs(60)),
    }
}

/// Records the running worker's pid (0 when none runs) and, while it runs,
/// its PGPROC number.
pub fn publish_worker_pid(pid: i32) {
    // SAFETY: only the broker worker's main thread calls this, and a
    // background worker's MyProc points at its own PGPROC, set up before its
    // main function runs; pgprocno is fixed for the PGPROC's life.
    let procno = if pid > 0 { unsafe { (*pg_sys::MyProc).pgprocno } } else { -1 };
    WORKER_PROCNO.get().store(procno, Ordering::SeqCst);
    WORKER_PID.get().store(pid, Ordering::SeqCst);
}

/// Sets the worker's latch. Safe to call from a commit callback: it cannot
/// fail, and a stale number (the worker just exited) only wakes another
/// process spuriously, which every Postgres wait loop tolerates.
pub fn set_worker_latch() {
    if !SHARED_MEMORY_REQUESTED.load(Ordering::SeqCst) {
        return;
    }
    set_process_latch(WORKER_PROCNO.get().load(Ordering::SeqCst));
}

/// Sets the latch of the process with PGPROC number `procno` (nothing for
/// a negative one). A stale number wakes another process spuriously, which
/// every Postgres wait loop tolerates.
pub fn set_process_latch(procno: i32) {
    if procno < 0 {
        return;
    }
    // SAFETY: ProcGlobal points at the PGPROC array in shared memory, set up
    // before any backend or worker runs and never moved; `procno` is checked
    // against allProcCount, the array's length. SetLatch on another process's
    // latch is how Postgres itself wakes a process (it is made for that, and
    // cannot fail). The latch is reached by a raw pointer, never a Rust
    // reference: its owner changes it concurrently.
    unsafe {
        let global = pg_sys::ProcGlobal;
        if global.is_null() || procno as u32 >= (*global).allProcCount {
            return;
        }
        pg_sys::SetLatch(&raw mut (*(*global).allProcs.add(procno as usize)).procLatch);
    }
}

/// The count of committed install and update scripts (see [`SCHEMA_GENERATION`]).
pub fn schema_generation() -> u64 {
    if !SHARED_MEMORY_REQUESTED.load(Ordering::SeqCst) {
        return 0;
    }
    SCHEMA_GENERATION.get().load(Ordering::SeqCst)
}

/// Called at the end of the extension's install script.
#[pg_extern(volatile, parallel_unsafe)]
fn _wake_broker() {
    if !SHARED_MEMORY_REQUESTED.load(Ordering::SeqCst) {
        return;
    }
    register_xact_callback(PgXactCallbackEvent::Commit, || {
        SCHEMA_GENERATION.get().fetch_add(1, Ordering::SeqCst);
        let pid = WORKER_PID.get().load(Ordering::SeqCst);
        if pid > 0 {
            // Nothing here may fail: a commit callback cannot raise errors.
            // SAFETY: kill(2) with a pid and a signal number; at worst a
            // stale pid gets a SIGUSR1, which Postgres processes ignore.
            unsafe {
                libc::kill(pid, libc::SIGUSR1);
            }
        }
        // The SQL bridge waits for the same schema (CREATE or ALTER EXTENSION).
        if let Some(bridge) = crate::bridge::shared::shared() {
            bridge.wake_bridge();
        }
    });
}
