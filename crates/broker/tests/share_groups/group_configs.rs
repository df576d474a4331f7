//! Group configs, closed connections, DeleteGroups and deleted topics.

use super::*;

async fn alter_group_configs(client: &mut Client, changes: &[(&str, Option<&str>)]) -> (i16, Option<String>) {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let configs = changes
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(s(name))
                .with_config_operation(if value.is_some() { 0 } else { 1 })
                .with_value(value.map(s))
        })
        .collect();
    let request = kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default().with_resource_type(32).with_resource_name(s("g")).with_configs(configs),
    ]);
    let r = client.call(1, &request).await;
    (r.responses[0].error_code, r.responses[0].error_message.as_ref().map(|m| m.to_string()))
}

/// (name, value, source) of group `g`'s configs.
async fn describe_group_configs(client: &mut Client) -> Vec<(String, String, i8)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let request = kafka_protocol::messages::DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default().with_resource_type(32).with_resource_name(s("g"))]);
    let r = client.call(4, &request).await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    r.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), c.config_source))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_are_set_described_and_kept_across_a_restart() {
    const GROUP_CONFIG: i8 = 8;
    const DEFAULT_CONFIG: i8 = 5;
    let (broker, config) = start(|c| c.share.group_defaults.auto_offset_reset = AutoOffsetReset::Latest).await;
    let (mut client, id) = topic_with_members(&broker, 4, &["a"]).await;
    let set = [("share.auto.offset.reset", Some("earliest")), ("share.record.lock.duration.ms", Some("15000"))];
    assert_eq!(alter_group_configs(&mut client, &set).await, (0, None));
    // Refused, and nothing of the request applied: a bad value, an unknown name.
    let (code, message) = alter_group_configs(&mut client, &[("share.isolation.level", Some("sometimes"))]).await;
    assert_eq!(code, error_code::INVALID_CONFIG);
    assert!(message.is_some_and(|m| m.contains("share.isolation.level")));
    let (code, _) =
        alter_group_configs(&mut client, &[("share.delivery.count.limit", Some("3")), ("nope", Some("1"))]).await;
    assert_eq!(code, error_code::INVALID_CONFIG);
    let described = describe_group_configs(&mut client).await;
    assert!(described.contains(&("share.auto.offset.reset".into(), "earliest".into(), GROUP_CONFIG)), "{described:?}");
    assert!(described.contains(&("share.delivery.count.limit".into(), "5".into(), DEFAULT_CONFIG)), "{described:?}");
    // The group starts at the log start, with the group's lock duration.
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!((acquired(&got), got.acquisition_lock_timeout_ms), (vec![(0, 3, 1)], 15_000));
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    let described = describe_group_configs(&mut client).await;
    assert!(
        described.contains(&("share.record.lock.duration.ms".into(), "15000".into(), GROUP_CONFIG)),
        "{described:?}"
    );
    // Deleting one goes back to the default.
    assert_eq!(alter_group_configs(&mut client, &[("share.record.lock.duration.ms", None)]).await.0, 0);
    let described = describe_group_configs(&mut client).await;
    assert!(described.contains(&("share.record.lock.duration.ms".into(), "30000".into(), DEFAULT_CONFIG)));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_ends_its_share_sessions_and_releases_their_records() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a", "b"]).await;
    let mut a = broker.client().await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut a).await), vec![(0, 1, 1)]);
    drop(a);
    // b long-polls: the close releases a's records and wakes it.
    let mut wait = Fetch::new("b", 0, id);
    wait.wait_ms = 8_000;
    let started = Instant::now();
    let r = wait.send(&mut client).await;
    assert_eq!(acquired(&r), vec![(0, 1, 2)]);
    assert!(started.elapsed() < Duration::from_secs(5), "released only by the lock timeout");
    // a's session is gone with its connection.
    let mut again = broker.client().await;
    assert_eq!(Fetch::new("a", 1, id).send(&mut again).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_groups_removes_an_empty_share_group_and_its_state() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    let delete = || kafka_protocol::messages::DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, error_code::NON_EMPTY_GROUP);
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, 0);
    assert!(broker.catalog.share_states().is_empty(), "the share-partitions' states went with it");
    let d = client.call(1, &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))])).await;
    assert_eq!(d.groups[0].error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, error_code::GROUP_ID_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_takes_its_share_partitions_with_it() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    assert_eq!(broker.catalog.share_states().len(), 1);
    let delete = kafka_protocol::messages::DeleteTopicsRequest::default().with_topic_names(vec![common::name("t")]);
    let r = client.call(4, &delete).await;
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    assert!(broker.catalog.share_states().is_empty());
    // The session still names it: answered UNKNOWN_TOPIC_ID, nothing acquired.
    let gone = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(gone.responses[0].partitions[0].error_code, error_code::UNKNOWN_TOPIC_ID, "{gone:?}");
    broker.broker.shutdown().await;
}
