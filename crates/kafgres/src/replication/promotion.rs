//! Noticing a promotion. PostgreSQL tells no background worker that
//! recovery has ended, but it starts the workers registered to start then
//! (`BgWorkerStart_RecoveryFinished`). So a standby's broker registers a
//! dynamic worker of that kind, the notifier, which the postmaster starts at
//! the promotion: it sets the broker worker's latch and exits (forgotten: it
//! never restarts). The broker, woken, sees recovery over and becomes the
//! leader, with no polling.
//!
//! One notifier at most is pending: a flag in shared memory says one is
//! registered (a broker restarted on the standby does not register another,
//! which would hold a worker slot each), and the notifier clears it when it
//! runs. A crash of the server forgets pending never-restart workers and
//! resets shared memory with them, so the flag and the registrations agree.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};

// SAFETY: a unique shared-memory name, in this extension's namespace (the
// others are listed in `crate::wake`).
static NOTIFIER_PENDING: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"kafgres_promotion_notifier") };

pub fn init_shared_memory() {
    pg_shmem_init!(NOTIFIER_PENDING);
}

/// Makes sure a notifier waits for the end of recovery. Err when none could
/// be registered (no free worker slot: `max_worker_processes`).
pub fn arm() -> Result<(), String> {
    if NOTIFIER_PENDING.get().swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let registered = BackgroundWorkerBuilder::new("kafgres promotion notifier")
        .set_type("kafgres promotion notifier")
        .set_function("kafgres_promotion_notifier_main")
        .set_library("kafgres")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .load_dynamic();
    match registered {
        Ok(_) => Ok(()),
        Err(e) => {
            NOTIFIER_PENDING.get().store(false, Ordering::SeqCst);
            Err(format!("cannot register the promotion notifier ({e:?}); raise max_worker_processes"))
        }
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn kafgres_promotion_notifier_main(_arg: pg_sys::Datum) {
    NOTIFIER_PENDING.get().store(false, Ordering::SeqCst);
    crate::wake::set_worker_latch();
    // Returning exits 0: a never-restart worker is then forgotten.
}
