//! Replication between two brokers in one process: a leader and a follower
//! configured as a standby's broker is (`BrokerConfig::follow`), over
//! loopback. The follower's copy is the leader's batches byte for byte; a
//! synchronous policy makes acks=all wait for it; a follower whose tail the
//! leader never had truncates it; a standby answers NOT_LEADER_OR_FOLLOWER
//! (NOT_COORDINATOR for the coordinators' APIs) and sends clients to the
//! leader.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kafgres_broker::replication::follower::FollowerConfig;
use kafgres_broker::replication::{ReplicationState, SyncPolicy};
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code::NOT_COORDINATOR;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    DescribeConfigsRequest, GroupId, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const WAIT: Duration = Duration::from_secs(20);

fn leader_config(dir: &tempfile::TempDir, epoch: i32, sync: Option<&str>) -> BrokerConfig {
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    let policy = sync.map(|s| SyncPolicy::parse(s).expect("parses").expect("not empty"));
    config.replication = Arc::new(ReplicationState::new(epoch, policy, Duration::from_secs(2)));
    config
}

fn follower_config(dir: &tempfile::TempDir, leader: &TestBroker, name: &str) -> BrokerConfig {
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.node_id = 2;
    let mut follow = FollowerConfig::new(leader.addr().to_string(), name.into(), 2);
    follow.fetch_wait_ms = 100;
    config.follow = Some(follow);
    config.leader = Some(kafgres_broker::config::LeaderAddress {
        node_id: 1,
        host: "127.0.0.1".into(),
        port: leader.addr().port(),
        listeners: Vec::new(),
    });
    config
}

/// Every batch of a partition as stored, read inside the broker.
fn stored_bytes(broker: &TestBroker, topic: &str, partition: i32) -> Vec<u8> {
    let t = broker.broker.context().topics.get(topic).expect("topic exists");
    let p = t.partition(partition).expect("partition exists");
    let slice = p.read_for_follower(p.log_start_offset(), u64::MAX).expect("reads");
    slice.read_to_vec().expect("bytes")
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn has_topic(broker: &TestBroker, topic: &str) -> bool {
    broker.broker.context().topics.get(topic).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_copies_topics_and_batches_byte_for_byte() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let config = leader_config(&leader_dir, 3, None);
    let leader = TestBroker::start_with(leader_dir, Arc::default(), config).await;
    let mut client = leader.client().await;
    create_topic(&mut client, "copied", 2).await;
    for i in 0..5 {
        let answer = produce(&mut client, 9, "copied", i % 2, -1, batch(&records(&format!("r{i}"), 3))).await;
        assert_eq!(answer.error_code, 0);
    }
    let follower_dir = tempfile::tempdir().expect("tempdir");
    let config = follower_config(&follower_dir, &leader, "standby1");
    let follower = TestBroker::start_with(follower_dir, Arc::new(MemoryCatalog::default()), config).await;
    wait_until("the topic on the follower", || has_topic(&follower, "copied")).await;
    for p in 0..2 {
        wait_until("the copy", || follower.log_end("copied", p) == leader.log_end("copied", p)).await;
        assert_eq!(stored_bytes(&follower, "copied", p), stored_bytes(&leader, "copied", p), "partition {p}");
    }
    // Later appends and a new topic follow at once (no polling interval).
    create_topic(&mut client, "later", 1).await;
    produce(&mut client, 9, "later", 0, -1, batch(&records("late", 2))).await;
    wait_until("the later topic's records", || has_topic(&follower, "later") && follower.log_end("later", 0) == 2)
        .await;
    assert_eq!(stored_bytes(&follower, "later", 0), stored_bytes(&leader, "later", 0));
    // The leader's status rows (kafgres.replica_partitions): the follower's
    // position in each partition, caught up once it fetches at the log end.
    let status = || kafgres_broker::replication::partition_status::rows(&leader.broker.context().topics);
    wait_until("the follower's positions at every log end", || {
        let rows = status();
        rows.len() == 3 && rows.iter().all(|r| r.replicated_offset == r.log_end_offset && r.caught_up_ms.is_some())
    })
    .await;
    let rows = status();
    let keys: Vec<(&str, &str, i32)> =
        rows.iter().map(|r| (r.standby.as_str(), r.topic.as_str(), r.partition)).collect();
    assert_eq!(keys, [("standby1", "copied", 0), ("standby1", "copied", 1), ("standby1", "later", 0)]);
    assert_eq!(rows[2].log_end_offset, 2);
    let t = follower.broker.context().topics.get("later").expect("copied");
    assert_eq!(t.partition(0).expect("p").latest_epoch(), Some(3), "batches keep the leader's epoch");
    // The standby sends clients to the leader and takes no records itself.
    let mut standby = follower.client().await;
    let metadata = standby.call(12, &MetadataRequest::default().with_topics(None)).await;
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!((metadata.brokers[0].node_id.0, metadata.brokers[0].port), (1, i32::from(leader.addr().port())));
    let refused = produce(&mut standby, 9, "later", 0, -1, batch(&records("no", 1))).await;
    assert_eq!(refused.error_code, kafgres_wire::error_code::NOT_LEADER_OR_FOLLOWER);
    // A client that still holds the standby as its coordinator (an old
    // primary back as a standby) is told to look it up again, at every version.
    let group = || GroupId(StrBytes::from_static_str("g"));
    for version in [0, 4] {
        let beat = standby.call(version, &HeartbeatRequest::default().with_group_id(group())).await;
        assert_eq!(beat.error_code, NOT_COORDINATOR, "Heartbeat v{version}");
        let join = standby.call(version + 1, &JoinGroupRequest::default().with_group_id(group())).await;
        assert_eq!((join.error_code, join.generation_id), (NOT_COORDINATOR, -1), "JoinGroup v{}", version + 1);
    }
    let commit =
        OffsetCommitRequest::default().with_group_id(group()).with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name("later"))
            .with_partitions(vec![OffsetCommitRequestPartition::default().with_partition_index(0)])]);
    let committed = standby.call(8, &commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, NOT_COORDINATOR);
    let fetch_v1 =
        OffsetFetchRequest::default()
            .with_group_id(group())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name("later"))
                .with_partition_indexes(vec![0])]));
    let fetched = standby.call(1, &fetch_v1).await;
    assert_eq!(fetched.topics[0].partitions[0].error_code, NOT_COORDINATOR, "v1: in each partition");
    let fetched = standby.call(7, &fetch_v1).await;
    assert_eq!(fetched.error_code, NOT_COORDINATOR);
    let transactional = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("t"))))
        .with_transaction_timeout_ms(60_000);
    let init = standby.call(4, &transactional).await;
    assert_eq!((init.error_code, init.producer_id.0), (NOT_COORDINATOR, -1));
    // An idempotent producer's has no coordinator to look up: retriable, elsewhere.
    let idempotent = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000);
    let init = standby.call(4, &idempotent).await;
    assert_eq!((init.error_code, init.producer_id.0), (kafgres_wire::error_code::COORDINATOR_LOAD_IN_PROGRESS, -1));
    // An API with no coordinator's answer still closes the connection.
    assert!(standby.try_call(4, &DescribeConfigsRequest::default()).await.is_err());
    follower.broker.shutdown().await;
    leader.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_the_synchronous_standby_and_times_out_without_it() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let config = leader_config(&leader_dir, 1, Some("FIRST 1 (standby1)"));
    let leader = TestBroker::start_with(leader_dir, Arc::default(), config).await;
    let mut client = leader.client().await;
    create_topic(&mut client, "sync", 1).await;
    // No standby: acks=all times out (the records stay appended, not visible).
    let mut request = produce_request("sync", 0, -1, batch(&records("alone", 1)));
    request.timeout_ms = 300;
    let answer = client.call(9, &request).await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, kafgres_wire::error_code::REQUEST_TIMED_OUT);
    let hidden = fetch(&mut client, 12, TopicRef::Name("sync"), 0, 0, 1 << 20).await;
    assert_eq!(hidden.high_watermark, 0, "consumers see nothing the standby does not hold");
    // The standby connects and catches up: acks=all answers again, and the
    // high watermark moves only with what it holds.
    let follower_dir = tempfile::tempdir().expect("tempdir");
    let config = follower_config(&follower_dir, &leader, "standby1");
    let follower = TestBroker::start_with(follower_dir, Arc::new(MemoryCatalog::default()), config).await;
    let answer = produce(&mut client, 9, "sync", 0, -1, batch(&records("synced", 2))).await;
    assert_eq!(answer.error_code, 0, "acknowledged once the standby holds it");
    assert!(follower.log_end("sync", 0) >= 3, "the standby holds what was acknowledged");
    wait_until("the high watermark", || {
        leader.broker.context().topics.get("sync").and_then(|t| t.partition(0).map(|p| p.high_watermark().offset))
            == Some(3)
    })
    .await;
    // A standby not named by the policy does not count.
    follower.broker.shutdown().await;
    let other_dir = tempfile::tempdir().expect("tempdir");
    let config = follower_config(&other_dir, &leader, "unnamed");
    let other = TestBroker::start_with(other_dir, Arc::new(MemoryCatalog::default()), config).await;
    tokio::time::sleep(Duration::from_millis(2500)).await; // standby1 is no longer connected
    let mut request = produce_request("sync", 0, -1, batch(&records("unnamed", 1)));
    request.timeout_ms = 500;
    let answer = client.call(9, &request).await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, kafgres_wire::error_code::REQUEST_TIMED_OUT);
    other.broker.shutdown().await;
    leader.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_cuts_the_tail_a_new_leader_never_had() {
    // The leader (epoch 0) writes two batches, which the standby copies, then
    // a third the standby never gets. The standby is promoted (epoch 65536)
    // and writes its own third batch. The old leader, now following it, must
    // cut its own third batch and take the new leader's.
    let old_dir = tempfile::tempdir().expect("tempdir");
    let config = leader_config(&old_dir, 0, None);
    let old = TestBroker::start_with(old_dir, Arc::default(), config).await;
    let mut old_client = old.client().await;
    create_topic(&mut old_client, "diverged", 1).await;
    for i in 0..2 {
        produce(&mut old_client, 9, "diverged", 0, -1, batch(&records(&format!("shared{i}"), 2))).await;
    }
    let standby_dir = tempfile::tempdir().expect("tempdir");
    let config = follower_config(&standby_dir, &old, "standby1");
    let standby = TestBroker::start_with(standby_dir, Arc::new(MemoryCatalog::default()), config).await;
    wait_until("the copy", || has_topic(&standby, "diverged") && standby.log_end("diverged", 0) == 4).await;
    let (standby_dir, standby_catalog) = standby.shutdown().await;
    produce(&mut old_client, 9, "diverged", 0, -1, batch(&records("lost", 2))).await;
    assert_eq!(old.log_end("diverged", 0), 6);
    let old_catalog = Arc::clone(&old.catalog);
    let (old_dir, _) = old.shutdown().await;

    // The promotion: the standby's directory serves as leader at a new epoch.
    let mut config = BrokerConfig::for_tests(standby_dir.path().to_path_buf());
    config.replication = Arc::new(ReplicationState::new(65536, None, Duration::from_secs(2)));
    let new_leader = TestBroker::start_with(standby_dir, standby_catalog, config).await;
    let mut client = new_leader.client().await;
    produce(&mut client, 9, "diverged", 0, -1, batch(&records("new", 2))).await;

    // The old leader follows the new one.
    let config = follower_config(&old_dir, &new_leader, "old-primary");
    let rejoined = TestBroker::start_with(old_dir, old_catalog, config).await;
    wait_until("the rejoined copy", || {
        stored_bytes(&rejoined, "diverged", 0) == stored_bytes(&new_leader, "diverged", 0)
    })
    .await;
    let fetched = decode_records(&bytes::Bytes::from(stored_bytes(&rejoined, "diverged", 0)));
    let keys: Vec<String> = fetched
        .iter()
        .map(|(_, r)| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned())
        .collect();
    assert!(keys.iter().all(|k| !k.starts_with("lost")), "the old leader's own tail is gone: {keys:?}");
    assert!(keys.iter().any(|k| k.starts_with("new")), "the new leader's batch is there: {keys:?}");
    rejoined.broker.shutdown().await;
    new_leader.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_keeps_records_a_stale_leader_never_had_and_they_do_not_count_as_copies() {
    // The standby copies epoch 5, is promoted (epoch 65536) and writes more;
    // then the old primary, which never saw epoch 65536, leads again (a
    // split brain an operator made). Following it, the standby must not cut
    // its newer records (the leader has no history of their epoch), must
    // stop fetching that partition, and its position must never count as a
    // copy: acks=all under a policy naming it times out.
    let old_dir = tempfile::tempdir().expect("tempdir");
    let config = leader_config(&old_dir, 5, None);
    let old = TestBroker::start_with(old_dir, Arc::default(), config).await;
    let mut old_client = old.client().await;
    create_topic(&mut old_client, "split", 1).await;
    produce(&mut old_client, 9, "split", 0, -1, batch(&records("shared", 2))).await;
    let standby_dir = tempfile::tempdir().expect("tempdir");
    let config = follower_config(&standby_dir, &old, "standby1");
    let standby = TestBroker::start_with(standby_dir, Arc::new(MemoryCatalog::default()), config).await;
    wait_until("the copy", || has_topic(&standby, "split") && standby.log_end("split", 0) == 2).await;
    let (standby_dir, standby_catalog) = standby.shutdown().await;
    let old_catalog = Arc::clone(&old.catalog);
    let (old_dir, _) = old.shutdown().await;

    let mut config = BrokerConfig::for_tests(standby_dir.path().to_path_buf());
    config.replication = Arc::new(ReplicationState::new(65536, None, Duration::from_secs(2)));
    let promoted = TestBroker::start_with(standby_dir, standby_catalog, config).await;
    let mut client = promoted.client().await;
    produce(&mut client, 9, "split", 0, -1, batch(&records("newer", 3))).await;
    let kept = stored_bytes(&promoted, "split", 0);
    let (standby_dir, standby_catalog) = promoted.shutdown().await;

    // The old primary leads again, at epoch 6, with acks=all waiting for standby1.
    let config = leader_config(&old_dir, 6, Some("FIRST 1 (standby1)"));
    let stale = TestBroker::start_with(old_dir, old_catalog, config).await;
    let mut stale_client = stale.client().await;
    let standby = {
        let config = follower_config(&standby_dir, &stale, "standby1");
        TestBroker::start_with(standby_dir, standby_catalog, config).await
    };
    let mut request = produce_request("split", 0, -1, batch(&records("stale", 2)));
    request.timeout_ms = 1500;
    let answer = stale_client.call(9, &request).await;
    assert_eq!(
        answer.responses[0].partition_responses[0].error_code,
        kafgres_wire::error_code::REQUEST_TIMED_OUT,
        "the standby's records at those offsets are not the leader's: they must not acknowledge its produce"
    );
    assert_eq!(stored_bytes(&standby, "split", 0), kept, "the standby keeps the records of the newer epoch");
    standby.broker.shutdown().await;
    stale.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_logs_in_and_copies_under_the_acls() {
    // The leader enforces ACLs; anonymous clients may write the topic but
    // nothing lets them act as a replica (CLUSTER_ACTION). The follower has
    // the cluster's internal secret (replicated with the catalog) and
    // copies as the internal superuser.
    use kafgres_broker::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
    use kafgres_broker::catalog::Catalog;
    const SECRET: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let mut config = leader_config(&leader_dir, 1, None);
    config.authorizer_enabled = true;
    config.internal_secret = Some(SECRET.into());
    let catalog = Arc::new(MemoryCatalog::default());
    let anonymous = |resource_type, name: &str, operation| AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:ANONYMOUS".into(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    };
    catalog
        .create_acls(vec![
            anonymous(ResourceType::Topic, "secured", Operation::All),
            anonymous(ResourceType::Cluster, "kafka-cluster", Operation::Create),
        ])
        .await
        .expect("seeded");
    let leader = TestBroker::start_with(leader_dir, Arc::clone(&catalog), config).await;
    let mut client = leader.client().await;
    create_topic(&mut client, "secured", 1).await;
    assert_eq!(produce(&mut client, 9, "secured", 0, -1, batch(&records("s", 4))).await.error_code, 0);

    // Without the secret a follower is refused (it is User:ANONYMOUS).
    let refused_dir = tempfile::tempdir().expect("tempdir");
    let refused_config = follower_config(&refused_dir, &leader, "anonymous");
    let refused = TestBroker::start_with(refused_dir, Arc::new(MemoryCatalog::default()), refused_config).await;
    let follower_dir = tempfile::tempdir().expect("tempdir");
    let mut config = follower_config(&follower_dir, &leader, "standby1");
    if let Some(follow) = config.follow.as_mut() {
        follow.internal_secret = Some(SECRET.into());
    }
    let follower = TestBroker::start_with(follower_dir, Arc::new(MemoryCatalog::default()), config).await;
    wait_until("the copy", || has_topic(&follower, "secured") && follower.log_end("secured", 0) == 4).await;
    assert_eq!(stored_bytes(&follower, "secured", 0), stored_bytes(&leader, "secured", 0));
    assert!(
        !has_topic(&refused, "secured") || refused.log_end("secured", 0) == 0,
        "an anonymous follower copied records it may not read as a replica"
    );
}

/// Only a primary archives: a standby's copy rolls its segments where its own
/// appends do, so its files must not reach the archive under the primary's names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_does_not_archive_its_copy() {
    let archive = tempfile::tempdir().expect("tempdir");
    let command = format!("d={}/%f; mkdir -p \"${{d%/*}}\" && cp %p \"$d\"", archive.path().display());
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let mut config = leader_config(&leader_dir, 1, None);
    config.segment_bytes_max = 1024;
    config.archive_command = Some(command.clone());
    let leader = TestBroker::start_with(leader_dir, Arc::default(), config).await;
    let mut client = leader.client().await;
    create_topic(&mut client, "archived", 1).await;
    for i in 0..8 {
        assert_eq!(
            produce(&mut client, 9, "archived", 0, -1, batch(&records(&format!("a{i}"), 8))).await.error_code,
            0
        );
    }
    let follower_dir = tempfile::tempdir().expect("tempdir");
    let mut config = follower_config(&follower_dir, &leader, "standby1");
    config.segment_bytes_max = 1024;
    config.archive_command = Some(command);
    let follower = TestBroker::start_with(follower_dir, Arc::new(MemoryCatalog::default()), config).await;
    wait_until("the copy", || has_topic(&follower, "archived") && follower.log_end("archived", 0) == 64).await;
    let copy = follower.broker.context().topics.partition("archived", 0).expect("the copy");
    assert_eq!(copy.archive_hold(), i64::MAX, "a standby holds segments for an archive");
    assert!(copy.unarchived_segments().is_empty(), "a standby lists segments to archive");
    let leader_board = &leader.broker.context().config.metrics.archive;
    wait_until("the leader archives", || leader_board.status().segments_archived > 0).await;
    assert_eq!(follower.broker.context().config.metrics.archive.status().files_archived, 0);
    follower.broker.shutdown().await;
    leader.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_sends_each_client_to_the_leaders_listener_of_its_protocol() {
    use common::tls::{client_config, connect_tls, listener, server_files, Ca};
    use kafgres_broker::listener::{ListenerSpec, SecurityProtocol};
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let config = leader_config(&leader_dir, 1, None);
    let leader = TestBroker::start_with(leader_dir, Arc::default(), config).await;
    let ca = Ca::new("CA");
    let files = server_files(&ca, None, kafgres_broker::tls::ClientAuth::None);
    let follower_dir = tempfile::tempdir().expect("tempdir");
    let mut config = follower_config(&follower_dir, &leader, "standby1");
    config.tls = Some(files.settings.clone());
    config.extra_listeners = vec![listener(SecurityProtocol::Ssl)];
    // The leader's advertised listeners as it recorded them: its SSL one on 127.0.0.2:7777.
    let spec = |security, host: &str, port| ListenerSpec { security, host: host.into(), port };
    config.leader.as_mut().expect("a leader").listeners = vec![
        spec(SecurityProtocol::Plaintext, "127.0.0.1", leader.addr().port()),
        spec(SecurityProtocol::Ssl, "127.0.0.2", 7777),
    ];
    let follower = TestBroker::start_with(follower_dir, Arc::default(), config).await;
    let metadata = |brokers: &[kafka_protocol::messages::metadata_response::MetadataResponseBroker]| {
        brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect::<Vec<_>>()
    };
    let mut plain = follower.client().await;
    let answer = plain.call(12, &MetadataRequest::default().with_topics(None)).await;
    assert_eq!(metadata(&answer.brokers), [(1, "127.0.0.1".to_owned(), i32::from(leader.addr().port()))]);
    let ssl = follower.broker.listener_addr(SecurityProtocol::Ssl).expect("SSL listener");
    let mut tls = connect_tls(ssl, client_config(&ca, None)).await.expect("handshake");
    let answer = tls.call(12, &MetadataRequest::default().with_topics(None)).await;
    assert_eq!(metadata(&answer.brokers), [(1, "127.0.0.2".to_owned(), 7777)], "the leader's SSL listener");
    follower.shutdown().await;
    leader.shutdown().await;
}
