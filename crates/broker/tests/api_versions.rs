//! ApiVersions: the advertised table is exactly `SERVED_APIS` (less the gated
//! APIs, off by default: see telemetry.rs), the response
//! header is always v0, the only tagged fields are the features Kafka sends
//! (tags 0-2, from v3), and an unknown version is answered per KIP-511.

mod common;

use bytes::{Buf, BytesMut};
use common::{request_frame, TestBroker};
use kafgres_broker::api::{features, served_now, Gates};
use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn served_table() -> Vec<(i16, i16, i16)> {
    served_now(Gates::default()).map(|a| (a.key as i16, a.versions.advertised_min, a.versions.max)).collect()
}

fn table_of(response: &ApiVersionsResponse) -> Vec<(i16, i16, i16)> {
    response.api_keys.iter().map(|a| (a.api_key, a.min_version, a.max_version)).collect()
}

/// The body the broker should send: the served table and nothing else.
fn expected_body(version: i16, error_code: i16, features_epoch: i64) -> BytesMut {
    let keys = served_now(Gates::default())
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.versions.advertised_min)
                .with_max_version(a.versions.max)
        })
        .collect();
    let mut response = ApiVersionsResponse::default().with_error_code(error_code).with_api_keys(keys);
    if version >= 3 && error_code != error_code::UNSUPPORTED_VERSION {
        response = response
            .with_supported_features(features::supported_features())
            .with_finalized_features_epoch(features_epoch)
            .with_finalized_features(features::finalized_features(2));
    }
    let mut out = BytesMut::new();
    response.encode(&mut out, version).expect("encodes");
    out
}

fn request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafgres-tests"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertises_exactly_the_served_table_and_kafkas_features() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // When the levels took effect: the broker's start.
    let epoch = broker.broker.context().config.live.features_epoch();
    assert!(epoch > 1_600_000_000_000, "{epoch}");
    for version in [0i16, 3, 4] {
        let correlation_id = client.next_correlation_id();
        client.send_raw(&request_frame(ApiKey::ApiVersions, version, correlation_id, &request())).await;
        let mut frame = client.read_frame().await;
        assert_eq!(frame.get_i32(), correlation_id);
        // Response header v0 at every version: the body starts right after
        // the correlation id (error code 0, then the array), no tag byte.
        assert_eq!(&frame[..], &expected_body(version, 0, epoch)[..], "ApiVersions v{version} body bytes");
        let response = ApiVersionsResponse::decode(&mut frame, version).expect("decodes");
        assert_eq!(frame.remaining(), 0);
        assert_eq!(response.error_code, 0);
        assert_eq!(table_of(&response), served_table());
        assert_eq!(response.throttle_time_ms, 0);
        if version >= 3 {
            let finalized: Vec<(String, i16)> =
                response.finalized_features.iter().map(|f| (f.name.to_string(), f.max_version_level)).collect();
            let expected = [
                ("eligible.leader.replicas.version", 1),
                ("group.version", 1),
                ("metadata.version", 33),
                ("share.version", 2),
                ("streams.version", 1),
                ("transaction.version", 2),
            ];
            assert_eq!(finalized, expected.map(|(n, l)| (n.to_owned(), l)));
            assert_eq!(response.finalized_features_epoch, epoch);
            assert_eq!(response.supported_features.len(), 7);
        } else {
            assert_eq!(response.finalized_features_epoch, -1);
            assert!(response.supported_features.is_empty() && response.finalized_features.is_empty());
        }
        // ZkMigrationReady (tag 3) is never sent: librdkafka 2.0.2 cannot read it.
        assert!(!response.zk_migration_ready);
        assert!(response.unknown_tagged_fields.is_empty());
        assert!(response.api_keys.iter().all(|k| k.unknown_tagged_fields.is_empty()));
    }
    // v3+: a client software name outside Kafka's pattern is INVALID_REQUEST.
    let bad = request().with_client_software_name(StrBytes::from_static_str("-bad name"));
    let response = client.call(3, &bad).await;
    assert_eq!((response.error_code, table_of(&response)), (error_code::INVALID_REQUEST, served_table()));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_version_is_answered_in_v0_per_kip_511() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // A newer client's ApiVersions: the v4 body under a v99 header (flexible
    // request header, as a client that knows v99 would send).
    let mut frame = request_frame(ApiKey::ApiVersions, 4, 77, &request());
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    client.send_raw(&frame).await;
    let mut response_frame = client.read_frame().await;
    assert_eq!(response_frame.get_i32(), 77);
    assert_eq!(&response_frame[..], &expected_body(0, error_code::UNSUPPORTED_VERSION, 0)[..], "v0 layout");
    let response = ApiVersionsResponse::decode(&mut response_frame, 0).expect("decodes at v0");
    assert_eq!(response.error_code, error_code::UNSUPPORTED_VERSION);
    assert_eq!(table_of(&response), served_table());
    // The connection stays usable: the client retries at a served version.
    let again = client.call(3, &request()).await;
    assert_eq!((again.error_code, table_of(&again)), (0, served_table()));
    broker.broker.shutdown().await;
}

/// `kafgres.transaction_version` 1 finalizes version 1 (every client then
/// uses the version 1 protocol), with a higher epoch, since a client keeps the
/// features of the highest epoch it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transaction_version_follows_its_setting_with_a_higher_epoch() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let level = |r: &ApiVersionsResponse| {
        r.finalized_features.iter().find(|f| f.name.as_str() == "transaction.version").map(|f| f.max_version_level)
    };
    let before = client.call(3, &request()).await;
    assert_eq!(level(&before), Some(2));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let initial = kafgres_broker::settings::Reloadable::from(&*broker.broker.context().config);
    broker.broker.reload(&kafgres_broker::settings::Reloadable { transaction_version: 1, ..initial });
    let after = client.call(3, &request()).await;
    assert_eq!(level(&after), Some(1));
    assert!(after.finalized_features_epoch > before.finalized_features_epoch, "{after:?}");
    broker.broker.shutdown().await;
}
