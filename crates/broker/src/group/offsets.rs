//! Committed offsets: OffsetCommit validation, the in-memory view that
//! OffsetFetch reads, OffsetDelete, and loading the view from Postgres.
//!
//! The view changes when a call is made; the returned `PersistOffsets` /
//! `DeleteOffsets` effects are the write-ahead list the broker makes durable,
//! in order, before answering (see the module documentation).

use kafgres_wire::error_code;

use super::consumer::model::ConsumerGroup;
use super::coordinator::GroupCoordinator;
use super::model::{Group, OffsetValue};
use super::streams::model::StreamsGroup;
use super::types::{
    CommittedOffset, Effect, FetchedOffset, GroupState, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, TopicPartition,
};

/// OffsetCommit v9+ reports a missing group as GROUP_ID_NOT_FOUND.
const GROUP_ID_NOT_FOUND_VERSION_MIN: i16 = 9;
/// Consumer-protocol members must commit with OffsetCommit v9+.
const CONSUMER_PROTOCOL_COMMIT_VERSION_MIN: i16 = 9;

impl GroupCoordinator {
    /// Validates and applies a commit. The response must be held until the
    /// returned `PersistOffsets` is durable (on failure, answer every
    /// partition with an error: see `OffsetCommitResponse::all`).
    pub fn offset_commit(&mut self, now_ms: i64, request: &OffsetCommitRequest) -> (OffsetCommitResponse, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let response = match self.validate_offset_commit(now_ms, request, &mut effects) {
            Err(code) => OffsetCommitResponse::all(request, code),
            Ok(()) => self.apply_commit(now_ms, request, &mut effects),
        };
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        (response, effects)
    }

    /// Kafka's `validateOffsetCommit` for classic groups. A commit with
    /// generation -1 to an unknown group creates a "simple" group.
    fn validate_offset_commit(
        &mut self,
        now_ms: i64,
        request: &OffsetCommitRequest,
        effects: &mut Vec<Effect>,
    ) -> Result<(), i16> {
        if !self.groups.contains_key(&request.group_id) {
            if request.generation_id >= 0 {
                return Err(if request.api_version >= GROUP_ID_NOT_FOUND_VERSION_MIN {
                    error_code::GROUP_ID_NOT_FOUND
                } else {
                    error_code::ILLEGAL_GENERATION
                });
            }
            self.groups.insert(request.group_id.clone(), Group::new(&request.group_id, now_ms));
        }
        let (mut ctx, groups) = self.split(now_ms, effects);
        let group = groups.get_mut(&request.group_id).ok_or(error_code::UNKNOWN_SERVER_ERROR)?;
        if let Some(cg) = group.consumer.as_deref() {
            return validate_consumer_commit(cg, request);
        }
        if let Some(sg) = group.streams.as_deref() {
            return validate_streams_commit(sg, request);
        }
        if request.generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if request.generation_id >= 0 || !request.member_id.is_empty() || request.group_instance_id.is_some() {
            group.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
            if request.generation_id != group.generation_id {
                return Err(error_code::ILLEGAL_GENERATION);
            }
        } else if group.state != GroupState::Empty {
            return Err(error_code::UNKNOWN_MEMBER_ID);
        }
        match group.state {
            GroupState::CompletingRebalance => Err(error_code::REBALANCE_IN_PROGRESS),
            GroupState::Stable | GroupState::PreparingRebalance => {
                // A commit from a member keeps its session alive.
                if let Some(member) = group.member(&request.member_id) {
                    let timeout_ms = member.session_timeout_ms;
                    ctx.schedule_session(&request.group_id, &request.member_id, timeout_ms);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn apply_commit(
        &mut self,
        now_ms: i64,
        request: &OffsetCommitRequest,
        effects: &mut Vec<Effect>,
    ) -> OffsetCommitResponse {
        let metadata_max = self.config.offset_metadata_max_bytes;
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return OffsetCommitResponse::all(request, error_code::UNKNOWN_SERVER_ERROR);
        };
        let mut persisted = Vec::new();
        let mut topics = Vec::with_capacity(request.topics.len());
        for topic in &request.topics {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let metadata = p.metadata.clone().unwrap_or_default();
                // Java's String.length(): UTF-16 units.
                if metadata.encode_utf16().count() > metadata_max {
                    partitions.push((p.partition, error_code::OFFSET_METADATA_TOO_LARGE));
                    continue;
                }
                let value = OffsetValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata,
                    commit_timestamp_ms: now_ms,
                };
                persisted.push(committed(&topic.name, p.partition, &value));
                group.offsets.entry(topic.name.clone()).or_default().insert(p.partition, value);
                partitions.push((p.partition, error_code::NONE));
            }
            topics.push((topic.name.clone(), partitions));
        }
        if !persisted.is_empty() {
            effects.push(Effect::PersistOffsets { group_id: request.group_id.clone(), offsets: persisted });
        }
        OffsetCommitResponse { topics }
    }

    /// Reads committed offsets; -1 for partitions (or groups) with none.
    pub fn offset_fetch(&self, request: &OffsetFetchRequest) -> OffsetFetchResponse {
        let group = self.groups.get(&request.group_id);
        let topics = match &request.topics {
            Some(topics) => topics
                .iter()
                .map(|(name, partitions)| {
                    let stored = group.and_then(|g| g.offsets.get(name));
                    let fetched = partitions
                        .iter()
                        .map(|&p| match stored.and_then(|s| s.get(&p)) {
                            Some(value) => fetched(p, value),
                            None => FetchedOffset::none(p),
                        })
                        .collect();
                    (name.clone(), fetched)
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(name, stored)| (name.clone(), stored.iter().map(|(&p, v)| fetched(p, v)).collect()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        OffsetFetchResponse { group_id: request.group_id.clone(), error_code: error_code::NONE, topics }
    }

    /// Deletes committed offsets of topics the group does not consume.
    pub fn offset_delete(&mut self, now_ms: i64, request: &OffsetDeleteRequest) -> (OffsetDeleteResponse, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let response = match self.groups.get_mut(&request.group_id) {
            _ if request.group_id.is_empty() => error_response(error_code::INVALID_GROUP_ID),
            None => error_response(error_code::GROUP_ID_NOT_FOUND),
            Some(group)
                if group.state != GroupState::Empty && !group.uses_consumer_protocol() && group.streams.is_none() =>
            {
                error_response(error_code::NON_EMPTY_GROUP)
            }
            Some(group) => {
                let mut deleted = Vec::new();
                let mut topics = Vec::with_capacity(request.topics.len());
                for (name, partitions) in &request.topics {
                    if group.is_subscribed_to_topic(name) {
                        topics.push((
                            name.clone(),
                            partitions.iter().map(|&p| (p, error_code::GROUP_SUBSCRIBED_TO_TOPIC)).collect(),
                        ));
                        continue;
                    }
                    for &partition in partitions {
                        if remove_offset(group, name, partition) {
                            deleted.push(TopicPartition { topic: name.clone(), partition });
                        }
                    }
                    topics.push((name.clone(), partitions.iter().map(|&p| (p, error_code::NONE)).collect()));
                }
                if !deleted.is_empty() {
                    effects.push(Effect::DeleteOffsets { group_id: request.group_id.clone(), partitions: deleted });
                }
                OffsetDeleteResponse { error_code: error_code::NONE, topics }
            }
        };
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        (response, effects)
    }

    /// Loads stored offsets (broker startup): each `(group id, offset)` row
    /// goes into the view, creating Empty groups as Kafka does on replay.
    pub fn load_offsets(&mut self, now_ms: i64, rows: impl IntoIterator<Item = (String, CommittedOffset)>) {
        let mut loaded = std::collections::BTreeSet::new();
        for (group_id, row) in rows {
            let group = self.groups.entry(group_id.clone()).or_insert_with(|| Group::new(&group_id, now_ms));
            let value = OffsetValue {
                offset: row.offset,
                leader_epoch: row.leader_epoch,
                metadata: row.metadata,
                commit_timestamp_ms: row.commit_timestamp_ms,
            };
            group.offsets.entry(row.topic).or_default().insert(row.partition, value);
            loaded.insert(group_id);
        }
        for group_id in loaded {
            self.touch(now_ms, &group_id);
        }
    }

    /// Replaces a group's offsets with what Postgres holds (after a failed
    /// write, so the view matches the durable state again).
    pub fn replace_group_offsets(&mut self, now_ms: i64, group_id: &str, rows: Vec<CommittedOffset>) {
        if let Some(group) = self.groups.get_mut(group_id) {
            group.offsets.clear();
        }
        self.load_offsets(now_ms, rows.into_iter().map(|row| (group_id.to_string(), row)));
        self.touch(now_ms, group_id);
    }

    /// A topic was deleted (the catalog drops its offset rows with it, as
    /// Kafka does): forget its offsets in every group. Only a possible
    /// `ScheduleDeadline` comes back (groups left with nothing are collected).
    pub fn forget_topic(&mut self, now_ms: i64, topic: &str) -> Vec<Effect> {
        let before = self.next_deadline();
        let touched: Vec<String> = self
            .groups
            .iter_mut()
            .filter_map(|(group_id, group)| group.offsets.remove(topic).map(|_| group_id.clone()))
            .collect();
        for group_id in &touched {
            self.touch(now_ms, group_id);
        }
        let mut effects = Vec::new();
        self.finish(before, &mut effects);
        effects
    }
}

/// Kafka's `ConsumerGroup.validateOffsetCommit`: the member's epoch is the
/// generation; a commit without one is accepted only while no member is in.
fn validate_consumer_commit(cg: &ConsumerGroup, request: &OffsetCommitRequest) -> Result<(), i16> {
    if request.generation_id < 0 && cg.members.is_empty() {
        return Ok(());
    }
    let member = cg.members.get(&request.member_id).ok_or(error_code::UNKNOWN_MEMBER_ID)?;
    if request.api_version < CONSUMER_PROTOCOL_COMMIT_VERSION_MIN {
        return Err(error_code::UNSUPPORTED_VERSION);
    }
    if request.generation_id != member.member_epoch {
        return Err(error_code::STALE_MEMBER_EPOCH);
    }
    Ok(())
}

/// Kafka's `StreamsGroup.validateOffsetCommit`, as for consumer groups: the
/// member's epoch is the generation. A commit at the member's previous epoch
/// is accepted too (Kafka 4.4 accepts an older epoch for the tasks the member
/// held then; this keeps the common case, a commit racing the heartbeat that
/// moved the epoch on).
fn validate_streams_commit(sg: &StreamsGroup, request: &OffsetCommitRequest) -> Result<(), i16> {
    if request.generation_id < 0 && sg.members.is_empty() {
        return Ok(());
    }
    let member = sg.members.get(&request.member_id).ok_or(error_code::UNKNOWN_MEMBER_ID)?;
    if request.api_version < CONSUMER_PROTOCOL_COMMIT_VERSION_MIN {
        return Err(error_code::UNSUPPORTED_VERSION);
    }
    let epoch = request.generation_id;
    if epoch != member.member_epoch && (epoch != member.previous_member_epoch || epoch > member.member_epoch) {
        return Err(error_code::STALE_MEMBER_EPOCH);
    }
    Ok(())
}

fn error_response(error_code: i16) -> OffsetDeleteResponse {
    OffsetDeleteResponse { error_code, topics: Vec::new() }
}

fn remove_offset(group: &mut Group, topic: &str, partition: i32) -> bool {
    let Some(stored) = group.offsets.get_mut(topic) else {
        return false;
    };
    let removed = stored.remove(&partition).is_some();
    if stored.is_empty() {
        group.offsets.remove(topic);
    }
    removed
}

fn committed(topic: &str, partition: i32, value: &OffsetValue) -> CommittedOffset {
    CommittedOffset {
        topic: topic.to_string(),
        partition,
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: value.metadata.clone(),
        commit_timestamp_ms: value.commit_timestamp_ms,
    }
}

fn fetched(partition: i32, value: &OffsetValue) -> FetchedOffset {
    FetchedOffset {
        partition,
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: value.metadata.clone(),
        error_code: error_code::NONE,
    }
}
