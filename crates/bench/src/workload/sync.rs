//! `sync`: the latency of one acknowledged write, with nothing else in flight.
//!
//! One producer (acks=all, linger.ms=0) sends a record, then blocks on its
//! event queue until that record's delivery report arrives, then sends the
//! next. The first `warmup` round trips (connection set-up, metadata) are left
//! out of the figures; every failure, warmup or not, is counted in `errors`.

use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord};

use crate::cli::SyncArgs;
use crate::client::{self, Deadline};
use crate::error::BenchError;
use crate::events::DeliveryQueue;
use crate::payload;
use crate::workload::{latency_report, Outcome};

const QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)];
const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

enum SendResult {
    Delivered,
    Failed(String),
    /// The run's deadline passed with the record still unacknowledged.
    Unfinished,
}

pub fn run(args: &SyncArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let deadline = Deadline::after(args.common.deadline_or(DEFAULT_DEADLINE));
    let message_timeout = Duration::from_millis(args.message_timeout_ms.into());
    let producer = client::producer(&args.common, "all", Some(0), message_timeout, false)?;
    let queue = DeliveryQueue::of(&producer);
    let size = usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?;
    let value = payload::filler(size, 0x5eed);

    // (start of the send relative to the first measured one, latency)
    let mut samples: Vec<(Duration, Duration)> = Vec::with_capacity(usize::try_from(args.count).unwrap_or(0));
    let mut measured_origin: Option<Instant> = None;
    let mut error_count = 0u64;
    let mut first_failure: Option<String> = None;
    let total = args.warmup + args.count;
    let mut attempted = 0u64;
    while attempted < total && !deadline.passed() {
        let measured = attempted >= args.warmup;
        attempted += 1;
        let started = Instant::now();
        let result = send_and_wait(&producer, &queue, &args.topic, &value, deadline)?;
        let latency = started.elapsed();
        match result {
            SendResult::Delivered if measured => {
                let origin = *measured_origin.get_or_insert(started);
                samples.push((started - origin, latency));
            }
            SendResult::Delivered => {}
            SendResult::Failed(reason) => {
                error_count += 1;
                first_failure.get_or_insert(reason);
            }
            SendResult::Unfinished => {
                error_count += 1;
                break;
            }
        }
    }
    // Sends the deadline left no time for are failures too.
    let skipped = total - attempted;
    if skipped > 0 {
        eprintln!("kafgres-bench: deadline passed; {skipped} sends not made");
    }
    error_count += skipped;
    if let Some(reason) = &first_failure {
        eprintln!("kafgres-bench: {error_count} sends failed; first failure: {reason}");
    }

    let latency = latency_report(&samples, &QUANTILES, args.samples_file.as_deref())?;
    let line = format!(
        "workload=sync count={} errors={} {latency} size={} warmup={}",
        args.count, error_count, args.size, args.warmup
    );
    Ok(Outcome { line, clean: error_count == 0 })
}

/// Sends one record and blocks on the event queue until its report arrives.
/// With one record in flight, the first report is this record's.
fn send_and_wait(
    producer: &BaseProducer,
    queue: &DeliveryQueue<'_>,
    topic: &str,
    value: &[u8],
    deadline: Deadline,
) -> Result<SendResult, BenchError> {
    if let Err((err, _record)) = producer.send(BaseRecord::<(), [u8]>::to(topic).payload(value)) {
        return Ok(SendResult::Failed(format!("enqueue: {err}")));
    }
    let served = queue.serve_until(deadline.0, |s| s.delivered_count + s.failed_count >= 1);
    if let Some(fatal) = served.fatal {
        return Err(BenchError::Fatal(fatal));
    }
    Ok(if served.delivered_count >= 1 {
        SendResult::Delivered
    } else if served.failed_count >= 1 {
        SendResult::Failed(served.first_failure.unwrap_or_default())
    } else {
        SendResult::Unfinished
    })
}
