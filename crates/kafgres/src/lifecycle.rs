//! How the workers end: exit code 0 when the server is shutting down, 1
//! otherwise.
//!
//! The postmaster forgets a background worker that exits 0 and restarts one
//! that exits 1, so a worker stopped by `pg_terminate_backend` (SIGTERM, like
//! a shutdown's) must exit 1 to come back. During a shutdown the postmaster
//! restarts nothing either way, but "exited with exit code 1" in the log of
//! every clean stop would read as a failure: the worker tells the two apart
//! by the postmaster's status line in `postmaster.pid`, which the postmaster
//! sets to `stopping` before it signals anyone.

use pgrx::pg_sys;

/// Line 8 of `postmaster.pid` (LOCK_FILE_LINE_PM_STATUS).
const PM_STATUS_LINE: usize = 7;
const PM_STATUS_STOPPING: &str = "stopping";

/// Whether the postmaster has begun a shutdown.
pub fn server_is_stopping() -> bool {
    // SAFETY: DataDir is set before any worker runs and never changes.
    let data_dir = unsafe { std::ffi::CStr::from_ptr(pg_sys::DataDir) }.to_string_lossy().into_owned();
    std::fs::read_to_string(std::path::Path::new(&data_dir).join("postmaster.pid"))
        .map(|pid_file| pid_file.lines().nth(PM_STATUS_LINE).is_some_and(|l| l.trim() == PM_STATUS_STOPPING))
        .unwrap_or(false)
}

/// Ends the worker after SIGTERM (or after giving up): 0 in a shutdown, 1
/// (restart me) otherwise.
pub fn exit_after_stop() -> ! {
    let code = if server_is_stopping() { 0 } else { 1 };
    // SAFETY: proc_exit runs Postgres's exit callbacks and never returns.
    unsafe { pg_sys::proc_exit(code) }
}
