//! Client telemetry (KIP-714) end to end on an in-process broker: off by
//! default (keys 71 and 72 neither advertised nor served), on after a reload
//! with `client_telemetry_metrics`; subscription, pushes (plain and
//! zstd-compressed OTLP, encoded by hand), the metrics kept, every error,
//! and a settings change refusing the old subscription id.

mod common;

use common::{Client, TestBroker, CLIENT_ID};
use kafgres_broker::settings::Reloadable;
use kafgres_broker::telemetry::otlp::encode;
use kafgres_broker::telemetry::TelemetrySettings;
use kafgres_record::compression;
use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{
    ApiVersionsRequest, GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

fn telemetry_keys(client_versions: &kafka_protocol::messages::ApiVersionsResponse) -> Vec<i16> {
    client_versions
        .api_keys
        .iter()
        .map(|a| a.api_key)
        .filter(|k| *k == ApiKey::GetTelemetrySubscriptions as i16 || *k == ApiKey::PushTelemetry as i16)
        .collect()
}

fn versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafgres-tests"))
        .with_client_software_version(StrBytes::from_static_str("1"))
}

/// Turns telemetry on (or changes it) the way `pg_reload_conf()` does.
fn reload(broker: &TestBroker, metrics: &str, metrics_bytes_max: i32) {
    let statics = broker.broker.context().config.live.statics().expect("statics after start");
    let client_telemetry = TelemetrySettings {
        requested_metrics: TelemetrySettings::parse_metrics(metrics),
        push_interval_ms: 60_000,
        metrics_bytes_max,
    };
    broker.broker.reload(&Reloadable { client_telemetry, ..statics });
}

async fn subscribe(client: &mut Client, id: Uuid) -> GetTelemetrySubscriptionsResponse {
    client.call(0, &GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id)).await
}

fn push(id: Uuid, subscription_id: i32, compression_type: i8, metrics: Vec<u8>) -> PushTelemetryRequest {
    PushTelemetryRequest::default()
        .with_client_instance_id(id)
        .with_subscription_id(subscription_id)
        .with_compression_type(compression_type)
        .with_metrics(metrics.into())
}

fn payload(value: f64) -> Vec<u8> {
    encode::metrics_data(&[
        encode::number_metric("org.apache.kafka.producer.record.send.rate", value, true),
        encode::number_metric("org.apache.kafka.consumer.fetch.rate", 1.0, true),
        encode::histogram_metric("org.apache.kafka.producer.request.latency", 4, 10.0),
    ])
}

fn kept(broker: &TestBroker) -> Vec<(Uuid, String, String, f64)> {
    let ctx = broker.broker.context();
    let settings = ctx.config.live.client_telemetry();
    let now = kafgres_broker::now_ms();
    ctx.telemetry
        .rows(now, &settings)
        .into_iter()
        .map(|r| (r.client_instance_id, r.client_id, r.name, r.value))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_by_default_then_on_after_a_reload() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let versions = client.call(3, &versions_request()).await;
    assert!(telemetry_keys(&versions).is_empty(), "advertised while off");
    // Refused as an unknown API (the connection closes, as for any key not served).
    client.send(0, &GetTelemetrySubscriptionsRequest::default()).await;
    client.expect_closed().await;

    reload(&broker, "org.apache.kafka.producer.", 1 << 20);
    let mut client = broker.client().await;
    let versions = client.call(3, &versions_request()).await;
    assert_eq!(telemetry_keys(&versions), vec![71, 72]);
    let answer = subscribe(&mut client, Uuid::nil()).await;
    assert_eq!(answer.error_code, 0);
    assert!(!answer.client_instance_id.is_nil(), "a new instance id");

    // Off again: no longer advertised nor served.
    reload(&broker, "", 1 << 20);
    let versions = client.call(3, &versions_request()).await;
    assert!(telemetry_keys(&versions).is_empty());
    client.send(0, &GetTelemetrySubscriptionsRequest::default()).await;
    client.expect_closed().await;
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_metrics_are_kept_plain_and_zstd() {
    let broker = TestBroker::start().await;
    reload(&broker, "org.apache.kafka.producer.", 1 << 20);
    let mut client = broker.client().await;
    let granted = subscribe(&mut client, Uuid::nil()).await;
    assert_eq!(granted.error_code, 0);
    assert_eq!(granted.requested_metrics, vec![StrBytes::from_static_str("org.apache.kafka.producer.")]);
    assert_eq!(granted.accepted_compression_types, vec![4, 3, 1, 2]);
    assert_eq!((granted.push_interval_ms, granted.telemetry_max_bytes), (60_000, 1 << 20));
    assert!(granted.delta_temporality);
    let id = granted.client_instance_id;

    let answer = client.call(0, &push(id, granted.subscription_id, 0, payload(12.5))).await;
    assert_eq!(answer.error_code, 0);
    let expected = |v: f64| {
        vec![
            (id, CLIENT_ID.to_owned(), "org.apache.kafka.producer.record.send.rate".to_owned(), v),
            (id, CLIENT_ID.to_owned(), "org.apache.kafka.producer.request.latency.count".to_owned(), 4.0),
            (id, CLIENT_ID.to_owned(), "org.apache.kafka.producer.request.latency.sum".to_owned(), 10.0),
        ]
    };
    assert_eq!(kept(&broker), expected(12.5), "the consumer metric is not asked for");

    // The next push is early (the interval is a minute), but terminating:
    // accepted, zstd-compressed, and the latest value replaces the first.
    let zstd = compression::encode::compress(compression::CODEC_ZSTD, &payload(99.0));
    let last = push(id, granted.subscription_id, 4, zstd).with_terminating(true);
    assert_eq!(client.call(0, &last).await.error_code, 0);
    assert_eq!(kept(&broker), expected(99.0));
    // Nothing after a terminating push.
    let after = client.call(0, &push(id, granted.subscription_id, 0, payload(1.0))).await;
    assert_eq!(after.error_code, error_code::INVALID_REQUEST);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_error() {
    let broker = TestBroker::start().await;
    reload(&broker, "*", 64);
    let mut client = broker.client().await;
    let granted = subscribe(&mut client, Uuid::nil()).await;
    assert_eq!(granted.requested_metrics, vec![StrBytes::from_static_str("*")]);
    let (id, sub) = (granted.client_instance_id, granted.subscription_id);
    let code = |r: kafka_protocol::messages::PushTelemetryResponse| r.error_code;

    // A get before the interval (no push since the last one) is throttled.
    assert_eq!(subscribe(&mut client, id).await.error_code, error_code::THROTTLING_QUOTA_EXCEEDED);
    // Nil or reserved instance ids.
    assert_eq!(code(client.call(0, &push(Uuid::nil(), sub, 0, vec![])).await), error_code::INVALID_REQUEST);
    // A wrong subscription id; after it, the client may subscribe again at once.
    assert_eq!(code(client.call(0, &push(id, sub ^ 1, 0, vec![])).await), error_code::UNKNOWN_SUBSCRIPTION_ID);
    assert_eq!(subscribe(&mut client, id).await.error_code, 0);
    // A codec nobody knows.
    assert_eq!(code(client.call(0, &push(id, sub, 7, vec![])).await), error_code::UNSUPPORTED_COMPRESSION_TYPE);
    assert_eq!(subscribe(&mut client, id).await.error_code, 0);
    // Past telemetry_max_bytes (64).
    assert_eq!(code(client.call(0, &push(id, sub, 0, vec![0; 65])).await), error_code::TELEMETRY_TOO_LARGE);
    assert_eq!(subscribe(&mut client, id).await.error_code, 0);
    // A payload that is not OTLP.
    assert_eq!(code(client.call(0, &push(id, sub, 0, vec![0x80])).await), error_code::INVALID_RECORD);
    // Too early: the push above counted.
    assert_eq!(code(client.call(0, &push(id, sub, 0, vec![])).await), error_code::THROTTLING_QUOTA_EXCEEDED);
    assert!(kept(&broker).is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_change_refuses_the_old_subscription() {
    let broker = TestBroker::start().await;
    reload(&broker, "org.apache.kafka.producer.", 1 << 20);
    let mut client = broker.client().await;
    let first = subscribe(&mut client, Uuid::nil()).await;
    let id = first.client_instance_id;
    reload(&broker, "org.apache.kafka.", 1 << 20);
    let old = client.call(0, &push(id, first.subscription_id, 0, payload(1.0))).await;
    assert_eq!(old.error_code, error_code::UNKNOWN_SUBSCRIPTION_ID);
    let second = subscribe(&mut client, id).await;
    assert_eq!(second.error_code, 0, "re-subscribing at once after a change");
    assert_eq!(second.client_instance_id, id);
    assert_ne!(second.subscription_id, first.subscription_id);
    assert_eq!(second.requested_metrics, vec![StrBytes::from_static_str("org.apache.kafka.")]);
    let new = client.call(0, &push(id, second.subscription_id, 0, payload(2.0))).await;
    assert_eq!(new.error_code, 0);
    assert_eq!(kept(&broker).len(), 4, "now the consumer metric too");
    broker.broker.shutdown().await;
}
