//! Every version in the served table answers: for each API and each accepted
//! version, a valid request gets a response that decodes at that version (a
//! handler that sets a field the version lacks makes encoding fail, and the
//! broker closes the connection instead of answering).

mod common;

use common::{
    batch, creatable, create_topic, fetch_request, list_offset_request, metadata_request, produce_request, records, Client,
    TestBroker, TopicRef,
};
use kafgres_wire::apis::SERVED_APIS;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, CreateTopicsRequest};
use kafka_protocol::protocol::StrBytes;

/// Sends one request of `key` at `version`; `Err` says what went wrong.
async fn exchange(client: &mut Client, key: ApiKey, version: i16, id: uuid::Uuid, produced: &mut i64) -> Result<(), String> {
    let check = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
    match key {
        ApiKey::ApiVersions => {
            let r = client.try_call(version, &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("sweep"))
                .with_client_software_version(StrBytes::from_static_str("1"))).await?;
            check(r.error_code == 0, format!("error {}", r.error_code))
        }
        ApiKey::Metadata => {
            let r = client.try_call(version, &metadata_request(Some(&["swept"]), true)).await?;
            let t = &r.topics[0];
            check(r.topics.len() == 1 && t.error_code == 0 && t.partitions.len() == 1, format!("{:?}", r.topics))
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::default().with_topics(vec![creatable(&format!("created-v{version}"), 1, 1)]);
            let r = client.try_call(version, &request).await?;
            check(r.topics[0].error_code == 0, format!("error {}", r.topics[0].error_code))
        }
        ApiKey::Produce => {
            let r = client.try_call(version, &produce_request("swept", 0, -1, batch(&records("s", 1)))).await?;
            let p = &r.responses[0].partition_responses[0];
            *produced += 1;
            check((p.error_code, p.base_offset) == (0, *produced - 1), format!("{p:?}"))
        }
        ApiKey::Fetch => {
            let topic = if version >= 13 { TopicRef::Id(id) } else { TopicRef::Name("swept") };
            let r = client.try_call(version, &fetch_request(topic, 0, 0, 1 << 20, 0, 1)).await?;
            let p = &r.responses[0].partitions[0];
            let fetched = common::decode_records(&p.records.clone().unwrap_or_default()).len() as i64;
            check((p.error_code, p.high_watermark, fetched) == (0, *produced, *produced), format!("{p:?}"))
        }
        ApiKey::ListOffsets => {
            let r = client.try_call(version, &list_offset_request("swept", 0, -1)).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.offset) == (0, *produced), format!("{p:?}"))
        }
        other => Err(format!("{other:?} has no case in this sweep")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_version_answers() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "swept", 1).await;
    let mut produced = 0i64;
    let mut failures = Vec::new();
    // Produce before Fetch and ListOffsets, so they have records to report.
    use ApiKey::*;
    let order = [ApiVersions, Metadata, CreateTopics, Produce, Fetch, ListOffsets];
    for key in order {
        let api = SERVED_APIS.iter().find(|a| a.key == key).expect("served");
        for version in api.accepted_min..=api.max {
            if let Err(e) = exchange(&mut client, key, version, id, &mut produced).await {
                failures.push(format!("{key:?} v{version}: {e}"));
                client = broker.client().await; // the broker may have closed it
            }
        }
    }
    assert_eq!(SERVED_APIS.len(), order.len(), "a served API is missing from the sweep");
    assert!(failures.is_empty(), "versions that do not answer:\n{}", failures.join("\n"));
    broker.broker.shutdown().await;
}
