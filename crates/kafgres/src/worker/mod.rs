//! The broker background worker.
//!
//! Its main thread is the control plane and the only thread that touches
//! Postgres. Lifecycle:
//! 1. connect to `kafgres.database`, publish the pid, wait (latch, no timer)
//!    until `CREATE EXTENSION kafgres` has committed there;
//! 2. prepare and keep the catalog plans, load topics and the cluster id;
//! 3. start the data plane on its own signal-blocked threads;
//! 4. sleep on the WaitEventSet; on each wake-up report queued log lines,
//!    serve queued control requests (each in its own transaction, errors
//!    answered, never fatal), reload the groups whose offsets SQL committed
//!    (queued by the SQL bridge worker, `crate::bridge`), reload settings on
//!    SIGHUP;
//! 5. on SIGTERM stop accepting, flush every partition, stop the runtime and
//!    exit (1 so that a pg_terminate_backend brings it back, 0 in a server
//!    shutdown: `crate::lifecycle`). Postmaster death exits at once (the logs
//!    recover at next start).
//!
//! A crash exits non-zero and the postmaster restarts the worker after
//! [`RESTART_DELAY`].

mod threads;
mod wait;

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use kafgres_broker::catalog::{CatalogError, CatalogSnapshot, CommittedOffset};
use kafgres_broker::{Broker, BrokerConfig, FlushPolicy};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::prelude::*;
use tokio::sync::mpsc;

use crate::catalog_sql::{extension_installed, run_in_transaction, CatalogPlans};
use crate::control::{ControlPlaneCatalog, ControlRequest, EventFd};
use crate::gucs;
use crate::logging::{self, LogLine};
use crate::wake;
use wait::{WaitSet, Wakeup};

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
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
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
    let Some((plans, snapshot, cluster_id)) = load_catalog(&wait, &database) else {
        exit_restartable();
    };
    raise_open_file_limit();
    let config = match broker_config(cluster_id, log_dir_owner(&database)) {
        Ok(config) => config,
        Err(e) => stop_for_good(&e),
    };
    let runtime = match threads::build_runtime(gucs::DATA_PLANE_THREADS.get() as usize) {
        Ok(rt) => rt,
        Err(e) => stop_for_good(&format!("cannot start the data-plane threads: {e}")),
    };
    let (catalog, mut requests) = ControlPlaneCatalog::new(Arc::clone(&waker));
    let catalog: Arc<dyn kafgres_broker::Catalog> = Arc::new(catalog);
    // A start that fails (the port taken, the log directory another
    // database's) is retried in place, with a backoff and one log line per
    // attempt, never by exiting into a restart loop.
    let mut retry = Duration::from_secs(1);
    let broker = loop {
        match runtime.block_on(Broker::start(config.clone(), Arc::clone(&catalog), snapshot.clone())) {
            Ok(b) => break b,
            Err(e) => {
                report_logs(logs.as_ref());
                warning!("kafgres: cannot start the broker: {e}; trying again in {retry:?}");
                if !wait.sleep(retry) {
                    exit_restartable();
                }
                retry = (retry * 2).min(START_RETRY_MAX);
            }
        }
    };

    report_logs(logs.as_ref());

    loop {
        report_logs(logs.as_ref());
        serve_control_requests(&plans, &mut requests);
        reload_groups_committed_from_sql(&plans, broker.context());
        if BackgroundWorker::sigterm_received() {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: the worker's main thread, between transactions.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            // A reload is also the operator's way to say "the disk is fixed".
            runtime.block_on(broker.reopen_offline_topics());
            report_logs(logs.as_ref());
        }
        if wait.wait() == Wakeup::DataPlane {
            waker.drain();
        }
        // Absorb procsignal barriers (DROP DATABASE waits for every backend
        // to do so) and other interrupts the latch was set for.
        check_for_interrupts!();
    }

    log!("kafgres: shutting down the broker");
    requests.close();
    let stopped = runtime.block_on(async { tokio::time::timeout(SHUTDOWN_FLUSH_TIMEOUT, broker.shutdown()).await });
    if stopped.is_err() {
        warning!("kafgres: the broker did not stop within {SHUTDOWN_FLUSH_TIMEOUT:?}");
    }
    runtime.shutdown_timeout(RUNTIME_STOP_TIMEOUT);
    report_logs(logs.as_ref());
    log!("kafgres: broker stopped");
    exit_restartable();
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
        if BackgroundWorker::sigterm_received() {
            exit_restartable();
        }
        check_for_interrupts!();
    }
}

/// Consumer offsets committed by `kafgres.consume` are in the table already
/// (written in the consuming transaction); the SQL bridge queues their
/// groups once their transactions are read, and the coordinator's view of
/// each is reloaded here from the table, so a Kafka consumer that joins
/// later resumes where SQL left off.
fn reload_groups_committed_from_sql(plans: &CatalogPlans, ctx: &kafgres_broker::BrokerContext) {
    let Some(bridge) = crate::bridge::shared::shared() else { return };
    match bridge.take_groups() {
        Some(groups) if groups.is_empty() => {}
        Some(groups) => {
            for group in groups {
                match run_in_transaction(|| plans.load_offsets(Some(&group))) {
                    Ok(rows) => ctx.groups.load_committed_offsets(rows),
                    Err(e) => warning!("kafgres: reloading the offsets of group {group:?}: {e}"),
                }
            }
        }
        // The queue overflowed: every group, once.
        None => match run_in_transaction(|| plans.load_offsets(None)) {
            Ok(rows) => ctx.groups.load_committed_offsets(rows),
            Err(e) => warning!("kafgres: reloading committed offsets: {e}"),
        },
    }
}

/// Prepares the catalog plans and loads topics, offsets and the cluster id.
/// A schema that does not match this library (an extension created by an
/// older build, say) is reported once and waited out on the latch: the next
/// CREATE/ALTER EXTENSION wakes the worker, which tries again. `None` on SIGTERM.
fn load_catalog(wait: &WaitSet, database: &str) -> Option<(CatalogPlans, CatalogSnapshot, String)> {
    let mut reported = false;
    loop {
        let loaded = run_in_transaction(|| {
            let plans = CatalogPlans::prepare()?;
            let snapshot = CatalogSnapshot {
                topics: plans.load_topics()?,
                offsets: plans.load_offsets(None)?,
                transactions: plans.load_transactions()?,
            };
            let cluster_id = plans.cluster_id()?;
            Ok((plans, snapshot, cluster_id))
        });
        match loaded {
            Ok(loaded) => return Some(loaded),
            Err(e) if !reported => {
                warning!(
                    "kafgres: cannot load the catalog from database {database}: {e}; \
                     waiting for the extension to be recreated or updated (DROP/CREATE EXTENSION kafgres)"
                );
                reported = true;
            }
            Err(_) => {}
        }
        if wait.wait() == Wakeup::Latch && BackgroundWorker::sigterm_received() {
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
        if wait.wait() == Wakeup::Latch && BackgroundWorker::sigterm_received() {
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

/// This database, as the log directory's owner file records it.
fn log_dir_owner(database: &str) -> kafgres_broker::log_dir::LogDirOwner {
    // SAFETY: both are plain reads of values fixed once the worker is
    // connected to its database (before this is called).
    let (system_identifier, database_oid) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::MyDatabaseId) };
    kafgres_broker::log_dir::LogDirOwner {
        system_identifier,
        database_oid: database_oid.to_u32(),
        database: database.to_string(),
    }
}

fn broker_config(
    cluster_id: String,
    log_dir_owner: kafgres_broker::log_dir::LogDirOwner,
) -> Result<BrokerConfig, String> {
    let address = gucs::string_or(&gucs::LISTEN_ADDRESS, "127.0.0.1");
    let Ok(ip) = address.parse::<IpAddr>() else {
        return Err(format!("kafgres.listen_address = '{address}' is not an IP address"));
    };
    let port = gucs::PORT.get() as u16;
    let advertised_port = match gucs::ADVERTISED_PORT.get() {
        0 => port,
        p => p as u16,
    };
    let log_dir = gucs::log_dir();
    Ok(BrokerConfig {
        listen: SocketAddr::new(ip, port),
        advertised_host: gucs::string_or(&gucs::ADVERTISED_HOST, &address),
        advertised_port,
        node_id: 1,
        cluster_id,
        log_dir,
        log_dir_owner,
        flush_policy: match gucs::FLUSH_POLICY.get() {
            gucs::FlushPolicyGuc::Fsync => FlushPolicy::Fsync,
            gucs::FlushPolicyGuc::PageCache => FlushPolicy::PageCache,
        },
        frame_bytes_max: gucs::MAX_FRAME_BYTES.get() as usize,
        connections_max: gucs::MAX_CONNECTIONS.get() as usize,
        connection_idle_ms_max: gucs::CONNECTIONS_MAX_IDLE_MS.get() as u64,
        auto_create_topics: gucs::AUTO_CREATE_TOPICS.get(),
        default_partitions: gucs::DEFAULT_PARTITIONS.get(),
        message_bytes_max: kafgres_broker::topic_config::MESSAGE_BYTES_MAX_DEFAULT,
        segment_bytes_max: gucs::SEGMENT_BYTES.get() as u64,
        group_initial_rebalance_delay_ms: gucs::GROUP_INITIAL_REBALANCE_DELAY_MS.get(),
        group_consumer_session_timeout_ms: gucs::GROUP_CONSUMER_SESSION_TIMEOUT_MS.get(),
        group_consumer_heartbeat_interval_ms: gucs::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS.get(),
        authentication: authentication(),
        metrics: crate::shared_metrics::metrics().unwrap_or_else(kafgres_broker::metrics::BrokerMetrics::leaked),
    })
}

/// `kafgres.authentication`. Unknown users' mock salts derive from
/// PostgreSQL's own mock authentication nonce (random per cluster, kept in
/// pg_control), so they stay the same across restarts, as PostgreSQL's do.
fn authentication() -> kafgres_broker::sasl::Authentication {
    match gucs::AUTHENTICATION.get() {
        gucs::AuthenticationGuc::None => kafgres_broker::sasl::Authentication::None,
        gucs::AuthenticationGuc::ScramSha256 => {
            let mut mock_secret = [0u8; pg_sys::MOCK_AUTH_NONCE_LEN as usize];
            // SAFETY: pg_control's nonce is MOCK_AUTH_NONCE_LEN bytes, read on the main thread.
            let nonce = unsafe { pg_sys::GetMockAuthenticationNonce() };
            if nonce.is_null() {
                return kafgres_broker::sasl::Authentication::scram_sha_256_random();
            }
            // SAFETY: a non-NULL nonce points at pg_control's
            // mock_authentication_nonce, MOCK_AUTH_NONCE_LEN bytes in shared
            // memory that no one writes after startup; `mock_secret` is a local
            // array of that length, so the two cannot overlap.
            unsafe { std::ptr::copy_nonoverlapping(nonce.cast::<u8>(), mock_secret.as_mut_ptr(), mock_secret.len()) };
            kafgres_broker::sasl::Authentication::ScramSha256 { mock_secret }
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

/// Serves every queued control request. Offset commits are gathered and
/// stored together in one transaction (a thousand consumers committing at once
/// cost one commit record, not a thousand); any other request first flushes the
/// commits gathered before it, so requests take effect in arrival order.
fn serve_control_requests(plans: &CatalogPlans, requests: &mut mpsc::Receiver<ControlRequest>) {
    let mut commits: Vec<(Vec<CommittedOffset>, Reply)> = Vec::new();
    while let Ok(request) = requests.try_recv() {
        match request {
            ControlRequest::CommitOffsets { offsets, reply } => commits.push((offsets, reply)),
            other => {
                store_offset_batch(plans, std::mem::take(&mut commits));
                serve_one(plans, other);
            }
        }
    }
    store_offset_batch(plans, commits);
}

type Reply = tokio::sync::oneshot::Sender<Result<(), CatalogError>>;

fn serve_one(plans: &CatalogPlans, request: ControlRequest) {
    match request {
        ControlRequest::CreateTopic { topic, reply } => {
            let result = match run_in_transaction(|| plans.insert_topic(&topic)) {
                Ok(true) => Ok(()),
                Ok(false) => Err(CatalogError::TopicExists(topic.name.clone())),
                Err(e) => {
                    warning!("kafgres: {e}");
                    Err(CatalogError::Failed(e))
                }
            };
            let _ = reply.send(result);
        }
        ControlRequest::DeleteTopic { topic_id, reply } => {
            let result = catalog_result(run_in_transaction(|| plans.delete_topic(topic_id)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::SetPartitionCount { topic_id, partition_count, reply } => {
            let result =
                catalog_result(run_in_transaction(|| plans.set_partition_count(topic_id, partition_count)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::SetTopicConfigs { topic_id, configs, reply } => {
            let result = catalog_result(run_in_transaction(|| plans.set_topic_configs(topic_id, &configs)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::DeleteOffsets { group_id, partitions, reply } => {
            let result = run_in_transaction(|| plans.delete_offsets(&group_id, partitions.as_deref()));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::CommitOffsets { offsets, reply } => store_offset_batch(plans, vec![(offsets, reply)]),
        ControlRequest::LoadGroupOffsets { group_id, reply } => {
            let result = run_in_transaction(|| plans.load_offsets(Some(&group_id)));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::AllocateProducerIds { count, reply } => {
            let result = run_in_transaction(|| plans.allocate_producer_ids(count));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::ScramCredential { username, reply } => {
            let result = run_in_transaction(|| plans.scram_credential(&username));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::StoreTransaction { record, offsets, reply } => {
            let result = run_in_transaction(|| {
                if !offsets.is_empty() {
                    let rows = latest_per_partition(offsets.iter());
                    plans.upsert_offsets(&rows)?;
                }
                plans.store_transaction(&record)
            });
            let _ = reply.send(result.map_err(failed));
        }
    }
}

/// Stores a batch of commits in one transaction and answers each once it is
/// durable. If the batch fails, each commit is retried alone so one bad
/// request cannot fail the others.
fn store_offset_batch(plans: &CatalogPlans, commits: Vec<(Vec<CommittedOffset>, Reply)>) {
    if commits.is_empty() {
        return;
    }
    let rows = latest_per_partition(commits.iter().flat_map(|(offsets, _)| offsets.iter()));
    match run_in_transaction(|| plans.upsert_offsets(&rows)) {
        Ok(()) => {
            for (_, reply) in commits {
                let _ = reply.send(Ok(()));
            }
        }
        Err(e) if commits.len() == 1 => {
            for (_, reply) in commits {
                let _ = reply.send(Err(failed(e.clone())));
            }
        }
        Err(_) => {
            for (offsets, reply) in commits {
                let rows = latest_per_partition(offsets.iter());
                let _ = reply.send(run_in_transaction(|| plans.upsert_offsets(&rows)).map_err(failed));
            }
        }
    }
}

/// One row per (group, topic, partition), the last one queued winning: an
/// upsert may not touch the same row twice in one statement.
fn latest_per_partition<'a>(offsets: impl Iterator<Item = &'a CommittedOffset>) -> Vec<&'a CommittedOffset> {
    let mut latest: std::collections::HashMap<(&str, &str, i32), &CommittedOffset> = std::collections::HashMap::new();
    for o in offsets {
        latest.insert((o.group_id.as_str(), o.topic.as_str(), o.partition), o);
    }
    latest.into_values().collect()
}

fn failed(e: String) -> CatalogError {
    warning!("kafgres: {e}");
    CatalogError::Failed(e)
}

/// Maps "no row matched" to UnknownTopic and SQL failures to Failed.
fn catalog_result(outcome: Result<bool, String>, topic_id: uuid::Uuid) -> Result<(), CatalogError> {
    match outcome {
        Ok(true) => Ok(()),
        Ok(false) => Err(CatalogError::UnknownTopic(topic_id)),
        Err(e) => {
            warning!("kafgres: {e}");
            Err(CatalogError::Failed(e))
        }
    }
}
