//! Authorization over the wire: a broker with the authorizer on, its ACLs in
//! a MemoryCatalog, and a client that did not authenticate (`User:ANONYMOUS`,
//! the principal of a PLAINTEXT listener). Kafka's semantics: nothing is
//! allowed without an ALLOW, a topic the client may not describe is hidden
//! from Metadata, and the ACL APIs manage the bindings durably.

mod common;

use std::sync::Arc;

use common::*;
use kafgres_broker::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};
use kafgres_broker::catalog::Catalog;
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn anonymous(resource_type: ResourceType, pattern_type: PatternType, name: &str, op: Operation) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type,
        principal: "User:ANONYMOUS".into(),
        host: "*".into(),
        operation: op,
        permission: Permission::Allow,
    }
}

/// A broker whose anonymous clients may administer the cluster (create
/// topics, manage ACLs) but may touch no topic until an ACL says so.
async fn authorizing_broker(enabled: bool) -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = Arc::new(MemoryCatalog::default());
    catalog
        .create_acls(vec![anonymous(ResourceType::Cluster, PatternType::Literal, CLUSTER_NAME, Operation::All)])
        .await
        .expect("seeded");
    let config = BrokerConfig { authorizer_enabled: enabled, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    TestBroker::start_with(dir, catalog, config).await
}

fn creation(pattern_type: PatternType, name: &str, op: Operation, permission: Permission) -> AclCreation {
    AclCreation::default()
        .with_resource_type(ResourceType::Topic.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern_type.code())
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(permission.code())
}

fn every_topic_filter() -> DescribeAclsRequest {
    // kafka-protocol's defaults for the nullable filters are "", not null.
    DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ResourceType::Topic.code())
        .with_pattern_type_filter(PatternType::Any.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code())
}

#[tokio::test]
async fn topics_need_an_allow_and_are_hidden_without_describe() {
    let broker = authorizing_broker(true).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "app.orders", 1).await;
    create_topic(&mut client, "secret", 1).await;

    // Nothing allowed on topics yet.
    let all = client.call(12, &metadata_request(None, false)).await;
    assert!(all.topics.is_empty(), "every topic is hidden: {:?}", all.topics);
    let named = client.call(12, &metadata_request(Some(&["secret", "nosuch"]), true)).await;
    let codes: Vec<i16> = named.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![error_code::TOPIC_AUTHORIZATION_FAILED; 2], "exists or not, the same answer");
    let refused = produce(&mut client, 9, "app.orders", 0, -1, batch(&records("r", 1))).await;
    assert_eq!(refused.error_code, error_code::TOPIC_AUTHORIZATION_FAILED);

    // WRITE on the prefix app. (DESCRIBE comes with it).
    let created = client
        .call(
            3,
            &CreateAclsRequest::default().with_creations(vec![creation(
                PatternType::Prefixed,
                "app.",
                Operation::Write,
                Permission::Allow,
            )]),
        )
        .await;
    assert_eq!(created.results.len(), 1);
    assert_eq!(created.results[0].error_code, 0, "{:?}", created.results[0].error_message);
    assert_eq!(broker.catalog.acls().len(), 2, "stored in the catalog");

    let written = produce(&mut client, 9, "app.orders", 0, -1, batch(&records("r", 2))).await;
    assert_eq!(written.error_code, 0);
    let visible = client.call(12, &metadata_request(None, false)).await;
    let names: Vec<String> = visible.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect();
    assert_eq!(names, vec!["app.orders"]);
    assert_eq!(produce(&mut client, 9, "secret", 0, -1, batch(&records("r", 1))).await.error_code, 29);
    // WRITE does not give READ.
    let read = client.call(12, &fetch_request(TopicRef::Name("app.orders"), 0, 0, 1 << 20, 0, 0)).await;
    assert_eq!(single_partition(read).error_code, error_code::TOPIC_AUTHORIZATION_FAILED);

    // A DENY wins over the prefix's ALLOW.
    let denied = client
        .call(
            3,
            &CreateAclsRequest::default().with_creations(vec![creation(
                PatternType::Literal,
                "app.orders",
                Operation::Write,
                Permission::Deny,
            )]),
        )
        .await;
    assert_eq!(denied.results[0].error_code, 0);
    let refused = produce(&mut client, 9, "app.orders", 0, -1, batch(&records("r", 1))).await;
    assert_eq!(refused.error_code, error_code::TOPIC_AUTHORIZATION_FAILED);

    let described = client.call(3, &every_topic_filter()).await;
    assert_eq!(described.error_code, 0);
    let patterns: Vec<(String, i8, usize)> =
        described.resources.iter().map(|r| (r.resource_name.to_string(), r.pattern_type, r.acls.len())).collect();
    assert_eq!(
        patterns,
        vec![("app.".into(), PatternType::Prefixed.code(), 1), ("app.orders".into(), PatternType::Literal.code(), 1)]
    );

    // Deleting the DENY (a filter matching it by permission) lets writes in again.
    let filter = DeleteAclsFilter::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ResourceType::Any.code())
        .with_pattern_type_filter(PatternType::Any.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Deny.code());
    let deleted = client.call(3, &DeleteAclsRequest::default().with_filters(vec![filter])).await;
    assert_eq!(deleted.filter_results.len(), 1);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    assert_eq!(deleted.filter_results[0].matching_acls[0].resource_name.as_str(), "app.orders");
    assert_eq!(broker.catalog.acls().len(), 2);
    let written = produce(&mut client, 9, "app.orders", 0, -1, batch(&records("r", 1))).await;
    assert_eq!(written.error_code, 0);
}

#[tokio::test]
async fn acls_survive_a_restart() {
    let broker = authorizing_broker(true).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "kept", 1).await;
    let created = client
        .call(
            2,
            &CreateAclsRequest::default().with_creations(vec![creation(
                PatternType::Literal,
                "kept",
                Operation::Read,
                Permission::Allow,
            )]),
        )
        .await;
    assert_eq!(created.results[0].error_code, 0);
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let config = BrokerConfig { authorizer_enabled: true, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    let read = client.call(12, &fetch_request(TopicRef::Name("kept"), 0, 0, 1 << 20, 0, 0)).await;
    assert_eq!(single_partition(read).error_code, 0);
}

#[tokio::test]
async fn bad_bindings_and_filters_are_invalid_requests() {
    let broker = authorizing_broker(true).await;
    let mut client = broker.client().await;
    let no_colon = creation(PatternType::Literal, "t", Operation::Read, Permission::Allow).with_principal(s("alice"));
    let match_pattern = creation(PatternType::Match, "t", Operation::Read, Permission::Allow);
    let bad_code = creation(PatternType::Literal, "t", Operation::Read, Permission::Allow).with_operation(99);
    let good = creation(PatternType::Literal, "t", Operation::Read, Permission::Allow);
    let created = client
        .call(3, &CreateAclsRequest::default().with_creations(vec![no_colon, match_pattern, bad_code, good]))
        .await;
    let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![error_code::INVALID_REQUEST, error_code::INVALID_REQUEST, error_code::INVALID_REQUEST, 0]);
    assert!(created.results[0].error_message.as_deref().is_some_and(|m| m.contains("principal")));
    let unknown = every_topic_filter().with_operation(Operation::Unknown.code());
    assert_eq!(client.call(3, &unknown).await.error_code, error_code::INVALID_REQUEST);
}

#[tokio::test]
async fn groups_and_transactional_ids_are_checked() {
    let broker = authorizing_broker(true).await;
    let mut client = broker.client().await;
    let find = FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(vec![s("g1")]);
    let found = client.call(4, &find).await;
    assert_eq!(found.coordinators[0].error_code, error_code::GROUP_AUTHORIZATION_FAILED);
    let txn = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx1"))))
        .with_transaction_timeout_ms(60_000);
    assert_eq!(client.call(4, &txn).await.error_code, error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    // An idempotent producer with WRITE on no topic and no IDEMPOTENT_WRITE...
    let broker_without_cluster = {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = BrokerConfig { authorizer_enabled: true, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
        TestBroker::start_with(dir, Arc::default(), config).await
    };
    let mut other = broker_without_cluster.client().await;
    let create = CreateTopicsRequest::default().with_topics(vec![creatable("not-mine", 1, 1)]);
    let refused = other.call(7, &create).await;
    assert_eq!(refused.topics[0].error_code, error_code::TOPIC_AUTHORIZATION_FAILED);
    for version in 1..=3 {
        let described = other.call(version, &every_topic_filter()).await;
        assert_eq!(described.error_code, error_code::CLUSTER_AUTHORIZATION_FAILED, "v{version}");
    }
    let idempotent = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(-1);
    assert_eq!(other.call(4, &idempotent).await.error_code, error_code::CLUSTER_AUTHORIZATION_FAILED);
    // ...is allowed on this broker, whose client holds ALL on the cluster.
    assert_eq!(client.call(4, &idempotent).await.error_code, 0);
    // The brokers' transaction calls need CLUSTER_ACTION: the batched
    // AddPartitionsToTxn (v4+) and WriteTxnMarkers.
    let verify = AddPartitionsToTxnRequest::default().with_transactions(vec![
        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s("tx1")))
            .with_verify_only(true),
    ]);
    let batched = other.call(4, &verify).await;
    assert_eq!(
        (batched.error_code, batched.results_by_transaction.len()),
        (error_code::CLUSTER_AUTHORIZATION_FAILED, 0)
    );
    assert_eq!(client.call(5, &verify).await.error_code, 0, "ALL on the cluster includes CLUSTER_ACTION");
    let markers =
        WriteTxnMarkersRequest::default().with_markers(vec![write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(1))
            .with_topics(vec![write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(name("not-mine"))
                .with_partition_indexes(vec![0])])]);
    let marked = other.call(1, &markers).await;
    assert_eq!(marked.markers[0].topics[0].partitions[0].error_code, error_code::CLUSTER_AUTHORIZATION_FAILED);
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g1")))
        .with_session_timeout_ms(10_000)
        .with_protocol_type(s("consumer"));
    assert_eq!(client.call(5, &join).await.error_code, error_code::GROUP_AUTHORIZATION_FAILED);
    // Anyone may describe the cluster, as in Kafka; its operations need DESCRIBE on it.
    let describe = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let cluster = other.call(1, &describe).await;
    assert_eq!((cluster.error_code, cluster.cluster_authorized_operations, cluster.brokers.len()), (0, 0, 1));
    let cluster = client.call(1, &describe).await;
    assert_eq!((cluster.error_code, cluster.cluster_authorized_operations), (0, 8096));
}

/// What ACLs on the cluster grant for topics, as Kafka 4.1's StandardAuthorizer
/// run shows (tests/conformance, scenario acl_matrix): DELETE on the cluster
/// deletes any topic, CLUSTER_ACTION answers OffsetForLeaderEpoch for any
/// topic, CREATE on the cluster creates a topic but shows its partition count
/// and configs only with DESCRIBE_CONFIGS on the topic, and a DENY of DESCRIBE
/// on the cluster empties its authorized operations.
#[tokio::test]
async fn cluster_acls_grant_what_they_grant_in_kafka() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    let broker = authorizing_broker(true).await; // ANONYMOUS: ALL on the cluster, nothing on topics
    let mut client = broker.client().await;

    let created = client.call(7, &CreateTopicsRequest::default().with_topics(vec![creatable("c1", 2, 1)])).await;
    let t = &created.topics[0];
    assert_eq!(
        (t.error_code, t.num_partitions, t.replication_factor, t.topic_config_error_code),
        (0, -1, -1, error_code::TOPIC_AUTHORIZATION_FAILED),
        "created, but its partitions and configs are not shown without DESCRIBE_CONFIGS on it"
    );
    assert_eq!(t.configs.as_ref().map(Vec::len), Some(0));
    assert!(!t.topic_id.is_nil());

    let epochs = OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        OffsetForLeaderTopic::default().with_topic(name("c1")).with_partitions(vec![
            OffsetForLeaderPartition::default().with_partition(0).with_current_leader_epoch(-1).with_leader_epoch(0),
        ]),
    ]);
    let answer = client.call(4, &epochs).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0, "CLUSTER_ACTION on the cluster");
    let metadata = client.call(12, &metadata_request(Some(&["c1"]), false)).await;
    assert_eq!(metadata.topics[0].error_code, error_code::TOPIC_AUTHORIZATION_FAILED, "still hidden from Metadata");

    let delete = DeleteTopicsRequest::default().with_topics(vec![
        DeleteTopicState::default().with_name(Some(name("c1"))),
        DeleteTopicState::default().with_name(Some(name("never-was"))),
    ]);
    let deleted = client.call(6, &delete).await;
    let codes: Vec<i16> = deleted.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, error_code::UNKNOWN_TOPIC_OR_PARTITION], "DELETE on the cluster");

    let deny = AclCreation::default()
        .with_resource_type(ResourceType::Cluster.code())
        .with_resource_name(s(CLUSTER_NAME))
        .with_resource_pattern_type(PatternType::Literal.code())
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(Operation::Describe.code())
        .with_permission_type(Permission::Deny.code());
    let denied = client.call(3, &CreateAclsRequest::default().with_creations(vec![deny])).await;
    assert_eq!(denied.results[0].error_code, 0);
    let describe = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let cluster = client.call(1, &describe).await;
    assert_eq!((cluster.error_code, cluster.cluster_authorized_operations, cluster.brokers.len()), (0, 0, 1));
}

#[tokio::test]
async fn without_an_authorizer_everything_is_allowed_and_acl_apis_are_disabled() {
    let broker = authorizing_broker(false).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "open", 1).await;
    assert_eq!(produce(&mut client, 9, "open", 0, -1, batch(&records("r", 1))).await.error_code, 0);
    let described = client.call(3, &every_topic_filter()).await;
    assert_eq!(described.error_code, error_code::SECURITY_DISABLED);
    assert_eq!(described.error_message.as_deref(), Some("No Authorizer is configured."));
    let created = client
        .call(
            1,
            &CreateAclsRequest::default().with_creations(vec![creation(
                PatternType::Literal,
                "open",
                Operation::Read,
                Permission::Allow,
            )]),
        )
        .await;
    assert_eq!(created.results[0].error_code, error_code::SECURITY_DISABLED);
    let deleted = client
        .call(
            1,
            &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)]),
        )
        .await;
    assert_eq!(deleted.filter_results[0].error_code, error_code::SECURITY_DISABLED);
}
