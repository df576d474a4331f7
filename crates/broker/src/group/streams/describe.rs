//! StreamsGroupDescribe.

use kafgres_wire::error_code;

use super::types::{DescribedStreamsGroup, DescribedStreamsMember, DescribedSubtopology, StreamsTopicInfo};
use crate::group::coordinator::GroupCoordinator;

impl GroupCoordinator {
    /// One entry per requested id, in request order; groups of another type
    /// are GROUP_ID_NOT_FOUND, as in Kafka.
    pub fn streams_group_describe(&self, group_ids: &[String]) -> Vec<DescribedStreamsGroup> {
        group_ids
            .iter()
            .map(|group_id| {
                let not_found = |message: String| DescribedStreamsGroup {
                    error_code: error_code::GROUP_ID_NOT_FOUND,
                    error_message: Some(message),
                    group_id: group_id.clone(),
                    group_state: String::new(),
                    group_epoch: 0,
                    assignment_epoch: 0,
                    topology: None,
                    members: Vec::new(),
                };
                let Some(group) = self.groups.get(group_id) else {
                    return not_found(format!("Group {group_id} not found."));
                };
                let Some(sg) = group.streams.as_deref() else {
                    return not_found(format!("Group {group_id} is not a streams group."));
                };
                let topology = sg.topology.as_ref().map(|topology| {
                    let configured = sg.configured.subtopologies.as_ref().map(|configured| {
                        topology
                            .subtopologies
                            .iter()
                            .map(|s| {
                                let decided = configured.get(&s.subtopology_id);
                                let with_count = |t: &StreamsTopicInfo| StreamsTopicInfo {
                                    partitions: decided
                                        .and_then(|d| d.internal_partitions.get(&t.name).copied())
                                        .unwrap_or(t.partitions),
                                    ..t.clone()
                                };
                                DescribedSubtopology {
                                    subtopology_id: s.subtopology_id.clone(),
                                    source_topics: s.source_topics.clone(),
                                    repartition_sink_topics: s.repartition_sink_topics.clone(),
                                    state_changelog_topics: s.state_changelog_topics.iter().map(with_count).collect(),
                                    repartition_source_topics: s
                                        .repartition_source_topics
                                        .iter()
                                        .map(with_count)
                                        .collect(),
                                }
                            })
                            .collect()
                    });
                    (topology.epoch, configured)
                });
                let members = sg
                    .members
                    .values()
                    .map(|m| DescribedStreamsMember {
                        member_id: m.member_id.clone(),
                        member_epoch: m.member_epoch,
                        instance_id: m.instance_id.clone(),
                        rack_id: m.rack_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        topology_epoch: m.topology_epoch,
                        process_id: m.process_id.clone(),
                        user_endpoint: m.user_endpoint.clone(),
                        client_tags: m.client_tags.clone(),
                        assignment: m.assigned.clone(),
                        target_assignment: sg.target.get(&m.member_id).cloned().unwrap_or_default(),
                    })
                    .collect();
                DescribedStreamsGroup {
                    error_code: error_code::NONE,
                    error_message: None,
                    group_id: group_id.clone(),
                    group_state: sg.state().as_str().to_string(),
                    group_epoch: sg.group_epoch,
                    assignment_epoch: sg.assignment_epoch,
                    topology,
                    members,
                }
            })
            .collect()
    }
}
