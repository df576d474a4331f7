//! The SQL bridge's families in the broker's Prometheus scrape, read from the
//! bridge's shared memory (atomics and a spin lock held to copy its message:
//! safe from the data plane's threads, which never call into Postgres).

use kafgres_broker::prometheus::{Exposition, HostMetrics, Kind};

use super::shared::{self, BridgeState};

/// What the broker worker hands its data plane for each scrape.
pub struct BridgeMetrics;

const STATES: [BridgeState; 6] = [
    BridgeState::NotStarted,
    BridgeState::WaitingForExtension,
    BridgeState::Running,
    BridgeState::WaitingForBroker,
    BridgeState::Failing,
    BridgeState::Stopped,
];

impl HostMetrics for BridgeMetrics {
    fn write(&self, out: &mut Exposition) {
        let Some(bridge) = shared::shared() else { return };
        let status = bridge.status();
        out.family("kafgres_sql_bridge_state", Kind::Gauge, "1 for the SQL bridge's state, 0 for the others.");
        for state in STATES {
            out.sample(&[("state", state.name())], if state == status.state { 1.0 } else { 0.0 });
        }
        let lag_s = if status.pending_commit_ms > 0 {
            (shared::now_ms() - status.pending_commit_ms).max(0) as f64 / 1000.0
        } else {
            0.0
        };
        let positions: [(&str, Kind, &str, f64); 8] = [
            (
                "kafgres_sql_bridge_applied_lsn_bytes",
                Kind::Gauge,
                "WAL position up to which every committed send is in the log.",
                status.applied_lsn as f64,
            ),
            (
                "kafgres_sql_bridge_read_lsn_bytes",
                Kind::Gauge,
                "WAL position the bridge has read to; the applied position trails it by what is being applied.",
                status.read_lsn as f64,
            ),
            (
                "kafgres_sql_bridge_last_applied_seconds",
                Kind::Gauge,
                "Unix time of the bridge's last applied round (0: none since the server started).",
                status.last_applied_ms.max(0) as f64 / 1000.0,
            ),
            (
                "kafgres_sql_bridge_last_commit_seconds",
                Kind::Gauge,
                "Unix commit time of the newest SQL transaction whose sends were applied (0: none since the server started).",
                status.last_commit_ms.max(0) as f64 / 1000.0,
            ),
            (
                "kafgres_sql_bridge_lag_seconds",
                Kind::Gauge,
                "How long the oldest committed transaction read but not applied yet has waited since its commit (0: none waits).",
                lag_s,
            ),
            (
                "kafgres_sql_bridge_transactions_applied_total",
                Kind::Counter,
                "SQL transactions whose sends were applied.",
                status.transactions_applied as f64,
            ),
            (
                "kafgres_sql_bridge_records_dropped_total",
                Kind::Counter,
                "Records sent from SQL the broker refused (each logged with its reason).",
                status.records_dropped as f64,
            ),
            ("kafgres_sql_bridge_errors_total", Kind::Counter, "Failed bridge rounds, retried.", status.errors as f64),
        ];
        for (name, kind, help, value) in positions {
            out.family(name, kind, help);
            out.sample(&[], value);
        }
    }
}
