//! Delivery: members splitting records, acknowledgements, lock expiry, the
//! delivery limit, the long poll, restarts, leaving, and bad input.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_records_of_one_partition() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a", "b"]).await;
    // One partition, two members: both are assigned it.
    let a = heartbeat(&mut client, "a", 1, None).await;
    assert_eq!((a.error_code, a.member_epoch), (0, 2));
    assert_eq!(a.assignment.map(|x| x.topic_partitions[0].partitions.clone()), Some(vec![0]));
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 4;
    let first = fetch.send(&mut client).await;
    assert_eq!((first.error_code, first.acquisition_lock_timeout_ms), (0, 30_000));
    let mut b_client = broker.client().await;
    let mut fetch_b = Fetch::new("b", 0, id);
    fetch_b.records_max = 100;
    let second = fetch_b.send(&mut b_client).await;
    let (mine, theirs) = (acquired_offsets(&first), acquired_offsets(&second));
    assert_eq!(mine, (0..4).collect::<Vec<_>>());
    assert_eq!(theirs, (4..10).collect::<Vec<_>>(), "b gets what a does not hold");
    assert!(acquired(&first).iter().chain(&acquired(&second)).all(|(_, _, count)| *count == 1));
    // Nothing left for either.
    let again = Fetch::new("a", 1, id).send(&mut client).await;
    assert!(acquired(&again).is_empty(), "{again:?}");
    // Describe: both members, Stable, the simple assignor.
    let d = client
        .call(1, &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g")), GroupId(s("nope"))]))
        .await;
    assert_eq!((d.groups[0].error_code, d.groups[0].group_state.as_str()), (0, "Stable"));
    assert_eq!(d.groups[0].members.len(), 2);
    assert_eq!(d.groups[0].assignor_name.as_str(), "simple");
    assert_eq!(d.groups[1].error_code, error_code::GROUP_ID_NOT_FOUND);
    // ListGroups v5 lists it by its type; a consumer-type filter does not.
    let listed = |types: &[&str]| {
        kafka_protocol::messages::ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let shares = client.call(5, &listed(&["share"])).await;
    let row: Vec<(&str, &str, &str, &str)> = shares
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.protocol_type.as_str(), g.group_state.as_str(), g.group_type.as_str()))
        .collect();
    assert_eq!(row, vec![("g", "share", "Stable", "share")]);
    assert!(client.call(5, &listed(&["consumer"])).await.groups.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_release_and_reject_decide_what_is_delivered_again() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a", "b"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(0, 9, 1)]);
    // Accept 0-3, release 4-5, reject 6-9 (per-offset types for 4-9).
    let acks = vec![(0, 3, vec![ACCEPT]), (4, 9, vec![RELEASE, RELEASE, REJECT, REJECT, REJECT, REJECT])];
    let r = acknowledge(&mut client, "a", 1, id, &acks).await;
    assert_eq!((r.error_code, r.responses[0].partitions[0].error_code), (0, 0), "{r:?}");
    // DescribeShareGroupOffsets v1's lag: 10 records, the start at 4, 6-9
    // archived after it: 4 and 5 are left to deliver (Kafka's KIP-1226 lag).
    let offsets = client
        .call(
            1,
            &kafgres_wire::messages::DescribeShareGroupOffsetsRequest(
                kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                    kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                        .with_group_id(GroupId(s("g")))
                        .with_topics(None),
                ]),
            ),
        )
        .await;
    let p = &offsets.groups[0].topics[0].partitions[0];
    assert_eq!((p.start_offset, p.lag), (4, 2), "{offsets:?}");
    // The released records go to b, delivered a second time.
    let mut b = broker.client().await;
    let redelivered = Fetch::new("b", 0, id).send(&mut b).await;
    assert_eq!(acquired(&redelivered), vec![(4, 5, 2)]);
    // b accepts them piggybacked on its next fetch.
    let mut next = Fetch::new("b", 1, id);
    next.acks = vec![(4, 5, vec![ACCEPT])];
    let r = next.send(&mut b).await;
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0, "{r:?}");
    assert!(acquired(&r).is_empty());
    // DescribeShareGroupOffsets answers the start offset (kafka-share-groups.sh --describe).
    let offsets = client
        .call(
            0,
            &kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(None),
                kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("unknown"))),
            ]),
        )
        .await;
    let g = &offsets.groups[0];
    assert_eq!((g.topics[0].topic_name.0.as_str(), g.topics[0].topic_id), ("t", id));
    assert_eq!((g.topics[0].partitions[0].partition_index, g.topics[0].partitions[0].start_offset), (0, 10));
    assert_eq!(offsets.groups[1].error_code, error_code::GROUP_ID_NOT_FOUND);
    // Everything is done: the stored start offset is past the last record.
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset), (1, 10), "{stored:?}");
    assert!(stored[0].batches.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lock_redelivers_with_a_higher_delivery_count() {
    let (broker, _) = start(|c| c.share.group_defaults.record_lock_duration_ms = 400).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!((acquired(&got), got.acquisition_lock_timeout_ms), (vec![(0, 2, 1)], 400));
    // b long-polls before the lock expires; the expiry (a timer, not a poll)
    // makes the records available and wakes it.
    let mut b = broker.client().await;
    let started = Instant::now();
    let mut wait = Fetch::new("b", 0, id);
    wait.wait_ms = 8_000;
    let r = wait.send(&mut b).await;
    assert_eq!(acquired(&r), vec![(0, 2, 2)]);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(4), "woken after {waited:?}");
    // a's acknowledgement comes too late: the records are b's now.
    let late = acknowledge(&mut client, "a", 1, id, &vec![(0, 2, vec![ACCEPT])]).await;
    assert_eq!(late.responses[0].partitions[0].error_code, error_code::INVALID_RECORD_STATE);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_count_limit_archives_a_record() {
    let (broker, _) = start(|c| c.share.group_defaults.delivery_count_limit = 2).await;
    let (mut client, id) = topic_with_members(&broker, 1, &["a"]).await;
    let mut epoch = 0;
    for delivery in 1..=2 {
        let got = Fetch::new("a", epoch, id).send(&mut client).await;
        assert_eq!(acquired(&got), vec![(0, 0, delivery)]);
        let r = acknowledge(&mut client, "a", epoch + 1, id, &vec![(0, 0, vec![RELEASE])]).await;
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        epoch += 2;
    }
    // Released after its second delivery: archived, never delivered again.
    let none = Fetch::new("a", epoch, id).send(&mut client).await;
    assert!(acquired(&none).is_empty(), "{none:?}");
    let stored = broker.catalog.share_states();
    assert_eq!(stored[0].start_offset, 1, "{stored:?}");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_woken_by_an_append() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 0, &["a"]).await;
    let mut consumer = broker.client().await;
    let poll = tokio::spawn(async move {
        let mut fetch = Fetch::new("a", 0, id);
        fetch.wait_ms = 10_000;
        let started = Instant::now();
        (fetch.send(&mut consumer).await, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce_records(&mut client, "late", 2).await;
    let (r, waited) = tokio::time::timeout(Duration::from_secs(8), poll).await.expect("answered").expect("task");
    assert_eq!(acquired(&r), vec![(0, 1, 1)]);
    assert!(waited < Duration::from_secs(5), "the append did not wake it ({waited:?})");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_starts_after_what_is_there_at_the_first_read() {
    let (broker, _) = start(|c| c.share.group_defaults.auto_offset_reset = AutoOffsetReset::Latest).await;
    let (mut client, id) = topic_with_members(&broker, 5, &["a"]).await;
    let first = Fetch::new("a", 0, id).send(&mut client).await;
    assert!(acquired(&first).is_empty(), "{first:?}");
    assert_eq!(first.responses[0].partitions[0].error_code, 0, "the partition is answered, empty");
    produce_records(&mut client, "new", 2).await;
    let next = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(acquired(&next), vec![(5, 6, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_never_delivers_aborted_records() {
    let (broker, _) = start(|c| c.share.group_defaults.isolation_level = IsolationLevel::ReadCommitted).await;
    let (mut client, id) = topic_with_members(&broker, 0, &["a"]).await;
    let (pid, epoch, code) = txn::init(&mut client, "tx", 60_000).await;
    assert_eq!(code, 0);
    assert_eq!(
        txn::produce_txn_at(&mut client, 12, "tx", "t", 0, txn::txn_batch(pid, epoch, 0, 3, "aborted")).await,
        0
    );
    // Open transaction: nothing is stable yet.
    let open = Fetch::new("a", 0, id).send(&mut client).await;
    assert!(acquired(&open).is_empty(), "{open:?}");
    let ended = txn::end_answer(&mut client, 5, "tx", pid, epoch, false).await;
    assert_eq!(ended.error_code, 0);
    produce_records(&mut client, "plain", 2).await;
    // 0-2 aborted, 3 the abort marker: archived; 4-5 delivered.
    let got = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(4, 5, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_acknowledgements_and_delivery_counts() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(0, 9, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 4, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    // Membership is not stored: the member joins again; 0-4 stay accepted,
    // 5-9 lost their lock with the restart and come back, second delivery.
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    let again = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&again), vec![(5, 9, 2)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_releases_its_records() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a", "b"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    let left = heartbeat(&mut client, "a", -1, None).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let mut b = broker.client().await;
    assert_eq!(acquired(&Fetch::new("b", 0, id).send(&mut b).await), vec![(0, 1, 2)]);
    // Its session went with it.
    let gone = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(gone.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_kafkas_error_codes() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a"]).await;
    // Heartbeats.
    assert_eq!(heartbeat(&mut client, "stranger", 3, None).await.error_code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(heartbeat(&mut client, "a", 7, None).await.error_code, error_code::FENCED_MEMBER_EPOCH);
    let no_topics = heartbeat(&mut client, "c", 0, None).await;
    assert_eq!(no_topics.error_code, error_code::INVALID_REQUEST);
    assert_eq!(heartbeat(&mut client, "", 0, Some(&["t"])).await.error_code, error_code::INVALID_REQUEST);
    assert_eq!(heartbeat(&mut client, "stranger", -1, None).await.error_code, error_code::UNKNOWN_MEMBER_ID);
    // Sessions: acknowledgements on an initial fetch, unknown sessions, wrong epochs.
    let mut initial = Fetch::new("a", 0, id);
    initial.acks = vec![(0, 0, vec![ACCEPT])];
    let r = initial.send(&mut client).await;
    assert_eq!((r.error_code, r.acquisition_lock_timeout_ms), (error_code::INVALID_REQUEST, 0));
    assert_eq!(Fetch::new("a", 1, id).send(&mut client).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    assert_eq!(acknowledge(&mut client, "a", 0, id, &vec![]).await.error_code, error_code::INVALID_SHARE_SESSION_EPOCH);
    assert_eq!(acknowledge(&mut client, "a", 1, id, &vec![]).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    let opened = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&opened), vec![(0, 2, 1)]);
    assert_eq!(Fetch::new("a", 5, id).send(&mut client).await.error_code, error_code::INVALID_SHARE_SESSION_EPOCH);
    // Acknowledging what was never acquired, or with malformed types.
    let wrong = acknowledge(&mut client, "a", 1, id, &vec![(5, 6, vec![ACCEPT])]).await;
    assert_eq!(wrong.responses[0].partitions[0].error_code, error_code::INVALID_RECORD_STATE);
    let malformed = acknowledge(&mut client, "a", 2, id, &vec![(0, 2, vec![ACCEPT, REJECT])]).await;
    assert_eq!(malformed.responses[0].partitions[0].error_code, error_code::INVALID_REQUEST);
    // An unknown topic id in the session is answered per partition.
    let mut unknown = Fetch::new("a", 3, Uuid::from_u128(42));
    unknown.wait_ms = 100;
    let r = unknown.send(&mut client).await;
    let codes: Vec<(Uuid, i16)> =
        r.responses.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.error_code))).collect();
    assert!(codes.contains(&(Uuid::from_u128(42), error_code::UNKNOWN_TOPIC_ID)), "{r:?}");
    // Forgetting it and closing the session (epoch -1) with a final acknowledgement.
    let forget = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s("a")))
        .with_share_session_epoch(4)
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic_id(Uuid::from_u128(42))
            .with_partitions(vec![0])]);
    let r: ShareFetchResponse = client.call(1, &forget).await;
    assert!(r.responses.iter().all(|t| t.topic_id == id), "{r:?}");
    let mut close = Fetch::new("a", -1, id);
    close.acks = vec![(0, 2, vec![ACCEPT])];
    let r = close.send(&mut client).await;
    assert_eq!((r.error_code, r.responses[0].partitions[0].acknowledge_error_code), (0, 0), "{r:?}");
    assert!(acquired(&r).is_empty());
    assert_eq!(Fetch::new("a", 6, id).send(&mut client).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

/// A topic `t` of `count` single-record batches of `bytes` each.
async fn big_records(client: &mut Client, count: usize, bytes: usize) {
    for i in 0..count {
        let record = kafgres_record::build::NewRecord {
            key: None,
            value: Some(vec![i as u8; bytes]),
            headers: Vec::new(),
            timestamp_ms: 1_700_000_000_000,
        };
        assert_eq!(produce(client, 9, "t", 0, -1, batch(&[record])).await.error_code, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_reads_the_log_as_far_as_its_limits_not_one_read_chunk() {
    // 20 records of 200 KiB: 4 MB, several of the broker's reads of the log.
    let (broker, _) = start(|c| c.message_bytes_max = 4 << 20).await;
    let (mut client, id) = topic_with_members(&broker, 0, &["a"]).await;
    big_records(&mut client, 20, 200 << 10).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.bytes_max = 50 << 20;
    let all = fetch.send(&mut client).await;
    assert_eq!(acquired_offsets(&all), (0..20).collect::<Vec<_>>());

    // A released run below the frontier comes back whole too, and a record
    // acquired by nobody else past it is not skipped.
    let released = acknowledge(&mut client, "a", 1, id, &vec![(2, 17, vec![RELEASE])]).await;
    assert_eq!(released.error_code, 0);
    let mut again = Fetch::new("a", 2, id);
    again.bytes_max = 50 << 20;
    let back = again.send(&mut client).await;
    assert_eq!(acquired(&back), vec![(2, 17, 2)]);

    // The byte limit still bounds a fetch: 500 KiB takes two of them.
    let released = acknowledge(&mut client, "a", 3, id, &vec![(0, 19, vec![RELEASE])]).await;
    assert_eq!(released.error_code, 0);
    let mut small = Fetch::new("a", 4, id);
    small.bytes_max = 500 << 10;
    let few = small.send(&mut client).await;
    assert_eq!(acquired_offsets(&few), vec![0, 1]);

    // A batch larger than one read of the log still comes after others.
    let mut b = broker.client().await;
    assert_eq!(heartbeat(&mut b, "b", 0, Some(&["t"])).await.error_code, 0);
    big_records(&mut client, 1, 3 << 20).await;
    let mut rest = Fetch::new("b", 0, id);
    rest.bytes_max = 50 << 20;
    let got = rest.send(&mut b).await;
    assert_eq!(acquired_offsets(&got), (2..21).collect::<Vec<_>>());
    broker.broker.shutdown().await;
}
