use super::*;
use crate::message::{EndMessage, OffsetCommitMessage, SendMessage};

const LIMIT: usize = 1 << 20;

fn send(value: &str) -> Vec<u8> {
    SendMessage { topic: "t".into(), value: Some(value.as_bytes().to_vec()), ..SendMessage::default() }.encode()
}

fn end(messages: u32) -> Vec<u8> {
    EndMessage { messages }.encode()
}

fn values(txn: &CommittedTxn) -> Vec<String> {
    txn.sends.iter().map(|s| String::from_utf8_lossy(s.value.as_deref().unwrap_or_default()).into_owned()).collect()
}

fn message(xid: u32, lsn: u64, kind: MessageKind, body: &[u8]) -> WalEvent<'_> {
    WalEvent::Message { xid, lsn, kind, body }
}

fn commit(xid: u32, subxids: &[u32], end_lsn: u64) -> WalEvent<'_> {
    WalEvent::Commit { xid, subxids, end_lsn, commit_time_ms: 7 }
}

fn committed(outcome: Option<Assembled>) -> CommittedTxn {
    match outcome {
        Some(Assembled::Committed(txn)) => txn,
        other => panic!("expected a committed transaction, got {other:?}"),
    }
}

#[test]
fn a_commit_hands_out_its_messages_in_wal_order_with_those_of_committed_subtransactions() {
    let mut a = Assembler::new(0, LIMIT);
    let (one, two, three) = (send("1"), send("2"), send("3"));
    let trailer = end(3);
    assert_eq!(a.push(message(100, 10, MessageKind::Send, &one)), Ok(None));
    assert_eq!(a.push(message(101, 20, MessageKind::Send, &two)), Ok(None)); // subtransaction 101 of 100
    assert_eq!(a.push(message(100, 30, MessageKind::Send, &three)), Ok(None));
    assert_eq!(a.push(message(100, 40, MessageKind::End, &trailer)), Ok(None));
    assert_eq!(a.restart_lsn(50), 10);
    let txn = committed(a.push(commit(100, &[101], 60)).expect("no limit hit"));
    assert_eq!(values(&txn), ["1", "2", "3"]);
    assert_eq!((txn.xid, txn.end_lsn, txn.commit_time_ms), (100, 60, 7));
    assert_eq!((a.open_transactions(), a.bytes_held()), (0, 0));
    assert_eq!(a.restart_lsn(70), 70, "nothing open: the reader's position");
}

#[test]
fn a_rolled_back_savepoint_drops_its_messages_and_is_not_counted() {
    let mut a = Assembler::new(0, LIMIT);
    let (kept, dropped) = (send("kept"), send("dropped"));
    let trailer = end(1);
    a.push(message(200, 10, MessageKind::Send, &kept)).expect("fits");
    a.push(message(201, 20, MessageKind::Send, &dropped)).expect("fits");
    a.push(WalEvent::Abort { xid: 201, subxids: &[] }).expect("abort");
    a.push(message(200, 30, MessageKind::End, &trailer)).expect("fits");
    let txn = committed(a.push(commit(200, &[], 40)).expect("no limit hit"));
    assert_eq!(values(&txn), ["kept"]);
}

#[test]
fn aborted_transactions_leave_nothing_behind() {
    let mut a = Assembler::new(0, LIMIT);
    let body = send("x");
    a.push(message(300, 10, MessageKind::Send, &body)).expect("fits");
    a.push(message(301, 11, MessageKind::Send, &body)).expect("fits");
    a.push(WalEvent::Abort { xid: 300, subxids: &[301] }).expect("abort");
    assert_eq!((a.open_transactions(), a.bytes_held()), (0, 0));
    assert_eq!(a.push(commit(300, &[], 20)), Ok(None), "a stray commit finds nothing");
}

#[test]
fn a_transaction_whose_first_messages_were_not_read_is_incomplete_never_partial() {
    let mut a = Assembler::new(0, LIMIT);
    let (body, trailer) = (send("late"), end(3));
    // The reader started after the transaction's first two messages.
    a.push(message(400, 10, MessageKind::Send, &body)).expect("fits");
    a.push(message(400, 20, MessageKind::End, &trailer)).expect("fits");
    assert_eq!(
        a.push(commit(400, &[], 30)),
        Ok(Some(Assembled::Incomplete { xid: 400, end_lsn: 30, found: 1, expected: Some(3) }))
    );
    // Its end message itself was missed: version-2 bodies without one are incomplete too.
    a.push(message(401, 40, MessageKind::Send, &body)).expect("fits");
    assert_eq!(
        a.push(commit(401, &[], 50)),
        Ok(Some(Assembled::Incomplete { xid: 401, end_lsn: 50, found: 1, expected: None }))
    );
}

#[test]
fn version_one_transactions_have_no_end_message_and_are_complete() {
    let mut a = Assembler::new(0, LIMIT);
    let mut old = send("old");
    old[0] = crate::message::FORMAT_VERSION_WITHOUT_END;
    a.push(message(500, 10, MessageKind::Send, &old)).expect("fits");
    assert_eq!(values(&committed(a.push(commit(500, &[], 20)).expect("ok"))), ["old"]);
}

#[test]
fn commits_at_or_below_the_applied_point_are_consumed_but_not_handed_out() {
    let mut a = Assembler::new(100, LIMIT);
    let (body, trailer) = (send("x"), end(1));
    for (xid, lsn) in [(600u32, 50u64), (601, 90)] {
        a.push(message(xid, lsn, MessageKind::Send, &body)).expect("fits");
        a.push(message(xid, lsn + 1, MessageKind::End, &trailer)).expect("fits");
    }
    assert_eq!(a.push(commit(600, &[], 100)), Ok(None), "applied before the restart");
    assert_eq!(values(&committed(a.push(commit(601, &[], 101)).expect("ok"))), ["x"]);
    assert_eq!(a.bytes_held(), 0);
}

#[test]
fn offsets_and_sends_of_one_transaction_come_together() {
    let mut a = Assembler::new(0, LIMIT);
    let offsets = OffsetCommitMessage { group_id: "g".into(), topic: "t".into(), partition: 1, offset: 9 }.encode();
    let (body, trailer) = (send("s"), end(2));
    a.push(message(700, 10, MessageKind::Offsets, &offsets)).expect("fits");
    a.push(message(700, 20, MessageKind::Send, &body)).expect("fits");
    a.push(message(700, 30, MessageKind::End, &trailer)).expect("fits");
    let txn = committed(a.push(commit(700, &[], 40)).expect("ok"));
    assert_eq!((txn.sends.len(), txn.offsets.len(), txn.offsets[0].offset), (1, 1, 9));
}

#[test]
fn a_damaged_message_is_reported_and_the_rest_delivered() {
    let mut a = Assembler::new(0, LIMIT);
    let (good, trailer) = (send("good"), end(2));
    let mut bad = send("bad");
    bad.truncate(5);
    a.push(message(800, 10, MessageKind::Send, &good)).expect("fits");
    a.push(message(800, 20, MessageKind::Send, &bad)).expect("fits");
    a.push(message(800, 30, MessageKind::End, &trailer)).expect("fits");
    match a.push(commit(800, &[], 40)) {
        Ok(Some(Assembled::Damaged { txn, errors })) => {
            assert_eq!(values(&txn), ["good"]);
            assert_eq!(errors.len(), 1);
        }
        other => panic!("expected a damaged transaction, got {other:?}"),
    }
}

#[test]
fn transactions_that_never_ended_are_dropped_by_running_xacts_not_kept_forever() {
    let mut a = Assembler::new(0, LIMIT);
    let body = send("x");
    a.push(message(900, 10, MessageKind::Send, &body)).expect("fits"); // its backend crashed
    a.push(message(905, 20, MessageKind::Send, &body)).expect("fits"); // still running
    a.push(WalEvent::RunningXacts { oldest_running_xid: 903 }).expect("ok");
    assert_eq!(a.open_transactions(), 1);
    assert_eq!(a.restart_lsn(99), 20, "the crashed transaction no longer holds WAL");
}

#[test]
fn xids_compare_across_wraparound() {
    assert!(xid_precedes(u32::MAX - 5, 10));
    assert!(!xid_precedes(10, u32::MAX - 5));
    assert!(xid_precedes(3, 4));
    assert!(!xid_precedes(4, 4));
    let mut a = Assembler::new(0, LIMIT);
    let body = send("x");
    a.push(message(u32::MAX - 1, 10, MessageKind::Send, &body)).expect("fits");
    a.push(WalEvent::RunningXacts { oldest_running_xid: 5 }).expect("ok");
    assert_eq!(a.open_transactions(), 0, "an xid before the wrap is older than 5 after it");
}

#[test]
fn the_memory_limit_refuses_without_losing_anything() {
    let body = send("0123456789");
    let mut a = Assembler::new(0, body.len() * 2);
    a.push(message(1000, 10, MessageKind::Send, &body)).expect("fits");
    a.push(message(1001, 20, MessageKind::Send, &body)).expect("fits");
    let refused = a.push(message(1000, 30, MessageKind::Send, &body));
    assert!(matches!(refused, Err(AssemblyError::MemoryFull { .. })), "{refused:?}");
    assert_eq!(a.bytes_held(), body.len() * 2, "the refused message was not half-added");
    a.set_bytes_max(body.len() * 3);
    a.push(message(1000, 30, MessageKind::Send, &body)).expect("fits once raised");
    assert_eq!(a.bytes_held(), body.len() * 3);
}

#[test]
fn the_commit_headers_a_send_left_null_carry_its_commit_record() {
    let mut a = Assembler::new(0, LIMIT);
    let body = SendMessage {
        topic: "t".into(),
        headers: vec![(crate::COMMIT_LSN_HEADER.into(), None), (crate::COMMIT_TIME_HEADER.into(), None)],
        ..SendMessage::default()
    }
    .encode();
    let trailer = end(1);
    assert_eq!(a.push(message(100, 10, MessageKind::Send, &body)), Ok(None));
    assert_eq!(a.push(message(100, 20, MessageKind::End, &trailer)), Ok(None));
    let txn = committed(a.push(commit(100, &[], 0x1_0000_0030)).expect("a commit assembles"));
    assert_eq!(
        txn.sends[0].headers,
        vec![
            (crate::COMMIT_LSN_HEADER.into(), Some(b"1/30".to_vec())),
            (crate::COMMIT_TIME_HEADER.into(), Some(b"7".to_vec())),
        ]
    );
}
