//! Moving one member from its current assignment towards its target, Kafka's
//! `CurrentAssignmentBuilder`: revoke first, then take what is free.

use super::model::{intersects, ConsumerGroup, ConsumerMember, MemberState};
use super::types::Assignment;

/// The member's next state given the group's target for it. `owned` is what
/// the heartbeat says the member owns (`None`: unchanged since the last one,
/// so it is assumed to still own everything it was given).
pub(in crate::group) fn reconcile(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
) -> ConsumerMember {
    match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::Stable | MemberState::UnreleasedPartitions => {
            next_assignment(group, member, member.member_epoch, target_epoch, target, owned)
        }
        MemberState::UnrevokedPartitions => {
            let still_owns = owned.is_none_or(|owned| intersects(&member.pending_revocation, owned));
            if still_owns {
                return member.clone();
            }
            let epoch = (member.member_epoch + 1).min(target_epoch);
            next_assignment(group, member, epoch, target_epoch, target, owned)
        }
    }
}

fn next_assignment(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    revoking_epoch: i32,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
) -> ConsumerMember {
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut has_unreleased = false;
    let topics = target.keys().chain(member.assigned.keys()).copied().collect::<std::collections::BTreeSet<_>>();
    for topic_id in topics {
        let wanted = target.get(&topic_id).cloned().unwrap_or_default();
        let current = member.assigned.get(&topic_id).cloned().unwrap_or_default();
        let kept: std::collections::BTreeSet<i32> = current.intersection(&wanted).copied().collect();
        let revoke: std::collections::BTreeSet<i32> = current.difference(&kept).copied().collect();
        let mut now_assigned = kept;
        for &partition in wanted.difference(&current) {
            if group.owned_by_other(&member.member_id, topic_id, partition) {
                has_unreleased = true;
            } else {
                now_assigned.insert(partition);
            }
        }
        if !now_assigned.is_empty() {
            assigned.insert(topic_id, now_assigned);
        }
        if !revoke.is_empty() {
            revoking.insert(topic_id, revoke);
        }
    }
    let mut next = member.clone();
    let must_revoke = !revoking.is_empty() && owned.is_none_or(|owned| intersects(&revoking, owned));
    let (epoch, state, pending) = if must_revoke {
        // Only what it keeps is sent; it acknowledges the revocation by no
        // longer listing the rest.
        let kept_only = assigned
            .iter()
            .filter_map(|(topic, partitions)| {
                let current = member.assigned.get(topic)?;
                let kept: std::collections::BTreeSet<i32> = partitions.intersection(current).copied().collect();
                (!kept.is_empty()).then_some((*topic, kept))
            })
            .collect();
        assigned = kept_only;
        (revoking_epoch, MemberState::UnrevokedPartitions, revoking)
    } else if has_unreleased {
        (target_epoch, MemberState::UnreleasedPartitions, Assignment::new())
    } else {
        (target_epoch, MemberState::Stable, Assignment::new())
    };
    if epoch != next.member_epoch {
        next.previous_member_epoch = next.member_epoch;
        next.member_epoch = epoch;
    }
    next.state = state;
    next.assigned = assigned;
    next.pending_revocation = pending;
    next
}
