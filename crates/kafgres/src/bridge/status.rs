//! `kafgres.sql_bridge_status`: what the SQL bridge is doing, from shared
//! memory (works in any database, and while the bridge is down).

use pgrx::prelude::*;

use super::shared::{shared, BridgeState};
use super::wal::lsn_text;

fn timestamp(ms: i64) -> Option<TimestampWithTimeZone> {
    if ms <= 0 {
        return None;
    }
    crate::sql_api::timestamp(ms)
}

fn lsn(value: u64) -> Option<String> {
    (value != 0).then(|| lsn_text(value))
}

#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _sql_bridge_status() -> TableIterator<
    'static,
    (
        name!(state, String),
        name!(pid, Option<i32>),
        name!(since, Option<TimestampWithTimeZone>),
        name!(applied_lsn, Option<String>),
        name!(restart_lsn, Option<String>),
        name!(read_lsn, Option<String>),
        name!(last_applied_at, Option<TimestampWithTimeZone>),
        name!(last_commit_at, Option<TimestampWithTimeZone>),
        name!(pending_commit_at, Option<TimestampWithTimeZone>),
        name!(transactions_applied, i64),
        name!(records_applied, i64),
        name!(records_dropped, i64),
        name!(incomplete_transactions, i64),
        name!(errors, i64),
        name!(message, Option<String>),
    ),
> {
    let Some(block) = shared() else {
        error!("kafgres: the SQL bridge's shared memory is missing: add kafgres to shared_preload_libraries");
    };
    let s = block.status();
    let count = |v: u64| v.min(i64::MAX as u64) as i64;
    TableIterator::once((
        s.state.name().to_string(),
        (s.pid > 0 && s.state != BridgeState::Stopped).then_some(s.pid),
        timestamp(s.state_since_ms),
        lsn(s.applied_lsn),
        lsn(s.restart_lsn),
        lsn(s.read_lsn),
        timestamp(s.last_applied_ms),
        timestamp(s.last_commit_ms),
        timestamp(s.pending_commit_ms),
        count(s.transactions_applied),
        count(s.records_applied),
        count(s.records_dropped),
        count(s.incomplete_transactions),
        count(s.errors),
        (!s.message.is_empty()).then_some(s.message),
    ))
}
