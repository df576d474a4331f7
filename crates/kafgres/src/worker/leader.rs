//! The broker on a primary: the leader. It records a new leader epoch
//! (`crate::replication::leader`), takes the synchronous policy from
//! `synchronous_standby_names` (again at each reload), serves the data
//! plane's catalog requests and reloads the groups whose offsets SQL
//! committed.

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
    let Some((plans, snapshot, cluster_id)) = load_catalog(&w.wait, &w.database) else {
        return Ended::Stopped;
    };
    let mut config = match broker_config(cluster_id, log_dir_owner(&w.database)) {
        Ok(config) => config,
        Err(e) => stop_for_good(&e),
    };
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

    loop {
        w.report_logs();
        serve_control_requests(&plans, &mut requests);
        reload_groups_committed_from_sql(&plans, broker.context());
        if stopping() {
            break;
        }
        if w.reload_on_sighup() {
            // A reload is also the operator's way to say "the disk is fixed".
            w.runtime.block_on(broker.reopen_offline_topics());
            broker.set_sync_policy(sync_policy());
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
    Ended::Stopped
}

/// Records this start in `kafgres.leader_epochs`. A schema without the
/// table (an extension not yet updated) is reported once and waited out,
/// like `load_catalog`'s. `None` on SIGTERM.
fn begin_epoch(w: &Worker, config: &kafgres_broker::BrokerConfig, timeline: u32) -> Option<i32> {
    let mut reported = false;
    loop {
        let begun = run_in_transaction(|| {
            replication::leader::begin_epoch(config.node_id, &config.advertised_host, config.advertised_port, timeline)
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
