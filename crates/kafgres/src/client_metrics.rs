//! `kafgres.client_metrics`: what Kafka clients pushed (KIP-714 client
//! telemetry), per client instance the latest value of each metric. The
//! rows live in the broker's memory (`kafgres_broker::telemetry`), too many
//! for a fixed shared block: a backend asks with the replication board's
//! status ticket, the worker writes them to `pg_stat_tmp` along with the
//! replica status, and the backend reads the file
//! (`crate::replication::partitions` has the mechanism).

use kafgres_broker::context::BrokerContext;
use kafgres_broker::replication::board::Role;
use kafgres_broker::telemetry::status_file;
use pgrx::prelude::*;

use crate::replication::partitions::{wait_for_status, write_status};
use crate::replication::status::{at, board};

/// Where the worker writes the rows, relative to the data directory.
const STATUS_FILE: &str = "pg_stat_tmp/kafgres_client_metrics";

/// The worker, answering a status ticket: the metrics kept now.
pub fn write_status_file(ctx: &BrokerContext) {
    let settings = ctx.config.live.client_telemetry();
    let rows = ctx.telemetry.rows(kafgres_broker::now_ms(), &settings);
    write_status(STATUS_FILE, &status_file::encode(&rows));
}

/// Every metric kept, by client instance and name; no rows on a standby
/// (whose broker serves no telemetry) or while telemetry is off.
// The columns are named in the signature (pgrx's `name!`), so no type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn _client_metrics() -> TableIterator<
    'static,
    (
        name!(client_instance_id, pgrx::Uuid),
        name!(client_id, String),
        name!(address, String),
        name!(metric, String),
        name!(value, f64),
        name!(pushed_at, Option<TimestampWithTimeZone>),
    ),
> {
    let board = board();
    if board.node().role != Role::Leader {
        return TableIterator::new(Vec::new());
    }
    wait_for_status(board, "kafgres.client_metrics");
    let text = std::fs::read_to_string(STATUS_FILE).unwrap_or_else(|e| {
        error!("kafgres: cannot read {STATUS_FILE}, which the broker writes for kafgres.client_metrics: {e}")
    });
    let rows = status_file::decode(&text).unwrap_or_else(|e| error!("kafgres: {STATUS_FILE}: {e}"));
    let rows: Vec<_> = rows
        .into_iter()
        .map(|r| {
            (
                pgrx::Uuid::from_bytes(*r.client_instance_id.as_bytes()),
                r.client_id,
                r.address.ip().to_string(),
                r.name,
                r.value,
                at(r.pushed_at_ms),
            )
        })
        .collect();
    TableIterator::new(rows)
}
