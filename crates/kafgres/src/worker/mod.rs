//! The broker background worker.
//!
//! Its main thread is the control plane and the only thread that touches
//! Postgres. Lifecycle:
//! 1. connect to `kafgres.database`, publish the pid, wait (latch, no timer)
//!    until `CREATE EXTENSION kafgres` has committed there;
//! 2. run the role the server has: on a primary the leader ([`leader`]),
//!    on a hot standby a follower of the primary's broker ([`standby`]),
//!    until SIGTERM, or until the standby is promoted (then run again, as
//!    the leader). Each loads the catalog, starts the data plane on its own
//!    signal-blocked threads and sleeps on the WaitEventSet; on each wake-up
//!    it reports queued log lines, serves what its role serves and reloads
//!    settings on SIGHUP;
//! 3. on SIGTERM stop accepting, flush every partition, stop the runtime and
//!    exit (1 so that a pg_terminate_backend brings it back, 0 in a server
//!    shutdown: `crate::lifecycle`). Postmaster death exits at once (the logs
//!    recover at next start).
//!
//! A crash exits non-zero and the postmaster restarts the worker after
//! [`RESTART_DELAY`].

mod catalog_requests;
pub(crate) mod config;
mod identities;
mod leader;
mod standby;
mod threads;
mod wait;

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use kafgres_broker::catalog::CatalogSnapshot;
use kafgres_broker::{Broker, BrokerConfig};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::prelude::*;

use crate::catalog_sql::{extension_installed, run_in_transaction, CatalogPlans};
use crate::control::EventFd;
use crate::gucs;
use crate::logging::{self, LogLine};
use crate::wake;
use wait::{stopping, WaitSet, Wakeup};

/// The postmaster restarts the worker at once; quick successions of
/// restarts back off in the worker itself (`wake::start_delay`).
pub const RESTART_DELAY: Duration = Duration::ZERO;
/// The longest wait between attempts to start the data plane.
const START_RETRY_MAX: Duration = Duration::from_secs(30);
const SHUTDOWN_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
const RUNTIME_STOP_TIMEOUT: Duration = Duration::from_secs(2);

pub fn register() {
    BackgroundWorkerBuilder::new("kafgres broker")
        .set_type("kafgres broker")
        .set_function("kafgres_broker_main")
        .set_library("kafgres")
        .enable_spi_access()
        // A hot standby's broker copies topic data from the primary's
        // (`standby`), so it starts as soon as the standby accepts reads.
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(RESTART_DELAY))
        .load();
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn kafgres_broker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = gucs::string_or(&gucs::DATABASE, "postgres");
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);

    let waker = match EventFd::new() {
        Ok(fd) => Arc::new(fd),
        Err(e) => stop_for_good(&format!("cannot create an eventfd: {e}")),
    };
    let logs = logging::install(Arc::clone(&waker));
    let wait = WaitSet::new(waker.raw_fd());
    // SAFETY: MyProcPid is set before a worker's main function runs.
    wake::publish_worker_pid(unsafe { pg_sys::MyProcPid });
    // Restarts in quick succession (terminated, or failing at start) wait 1,
    // 2, 4 ... 60 s first; the postmaster itself restarts the worker at once.
    let delay = wake::start_delay();
    if !delay.is_zero() {
        log!("kafgres: the broker restarted {delay:?} ago or less: waiting {delay:?} before starting");
        if !wait.sleep(delay) {
            exit_restartable();
        }
    }

    if !wait_for_extension(&wait, &database) {
        exit_restartable();
    }
    raise_open_file_limit();
    let runtime = match threads::build_runtime(gucs::DATA_PLANE_THREADS.get() as usize) {
        Ok(rt) => rt,
        Err(e) => stop_for_good(&format!("cannot start the data-plane threads: {e}")),
    };
    let worker = Worker { database, waker, logs, wait, runtime };
    // A standby's broker follows until the promotion, then leads; a change
    // of leader address restarts the standby's.
    loop {
        let ended = if crate::replication::in_recovery() { standby::run(&worker) } else { leader::run(&worker) };
        report_logs(worker.logs.as_ref());
        match ended {
            Ended::Stopped => break,
            Ended::Again => continue,
        }
    }
    let Worker { runtime, logs, .. } = worker;
    runtime.shutdown_timeout(RUNTIME_STOP_TIMEOUT);
    report_logs(logs.as_ref());
    log!("kafgres: broker stopped");
    exit_restartable();
}

/// What the role's run needs from the worker.
pub(crate) struct Worker {
    database: String,
    waker: Arc<EventFd>,
    logs: Option<Receiver<LogLine>>,
    wait: WaitSet,
    runtime: tokio::runtime::Runtime,
}

/// How a role's run ended.
pub(crate) enum Ended {
    /// SIGTERM: the worker exits.
    Stopped,
    /// Run again, in the role the server has now (a promotion, or a new
    /// leader address on a standby).
    Again,
}

impl Worker {
    fn report_logs(&self) {
        report_logs(self.logs.as_ref());
    }

    /// Starts the data plane. A start that fails (the port taken, the log
    /// directory another database's) is retried in place, with a backoff
    /// and one log line per attempt, never by exiting into a restart loop.
    /// `None` on SIGTERM.
    fn start_broker(
        &self,
        config: &BrokerConfig,
        catalog: &Arc<dyn kafgres_broker::Catalog>,
        snapshot: &CatalogSnapshot,
    ) -> Option<Broker> {
        let mut retry = Duration::from_secs(1);
        loop {
            match self.runtime.block_on(Broker::start(config.clone(), Arc::clone(catalog), snapshot.clone())) {
                Ok(b) => {
                    self.report_logs();
                    return Some(b);
                }
                Err(e) => {
                    self.report_logs();
                    warning!("kafgres: cannot start the broker: {e}; trying again in {retry:?}");
                    if !self.wait.sleep(retry) {
                        return None;
                    }
                    retry = (retry * 2).min(START_RETRY_MAX);
                }
            }
        }
    }

    fn stop_broker(&self, broker: Broker) {
        log!("kafgres: shutting down the broker");
        let stopped =
            self.runtime.block_on(async { tokio::time::timeout(SHUTDOWN_FLUSH_TIMEOUT, broker.shutdown()).await });
        if stopped.is_err() {
            warning!("kafgres: the broker did not stop within {SHUTDOWN_FLUSH_TIMEOUT:?}");
        }
        self.report_logs();
    }

    /// Reloads the configuration if SIGHUP arrived; whether it did.
    fn reload_on_sighup(&self) -> bool {
        if !BackgroundWorker::sighup_received() {
            return false;
        }
        let before = config::reloadable_values();
        // SAFETY: the worker's main thread, between transactions.
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        let after = config::reloadable_values();
        for ((name, was), now) in config::RELOADABLE_SETTINGS.iter().zip(&before).zip(&after) {
            if was != now {
                log!(
                    "kafgres: {} is now {} (was {})",
                    name.to_string_lossy(),
                    now.as_deref().unwrap_or("unset"),
                    was.as_deref().unwrap_or("unset")
                );
            }
        }
        true
    }
}

/// Exits so that the postmaster starts the worker again unless the server
/// is shutting down (`crate::lifecycle`).
fn exit_restartable() -> ! {
    wake::publish_worker_pid(0);
    crate::lifecycle::exit_after_stop()
}

/// A setting that cannot work until the server is reconfigured and
/// restarted: say so once and wait for SIGTERM, rather than exiting into a
/// restart loop that repeats the message every second.
fn stop_for_good(message: &str) -> ! {
    warning!("kafgres: {message}; the broker does not start until this is fixed (then restart PostgreSQL)");
    loop {
        // SAFETY: the worker's own latch, on its main thread.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                -1,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        if stopping() {
            exit_restartable();
        }
        check_for_interrupts!();
    }
}

/// The cluster's id, and the secret Kafgres's own clients log in with.
struct ClusterIdentity {
    cluster_id: String,
    internal_secret: String,
}

/// Prepares the catalog plans and loads topics, offsets and the cluster id.
/// A schema that does not match this library (an extension created by an
/// older build, say) is reported once and waited out on the latch: the next
/// CREATE/ALTER EXTENSION wakes the worker, which tries again. `None` on SIGTERM.
fn load_catalog(wait: &WaitSet, database: &str) -> Option<(CatalogPlans, CatalogSnapshot, ClusterIdentity)> {
    let mut reported = false;
    loop {
        let loaded = run_in_transaction(|| {
            let plans = CatalogPlans::prepare()?;
            let snapshot = CatalogSnapshot {
                topics: plans.load_topics()?,
                offsets: plans.load_offsets(None)?,
                transactions: plans.load_transactions()?,
                acls: crate::acl_sql::load_acls()?,
                client_quotas: crate::quota_sql::load_quotas()?,
                share_states: crate::share_sql::load_share_states()?,
                group_configs: crate::share_sql::load_group_configs()?,
                broker_configs: crate::broker_config_sql::load_broker_configs()?,
                delegation_tokens: crate::delegation_token_sql::load_delegation_tokens()?,
            };
            let cluster = ClusterIdentity {
                cluster_id: plans.cluster_id()?,
                internal_secret: crate::internal_login::read_secret()?,
            };
            Ok((plans, snapshot, cluster))
        });
        match loaded {
            Ok(loaded) => return Some(loaded),
            Err(e) if !reported => {
                let installed = run_in_transaction(crate::catalog_sql::installed_extension_version).ok().flatten();
                let advice = crate::catalog_sql::schema_mismatch_advice(installed.as_deref());
                warning!("kafgres: cannot load the catalog from database {database}: {e}; {advice}; waiting for it");
                reported = true;
            }
            Err(_) => {}
        }
        if wait.wait() == Wakeup::Latch && stopping() {
            return None;
        }
        check_for_interrupts!();
    }
}

/// Every partition keeps its segment and index files open, outside Postgres's
/// own file cache, so the default soft limit (often 1024) runs out after a few
/// hundred partitions ("Too many open files"). The worker raises its soft
/// limit to the hard limit; the hard limit is the operator's to set.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into `limit`, a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let before = limit.rlim_cur;
    if before < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit only reads the rlimit `limit` points to.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            warning!("kafgres: cannot raise the open-file limit from {before}: {}", std::io::Error::last_os_error());
            return;
        }
    }
    log!("kafgres: open-file limit {} (was {before})", limit.rlim_cur);
}

/// Sleeps until the extension exists in `database`. Returns false on SIGTERM.
fn wait_for_extension(wait: &WaitSet, database: &str) -> bool {
    let mut announced = false;
    loop {
        match run_in_transaction(extension_installed) {
            Ok(true) => return true,
            Ok(false) if !announced => {
                log!("kafgres: waiting for CREATE EXTENSION kafgres in database {database}");
                announced = true;
            }
            Ok(false) => {}
            Err(e) if !announced => {
                warning!("kafgres: cannot check for the extension in database {database}: {e}");
                announced = true;
            }
            Err(_) => {}
        }
        if wait.wait() == Wakeup::Latch && stopping() {
            return false;
        }
        check_for_interrupts!();
        if BackgroundWorker::sighup_received() {
            // SAFETY: the worker's main thread, between transactions (as
            // Postgres's own processes reload on SIGHUP).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
    }
}

fn report_logs(lines: Option<&Receiver<LogLine>>) {
    let Some(lines) = lines else { return };
    while let Ok(line) = lines.try_recv() {
        match line.level {
            log::Level::Error | log::Level::Warn => warning!("{}", line.message),
            _ => log!("{}", line.message),
        }
    }
    let dropped = logging::take_dropped();
    if dropped > 0 {
        warning!("kafgres: {dropped} data-plane log lines were dropped (log queue full)");
    }
}
