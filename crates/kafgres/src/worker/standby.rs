//! The broker on a hot standby: a follower of the primary's broker
//! (docs/replication.md). It copies every partition from the leader the
//! latest row of `kafgres.leader_epochs` names (or
//! `kafgres.primary_kafka_address`), under this standby's walreceiver name;
//! it serves no client data (clients are sent to the leader). Its catalog is
//! the leader's topics, kept in memory: the database is read-only here.
//!
//! It runs until SIGTERM, until the promotion (the notifier of
//! `crate::replication::promotion` sets the latch; the worker then starts
//! again as the leader), or until the leader's address changes. Every
//! [`HOUSEKEEPING_INTERVAL`] it also keeps the SQL bridge's slot at the
//! replicated checkpoint and re-reads the leader's address: neither has an
//! event to wait for on a standby (replayed rows wake no one), and neither
//! is on any record's path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafgres_broker::config::LeaderAddress;
use kafgres_broker::replication::follower::FollowerConfig;
use kafgres_broker::replication::state::LAG_TIME_MAX_DEFAULT;
use kafgres_broker::replication::ReplicationState;
use kafgres_broker::MemoryCatalog;
use pgrx::prelude::*;

use super::catalog_requests::serve_control_requests;
use super::config::{broker_config, log_dir_owner};
use super::wait::{stopping, Wakeup};
use super::{load_catalog, stop_for_good, Ended, Worker};
use crate::catalog_sql::run_in_transaction;
use crate::control::{ControlPlaneCatalog, StandbyCatalog};
use crate::gucs;
use crate::logging::RateLimited;
use crate::replication::{self, leader::LeaderRow};

pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);
/// How often recovery's end is checked when no notifier could be registered.
const PROMOTION_CHECK_FALLBACK: Duration = Duration::from_secs(1);

pub(super) fn run(w: &Worker) -> Ended {
    let notified = match replication::promotion::arm() {
        Ok(()) => true,
        Err(e) => {
            warning!("kafgres: {e}; checking for a promotion every {PROMOTION_CHECK_FALLBACK:?} instead");
            false
        }
    };
    let interval = if notified { HOUSEKEEPING_INTERVAL } else { PROMOTION_CHECK_FALLBACK };
    let Some((plans, snapshot, cluster)) = load_catalog(&w.wait, &w.database) else {
        return Ended::Stopped;
    };
    let mut config = match broker_config(cluster.cluster_id, log_dir_owner(&w.database)) {
        Ok(config) => config,
        Err(e) => stop_for_good(&e),
    };
    config.internal_secret = Some(cluster.internal_secret);
    let me = (config.advertised_host.clone(), config.advertised_port);
    let leader = match wait_for_leader(w, interval, &me) {
        Waited::Leader(l) => l,
        Waited::Ended(ended) => return ended,
    };
    let name = replication::standby_name();
    if config.node_id == leader.node_id {
        warning!(
            "kafgres: this standby has node id {} (kafgres.node_id), as its leader has: give each server its own, \
             or clients see one node at two addresses after a failover",
            config.node_id
        );
    }
    let address = format!("{}:{}", leader.host, leader.port);
    let mut follow = FollowerConfig::new(address.clone(), name.clone(), config.node_id);
    follow.internal_secret = config.internal_secret.clone();
    config.follow = Some(follow);
    // The leader's own listeners, for clients of each protocol; a list that
    // does not parse sends every client to its primary listener.
    let listeners = kafgres_broker::listener::parse_listeners(&leader.listeners).unwrap_or_else(|e| {
        warning!(
            "kafgres: the leader's recorded listeners {:?} do not parse ({e}); clients are sent to its primary",
            leader.listeners
        );
        Vec::new()
    });
    config.leader =
        Some(LeaderAddress { node_id: leader.node_id, host: leader.host.clone(), port: leader.port, listeners });
    config.replication = Arc::new(ReplicationState::new(leader.epoch, None, LAG_TIME_MAX_DEFAULT));
    let (control, mut requests) = ControlPlaneCatalog::new(Arc::clone(&w.waker));
    let catalog: Arc<dyn kafgres_broker::Catalog> =
        Arc::new(StandbyCatalog::new(MemoryCatalog::with_topics(snapshot.topics.clone()), control));
    let Some(broker) = w.start_broker(&config, &catalog, &snapshot) else {
        return Ended::Stopped;
    };
    log!(
        "kafgres: standby \"{name}\" (node {}): copying topic data from the leader at {address} (node {}, epoch {})",
        config.node_id,
        leader.node_id,
        leader.epoch
    );
    keep_bridge_wal();

    let mut next_housekeeping = Instant::now() + interval;
    let ended = loop {
        w.report_logs();
        // Logins: credentials and memberships, read from the replica.
        serve_control_requests(&plans, &mut requests);
        if stopping() {
            break Ended::Stopped;
        }
        if !replication::in_recovery() {
            log!("kafgres: this server was promoted: the broker stops following and starts as the leader");
            break Ended::Again;
        }
        let reloaded = w.reload_on_sighup();
        if reloaded {
            super::leader::reload_acls(broker.context());
            super::config::reload_tls(&broker);
            super::config::reload_settings(&broker);
        }
        if reloaded || Instant::now() >= next_housekeeping {
            if Instant::now() >= next_housekeeping {
                keep_bridge_wal();
                next_housekeeping = Instant::now() + interval;
            }
            match leader_address() {
                Ok(Some(now)) if (now.host.as_str(), now.port) != (leader.host.as_str(), leader.port) => {
                    log!(
                        "kafgres: the leader is now at {}:{} (node {}): following it there",
                        now.host,
                        now.port,
                        now.node_id
                    );
                    break Ended::Again;
                }
                _ => {}
            }
        }
        let left = next_housekeeping.saturating_duration_since(Instant::now());
        if w.wait.wait_at_most(Some(left)) == Wakeup::DataPlane {
            w.waker.drain();
        }
        check_for_interrupts!();
    };
    requests.close();
    w.stop_broker(broker);
    ended
}

enum Waited {
    Leader(LeaderRow),
    Ended(Ended),
}

/// Waits until a leader is known: the primary's broker records itself when
/// it starts, and the row reaches this standby with the WAL. A row naming
/// this node's own address is its own from when it was the primary (a
/// rewound old primary that has not replayed the new one's row yet): never
/// followed.
fn wait_for_leader(w: &Worker, interval: Duration, me: &(String, u16)) -> Waited {
    let mut reported = false;
    loop {
        match leader_address() {
            Ok(Some(leader)) if (&leader.host, leader.port) != (&me.0, me.1) => return Waited::Leader(leader),
            Ok(Some(_)) if !reported => {
                log!(
                    "kafgres: the latest leader in kafgres.leader_epochs is this node's own address ({}:{}), from \
                     when it was the primary: waiting for the current primary's row to be replayed",
                    me.0,
                    me.1
                );
                reported = true;
            }
            Ok(None) if !reported => {
                log!(
                    "kafgres: no leader recorded in kafgres.leader_epochs yet (the primary's broker records itself \
                     when it starts; or set kafgres.primary_kafka_address): waiting"
                );
                reported = true;
            }
            Err(e) if !reported => {
                warning!("kafgres: {e}; waiting");
                reported = true;
            }
            _ => {}
        }
        if !replication::in_recovery() {
            return Waited::Ended(Ended::Again);
        }
        w.wait.wait_at_most(Some(interval));
        if stopping() {
            return Waited::Ended(Ended::Stopped);
        }
        w.reload_on_sighup();
        check_for_interrupts!();
    }
}

/// The leader to follow: `kafgres.primary_kafka_address` if set (its node
/// id and epoch still from the table), else the table's latest row.
fn leader_address() -> Result<Option<LeaderRow>, String> {
    let recorded = run_in_transaction(replication::leader::current)?;
    let configured = gucs::string_or(&gucs::PRIMARY_KAFKA_ADDRESS, "");
    if configured.is_empty() {
        return Ok(recorded);
    }
    let Some((host, port)) = configured.rsplit_once(':') else {
        return Err(format!("kafgres.primary_kafka_address = '{configured}' is not host:port"));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("kafgres.primary_kafka_address = '{configured}': the port is not a number"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    Ok(Some(match recorded {
        Some(r) => LeaderRow { host, port, ..r },
        // No row yet: Kafgres's default node id until the primary records its own.
        None => LeaderRow { epoch: -1, node_id: 1, host, port, listeners: String::new() },
    }))
}

fn keep_bridge_wal() {
    static REPORTED: RateLimited = RateLimited::new(Duration::from_secs(300));
    if let Err(e) = crate::bridge::keep_wal_on_standby() {
        REPORTED.warn(&format!(
            "kafgres: keeping the SQL bridge's WAL on this standby: {e}; after a promotion, sends the primary had \
             not applied may be reported missing (kafgres.sql_bridge_gaps)"
        ));
    }
}
