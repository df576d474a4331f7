//! AlterShareGroupOffsets and DeleteShareGroupOffsets.

use super::*;

async fn alter_offsets(
    client: &mut Client,
    group: &str,
    topics: &[(&str, &[(i32, i64)])],
) -> kafka_protocol::messages::AlterShareGroupOffsetsResponse {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    let topics = topics
        .iter()
        .map(|(name, partitions)| {
            AlterShareGroupOffsetsRequestTopic::default().with_topic_name(common::name(name)).with_partitions(
                partitions
                    .iter()
                    .map(|(index, start)| {
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(*index)
                            .with_start_offset(*start)
                    })
                    .collect(),
            )
        })
        .collect();
    let request = kafka_protocol::messages::AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(topics);
    client.call(0, &request).await
}

/// (topic, partition, error code) of each partition in an AlterShareGroupOffsets answer.
fn altered(r: &kafka_protocol::messages::AlterShareGroupOffsetsResponse) -> Vec<(String, i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_name.to_string(), p.partition_index, p.error_code)))
        .collect()
}

async fn delete_offsets(
    client: &mut Client,
    group: &str,
    topics: &[&str],
) -> kafka_protocol::messages::DeleteShareGroupOffsetsResponse {
    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
    let request = kafka_protocol::messages::DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(common::name(t)))
                .collect(),
        );
    client.call(0, &request).await
}

/// (topic, error code, message) of each topic in a DeleteShareGroupOffsets answer.
fn deleted(r: &kafka_protocol::messages::DeleteShareGroupOffsetsResponse) -> Vec<(String, i16, Option<String>)> {
    r.responses
        .iter()
        .map(|t| (t.topic_name.to_string(), t.error_code, t.error_message.as_ref().map(|m| m.to_string())))
        .collect()
}

/// Group `g`'s start offsets as DescribeShareGroupOffsets gives every one: (topic, partition, start).
async fn start_offsets(client: &mut Client) -> Vec<(String, i32, i64)> {
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    let request = kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default().with_group_id(GroupId(s("g"))).with_topics(None),
    ]);
    let r = client.call(0, &request).await;
    assert_eq!(r.groups[0].error_code, 0, "{r:?}");
    r.groups[0]
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_name.to_string(), p.partition_index, p.start_offset)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altering_offsets_needs_an_empty_group_and_redelivers_from_the_new_start() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 9, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 10)]);
    // A member is in the group: refused as a whole, with Kafka's message.
    let busy = alter_offsets(&mut client, "g", &[("t", &[(0, 0)])]).await;
    assert_eq!(busy.error_code, error_code::NON_EMPTY_GROUP);
    assert_eq!(busy.error_message.as_deref(), Some("The group is not empty."));
    assert!(busy.responses.is_empty());
    let gone = alter_offsets(&mut client, "nope", &[("t", &[(0, 0)])]).await;
    assert_eq!(gone.error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(gone.error_message.as_deref(), Some("Group nope not found."));
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    // Empty: partition 0 moves back to 3; an unknown topic or partition is answered per
    // partition, the topics refused before the group is looked at first (Kafka's order).
    let r = alter_offsets(&mut client, "g", &[("t", &[(0, 3), (7, 0)]), ("missing", &[(0, 0)])]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        altered(&r),
        vec![
            ("missing".into(), 0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
            ("t".into(), 0, 0),
            ("t".into(), 7, error_code::UNKNOWN_TOPIC_OR_PARTITION),
        ]
    );
    assert_eq!((r.responses[0].topic_id, r.responses[1].topic_id), (Uuid::nil(), id));
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 3)]);
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset, stored[0].batches.len()), (1, 3, 0), "{stored:?}");
    // It survives a restart; the member comes back and gets 3-9 again, as new deliveries.
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(3, 9, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_offsets_starts_the_group_again_from_auto_offset_reset() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 6, &["a"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 4;
    assert_eq!(acquired(&fetch.send(&mut client).await), vec![(0, 3, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 3, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    let busy = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!((busy.error_code, busy.responses.len()), (error_code::NON_EMPTY_GROUP, 0));
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    let r = delete_offsets(&mut client, "g", &["t", "missing"]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        deleted(&r),
        vec![
            ("t".into(), 0, None),
            (
                "missing".into(),
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                Some("This server does not host this topic-partition.".into())
            ),
        ]
    );
    assert_eq!(r.responses[0].topic_id, id);
    assert!(start_offsets(&mut client).await.is_empty(), "no state left to describe");
    // Stored as a tombstone, which keeps the version: an older write cannot bring the state back.
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset), (1, kafgres_broker::catalog::UNSET_START_OFFSET));
    let again = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!(
        deleted(&again),
        vec![(
            "t".into(),
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some("There is no offset information to delete.".into())
        )]
    );
    // Across a restart the group is still known, and reads from share.auto.offset.reset
    // (earliest here): every record again, first deliveries.
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    assert_eq!(delete_offsets(&mut client, "g", &["t"]).await.error_code, 0, "the group is still known");
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 5, 1)]);
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 0)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_admin_is_authorized_as_kafka_authorizes_it() {
    use kafgres_broker::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};
    use kafgres_broker::Catalog;
    let allow = |resource_type, name: &str, operation| AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:ANONYMOUS".into(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    };
    let catalog = Arc::new(MemoryCatalog::default());
    // May join group g (READ, and DESCRIBE on t), may not READ t, nor DELETE the group.
    let acls = vec![
        allow(ResourceType::Cluster, CLUSTER_NAME, Operation::All),
        allow(ResourceType::Topic, "t", Operation::Describe),
        allow(ResourceType::Topic, "t", Operation::Write),
        allow(ResourceType::Group, "g", Operation::Read),
    ];
    catalog.create_acls(acls).await.expect("seeded");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(&dir);
    c.authorizer_enabled = true;
    let broker = TestBroker::start_with(dir, catalog, c).await;
    let (mut client, _) = topic_with_members(&broker, 1, &["a"]).await;
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    let r = alter_offsets(&mut client, "g", &[("t", &[(0, 0)])]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(altered(&r), vec![("t".into(), 0, error_code::TOPIC_AUTHORIZATION_FAILED)]);
    let other = alter_offsets(&mut client, "other", &[("t", &[(0, 0)])]).await;
    assert_eq!(other.error_code, error_code::GROUP_AUTHORIZATION_FAILED);
    let r = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!((r.error_code, r.responses.len()), (error_code::GROUP_AUTHORIZATION_FAILED, 0));
    assert_eq!(r.error_message.as_deref(), Some("Group authorization failed."));
    assert!(broker.catalog.share_states().is_empty(), "nothing changed");
    broker.broker.shutdown().await;
}
