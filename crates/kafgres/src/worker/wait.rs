//! The worker's only blocking point: a WaitEventSet holding its latch
//! (signals, SIGUSR1 from CREATE EXTENSION), postmaster death (exit at once)
//! and the eventfd the data plane writes. No timeout: the worker sleeps until
//! one of them fires.

use pgrx::pg_sys;

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
        unsafe {
            let set = pg_sys::CreateWaitEventSet(pg_sys::TopMemoryContext, 3);
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_LATCH_SET as u32,
                pg_sys::PGINVALID_SOCKET,
                pg_sys::MyLatch,
                std::ptr::null_mut(),
            );
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_EXIT_ON_PM_DEATH as u32,
                pg_sys::PGINVALID_SOCKET,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            pg_sys::AddWaitEventToSet(
                set,
                pg_sys::WL_SOCKET_READABLE as u32,
                eventfd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            WaitSet { set }
        }
    }

    /// Blocks until the latch is set or the data plane wakes us.
    pub fn wait(&self) -> Wakeup {
        let mut event = pg_sys::WaitEvent::default();
        let fired = unsafe { pg_sys::WaitEventSetWait(self.set, -1, &mut event, 1, pg_sys::PG_WAIT_EXTENSION) };
        if fired > 0 && event.events & pg_sys::WL_SOCKET_READABLE as u32 != 0 {
            Wakeup::DataPlane
        } else {
            unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            Wakeup::Latch
        }
    }
}
