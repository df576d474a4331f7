//! A share-group member (KIP-932) against an in-process broker: join, acquire,
//! and each acknowledgement type, through one share session.

mod common;

use std::time::Duration;

use common::{records, TestBroker};
use kafgres_client::{error_code, AcknowledgeType, ShareAcknowledgement, ShareMember};

const WAIT: Duration = Duration::from_secs(5);

fn settle(topic_id: uuid::Uuid, partition: i32, first: i64, last: i64, kind: AcknowledgeType) -> ShareAcknowledgement {
    ShareAcknowledgement { topic_id, partition, first_offset: first, last_offset: last, kind }
}

#[test]
fn a_member_acquires_accepts_releases_and_rejects() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("queue", 1, &[]).unwrap();
    client.produce("queue", 0, &records("job", 6)).unwrap();
    let topic_id = client.metadata(Some(&["queue"])).unwrap()[0].topic_id;

    let mut member = ShareMember::new("workers", "member-1");
    client.share_heartbeat(&mut member, &["queue"]).unwrap();
    assert!(member.has_joined());
    assert_eq!(member.assigned(topic_id), vec![0]);

    // The group starts at the latest offset by default: records written from now on come.
    let fresh = client.share_fetch(&mut member, topic_id, &[0], 100, Duration::ZERO).unwrap();
    assert!(fresh.is_empty(), "{fresh:?}");
    client.produce("queue", 0, &records("task", 4)).unwrap();
    let got = client.share_fetch(&mut member, topic_id, &[0], 100, WAIT).unwrap();
    assert_eq!(got.iter().map(|r| r.record.offset).collect::<Vec<_>>(), vec![6, 7, 8, 9]);
    assert!(got.iter().all(|r| r.delivery_count == 1 && r.partition == 0));

    let refused = client
        .share_acknowledge(
            &mut member,
            &[
                settle(topic_id, 0, 6, 6, AcknowledgeType::Accept),
                settle(topic_id, 0, 7, 8, AcknowledgeType::Release),
                settle(topic_id, 0, 9, 9, AcknowledgeType::Reject),
            ],
        )
        .unwrap();
    assert!(refused.is_empty(), "{refused:?}");

    // The released ones come again, delivered twice; the accepted and the rejected never.
    let again = client.share_fetch(&mut member, topic_id, &[0], 100, WAIT).unwrap();
    assert_eq!(again.iter().map(|r| (r.record.offset, r.delivery_count)).collect::<Vec<_>>(), vec![(7, 2), (8, 2)]);
    let refused = client.share_acknowledge(&mut member, &[settle(topic_id, 0, 7, 8, AcknowledgeType::Accept)]).unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    assert!(client.share_fetch(&mut member, topic_id, &[0], 100, Duration::from_millis(100)).unwrap().is_empty());

    // Settling what is not acquired is refused per partition.
    let refused = client.share_acknowledge(&mut member, &[settle(topic_id, 0, 6, 6, AcknowledgeType::Accept)]).unwrap();
    assert_eq!(refused, vec![(topic_id, 0, error_code::INVALID_RECORD_STATE)]);
    client.share_leave(&mut member).unwrap();
    assert!(!member.has_joined());
}

#[test]
fn a_new_connection_opens_a_new_session_and_what_the_old_one_held_comes_again() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("jobs", 1, &[]).unwrap();
    let topic_id = client.metadata(Some(&["jobs"])).unwrap()[0].topic_id;
    let mut member = ShareMember::new("g", "m");
    client.share_heartbeat(&mut member, &["jobs"]).unwrap();
    assert!(client.share_fetch(&mut member, topic_id, &[0], 10, Duration::ZERO).unwrap().is_empty());
    client.produce("jobs", 0, &records("j", 3)).unwrap();
    assert_eq!(client.share_fetch(&mut member, topic_id, &[0], 10, WAIT).unwrap().len(), 3);
    drop(client);

    // The broker dropped the session with the connection and released its records: the member's
    // stale epoch is answered with a session error, and the client opens a new session.
    let mut client = broker.client();
    client.share_heartbeat(&mut member, &["jobs"]).unwrap();
    let again = client.share_fetch(&mut member, topic_id, &[0], 10, WAIT).unwrap();
    assert_eq!(
        again.iter().map(|r| (r.record.offset, r.delivery_count)).collect::<Vec<_>>(),
        vec![(0, 2), (1, 2), (2, 2)]
    );
}
