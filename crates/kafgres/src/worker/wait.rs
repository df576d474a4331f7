//! The worker's only blocking point: a WaitEventSet holding its latch
//! (signals, SIGUSR1 from CREATE EXTENSION), postmaster death (exit at once)
//! and the eventfd the data plane writes. No timeout: the worker sleeps until
//! one of them fires (the exceptions are the backoffs before retrying a
//! failed start).

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::pg_sys;

/// Set once SIGTERM arrives (pgrx's own flag is cleared when read, and the
/// worker reads it at several levels: a role's loop, its start, a backoff).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether SIGTERM has arrived (it stays so).
pub fn stopping() -> bool {
    if !STOPPING.load(Ordering::Relaxed) && pgrx::bgworkers::BackgroundWorker::sigterm_received() {
        STOPPING.store(true, Ordering::Relaxed);
    }
    STOPPING.load(Ordering::Relaxed)
}

pub struct WaitSet {
    set: *mut pg_sys::WaitEventSet,
}

/// What woke the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    Latch,
    DataPlane,
}

impl WaitSet {
    /// Builds the set in TopMemoryContext (it lives as long as the worker).
    pub fn new(eventfd: i32) -> WaitSet {
        // SAFETY: called on the worker's main thread (a WaitSet holds a raw
        // pointer, so it is neither Send nor Sync and stays there). The set is
        // allocated in TopMemoryContext, which is never reset, so the pointer
        // stays valid for the worker's life; it is sized for the three events
        // added; MyLatch is this process's own latch, and `eventfd` the
        // caller's descriptor, which it keeps open as long as the set.
        unsafe {
            let set = pg_sys::CreateWaitEventSet(pg_sys::TopMemoryContext, 3);
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_LATCH_SET,
                pg_sys::PGINVALID_SOCKET,
                pg_sys::MyLatch,
                std::ptr::null_mut(),
            );
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_EXIT_ON_PM_DEATH,
                pg_sys::PGINVALID_SOCKET,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_SOCKET_READABLE,
                eventfd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            WaitSet { set }
        }
    }

    /// Sleeps for `duration` (woken early by the latch, which is re-checked);
    /// false when SIGTERM arrived meanwhile.
    pub fn sleep(&self, duration: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + duration;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            self.wait_at_most(Some(left));
            if stopping() {
                return false;
            }
            pgrx::check_for_interrupts!();
        }
    }

    /// Blocks until the latch is set or the data plane wakes us.
    pub fn wait(&self) -> Wakeup {
        self.wait_at_most(None)
    }

    /// As [`WaitSet::wait`], but returns after `timeout` if nothing fired
    /// (reported as a latch wake-up: the caller re-checks everything anyway).
    pub fn wait_at_most(&self, timeout: Option<std::time::Duration>) -> Wakeup {
        let timeout_ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as std::ffi::c_long);
        let mut event = pg_sys::WaitEvent::default();
        // SAFETY: `self.set` is the live set built in `new`, on this, the main
        // thread; `event` is room for the one event asked for.
        let fired = unsafe { pg_sys::WaitEventSetWait(self.set, timeout_ms, &mut event, 1, pg_sys::PG_WAIT_EXTENSION) };
        if fired > 0 && event.events & pg_sys::WL_SOCKET_READABLE != 0 {
            Wakeup::DataPlane
        } else {
            // SAFETY: our own latch, on the main thread, after the wait (the
            // order Postgres's latch protocol asks for).
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            Wakeup::Latch
        }
    }
}
