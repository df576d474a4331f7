//! One group's state and its members: the data and the small rules Kafka's
//! `ClassicGroup` keeps (leader choice, protocol support and votes, member
//! validation, generations). No timers and no effects here.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafgres_wire::error_code;

use super::consumer::model::ConsumerGroup;
use super::streams::model::StreamsGroup;
use super::types::{GroupState, JoinGroupMember, Protocol, Ticket, TopicPartition};

/// The protocol type of Kafka consumers.
pub(super) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

#[derive(Debug, Clone)]
pub(super) struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    /// Parked JoinGroup requests (normally at most one; a client repeating
    /// its JoinGroup is bounded by the broker's in-flight request limit).
    pub join_tickets: Vec<Ticket>,
    /// Parked SyncGroup requests (normally at most one).
    pub sync_tickets: Vec<Ticket>,
    /// Joined but not yet through a completed join phase.
    pub is_new: bool,
}

impl Member {
    pub fn awaiting_join(&self) -> bool {
        !self.join_tickets.is_empty()
    }

    pub fn awaiting_sync(&self) -> bool {
        !self.sync_tickets.is_empty()
    }

    pub fn supports(&self, protocol_name: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol_name)
    }

    pub fn metadata(&self, protocol_name: &str) -> Bytes {
        self.protocols.iter().find(|p| p.name == protocol_name).map(|p| p.metadata.clone()).unwrap_or_default()
    }

    /// Kafka's `hasSatisfiedHeartbeat`: a member waiting in a rebalance is
    /// kept alive by it, except a new member, whose parked join may expire.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join() || self.awaiting_sync())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Debug)]
pub(super) struct Group {
    pub group_id: String,
    pub state: GroupState,
    pub previous_state: GroupState,
    pub state_since_ms: i64,
    pub generation_id: i32,
    /// Set by the first member to join; kept while the group is Empty.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// In join order; the first member to join an empty group leads.
    pub members: Vec<Member>,
    /// group.instance.id → current member id.
    pub static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet rejoined.
    pub pending_join: BTreeSet<String>,
    /// Members answered in the join phase that have not sent SyncGroup.
    pub pending_sync: BTreeSet<String>,
    /// A member joined during the initial rebalance delay.
    pub new_member_added: bool,
    /// `None`: unknown (not the consumer protocol, or unparsable metadata).
    pub subscribed_topics: Option<BTreeSet<String>>,
    pub offsets: BTreeMap<String, BTreeMap<i32, OffsetValue>>,
    /// `Some` for a group of the consumer protocol (KIP-848); its classic
    /// member fields stay empty.
    pub consumer: Option<Box<ConsumerGroup>>,
    /// `Some` for a group of the streams protocol (KIP-1071).
    pub streams: Option<Box<StreamsGroup>>,
}

impl Group {
    pub fn new(group_id: &str, now_ms: i64) -> Group {
        Group {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_since_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            static_members: BTreeMap::new(),
            pending_join: BTreeSet::new(),
            pending_sync: BTreeSet::new(),
            new_member_added: false,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            consumer: None,
            streams: None,
        }
    }

    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    pub fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.member(member_id).is_some()
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn leader_or_empty(&self) -> String {
        self.leader_id.clone().unwrap_or_default()
    }

    /// When the first of this group's offsets expires (KIP-211), if it is an
    /// Empty group holding offsets: a group that had members (it has a
    /// protocol type) loses them all `retention_ms` after it became Empty, a
    /// group that never had members loses each `retention_ms` after its commit.
    pub fn offsets_expire_at(&self, retention_ms: i64) -> Option<i64> {
        if self.state != GroupState::Empty || !self.members.is_empty() || self.offsets.is_empty() {
            return None;
        }
        let base = if self.protocol_type.is_some() {
            self.state_since_ms
        } else {
            self.offsets.values().flat_map(|p| p.values()).map(|v| v.commit_timestamp_ms).min()?
        };
        Some(base.saturating_add(retention_ms.max(0)))
    }

    /// Removes and returns the offsets past retention at `now_ms`.
    pub fn take_expired_offsets(&mut self, now_ms: i64, retention_ms: i64) -> Vec<TopicPartition> {
        if self.state != GroupState::Empty || !self.members.is_empty() {
            return Vec::new();
        }
        let group_expired = self.protocol_type.is_some() && now_ms >= self.state_since_ms.saturating_add(retention_ms);
        let mut expired = Vec::new();
        for (topic, partitions) in self.offsets.iter_mut() {
            partitions.retain(|&partition, value| {
                let gone = group_expired
                    || (self.protocol_type.is_none()
                        && now_ms >= value.commit_timestamp_ms.saturating_add(retention_ms));
                if gone {
                    expired.push(TopicPartition { topic: topic.clone(), partition });
                }
                !gone
            });
        }
        self.offsets.retain(|_, partitions| !partitions.is_empty());
        expired
    }

    /// Nothing left to keep: no members, no pending members, no offsets.
    pub fn is_collectable(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_join.is_empty()
            && self.offsets.is_empty()
    }

    pub fn add(&mut self, member: Member) {
        if let Some(instance_id) = &member.group_instance_id {
            self.static_members.insert(instance_id.clone(), member.member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_join.remove(&member.member_id);
        self.members.push(member);
    }

    /// Removes a member (or a pending member) and moves the leadership to the
    /// first remaining member if it led. Parked requests are the caller's.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let removed = match self.members.iter().position(|m| m.member_id == member_id) {
            Some(index) => Some(self.members.remove(index)),
            None => None,
        };
        if let Some(instance_id) = removed.as_ref().and_then(|m| m.group_instance_id.as_ref()) {
            self.static_members.remove(instance_id);
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        self.pending_join.remove(member_id);
        self.pending_sync.remove(member_id);
        removed
    }

    pub fn awaiting_join_count(&self) -> usize {
        self.members.iter().filter(|m| m.awaiting_join()).count()
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.awaiting_join_count() == self.members.len() && self.pending_join.is_empty()
    }

    /// The largest rebalance timeout of the members, never negative.
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members.iter().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0).max(0)
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty
    /// offer; otherwise the type must match and one of the offered protocols
    /// must be supported by every current member.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| self.members.iter().all(|m| m.supports(&p.name)))
    }

    /// Each member votes for its most preferred protocol that every member
    /// supports; the most voted wins, ties going to the leader's preference.
    pub fn select_protocol(&self) -> Option<String> {
        let reference = self.leader_id.as_deref().and_then(|id| self.member(id)).or(self.members.first())?;
        let candidates: Vec<&str> = reference
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in &self.members {
            if let Some(vote) = member.protocols.iter().find(|p| candidates.contains(&p.name.as_str())) {
                *votes.entry(vote.name.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for name in candidates {
            let count = votes.get(name).copied().unwrap_or(0);
            if best.is_none_or(|(_, best_count)| count > best_count) {
                best = Some((name, count));
            }
        }
        best.map(|(name, _)| name.to_string())
    }

    /// Kafka's `validateMember`: the instance id must map to this member id
    /// (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if unknown), and the
    /// member must exist.
    pub fn validate_member(&self, member_id: &str, group_instance_id: Option<&str>) -> Result<(), i16> {
        if let Some(instance_id) = group_instance_id {
            match self.static_members.get(instance_id) {
                None => return Err(error_code::UNKNOWN_MEMBER_ID),
                Some(existing) if existing != member_id => return Err(error_code::FENCED_INSTANCE_ID),
                Some(_) => {}
            }
        }
        if self.has_member(member_id) {
            Ok(())
        } else {
            Err(error_code::UNKNOWN_MEMBER_ID)
        }
    }

    /// Keeps the leader if it rejoined, else hands leadership to the first
    /// member that did. False when no member rejoined (or there is none).
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.as_deref().and_then(|id| self.member(id)) else {
            return false;
        };
        if leader.awaiting_join() {
            return true;
        }
        match self.members.iter().find(|m| m.awaiting_join()) {
            Some(joined) => {
                self.leader_id = Some(joined.member_id.clone());
                true
            }
            None => false,
        }
    }

    pub fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = state;
        self.state_since_ms = now_ms;
    }

    pub fn init_next_generation(&mut self, now_ms: i64) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition(GroupState::CompletingRebalance, now_ms);
        }
        self.pending_sync.clear();
    }

    /// The member list the leader receives: each member's metadata for the
    /// selected protocol.
    pub fn join_members(&self) -> Vec<JoinGroupMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        self.members
            .iter()
            .map(|m| JoinGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    pub fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// Kafka's rule: when the subscriptions are unknown, a consumer-protocol
    /// group counts as subscribed to everything.
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        if let Some(sg) = self.streams.as_deref() {
            // Kafka's `StreamsGroup.isSubscribedToTopic`: the topology's sources.
            return !sg.members.is_empty() && sg.topology.as_ref().is_some_and(|t| t.reads(topic));
        }
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for member in &self.members {
            topics.extend(subscription_topics(&member.metadata(protocol))?);
        }
        Some(topics)
    }
}

/// The topics of a ConsumerProtocolSubscription, read with the v0 layout that
/// prefixes every version: version i16, topics [i16-length string], user data
/// (nullable i32-length bytes). `None` when it does not parse.
pub(super) fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata;
    let version = i16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take(&mut rest, 4)?.try_into().ok()?);
    // Each topic takes at least its 2-byte length: bound the count first.
    if count < 0 || count as usize > rest.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?);
        let name = take(&mut rest, usize::try_from(len).ok()?)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    let user_data_len = i32::from_be_bytes(take(&mut rest, 4)?.try_into().ok()?);
    if user_data_len >= 0 {
        take(&mut rest, user_data_len as usize)?;
    }
    Some(topics)
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if rest.len() < n {
        return None;
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Some(head)
}
