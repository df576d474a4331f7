//! The functions behind the `kafgres.replication` and `kafgres.replicas`
//! views: the broker's replication board, read from shared memory
//! (`kafgres_broker::replication::board`).

use kafgres_broker::replication::board::{ReplicationBoard, Role};
use kafgres_broker::replication::state::LAG_TIME_MAX_DEFAULT;
use pgrx::prelude::*;

use crate::sql_api::POSTGRES_EPOCH_UNIX_US;

pub(crate) fn board() -> &'static ReplicationBoard {
    match crate::shared_metrics::metrics() {
        Some(m) => &m.replication,
        None => error!("kafgres: the broker's shared memory is missing: add kafgres to shared_preload_libraries"),
    }
}

pub(crate) fn at(ms: i64) -> Option<TimestampWithTimeZone> {
    ms.checked_mul(1000).and_then(|us| TimestampWithTimeZone::try_from(us - POSTGRES_EPOCH_UNIX_US).ok())
}

/// This node: its role, node id and epoch; on a standby, its copy.
// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _replication() -> TableIterator<
    'static,
    (
        name!(role, String),
        name!(node_id, i32),
        name!(leader_epoch, Option<i32>),
        name!(connected, Option<bool>),
        name!(lag_records, Option<i64>),
        name!(last_fetch_at, Option<TimestampWithTimeZone>),
        name!(records_fetched, Option<i64>),
        name!(bytes_fetched, Option<i64>),
        name!(records_truncated, Option<i64>),
    ),
> {
    let node = board().node();
    let standby = node.role == Role::Follower;
    let role = match node.role {
        Role::Stopped => "stopped",
        Role::Leader => "leader",
        Role::Follower => "standby",
    };
    let only_standby = |v: i64| standby.then_some(v);
    TableIterator::once((
        role.to_owned(),
        node.node_id,
        (node.leader_epoch >= 0).then_some(node.leader_epoch),
        standby.then_some(node.connected),
        only_standby(node.lag_records),
        if standby { node.last_fetch_ms.and_then(at) } else { None },
        only_standby(node.records_fetched.min(i64::MAX as u64) as i64),
        only_standby(node.bytes_fetched.min(i64::MAX as u64) as i64),
        only_standby(node.records_truncated.min(i64::MAX as u64) as i64),
    ))
}

/// On a leader: the standbys' brokers that fetch from it.
// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _replicas() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(node_id, i32),
        name!(connected, bool),
        name!(sync_priority, Option<i32>),
        name!(lag_records, i64),
        name!(connected_since, Option<TimestampWithTimeZone>),
        name!(last_fetch_at, Option<TimestampWithTimeZone>),
        name!(caught_up_at, Option<TimestampWithTimeZone>),
    ),
> {
    let policy = super::sync_policy().unwrap_or(None);
    let now = kafgres_broker::now_ms();
    let lag_time_max = LAG_TIME_MAX_DEFAULT.as_millis() as i64;
    let rows: Vec<_> = board()
        .followers()
        .into_iter()
        .map(|f| {
            let priority = policy.as_ref().and_then(|p| p.priority(&f.name)).map(|p| p as i32 + 1);
            (
                f.name,
                f.node_id,
                now - f.last_fetch_ms <= lag_time_max,
                priority,
                f.lag_records,
                at(f.connected_since_ms),
                at(f.last_fetch_ms),
                f.caught_up_ms.and_then(at),
            )
        })
        .collect();
    TableIterator::new(rows)
}
