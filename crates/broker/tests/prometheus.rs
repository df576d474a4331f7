//! The Prometheus endpoint over HTTP: after a produce, a fetch and an offset
//! commit, a scrape shows exactly those records and bytes per topic, the log
//! offsets and size, the group's lag, the requests and error codes per API
//! and version, the connection on its listener, and histograms that add up;
//! anything but `GET /metrics` gets an HTTP error, and a port already taken
//! leaves the endpoint closed while Kafka clients are still served; share
//! groups show their share-partitions' start, records in flight, lag and
//! acknowledgements exactly as the requests left them.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;

use common::*;
use kafgres_broker::prometheus::MetricsEndpoint;
use kafgres_broker::share::AutoOffsetReset;
use kafgres_broker::BrokerConfig;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse, ShareGroupHeartbeatRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

/// Sends `request` to the endpoint; returns the status line and the body.
async fn http(addr: SocketAddr, request: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connects");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = String::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read_to_string(&mut response));
    read.await.expect("answered in time").expect("reads");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.lines().next().expect("a status line").to_owned();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|n| n.parse().ok())
        .expect("a Content-Length");
    assert_eq!(length, body.len(), "Content-Length matches the body");
    (status, body.to_owned())
}

/// Samples by `name{labels}` exactly as written, each family's `# TYPE` checked to come first.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().expect("a name");
            assert!(typed.insert(name.to_owned()), "family {name} typed twice");
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let family = series.split('{').next().expect("a name");
        let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| family.strip_suffix(s)).unwrap_or(family);
        assert!(typed.contains(family) || typed.contains(base), "{family} sampled before its TYPE");
        let value = if value == "+Inf" { f64::INFINITY } else { value.parse().expect("a number") };
        assert!(samples.insert(series.to_owned(), value).is_none(), "{series} twice");
    }
    samples
}

async fn broker_with_endpoint() -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.metrics_endpoint = Some(MetricsEndpoint { listen: "127.0.0.1:0".parse().expect("literal"), host: None });
    TestBroker::start_with(dir, Default::default(), config).await
}

#[tokio::test]
async fn a_scrape_shows_what_was_produced_fetched_and_committed() {
    let broker = broker_with_endpoint().await;
    let endpoint = broker.broker.metrics_addr().expect("the endpoint is open");
    let mut client = broker.client().await;
    create_topic(&mut client, "scraped", 2).await;
    let sent = batch(&records("r", 5));
    let mut bytes_in = 0;
    for _ in 0..2 {
        let answer = produce(&mut client, 9, "scraped", 1, -1, sent.clone()).await;
        assert_eq!(answer.error_code, 0);
        bytes_in += sent.len();
    }
    // An unknown partition's error code is counted under its name.
    let refused = produce(&mut client, 9, "scraped", 7, -1, sent.clone()).await;
    assert_ne!(refused.error_code, 0);
    let data = single_partition(client.call(12, &fetch_request(TopicRef::Name("scraped"), 1, 0, 1 << 20, 0, 0)).await);
    let fetched = data.records.expect("records").len();
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("lagging")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(name("scraped")).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(1).with_committed_offset(3),
        ])]);
    assert_eq!(client.call(8, &commit).await.topics[0].partitions[0].error_code, 0);

    let (status, body) = http(endpoint, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let m = parse(&body);
    let get = |series: &str| *m.get(series).unwrap_or_else(|| panic!("{series} missing from\n{body}"));
    assert_eq!(get(r#"kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"}"#), 10.0);
    assert_eq!(get(r#"kafka_server_brokertopicmetrics_bytesin_total{topic="scraped"}"#), bytes_in as f64);
    assert_eq!(get("kafka_server_brokertopicmetrics_bytesin_total"), bytes_in as f64);
    assert_eq!(get(r#"kafka_server_brokertopicmetrics_bytesout_total{topic="scraped"}"#), fetched as f64);
    assert_eq!(get(r#"kafka_log_log_logendoffset{topic="scraped",partition="1"}"#), 10.0);
    assert_eq!(get(r#"kafka_log_log_logendoffset{topic="scraped",partition="0"}"#), 0.0);
    assert_eq!(get(r#"kafka_log_log_logstartoffset{topic="scraped",partition="1"}"#), 0.0);
    assert_eq!(get(r#"kafka_log_log_size{topic="scraped",partition="1"}"#), bytes_in as f64);
    assert_eq!(get(r#"kafka_topic_partition_current_offset{topic="scraped",partition="1"}"#), 10.0);
    assert_eq!(
        get(r#"kafka_consumergroup_current_offset{consumergroup="lagging",topic="scraped",partition="1"}"#),
        3.0
    );
    assert_eq!(get(r#"kafka_consumergroup_lag{consumergroup="lagging",topic="scraped",partition="1"}"#), 7.0);
    assert_eq!(get(r#"kafka_network_requestmetrics_requests_total{request="Produce",version="9"}"#), 3.0);
    assert_eq!(get(r#"kafka_network_requestmetrics_requests_total{request="Fetch",version="12"}"#), 1.0);
    assert_eq!(get(r#"kafka_network_requestmetrics_errors_total{request="Produce",error="NONE"}"#), 2.0);
    assert_eq!(
        get(r#"kafka_network_requestmetrics_errors_total{request="Produce",error="UNKNOWN_TOPIC_OR_PARTITION"}"#),
        1.0
    );
    assert_eq!(get(r#"kafgres_request_duration_seconds_count{request="Produce"}"#), 3.0);
    assert_eq!(get(r#"kafgres_request_duration_seconds_bucket{request="Produce",le="+Inf"}"#), 3.0);
    assert!(get(r#"kafgres_request_duration_seconds_sum{request="Produce"}"#) > 0.0);
    assert_eq!(get(r#"kafgres_broker_span_duration_seconds_count{span="produce"}"#), 3.0);
    assert_eq!(get("kafgres_appended_batches_total"), 2.0);
    assert_eq!(get("kafgres_flushed_batches_total"), 2.0);
    assert_eq!(get("kafgres_flush_duration_seconds_count"), get("kafgres_flush_duration_seconds_bucket{le=\"+Inf\"}"));
    assert_eq!(get(r#"kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}"#), 1.0);
    assert_eq!(get(r#"kafgres_connections{listener="PLAINTEXT",principal="ANONYMOUS"}"#), 1.0);
    assert_eq!(get("kafka_server_replicamanager_partitioncount"), 2.0);
    assert_eq!(get("kafka_controller_kafkacontroller_activecontrollercount"), 1.0);
    assert_eq!(get(r#"kafgres_replication_role{role="leader"}"#), 1.0);
    // Buckets are cumulative.
    let mut previous = 0.0;
    for line in body.lines().filter(|l| l.starts_with("kafgres_request_duration_seconds_bucket{request=\"Produce\"")) {
        let value: f64 = line.rsplit_once(' ').expect("a value").1.parse().expect("a count");
        assert!(value >= previous, "{line} after {previous}");
        previous = value;
    }

    // A second scrape after one more produce sees it.
    assert_eq!(produce(&mut client, 9, "scraped", 0, -1, sent.clone()).await.error_code, 0);
    let (_, body) = http(endpoint, "GET /metrics HTTP/1.0\r\n\r\n").await;
    let m = parse(&body);
    assert_eq!(m[r#"kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"}"#], 15.0);
    assert_eq!(m[r#"kafka_network_requestmetrics_requests_total{request="Produce",version="9"}"#], 4.0);
    broker.shutdown().await;
}

/// The share-group member `a` of group `g`, subscribed to `topic`.
async fn share_member_joins(client: &mut Client, topic: &str) {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_member_id(StrBytes::from_static_str("a"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![name(topic)]));
    let answer: kafka_protocol::messages::ShareGroupHeartbeatResponse = client.call(1, &request).await;
    assert_eq!(answer.error_code, 0, "{answer:?}");
}

/// (partition, first, last) of what a ShareFetch acquired.
fn acquired_ranges(r: &ShareFetchResponse) -> Vec<(i32, i64, i64)> {
    let mut out: Vec<(i32, i64, i64)> = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| p.acquired_records.iter().map(|a| (p.partition_index, a.first_offset, a.last_offset)))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_shows_share_partitions_their_lag_and_acknowledgements() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.metrics_endpoint = Some(MetricsEndpoint { listen: "127.0.0.1:0".parse().expect("literal"), host: None });
    config.share.group_defaults.auto_offset_reset = AutoOffsetReset::Earliest;
    let broker = TestBroker::start_with(dir, Default::default(), config).await;
    let endpoint = broker.broker.metrics_addr().expect("the endpoint is open");
    let mut client = broker.client().await;
    let topic_id = create_topic(&mut client, "queue", 2).await;
    assert_eq!(produce(&mut client, 9, "queue", 0, -1, batch(&records("p0", 5))).await.error_code, 0);
    assert_eq!(produce(&mut client, 9, "queue", 1, -1, batch(&records("p1", 4))).await.error_code, 0);
    share_member_joins(&mut client, "queue").await;

    let fetch = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
        .with_member_id(Some(StrBytes::from_static_str("a")))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![FetchTopic::default().with_topic_id(topic_id).with_partitions(vec![
            FetchPartition::default().with_partition_index(0),
            FetchPartition::default().with_partition_index(1),
        ])]);
    let got: ShareFetchResponse = client.call(1, &fetch).await;
    assert_eq!(acquired_ranges(&got), vec![(0, 0, 4), (1, 0, 3)], "{got:?}");
    // Partition 0: accept 0-1, release 2, reject 3; 4 stays acquired.
    // Partition 1: accept 1-2; 0 and 3 stay acquired.
    let batch_of = |first: i64, last: i64, types: Vec<i8>| {
        AcknowledgementBatch::default().with_first_offset(first).with_last_offset(last).with_acknowledge_types(types)
    };
    let acknowledge = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
        .with_member_id(Some(StrBytes::from_static_str("a")))
        .with_share_session_epoch(1)
        .with_topics(vec![AcknowledgeTopic::default().with_topic_id(topic_id).with_partitions(vec![
            AcknowledgePartition::default().with_partition_index(0).with_acknowledgement_batches(vec![batch_of(
                0,
                3,
                vec![ACCEPT, ACCEPT, RELEASE, REJECT],
            )]),
            AcknowledgePartition::default().with_partition_index(1).with_acknowledgement_batches(vec![batch_of(
                1,
                2,
                vec![ACCEPT],
            )]),
        ])]);
    let acked: ShareAcknowledgeResponse = client.call(1, &acknowledge).await;
    let codes: Vec<i16> = acked.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
    assert_eq!((acked.error_code, codes), (0, vec![0, 0]), "{acked:?}");
    // Records no member has been handed yet count in the lag, not in flight.
    assert_eq!(produce(&mut client, 9, "queue", 1, -1, batch(&records("later", 3))).await.error_code, 0);

    let (status, body) = http(endpoint, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let m = parse(&body);
    let get = |series: &str| *m.get(series).unwrap_or_else(|| panic!("{series} missing from\n{body}"));
    let p0 = r#"group="g",topic="queue",partition="0""#;
    let p1 = r#"group="g",topic="queue",partition="1""#;
    // Partition 0: 0-1 done moved the start to 2; 2 available, 3 archived, 4
    // acquired; lag = 5 - 2 - 1 (KIP-1226).
    assert_eq!(get(&format!("kafgres_share_partition_start_offset{{{p0}}}")), 2.0);
    assert_eq!(get(&format!("kafka_server_sharepartitionmetrics_inflightmessagecount{{{p0}}}")), 3.0);
    assert_eq!(get(&format!(r#"kafgres_share_partition_records{{{p0},state="available"}}"#)), 1.0);
    assert_eq!(get(&format!(r#"kafgres_share_partition_records{{{p0},state="acquired"}}"#)), 1.0);
    assert_eq!(get(&format!("kafgres_share_partition_lag{{{p0}}}")), 2.0);
    assert_eq!(get(&format!("kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total{{{p0}}}")), 0.0);
    // Partition 1: 0 acquired holds the start at 0; 1-2 done, 3 acquired;
    // lag = 7 - 0 - 2.
    assert_eq!(get(&format!("kafgres_share_partition_start_offset{{{p1}}}")), 0.0);
    assert_eq!(get(&format!("kafka_server_sharepartitionmetrics_inflightmessagecount{{{p1}}}")), 4.0);
    assert_eq!(get(&format!(r#"kafgres_share_partition_records{{{p1},state="available"}}"#)), 0.0);
    assert_eq!(get(&format!(r#"kafgres_share_partition_records{{{p1},state="acquired"}}"#)), 2.0);
    assert_eq!(get(&format!("kafgres_share_partition_lag{{{p1}}}")), 5.0);
    assert_eq!(get(&format!("kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total{{{p1}}}")), 0.0);
    // The group and the acknowledgements over all groups.
    assert_eq!(get(r#"kafgres_share_group_members{group="g",state="Stable"}"#), 1.0);
    assert_eq!(get(r#"kafka_server_group_coordinator_metrics_share_group_count{state="Stable"}"#), 1.0);
    assert_eq!(get(r#"kafka_server_group_coordinator_metrics_share_group_count{state="Empty"}"#), 0.0);
    assert_eq!(get(r#"kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Accept"}"#), 4.0);
    assert_eq!(get(r#"kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Release"}"#), 1.0);
    assert_eq!(get(r#"kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Reject"}"#), 1.0);
    assert_eq!(get(r#"kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Renew"}"#), 0.0);
    broker.shutdown().await;
}

/// An acquisition lock that expires is counted on its share-partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_acquisition_lock_is_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.metrics_endpoint = Some(MetricsEndpoint { listen: "127.0.0.1:0".parse().expect("literal"), host: None });
    config.share.group_defaults.auto_offset_reset = AutoOffsetReset::Earliest;
    config.share.group_defaults.record_lock_duration_ms = 200;
    let broker = TestBroker::start_with(dir, Default::default(), config).await;
    let endpoint = broker.broker.metrics_addr().expect("the endpoint is open");
    let mut client = broker.client().await;
    let topic_id = create_topic(&mut client, "queue", 1).await;
    assert_eq!(produce(&mut client, 9, "queue", 0, -1, batch(&records("r", 3))).await.error_code, 0);
    share_member_joins(&mut client, "queue").await;
    let fetch = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
        .with_member_id(Some(StrBytes::from_static_str("a")))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default().with_partition_index(0)])]);
    let got: ShareFetchResponse = client.call(1, &fetch).await;
    assert_eq!(acquired_ranges(&got), vec![(0, 0, 2)], "{got:?}");
    let series =
        r#"kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total{group="g",topic="queue",partition="0"}"#;
    // Bounded wait: the timer task releases the records shortly after 200 ms.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, body) = http(endpoint, "GET /metrics HTTP/1.0\r\n\r\n").await;
        let m = parse(&body);
        if m.get(series) == Some(&3.0) {
            assert_eq!(
                m[r#"kafgres_share_partition_records{group="g",topic="queue",partition="0",state="available"}"#],
                3.0
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "locks not counted as expired:\n{body}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn anything_but_get_metrics_is_an_http_error() {
    let broker = broker_with_endpoint().await;
    let endpoint = broker.broker.metrics_addr().expect("the endpoint is open");
    assert_eq!(http(endpoint, "GET / HTTP/1.1\r\n\r\n").await.0, "HTTP/1.1 404 Not Found");
    assert_eq!(http(endpoint, "POST /metrics HTTP/1.1\r\n\r\n").await.0, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(http(endpoint, "HELLO\r\n\r\n").await.0, "HTTP/1.1 400 Bad Request");
    let oversized = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
    assert_eq!(http(endpoint, &oversized).await.0, "HTTP/1.1 400 Bad Request");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_taken_metrics_port_leaves_the_endpoint_closed_and_kafka_served() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.metrics_endpoint = Some(MetricsEndpoint { listen: taken.local_addr().expect("bound"), host: None });
    let broker = TestBroker::start_with(dir, Default::default(), config).await;
    assert_eq!(broker.broker.metrics_addr(), None);
    let mut client = broker.client().await;
    create_topic(&mut client, "served", 1).await;
    assert_eq!(produce(&mut client, 9, "served", 0, -1, batch(&records("x", 1))).await.error_code, 0);
    broker.shutdown().await;
}
