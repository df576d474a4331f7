//! The `kafgres` PostgreSQL extension: it hosts the broker, it does not
//! re-implement it.
//!
//! - [`gucs`]: every `kafgres.*` setting, registered in `_PG_init` and read
//!   only on the worker's main thread;
//! - [`worker`]: the background worker. Its main thread is the control plane
//!   (SPI, signals, postmaster death, a WaitEventSet); it starts the data plane
//!   (`kafgres-broker` on a tokio runtime whose threads block every signal and
//!   never call Postgres) and serves its requests through bounded channels;
//! - [`control`]: the messages between the planes and the data plane's
//!   `Catalog` implementation that sends them;
//! - [`catalog_sql`]: the SQL the control plane runs, as plans prepared once
//!   and kept; [`acl_sql`]: the ACL bindings and role memberships the
//!   authorizer uses;
//! - [`bridge`]: the SQL bridge, a second background worker that carries
//!   records sent and offsets committed from SQL transactions to the broker,
//!   exactly once in commit order, through the broker's Kafka port;
//! - [`wake`]: shared memory holding the worker's pid, so that `CREATE
//!   EXTENSION` can wake a worker that was waiting for the schema.
//!
//! The schema itself is `sql/schema.sql`.

use pgrx::prelude::*;

pub mod acl_sql;
pub mod bridge;
pub mod broker_config_sql;
pub mod catalog_sql;
pub mod client_metrics;
pub mod control;
pub mod delegation_token_sql;
pub mod gucs;
pub mod internal_login;
pub mod lifecycle;
pub mod logging;
pub mod quota_sql;
pub mod replication;
pub mod scram_sql;
pub mod share_sql;
pub mod shared_metrics;
pub mod sql_api;
pub mod wake;
pub mod worker;

::pgrx::pg_module_magic!();

pgrx::extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
pgrx::extension_sql_file!("../sql/capture.sql", name = "capture");

extension_sql!(
    r#"
-- What the broker knows, as relations (the functions ask it over loopback).
CREATE VIEW kafgres.partition_status AS SELECT * FROM kafgres._partition_status();
COMMENT ON VIEW kafgres.partition_status IS
    'Every partition: log start and end offsets (from the broker) and its size on disk.';
CREATE VIEW kafgres.consumer_groups AS SELECT * FROM kafgres._group_status();
COMMENT ON VIEW kafgres.consumer_groups IS
    'Consumer groups the broker coordinates (Kafka and SQL consumers): state and live members.';
CREATE VIEW kafgres.consumer_lag AS
SELECT o.group_id, o.topic, o.partition, o.committed_offset, s.log_end_offset,
       CASE WHEN o.committed_offset >= 0 THEN greatest(s.log_end_offset - o.committed_offset, 0)
            ELSE s.log_end_offset - s.log_start_offset END AS lag
FROM kafgres.consumer_offsets o
JOIN kafgres.partition_status s ON s.topic = o.topic AND s.partition = o.partition;
COMMENT ON VIEW kafgres.consumer_lag IS
    'Per group and partition: committed offset, log end and the records not yet consumed.';

CREATE VIEW kafgres.broker_metrics AS SELECT * FROM kafgres._broker_metrics();
COMMENT ON VIEW kafgres.broker_metrics IS
    'Broker counters since the server started: requests, appends, group-commit flushes (flushed_batches / flushes '
    'is how many appends share one fdatasync), connections, records applied from SQL.';
CREATE VIEW kafgres.flush_latency AS SELECT * FROM kafgres._flush_latency();
COMMENT ON VIEW kafgres.flush_latency IS
    'Histogram of group-commit fdatasync latency: flushes that took less than below_micros (NULL: the rest).';
CREATE VIEW kafgres.request_latency AS SELECT * FROM kafgres._request_latency();
COMMENT ON VIEW kafgres.request_latency IS
    'Histogram of the broker''s own time per request: span produce (last byte read to answer written) and '
    'fetch_woken (the waking append to the answer sent); requests that took less than below_micros (NULL: the rest).';
CREATE VIEW kafgres.sql_bridge_status AS
SELECT state, pid, since, applied_lsn::pg_lsn AS applied_lsn, restart_lsn::pg_lsn AS restart_lsn,
       read_lsn::pg_lsn AS read_lsn, last_applied_at, last_commit_at, pending_commit_at,
       CASE WHEN pending_commit_at IS NOT NULL THEN greatest(clock_timestamp() - pending_commit_at, interval '0')
            ELSE interval '0' END AS lag,
       transactions_applied, records_applied, records_dropped, incomplete_transactions, errors, message,
       (SELECT count(*) FROM kafgres.sql_bridge_gaps) AS gaps
FROM kafgres._sql_bridge_status();
COMMENT ON VIEW kafgres.sql_bridge_status IS
    'The SQL bridge (records sent from SQL on their way to the broker): state and since when, the WAL applied '
    '(every send committed before applied_lsn is in its topic), retained (restart_lsn) and read; the commit time of '
    'the newest transaction applied and of the oldest one read but not applied yet, and lag: how long that one has '
    'waited since its commit (0 when none waits); counters, the last error, and how many gaps '
    'kafgres.sql_bridge_gaps lists.';
CREATE VIEW kafgres.connections AS
SELECT client_addr::inet AS client_addr, client_port, client_id, principal, connected_at, requests, bytes_in,
       bytes_out
FROM kafgres._connections();
COMMENT ON VIEW kafgres.connections IS
    'Kafka clients connected to the broker now; principal: the role a client authenticated as (SASL), else NULL.';

CREATE VIEW kafgres.replication AS
SELECT r.role, r.node_id, r.leader_epoch, l.node_id AS leader_node_id, l.host AS leader_host, l.port AS leader_port,
       r.connected, r.lag_records, r.last_fetch_at, r.records_fetched, r.bytes_fetched, r.records_truncated
FROM kafgres._replication() r
LEFT JOIN LATERAL (SELECT * FROM kafgres.leader_epochs ORDER BY epoch DESC LIMIT 1) l ON true;
COMMENT ON VIEW kafgres.replication IS
    'This server''s broker: leader (a primary), standby (copying topic data from the leader) or stopped; its epoch, '
    'the leader as last recorded, and on a standby its copy: connected, records behind the leader, last fetch.';
CREATE VIEW kafgres.replicas AS SELECT * FROM kafgres._replicas();
COMMENT ON VIEW kafgres.replicas IS
    'On a leader: the standbys whose brokers copy its topic data, by walreceiver name; sync_priority: their place in '
    'synchronous_standby_names (NULL: not named, acks=all does not wait for them); lag_records: records not yet copied.';
CREATE VIEW kafgres.replica_partitions AS SELECT * FROM kafgres._replica_partitions();
COMMENT ON VIEW kafgres.replica_partitions IS
    'On a leader: each standby''s copy of each partition: replicated_offset (it holds every record below), the '
    'leader''s log end and high watermark, lag_records, caught_up_at (now() - caught_up_at is its lag in time).';
CREATE VIEW kafgres.client_metrics AS
SELECT client_instance_id, client_id, address::inet AS address, metric, value, pushed_at
FROM kafgres._client_metrics();
COMMENT ON VIEW kafgres.client_metrics IS
    'What Kafka clients pushed (KIP-714 client telemetry, on while kafgres.client_telemetry_metrics is set): per '
    'client instance, the latest value of each metric asked for (a histogram as metric.count and metric.sum), when '
    'and from which client id and address; kept in the broker''s memory, forgotten at a restart or three push '
    'intervals after a client stops.';
CREATE VIEW kafgres.archive_status AS SELECT * FROM kafgres._archive_status();
COMMENT ON VIEW kafgres.archive_status IS
    'kafgres.archive_command since the server started: segments, files and bytes archived, closed segments not '
    'archived yet (held from retention), the last file archived, failures (each retried) and the last one.';

CREATE VIEW kafgres.capture_status AS
SELECT c.relation, c.topic, c.format, c.columns, c.row_filter, c.dead_letter_topic, c.tombstones, c.created_at,
       c.snapshot_state, c.snapshot_rows, c.snapshot_pages_done, c.snapshot_pages_total,
       CASE WHEN c.snapshot_pages_total > 0 THEN round(100.0 * least(c.snapshot_pages_done, c.snapshot_pages_total)
                                                       / c.snapshot_pages_total, 1)
            WHEN c.snapshot_state = 'done' THEN 100.0 END AS snapshot_percent,
       c.snapshot_started_at, c.snapshot_updated_at,
       CASE WHEN g.tgenabled IS NULL THEN 'trigger missing'
            WHEN g.tgenabled = 'D' THEN 'trigger disabled'
            ELSE 'capturing' END AS state,
       b.state AS bridge_state, b.applied_lsn, b.last_applied_at, b.last_commit_at, b.lag AS bridge_lag,
       CASE WHEN NOT pg_is_in_recovery() THEN pg_wal_lsn_diff(pg_current_wal_lsn(), b.applied_lsn) END
           AS bridge_lag_bytes
FROM kafgres.captures c
LEFT JOIN pg_trigger g ON g.tgrelid = c.relation AND g.tgname = 'kafgres_capture'
LEFT JOIN kafgres.sql_bridge_status b ON true;
COMMENT ON VIEW kafgres.capture_status IS
    'Each capture (kafgres.capture): its settings, its last snapshot''s progress, whether its trigger fires, and how far the SQL bridge that '
    'delivers its changes is: every change committed before applied_lsn is in its topic; bridge_lag: how long the '
    'oldest committed change not yet delivered has waited since its commit (0: none waits; changes of every capture '
    'and send share one stream in commit order); bridge_lag_bytes of WAL are written after applied_lsn (all of the '
    'server''s WAL, not only changes).';

CREATE VIEW kafgres.share_group_partitions AS
SELECT p.group_id, t.name AS topic, p.partition, p.start_offset, s.log_end_offset,
       c.available + c.acquired AS in_flight, c.available, c.acquired, c.acknowledged, c.archived,
       greatest(s.log_end_offset - p.start_offset - c.acknowledged - c.archived, 0) AS lag,
       p.updated_at
FROM kafgres.share_partitions p
JOIN kafgres.topics t ON t.topic_id = p.topic_id
LEFT JOIN kafgres.partition_status s ON s.topic = t.name AND s.partition = p.partition
CROSS JOIN LATERAL (
    SELECT coalesce(sum(b.n) FILTER (WHERE b.state = 0), 0)::bigint AS available,
           coalesce(sum(b.n) FILTER (WHERE b.state = 1), 0)::bigint AS acquired,
           coalesce(sum(b.n) FILTER (WHERE b.state = 2), 0)::bigint AS acknowledged,
           coalesce(sum(b.n) FILTER (WHERE b.state = 4), 0)::bigint AS archived
    FROM (SELECT (e ->> 2)::int AS state, (e ->> 1)::bigint - (e ->> 0)::bigint + 1 AS n
          FROM jsonb_array_elements(p.state_batches) AS e) b
) c
WHERE p.start_offset >= 0;
COMMENT ON VIEW kafgres.share_group_partitions IS
    'Share groups (KIP-932), per group and partition, as last stored: the start offset, the records in flight after '
    'it (available or acquired) and those already acknowledged or archived, and lag as Kafka 4.2 defines it: the '
    'records below the log end not delivered completely yet (log end - start offset - acknowledged - archived). '
    'Members are not stored: kafka-share-groups.sh --describe --members lists them.';

-- Nothing is open to PUBLIC: grant EXECUTE / SELECT to the roles that
-- produce, consume or watch (docs/sql.md lists what each needs).
REVOKE ALL ON ALL TABLES IN SCHEMA kafgres FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA kafgres FROM PUBLIC;
-- kafgres.snapshot commits between chunks, so it runs as its caller and its
-- chunks as their owner: they check the caller's rights themselves.
GRANT EXECUTE ON FUNCTION kafgres._capture_snapshot_start(regclass, boolean),
                          kafgres._capture_snapshot_chunk(regclass, oid, bigint, bigint, boolean) TO PUBLIC;

-- Wake a broker worker that started before the schema existed; it starts
-- serving as soon as this transaction commits.
SELECT kafgres._wake_broker();
"#,
    name = "wake_broker_on_install",
    finalize
);

#[allow(non_snake_case)]
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::register();
    // SAFETY: a plain read of a bool that Postgres sets around loading
    // shared_preload_libraries; _PG_init runs on the process's only thread,
    // while Postgres loads this library, so nothing writes it meanwhile.
    if unsafe { !pg_sys::process_shared_preload_libraries_in_progress } {
        // Loaded by CREATE EXTENSION in a backend without preloading: the SQL
        // objects work, but no broker can be started from here.
        return;
    }
    wake::init_shared_memory();
    replication::promotion::init_shared_memory();
    shared_metrics::init();
    bridge::shared::init();
    worker::register();
    bridge::register();
}
