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

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, register_xact_callback, PgAtomic, PgXactCallbackEvent};

static WORKER_PID: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"kafgres_worker_pid") };
/// The worker's PGPROC number, -1 when none runs.
static WORKER_PROCNO: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"kafgres_worker_procno") };

/// Set in the postmaster when the library is preloaded; backends inherit it
/// by fork. Without preloading there is no shared slot and no worker to wake.
static SHARED_MEMORY_REQUESTED: AtomicBool = AtomicBool::new(false);

pub fn init_shared_memory() {
    pg_shmem_init!(WORKER_PID);
    pg_shmem_init!(WORKER_PROCNO = AtomicI32::new(-1));
    SHARED_MEMORY_REQUESTED.store(true, Ordering::SeqCst);
}

/// Records the running worker's pid (0 when none runs) and, while it runs,
/// its PGPROC number.
pub fn publish_worker_pid(pid: i32) {
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
    let procno = WORKER_PROCNO.get().load(Ordering::SeqCst);
    if procno < 0 {
        return;
    }
    unsafe {
        let global = pg_sys::ProcGlobal;
        if global.is_null() || procno as u32 >= (*global).allProcCount {
            return;
        }
        pg_sys::SetLatch(&mut (*(*global).allProcs.add(procno as usize)).procLatch);
    }
}

/// Called at the end of the extension's install script.
#[pg_extern(volatile, parallel_unsafe)]
fn _wake_broker() {
    if !SHARED_MEMORY_REQUESTED.load(Ordering::SeqCst) {
        return;
    }
    register_xact_callback(PgXactCallbackEvent::Commit, || {
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
