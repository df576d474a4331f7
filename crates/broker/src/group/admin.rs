//! ListGroups, DescribeGroups and DeleteGroups.

use kafgres_wire::error_code;

use super::coordinator::GroupCoordinator;
use super::model::Group;
use super::types::{DescribedGroup, DescribedMember, Effect, GroupState, ListedGroup};

/// ListGroups' group types (KIP-848).
const CLASSIC_GROUP_TYPE: &str = "classic";
const CONSUMER_GROUP_TYPE: &str = "consumer";
const STREAMS_GROUP_TYPE: &str = "streams";
/// DescribeGroups v6+ reports unknown groups as GROUP_ID_NOT_FOUND (KIP-1043).
const GROUP_ID_NOT_FOUND_VERSION_MIN: i16 = 6;

impl GroupCoordinator {
    /// Groups in id order. Filters match case-insensitively; an empty filter
    /// matches everything (ListGroups v4 states, v5 types).
    pub fn list_groups(&self, states_filter: &[String], types_filter: &[String]) -> Vec<ListedGroup> {
        let states: Vec<String> = states_filter.iter().map(|s| s.trim().to_lowercase()).collect();
        let types: Vec<String> = types_filter.iter().map(|t| t.trim().to_lowercase()).collect();
        self.groups
            .values()
            .map(|g| (g, group_type(g)))
            .filter(|(g, _)| states.is_empty() || states.contains(&g.state.as_str().to_lowercase()))
            .filter(|(_, group_type)| types.is_empty() || types.iter().any(|t| t == group_type))
            .map(|(g, group_type)| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
                group_type,
            })
            .collect()
    }

    /// One entry per requested id, in request order. Member metadata and
    /// assignments are shown only while the group is Stable, as in Kafka.
    pub fn describe_groups(&self, api_version: i16, group_ids: &[String]) -> Vec<DescribedGroup> {
        group_ids
            .iter()
            .map(|group_id| match self.groups.get(group_id) {
                // Consumer-protocol groups are described by ConsumerGroupDescribe.
                Some(group) if group.consumer.is_none() && group.streams.is_none() => describe(group),
                other => DescribedGroup {
                    error_code: if api_version >= GROUP_ID_NOT_FOUND_VERSION_MIN {
                        error_code::GROUP_ID_NOT_FOUND
                    } else {
                        error_code::NONE
                    },
                    // Kafka's messages (`GroupMetadataManager.classicGroup`).
                    error_message: (api_version >= GROUP_ID_NOT_FOUND_VERSION_MIN).then(|| match other {
                        Some(_) => format!("Group {group_id} is not a classic group."),
                        None => format!("Group {group_id} not found."),
                    }),
                    group_id: group_id.clone(),
                    state: GroupState::Dead,
                    protocol_type: String::new(),
                    protocol_data: String::new(),
                    members: Vec::new(),
                },
            })
            .collect()
    }

    /// Deletes Empty groups with their offsets (`Effect::DeleteGroup` each;
    /// answer once durable). NON_EMPTY_GROUP while members remain.
    pub fn delete_groups(&mut self, now_ms: i64, group_ids: &[String]) -> (Vec<(String, i16)>, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let mut results = Vec::with_capacity(group_ids.len());
        for group_id in group_ids {
            let error_code = match self.groups.get(group_id).map(|g| g.state) {
                None | Some(GroupState::Dead) => error_code::GROUP_ID_NOT_FOUND,
                Some(GroupState::Empty) => {
                    self.groups.remove(group_id);
                    self.timers.cancel_group(group_id);
                    effects.push(Effect::DeleteGroup { group_id: group_id.clone() });
                    error_code::NONE
                }
                Some(_) => error_code::NON_EMPTY_GROUP,
            };
            results.push((group_id.clone(), error_code));
            self.touch(now_ms, group_id);
        }
        self.finish(before, &mut effects);
        (results, effects)
    }
}

fn group_type(group: &Group) -> &'static str {
    if group.consumer.is_some() {
        CONSUMER_GROUP_TYPE
    } else if group.streams.is_some() {
        STREAMS_GROUP_TYPE
    } else {
        CLASSIC_GROUP_TYPE
    }
}

fn describe(group: &Group) -> DescribedGroup {
    let stable_protocol = match group.state {
        GroupState::Stable => group.protocol_name.clone(),
        _ => None,
    };
    let members = group
        .members
        .iter()
        .map(|m| DescribedMember {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            metadata: stable_protocol.as_deref().map(|p| m.metadata(p)).unwrap_or_default(),
            assignment: if stable_protocol.is_some() { m.assignment.clone() } else { Default::default() },
        })
        .collect();
    DescribedGroup {
        error_message: None,
        error_code: error_code::NONE,
        group_id: group.group_id.clone(),
        state: group.state,
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        protocol_data: stable_protocol.unwrap_or_default(),
        members,
    }
}
