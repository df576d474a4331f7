//! ConsumerGroupDescribe.

use kafgres_wire::error_code;

use super::model::ConsumerMember;
use super::types::{Assignment, DescribedConsumerGroup, DescribedConsumerMember, NamedPartitions, TopicLookup};
use crate::group::coordinator::GroupCoordinator;

impl GroupCoordinator {
    /// One entry per requested id, in request order. Classic groups are
    /// GROUP_ID_NOT_FOUND here (clients then ask DescribeGroups), as in Kafka.
    pub fn consumer_group_describe(
        &self,
        group_ids: &[String],
        topics: &dyn TopicLookup,
    ) -> Vec<DescribedConsumerGroup> {
        group_ids
            .iter()
            .map(|group_id| {
                let not_found = |message: String| DescribedConsumerGroup {
                    error_code: error_code::GROUP_ID_NOT_FOUND,
                    error_message: Some(message),
                    group_id: group_id.clone(),
                    group_state: String::new(),
                    group_epoch: 0,
                    assignment_epoch: 0,
                    assignor_name: String::new(),
                    members: Vec::new(),
                };
                let Some(group) = self.groups.get(group_id) else {
                    return not_found(format!("Group {group_id} not found."));
                };
                let Some(cg) = group.consumer.as_deref() else {
                    return not_found(format!("Group {group_id} is not a consumer group."));
                };
                let members =
                    cg.members.values().map(|m| describe_member(m, cg.target.get(&m.member_id), topics)).collect();
                DescribedConsumerGroup {
                    error_code: error_code::NONE,
                    error_message: None,
                    group_id: group_id.clone(),
                    group_state: cg.state().as_str().to_string(),
                    group_epoch: cg.group_epoch,
                    assignment_epoch: cg.assignment_epoch,
                    assignor_name: cg.preferred_assignor(),
                    members,
                }
            })
            .collect()
    }
}

fn describe_member(
    member: &ConsumerMember,
    target: Option<&Assignment>,
    topics: &dyn TopicLookup,
) -> DescribedConsumerMember {
    DescribedConsumerMember {
        member_id: member.member_id.clone(),
        instance_id: member.instance_id.clone(),
        rack_id: member.rack_id.clone(),
        member_epoch: member.member_epoch,
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        subscribed_topic_names: member.subscribed_topic_names.clone(),
        subscribed_topic_regex: member.subscribed_topic_regex.clone(),
        assignment: named(&member.assigned, topics),
        target_assignment: target.map(|t| named(t, topics)).unwrap_or_default(),
    }
}

/// Topics that no longer exist are left out.
fn named(assignment: &Assignment, topics: &dyn TopicLookup) -> Vec<NamedPartitions> {
    let mut out: Vec<NamedPartitions> = assignment
        .iter()
        .filter_map(|(id, partitions)| {
            Some(NamedPartitions {
                topic_id: *id,
                topic_name: topics.topic_name(*id)?,
                partitions: partitions.iter().copied().collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.topic_name.cmp(&b.topic_name));
    out
}
