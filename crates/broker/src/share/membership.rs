//! Share-group membership (ShareGroupHeartbeat, ShareGroupDescribe): the
//! KIP-848 heartbeat without reconciliation. Pure: time and requests in,
//! answers out.
//!
//! As in Kafka's `GroupMetadataManager.shareGroupHeartbeat`: a member joins
//! with epoch 0 and a subscription, leaves with epoch -1; a join, a leave, a
//! changed subscription or a subscribed topic's new partitions bump the
//! **group epoch**, and the next heartbeat computes a new target assignment
//! for every member. Share groups revoke nothing (records, not partitions,
//! are what members hold exclusively), so a member moves to the new
//! assignment and epoch at once. A member whose session expires is removed.
//!
//! The assignment is the simple assignor's: each subscribed partition goes
//! to its topic's subscribers in turn; when a topic has fewer partitions
//! than subscribers, every subscriber gets one and partitions are shared.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafgres_wire::error_code;
use uuid::Uuid;

use crate::group::TopicLookup;

/// A member's assignment: topic id → partitions.
pub type ShareAssignment = BTreeMap<Uuid, BTreeSet<i32>>;

pub const ASSIGNOR_NAME: &str = "simple";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareHeartbeatAnswer {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<ShareAssignment>,
}

impl ShareHeartbeatAnswer {
    fn error(code: i16, message: impl Into<String>) -> ShareHeartbeatAnswer {
        ShareHeartbeatAnswer { error_code: code, error_message: Some(message.into()), ..Default::default() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub assignment: ShareAssignment,
    session_deadline_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The subscribed topics' (id, partition count) the assignment was made for.
    subscribed_topics: BTreeMap<String, (Uuid, i32)>,
}

impl ShareGroup {
    /// Kafka's share group states: Empty without members, else Stable
    /// (a share group has no reconciling state).
    pub fn state(&self) -> &'static str {
        self.group_state().as_str()
    }

    /// [`Self::state`] as the group coordinator's type (ListGroups, the
    /// Prometheus endpoint). DEAD is never reached: only DeleteGroups ends a
    /// share group.
    pub fn group_state(&self) -> crate::group::GroupState {
        if self.members.is_empty() {
            crate::group::GroupState::Empty
        } else {
            crate::group::GroupState::Stable
        }
    }
}

/// Every share group's membership.
#[derive(Debug, Default)]
pub struct ShareMembership {
    groups: HashMap<String, ShareGroup>,
}

/// A member removed by a leave or a session expiry: its records are released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepartedMember {
    pub group_id: String,
    pub member_id: String,
}

impl ShareMembership {
    pub fn group(&self, group_id: &str) -> Option<&ShareGroup> {
        self.groups.get(group_id)
    }

    pub fn group_ids(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// Forgets an empty group (DeleteGroups). NON_EMPTY_GROUP while it has members.
    pub fn remove_group(&mut self, group_id: &str) -> Result<(), i16> {
        match self.groups.get(group_id) {
            Some(g) if !g.members.is_empty() => Err(error_code::NON_EMPTY_GROUP),
            _ => {
                self.groups.remove(group_id);
                Ok(())
            }
        }
    }

    /// Whether `member_id` is a member of `group_id` now.
    pub fn is_member(&self, group_id: &str, member_id: &str) -> bool {
        self.groups.get(group_id).is_some_and(|g| g.members.contains_key(member_id))
    }

    /// One ShareGroupHeartbeat. Returns the answer and the member that left, if one did.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        request: ShareHeartbeat,
        topics: &dyn TopicLookup,
        config: &super::ShareConfig,
    ) -> (ShareHeartbeatAnswer, Option<DepartedMember>) {
        // Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, with its messages.
        if request.group_id.is_empty() {
            return (ShareHeartbeatAnswer::error(error_code::INVALID_REQUEST, "GroupId can't be empty."), None);
        }
        if request.member_id.trim().is_empty() {
            return (ShareHeartbeatAnswer::error(error_code::INVALID_REQUEST, "MemberId can't be empty."), None);
        }
        if request.member_epoch < -1 {
            return (ShareHeartbeatAnswer::error(error_code::INVALID_REQUEST, "MemberEpoch is invalid."), None);
        }
        if request.member_epoch == 0 && request.subscribed_topic_names.as_ref().is_none_or(|t| t.is_empty()) {
            return (
                ShareHeartbeatAnswer::error(
                    error_code::INVALID_REQUEST,
                    "SubscribedTopicNames must be set in first request.",
                ),
                None,
            );
        }
        let interval = config.heartbeat_interval_ms;
        if request.member_epoch == -1 {
            return self.leave(&request.group_id, &request.member_id, interval);
        }
        let group = self.groups.entry(request.group_id.clone()).or_default();
        let known = group.members.contains_key(&request.member_id);
        if request.member_epoch == 0 {
            if !known && group.members.len() >= config.group_members_max {
                return (
                    ShareHeartbeatAnswer::error(
                        error_code::GROUP_MAX_SIZE_REACHED,
                        format!(
                            "The share group has reached its maximum capacity of {} members.",
                            config.group_members_max
                        ),
                    ),
                    None,
                );
            }
        } else {
            let Some(member) = group.members.get(&request.member_id) else {
                return (
                    ShareHeartbeatAnswer::error(
                        error_code::UNKNOWN_MEMBER_ID,
                        format!("Member {} is not a member of group {}.", request.member_id, request.group_id),
                    ),
                    None,
                );
            };
            if request.member_epoch != member.member_epoch {
                return (
                    ShareHeartbeatAnswer::error(
                        error_code::FENCED_MEMBER_EPOCH,
                        format!(
                            "The share group member has a smaller member epoch ({}) than the one known by the group \
                             coordinator ({}). The member must abandon all its partitions and rejoin.",
                            request.member_epoch, member.member_epoch
                        ),
                    ),
                    None,
                );
            }
        }
        let mut bump = !known;
        let member = group.members.entry(request.member_id.clone()).or_insert_with(|| ShareMember {
            member_id: request.member_id.clone(),
            member_epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            assignment: ShareAssignment::new(),
            session_deadline_ms: 0,
        });
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        if request.rack_id.is_some() {
            member.rack_id = request.rack_id;
        }
        if let Some(mut names) = request.subscribed_topic_names {
            names.sort();
            names.dedup();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                bump = true;
            }
        }
        member.session_deadline_ms = now_ms + i64::from(config.session_timeout_ms);
        let previous_epoch = if request.member_epoch == 0 { 0 } else { member.member_epoch };
        // The subscribed topics' partitions changed (created, grown, deleted)?
        let subscribed = subscribed_topics(group, topics);
        if subscribed != group.subscribed_topics {
            group.subscribed_topics = subscribed;
            bump = true;
        }
        if bump {
            group.group_epoch += 1;
        }
        if group.assignment_epoch < group.group_epoch {
            assign(group);
            group.assignment_epoch = group.group_epoch;
        }
        let Some(member) = group.members.get_mut(&request.member_id) else {
            return (ShareHeartbeatAnswer::error(error_code::UNKNOWN_MEMBER_ID, "member vanished"), None);
        };
        member.member_epoch = group.assignment_epoch;
        let answer = ShareHeartbeatAnswer {
            error_code: error_code::NONE,
            error_message: None,
            member_id: Some(member.member_id.clone()),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: interval,
            // Sent when it may have changed, as Kafka sends it with a new epoch.
            assignment: (member.member_epoch != previous_epoch).then(|| member.assignment.clone()),
        };
        (answer, None)
    }

    fn leave(
        &mut self,
        group_id: &str,
        member_id: &str,
        interval: i32,
    ) -> (ShareHeartbeatAnswer, Option<DepartedMember>) {
        let removed = self.remove_member(group_id, member_id);
        if !removed {
            return (
                ShareHeartbeatAnswer::error(
                    error_code::UNKNOWN_MEMBER_ID,
                    format!("Member {member_id} is not a member of group {group_id}."),
                ),
                None,
            );
        }
        let answer = ShareHeartbeatAnswer {
            member_id: Some(member_id.to_owned()),
            member_epoch: -1,
            heartbeat_interval_ms: interval,
            ..Default::default()
        };
        (answer, Some(DepartedMember { group_id: group_id.to_owned(), member_id: member_id.to_owned() }))
    }

    fn remove_member(&mut self, group_id: &str, member_id: &str) -> bool {
        let Some(group) = self.groups.get_mut(group_id) else { return false };
        if group.members.remove(member_id).is_none() {
            return false;
        }
        group.group_epoch += 1;
        true
    }

    /// Removes the members whose session expired at `now_ms`.
    pub fn expire_sessions(&mut self, now_ms: i64) -> Vec<DepartedMember> {
        let mut expired = Vec::new();
        for (group_id, group) in &self.groups {
            for member in group.members.values().filter(|m| m.session_deadline_ms <= now_ms) {
                expired.push(DepartedMember { group_id: group_id.clone(), member_id: member.member_id.clone() });
            }
        }
        for d in &expired {
            log::info!("share group {}: member {} left (session timeout)", d.group_id, d.member_id);
            self.remove_member(&d.group_id, &d.member_id);
        }
        expired
    }

    /// The earliest session deadline of any member.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups.values().flat_map(|g| g.members.values()).map(|m| m.session_deadline_ms).min()
    }
}

fn subscribed_topics(group: &ShareGroup, topics: &dyn TopicLookup) -> BTreeMap<String, (Uuid, i32)> {
    let names: BTreeSet<&String> = group.members.values().flat_map(|m| &m.subscribed_topic_names).collect();
    names.into_iter().filter_map(|name| topics.topic(name).map(|t| (name.clone(), t))).collect()
}

/// The simple assignor: per topic, partitions go to its subscribers in
/// turn; with more subscribers than partitions, each subscriber gets one
/// partition and partitions are shared. Members in id order, so the answer
/// is the same for the same group.
fn assign(group: &mut ShareGroup) {
    for member in group.members.values_mut() {
        member.assignment.clear();
    }
    let mut turn = 0usize;
    for (name, (topic_id, partition_count)) in &group.subscribed_topics {
        let subscribers: Vec<String> = group
            .members
            .values()
            .filter(|m| m.subscribed_topic_names.binary_search(name).is_ok())
            .map(|m| m.member_id.clone())
            .collect();
        let partitions = (*partition_count).max(0) as usize;
        if subscribers.is_empty() || partitions == 0 {
            continue;
        }
        let pairs: Vec<(usize, usize)> = if partitions >= subscribers.len() {
            (0..partitions).map(|p| (p, (p + turn) % subscribers.len())).collect()
        } else {
            (0..subscribers.len()).map(|s| ((s + turn) % partitions, s)).collect()
        };
        for (partition, subscriber) in pairs {
            if let Some(m) = group.members.get_mut(&subscribers[subscriber]) {
                m.assignment.entry(*topic_id).or_default().insert(partition as i32);
            }
        }
        turn += partitions;
    }
}
