//! The applier against a real broker over loopback, through the same
//! `kafgres-client` connection the extension uses: committed transactions land
//! in commit order, the broker's Produce rules apply to them, and replaying
//! them after a restart of either side writes nothing twice.

use std::sync::Arc;
use std::time::Duration;

use kafgres_bridge::kafka::KafkaBroker;
use kafgres_bridge::{Applier, Checkpoint, CommittedTxn, SendMessage};
use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use kafgres_client::{Client, ClientConfig, PollWait};

/// A broker on its own runtime, restartable on the same directory.
struct Harness {
    runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    catalog: Arc<MemoryCatalog>,
    broker: Option<Broker>,
}

impl Harness {
    fn start() -> Harness {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        let mut h =
            Harness { runtime, dir: tempfile::tempdir().expect("tempdir"), catalog: Arc::default(), broker: None };
        h.boot();
        h
    }

    fn boot(&mut self) {
        let config = BrokerConfig::for_tests(self.dir.path().to_path_buf());
        let catalog = Arc::clone(&self.catalog);
        let broker = self.runtime.block_on(async { Broker::start(config, catalog.clone(), catalog.snapshot()).await });
        self.broker = Some(broker.expect("broker starts"));
    }

    fn restart(&mut self) {
        if let Some(b) = self.broker.take() {
            self.runtime.block_on(b.shutdown());
        }
        self.boot();
    }

    fn client(&self) -> Client<PollWait> {
        let addr = self.broker.as_ref().expect("running").local_addr();
        let config = ClientConfig { request_timeout: Duration::from_secs(10), ..ClientConfig::default() };
        Client::connect_with(addr, "bridge-test", PollWait, config).expect("connects")
    }

    fn values(&self, topic: &str, partition: i32) -> Vec<String> {
        let mut client = self.client();
        let fetched = client.fetch(topic, partition, 0, 1 << 20, Duration::ZERO).expect("fetch");
        fetched
            .records
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect()
    }
}

fn send(topic: &str, partition: i32, value: &str) -> SendMessage {
    SendMessage {
        topic: topic.into(),
        partition,
        timestamp_ms: kafgres_broker::now_ms(),
        key: Some(value.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![("h".into(), Some(b"v".to_vec()))],
    }
}

fn txn(end_lsn: u64, sends: Vec<SendMessage>) -> CommittedTxn {
    CommittedTxn { xid: end_lsn as u32, end_lsn, commit_time_ms: 0, sends, offsets: vec![] }
}

fn txns(topic: &str, range: std::ops::Range<usize>) -> Vec<CommittedTxn> {
    range.map(|i| txn(100 + i as u64, vec![send(topic, 0, &format!("v{i}"))])).collect()
}

fn expected(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("v{i}")).collect()
}

#[test]
fn rounds_land_in_commit_order_across_partitions() {
    let h = Harness::start();
    let mut client = h.client();
    client.create_topic("orders", 2, &[]).expect("topic");
    let mut broker = KafkaBroker::new(h.client());
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let round = vec![
        txn(10, vec![send("orders", 0, "a"), send("orders", 1, "x")]),
        txn(20, vec![send("orders", 0, "b")]),
        txn(30, vec![send("orders", 0, "c"), send("orders", 1, "y")]),
    ];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!(report.records_appended, 5);
    assert_eq!(h.values("orders", 0), ["a", "b", "c"]);
    assert_eq!(h.values("orders", 1), ["x", "y"]);
}

#[test]
fn a_replay_after_the_broker_restarted_writes_nothing_twice() {
    let mut h = Harness::start();
    h.client().create_topic("t", 1, &[]).expect("topic");
    let mut broker = KafkaBroker::new(h.client());
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    applier.apply(&mut broker, &txns("t", 0..3)).expect("applied");
    let stored = applier.checkpoint().clone();
    // Eight more applied (past the broker's five-batch window) but the
    // checkpoint not stored: a crash of the bridge, and a broker restart.
    for i in 3..11 {
        applier.apply(&mut broker, &txns("t", i..i + 1)).expect("applied");
    }
    h.restart();
    let mut broker = KafkaBroker::new(h.client());
    let mut replayed = Applier::new(stored);
    let report = replayed.apply(&mut broker, &txns("t", 3..14)).expect("replayed");
    assert_eq!((report.records_already_present, report.records_appended), (8, 3));
    assert_eq!(h.values("t", 0), expected(0..14));
}

#[test]
fn the_brokers_produce_rules_apply_log_append_time_and_size() {
    let h = Harness::start();
    let mut client = h.client();
    client
        .create_topic(
            "stamped",
            1,
            &[("message.timestamp.type".into(), "LogAppendTime".into()), ("max.message.bytes".into(), "2000".into())],
        )
        .expect("topic");
    let mut broker = KafkaBroker::new(h.client());
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let mut old = send("stamped", 0, &"x".repeat(600));
    old.timestamp_ms = 1_000;
    let round = vec![txn(10, vec![old.clone(), old.clone(), old])];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!(report.records_appended, 3);
    let fetched = h.client().fetch("stamped", 0, 0, 1 << 20, Duration::ZERO).expect("fetch");
    assert_eq!(fetched.records.len(), 3);
    assert!(fetched.records.iter().all(|r| r.timestamp > 1_000), "the broker stamped its own time");
}

#[test]
fn records_for_a_deleted_topic_are_dropped_not_retried_forever() {
    let h = Harness::start();
    h.client().create_topic("kept", 1, &[]).expect("topic");
    let mut broker = KafkaBroker::new(h.client());
    let mut applier = Applier::new(Checkpoint::starting_at(0));
    let round = vec![txn(10, vec![send("never-created", 0, "x"), send("kept", 0, "y")])];
    let report = applier.apply(&mut broker, &round).expect("applied");
    assert_eq!((report.records_dropped, report.records_appended), (1, 1));
    assert_eq!(h.values("kept", 0), ["y"]);
}
