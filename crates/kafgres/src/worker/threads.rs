//! The data plane's threads. Every thread it creates starts with all signals
//! blocked: Postgres's handlers (SIGHUP, SIGTERM, SIGUSR1...) call into
//! Postgres and must only ever run on the worker's main thread.

use std::io;

/// Runs `f` with every signal blocked on this thread, restoring the mask
/// after. Threads spawned inside inherit the blocked mask.
pub fn with_signals_blocked<R>(f: impl FnOnce() -> R) -> io::Result<R> {
    // SAFETY: sigset_t is a C bit set, for which all-zero bytes are a valid
    // (empty) value; sigfillset and pthread_sigmask only touch the two live
    // locals they are handed, and change the calling thread's mask alone.
    let (rc, previous) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        (libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous), previous)
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let result = f();
    // SAFETY: puts back the mask saved above, on the same thread; the call
    // only reads `previous`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    Ok(result)
}

fn block_all_signals_on_this_thread() {
    // SAFETY: as in `with_signals_blocked`: a zeroed sigset_t is valid, and
    // the calls touch only that local and this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// A multi-threaded tokio runtime whose threads never take a signal.
pub fn build_runtime(worker_threads: usize) -> io::Result<tokio::runtime::Runtime> {
    with_signals_blocked(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("kafgres-data")
            .on_thread_start(block_all_signals_on_this_thread)
            .enable_io()
            .enable_time()
            .build()
    })?
}
