//! `bare`: the `sync` and `e2e` patterns without librdkafka.
//!
//! librdkafka hands every record from the application thread to a broker
//! thread and every answer back through a queue, so its round trip carries
//! thread wake-ups that no broker can remove and that both brokers of a
//! comparison pay alike. This workload sends the same requests from one
//! thread per connection with blocking I/O (kafgres-client: Produce v9 with
//! acks=all, Fetch v12 long polls, both served by Kafka 4.x and by Kafgres),
//! so what remains is the broker plus loopback TCP. Run against both brokers,
//! it splits a librdkafka figure into the broker's part and the client's.
//!
//! - `sync`: produce one record, wait for the answer, repeat.
//! - `e2e`: a producer thread sends one record per Produce at a fixed rate
//!   (each stamped with its send time, as in `e2e`); a consumer thread on a
//!   second connection, positioned at the log end before the first send,
//!   long-polls Fetch and records receive time minus send time.
//!
//! Both use partition 0 of the topic. It is a diagnostic, not one of the
//! issue's workloads: the comparison's figures stay librdkafka's.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafgres_client::client::OffsetSpec;
use kafgres_client::{Client, ClientError, NewRecord, PollWait};

use crate::cli::{BareArgs, BarePattern};
use crate::client::{self, Deadline};
use crate::error::BenchError;
use crate::payload;
use crate::workload::{latency_report, Outcome};

const PARTITION: i32 = 0;
const SYNC_QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)];
const E2E_QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p99", 0.99), ("p999", 0.999)];
const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Longest wait of one Fetch, and so how late the consumer notices it should stop.
const FETCH_WAIT: Duration = Duration::from_millis(100);
const FETCH_MAX_BYTES: i32 = 1 << 20;
/// Once the producer is done, how long the consumer may read nothing new.
const CONSUMER_IDLE_LIMIT: Duration = Duration::from_secs(10);

pub fn run(args: &BareArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let addr = broker_address(&args.common.bootstrap)?;
    let deadline = Deadline::after(args.common.deadline_or(DEFAULT_DEADLINE));
    let size = usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?;
    match args.pattern {
        BarePattern::Sync => sync(args, addr, size, deadline),
        BarePattern::E2e => e2e(args, addr, size, deadline),
    }
}

/// The first address `HOST:PORT` resolves to: the broker the bare clients
/// talk to, as the only broker (and so the partition's leader).
fn broker_address(bootstrap: &str) -> Result<SocketAddr, BenchError> {
    let first = bootstrap.split(',').next().unwrap_or(bootstrap).trim();
    first
        .to_socket_addrs()
        .map_err(|e| BenchError::Usage(format!("--bootstrap {first}: {e}")))?
        .next()
        .ok_or_else(|| BenchError::Usage(format!("--bootstrap {first} resolves to no address")))
}

fn connect(addr: SocketAddr, role: &str) -> Result<Client<PollWait>, BenchError> {
    Client::connect(addr, &format!("kafgres-bench-bare-{role}"), PollWait)
        .map_err(|source| BenchError::BareClient { action: format!("connecting the {role} to {addr}"), source })
}

fn record(value: &[u8]) -> NewRecord {
    let timestamp_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    NewRecord { key: None, value: Some(value.to_vec()), headers: Vec::new(), timestamp_ms }
}

/// Counts failed sends and keeps the first reason.
#[derive(Default)]
struct Failures {
    count: u64,
    first: Option<String>,
}

impl Failures {
    fn add(&mut self, err: &ClientError) {
        self.count += 1;
        self.first.get_or_insert_with(|| err.to_string());
    }

    fn report(&self, what: &str) {
        if let Some(first) = &self.first {
            eprintln!("kafgres-bench: {} {what} failed; first failure: {first}", self.count);
        }
    }
}

fn sync(args: &BareArgs, addr: SocketAddr, size: usize, deadline: Deadline) -> Result<Outcome, BenchError> {
    let mut producer = connect(addr, "producer")?;
    let value = payload::filler(size, 0x5eed);
    let total = args.warmup + args.count;
    let mut samples: Vec<(Duration, Duration)> = Vec::with_capacity(usize::try_from(args.count).unwrap_or(0));
    let mut origin: Option<Instant> = None;
    let mut failures = Failures::default();
    let mut attempted = 0u64;
    while attempted < total && !deadline.passed() && !producer.is_broken() {
        let measured = attempted >= args.warmup;
        attempted += 1;
        let batch = [record(&value)];
        let started = Instant::now();
        let result = producer.produce(&args.topic, PARTITION, &batch);
        let latency = started.elapsed();
        match result {
            Ok(_) if measured => samples.push((started - *origin.get_or_insert(started), latency)),
            Ok(_) => {}
            Err(err) => failures.add(&err),
        }
    }
    let error_count = failures.count + (total - attempted);
    failures.report("sends");
    if attempted < total {
        eprintln!("kafgres-bench: stopped early; {} sends not made", total - attempted);
    }
    let latency = latency_report(&samples, &SYNC_QUANTILES, args.samples_file.as_deref())?;
    let line = format!(
        "workload=bare-sync count={} errors={error_count} {latency} size={} warmup={}",
        args.count, args.size, args.warmup
    );
    Ok(Outcome { line, clean: error_count == 0 })
}

/// Shared by the producer (main thread) and the consumer thread.
struct Progress {
    producer_done: AtomicBool,
    /// Measured records acknowledged; valid once `producer_done` is set.
    acked_count: AtomicU64,
}

struct Sent {
    sent_count: u64,
    acked_count: u64,
    failures: Failures,
    send_phase: Duration,
}

struct Consumed {
    /// (send time in ns since the origin, latency), in read order.
    samples: Vec<(u64, Duration)>,
    failures: Failures,
}

fn e2e(args: &BareArgs, addr: SocketAddr, size: usize, deadline: Deadline) -> Result<Outcome, BenchError> {
    let mut consumer = connect(addr, "consumer")?;
    let mut producer = connect(addr, "producer")?;
    let (start_offset, _) = consumer
        .list_offsets(&args.topic, PARTITION, OffsetSpec::Latest)
        .map_err(|source| BenchError::BareClient { action: format!("ListOffsets of {}-0", args.topic), source })?;
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
        ^ (u64::from(std::process::id()) << 32);
    let (warmup_id, measured_id) = (seed, seed.wrapping_add(1));
    let origin = Instant::now();
    let progress = Progress { producer_done: AtomicBool::new(false), acked_count: AtomicU64::new(0) };
    let interval = Duration::from_secs_f64(1.0 / args.rate as f64);

    let (sent, consumed) = std::thread::scope(|scope| {
        let consumer_thread = std::thread::Builder::new()
            .name("bare-consumer".into())
            .spawn_scoped(scope, || {
                consume(&mut consumer, &args.topic, start_offset, measured_id, origin, &progress, deadline)
            })
            .map_err(BenchError::Thread);
        let sent = consumer_thread.as_ref().ok().map(|_| {
            let mut value = payload::filler(size, seed);
            let mut send = |stamp_id: u64, count: u64| {
                paced_sends(&mut producer, &args.topic, &mut value, stamp_id, count, interval, origin, deadline)
            };
            let warmup = send(warmup_id, args.warmup);
            warmup.failures.report("warm-up sends");
            // Warm-up failures are errors too, as in `e2e`.
            (warmup.failures.count, send(measured_id, args.count))
        });
        progress.acked_count.store(sent.as_ref().map_or(0, |(_, s)| s.acked_count), Ordering::Release);
        progress.producer_done.store(true, Ordering::Release);
        let consumed = match consumer_thread {
            Ok(handle) => handle.join().unwrap_or(Err(BenchError::ThreadPanicked)),
            Err(e) => Err(e),
        };
        (sent, consumed)
    });
    let consumed = consumed?;
    let (warmup_failed_count, sent) =
        sent.ok_or_else(|| BenchError::Usage("the consumer thread did not start".into()))?;

    sent.failures.report("sends");
    consumed.failures.report("fetches");
    let received_count = consumed.samples.len() as u64;
    let missing = sent.acked_count.saturating_sub(received_count);
    if missing > 0 {
        eprintln!("kafgres-bench: {missing} acknowledged records were not read back");
    }
    let unsent = args.count - sent.sent_count;
    let error_count = warmup_failed_count + sent.failures.count + consumed.failures.count + missing + unsent;
    let achieved_rate =
        if sent.send_phase > Duration::ZERO { sent.sent_count as f64 / sent.send_phase.as_secs_f64() } else { 0.0 };
    // `at`: send time, seconds since the first measured record read was sent.
    let first_ns = consumed.samples.iter().map(|&(sent_ns, _)| sent_ns).min().unwrap_or(0);
    let rows: Vec<(Duration, Duration)> =
        consumed.samples.iter().map(|&(sent_ns, l)| (Duration::from_nanos(sent_ns - first_ns), l)).collect();
    let latency = latency_report(&rows, &E2E_QUANTILES, args.samples_file.as_deref())?;
    let line = format!(
        "workload=bare-e2e rate={} count={} size={} sent={} received={received_count} errors={error_count} \
         achieved_rate={achieved_rate:.1} {latency} warmup={}",
        args.rate, args.count, args.size, sent.sent_count, args.warmup
    );
    Ok(Outcome { line, clean: error_count == 0 })
}

/// Sends `count` records stamped `stamp_id`, the n-th at phase start +
/// n * interval (a send behind schedule goes at once, stamped with its real
/// send time), each Produce answered before the next is sent.
#[allow(clippy::too_many_arguments)]
fn paced_sends(
    producer: &mut Client<PollWait>,
    topic: &str,
    value: &mut [u8],
    stamp_id: u64,
    count: u64,
    interval: Duration,
    origin: Instant,
    deadline: Deadline,
) -> Sent {
    let start = Instant::now();
    let mut sent = Sent { sent_count: 0, acked_count: 0, failures: Failures::default(), send_phase: Duration::ZERO };
    while sent.sent_count < count && !deadline.passed() && !producer.is_broken() {
        // The schedule, not a wait for work: the rate is the workload.
        let due = start + interval.saturating_mul(u32::try_from(sent.sent_count).unwrap_or(u32::MAX));
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        payload::write_stamp(value, stamp_id, origin.elapsed().as_nanos() as u64);
        let batch = [record(value)];
        sent.sent_count += 1;
        match producer.produce(topic, PARTITION, &batch) {
            Ok(_) => sent.acked_count += 1,
            Err(err) => sent.failures.add(&err),
        }
    }
    sent.send_phase = start.elapsed();
    sent
}

fn consume(
    consumer: &mut Client<PollWait>,
    topic: &str,
    mut offset: i64,
    measured_id: u64,
    origin: Instant,
    progress: &Progress,
    deadline: Deadline,
) -> Result<Consumed, BenchError> {
    let mut consumed = Consumed { samples: Vec::new(), failures: Failures::default() };
    let mut last_read = Instant::now();
    let mut done_seen: Option<Instant> = None;
    while !deadline.passed() && !consumer.is_broken() {
        if progress.producer_done.load(Ordering::Acquire) {
            let seen = *done_seen.get_or_insert_with(Instant::now);
            if consumed.samples.len() as u64 >= progress.acked_count.load(Ordering::Acquire)
                || last_read.max(seen).elapsed() >= CONSUMER_IDLE_LIMIT
            {
                break;
            }
        }
        let fetched = match consumer.fetch(topic, PARTITION, offset, FETCH_MAX_BYTES, FETCH_WAIT) {
            Ok(fetched) => fetched,
            Err(ClientError::OffsetOutOfRange { .. }) => {
                return Err(BenchError::Topic {
                    topic: topic.to_owned(),
                    reason: format!("offset {offset} left the log while the run read it"),
                })
            }
            Err(err) => {
                // Not retried: the acknowledged records left unread count as missing.
                consumed.failures.add(&err);
                break;
            }
        };
        let received_ns = origin.elapsed().as_nanos() as u64;
        for record in &fetched.records {
            let Some(sent_ns) = record.value.as_deref().and_then(|v| payload::read_stamp(v, measured_id)) else {
                continue; // a warm-up record, or another writer's
            };
            consumed.samples.push((sent_ns, Duration::from_nanos(received_ns.saturating_sub(sent_ns))));
            last_read = Instant::now();
        }
        offset = fetched.next_offset;
    }
    Ok(consumed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bootstrap_address_is_used() {
        assert_eq!(broker_address("127.0.0.1:9092").ok(), Some("127.0.0.1:9092".parse().unwrap()));
        assert_eq!(broker_address(" 127.0.0.1:9192 ,127.0.0.1:9092").ok(), Some("127.0.0.1:9192".parse().unwrap()));
        assert!(matches!(broker_address("127.0.0.1"), Err(BenchError::Usage(_))));
        assert!(matches!(broker_address(""), Err(BenchError::Usage(_))));
    }

    #[test]
    fn failures_keep_the_first_reason() {
        let mut failures = Failures::default();
        failures.add(&ClientError::Broken);
        failures.add(&ClientError::InvalidArgument("second".into()));
        assert_eq!(failures.count, 2);
        assert_eq!(failures.first.as_deref(), Some(ClientError::Broken.to_string().as_str()));
    }
}
