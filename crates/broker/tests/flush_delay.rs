//! `kafgres.flush_delay`: a partition's flushes start at least the delay
//! apart (appends made meanwhile join the next fdatasync), so an append right
//! after a flush waits; one that comes once the delay is over is flushed at
//! once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafgres_broker::metrics::BrokerMetrics;
use kafgres_broker::partition::{AppendOutcome, Housekeeping, Partition, PartitionSettings};
use kafgres_broker::replication::ReplicationState;
use kafgres_broker::settings::{SharedFlushDelay, SharedFlushPolicy};
use kafgres_log::{LogConfig, PartitionLog};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::validate_batches;

fn start(dir: &std::path::Path, delay: Duration) -> (Arc<Partition>, &'static BrokerMetrics) {
    let (log, _) = PartitionLog::open(dir, LogConfig::default(), kafgres_broker::now_ms()).expect("open the log");
    let metrics = BrokerMetrics::leaked();
    let settings = PartitionSettings {
        policy: SharedFlushPolicy::new(kafgres_broker::config::FlushPolicy::Fsync),
        flush_delay: SharedFlushDelay::new(delay),
        metrics,
        replication: Arc::new(ReplicationState::new(0, None, Duration::from_secs(10))),
    };
    let partition = Partition::start("t".into(), 0, log, &Housekeeping::default(), &Default::default(), settings);
    (partition, metrics)
}

/// Appends one batch of one record; the offset after it.
fn append(partition: &Partition) -> i64 {
    let batch = encode_batch(&[NewRecord { value: Some(b"v".to_vec()), ..Default::default() }], ProducerStamp::NONE);
    let headers = validate_batches(&batch).expect("a valid batch").headers;
    match partition.append(&batch, &headers, kafgres_broker::now_ms()).expect("append") {
        AppendOutcome::Appended(appended) => appended.last_offset + 1,
        other => panic!("append: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_appends_are_flushed_at_most_once_per_delay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let delay = Duration::from_millis(100);
    let (partition, metrics) = start(dir.path(), delay);
    let stop = Arc::new(AtomicBool::new(false));
    let appended = Arc::new(AtomicU64::new(0));
    // Four writers, each waiting for its batch to be durable, as acks=all
    // producers do: there is always an append waiting for the next flush.
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (partition, stop, appended) = (Arc::clone(&partition), Arc::clone(&stop), Arc::clone(&appended));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let end = append(&partition);
                    partition.wait_durable(end).await.expect("durable");
                    appended.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let run = Duration::from_secs(1);
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }
    let flushes = metrics.flushes.load(Ordering::Relaxed);
    let batches = appended.load(Ordering::Relaxed);
    // One flush at once, then one per delay at most (the run plus the last
    // writers' wait for their flush).
    let most = 2 + (run.as_millis() / delay.as_millis()) as u64 + 1;
    assert!(flushes >= 2 && flushes <= most, "{flushes} flushes in {run:?} with a {delay:?} delay (most {most})");
    assert!(batches >= 2 * flushes, "{batches} batches in {flushes} flushes: appends did not join the paced flushes");
    assert_eq!(partition.durable_offset(), partition.log_end_offset(), "everything appended is durable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_after_the_delay_has_passed_is_flushed_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Far longer than a small fdatasync: a flush that waited for the delay
    // would miss the timeout below.
    let delay = Duration::from_secs(3);
    let (partition, metrics) = start(dir.path(), delay);
    for round in 0..2 {
        let end = append(&partition);
        tokio::time::timeout(delay - Duration::from_millis(500), partition.wait_durable(end))
            .await
            .unwrap_or_else(|_| panic!("round {round}: the append waited for a flush delay already over"))
            .expect("durable");
        // Idle past the delay.
        tokio::time::sleep(delay + Duration::from_millis(100)).await;
    }
    assert_eq!(metrics.flushes.load(Ordering::Relaxed), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_right_after_a_flush_waits_out_the_delay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let delay = Duration::from_secs(1);
    let (partition, _) = start(dir.path(), delay);
    let first = append(&partition);
    partition.wait_durable(first).await.expect("durable");
    let appended = std::time::Instant::now();
    let second = append(&partition);
    partition.wait_durable(second).await.expect("durable");
    // The second flush starts no sooner than the delay after the first
    // started, which was before `appended`; so at least delay minus the
    // first flush's own time. Checked loosely: more than half the delay.
    let waited = appended.elapsed();
    assert!(waited >= delay / 2, "the second flush came {waited:?} after the append, within a {delay:?} delay");
}
