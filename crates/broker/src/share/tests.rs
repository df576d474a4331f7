//! The pure share-group state machines: share-partition record states and
//! membership.

use kafgres_wire::error_code;
use uuid::Uuid;

use super::membership::{ShareHeartbeat, ShareMembership};
use super::partition::{ack_type, AcquireLimits, AcquiredRange, LogBatch, RecordState, SharePartition};
use super::ShareConfig;
use crate::group::TopicLookup;

fn batch(base: i64, last: i64) -> LogBatch {
    LogBatch { base_offset: base, last_offset: last, is_control: false, aborted: false }
}

fn limits(records_max: usize, deadline: i64) -> AcquireLimits {
    AcquireLimits { records_max, window_max: 2000, lock_deadline_ms: deadline }
}

fn range(first: i64, last: i64, count: i16) -> AcquiredRange {
    AcquiredRange { first_offset: first, last_offset: last, delivery_count: count }
}

#[test]
fn two_members_split_records_and_the_start_offset_follows_acknowledgements() {
    let mut p = SharePartition::starting_at(0);
    let log = [batch(0, 4), batch(5, 9)];
    assert_eq!(p.acquire("a", 0, &log, limits(5, 100)), vec![range(0, 4, 1)]);
    // b reads from where nothing is acquired: the records a holds are skipped.
    assert_eq!(p.acquire("b", p.next_offset(), &log[1..], limits(100, 100)), vec![range(5, 9, 1)]);
    assert_eq!(p.acknowledge("b", 5, 9, &[ack_type::ACCEPT], 5), Ok(()));
    assert_eq!(p.start_offset(), 0, "a still holds 0-4");
    assert_eq!(p.acknowledge("a", 0, 4, &[ack_type::ACCEPT], 5), Ok(()));
    assert_eq!((p.start_offset(), p.end_offset()), (10, 9));
    assert!(p.snapshot().is_empty());
}

#[test]
fn release_makes_records_available_with_their_delivery_count() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 2)], limits(10, 100));
    // Per-offset types: accept 0, release 1, reject 2.
    let types = [ack_type::ACCEPT, ack_type::RELEASE, ack_type::REJECT];
    assert_eq!(p.acknowledge("a", 0, 2, &types, 5), Ok(()));
    assert_eq!(p.state_of(1), Some((RecordState::Available, 1)));
    assert_eq!(p.state_of(2), Some((RecordState::Archived, 1)));
    assert_eq!(p.start_offset(), 1);
    assert_eq!(p.read_positions(), vec![1, 3]);
    assert_eq!(p.acquire("b", 1, &[batch(0, 2)], limits(10, 100)), vec![range(1, 1, 2)]);
}

#[test]
fn renew_moves_the_lock_and_nothing_else() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 3)], limits(10, 100));
    // RENEW 0-1, ACCEPT 2, nothing for 3: only the renewed locks move.
    let types = [ack_type::RENEW, ack_type::RENEW, ack_type::ACCEPT, ack_type::RENEW];
    assert_eq!(p.acknowledge_renewing("a", 0, 2, &types[..3], 5, Some(500)), Ok(()));
    assert_eq!(p.state_of(0), Some((RecordState::Acquired, 1)), "still a's, not delivered again");
    assert_eq!(p.state_of(2), Some((RecordState::Acknowledged, 1)));
    // 3's lock (100) expires; the renewed ones (500) do not.
    assert!(p.expire_locks(100, 5) > 0);
    assert_eq!(p.state_of(3), Some((RecordState::Available, 1)));
    assert_eq!(p.state_of(1), Some((RecordState::Acquired, 1)));
    assert_eq!(p.next_lock_deadline(), Some(500));
    // A renewed record is still a's to accept.
    assert_eq!(p.acknowledge("a", 0, 1, &[ack_type::ACCEPT], 5), Ok(()));
    assert_eq!(p.start_offset(), 3);
}

#[test]
fn renew_needs_the_lock_and_a_v2_request() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 1)], limits(1, 100));
    // Another member's record, one never acquired (1 was not: records_max 1).
    assert_eq!(
        p.acknowledge_renewing("b", 0, 0, &[ack_type::RENEW], 5, Some(500)),
        Err(error_code::INVALID_RECORD_STATE)
    );
    assert_eq!(
        p.acknowledge_renewing("a", 0, 1, &[ack_type::RENEW], 5, Some(500)),
        Err(error_code::INVALID_RECORD_STATE)
    );
    // Without a renew deadline (v1) RENEW is not a type.
    assert_eq!(p.acknowledge("a", 0, 0, &[ack_type::RENEW], 5), Err(error_code::INVALID_REQUEST));
    assert_eq!(p.next_lock_deadline(), Some(100), "a refused renewal changes nothing");
    // An expired lock cannot be renewed: the record is no longer a's.
    p.expire_locks(100, 5);
    assert_eq!(
        p.acknowledge_renewing("a", 0, 0, &[ack_type::RENEW], 5, Some(500)),
        Err(error_code::INVALID_RECORD_STATE)
    );
}

#[test]
fn acknowledging_what_another_member_holds_is_an_invalid_record_state() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 3)], limits(10, 100));
    assert_eq!(p.acknowledge("b", 0, 3, &[ack_type::ACCEPT], 5), Err(error_code::INVALID_RECORD_STATE));
    assert_eq!(p.acknowledge("a", 2, 7, &[ack_type::ACCEPT], 5), Err(error_code::INVALID_RECORD_STATE));
    assert_eq!(p.acknowledge("a", 3, 2, &[ack_type::ACCEPT], 5), Err(error_code::INVALID_REQUEST));
    assert_eq!(p.acknowledge("a", 0, 3, &[1, 1], 5), Err(error_code::INVALID_REQUEST), "types of the wrong length");
    assert_eq!(p.acknowledge("a", 0, 3, &[9], 5), Err(error_code::INVALID_REQUEST));
    assert_eq!(p.state_of(0), Some((RecordState::Acquired, 1)), "a refused batch changes nothing");
}

#[test]
fn expired_locks_redeliver_until_the_delivery_limit_archives() {
    let mut p = SharePartition::starting_at(0);
    for delivery in 1..=3 {
        let now = delivery as i64 * 1000;
        assert_eq!(p.acquire("a", 0, &[batch(0, 0)], limits(10, now + 500)), vec![range(0, 0, delivery)]);
        assert_eq!(p.next_lock_deadline(), Some(now + 500));
        assert_eq!(p.expire_locks(now + 499, 3), 0);
        assert!(p.expire_locks(now + 500, 3) > 0);
    }
    // The third delivery was the last: archived, the start moves past it.
    assert_eq!(p.state_of(0), None);
    assert_eq!(p.start_offset(), 1);
    assert_eq!(p.next_lock_deadline(), None);
}

#[test]
fn control_aborted_and_compacted_offsets_are_archived_not_delivered() {
    let mut p = SharePartition::starting_at(0);
    let log = [
        LogBatch { base_offset: 0, last_offset: 1, is_control: false, aborted: true },
        LogBatch { base_offset: 2, last_offset: 2, is_control: true, aborted: false },
        batch(5, 6), // 3 and 4 were compacted away
    ];
    assert_eq!(p.acquire("a", 0, &log, limits(10, 100)), vec![range(5, 6, 1)]);
    assert_eq!(p.start_offset(), 5);
}

#[test]
fn acquisition_respects_the_record_limit_and_the_window() {
    let mut p = SharePartition::starting_at(0);
    assert_eq!(p.acquire("a", 0, &[batch(0, 9)], limits(4, 100)), vec![range(0, 3, 1)]);
    let window = AcquireLimits { records_max: 100, window_max: 6, lock_deadline_ms: 100 };
    assert_eq!(p.acquire("b", 4, &[batch(0, 9)], window), vec![range(4, 5, 1)]);
    assert!(p.has_acquirable(10));
}

#[test]
fn a_restored_state_has_no_locks_but_keeps_delivery_counts() {
    let mut p = SharePartition::starting_at(10);
    p.acquire("a", 10, &[batch(10, 14)], limits(10, 100));
    p.acknowledge("a", 11, 11, &[ack_type::ACCEPT], 5).expect("accept");
    let stored = p.snapshot();
    let restored = SharePartition::restore(p.start_offset(), &stored);
    assert_eq!(restored.start_offset(), 10);
    assert_eq!(restored.end_offset(), 14);
    assert_eq!(restored.state_of(10), Some((RecordState::Available, 1)));
    assert_eq!(restored.state_of(11), Some((RecordState::Acknowledged, 1)));
    assert_eq!(restored.read_positions(), vec![10, 12, 15]);
}

#[test]
fn the_log_start_passing_the_start_offset_drops_what_is_gone() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 4)], limits(10, 100));
    assert!(p.skip_to_log_start(3));
    assert_eq!(p.start_offset(), 3);
    assert_eq!(p.state_of(2), None);
    assert!(!p.skip_to_log_start(1));
}

struct OneTopic;

impl TopicLookup for OneTopic {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        (name == "t").then_some((Uuid::from_u128(7), 3))
    }
    fn topic_name(&self, id: Uuid) -> Option<String> {
        (id == Uuid::from_u128(7)).then(|| "t".to_owned())
    }
    fn topic_names(&self) -> Vec<String> {
        vec!["t".to_owned()]
    }
}

fn beat(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
    ShareHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rack_id: None,
        subscribed_topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
    }
}

#[test]
fn members_join_share_partitions_and_leave() {
    let config = ShareConfig::default();
    let mut m = ShareMembership::default();
    let (a, _) = m.heartbeat(0, beat("a", 0, Some(&["t"])), &OneTopic, &config);
    assert_eq!((a.error_code, a.member_epoch), (error_code::NONE, 1));
    assert_eq!(a.assignment.expect("assigned").get(&Uuid::from_u128(7)).map(|p| p.len()), Some(3));
    let (b, _) = m.heartbeat(0, beat("b", 0, Some(&["t"])), &OneTopic, &config);
    assert_eq!(b.member_epoch, 2);
    let (a2, _) = m.heartbeat(1, beat("a", 1, None), &OneTopic, &config);
    assert_eq!(a2.member_epoch, 2, "a moves to the new epoch at once (nothing to revoke)");
    let a_parts = a2.assignment.expect("new assignment").remove(&Uuid::from_u128(7)).unwrap_or_default();
    let b_parts = b.assignment.expect("assigned").remove(&Uuid::from_u128(7)).unwrap_or_default();
    assert_eq!(a_parts.len() + b_parts.len(), 3);
    assert!(a_parts.is_disjoint(&b_parts), "three partitions, two members: spread");
    let (stale, _) = m.heartbeat(2, beat("a", 1, None), &OneTopic, &config);
    assert_eq!(stale.error_code, error_code::FENCED_MEMBER_EPOCH);
    let (unknown, _) = m.heartbeat(2, beat("zz", 3, None), &OneTopic, &config);
    assert_eq!(unknown.error_code, error_code::UNKNOWN_MEMBER_ID);
    let (left, departed) = m.heartbeat(2, beat("b", -1, None), &OneTopic, &config);
    assert_eq!((left.error_code, left.member_epoch), (error_code::NONE, -1));
    assert!(departed.is_some());
    assert_eq!(m.group("g").map(|g| g.group_epoch), Some(3));
}

#[test]
fn heartbeats_are_validated_with_kafkas_messages() {
    let config = ShareConfig::default();
    let mut m = ShareMembership::default();
    let (no_topics, _) = m.heartbeat(0, beat("a", 0, None), &OneTopic, &config);
    assert_eq!(no_topics.error_code, error_code::INVALID_REQUEST);
    assert_eq!(no_topics.error_message.as_deref(), Some("SubscribedTopicNames must be set in first request."));
    let (no_id, _) = m.heartbeat(0, beat("", 0, Some(&["t"])), &OneTopic, &config);
    assert_eq!(no_id.error_message.as_deref(), Some("MemberId can't be empty."));
}

#[test]
fn more_members_than_partitions_share_them_and_sessions_expire() {
    let config = ShareConfig { session_timeout_ms: 100, ..ShareConfig::default() };
    let mut m = ShareMembership::default();
    for member in ["a", "b", "c", "d"] {
        m.heartbeat(0, beat(member, 0, Some(&["t"])), &OneTopic, &config);
    }
    let group = m.group("g").expect("group");
    assert!(group.members.values().all(|member| member.assignment.values().map(|p| p.len()).sum::<usize>() == 1));
    assert_eq!(m.next_deadline(), Some(100));
    assert_eq!(m.expire_sessions(100).len(), 4);
    assert_eq!(m.group("g").map(|g| g.state()), Some("Empty"));
}

#[test]
fn a_log_cut_below_the_end_offset_forgets_the_states_past_it() {
    let mut p = SharePartition::starting_at(0);
    p.acquire("a", 0, &[batch(0, 5)], limits(10, 100));
    p.acknowledge("a", 0, 5, &[ack_type::ACCEPT], 5).expect("accept");
    assert_eq!(p.start_offset(), 6);
    // The log lost offsets 3-5 (never durable); new records will take them.
    assert!(p.truncate_to(3));
    assert_eq!((p.start_offset(), p.next_offset()), (3, 3));
    assert_eq!(p.acquire("b", 3, &[batch(3, 4)], limits(10, 100)), vec![range(3, 4, 1)]);
    assert!(!p.truncate_to(10));
}

#[test]
fn a_huge_acknowledgement_range_is_answered_without_walking_it() {
    let mut p = SharePartition::starting_at(1_000_000_000_000);
    let at = p.start_offset();
    p.acquire("a", at, &[batch(at, at + 1)], limits(10, 100));
    // From offset 0, all gaps below the start: only the window is walked.
    let started = std::time::Instant::now();
    assert_eq!(p.acknowledge("a", 0, at + 1, &[ack_type::GAP], 5), Ok(()));
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(p.start_offset(), at + 2);
    assert_eq!(p.acknowledge("a", 0, i64::MAX, &[ack_type::ACCEPT], 5), Err(error_code::INVALID_RECORD_STATE));
    assert_eq!(p.acknowledge("a", 5, at + 1, &[ack_type::ACCEPT], 5), Err(error_code::INVALID_RECORD_STATE));
}
