//! Membership as the coordinator-driven protocols share it: KIP-848's
//! consumer groups ([`super::consumer`]) and KIP-1071's streams groups
//! ([`super::streams`]). Both keep members by id and static members by
//! instance id, give each member a target, and fence a member whose session
//! or revocation deadline passes; what they assign (partitions or tasks) and
//! what a member declares (a subscription or a topology) stay in their own
//! modules. This module owns the rules that must not drift apart between
//! the two: the capacity check, a static member's return and leave, leaving,
//! fencing, and the member deadlines. It never touches classic groups.

use std::collections::BTreeMap;

use kafgres_wire::error_code;

use super::consumer::model::MemberState;
use super::consumer::types::LEAVE_STATIC_MEMBER_EPOCH;
use super::coordinator::Ctx;
use super::model::Group;
use super::timers::{TimerAction, TimerKind};
use super::types::GroupState;

/// A heartbeat's refusal: the error code and message of the answer.
pub(crate) type Refusal = (i16, String);

pub(crate) fn refuse<T>(code: i16, message: impl Into<String>) -> Result<T, Refusal> {
    Err((code, message.into()))
}

/// A member of a coordinator-driven group.
pub(in crate::group) trait GroupMember: Clone {
    fn member_id(&self) -> &str;
    fn member_epoch(&self) -> i32;
    fn reconciliation_state(&self) -> MemberState;
    fn rebalance_timeout_ms(&self) -> i32;
    /// Its epoch and the one before it, to be changed together.
    fn epochs_mut(&mut self) -> (&mut i32, &mut i32);
    fn set_member_id(&mut self, member_id: &str);
}

/// Implements [`GroupMember`] for a member struct with Kafka's field names
/// (`member_id`, `member_epoch`, `previous_member_epoch`, `state`,
/// `rebalance_timeout_ms`), as both kinds of member have.
macro_rules! impl_group_member {
    ($member:ty) => {
        impl $crate::group::membership::GroupMember for $member {
            fn member_id(&self) -> &str {
                &self.member_id
            }
            fn member_epoch(&self) -> i32 {
                self.member_epoch
            }
            fn reconciliation_state(&self) -> $crate::group::consumer::model::MemberState {
                self.state
            }
            fn rebalance_timeout_ms(&self) -> i32 {
                self.rebalance_timeout_ms
            }
            fn epochs_mut(&mut self) -> (&mut i32, &mut i32) {
                (&mut self.member_epoch, &mut self.previous_member_epoch)
            }
            fn set_member_id(&mut self, member_id: &str) {
                member_id.clone_into(&mut self.member_id);
            }
        }
    };
}
pub(in crate::group) use impl_group_member;

/// The member table of a consumer or streams group, as the shared rules see it.
pub(in crate::group) trait MemberTable {
    type Member: GroupMember;
    type Target;
    /// How refusals name the group: "consumer" or "streams".
    const KIND: &'static str;

    /// This kind of group inside `group`, if `group` is one.
    fn of(group: &Group) -> Option<&Self>;
    fn of_mut(group: &mut Group) -> Option<&mut Self>;
    fn members(&self) -> &BTreeMap<String, Self::Member>;
    fn static_members(&self) -> &BTreeMap<String, String>;
    fn targets_mut(&mut self) -> &mut BTreeMap<String, Self::Target>;
    /// Stores a member, keeping the group's indexes right.
    fn put_member(&mut self, member: Self::Member);
    /// Removes a member with its target and its instance id.
    fn remove_member(&mut self, member_id: &str) -> Option<Self::Member>;
    /// Kafka's `maybeUpdateGroupState` for this kind of group.
    fn state(&self) -> GroupState;
    /// A member was fenced: the group epoch moves so the next heartbeat
    /// computes a new target; the group forgets what only that member needed.
    fn after_fence(&mut self);
}

/// GROUP_MAX_SIZE_REACHED when a new member would pass `members_max`.
pub(in crate::group) fn ensure_room<G: MemberTable>(table: &G, members_max: usize) -> Result<(), Refusal> {
    if table.members().len() >= members_max {
        return refuse(
            error_code::GROUP_MAX_SIZE_REACHED,
            format!("The {} group has reached its maximum capacity of {members_max} members.", G::KIND),
        );
    }
    Ok(())
}

/// A static member that left (epoch -2) comes back under a new member id:
/// it takes over the old member's assignment and target, so the group does
/// not rebalance. Returns the member as stored, at epoch 0.
pub(in crate::group) fn take_over_static<G: MemberTable>(table: &mut G, old: &G::Member, member_id: &str) -> G::Member {
    let mut member = old.clone();
    member.set_member_id(member_id);
    let (epoch, previous) = member.epochs_mut();
    (*epoch, *previous) = (0, 0);
    let target = table.targets_mut().remove(old.member_id());
    table.remove_member(old.member_id());
    if let Some(target) = target {
        table.targets_mut().insert(member_id.to_owned(), target);
    }
    table.put_member(member.clone());
    member
}

/// The member a leaving heartbeat names: through its instance id when static
/// (fenced if another member holds that id now), else its member id, which
/// must be a member (`is_member`).
pub(in crate::group) fn leaving_member_id(
    static_members: &BTreeMap<String, String>,
    is_member: bool,
    instance_id: Option<&str>,
    member_id: &str,
    group_id: &str,
) -> Result<String, Refusal> {
    match instance_id {
        Some(instance_id) => {
            let Some(current) = static_members.get(instance_id) else {
                return refuse(error_code::UNKNOWN_MEMBER_ID, format!("Instance id {instance_id} is unknown."));
            };
            if current != member_id {
                return refuse(
                    error_code::FENCED_INSTANCE_ID,
                    format!("Static member {member_id} with instance id {instance_id} was fenced by member {current}."),
                );
            }
            Ok(current.clone())
        }
        None if is_member => Ok(member_id.to_owned()),
        None => {
            refuse(error_code::UNKNOWN_MEMBER_ID, format!("Member {member_id} is not a member of group {group_id}."))
        }
    }
}

/// What a leaving heartbeat (member epoch -1 or -2) carries.
pub(in crate::group) struct Leave<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub member_epoch: i32,
}

/// A member leaves: a static one (epoch -2) is kept with its assignment until
/// it returns or its session ends; any other is fenced. Returns the member id
/// that left.
pub(in crate::group) fn leave<G: MemberTable>(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &Leave<'_>,
    now_ms: i64,
) -> Result<String, Refusal> {
    let table = G::of_mut(group).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
    let member_id = leaving_member_id(
        table.static_members(),
        table.members().contains_key(request.member_id),
        request.instance_id,
        request.member_id,
        request.group_id,
    )?;
    if request.member_epoch == LEAVE_STATIC_MEMBER_EPOCH {
        if let Some(member) = table.members().get(&member_id) {
            let mut left = member.clone();
            let (epoch, previous) = left.epochs_mut();
            (*previous, *epoch) = (*epoch, LEAVE_STATIC_MEMBER_EPOCH);
            table.put_member(left);
        }
    } else {
        fence::<G>(ctx, group, &member_id);
    }
    refresh_state::<G>(group, now_ms);
    Ok(member_id)
}

/// Arms the member's deadlines after a heartbeat moved it from `before` to
/// `after`: its session again, and its revocation deadline when it has just
/// been asked to revoke (cancelled once it has nothing left to revoke).
pub(in crate::group) fn schedule_deadlines<M: GroupMember>(
    ctx: &mut Ctx,
    group_id: &str,
    before: &M,
    after: &M,
    session_ms: i32,
) {
    let member_id = after.member_id().to_owned();
    ctx.schedule(group_id, TimerKind::Session(member_id.clone()), i64::from(session_ms), TimerAction::FenceMember);
    if after.reconciliation_state() == MemberState::UnrevokedPartitions {
        let newly = before.reconciliation_state() != MemberState::UnrevokedPartitions
            || before.member_epoch() != after.member_epoch();
        if newly {
            let action = TimerAction::RevocationTimeout { member_epoch: after.member_epoch() };
            let timeout_ms = i64::from(after.rebalance_timeout_ms().max(0));
            ctx.schedule(group_id, TimerKind::Revocation(member_id), timeout_ms, action);
        }
    } else {
        ctx.cancel(group_id, TimerKind::Revocation(member_id));
    }
}

/// A member's session or revocation deadline passed: it is fenced, unless
/// the revocation it was waited for happened meanwhile.
pub(in crate::group) fn on_deadline<G: MemberTable>(
    ctx: &mut Ctx,
    group: &mut Group,
    kind: &TimerKind,
    action: TimerAction,
    now_ms: i64,
) {
    let Some(table) = G::of(group) else { return };
    let member_id = match (kind, action) {
        (TimerKind::Session(member_id), TimerAction::FenceMember) => member_id.clone(),
        (TimerKind::Revocation(member_id), TimerAction::RevocationTimeout { member_epoch }) => {
            let still_revoking = table.members().get(member_id).is_some_and(|m| {
                m.member_epoch() == member_epoch && m.reconciliation_state() == MemberState::UnrevokedPartitions
            });
            if !still_revoking {
                return;
            }
            member_id.clone()
        }
        _ => return,
    };
    if table.members().contains_key(&member_id) {
        fence::<G>(ctx, group, &member_id);
        refresh_state::<G>(group, now_ms);
    }
}

/// Removes a member (left, or a deadline passed) with its deadlines.
fn fence<G: MemberTable>(ctx: &mut Ctx, group: &mut Group, member_id: &str) {
    let group_id = group.group_id.clone();
    let Some(table) = G::of_mut(group) else { return };
    if table.remove_member(member_id).is_none() {
        return;
    }
    table.after_fence();
    ctx.cancel(&group_id, TimerKind::Session(member_id.to_string()));
    ctx.cancel(&group_id, TimerKind::Revocation(member_id.to_string()));
}

/// Moves the group to the state its members put it in.
pub(in crate::group) fn refresh_state<G: MemberTable>(group: &mut Group, now_ms: i64) {
    if let Some(state) = G::of(group).map(MemberTable::state) {
        if group.state != state {
            group.transition(state, now_ms);
        }
    }
}
