//! Share groups (KIP-932) as one member: it joins with ShareGroupHeartbeat,
//! acquires records with ShareFetch and settles them with ShareAcknowledge,
//! all through one share session kept in a [`ShareMember`].
//!
//! The session matters: the broker releases what a member acquired when its
//! session is replaced (a fetch at epoch 0 again) or its connection closes,
//! so records acquired by one call stay acquired for a later acknowledgement
//! only while the session goes on, epoch after epoch.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use kafgres_wire::error_code;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch, ShareAcknowledgeRequest,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic, ForgottenTopic, ShareFetchRequest};
use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{check_code, topic_name, unexpected, Client};
use crate::error::ClientError;
use crate::records::{decode_batches, Record};
use crate::wait::Wait;

/// A member's session epoch before it has a session (a fetch at it opens one).
const INITIAL_SESSION_EPOCH: i32 = 0;
/// The member epoch that leaves the group.
const LEAVE_EPOCH: i32 = -1;

/// One member of one share group, as this client sees it.
#[derive(Debug, Clone)]
pub struct ShareMember {
    pub group_id: String,
    /// Chosen by the client (ShareGroupHeartbeat v1).
    pub member_id: String,
    /// 0 until the group has accepted the member.
    member_epoch: i32,
    /// The partitions the group assigned, by topic id.
    assignment: Vec<(Uuid, Vec<i32>)>,
    /// The epoch the next ShareFetch or ShareAcknowledge carries.
    session_epoch: i32,
    session_partitions: BTreeSet<(Uuid, i32)>,
}

/// What becomes of acquired records (Kafka's acknowledge types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcknowledgeType {
    /// Processed: never delivered again.
    Accept = 1,
    /// Given back: delivered again (to any member) at once.
    Release = 2,
    /// Unprocessable: archived, never delivered again.
    Reject = 3,
}

/// A range of acquired records of one partition and what becomes of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareAcknowledgement {
    pub topic_id: Uuid,
    pub partition: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub kind: AcknowledgeType,
}

/// One record this member acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquiredRecord {
    pub partition: i32,
    /// How many times it has been delivered, this time included.
    pub delivery_count: i16,
    pub record: Record,
}

impl ShareMember {
    pub fn new(group_id: &str, member_id: &str) -> ShareMember {
        ShareMember {
            group_id: group_id.to_owned(),
            member_id: member_id.to_owned(),
            member_epoch: 0,
            assignment: Vec::new(),
            session_epoch: INITIAL_SESSION_EPOCH,
            session_partitions: BTreeSet::new(),
        }
    }

    /// The partitions of `topic_id` the group assigned to this member.
    pub fn assigned(&self, topic_id: Uuid) -> Vec<i32> {
        self.assignment.iter().filter(|(t, _)| *t == topic_id).flat_map(|(_, p)| p.iter().copied()).collect()
    }

    pub fn has_joined(&self) -> bool {
        self.member_epoch > 0
    }

    /// Whether a session is open, so acknowledgements can be sent.
    pub fn has_session(&self) -> bool {
        self.session_epoch != INITIAL_SESSION_EPOCH
    }

    /// Forgets the session (the broker dropped it: a new connection, say);
    /// what it had acquired is released there already.
    pub fn reset_session(&mut self) {
        self.session_epoch = INITIAL_SESSION_EPOCH;
        self.session_partitions.clear();
    }

    fn advance_session(&mut self) {
        self.session_epoch = if self.session_epoch == i32::MAX { 1 } else { self.session_epoch + 1 };
    }
}

fn strbytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn is_session_error(code: i16) -> bool {
    code == error_code::SHARE_SESSION_NOT_FOUND || code == error_code::INVALID_SHARE_SESSION_EPOCH
}

impl<W: Wait> Client<W> {
    /// A heartbeat subscribing the member to `topics`: it joins (or joins
    /// again, if the group fenced it or forgot it), and learns its assignment.
    pub fn share_heartbeat(&mut self, member: &mut ShareMember, topics: &[&str]) -> Result<(), ClientError> {
        const API: &str = "ShareGroupHeartbeat";
        for attempt in 0..2 {
            let request = ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(strbytes(&member.group_id)))
                .with_member_id(strbytes(&member.member_id))
                .with_member_epoch(member.member_epoch)
                .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(t)).collect()));
            let response = self.call(&request)?;
            let code = response.error_code;
            if attempt == 0 && (code == error_code::UNKNOWN_MEMBER_ID || code == error_code::FENCED_MEMBER_EPOCH) {
                member.member_epoch = 0;
                member.assignment.clear();
                continue;
            }
            check_code(API, code, response.error_message.as_ref(), &member.group_id)?;
            member.member_epoch = response.member_epoch;
            if let Some(assignment) = response.assignment {
                member.assignment =
                    assignment.topic_partitions.into_iter().map(|t| (t.topic_id, t.partitions)).collect();
            }
            return Ok(());
        }
        Err(unexpected(API, "fenced the member twice"))
    }

    /// Leaves the group; the broker releases what the member still holds.
    pub fn share_leave(&mut self, member: &mut ShareMember) -> Result<(), ClientError> {
        if !member.has_joined() {
            return Ok(());
        }
        let request = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(strbytes(&member.group_id)))
            .with_member_id(strbytes(&member.member_id))
            .with_member_epoch(LEAVE_EPOCH);
        let response = self.call(&request)?;
        member.member_epoch = 0;
        member.assignment.clear();
        member.reset_session();
        check_code("ShareGroupHeartbeat", response.error_code, response.error_message.as_ref(), &member.group_id)
    }

    /// Acquires up to `max_records` records of `partitions` of one topic,
    /// waiting up to `max_wait` for some. Records come in partition and
    /// offset order, each with its delivery count.
    pub fn share_fetch(
        &mut self,
        member: &mut ShareMember,
        topic_id: Uuid,
        partitions: &[i32],
        max_records: i32,
        max_wait: Duration,
    ) -> Result<Vec<AcquiredRecord>, ClientError> {
        const API: &str = "ShareFetch";
        if max_records <= 0 {
            return Err(ClientError::InvalidArgument(format!("share fetch of {max_records} records")));
        }
        let wanted: BTreeSet<(Uuid, i32)> = partitions.iter().map(|&p| (topic_id, p)).collect();
        for attempt in 0..2 {
            let added: Vec<i32> =
                wanted.iter().filter(|p| !member.session_partitions.contains(p)).map(|p| p.1).collect();
            let forgotten: Vec<(Uuid, i32)> =
                member.session_partitions.iter().filter(|p| !wanted.contains(p)).copied().collect();
            let request = ShareFetchRequest::default()
                .with_group_id(Some(GroupId(strbytes(&member.group_id))))
                .with_member_id(Some(strbytes(&member.member_id)))
                .with_share_session_epoch(member.session_epoch)
                .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
                .with_min_bytes(1)
                .with_max_bytes(i32::MAX)
                .with_max_records(max_records)
                .with_batch_size(max_records)
                .with_topics(if added.is_empty() {
                    Vec::new()
                } else {
                    vec![FetchTopic::default().with_topic_id(topic_id).with_partitions(
                        added.iter().map(|&p| FetchPartition::default().with_partition_index(p)).collect(),
                    )]
                })
                .with_forgotten_topics_data(forgotten_topics(&forgotten));
            let deadline = self.deadline(max_wait);
            let response = self.conn.call(&request, deadline)?;
            if attempt == 0 && is_session_error(response.error_code) {
                member.reset_session();
                continue;
            }
            check_code(API, response.error_code, response.error_message.as_ref(), &member.group_id)?;
            member.advance_session();
            member.session_partitions = wanted.clone();
            let mut acquired = Vec::new();
            for topic in response.responses.iter().filter(|t| t.topic_id == topic_id) {
                for data in &topic.partitions {
                    check_code(API, data.error_code, data.error_message.as_ref(), &member.group_id)?;
                    let Some(first) = data.acquired_records.iter().map(|a| a.first_offset).min() else {
                        continue;
                    };
                    let empty = Bytes::new();
                    let decoded = decode_batches(
                        data.records.as_ref().unwrap_or(&empty),
                        first,
                        self.config.decompressed_bytes_max,
                    )?;
                    for record in decoded.records {
                        let range = data
                            .acquired_records
                            .iter()
                            .find(|a| a.first_offset <= record.offset && record.offset <= a.last_offset);
                        if let Some(range) = range {
                            acquired.push(AcquiredRecord {
                                partition: data.partition_index,
                                delivery_count: range.delivery_count,
                                record,
                            });
                        }
                    }
                }
            }
            acquired.sort_by_key(|a| (a.partition, a.record.offset));
            return Ok(acquired);
        }
        Err(unexpected(API, "refused a new share session"))
    }

    /// Settles acquired records. Returns the partitions the broker refused
    /// (topic id, partition, error code): INVALID_RECORD_STATE when their
    /// acquisition lock had expired, say. A closed or unknown session is an
    /// error: what it held is released already.
    pub fn share_acknowledge(
        &mut self,
        member: &mut ShareMember,
        acknowledgements: &[ShareAcknowledgement],
    ) -> Result<Vec<(Uuid, i32, i16)>, ClientError> {
        const API: &str = "ShareAcknowledge";
        if acknowledgements.is_empty() {
            return Ok(Vec::new());
        }
        if !member.has_session() {
            return Err(ClientError::kafka(API, error_code::SHARE_SESSION_NOT_FOUND, member.group_id.clone()));
        }
        let mut topics: Vec<AcknowledgeTopic> = Vec::new();
        for a in acknowledgements {
            let batch = AcknowledgementBatch::default()
                .with_first_offset(a.first_offset)
                .with_last_offset(a.last_offset)
                .with_acknowledge_types(vec![a.kind as i8]);
            let topic = match topics.iter_mut().position(|t| t.topic_id == a.topic_id) {
                Some(i) => &mut topics[i],
                None => {
                    topics.push(AcknowledgeTopic::default().with_topic_id(a.topic_id));
                    topics.last_mut().ok_or_else(|| unexpected(API, "lost a topic"))?
                }
            };
            match topic.partitions.iter_mut().find(|p| p.partition_index == a.partition) {
                Some(p) => p.acknowledgement_batches.push(batch),
                None => topic.partitions.push(
                    AcknowledgePartition::default()
                        .with_partition_index(a.partition)
                        .with_acknowledgement_batches(vec![batch]),
                ),
            }
        }
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(strbytes(&member.group_id))))
            .with_member_id(Some(strbytes(&member.member_id)))
            .with_share_session_epoch(member.session_epoch)
            .with_topics(topics);
        let response = self.call(&request)?;
        if is_session_error(response.error_code) {
            member.reset_session();
        }
        check_code(API, response.error_code, response.error_message.as_ref(), &member.group_id)?;
        member.advance_session();
        Ok(response
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index, p.error_code)))
            .filter(|(_, _, code)| *code != error_code::NONE)
            .collect())
    }
}

fn forgotten_topics(forgotten: &[(Uuid, i32)]) -> Vec<ForgottenTopic> {
    let mut topics: Vec<ForgottenTopic> = Vec::new();
    for &(topic_id, partition) in forgotten {
        match topics.iter_mut().find(|t| t.topic_id == topic_id) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(ForgottenTopic::default().with_topic_id(topic_id).with_partitions(vec![partition])),
        }
    }
    topics
}
