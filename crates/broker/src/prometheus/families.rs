//! What a scrape shows, family by family, read from the data plane's own
//! state: the counters in [`crate::metrics::BrokerMetrics`], the partitions'
//! logs and traffic, the group coordinator's committed offsets and the
//! replication board. No SQL and no file system: a scrape costs a walk over
//! the partitions and one short hold of each log's lock.
//!
//! Names follow Kafka's JMX names as the Prometheus JMX exporter's Kafka rules
//! (Strimzi's) map them (`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`
//! becomes `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`), and
//! consumer lag as kafka_exporter names it (`kafka_consumergroup_lag`), so
//! existing Kafka dashboards work; what Kafka has no name for is `kafgres_*`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use kafgres_wire::ApiKey;

use super::exposition::{Exposition, Kind};
use super::HostMetrics;
use crate::context::BrokerContext;
use crate::listener::SecurityProtocol;
use crate::metrics::BrokerMetrics;
use crate::replication::board::Role;

/// The whole scrape.
pub fn render(
    ctx: &BrokerContext,
    listeners: &[(SecurityProtocol, SocketAddr)],
    host: Option<&dyn HostMetrics>,
) -> String {
    let mut out = Exposition::default();
    let metrics = ctx.config.metrics;
    requests(&mut out, metrics);
    let partitions = partitions(ctx);
    topic_traffic(&mut out, &partitions);
    logs(&mut out, &partitions);
    partition_counts(&mut out, ctx, &partitions);
    consumer_groups(&mut out, ctx, &partitions);
    share_groups(&mut out, ctx, &partitions);
    flushes(&mut out, metrics);
    connections(&mut out, metrics, listeners);
    client_telemetry(&mut out, ctx);
    sql_bridge(&mut out, metrics);
    archive(&mut out, metrics);
    replication(&mut out, metrics);
    if let Some(host) = host {
        host.write(&mut out);
    }
    out.into_text()
}

/// One partition as a scrape sees it.
struct PartitionRow {
    topic: String,
    index: i32,
    log_start: i64,
    log_end: i64,
    high_watermark: i64,
    size_bytes: u64,
    traffic: crate::partition::TrafficCounts,
}

/// Reads one figure of a partition's traffic.
type TrafficField = fn(&crate::partition::TrafficCounts) -> u64;
/// Reads one figure of a partition row.
type PartitionField = fn(&PartitionRow) -> f64;

fn partitions(ctx: &BrokerContext) -> Vec<PartitionRow> {
    let mut rows: Vec<PartitionRow> = ctx
        .topics
        .all_partitions()
        .iter()
        .map(|p| PartitionRow {
            topic: p.topic.clone(),
            index: p.index,
            log_start: p.log_start_offset(),
            log_end: p.log_end_offset(),
            high_watermark: p.high_watermark().offset,
            size_bytes: p.size_bytes(),
            traffic: p.traffic(),
        })
        .collect();
    rows.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
    rows
}

fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map_or_else(|_| format!("ApiKey{key}"), |k| format!("{k:?}"))
}

fn requests(out: &mut Exposition, metrics: &BrokerMetrics) {
    let apis = metrics.api.snapshot();
    out.family(
        "kafka_network_requestmetrics_requests_total",
        Kind::Counter,
        "Requests received, by API and version (Kafka's RequestMetrics RequestsPerSec).",
    );
    for api in &apis {
        let name = api_name(api.api_key);
        for &(version, n) in &api.requests {
            out.sample(&[("request", &name), ("version", &version.to_string())], n as f64);
        }
    }
    out.family(
        "kafka_network_requestmetrics_errors_total",
        Kind::Counter,
        "Error codes in answers, by API and error, NONE included (Kafka's RequestMetrics ErrorsPerSec).",
    );
    for api in &apis {
        let name = api_name(api.api_key);
        for &(code, n) in &api.errors {
            let error = kafgres_wire::error_code::name(code).map_or_else(|| format!("CODE_{code}"), str::to_owned);
            out.sample(&[("request", &name), ("error", &error)], n as f64);
        }
    }
    out.family(
        "kafgres_request_duration_seconds",
        Kind::Histogram,
        "Time in the broker per request, from its last byte read to its answer written (Kafka's TotalTimeMs); \
         long polls included.",
    );
    for api in &apis {
        out.histogram(&[("request", &api_name(api.api_key))], &api.latency, api.micros_total);
    }
    out.family(
        "kafgres_broker_span_duration_seconds",
        Kind::Histogram,
        "Produce: from the request's last byte read to its answer written (acks=all: durability included). \
         fetch_woken: from an append's publish to the woken fetch's last byte sent.",
    );
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let sums = [get(&metrics.produce_micros_total), get(&metrics.fetch_woken_micros_total)];
    for ((span, buckets), sum) in metrics.span_histograms().into_iter().zip(sums) {
        out.histogram(&[("span", span)], &buckets, sum);
    }
}

fn topic_traffic(out: &mut Exposition, partitions: &[PartitionRow]) {
    let mut by_topic: BTreeMap<&str, crate::partition::TrafficCounts> = BTreeMap::new();
    for p in partitions {
        let t = by_topic.entry(&p.topic).or_default();
        t.bytes_in += p.traffic.bytes_in;
        t.records_in += p.traffic.records_in;
        t.bytes_out += p.traffic.bytes_out;
    }
    let families: [(&str, &str, TrafficField); 3] = [
        ("kafka_server_brokertopicmetrics_messagesin_total", "Records produced (MessagesInPerSec).", |t| t.records_in),
        ("kafka_server_brokertopicmetrics_bytesin_total", "Record batch bytes produced (BytesInPerSec).", |t| {
            t.bytes_in
        }),
        (
            "kafka_server_brokertopicmetrics_bytesout_total",
            "Record batch bytes sent to consumers, not to standbys (BytesOutPerSec).",
            |t| t.bytes_out,
        ),
    ];
    for (name, help, value) in families {
        out.family(name, Kind::Counter, &format!("{help} Without a topic label: all topics, as Kafka's aggregate."));
        out.sample(&[], by_topic.values().map(value).sum::<u64>() as f64);
        for (topic, traffic) in &by_topic {
            out.sample(&[("topic", topic)], value(traffic) as f64);
        }
    }
}

fn logs(out: &mut Exposition, partitions: &[PartitionRow]) {
    let families: [(&str, Kind, &str, PartitionField); 5] = [
        ("kafka_log_log_logstartoffset", Kind::Gauge, "The partition's first offset (Log LogStartOffset).", |p| {
            p.log_start as f64
        }),
        ("kafka_log_log_logendoffset", Kind::Gauge, "The offset the next record gets (Log LogEndOffset).", |p| {
            p.log_end as f64
        }),
        ("kafka_log_log_size", Kind::Gauge, "Bytes of the partition's segments (Log Size).", |p| p.size_bytes as f64),
        (
            "kafka_topic_partition_current_offset",
            Kind::Gauge,
            "The high watermark: the end consumers read to (kafka_exporter's name).",
            |p| p.high_watermark as f64,
        ),
        ("kafka_topic_partition_oldest_offset", Kind::Gauge, "The log start offset (kafka_exporter's name).", |p| {
            p.log_start as f64
        }),
    ];
    for (name, kind, help, value) in families {
        out.family(name, kind, help);
        for p in partitions {
            out.sample(&[("topic", &p.topic), ("partition", &p.index.to_string())], value(p));
        }
    }
}

fn partition_counts(out: &mut Exposition, ctx: &BrokerContext, partitions: &[PartitionRow]) {
    let leader = !ctx.config.is_follower();
    let topics = ctx.topics.all().len();
    let offline: i32 = ctx.topics.read().all_offline().iter().map(|t| t.record.partition_count.max(0)).sum();
    let gauges: [(&str, &str, f64); 6] = [
        (
            "kafka_server_replicamanager_partitioncount",
            "Partitions served from this node's log.",
            partitions.len() as f64,
        ),
        (
            "kafka_server_replicamanager_leadercount",
            "Partitions this node leads (none on a standby).",
            if leader { partitions.len() as f64 } else { 0.0 },
        ),
        (
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the primary's broker, 0 on a standby's.",
            if leader { 1.0 } else { 0.0 },
        ),
        ("kafka_controller_kafkacontroller_globaltopiccount", "Topics served.", topics as f64),
        (
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions of every topic, offline ones included.",
            partitions.len() as f64 + f64::from(offline),
        ),
        (
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions of topics whose log could not be opened (KAFKA_STORAGE_ERROR to clients).",
            f64::from(offline),
        ),
    ];
    for (name, help, value) in gauges {
        out.family(name, Kind::Gauge, help);
        out.sample(&[], value);
    }
}

fn consumer_groups(out: &mut Exposition, ctx: &BrokerContext, partitions: &[PartitionRow]) {
    let groups = ctx.groups.read(|c| c.committed_offsets());
    let ends: BTreeMap<(&str, i32), i64> =
        partitions.iter().map(|p| ((p.topic.as_str(), p.index), p.high_watermark)).collect();
    out.family("kafka_consumergroup_members", Kind::Gauge, "Members of each consumer group (kafka_exporter's name).");
    for g in &groups {
        out.sample(&[("consumergroup", &g.group_id), ("state", g.state.as_str())], g.members as f64);
    }
    out.family(
        "kafka_consumergroup_current_offset",
        Kind::Gauge,
        "The group's committed offset per partition (kafka_exporter's name).",
    );
    for g in &groups {
        for (topic, partition, offset) in &g.offsets {
            let partition = partition.to_string();
            out.sample(&[("consumergroup", &g.group_id), ("topic", topic), ("partition", &partition)], *offset as f64);
        }
    }
    out.family(
        "kafka_consumergroup_lag",
        Kind::Gauge,
        "Records between the group's committed offset and the high watermark, per partition (kafka_exporter's \
         name); partitions of topics no longer served are left out.",
    );
    for g in &groups {
        for (topic, partition, offset) in &g.offsets {
            let Some(&end) = ends.get(&(topic.as_str(), *partition)) else { continue };
            let partition = partition.to_string();
            let lag = (end - offset).max(0);
            out.sample(&[("consumergroup", &g.group_id), ("topic", topic), ("partition", &partition)], lag as f64);
        }
    }
}

/// Share groups (KIP-932). Kafka's own names where it has them
/// (`kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount,group=g,topic=t,partition=0`
/// becomes `kafka_server_sharepartitionmetrics_inflightmessagecount{group,topic,partition}`,
/// a `…PerSec` meter a `…_total` counter, the MBean's keys its labels), the
/// rest `kafgres_share_*` with the same `group` label. Each share-partition
/// is read under its own lock, one walk of its in-flight window (bounded by
/// `share.partition.max.record.locks`).
fn share_groups(out: &mut Exposition, ctx: &BrokerContext, partitions: &[PartitionRow]) {
    let shares = &ctx.shares;
    let groups = shares.group_rows();
    out.family(
        "kafka_server_group_coordinator_metrics_share_group_count",
        Kind::Gauge,
        "Share groups per state (Kafka's group-coordinator-metrics share-group-count).",
    );
    let mut by_state: BTreeMap<&str, usize> = [("Empty", 0), ("Stable", 0)].into_iter().collect();
    for g in &groups {
        *by_state.entry(g.state.as_str()).or_default() += 1;
    }
    for (state, n) in &by_state {
        out.sample(&[("state", state)], *n as f64);
    }
    out.family("kafgres_share_group_members", Kind::Gauge, "Members of each share group, with its state.");
    for g in &groups {
        out.sample(&[("group", &g.group_id), ("state", g.state.as_str())], g.members as f64);
    }

    let counters = &shares.counters;
    out.family(
        "kafka_server_sharegroupmetrics_recordacknowledgements_total",
        Kind::Counter,
        "Records acknowledged by type, all share groups (Kafka's ShareGroupMetrics RecordAcknowledgementsPerSec).",
    );
    let acks = [
        ("Accept", &counters.accepted),
        ("Release", &counters.released),
        ("Reject", &counters.rejected),
        ("Renew", &counters.renewed),
    ];
    for (ack_type, n) in acks {
        out.sample(&[("ackType", ack_type)], n.load(Ordering::Relaxed) as f64);
    }

    let ends: BTreeMap<(&str, i32), i64> =
        partitions.iter().map(|p| ((p.topic.as_str(), p.index), p.high_watermark)).collect();
    // Rows of topics no longer served are left out, as for consumer lag.
    let rows: Vec<(String, crate::share::SharePartitionRow, i64)> = shares
        .partition_rows(|_| true)
        .into_iter()
        .filter_map(|r| {
            let topic = ctx.topics.get_by_id(&r.key.topic_id)?.name.clone();
            let end = *ends.get(&(topic.as_str(), r.key.partition))?;
            Some((topic, r, end))
        })
        .collect();
    type ShareField = fn(&crate::share::SharePartitionRow, i64) -> f64;
    let families: [(&str, Kind, &str, ShareField); 4] = [
        (
            "kafgres_share_partition_start_offset",
            Kind::Gauge,
            "The share-partition start offset (SPSO): every record below it is acknowledged or archived.",
            |r, _| r.start_offset as f64,
        ),
        (
            "kafgres_share_partition_lag",
            Kind::Gauge,
            "Records below the high watermark not delivered completely (KIP-1226): high watermark - start offset \
             - records after the start acknowledged or archived; DescribeShareGroupOffsets v1's lag.",
            |r, end| crate::share::partition::lag(end, r.start_offset, r.window.done) as f64,
        ),
        (
            "kafka_server_sharepartitionmetrics_inflightmessagecount",
            Kind::Gauge,
            "Records from the start offset to the last handed out, in any state (Kafka's SharePartitionMetrics \
             InFlightMessageCount).",
            |r, _| (r.window.available + r.window.acquired + r.window.done) as f64,
        ),
        (
            "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total",
            Kind::Counter,
            "Records whose acquisition lock expired since the broker started (Kafka's SharePartitionMetrics \
             AcquisitionLockTimeoutPerSec).",
            |r, _| r.lock_timeouts as f64,
        ),
    ];
    for (name, kind, help, value) in families {
        out.family(name, kind, help);
        for (topic, r, end) in &rows {
            let partition = r.key.partition.to_string();
            out.sample(&[("group", &r.key.group_id), ("topic", topic), ("partition", &partition)], value(r, *end));
        }
    }
    out.family(
        "kafgres_share_partition_records",
        Kind::Gauge,
        "In-flight records by state: available (may be acquired) or acquired (locked by a member).",
    );
    for (topic, r, _) in &rows {
        let partition = r.key.partition.to_string();
        for (state, n) in [("available", r.window.available), ("acquired", r.window.acquired)] {
            let labels =
                [("group", r.key.group_id.as_str()), ("topic", topic), ("partition", &partition), ("state", state)];
            out.sample(&labels, n as f64);
        }
    }
}

fn flushes(out: &mut Exposition, metrics: &BrokerMetrics) {
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
    out.family(
        "kafgres_flush_duration_seconds",
        Kind::Histogram,
        "Group-commit rounds: one fdatasync each (Kafka's LogFlushStats LogFlushRateAndTimeMs).",
    );
    out.histogram(&[], &metrics.flush_histogram(), metrics.flush_micros_total.load(Ordering::Relaxed));
    let counters: [(&str, &str, f64); 3] = [
        (
            "kafgres_flushed_batches_total",
            "Batches made durable by the rounds: batching is their ratio to the rounds.",
            get(&metrics.flushed_batches),
        ),
        (
            "kafgres_appended_batches_total",
            "Record batches appended to partition logs.",
            get(&metrics.appended_batches),
        ),
        (
            "kafgres_appended_bytes_total",
            "Bytes of record batches appended to partition logs.",
            get(&metrics.appended_bytes),
        ),
    ];
    for (name, help, value) in counters {
        out.family(name, Kind::Counter, help);
        out.sample(&[], value);
    }
}

fn connections(out: &mut Exposition, metrics: &BrokerMetrics, listeners: &[(SecurityProtocol, SocketAddr)]) {
    let listener_of = |port: u16| -> String {
        listeners
            .iter()
            .find(|(_, addr)| addr.port() == port)
            .map_or_else(|| "UNKNOWN".to_owned(), |(security, _)| security.name().to_owned())
    };
    let mut by_listener: BTreeMap<String, u64> = listeners.iter().map(|(s, _)| (s.name().to_owned(), 0)).collect();
    let mut by_principal: BTreeMap<(String, String), u64> = BTreeMap::new();
    for c in metrics.connections.snapshot() {
        let listener = listener_of(c.listener_port);
        *by_listener.entry(listener.clone()).or_default() += 1;
        let principal = c.principal.unwrap_or_else(|| "ANONYMOUS".to_owned());
        *by_principal.entry((listener, principal)).or_default() += 1;
    }
    out.family(
        "kafka_server_socket_server_metrics_connection_count",
        Kind::Gauge,
        "Open connections per listener (the first 1024 listed connections; see kafgres_connections_open).",
    );
    for (listener, n) in &by_listener {
        out.sample(&[("listener", listener)], *n as f64);
    }
    out.family("kafgres_connections", Kind::Gauge, "Open connections per listener and authenticated role.");
    for ((listener, principal), n) in &by_principal {
        out.sample(&[("listener", listener), ("principal", principal)], *n as f64);
    }
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
    let families: [(&str, Kind, &str, f64); 4] = [
        ("kafgres_connections_open", Kind::Gauge, "Open connections, listed or not.", get(&metrics.connections_open)),
        (
            "kafgres_connections_accepted_total",
            Kind::Counter,
            "Connections accepted.",
            get(&metrics.connections_accepted),
        ),
        (
            "kafgres_connections_refused_total",
            Kind::Counter,
            "Connections refused by kafgres.max_connections, max_connections_per_ip or max_connection_rate_per_ip.",
            get(&metrics.connections_refused),
        ),
        (
            "kafgres_throttled_requests_total",
            Kind::Counter,
            "Answers after which a connection was muted for its quota.",
            get(&metrics.throttled_requests),
        ),
    ];
    for (name, kind, help, value) in families {
        out.family(name, kind, help);
        out.sample(&[], value);
    }
}

/// Kafka's `client-metrics` `instance-count`: the client instances the
/// broker keeps telemetry for (0 while telemetry is off).
fn client_telemetry(out: &mut Exposition, ctx: &BrokerContext) {
    let settings = ctx.config.live.client_telemetry();
    let instances = ctx.telemetry.instances(crate::now_ms(), &settings);
    out.family(
        "kafgres_client_telemetry_instances",
        Kind::Gauge,
        "Client instances subscribed to telemetry or pushing it (KIP-714), not yet expired.",
    );
    out.sample(&[], instances as f64);
}

fn sql_bridge(out: &mut Exposition, metrics: &BrokerMetrics) {
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
    out.family("kafgres_sql_bridge_rounds_total", Kind::Counter, "Rounds of committed SQL sends applied to the log.");
    out.sample(&[], get(&metrics.sql_rounds));
    out.family("kafgres_sql_bridge_records_total", Kind::Counter, "Records sent from SQL and appended to the log.");
    out.sample(&[], get(&metrics.sql_records));
}

fn archive(out: &mut Exposition, metrics: &BrokerMetrics) {
    let status = metrics.archive.status();
    let families: [(&str, Kind, &str, f64); 7] = [
        (
            "kafgres_archive_segments_total",
            Kind::Counter,
            "Closed segments archived by kafgres.archive_command.",
            status.segments_archived as f64,
        ),
        (
            "kafgres_archive_files_total",
            Kind::Counter,
            "Files archived (a segment's log and its indexes).",
            status.files_archived as f64,
        ),
        ("kafgres_archive_bytes_total", Kind::Counter, "Bytes of the files archived.", status.bytes_archived as f64),
        (
            "kafgres_archive_failures_total",
            Kind::Counter,
            "Archive commands that failed (each retried).",
            status.failures as f64,
        ),
        (
            "kafgres_archive_backlog_segments",
            Kind::Gauge,
            "Closed segments not archived yet (held from retention).",
            status.backlog_segments as f64,
        ),
        (
            "kafgres_archive_last_archived_seconds",
            Kind::Gauge,
            "Unix time of the last file archived (0: none).",
            status.last_archived_ms as f64 / 1000.0,
        ),
        (
            "kafgres_archive_last_failure_seconds",
            Kind::Gauge,
            "Unix time of the last failed archive command (0: none).",
            status.last_failure_ms as f64 / 1000.0,
        ),
    ];
    for (name, kind, help, value) in families {
        out.family(name, kind, help);
        out.sample(&[], value);
    }
}

fn replication(out: &mut Exposition, metrics: &BrokerMetrics) {
    let board = &metrics.replication;
    let node = board.node();
    out.family("kafgres_replication_role", Kind::Gauge, "1 for this node's role (leader, follower or stopped).");
    let role = match node.role {
        Role::Stopped => "stopped",
        Role::Leader => "leader",
        Role::Follower => "follower",
    };
    out.sample(&[("role", role)], 1.0);
    out.family("kafgres_replication_leader_epoch", Kind::Gauge, "The epoch this node leads in, or follows.");
    out.sample(&[], f64::from(node.leader_epoch));
    // Families always, samples only on a standby: dashboards find the names.
    let follower = node.role == Role::Follower;
    {
        let gauges: [(&str, Kind, &str, f64); 3] = [
            (
                "kafgres_replication_copy_lag_records",
                Kind::Gauge,
                "Records the leader had that this standby's copy had not, as of its last fetch.",
                node.lag_records as f64,
            ),
            (
                "kafgres_replication_copy_connected",
                Kind::Gauge,
                "1 while the copy is connected to the leader.",
                if node.connected { 1.0 } else { 0.0 },
            ),
            (
                "kafgres_replication_copy_fetched_bytes_total",
                Kind::Counter,
                "Bytes copied from the leader.",
                node.bytes_fetched as f64,
            ),
        ];
        for (name, kind, help, value) in gauges {
            out.family(name, kind, help);
            if follower {
                out.sample(&[], value);
            }
        }
    }
    let followers = board.followers();
    out.family(
        "kafgres_replication_follower_lag_records",
        Kind::Gauge,
        "Per standby fetching from this leader: records below the log ends it has not fetched yet.",
    );
    for f in &followers {
        out.sample(&[("follower", &f.name), ("node_id", &f.node_id.to_string())], f.lag_records as f64);
    }
    out.family(
        "kafgres_replication_follower_last_fetch_seconds",
        Kind::Gauge,
        "Per standby: the Unix time of its last fetch.",
    );
    for f in &followers {
        out.sample(&[("follower", &f.name), ("node_id", &f.node_id.to_string())], f.last_fetch_ms as f64 / 1000.0);
    }
}
