use std::collections::BTreeMap;

use super::*;

/// One partition's records as the model keeps them: (producer id, sequence, value).
type ModelLog = Vec<(i64, i32, String)>;

/// A broker modelled as Kafka's idempotence rules apply them: per partition,
/// the records in order and, per producer, the last sequence written.
#[derive(Default)]
struct ModelBroker {
    next_producer_id: i64,
    logs: BTreeMap<(String, i32), ModelLog>,
    topics: BTreeMap<String, usize>,
    /// Fail every produce with this error, once per entry.
    fail_next: Vec<BrokerError>,
    /// After how many batches of the next produce the connection breaks
    /// (those before are written).
    break_after: Option<usize>,
    produce_calls: usize,
    describe_calls: usize,
    /// A stale limit reported until a batch is refused as too large (a
    /// cached `max.message.bytes` that was lowered since).
    stale_limit: Option<usize>,
}

impl ModelBroker {
    fn with_topics(topics: &[(&str, usize)]) -> ModelBroker {
        ModelBroker {
            next_producer_id: 1000,
            topics: topics.iter().map(|(t, l)| (t.to_string(), *l)).collect(),
            ..ModelBroker::default()
        }
    }

    fn values(&self, topic: &str, partition: i32) -> Vec<String> {
        self.logs
            .get(&(topic.to_string(), partition))
            .map_or_else(Vec::new, |l| l.iter().map(|r| r.2.clone()).collect())
    }

    fn last_sequence(&self, key: &(String, i32), producer_id: i64) -> Option<i32> {
        self.logs.get(key)?.iter().rev().find(|r| r.0 == producer_id).map(|r| r.1)
    }
}

fn decode_values(bytes: &[u8]) -> Vec<String> {
    let batch = kafgres_client::records::decode_batches(&bytes::Bytes::copy_from_slice(bytes), 0, 1 << 20)
        .expect("a valid batch");
    batch.records.iter().map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()).collect()
}

impl Broker for ModelBroker {
    fn init_producer_id(&mut self) -> Result<(i64, i16), BrokerError> {
        self.next_producer_id += 1;
        Ok((self.next_producer_id, 0))
    }

    fn last_sequences(
        &mut self,
        producer_id: i64,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<i32>>, BrokerError> {
        self.describe_calls += 1;
        Ok(partitions.iter().map(|k| self.last_sequence(k, producer_id)).collect())
    }

    fn produce(&mut self, batches: &[OutgoingBatch]) -> Result<Vec<ProduceOutcome>, BrokerError> {
        self.produce_calls += 1;
        if !self.fail_next.is_empty() {
            return Err(self.fail_next.remove(0));
        }
        let stamp = |b: &OutgoingBatch| {
            let header = kafgres_record::BatchHeader::parse(&b.bytes).expect("a batch header");
            (header.producer_id, header.base_sequence)
        };
        let mut outcomes = Vec::new();
        for (i, batch) in batches.iter().enumerate() {
            if self.break_after == Some(i) {
                self.break_after = None;
                return Err(BrokerError::Unreachable("connection reset".into()));
            }
            let key = (batch.topic.clone(), batch.partition);
            let Some(&limit) = self.topics.get(&batch.topic) else {
                outcomes.push(ProduceOutcome::UnknownPartition);
                continue;
            };
            if batch.bytes.len() > limit {
                self.stale_limit = None;
                outcomes.push(ProduceOutcome::TooLarge);
                continue;
            }
            let (producer_id, base_sequence) = stamp(batch);
            assert_eq!(base_sequence, batch.base_sequence);
            let expected = self.last_sequence(&key, producer_id).map_or(base_sequence, |last| next_after(last, 1));
            if base_sequence != expected {
                outcomes.push(ProduceOutcome::OutOfOrderSequence);
                continue;
            }
            let values = decode_values(&batch.bytes);
            assert_eq!(values.len() as i32, batch.record_count);
            let log = self.logs.entry(key).or_default();
            for (n, value) in values.into_iter().enumerate() {
                log.push((producer_id, next_after(base_sequence, n as i32), value));
            }
            outcomes.push(ProduceOutcome::Acknowledged);
        }
        Ok(outcomes)
    }

    fn message_bytes_max(&mut self, topic: &str) -> Result<Option<usize>, BrokerError> {
        Ok(self.topics.get(topic).map(|&l| self.stale_limit.unwrap_or(l)))
    }
}

fn send(topic: &str, partition: i32, value: &str) -> SendMessage {
    SendMessage {
        topic: topic.into(),
        partition,
        timestamp_ms: 1_700_000_000_000,
        value: Some(value.as_bytes().to_vec()),
        ..SendMessage::default()
    }
}

fn txn(end_lsn: u64, sends: Vec<SendMessage>) -> CommittedTxn {
    CommittedTxn { xid: end_lsn as u32, end_lsn, commit_time_ms: 0, sends, offsets: Vec::new() }
}

/// `count` transactions of one record each to `t`-0, values "v<i>", LSNs 10, 20, ...
fn txns(count: usize) -> Vec<CommittedTxn> {
    (0..count).map(|i| txn(10 * (i as u64 + 1), vec![send("t", 0, &format!("v{i}"))])).collect()
}

fn expected(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("v{i}")).collect()
}

#[test]
fn records_are_appended_in_commit_order_with_one_batch_per_partition_and_round() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20), ("u", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(5));
    let round =
        vec![txn(10, vec![send("t", 0, "a"), send("u", 1, "x")]), txn(20, vec![send("t", 0, "b"), send("t", 0, "c")])];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!(report.records_appended, 4);
    assert_eq!(broker.values("t", 0), ["a", "b", "c"]);
    assert_eq!(broker.values("u", 1), ["x"]);
    assert_eq!(broker.produce_calls, 1, "one request for the round");
    assert_eq!(broker.describe_calls, 0, "a fresh producer id has nothing to read back");
    assert_eq!(applier.checkpoint().next_sequence.get(&("t".to_string(), 0)), Some(&3));
}

#[test]
fn a_restart_sends_only_what_the_log_lacks_however_rounds_were_grouped() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let all = txns(10);
    let mut first = Applier::new(Checkpoint::starting_at(0));
    first.apply(&mut broker, &all[..3]).expect("applied");
    let stored = first.checkpoint().clone();
    // Applied before a crash, but the checkpoint was not stored.
    first.apply(&mut broker, &all[3..6]).expect("applied");
    assert_eq!(broker.values("t", 0), expected(6));
    let mut restarted = Applier::new(stored);
    let report = restarted.apply(&mut broker, &all[3..]).expect("replayed");
    assert_eq!(broker.values("t", 0), expected(10), "nothing twice, nothing skipped");
    assert_eq!((report.records_already_present, report.records_appended), (3, 4));
    assert_eq!(broker.describe_calls, 1);
}

#[test]
fn a_connection_that_breaks_mid_round_is_recovered_without_duplicates() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20), ("u", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let round = vec![txn(10, vec![send("t", 0, "a"), send("u", 0, "b")])];
    broker.break_after = Some(1); // t-0 written, u-0 not
    assert!(matches!(applier.apply(&mut broker, &round), Err(ApplyError::Broker(BrokerError::Unreachable(_)))));
    applier.resync();
    applier.apply(&mut broker, &round).expect("retried");
    assert_eq!((broker.values("t", 0), broker.values("u", 0)), (vec!["a".to_string()], vec!["b".to_string()]));
}

#[test]
fn a_failed_round_leaves_the_checkpoint_as_it_was() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    applier.apply(&mut broker, &txns(1)).expect("applied");
    let before = applier.checkpoint().clone();
    broker.fail_next.push(BrokerError::Unreachable("down".into()));
    let all = txns(3);
    assert!(applier.apply(&mut broker, &all[1..]).is_err());
    assert_eq!(applier.checkpoint(), &before);
    applier.resync();
    applier.apply(&mut broker, &all[1..]).expect("applied on retry");
    assert_eq!(broker.values("t", 0), expected(3));
}

#[test]
fn large_transactions_are_split_under_the_topic_limit_in_order() {
    let mut broker = ModelBroker::with_topics(&[("t", 1000)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let big: Vec<SendMessage> = (0..20).map(|i| send("t", 0, &format!("{i:0>100}"))).collect();
    let report = applier.apply(&mut broker, &[txn(10, big)]).expect("applied");
    assert_eq!(report.records_appended, 20);
    let values = broker.values("t", 0);
    assert_eq!(values, (0..20).map(|i| format!("{i:0>100}")).collect::<Vec<_>>());
    assert!(broker.produce_calls > 1, "more than one batch was needed");
}

#[test]
fn records_to_a_deleted_topic_are_dropped_and_counted() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let round = vec![txn(10, vec![send("gone", 0, "x"), send("t", 0, "kept")])];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!((report.records_dropped, report.records_appended), (1, 1));
    assert_eq!(broker.values("t", 0), ["kept"]);
}

#[test]
fn records_the_log_lost_are_reported_and_a_new_producer_continues() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let all = txns(6);
    applier.apply(&mut broker, &all[..4]).expect("applied");
    // A crash under page_cache: the last two acknowledged records are gone.
    broker.logs.get_mut(&("t".to_string(), 0)).expect("log").truncate(2);
    let mut restarted = Applier::new(applier.checkpoint().clone());
    let first_id = restarted.checkpoint().producer_id;
    let report = restarted.apply(&mut broker, &all[4..]).expect("applied");
    assert_eq!(report.records_lost_by_log, 2);
    assert_ne!(restarted.checkpoint().producer_id, first_id);
    assert_eq!(broker.values("t", 0), ["v0", "v1", "v4", "v5"]);
}

#[test]
fn transactions_at_or_below_the_checkpoint_are_not_sent_again() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let all = txns(3);
    applier.apply(&mut broker, &all).expect("applied");
    applier.advance(30, 30);
    let report = applier.apply(&mut broker, &all).expect("nothing to do");
    assert_eq!((report.transactions, report.records_appended), (0, 0));
    assert_eq!(broker.values("t", 0), expected(3));
}

#[test]
fn sequences_wrap_like_kafkas() {
    assert_eq!(next_after(i32::MAX, 1), 0);
    assert_eq!(previous(0), i32::MAX);
    assert!(is_at_or_behind(3, 10));
    assert!(is_at_or_behind(10, 10));
    assert!(is_at_or_behind(i32::MAX, 2));
    assert!(!is_at_or_behind(11, 10));
    assert_eq!(sequence_distance(i32::MAX, 1), 2);
}

#[test]
fn a_partition_whose_sequences_wrap_keeps_every_record() {
    let mut broker = ModelBroker::with_topics(&[("t", 1 << 20)]);
    let mut checkpoint = Checkpoint::starting_at(0);
    checkpoint.producer_id = 7;
    checkpoint.next_sequence.insert(("t".into(), 0), i32::MAX - 1);
    let mut applier = Applier::new(checkpoint);
    applier.apply(&mut broker, &txns(4)).expect("applied");
    assert_eq!(broker.values("t", 0), expected(4));
    assert_eq!(applier.checkpoint().next_sequence.get(&("t".to_string(), 0)), Some(&2));
}

#[test]
fn a_limit_lowered_since_it_was_read_is_read_again_and_the_batches_split_under_it() {
    let mut broker = ModelBroker::with_topics(&[("t", 1000)]);
    broker.stale_limit = Some(1 << 20);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let records: Vec<SendMessage> = (0..10).map(|i| send("t", 0, &format!("{i:0>200}"))).collect();
    let report = applier.apply(&mut broker, &[txn(10, records)]).expect("applied");
    assert_eq!(report.records_appended, 10);
    assert_eq!(broker.values("t", 0), (0..10).map(|i| format!("{i:0>200}")).collect::<Vec<_>>());
}

#[test]
fn a_record_larger_than_its_topic_now_allows_is_dropped_without_a_sequence_gap() {
    let mut broker = ModelBroker::with_topics(&[("t", 400)]);
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let round = vec![txn(10, vec![send("t", 0, "small"), send("t", 0, &"x".repeat(1000)), send("t", 0, "after")])];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!((report.records_appended, report.records_dropped), (2, 1));
    assert_eq!(broker.values("t", 0), ["small", "after"]);
    applier.apply(&mut broker, &[txn(20, vec![send("t", 0, "next")])]).expect("sequences still follow on");
    assert_eq!(broker.values("t", 0), ["small", "after", "next"]);
}
