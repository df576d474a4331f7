//! ListGroups, DescribeGroups, DeleteGroups.

use kafgres_wire::error_code;

use super::*;

fn simple_commit(h: &mut H, group_id: &str) {
    let request = OffsetCommitRequest {
        api_version: 8,
        group_id: group_id.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitPartition { partition: 0, offset: 1, leader_epoch: -1, metadata: None }],
        }],
    };
    h.c.offset_commit(h.now, &request);
}

#[test]
fn list_groups_with_state_and_type_filters() {
    let mut h = H::new();
    h.stable_group(1);
    simple_commit(&mut h, "offsets-only");
    let ids = |groups: Vec<ListedGroup>| groups.into_iter().map(|g| g.group_id).collect::<Vec<_>>();
    assert_eq!(ids(h.c.list_groups(&[], &[])), [GROUP, "offsets-only"]);
    assert_eq!(ids(h.c.list_groups(&["stable".into()], &[])), [GROUP]);
    assert_eq!(ids(h.c.list_groups(&["Empty".into(), "Dead".into()], &[])), ["offsets-only"]);
    assert_eq!(ids(h.c.list_groups(&["PreparingRebalance".into()], &[])), Vec::<String>::new());
    assert_eq!(ids(h.c.list_groups(&[], &["Classic".into()])), [GROUP, "offsets-only"]);
    assert_eq!(ids(h.c.list_groups(&[], &["consumer".into()])), Vec::<String>::new());
    let listed = h.c.list_groups(&[], &[]);
    assert_eq!(
        (listed[0].protocol_type.as_str(), listed[0].state, listed[0].group_type),
        ("consumer", GroupState::Stable, "classic")
    );
}

#[test]
fn describe_shows_metadata_and_assignments_only_when_stable() {
    let mut h = H::new();
    let (members, _) = h.stable_group(2);
    let stable = h.c.describe_groups(5, &[GROUP.to_string()]).remove(0);
    assert_eq!(
        (stable.error_code, stable.state, stable.protocol_type.as_str()),
        (error_code::NONE, GroupState::Stable, "consumer")
    );
    assert_eq!(stable.protocol_data, "range");
    assert_eq!(stable.members.len(), 2);
    assert_eq!(stable.members[1].member_id, members[1]);
    assert_eq!(stable.members[1].client_id, "client");
    assert_eq!(stable.members[1].client_host, "/127.0.0.1");
    assert_eq!(stable.members[1].metadata, subscription(&["t"]));
    assert_eq!(stable.members[1].assignment, Bytes::from_static(b"a1"));

    unwrap_parked(h.join(join_request(&members[0])));
    let preparing = h.c.describe_groups(5, &[GROUP.to_string()]).remove(0);
    assert_eq!((preparing.state, preparing.protocol_data.as_str()), (GroupState::PreparingRebalance, ""));
    assert!(preparing.members.iter().all(|m| m.metadata.is_empty() && m.assignment.is_empty()));
}

#[test]
fn describe_unknown_groups_as_dead() {
    let h = H::new();
    let old = h.c.describe_groups(5, &["nope".to_string()]).remove(0);
    assert_eq!((old.error_code, old.state, old.group_id.as_str()), (error_code::NONE, GroupState::Dead, "nope"));
    let new = h.c.describe_groups(6, &["nope".to_string()]).remove(0);
    assert_eq!((new.error_code, new.state), (error_code::GROUP_ID_NOT_FOUND, GroupState::Dead));
}

#[test]
fn delete_groups_rules() {
    let mut h = H::new();
    let (members, _) = h.stable_group(1);
    simple_commit(&mut h, "offsets-only");
    let (results, effects) = h.c.delete_groups(h.now, &[GROUP.into(), "offsets-only".into(), "nope".into()]);
    assert_eq!(
        results,
        [
            (GROUP.to_string(), error_code::NON_EMPTY_GROUP),
            ("offsets-only".to_string(), error_code::NONE),
            ("nope".to_string(), error_code::GROUP_ID_NOT_FOUND),
        ]
    );
    assert_eq!(effects, [Effect::DeleteGroup { group_id: "offsets-only".into() }]);
    assert_eq!(h.c.group_state("offsets-only"), None);
    let fetched = h.c.offset_fetch(&OffsetFetchRequest { group_id: "offsets-only".into(), topics: None });
    assert!(fetched.topics.is_empty());

    // Once its last member has left, the group can go.
    h.leave(&[(&members[0], None)]);
    let (results, _) = h.c.delete_groups(h.now, &[GROUP.into()]);
    assert_eq!(results, [(GROUP.to_string(), error_code::NONE)]);
    assert_eq!(h.c.group_count(), 0);
    assert_eq!(h.c.next_deadline(), None);
}
