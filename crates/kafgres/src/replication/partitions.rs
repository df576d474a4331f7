//! `kafgres.replica_partitions`: each standby's copy of each partition, as
//! the leader sees it. The rows live in the broker's memory, one per
//! standby and partition, too many for a fixed shared block: a backend asks
//! for them with a ticket on the replication board, the broker worker writes
//! them to `pg_stat_tmp` (`kafgres_broker::replication::partition_status`)
//! and sets the latch of every waiting backend, which then reads the file.
//! The same ticket answers `kafgres.client_metrics` (`crate::client_metrics`):
//! each answer writes both files, so one mechanism serves every view of live
//! broker state too large for shared memory.

use std::time::{Duration, Instant};

use kafgres_broker::context::BrokerContext;
use kafgres_broker::replication::board::{ReplicationBoard, Role};
use kafgres_broker::replication::partition_status::{self, ReplicaPartitionRow};
use pgrx::prelude::*;

use super::status::{at, board};

/// Where the worker writes the rows, relative to the data directory (every
/// server process's working directory): PostgreSQL's directory for
/// statistics files, emptied at each start.
const STATUS_FILE: &str = "pg_stat_tmp/kafgres_replica_partitions";
/// How long a backend waits for the worker's answer (the worker answers at
/// its next wake-up; it is busy at most with a catalog transaction).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a backend that found no free waiter slot looks again.
const UNLISTED_RECHECK: Duration = Duration::from_millis(10);

/// The worker, at each wake-up: answers the backends that asked.
pub fn answer_status_requests(ctx: &BrokerContext) {
    let Some(metrics) = crate::shared_metrics::metrics() else { return };
    let board = &metrics.replication;
    let Some(ticket) = board.status_wanted() else { return };
    write_status(STATUS_FILE, &partition_status::encode(&partition_status::rows(&ctx.topics)));
    crate::client_metrics::write_status_file(ctx);
    board.status_answered(ticket);
    for procno in board.status_waiters() {
        crate::wake::set_process_latch(procno);
    }
}

/// Writes one status file for the waiting backends.
pub(crate) fn write_status(path: &str, text: &str) {
    if let Err(e) = write_atomically(path, text) {
        // The backends then read no file (or an older one, which they
        // report as is): they say so, they do not hang.
        warning!("kafgres: cannot write {path}: {e}");
        let _ = std::fs::remove_file(path);
    }
}

/// A status file needs no fsync (it is read at once and means nothing after
/// a crash), only that a reader never sees half of it.
fn write_atomically(path: &str, text: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Unlists a waiting backend however the function ends (an ERROR unwinds).
struct Listed<'a> {
    board: &'a ReplicationBoard,
    slot: Option<usize>,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.board.remove_status_waiter(slot);
        }
    }
}

/// Asks the broker worker for fresh status files and waits for its answer;
/// `view` names the view asking, for the error if the worker does not answer.
pub(crate) fn wait_for_status(board: &ReplicationBoard, view: &str) {
    // SAFETY: MyProc is this backend's own PGPROC, set up before any SQL
    // function runs; pgprocno is fixed for its life.
    let procno = unsafe { (*pg_sys::MyProc).pgprocno };
    let listed = Listed { board, slot: board.add_status_waiter(procno) };
    let ticket = board.request_status();
    crate::wake::set_worker_latch();
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while !board.status_ready(ticket) {
        let now = Instant::now();
        if now >= deadline {
            error!(
                "kafgres: the broker did not answer for {view} within {} s (is it starting, or \
                 stuck in a catalog transaction?)",
                ANSWER_TIMEOUT.as_secs()
            );
        }
        let wait = if listed.slot.is_some() { deadline - now } else { UNLISTED_RECHECK.min(deadline - now) };
        let timeout_ms = wait.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long;
        // SAFETY: MyLatch is this backend's own latch, and this is the
        // backend's only thread, the one Postgres's wait functions run on.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                timeout_ms,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        check_for_interrupts!();
    }
    drop(listed);
}

fn ask_the_broker(board: &ReplicationBoard) -> Vec<ReplicaPartitionRow> {
    wait_for_status(board, "kafgres.replica_partitions");
    let text = std::fs::read_to_string(STATUS_FILE).unwrap_or_else(|e| {
        error!("kafgres: cannot read {STATUS_FILE}, which the broker writes for kafgres.replica_partitions: {e}")
    });
    partition_status::decode(&text).unwrap_or_else(|e| error!("kafgres: {STATUS_FILE}: {e}"))
}

/// On a leader: each standby's copy of each partition (no rows elsewhere).
// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _replica_partitions() -> TableIterator<
    'static,
    (
        name!(standby, String),
        name!(topic, String),
        name!(partition, i32),
        name!(replicated_offset, i64),
        name!(log_end_offset, i64),
        name!(high_watermark, i64),
        name!(lag_records, i64),
        name!(caught_up_at, Option<TimestampWithTimeZone>),
    ),
> {
    let board = board();
    if board.node().role != Role::Leader {
        return TableIterator::new(Vec::new());
    }
    let rows: Vec<_> = ask_the_broker(board)
        .into_iter()
        .map(|r| {
            let lag = (r.log_end_offset - r.replicated_offset).max(0);
            (
                r.standby,
                r.topic,
                r.partition,
                r.replicated_offset,
                r.log_end_offset,
                r.high_watermark,
                lag,
                r.caught_up_ms.and_then(at),
            )
        })
        .collect();
    TableIterator::new(rows)
}
