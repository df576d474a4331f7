//! The SQL bridge worker: records sent and offsets committed from SQL
//! transactions reach the broker exactly once, in commit order, through its
//! ordinary Kafka port.
//!
//! A background worker of its own (`kafgres sql bridge`), so that nothing on
//! the SQL side shares the broker's failure domain: a slot invalidated under
//! it, a damaged record, a broker that is down or a bug here shows as a state
//! in `kafgres.sql_bridge_status` and a rate-limited log line, is retried
//! with a backoff, and never drops a Kafka connection.
//!
//! Loop: read the WAL from the checkpoint's restart point
//! ([`wal::WalReader`]), reassemble committed transactions
//! (`kafgres_bridge::Assembler`), produce their records as an idempotent
//! producer over loopback (`kafgres_bridge::Applier` through
//! `kafgres_bridge::kafka::KafkaBroker`), store the checkpoint in Postgres
//! ([`store`]), move the physical slot that retains the WAL ([`slot`]),
//! publish the applied position and wake sessions waiting for their own sends
//! ([`shared`]), and tell the broker worker which groups' offsets SQL
//! committed. It sleeps on its latch: a committing sender sets it; an idle
//! bridge also reads every [`IDLE_READ_INTERVAL`] so that the slot keeps up
//! with WAL written by everything else (housekeeping, never on a send's path).
//!
//! Where the WAL it needs is gone (the slot invalidated, or dropped), it says
//! exactly which commits may be missing in `kafgres.sql_bridge_gaps` and in
//! the server log, and continues from the oldest WAL left; a transaction it
//! finds only in part is never delivered in part (the end message of
//! `kafgres_bridge::message` tells).

pub mod prometheus;
pub mod shared;
mod slot;
pub mod status;
mod store;
mod wal;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kafgres_bridge::kafka::KafkaBroker;
use kafgres_bridge::{Applier, Assembled, Assembler, AssemblyError, CommittedTxn};
use kafgres_client::{Client, ClientConfig, ClientError, Interest, Ready, Wait};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::gucs;
use crate::logging::RateLimited;
use shared::{BridgeShared, BridgeState};
use wal::{lsn_text, WalReader};

/// How long an idle bridge sleeps before reading the WAL anyway.
pub const IDLE_READ_INTERVAL: Duration = Duration::from_secs(10);
/// Committed transactions' output gathered before a round is applied.
const ROUND_BYTES_MAX: usize = 16 << 20;
/// How far the restart point may move before an idle checkpoint is stored.
const IDLE_CHECKPOINT_BYTES: u64 = 16 << 20;
/// The longest backoff between retries.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

pub fn register() {
    BackgroundWorkerBuilder::new("kafgres sql bridge")
        .set_type("kafgres sql bridge")
        .set_function("kafgres_bridge_main")
        .set_library("kafgres")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        // At once: quick successions of restarts back off in the worker
        // itself (`BridgeShared::start_delay`).
        .set_restart_time(Some(Duration::ZERO))
        .load();
}

/// Set once SIGTERM arrives (pgrx's flag is cleared when read).
static STOPPING: AtomicBool = AtomicBool::new(false);

fn stopping() -> bool {
    if !STOPPING.load(Ordering::Relaxed) && BackgroundWorker::sigterm_received() {
        STOPPING.store(true, Ordering::Relaxed);
    }
    STOPPING.load(Ordering::Relaxed)
}

/// Sleeps on the latch until it is set or `timeout` passes; false on SIGTERM.
fn sleep(timeout: Option<Duration>) -> bool {
    let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH;
    let timeout_ms = match timeout {
        Some(t) => {
            events |= pg_sys::WL_TIMEOUT;
            t.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long
        }
        None => -1,
    };
    // SAFETY: MyLatch is this process's latch; WaitLatch/ResetLatch are
    // called on the main thread, as Postgres requires.
    unsafe {
        pg_sys::WaitLatch(pg_sys::MyLatch, events as i32, timeout_ms, pg_sys::PG_WAIT_EXTENSION);
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    check_for_interrupts!();
    if BackgroundWorker::sighup_received() {
        // SAFETY: the worker's main thread, outside any transaction.
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
    }
    !stopping()
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn kafgres_bridge_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let Some(shared) = shared::shared() else {
        log!("kafgres: the SQL bridge's shared memory is missing (kafgres not in shared_preload_libraries)");
        return;
    };
    let database = gucs::string_or(&gucs::DATABASE, "postgres");
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    shared.register_bridge();
    let delay = shared.start_delay();
    if !delay.is_zero() {
        shared.set_state(BridgeState::Failing, &format!("restarting in {delay:?} after failed starts"));
    }
    if delay.is_zero() || sleep(Some(delay)) {
        run(shared, &database);
    }
    shared.unregister_bridge();
    shared.set_state(BridgeState::Stopped, "stopped by SIGTERM");
    // Restarted by the postmaster unless the server is shutting down.
    crate::lifecycle::exit_after_stop();
}

/// Why a session of the bridge (from loading the checkpoint to an error)
/// ended.
enum Ended {
    Stopping,
    /// Start over after the backoff (the message is in the state already).
    Failed,
}

fn run(shared: &'static BridgeShared, database: &str) {
    let mut backoff = Backoff::default();
    while !stopping() {
        match session(shared, database, &mut backoff) {
            Ended::Stopping => return,
            Ended::Failed => {
                shared.count_error();
                let delay = backoff.next();
                if !sleep(Some(delay)) {
                    return;
                }
            }
        }
    }
}

/// One life of the bridge: checkpoint, slot, reader, producer, and rounds
/// until something fails.
fn session(shared: &'static BridgeShared, database: &str, backoff: &mut Backoff) -> Ended {
    // The schema must be this release's: an older one waits (woken by
    // ALTER EXTENSION kafgres UPDATE) instead of failing in a loop.
    loop {
        match store::schema_ready().and_then(|ready| if ready { Ok(true) } else { installed(database) }) {
            Ok(true) if matches!(store::schema_ready(), Ok(true)) => break,
            Ok(installed) => {
                let message = if installed {
                    "the kafgres schema is older than this library: run ALTER EXTENSION kafgres UPDATE".to_string()
                } else {
                    format!("waiting for CREATE EXTENSION kafgres in database {database}")
                };
                shared.set_state(BridgeState::WaitingForExtension, &message);
                if !sleep(None) {
                    return Ended::Stopping;
                }
            }
            Err(e) => return fail(shared, &format!("cannot check the schema: {e}")),
        }
    }
    let stored = match store::load() {
        Ok(s) => s,
        Err(e) => return fail(shared, &e),
    };
    let mut checkpoint = stored.checkpoint;
    if stored.import_legacy_file {
        match import_legacy(&mut checkpoint) {
            Ok(()) => {}
            Err(e) => return fail(shared, &e),
        }
    }
    // The slot: retain the WAL from the restart point, or say what is gone.
    let start = match ensure_slot(checkpoint.restart_lsn) {
        Ok(start) => start,
        Err(e) => return fail(shared, &e),
    };
    let mut reader = WalReader::open(checkpoint.restart_lsn);
    if let SlotStart::WalGone { retained_from } = start {
        match resume_after_gap(
            &mut reader,
            &mut checkpoint,
            retained_from,
            "the WAL after the bridge's checkpoint was removed (replication slot missing or invalidated)",
        ) {
            Ok(()) => {}
            Err(e) => return fail(shared, &e),
        }
    }
    shared.publish_applied(checkpoint.applied_lsn, checkpoint.restart_lsn, 0, 0, 0);
    let memory = gucs::SQL_BRIDGE_MEMORY_MB.get().max(1) as usize * (1 << 20);
    let mut assembler = Assembler::new(checkpoint.applied_lsn, memory);
    let mut applier = Applier::new(checkpoint);
    let mut broker: Option<KafkaBroker<BridgeWait>> = None;
    let mut idle_since_checkpoint = Instant::now();
    shared.set_state(BridgeState::Running, "");
    loop {
        if stopping() {
            return Ended::Stopping;
        }
        assembler.set_bytes_max(gucs::SQL_BRIDGE_MEMORY_MB.get().max(1) as usize * (1 << 20));
        // Read what is there, gathering committed transactions into a round.
        let mut round: Vec<CommittedTxn> = Vec::new();
        let mut round_bytes = 0usize;
        let mut incomplete: Vec<(u32, u64, u32, Option<u32>)> = Vec::new();
        let mut memory_full: Option<AssemblyError> = None;
        // Every commit noted as waiting before this read is in what it finds.
        let waited = shared.pending_commit_ms();
        let read = reader.read_available(|event| match assembler.push(event) {
            Ok(None) => ControlFlow::Continue(()),
            Ok(Some(Assembled::Committed(txn))) => {
                round_bytes += txn_bytes(&txn);
                round.push(txn);
                if round_bytes >= ROUND_BYTES_MAX {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }
            Ok(Some(Assembled::Damaged { txn, errors })) => {
                warning!(
                    "kafgres: the transaction committed at {} sent {} message(s) that do not decode ({}); \
                     its other records are delivered",
                    lsn_text(txn.end_lsn),
                    errors.len(),
                    errors.first().map_or(String::new(), |e| e.to_string())
                );
                round_bytes += txn_bytes(&txn);
                round.push(txn);
                ControlFlow::Continue(())
            }
            Ok(Some(Assembled::Incomplete { xid, end_lsn, found, expected })) => {
                incomplete.push((xid, end_lsn, found, expected));
                ControlFlow::Continue(())
            }
            Err(e) => {
                memory_full = Some(e);
                ControlFlow::Break(())
            }
        });
        let position = reader.position();
        shared.publish_read(position);
        if let Err(e) = &read {
            // Reading failed where the WAL was removed under the bridge: a gap,
            // handled by the next session; anything else is retried.
            return fail(shared, &e.to_string());
        }
        for (xid, end_lsn, found, expected) in incomplete {
            let reason = format!(
                "transaction {xid} committed at {} with {} message(s) of which the bridge read {found}: its \
                 first ones were in WAL the bridge never saw; none of its records was delivered",
                lsn_text(end_lsn),
                expected.map_or_else(|| "an unknown number of".to_string(), |n| n.to_string())
            );
            warning!("kafgres: {reason}");
            shared.count_incomplete(1);
            if let Err(e) = store::record_gap(end_lsn, end_lsn, Some(xid), &reason) {
                warning!("kafgres: {e}");
            }
        }
        let restart_lsn = assembler.restart_lsn(position);
        let applied_a_round = !round.is_empty();
        if applied_a_round {
            let waited = shared.publish_pending(round.iter().map(|t| t.commit_time_ms).min().unwrap_or(0));
            let producer = match connect(&mut broker, &mut applier, shared) {
                Ok(p) => p,
                Err(e) => return fail_waiting(shared, &e),
            };
            let report = match applier.apply(producer, &round) {
                Ok(report) => report,
                Err(e) => {
                    // The next session connects afresh and reads the
                    // broker's sequences back before relying on them.
                    applier.resync();
                    // The same transactions are read again from the checkpoint.
                    return fail(shared, &format!("applying records sent from SQL: {e}"));
                }
            };
            let changed: Vec<(String, i32)> = round
                .iter()
                .flat_map(|t| t.sends.iter().map(|s| (s.topic.clone(), s.partition)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            applier.advance(position, restart_lsn);
            if let Err(e) = store::store(applier.checkpoint(), Some(&changed)) {
                return fail(shared, &e);
            }
            move_slot(applier.checkpoint().restart_lsn);
            let records: u64 = report.records_appended + report.records_already_present;
            shared.publish_applied(position, restart_lsn, report.transactions as u64, records, report.records_dropped);
            shared.publish_delivered(waited, round.iter().map(|t| t.commit_time_ms).max().unwrap_or(0));
            if let Some(metrics) = crate::shared_metrics::metrics() {
                metrics.sql_rounds.fetch_add(1, Ordering::Relaxed);
                metrics.sql_records.fetch_add(report.records_appended, Ordering::Relaxed);
            }
            if !report.offsets.is_empty() {
                shared.queue_groups(report.offsets.iter().map(|o| o.group_id.as_str()));
                crate::wake::set_worker_latch();
            }
            if report.records_lost_by_log > 0 {
                warning!(
                    "kafgres: {} record(s) sent from SQL and acknowledged were lost by the log (see earlier warnings)",
                    report.records_lost_by_log
                );
            }
            idle_since_checkpoint = Instant::now();
            backoff.reset();
        } else if position > applier.checkpoint().applied_lsn {
            // Nothing to apply up to here: let the slot release that WAL, at
            // a pace that does not write a row for every wake-up.
            let moved = restart_lsn.saturating_sub(applier.checkpoint().restart_lsn);
            if moved >= IDLE_CHECKPOINT_BYTES || idle_since_checkpoint.elapsed() >= IDLE_READ_INTERVAL {
                applier.advance(position, restart_lsn);
                if let Err(e) = store::store(applier.checkpoint(), Some(&[])) {
                    return fail(shared, &e);
                }
                move_slot(applier.checkpoint().restart_lsn);
                idle_since_checkpoint = Instant::now();
            }
            shared.publish_applied(position, restart_lsn, 0, 0, 0);
        }
        if !applied_a_round && read.is_ok() && memory_full.is_none() {
            // Read to the end with nothing to apply: what was noted as
            // waiting before the read had nothing to deliver.
            shared.publish_delivered(waited, 0);
        }
        if let Some(e) = memory_full {
            shared.set_state(BridgeState::Failing, &e.to_string());
            // Nothing is lost: the transaction waits in the WAL until the
            // limit is raised (a reload wakes the bridge).
            if !sleep(Some(IDLE_READ_INTERVAL)) {
                return Ended::Stopping;
            }
            continue;
        }
        if shared.state() != BridgeState::Running {
            shared.set_state(BridgeState::Running, "");
        }
        // After a round, read again before sleeping: commits made while it was
        // producing set the latch then (the producer's waits absorb it), and
        // their records must not wait for the idle interval.
        if applied_a_round || matches!(read, Ok(s) if s.stopped_early) {
            continue;
        }
        if !sleep(Some(IDLE_READ_INTERVAL)) {
            return Ended::Stopping;
        }
    }
}

/// On a standby (the bridge itself runs only on a primary): keeps a slot of
/// the bridge's name at the restart point of the checkpoint that physical
/// replication brings, so that the WAL of sends the primary had not applied
/// yet is still on this server when it is promoted and its bridge resumes
/// there. Called by the standby's broker worker, outside a transaction; the
/// slot lags the checkpoint by at most one call (it retains more, never less).
pub fn keep_wal_on_standby() -> Result<(), String> {
    if !store::schema_ready()? {
        return Ok(());
    }
    let restart_lsn = store::load()?.checkpoint.restart_lsn;
    match slot::find(slot::SLOT_NAME) {
        None => {
            let retained_from = slot::create(slot::SLOT_NAME, restart_lsn)?;
            log!(
                "kafgres: created replication slot \"{}\" at {} on this standby, for the SQL bridge after a promotion",
                slot::SLOT_NAME,
                lsn_text(retained_from)
            );
            Ok(())
        }
        Some(s) if !s.physical => Err(format!(
            "replication slot \"{}\" exists but is a logical slot of another use; the SQL bridge needs the name",
            slot::SLOT_NAME
        )),
        Some(s) if s.restart_lsn.is_some_and(|r| r < restart_lsn) => slot::advance(slot::SLOT_NAME, restart_lsn),
        Some(_) => Ok(()),
    }
}

/// Where reading may start.
enum SlotStart {
    Retained,
    /// The WAL from the checkpoint's restart point is gone; the slot now
    /// retains from here.
    WalGone {
        retained_from: u64,
    },
}

fn ensure_slot(restart_lsn: u64) -> Result<SlotStart, String> {
    let legacy = slot::find(slot::LEGACY_SLOT_NAME).filter(|s| !s.physical);
    let start = match slot::find(slot::SLOT_NAME) {
        Some(s) if !s.physical => {
            return Err(format!(
                "replication slot \"{}\" exists but is a logical slot of another use; drop it \
                 (SELECT pg_drop_replication_slot('{}')) so the bridge can create its own",
                slot::SLOT_NAME,
                slot::SLOT_NAME
            ))
        }
        Some(s) if s.restart_lsn.is_some_and(|r| r <= restart_lsn) && slot::wal_available(restart_lsn) => {
            SlotStart::Retained
        }
        Some(s) => {
            // Invalidated (max_slot_wal_keep_size) or ahead of the checkpoint.
            let reason = if s.restart_lsn.is_none() { "invalidated" } else { "ahead of the checkpoint" };
            log!("kafgres: replication slot \"{}\" is {reason}: recreating it", slot::SLOT_NAME);
            slot::drop_slot(slot::SLOT_NAME)?;
            created(restart_lsn)?
        }
        None => created(restart_lsn)?,
    };
    if let Some(old) = legacy {
        // The logical slot of an older release: its WAL is now ours to keep.
        if old.active_pid == 0 {
            match slot::drop_slot(slot::LEGACY_SLOT_NAME) {
                Ok(()) => {
                    log!("kafgres: dropped the logical slot \"{}\" of the previous release", slot::LEGACY_SLOT_NAME)
                }
                Err(e) => warning!("kafgres: {e}"),
            }
        } else {
            warning!(
                "kafgres: the logical slot \"{}\" of the previous release is in use by process {}; drop it once \
                 that client is done (it retains WAL)",
                slot::LEGACY_SLOT_NAME,
                old.active_pid
            );
        }
    }
    Ok(start)
}

fn created(restart_lsn: u64) -> Result<SlotStart, String> {
    let available = slot::wal_available(restart_lsn);
    let retained_from = slot::create(slot::SLOT_NAME, restart_lsn)?;
    if available && retained_from == restart_lsn && slot::wal_available(restart_lsn) {
        log!("kafgres: created replication slot \"{}\" at {}", slot::SLOT_NAME, lsn_text(restart_lsn));
        Ok(SlotStart::Retained)
    } else {
        Ok(SlotStart::WalGone { retained_from })
    }
}

/// After WAL was lost: report which commits may be missing, then continue at
/// the first whole record of what is left.
fn resume_after_gap(
    reader: &mut WalReader,
    checkpoint: &mut kafgres_bridge::Checkpoint,
    retained_from: u64,
    why: &str,
) -> Result<(), String> {
    let resume = reader.first_record_at_or_after(retained_from).map_err(|e| e.to_string())?.unwrap_or(retained_from);
    let reason = format!(
        "{why}: transactions that sent from SQL and committed between {} and {} may be missing from their topics",
        lsn_text(checkpoint.applied_lsn),
        lsn_text(resume)
    );
    warning!("kafgres: {reason}");
    store::record_gap(checkpoint.applied_lsn, resume, None, &reason)?;
    checkpoint.applied_lsn = checkpoint.applied_lsn.max(resume);
    checkpoint.restart_lsn = resume;
    store::store(checkpoint, None)?;
    reader.restart_at(resume);
    Ok(())
}

/// Moves the slot after a stored checkpoint. A failure keeps more WAL than
/// needed (never less), so it is only reported.
fn move_slot(restart_lsn: u64) {
    static REPORTED: RateLimited = RateLimited::new(Duration::from_secs(60));
    if let Err(e) = slot::advance(slot::SLOT_NAME, restart_lsn) {
        REPORTED.warn(&format!("kafgres: {e}; the slot retains more WAL until this is fixed"));
    }
}

fn installed(database: &str) -> Result<bool, String> {
    let _ = database;
    crate::catalog_sql::run_in_transaction(crate::catalog_sql::extension_installed)
}

/// Reads the checkpoint file an older release's applier kept in the log
/// directory into `checkpoint`, stores it, and renames the file.
fn import_legacy(checkpoint: &mut kafgres_bridge::Checkpoint) -> Result<(), String> {
    let log_dir = gucs::log_dir();
    let legacy = kafgres_bridge::legacy::ApplierCheckpoint::load(&log_dir).map_err(|e| e.to_string())?;
    checkpoint.applied_lsn = legacy.applied_lsn.max(checkpoint.applied_lsn.min(legacy.applied_lsn));
    if legacy.producer_id >= 0 {
        checkpoint.producer_id = legacy.producer_id;
        checkpoint.producer_epoch = legacy.producer_epoch;
        checkpoint.next_sequence = legacy.next_sequence;
    }
    store::store(checkpoint, None)?;
    let path = kafgres_bridge::legacy::ApplierCheckpoint::path(&log_dir);
    if path.exists() {
        let imported = path.with_extension("checkpoint.imported");
        std::fs::rename(&path, &imported).map_err(|e| format!("renaming {}: {e}", path.display()))?;
    }
    log!(
        "kafgres: imported the previous release's SQL applier checkpoint (applied to {}, producer id {})",
        lsn_text(checkpoint.applied_lsn),
        checkpoint.producer_id
    );
    Ok(())
}

fn txn_bytes(txn: &CommittedTxn) -> usize {
    txn.sends.iter().map(|s| s.estimated_record_bytes()).sum::<usize>() + 64 * txn.offsets.len()
}

fn fail(shared: &BridgeShared, message: &str) -> Ended {
    static REPORTED: RateLimited = RateLimited::new(Duration::from_secs(30));
    REPORTED.warn(&format!("kafgres: SQL bridge: {message}; retrying"));
    shared.set_state(BridgeState::Failing, message);
    Ended::Failed
}

fn fail_waiting(shared: &BridgeShared, message: &str) -> Ended {
    static REPORTED: RateLimited = RateLimited::new(Duration::from_secs(60));
    REPORTED.warn(&format!("kafgres: SQL bridge: {message}; retrying"));
    shared.set_state(BridgeState::WaitingForBroker, message);
    Ended::Failed
}

/// Connects to the broker's Kafka listener if not connected.
fn connect<'a>(
    broker: &'a mut Option<KafkaBroker<BridgeWait>>,
    applier: &mut Applier,
    shared: &BridgeShared,
) -> Result<&'a mut KafkaBroker<BridgeWait>, String> {
    if broker.as_ref().is_some_and(|b| b.is_broken()) {
        *broker = None;
    }
    if broker.is_none() {
        let address = crate::sql_api::broker_link::broker_address_or_err()?;
        // As the internal principal: whatever kafgres.authentication and the
        // ACLs say, the bridge delivers what SQL transactions committed
        // (kafgres.send checked the sender's ACLs).
        let secret = crate::catalog_sql::run_in_transaction(crate::internal_login::read_secret)?;
        let config =
            ClientConfig { internal_login: Some(crate::internal_login::superuser(secret)), ..ClientConfig::default() };
        let client = Client::connect_with(address, "kafgres-sql-bridge", BridgeWait, config)
            .map_err(|e| format!("cannot reach the broker at {address}: {e}"))?;
        // The broker may have restarted (and, with a relaxed flush policy,
        // lost records): read the sequences back before relying on them.
        applier.resync();
        *broker = Some(KafkaBroker::new(client));
        if shared.state() == BridgeState::WaitingForBroker {
            shared.set_state(BridgeState::Running, "");
        }
    }
    broker.as_mut().ok_or_else(|| "no broker connection".to_string())
}

/// Exponential backoff between failed sessions.
#[derive(Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    fn next(&mut self) -> Duration {
        let delay = Duration::from_millis(250u64 << self.failures.min(8)).min(BACKOFF_MAX);
        self.failures += 1;
        delay
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Waits on the bridge's latch and the socket: a committing sender's wake-up
/// is absorbed (the round in progress reads the WAL again when done), a
/// SIGTERM interrupts the request.
pub struct BridgeWait;

impl Wait for BridgeWait {
    fn wait(&mut self, fd: i32, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError> {
        loop {
            if stopping() {
                return Err(ClientError::Interrupted("the SQL bridge is stopping".into()));
            }
            let timeout_ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(Ready::TimedOut);
                    }
                    (deadline - now).as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long
                }
            };
            let socket_event = match interest {
                Interest::Readable => pg_sys::WL_SOCKET_READABLE,
                Interest::Writable => pg_sys::WL_SOCKET_WRITEABLE,
            };
            let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH | socket_event;
            if deadline.is_some() {
                events |= pg_sys::WL_TIMEOUT;
            }
            // SAFETY: this process's latch and a socket it owns, on the main thread.
            let fired = unsafe {
                pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as i32, fd, timeout_ms, pg_sys::PG_WAIT_EXTENSION)
            } as u32;
            if fired & pg_sys::WL_LATCH_SET != 0 {
                // SAFETY: as above.
                unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            }
            if fired & socket_event != 0 {
                return Ok(Ready::Ready);
            }
            if fired & pg_sys::WL_TIMEOUT != 0 {
                return Ok(Ready::TimedOut);
            }
        }
    }
}
