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
        ApiKey::DescribeConfigs => {
            use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
            let resource = DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("swept"));
            let r = client
                .try_call(version, &kafka_protocol::messages::DescribeConfigsRequest::default().with_resources(vec![resource]))
                .await?;
            check(r.results[0].error_code == 0 && !r.results[0].configs.is_empty(), format!("{:?}", r.results[0]))
        }
        ApiKey::DescribeCluster => {
            let request = kafka_protocol::messages::DescribeClusterRequest::default().with_endpoint_type(1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.brokers.len() == 1, format!("{r:?}"))
        }
        ApiKey::CreatePartitions => {
            use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
            let topic = format!("grown-v{version}");
            create_topic(client, &topic, 1).await;
            let request = kafka_protocol::messages::CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default().with_name(common::name(&topic)).with_count(2)]);
            let r = client.try_call(version, &request).await?;
            check(r.results[0].error_code == 0, format!("{:?}", r.results[0]))
        }
        ApiKey::DeleteTopics => {
            use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
            // Each version deletes one of the topics CreateTopics made.
            let topic = common::name(&format!("created-v{}", version + 1));
            let request = if version >= 6 {
                kafka_protocol::messages::DeleteTopicsRequest::default()
                    .with_topics(vec![DeleteTopicState::default().with_name(Some(topic))])
            } else {
                kafka_protocol::messages::DeleteTopicsRequest::default().with_topic_names(vec![topic])
            };
            let r = client.try_call(version, &request).await?;
            check(r.responses[0].error_code == 0, format!("{:?}", r.responses[0]))
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
    let order = [
        ApiVersions,
        Metadata,
        CreateTopics,
        Produce,
        Fetch,
        ListOffsets,
        DescribeConfigs,
        DescribeCluster,
        CreatePartitions,
        DeleteTopics,
    ];
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
