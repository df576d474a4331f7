//! The broker on a primary: the leader. It records a new leader epoch
//! (`crate::replication::leader`), takes the synchronous policy from
//! `synchronous_standby_names` (again at each reload), serves the data
//! plane's catalog requests, reloads the groups whose offsets SQL
//! committed, and answers SQL's requests for `kafgres.replica_partitions`.

use std::sync::Arc;

use kafgres_broker::replication::state::LAG_TIME_MAX_DEFAULT;
use kafgres_broker::replication::{ReplicationState, SyncPolicy};
use pgrx::prelude::*;

use super::catalog_requests::serve_control_requests;
use super::config::{broker_config, log_dir_owner};
use super::wait::{stopping, Wakeup};
use super::{load_catalog, stop_for_good, Ended, Worker};
use crate::catalog_sql::{run_in_transaction, CatalogPlans};
use crate::control::ControlPlaneCatalog;
use crate::replication;

pub(super) fn run(w: &Worker) -> Ended {
    // Read before the catalog is: a script committed after this is seen below.
    let schema_generation = crate::wake::schema_generation();
    let Some((plans, snapshot, cluster)) = load_catalog(&w.wait, &w.database) else {
        return Ended::Stopped;
    };
    let cluster_id = cluster.cluster_id.clone();
    let mut config = match broker_config(cluster.cluster_id, log_dir_owner(&w.database)) {
        Ok(config) => config,
        Err(e) => stop_for_good(&e),
    };
    config.internal_secret = Some(cluster.internal_secret);
    if !snapshot.topics.is_empty() && !wait_while_log_dir_lost(w, &config) {
        return Ended::Stopped;
    }
    let timeline = replication::timeline();
    let Some(epoch) = begin_epoch(w, &config, timeline) else {
        return Ended::Stopped;
    };
    config.replication = Arc::new(ReplicationState::new(epoch, sync_policy(), LAG_TIME_MAX_DEFAULT));
    let (catalog, mut requests) = ControlPlaneCatalog::new(Arc::clone(&w.waker));
    let catalog: Arc<dyn kafgres_broker::Catalog> = Arc::new(catalog);
    let Some(broker) = w.start_broker(&config, &catalog, &snapshot) else {
        return Ended::Stopped;
    };
    log!("kafgres: leading in epoch {epoch} as node {} (timeline {timeline})", config.node_id);
    // A promotion starts the SQL bridge with this broker; it may have found
    // no leader yet and be backing off.
    if let Some(bridge) = crate::bridge::shared::shared() {
        bridge.wake_bridge();
    }

    let mut ended = Ended::Stopped;
    let mut seen_generation = schema_generation;
    loop {
        w.report_logs();
        if crate::wake::schema_generation() != seen_generation {
            seen_generation = crate::wake::schema_generation();
            if !catalog_is_the_one_loaded(&cluster_id) {
                // DROP EXTENSION and CREATE EXTENSION under a running broker:
                // its topics, offsets and producer ids are no longer the
                // catalog's, so it must not serve them (nor hand out the new
                // catalog's producer ids over logs holding the old ones).
                log!("kafgres: the kafgres catalog was created again under the running broker; restarting it on the new one");
                ended = Ended::Again;
                break;
            }
        }
        serve_control_requests(&plans, &mut requests);
        reload_groups_committed_from_sql(&plans, broker.context());
        replication::partitions::answer_status_requests(broker.context());
        if stopping() {
            break;
        }
        if w.reload_on_sighup() {
            // A reload is also the operator's way to say "the disk is fixed".
            // Reopened in the background, never waited for here: reopening
            // waits for any topic change in progress, and a change in
            // progress waits for this thread to write the catalog
            // (serve_control_requests), so blocking here deadlocked both
            // (a CreateTopics sent right after pg_reload_conf() hung).
            let context = Arc::clone(broker.context());
            w.runtime.spawn(async move { context.topic_admin.reopen_offline().await });
            broker.set_sync_policy(sync_policy());
            reload_acls(broker.context());
            super::config::reload_tls(&broker);
            super::config::reload_settings(&broker);
            w.report_logs();
        }
        if w.wait.wait() == Wakeup::DataPlane {
            w.waker.drain();
        }
        // Absorb procsignal barriers (DROP DATABASE waits for every backend
        // to do so) and other interrupts the latch was set for.
        check_for_interrupts!();
    }
    requests.close();
    w.stop_broker(broker);
    ended
}

/// Whether the catalog still holds the cluster the broker loaded (an update
/// keeps it; a DROP and CREATE EXTENSION makes a new one).
fn catalog_is_the_one_loaded(cluster_id: &str) -> bool {
    match run_in_transaction(crate::catalog_sql::read_cluster_id) {
        Ok(now) => now == cluster_id,
        Err(e) => {
            warning!("kafgres: cannot read the cluster id after a schema change: {e}");
            false
        }
    }
}

/// A reload applies `kafgres.authorizer` and rereads `kafgres.acls`,
/// `kafgres.client_quotas` and `kafgres.delegation_tokens` (an operator's own
/// INSERT or DELETE; on a standby, the primary's rows); a failed read keeps
/// what is in force.
pub(super) fn reload_acls(ctx: &kafgres_broker::BrokerContext) {
    ctx.acls.set_enabled(super::config::authorizer_enabled());
    match run_in_transaction(crate::acl_sql::load_acls) {
        Ok(bindings) => ctx.acls.replace(bindings),
        Err(e) => warning!("kafgres: {e}; the ACLs loaded before stay in force"),
    }
    match run_in_transaction(crate::quota_sql::load_quotas) {
        Ok(rules) => {
            log!("kafgres: reloaded {} client quotas", rules.len());
            ctx.quotas.replace(rules);
        }
        Err(e) => warning!("kafgres: {e}; the client quotas loaded before stay in force"),
    }
    match run_in_transaction(crate::delegation_token_sql::load_delegation_tokens) {
        Ok(tokens) => {
            let (added, removed) = ctx.delegation_tokens.replace(tokens);
            if added + removed > 0 {
                log!("kafgres: reloaded delegation tokens: {added} added, {removed} removed");
            }
        }
        Err(e) => warning!("kafgres: {e}; the delegation tokens loaded before stay in force"),
    }
}

/// Records this start in `kafgres.leader_epochs`. A schema without the
/// table (an extension not yet updated) is reported once and waited out,
/// like `load_catalog`'s. `None` on SIGTERM.
fn begin_epoch(w: &Worker, config: &kafgres_broker::BrokerConfig, timeline: u32) -> Option<i32> {
    let mut reported = false;
    loop {
        let begun = run_in_transaction(|| {
            replication::leader::begin_epoch(
                config.node_id,
                &config.advertised_host,
                config.advertised_port,
                &config.advertised_listeners(),
                timeline,
            )
        });
        match begun {
            Ok(epoch) => return Some(epoch),
            Err(e) if !reported => {
                warning!("kafgres: {e}; waiting for ALTER EXTENSION kafgres UPDATE");
                reported = true;
            }
            Err(_) => {}
        }
        if w.wait.wait() == Wakeup::Latch && stopping() {
            return None;
        }
        check_for_interrupts!();
    }
}

/// A primary whose log directory was lost (a new disk, a wrong mount, a
/// changed `kafgres.log_dir`) would start with empty partitions where the
/// catalog has topics, and its standbys, following it, would cut their
/// copies to match: the loss would spread to the one place that still has
/// the records. Sign of it: no owner file and no partition directory, yet
/// this database's broker has started before. Then the broker does not
/// start; the operator restores the directory or fails over. False on SIGTERM.
fn wait_while_log_dir_lost(w: &Worker, config: &kafgres_broker::BrokerConfig) -> bool {
    let mut reported = false;
    loop {
        let starts = run_in_transaction(|| {
            crate::catalog_sql::read_one::<i64>("SELECT count(*) FROM kafgres.leader_epochs")
                .map_err(|e| format!("reading kafgres.leader_epochs: {e}"))
        });
        let started_before = matches!(starts, Ok(Some(n)) if n > 0);
        if !started_before || !log_dir_is_blank(&config.log_dir) {
            return true;
        }
        if !reported {
            warning!(
                "kafgres: the log directory {} has no {} and no partition directory, but this database's broker \
                 has started before (kafgres.leader_epochs) and the catalog has topics: their records were lost, or \
                 kafgres.log_dir changed. The broker does not start on it, so that standbys do not cut their copies \
                 to match. Restore the directory (or kafgres.log_dir), or fail over to a standby and rebuild this \
                 server from it (docs/replication.md); to start with empty topics anyway, DELETE FROM \
                 kafgres.leader_epochs, then SELECT pg_reload_conf()",
                config.log_dir.display(),
                kafgres_broker::log_dir::OWNER_FILE
            );
            reported = true;
        }
        w.wait.wait();
        if stopping() {
            return false;
        }
        w.reload_on_sighup();
        check_for_interrupts!();
    }
}

/// No owner file and no subdirectory (or no directory at all).
fn log_dir_is_blank(dir: &std::path::Path) -> bool {
    if dir.join(kafgres_broker::log_dir::OWNER_FILE).exists() {
        return false;
    }
    match std::fs::read_dir(dir) {
        Ok(entries) => !entries.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir())),
        Err(_) => true,
    }
}

/// The synchronous policy acks=all follows. A setting Postgres accepted but
/// this parser does not is not taken as "no standby": acks=all then waits
/// for a standby no name matches (times out), as a commit would wait,
/// rather than acknowledge what no standby holds.
fn sync_policy() -> Option<SyncPolicy> {
    match replication::sync_policy() {
        Ok(policy) => policy,
        Err(e) => {
            warning!("kafgres: {e}; acks=all produces wait until it is fixed");
            SyncPolicy::parse("FIRST 1 (\"kafgres: synchronous_standby_names not understood\")").ok().flatten()
        }
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
