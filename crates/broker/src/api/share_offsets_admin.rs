//! AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932): an empty
//! share group's start offsets set (`Admin.alterShareGroupOffsets`, what
//! `kafka-share-groups.sh --reset-offsets` sends from Kafka 4.2) or deleted
//! (`kafka-share-groups.sh --delete-offsets`).
//!
//! Answered as Kafka's `KafkaApis` and group coordinator answer them: the
//! group's authorization, then each topic's (READ), then the group itself
//! (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP), which as a top-level error drops
//! the topics' answers; a topic the client may not read or that does not
//! exist is answered without being changed.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::authorized_operations::{GROUP_REFUSED, TOPIC_REFUSED};
use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::share::{ShareService, StartOffsetChange};
use crate::topics::Topics;

/// Kafka's messages (`Errors.*.message()`, and its group coordinator's).
const UNKNOWN_PARTITION: &str = "This server does not host this topic-partition.";
const NOTHING_TO_DELETE: &str = "There is no offset information to delete.";
const INVALID_GROUP_ID: &str = "The group id is invalid.";
const NON_EMPTY_GROUP: &str = "The group is not empty.";
const NOT_STORED: &str = "The share-partitions' states could not be stored; retry.";

/// The top-level message Kafka gives with `code`.
fn group_message(group_id: &str, code: i16) -> Option<String> {
    match code {
        error_code::GROUP_ID_NOT_FOUND => Some(format!("Group {group_id} not found.")),
        error_code::NON_EMPTY_GROUP => Some(NON_EMPTY_GROUP.to_owned()),
        error_code::GROUP_AUTHORIZATION_FAILED => Some(GROUP_REFUSED.to_owned()),
        error_code::INVALID_GROUP_ID => Some(INVALID_GROUP_ID.to_owned()),
        error_code::COORDINATOR_NOT_AVAILABLE => Some(NOT_STORED.to_owned()),
        _ => None,
    }
}

pub struct AlterShareGroupOffsets;

impl Handler for AlterShareGroupOffsets {
    const KEY: ApiKey = ApiKey::AlterShareGroupOffsets;
    /// v0: the only version (Kafka 4.1).
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = AlterShareGroupOffsetsRequest;
    type Response = AlterShareGroupOffsetsResponse;
    type Services<'a> = (&'a ShareService, &'a Topics);

    async fn handle(
        (shares, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AlterShareGroupOffsetsRequest,
    ) -> Answer<AlterShareGroupOffsetsResponse> {
        let group_id = req.group_id.0.to_string();
        if !cx.may_on_group(Operation::Read, &group_id) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        if group_id.is_empty() {
            return refusal::<Self>(cx, &req, error_code::INVALID_GROUP_ID);
        }
        // Answers in Kafka's order: the refused topics, then the others,
        // one entry per topic name.
        let mut refused = AlterAnswers::default();
        let mut answered = AlterAnswers::default();
        let mut changes = Vec::new();
        for t in &req.topics {
            let name = t.topic_name.0.as_str();
            let topic = topics.get(name);
            let topic_id = topic.as_ref().map_or(Uuid::nil(), |t| t.id);
            let topic_error = if !cx.may_on_topic(Operation::Read, name) {
                Some((error_code::TOPIC_AUTHORIZATION_FAILED, TOPIC_REFUSED))
            } else if topic.is_none() {
                Some((error_code::UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION))
            } else {
                None
            };
            for p in &t.partitions {
                let (answers, outcome) = match (topic_error, &topic) {
                    (Some(error), _) => (&mut refused, Some(error)),
                    (None, Some(found)) if found.partition(p.partition_index).is_some() => {
                        changes.push(StartOffsetChange {
                            topic_id,
                            partition: p.partition_index,
                            start_offset: p.start_offset,
                        });
                        (&mut answered, None)
                    }
                    (None, _) => (&mut answered, Some((error_code::UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION))),
                };
                answers.add(name, topic_id, p.partition_index, outcome);
            }
        }
        let write = match shares.alter_start_offsets(&group_id, &changes) {
            Ok(write) => write,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        if let Some(write) = write {
            if let Err(e) = write.await {
                log::warn!("storing the altered start offsets of share group {group_id} failed: {e}");
                return refusal::<Self>(cx, &req, error_code::COORDINATOR_NOT_AVAILABLE);
            }
        }
        let mut response = AlterShareGroupOffsetsResponse::default();
        response.responses = refused.0;
        for topic in answered.0 {
            match response.responses.iter_mut().find(|t| t.topic_name == topic.topic_name) {
                Some(existing) => existing.partitions.extend(topic.partitions),
                None => response.responses.push(topic),
            }
        }
        response.into()
    }

    fn refused(
        _: &RequestContext<'_>,
        req: &AlterShareGroupOffsetsRequest,
        code: i16,
    ) -> Option<AlterShareGroupOffsetsResponse> {
        let mut response = AlterShareGroupOffsetsResponse::default();
        response.error_code = code;
        response.error_message = group_message(&req.group_id.0, code).as_deref().map(str_bytes);
        Some(response)
    }
}

/// AlterShareGroupOffsets' answers by topic name, in first-seen order.
#[derive(Default)]
struct AlterAnswers(Vec<AlterShareGroupOffsetsResponseTopic>);

impl AlterAnswers {
    fn add(&mut self, name: &str, topic_id: Uuid, partition: i32, error: Option<(i16, &str)>) {
        let position = match self.0.iter().position(|t| t.topic_name.0.as_str() == name) {
            Some(i) => i,
            None => {
                let mut t = AlterShareGroupOffsetsResponseTopic::default();
                t.topic_name = TopicName(str_bytes(name));
                t.topic_id = topic_id;
                self.0.push(t);
                self.0.len() - 1
            }
        };
        let mut p = AlterShareGroupOffsetsResponsePartition::default();
        p.partition_index = partition;
        if let Some((code, message)) = error {
            p.error_code = code;
            p.error_message = Some(str_bytes(message));
        }
        self.0[position].partitions.push(p);
    }
}

pub struct DeleteShareGroupOffsets;

impl Handler for DeleteShareGroupOffsets {
    const KEY: ApiKey = ApiKey::DeleteShareGroupOffsets;
    /// v0: the only version (Kafka 4.1).
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = DeleteShareGroupOffsetsRequest;
    type Response = DeleteShareGroupOffsetsResponse;
    type Services<'a> = (&'a ShareService, &'a Topics);

    async fn handle(
        (shares, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DeleteShareGroupOffsetsRequest,
    ) -> Answer<DeleteShareGroupOffsetsResponse> {
        let group_id = req.group_id.0.to_string();
        // Kafka asks DELETE on the group (as DeleteGroups), READ on each topic.
        if !cx.may_on_group(Operation::Delete, &group_id) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        if group_id.is_empty() {
            return refusal::<Self>(cx, &req, error_code::INVALID_GROUP_ID);
        }
        let mut response = DeleteShareGroupOffsetsResponse::default();
        let mut wanted: Vec<(StrBytes, Option<Uuid>)> = Vec::new();
        for t in &req.topics {
            let name = &t.topic_name.0;
            if cx.may_on_topic(Operation::Read, name) {
                wanted.push((name.clone(), topics.get(name).map(|found| found.id)));
            } else {
                response.responses.push(topic_answer(name, Uuid::nil(), error_code::TOPIC_AUTHORIZATION_FAILED));
            }
        }
        let known: Vec<Uuid> = wanted.iter().filter_map(|(_, id)| *id).collect();
        let (had_state, write) = match shares.delete_start_offsets(&group_id, &known) {
            Ok(done) => done,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        if let Some(write) = write {
            if let Err(e) = write.await {
                log::warn!("deleting the start offsets of share group {group_id} failed: {e}");
                return refusal::<Self>(cx, &req, error_code::COORDINATOR_NOT_AVAILABLE);
            }
        }
        // Kafka lists the deleted topics first, then those it could not delete.
        let mut failed = Vec::new();
        for (name, id) in wanted {
            let deleted = id.and_then(|id| known.iter().position(|k| *k == id)).is_some_and(|i| had_state[i]);
            match id {
                Some(id) if deleted => response.responses.push(topic_answer(&name, id, error_code::NONE)),
                Some(_) => {
                    let mut answer = topic_answer(&name, Uuid::nil(), error_code::UNKNOWN_TOPIC_OR_PARTITION);
                    answer.error_message = Some(str_bytes(NOTHING_TO_DELETE));
                    failed.push(answer);
                }
                None => failed.push(topic_answer(&name, Uuid::nil(), error_code::UNKNOWN_TOPIC_OR_PARTITION)),
            }
        }
        response.responses.extend(failed);
        response.into()
    }

    fn refused(
        _: &RequestContext<'_>,
        req: &DeleteShareGroupOffsetsRequest,
        code: i16,
    ) -> Option<DeleteShareGroupOffsetsResponse> {
        let mut response = DeleteShareGroupOffsetsResponse::default();
        response.error_code = code;
        response.error_message = group_message(&req.group_id.0, code).as_deref().map(str_bytes);
        Some(response)
    }
}

/// One topic's answer, with Kafka's message for its error.
fn topic_answer(name: &str, topic_id: Uuid, code: i16) -> DeleteShareGroupOffsetsResponseTopic {
    let mut t = DeleteShareGroupOffsetsResponseTopic::default();
    t.topic_name = TopicName(str_bytes(name));
    t.topic_id = topic_id;
    t.error_code = code;
    t.error_message = match code {
        error_code::TOPIC_AUTHORIZATION_FAILED => Some(str_bytes(TOPIC_REFUSED)),
        error_code::UNKNOWN_TOPIC_OR_PARTITION => Some(str_bytes(UNKNOWN_PARTITION)),
        _ => None,
    };
    t
}
