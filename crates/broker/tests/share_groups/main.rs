//! Share groups (KIP-932) over the wire: members splitting a partition's
//! records, acknowledgements, lock timeouts and delivery limits, the long
//! poll, restarts, and the errors Kafka answers for bad input. This file
//! holds the harness; each submodule one family of behaviour.
//! Every wait is bounded (the harness's read timeout, explicit deadlines).

#[path = "../common/mod.rs"]
mod common;

mod acquire_modes;
mod delivery;
mod group_configs;
mod offsets_admin;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::txn;
use common::{batch, create_topic, decode_records, produce, records, Client, TestBroker};
use kafgres_broker::share::{AutoOffsetReset, IsolationLevel};
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::share_acknowledge_request::{AcknowledgePartition, AcknowledgeTopic};
use kafka_protocol::messages::share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;
const RENEW: i8 = 4;

fn config(dir: &tempfile::TempDir) -> BrokerConfig {
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    // Most tests produce before the group first reads.
    config.share.group_defaults.auto_offset_reset = AutoOffsetReset::Earliest;
    config
}

async fn start(adjust: impl FnOnce(&mut BrokerConfig)) -> (TestBroker, BrokerConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(&dir);
    adjust(&mut c);
    (TestBroker::start_with(dir, Arc::new(MemoryCatalog::default()), c.clone()).await, c)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

async fn heartbeat(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatResponse {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topics.map(|t| t.iter().map(|n| common::name(n)).collect()));
    client.call(1, &request).await
}

/// Acknowledgements of one partition: (first, last, types).
type Acks = Vec<(i64, i64, Vec<i8>)>;

fn ack_batches(acks: &Acks) -> Vec<AcknowledgementBatch> {
    acks.iter()
        .map(|(first, last, types)| {
            AcknowledgementBatch::default()
                .with_first_offset(*first)
                .with_last_offset(*last)
                .with_acknowledge_types(types.clone())
        })
        .collect()
}

struct Fetch<'a> {
    member: &'a str,
    epoch: i32,
    topic_id: Uuid,
    acks: Acks,
    records_max: i32,
    bytes_max: i32,
    wait_ms: i32,
}

impl<'a> Fetch<'a> {
    fn new(member: &'a str, epoch: i32, topic_id: Uuid) -> Fetch<'a> {
        Fetch { member, epoch, topic_id, acks: Vec::new(), records_max: 500, bytes_max: 1 << 20, wait_ms: 0 }
    }

    fn request(&self) -> ShareFetchRequest {
        let partition =
            FetchPartition::default().with_partition_index(0).with_acknowledgement_batches(ack_batches(&self.acks));
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s("g"))))
            .with_member_id(Some(s(self.member)))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(self.wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(self.bytes_max)
            .with_max_records(self.records_max)
            .with_batch_size(self.records_max)
            .with_topics(vec![FetchTopic::default().with_topic_id(self.topic_id).with_partitions(vec![partition])])
    }

    async fn send(&self, client: &mut Client) -> ShareFetchResponse {
        client.call(1, &self.request()).await
    }
}

/// (first, last, delivery count) of every acquired range, partition 0.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

/// The acquired offsets, checked against the records sent (each must be in a batch).
fn acquired_offsets(r: &ShareFetchResponse) -> Vec<i64> {
    let partition = &r.responses[0].partitions[0];
    let sent: Vec<i64> =
        partition.records.as_ref().map(|b| decode_records(b).into_iter().map(|(o, _)| o).collect()).unwrap_or_default();
    let offsets: Vec<i64> = acquired(r).iter().flat_map(|(first, last, _)| *first..=*last).collect();
    for o in &offsets {
        assert!(sent.contains(o), "acquired offset {o} is not in the records sent ({sent:?})");
    }
    offsets
}

async fn acknowledge(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &Acks,
) -> ShareAcknowledgeResponse {
    client.call(1, &acknowledge_request(member, epoch, topic_id, acks)).await
}

fn acknowledge_request(member: &str, epoch: i32, topic_id: Uuid, acks: &Acks) -> ShareAcknowledgeRequest {
    let partition = AcknowledgePartition::default().with_partition_index(0).with_acknowledgement_batches(
        acks.iter()
            .map(|(first, last, types)| {
                kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch::default()
                    .with_first_offset(*first)
                    .with_last_offset(*last)
                    .with_acknowledge_types(types.clone())
            })
            .collect(),
    );
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default().with_topic_id(topic_id).with_partitions(vec![partition])])
}

async fn produce_records(client: &mut Client, tag: &str, count: usize) {
    let p = produce(client, 9, "t", 0, -1, batch(&records(tag, count))).await;
    assert_eq!(p.error_code, 0);
}

/// A topic `t` with records 0..count and members joined to group `g`.
async fn topic_with_members(broker: &TestBroker, count: usize, members: &[&str]) -> (Client, Uuid) {
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "t", 1).await;
    if count > 0 {
        produce_records(&mut client, "r", count).await;
    }
    for m in members {
        let r = heartbeat(&mut client, m, 0, Some(&["t"])).await;
        assert_eq!(r.error_code, 0, "{r:?}");
    }
    (client, id)
}
