//! `produce`: how many records per second N producers get acknowledged.
//!
//! Each producer thread has its own client, connects and fetches metadata
//! before the clock starts, then all start together and send as fast as
//! librdkafka accepts records, serving delivery reports as they come. When
//! the send phase ends (after --seconds, or after its share of --count) each
//! waits for its outstanding reports. The elapsed time runs from the common
//! start to the last producer's last report, and only acknowledged records
//! count towards the rates.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;

use crate::cli::ProduceArgs;
use crate::client::{self, Deadline, REQUEST_TIMEOUT};
use crate::error::BenchError;
use crate::events::{DeliveryQueue, Served};
use crate::payload;
use crate::summary::Throughput;
use crate::workload::Outcome;

const DEFAULT_SECONDS: u64 = 10;
/// How long a producer waits on its queue when librdkafka's buffer is full;
/// it returns as soon as a report frees room.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(100);

/// When a producer's send phase ends.
#[derive(Clone, Copy)]
enum Share {
    Count(u64),
    Until(Instant),
}

#[derive(Default)]
struct ProducerStats {
    sent_count: u64,
    reports: Served,
    /// Records librdkafka refused to enqueue (other than a full buffer).
    enqueue_error_count: u64,
    first_enqueue_error: Option<String>,
    finished_at: Option<Instant>,
}

pub fn run(args: &ProduceArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let message_timeout = Duration::from_millis(args.message_timeout_ms.into());
    let seconds = if args.count.is_some() { None } else { Some(args.seconds.unwrap_or(DEFAULT_SECONDS)) };
    let default_deadline = match seconds {
        Some(s) => Duration::from_secs(s) + message_timeout + Duration::from_secs(60),
        None => Duration::from_secs(600),
    };
    let deadline = Deadline::after(args.common.deadline_or(default_deadline));
    let size = usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?;
    let producer_count = usize::try_from(args.producers).map_err(|_| BenchError::Usage("--producers".into()))?;
    let barrier = Barrier::new(producer_count + 1);

    let (started, results) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(producer_count);
        for index in 0..producer_count {
            let barrier = &barrier;
            let handle = std::thread::Builder::new()
                .name(format!("producer-{index}"))
                .spawn_scoped(scope, move || {
                    producer_thread(args, index, producer_count, size, seconds, message_timeout, deadline, barrier)
                })
                .map_err(BenchError::Thread);
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Threads already started wait at the barrier for a count
                    // that can no longer be reached; give up on the process.
                    eprintln!("kafgres-bench: {e}");
                    std::process::exit(2);
                }
            }
        }
        barrier.wait();
        let started = Instant::now();
        let results: Vec<_> =
            handles.into_iter().map(|h| h.join().unwrap_or(Err(BenchError::ThreadPanicked))).collect();
        (started, results)
    });

    let mut sent_count = 0u64;
    let mut reports = Served::default();
    let mut enqueue_error_count = 0u64;
    let mut first_enqueue_error = None;
    let mut finished_at = started;
    for result in results {
        let stats = result?;
        sent_count += stats.sent_count;
        reports.add(stats.reports);
        enqueue_error_count += stats.enqueue_error_count;
        if first_enqueue_error.is_none() {
            first_enqueue_error = stats.first_enqueue_error;
        }
        finished_at = finished_at.max(stats.finished_at.unwrap_or(finished_at));
    }
    if let Some(fatal) = reports.fatal {
        return Err(BenchError::Fatal(fatal));
    }
    let unreported = sent_count.saturating_sub(reports.delivered_count + reports.failed_count);
    if unreported > 0 {
        eprintln!("kafgres-bench: deadline passed with {unreported} records unacknowledged");
    }
    if let Some(reason) = &reports.first_failure {
        eprintln!("kafgres-bench: {} deliveries failed; first failure: {reason}", reports.failed_count);
    }
    if let Some(reason) = &first_enqueue_error {
        eprintln!("kafgres-bench: {enqueue_error_count} records not enqueued: {reason}");
    }
    let mut error_count = reports.failed_count + unreported + enqueue_error_count;
    // With --count, records a producer never got to send are missing too.
    if let Some(count) = args.count {
        error_count += count.saturating_sub(sent_count + enqueue_error_count);
    }
    let throughput = Throughput {
        record_count: reports.delivered_count,
        byte_count: reports.delivered_count * args.size,
        elapsed: finished_at - started,
    };
    let line = format!(
        "workload=produce producers={} size={} acks={} records={} errors={} {}",
        args.producers, args.size, args.acks, reports.delivered_count, error_count, throughput
    );
    Ok(Outcome { line, clean: error_count == 0 })
}

#[allow(clippy::too_many_arguments)]
fn producer_thread(
    args: &ProduceArgs,
    index: usize,
    producer_count: usize,
    size: usize,
    seconds: Option<u64>,
    message_timeout: Duration,
    deadline: Deadline,
    barrier: &Barrier,
) -> Result<ProducerStats, BenchError> {
    // Set up before the barrier; on failure still reach the barrier so the
    // others are not left waiting, then report the error.
    let setup = (|| {
        let producer = client::producer(&args.common, &args.acks, args.linger_ms, message_timeout, index > 0)?;
        // Connect and learn the partitions now, outside the measured time.
        producer
            .client()
            .fetch_metadata(Some(&args.topic), REQUEST_TIMEOUT)
            .map_err(|source| BenchError::client(format!("Metadata for {}", args.topic), source))?;
        Ok::<_, BenchError>(producer)
    })();
    barrier.wait();
    let producer = setup?;
    let share = match (args.count, seconds) {
        (Some(count), _) => {
            // Split as evenly as possible; the first producers take the remainder.
            let n = producer_count as u64;
            Share::Count(count / n + u64::from((index as u64) < count % n))
        }
        (None, Some(s)) => Share::Until(Instant::now() + Duration::from_secs(s)),
        (None, None) => Share::Until(Instant::now()),
    };
    let queue = DeliveryQueue::of(&producer);
    let value = payload::filler(size, 0x5eed + index as u64);
    let mut stats = ProducerStats::default();

    loop {
        let more = match share {
            Share::Count(n) => stats.sent_count + stats.enqueue_error_count < n,
            Share::Until(end) => Instant::now() < end,
        };
        if !more || deadline.passed() || stats.reports.fatal.is_some() {
            break;
        }
        match producer.send(BaseRecord::<(), [u8]>::to(&args.topic).payload(&value)) {
            Ok(()) => stats.sent_count += 1,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                // Buffer full: block until a report frees room.
                stats.reports.add(queue.serve_one(QUEUE_FULL_WAIT.min(deadline.remaining())));
                continue;
            }
            Err((err, _)) => {
                // Anything else (unknown topic, record too large) would fail
                // every record the same way: count it and stop this producer.
                stats.enqueue_error_count += 1;
                stats.first_enqueue_error.get_or_insert_with(|| err.to_string());
                break;
            }
        }
        // Serve whatever reports are ready, without waiting.
        stats.reports.add(queue.serve_one(Duration::ZERO));
    }

    let sent = stats.sent_count;
    let before = stats.reports.delivered_count + stats.reports.failed_count;
    let rest = queue.serve_until(deadline.0, |s| before + s.delivered_count + s.failed_count >= sent);
    stats.reports.add(rest);
    stats.finished_at = Some(Instant::now());
    Ok(stats)
}
