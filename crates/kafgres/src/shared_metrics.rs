//! The broker's counters and connection table in Postgres shared memory.
//!
//! The block is a `kafgres_broker::metrics::BrokerMetrics`: atomics only,
//! valid when zeroed. The postmaster allocates and zeroes it at startup; the
//! worker hands it to the data plane, whose threads count into it; any
//! backend reads it for the `kafgres.broker_metrics`, `kafgres.flush_latency`,
//! `kafgres.request_latency` and `kafgres.connections` views. A worker
//! restart keeps the counters (they count since the server started).

use std::sync::atomic::{AtomicPtr, Ordering};

use kafgres_broker::metrics::BrokerMetrics;
use pgrx::pg_sys;
use pgrx::prelude::*;

static BLOCK: AtomicPtr<BrokerMetrics> = AtomicPtr::new(std::ptr::null_mut());
static mut PREVIOUS_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREVIOUS_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// Called from `_PG_init` while preloading.
pub fn init() {
    // SAFETY: _PG_init runs once per process, on its only thread, before
    // Postgres calls either hook, so nothing reads these statics meanwhile;
    // keeping the previous hooks and calling them first chains other
    // libraries' hooks, as Postgres's hook convention asks.
    unsafe {
        PREVIOUS_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request);
        PREVIOUS_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(startup);
    }
}

/// The block, or `None` when the library was not preloaded.
pub fn metrics() -> Option<&'static BrokerMetrics> {
    let block = BLOCK.load(Ordering::Acquire);
    // SAFETY: set once at startup to a shared-memory block that lives as
    // long as the server, and BrokerMetrics is only atomics.
    unsafe { block.as_ref() }
}

/// # Safety
///
/// Only Postgres calls this, as its `shmem_request_hook`, in the postmaster's
/// only thread: the one place RequestAddinShmemSpace may run.
#[pg_guard]
unsafe extern "C-unwind" fn request() {
    // SAFETY: per the contract above; PREVIOUS_REQUEST_HOOK was written in
    // `init`, before this hook could run.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST_HOOK {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<BrokerMetrics>());
    }
}

/// # Safety
///
/// Only Postgres calls this, as its `shmem_startup_hook`, once the space asked
/// for in `request` exists, on the calling process's only thread.
#[pg_guard]
unsafe extern "C-unwind" fn startup() {
    // SAFETY: per the contract above. MainLWLockArray[21] is
    // AddinShmemInitLock in Postgres 15 (lwlocknames.h; pgrx's own PgAtomic
    // takes it the same way), which serializes ShmemInitStruct between
    // processes. ShmemInitStruct returns `size_of::<BrokerMetrics>()` bytes of
    // shared memory (it raises an ERROR rather than return NULL), aligned to
    // at least MAXALIGN (8, all BrokerMetrics needs), living as long as the
    // server; whoever creates the block zeroes it before publishing it, and all
    // zero is a valid, empty BrokerMetrics (atomics only).
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP_HOOK {
            previous();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let block = pg_sys::ShmemInitStruct(
            c"kafgres broker metrics".as_ptr(),
            std::mem::size_of::<BrokerMetrics>(),
            &mut found,
        )
        .cast::<BrokerMetrics>();
        debug_assert!(block.is_aligned(), "shared memory is MAXALIGNed");
        if !found {
            std::ptr::write_bytes(block.cast::<u8>(), 0, std::mem::size_of::<BrokerMetrics>());
        }
        BLOCK.store(block, Ordering::Release);
        pg_sys::LWLockRelease(lock);
    }
}

use crate::sql_api::POSTGRES_EPOCH_UNIX_US;

fn block_or_error() -> &'static BrokerMetrics {
    match metrics() {
        Some(m) => m,
        None => error!("kafgres: the broker's shared memory is missing: add kafgres to shared_preload_libraries"),
    }
}

#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _broker_metrics() -> TableIterator<'static, (name!(name, String), name!(value, i64))> {
    let rows: Vec<(String, i64)> =
        block_or_error().counters().into_iter().map(|(n, v)| (n.to_string(), v.min(i64::MAX as u64) as i64)).collect();
    TableIterator::new(rows)
}

/// A histogram bucket's bound as its view shows it: NULL for the open last one.
fn below_micros(bound: u64) -> Option<i64> {
    (bound != u64::MAX).then(|| i64::try_from(bound).unwrap_or(i64::MAX))
}

#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _flush_latency() -> TableIterator<'static, (name!(below_micros, Option<i64>), name!(flushes, i64))> {
    let rows: Vec<(Option<i64>, i64)> = block_or_error()
        .flush_histogram()
        .into_iter()
        .map(|(bound, n)| (below_micros(bound), n.min(i64::MAX as u64) as i64))
        .collect();
    TableIterator::new(rows)
}

// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _request_latency(
) -> TableIterator<'static, (name!(span, String), name!(below_micros, Option<i64>), name!(requests, i64))> {
    let rows: Vec<(String, Option<i64>, i64)> = block_or_error()
        .span_histograms()
        .into_iter()
        .flat_map(|(span, buckets)| {
            buckets
                .into_iter()
                .map(move |(bound, n)| (span.to_string(), below_micros(bound), n.min(i64::MAX as u64) as i64))
        })
        .collect();
    TableIterator::new(rows)
}

// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _connections() -> TableIterator<
    'static,
    (
        name!(client_addr, String),
        name!(client_port, i32),
        name!(client_id, String),
        name!(principal, Option<String>),
        name!(connected_at, Option<TimestampWithTimeZone>),
        name!(requests, i64),
        name!(bytes_in, i64),
        name!(bytes_out, i64),
    ),
> {
    let rows: Vec<_> = block_or_error()
        .connections
        .snapshot()
        .into_iter()
        .map(|c| {
            let at = c
                .connected_at_ms
                .checked_mul(1000)
                .and_then(|us| TimestampWithTimeZone::try_from(us - POSTGRES_EPOCH_UNIX_US).ok());
            (
                c.peer.ip().to_string(),
                c.peer.port() as i32,
                c.client_id,
                c.principal,
                at,
                c.requests as i64,
                c.bytes_in as i64,
                c.bytes_out as i64,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// A time of the archive board (ms since the Unix epoch, 0 for never) as SQL shows it.
fn archive_time(ms: i64) -> Option<TimestampWithTimeZone> {
    (ms > 0)
        .then(|| ms.checked_mul(1000).and_then(|us| TimestampWithTimeZone::try_from(us - POSTGRES_EPOCH_UNIX_US).ok()))
        .flatten()
}

// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _archive_status() -> TableIterator<
    'static,
    (
        name!(segments_archived, i64),
        name!(files_archived, i64),
        name!(bytes_archived, i64),
        name!(backlog_segments, i64),
        name!(last_archived, Option<String>),
        name!(last_archived_at, Option<TimestampWithTimeZone>),
        name!(failures, i64),
        name!(last_failure, Option<String>),
        name!(last_failure_at, Option<TimestampWithTimeZone>),
    ),
> {
    let s = block_or_error().archive.status();
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    TableIterator::once((
        count(s.segments_archived),
        count(s.files_archived),
        count(s.bytes_archived),
        count(s.backlog_segments),
        (!s.last_archived.is_empty()).then_some(s.last_archived),
        archive_time(s.last_archived_ms),
        count(s.failures),
        (!s.last_failure.is_empty()).then_some(s.last_failure),
        archive_time(s.last_failure_ms),
    ))
}
