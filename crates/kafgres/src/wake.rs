//! Waking the broker worker from another backend.
//!
//! The worker publishes its pid in shared memory before it checks whether the
//! schema exists, and `CREATE EXTENSION kafgres` registers a commit callback
//! that sends it SIGUSR1 (which sets a background worker's latch). So a worker
//! that found no schema sleeps on its latch, with no timer, until the schema's
//! transaction commits.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, register_xact_callback, PgAtomic, PgXactCallbackEvent};

static WORKER_PID: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"kafgres_worker_pid") };

/// Set in the postmaster when the library is preloaded; backends inherit it
/// by fork. Without preloading there is no shared slot and no worker to wake.
static SHARED_MEMORY_REQUESTED: AtomicBool = AtomicBool::new(false);

pub fn init_shared_memory() {
    pg_shmem_init!(WORKER_PID);
    SHARED_MEMORY_REQUESTED.store(true, Ordering::SeqCst);
}

/// Records the running worker's pid (0 when none runs).
pub fn publish_worker_pid(pid: i32) {
    WORKER_PID.get().store(pid, Ordering::SeqCst);
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
            unsafe {
                libc::kill(pid, libc::SIGUSR1);
            }
        }
    });
}
