//! `e2e`: the time from handing a record to the producer until a consumer
//! reads it, at a fixed rate.
//!
//! A consumer is assigned to every partition at its current high watermark
//! (explicit offsets, so nothing produced afterwards can be skipped). The
//! producer then sends evenly spaced records in two phases:
//!
//! 1. warm-up, at the same rate, for at least `--warmup-s` and until the
//!    consumer has read one warm-up record: connections are up and the
//!    consumer is fetching, so the figures do not include a consumer that
//!    was still starting. Warm-up latencies are not counted.
//! 2. measured: `rate * seconds` records.
//!
//! Each record carries a stamp: the phase's id and its send time in
//! nanoseconds since a monotonic origin shared by both threads of this one
//! process (no clock synchronisation involved). The consumer thread records
//! receive time minus send time for every measured record. The sender wakes
//! at the next record's due time and hands librdkafka every record due by
//! then in one call (`rd_kafka_produce_batch`, each value copied with its
//! own stamp, the group to one partition, the topic's partitions in turn;
//! see crate::raw), and the consumer takes what was fetched in batches,
//! with one clock read per batch: one record per call on either side kept a
//! sender on this machine's two cores behind its schedule above ~350,000
//! records/s of 1 KiB. A sender that falls behind the schedule catches up
//! by sending at once, stamped with the actual send time; `achieved_rate`
//! shows how close it stayed. That hides
//! the time a late record waited for its turn (coordinated omission), so
//! `--latency-from scheduled` stamps each record with its due time instead:
//! the latency of an open-loop load, where records arrive on their schedule
//! whether or not the system kept up. `send_lag_max` is how far behind its
//! schedule the sender fell. Every acknowledged measured record not read
//! before the deadline is an error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as rdsys;

use crate::cli::{E2eArgs, LatencyFrom};
use crate::client::{self, Deadline, REQUEST_TIMEOUT};
use crate::error::BenchError;
use crate::events::{DeliveryQueue, Served};
use crate::payload;
use crate::raw::{ConsumerQueue, TopicProducer};
use crate::summary::Millis;
use crate::workload::{latency_report, Outcome};

const QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p99", 0.99), ("p999", 0.999)];
/// Extra time the deadline allows beyond warm-up and the send phase by default.
const DEFAULT_DEADLINE_SLACK: Duration = Duration::from_secs(60);
/// Longest warm-up: a consumer that has read nothing by then is broken.
const WARMUP_LIMIT: Duration = Duration::from_secs(30);
/// Once every record is acknowledged, how long the consumer may go without
/// reading a new one before it gives up on the rest.
const CONSUMER_IDLE_LIMIT: Duration = Duration::from_secs(10);
/// Upper bound of one consumer poll (it returns as soon as a record is there)
/// and so of how late the consumer notices that it should stop.
const POLL_WAIT: Duration = Duration::from_millis(100);
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(100);
/// Most records handed to librdkafka in one call (a sender that fell far
/// behind catches up in groups of this many).
const SEND_GROUP_MAX: usize = 1024;

/// Shared between the producer (main thread) and the consumer thread.
struct Progress {
    /// Set by the consumer when it reads its first warm-up record.
    warmup_read: AtomicBool,
    /// Set by the producer when the measured phase is over and drained.
    producer_done: AtomicBool,
    /// Measured records acknowledged, valid once `producer_done` is set.
    acked_count: AtomicU64,
    /// Start of the measured phase, in nanoseconds since the origin; set by
    /// the producer before its first measured send.
    measured_start_ns: AtomicU64,
}

/// The two stamp ids of a run: warm-up and measured records.
#[derive(Clone, Copy)]
struct RunIds {
    warmup: u64,
    measured: u64,
}

struct ConsumerResult {
    /// (send time in nanoseconds since the origin, latency), in read order.
    samples: Vec<(u64, Duration)>,
    duplicate_count: u64,
    client_error_count: u64,
}

pub fn run(args: &E2eArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let default_deadline = Duration::from_secs(args.seconds) + WARMUP_LIMIT + DEFAULT_DEADLINE_SLACK;
    let deadline = Deadline::after(args.common.deadline_or(default_deadline));
    let size = usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?;
    let total = args
        .rate
        .checked_mul(args.seconds)
        .filter(|&t| t <= 100_000_000)
        .ok_or_else(|| BenchError::Usage("--rate times --seconds must be at most 100 million".into()))?;

    // Consumer first, positioned at the current end of every partition.
    let consumer = client::consumer(&args.common)?;
    let watermarks = client::partition_watermarks(&consumer, &args.topic)?;
    let mut assignment = TopicPartitionList::new();
    for &(partition, _, high) in &watermarks {
        assignment
            .add_partition_offset(&args.topic, partition, Offset::Offset(high))
            .map_err(|source| BenchError::client("building the assignment", source))?;
    }
    consumer.assign(&assignment).map_err(|source| BenchError::client("assign", source))?;

    let message_timeout = Duration::from_millis(args.message_timeout_ms.into());
    let producer = client::producer(&args.common, &args.acks, Some(args.linger_ms), message_timeout, false)?;
    producer
        .client()
        .fetch_metadata(Some(&args.topic), REQUEST_TIMEOUT)
        .map_err(|source| BenchError::client(format!("Metadata for {}", args.topic), source))?;
    let queue = DeliveryQueue::of(&producer);

    let origin = Instant::now();
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
        ^ (u64::from(std::process::id()) << 32);
    let ids = RunIds { warmup: seed, measured: seed.wrapping_add(1) };
    let progress = Progress {
        warmup_read: AtomicBool::new(false),
        producer_done: AtomicBool::new(false),
        acked_count: AtomicU64::new(0),
        measured_start_ns: AtomicU64::new(0),
    };
    let filler = payload::filler(size, seed);
    let mut sender = PacedSender {
        producer: TopicProducer::new(&producer, &args.topic)?,
        queue: &queue,
        topic: &args.topic,
        size,
        values: (0..SEND_GROUP_MAX).flat_map(|_| filler.iter().copied()).collect(),
        partitions: watermarks.iter().map(|&(partition, _, _)| partition).collect(),
        next_partition: 0,
        pending: Vec::with_capacity(SEND_GROUP_MAX),
        slots: Vec::with_capacity(SEND_GROUP_MAX),
        reports: Served::default(),
        origin,
        deadline,
        interval_ns: 1e9 / args.rate as f64,
        latency_from: args.latency_from,
        send_lag_max: Duration::ZERO,
    };
    let warmup_min = Duration::from_secs(args.warmup_s);

    let (sent, consumer_result) = std::thread::scope(|scope| {
        let consumer_thread = std::thread::Builder::new()
            .name("e2e-consumer".into())
            .spawn_scoped(scope, || consume(&consumer, ids, origin, total, &progress, deadline))
            .map_err(BenchError::Thread);
        let sent = warm_up_then_measure(&mut sender, ids, total, warmup_min, &progress, consumer_thread.is_ok());
        // Whatever happened, let the consumer know how many to wait for.
        let acked = sent.as_ref().map(|s| s.measured_reports.delivered_count).unwrap_or(0);
        progress.acked_count.store(acked, Ordering::Release);
        progress.producer_done.store(true, Ordering::Release);
        let consumer_result = match consumer_thread {
            Ok(handle) => handle.join().unwrap_or(Err(BenchError::ThreadPanicked)),
            Err(e) => Err(e),
        };
        (sent, consumer_result)
    });
    let sent = sent?;
    let consumed = consumer_result?;

    let reports = &sent.measured_reports;
    let received_count = consumed.samples.len() as u64;
    let unreported = sent.sent_count.saturating_sub(reports.delivered_count + reports.failed_count);
    let missing = reports.delivered_count.saturating_sub(received_count);
    let unsent = total - sent.sent_count;
    let error_count = sent.warmup_failed_count + reports.failed_count + unreported + missing + unsent;
    if let Some(reason) = &reports.first_failure {
        eprintln!("kafgres-bench: {} deliveries failed; first failure: {reason}", reports.failed_count);
    }
    if sent.warmup_failed_count > 0 {
        eprintln!("kafgres-bench: {} warm-up records failed", sent.warmup_failed_count);
    }
    if missing > 0 {
        eprintln!("kafgres-bench: {missing} acknowledged records were not read back");
    }
    if unsent + unreported > 0 {
        eprintln!("kafgres-bench: deadline passed: {unsent} records not sent, {unreported} unacknowledged");
    }
    if consumed.duplicate_count > 0 {
        eprintln!("kafgres-bench: {} records read twice (counted once)", consumed.duplicate_count);
    }
    let achieved_rate =
        if sent.send_phase > Duration::ZERO { sent.sent_count as f64 / sent.send_phase.as_secs_f64() } else { 0.0 };
    let measured_start_ns = progress.measured_start_ns.load(Ordering::Acquire);
    let rows: Vec<(Duration, Duration)> = consumed
        .samples
        .iter()
        .map(|&(sent_ns, latency)| (Duration::from_nanos(sent_ns.saturating_sub(measured_start_ns)), latency))
        .collect();
    let latency = latency_report(&rows, &QUANTILES, args.samples_file.as_deref())?;
    let line = format!(
        "workload=e2e rate={} seconds={} size={} sent={} received={received_count} errors={error_count} \
         achieved_rate={achieved_rate:.1} {latency} warmup_records={} client_errors={} latency_from={} \
         send_lag_max={}",
        args.rate,
        args.seconds,
        args.size,
        sent.sent_count,
        sent.warmup_sent_count,
        consumed.client_error_count,
        args.latency_from.name(),
        Millis(sent.send_lag_max)
    );
    Ok(Outcome { line, clean: error_count == 0 })
}

struct SendOutcome {
    warmup_sent_count: u64,
    warmup_failed_count: u64,
    /// Measured records handed to the producer.
    sent_count: u64,
    /// Delivery reports of the measured records only.
    measured_reports: Served,
    /// Duration of the measured send phase.
    send_phase: Duration,
    /// How far behind its schedule the measured phase's sender fell at most.
    send_lag_max: Duration,
}

fn warm_up_then_measure(
    sender: &mut PacedSender<'_>,
    ids: RunIds,
    total: u64,
    warmup_min: Duration,
    progress: &Progress,
    consumer_running: bool,
) -> Result<SendOutcome, BenchError> {
    if !consumer_running {
        return Err(BenchError::Usage("the consumer thread did not start".into()));
    }
    // Warm-up, then wait for its reports so that they are not mixed with
    // the measured ones.
    let warmup_started = Instant::now();
    let (warmup_sent_count, _) = sender.phase(ids.warmup, u64::MAX, |_| {
        let elapsed = warmup_started.elapsed();
        (elapsed >= warmup_min && progress.warmup_read.load(Ordering::Acquire)) || elapsed >= WARMUP_LIMIT
    });
    sender.drain(warmup_sent_count);
    let warmup_reports = std::mem::take(&mut sender.reports);
    if let Some(fatal) = warmup_reports.fatal {
        return Err(BenchError::Fatal(fatal));
    }
    if !progress.warmup_read.load(Ordering::Acquire) {
        return Err(BenchError::Topic {
            topic: sender.topic.to_string(),
            reason: format!(
                "the consumer read none of {warmup_sent_count} warm-up records ({} acknowledged) within {}s",
                warmup_reports.delivered_count,
                warmup_started.elapsed().as_secs()
            ),
        });
    }
    eprintln!(
        "kafgres-bench: warm-up done after {warmup_sent_count} records in {:.1}s",
        warmup_started.elapsed().as_secs_f64()
    );

    progress.measured_start_ns.store(sender.origin.elapsed().as_nanos() as u64, Ordering::Release);
    sender.send_lag_max = Duration::ZERO;
    let (sent_count, send_phase) = sender.phase(ids.measured, total, |_| false);
    sender.drain(sent_count);
    let measured_reports = std::mem::take(&mut sender.reports);
    if let Some(fatal) = measured_reports.fatal {
        return Err(BenchError::Fatal(fatal));
    }
    Ok(SendOutcome {
        warmup_sent_count,
        warmup_failed_count: warmup_reports.failed_count
            + warmup_sent_count.saturating_sub(warmup_reports.delivered_count + warmup_reports.failed_count),
        sent_count,
        measured_reports,
        send_phase,
        send_lag_max: sender.send_lag_max,
    })
}

/// A producer sending stamped records on a fixed schedule.
struct PacedSender<'a> {
    producer: TopicProducer<'a>,
    queue: &'a DeliveryQueue<'a>,
    topic: &'a str,
    /// Bytes of one record's value.
    size: usize,
    /// SEND_GROUP_MAX values of `size` bytes, restamped for each group.
    values: Vec<u8>,
    /// The topic's partitions; each group goes to the next one in turn
    /// (sticky partitioning, as librdkafka does for keyless records).
    partitions: Vec<i32>,
    /// Index in `partitions` of the next group's partition.
    next_partition: usize,
    /// Indexes of the group's records not enqueued yet.
    pending: Vec<usize>,
    slots: Vec<rdsys::rd_kafka_message_t>,
    /// Delivery reports served since the last `mem::take`.
    reports: Served,
    origin: Instant,
    deadline: Deadline,
    interval_ns: f64,
    /// Which time each record is stamped with: its send or its due time.
    latency_from: LatencyFrom,
    /// Largest (send time - due time) since it was last reset.
    send_lag_max: Duration,
}

impl PacedSender<'_> {
    /// Sends records stamped with `stamp_id`, the n-th (from 0) due at
    /// phase start + n * interval, until `limit` are sent, `finished(sent so
    /// far)` or the deadline. Serves delivery reports while it waits.
    /// Returns how many it sent and how long the phase took.
    fn phase(&mut self, stamp_id: u64, limit: u64, mut finished: impl FnMut(u64) -> bool) -> (u64, Duration) {
        let start = Instant::now();
        let interval_ns = self.interval_ns;
        let due = |n: u64| start + Duration::from_nanos((n as f64 * interval_ns) as u64);
        let mut sent_count = 0u64;
        'groups: while sent_count < limit && !finished(sent_count) {
            let first_due = due(sent_count);
            // Until the first record's time: block on the event queue (whole
            // milliseconds, its resolution), then sleep off the rest.
            loop {
                if self.deadline.passed() || self.reports.fatal.is_some() {
                    break 'groups;
                }
                let now = Instant::now();
                if now >= first_due {
                    break;
                }
                let wait = first_due - now;
                if wait >= Duration::from_millis(1) {
                    self.reports.add(self.queue.serve_one(Duration::from_millis(wait.as_millis() as u64)));
                } else {
                    self.reports.add(self.queue.serve_one(Duration::ZERO));
                    std::thread::sleep(first_due.saturating_duration_since(Instant::now()));
                }
            }
            // Every record due by now, in one call.
            let now = Instant::now();
            self.send_lag_max = self.send_lag_max.max(now.saturating_duration_since(first_due));
            let due_by_now = ((now - start).as_nanos() as f64 / interval_ns) as u64 + 1;
            let group = due_by_now.saturating_sub(sent_count).clamp(1, SEND_GROUP_MAX as u64).min(limit - sent_count);
            let group = group as usize; // at most SEND_GROUP_MAX
            for (i, value) in self.values.chunks_exact_mut(self.size).take(group).enumerate() {
                let stamp = match self.latency_from {
                    LatencyFrom::Send => now,
                    LatencyFrom::Scheduled => due(sent_count + i as u64),
                };
                payload::write_stamp(value, stamp_id, stamp.saturating_duration_since(self.origin).as_nanos() as u64);
            }
            let enqueued = self.enqueue_group(group);
            sent_count += enqueued as u64;
            if enqueued < group {
                break 'groups;
            }
            self.reports.add(self.queue.serve_one(Duration::ZERO));
        }
        (sent_count, start.elapsed())
    }

    /// Hands the first `group` values to librdkafka, waiting on the event
    /// queue while its queue is full; how many it took (fewer only when the
    /// deadline passed or librdkafka refused them for another reason).
    fn enqueue_group(&mut self, group: usize) -> usize {
        let values = &self.values[..group * self.size];
        let partition = self.partitions[self.next_partition % self.partitions.len()];
        self.next_partition = self.next_partition.wrapping_add(1);
        self.pending.clear();
        self.pending.extend(0..group);
        let mut enqueued = 0;
        while !self.pending.is_empty() {
            let (taken, refusal) =
                self.producer.send_copies(partition, values, group, &mut self.pending, &mut self.slots);
            enqueued += taken;
            match refusal {
                None => {}
                Some(RDKafkaErrorCode::QueueFull) if !self.deadline.passed() => {
                    self.reports.add(self.queue.serve_one(QUEUE_FULL_WAIT.min(self.deadline.remaining())));
                }
                Some(RDKafkaErrorCode::QueueFull) => break,
                Some(err) => {
                    eprintln!("kafgres-bench: enqueue failed, stopping the producer: {err}");
                    break;
                }
            }
        }
        enqueued
    }

    /// Blocks on the event queue until `sent_count` reports are in (counted
    /// since the last `mem::take` of `reports`) or the deadline passes.
    fn drain(&mut self, sent_count: u64) {
        let before = self.reports.delivered_count + self.reports.failed_count;
        let rest =
            self.queue.serve_until(self.deadline.0, |s| before + s.delivered_count + s.failed_count >= sent_count);
        self.reports.add(rest);
    }
}

fn consume(
    consumer: &BaseConsumer,
    ids: RunIds,
    origin: Instant,
    total: u64,
    progress: &Progress,
    deadline: Deadline,
) -> Result<ConsumerResult, BenchError> {
    let mut queue = ConsumerQueue::of(consumer)?;
    let mut samples = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut next_offsets: HashMap<i32, i64> = HashMap::new();
    let mut duplicate_count = 0u64;
    let mut client_error_count = 0u64;
    let mut last_read = Instant::now();
    let mut producer_done_seen: Option<Instant> = None;
    loop {
        if deadline.passed() {
            break;
        }
        if progress.producer_done.load(Ordering::Acquire) {
            let done_seen = *producer_done_seen.get_or_insert_with(Instant::now);
            let acked = progress.acked_count.load(Ordering::Acquire);
            if samples.len() as u64 >= acked {
                break;
            }
            // Idle: nothing new since the producer finished or since the
            // last record, whichever is later.
            if last_read.max(done_seen).elapsed() >= CONSUMER_IDLE_LIMIT {
                break;
            }
        }
        // One clock read per batch: its records reached the application
        // together (a read per record cost the client more than the
        // broker's part of the run).
        let mut batch_received_ns = None;
        let mut read_measured = false;
        queue.consume_batch(
            POLL_WAIT.min(deadline.remaining()),
            |record| {
                let received_ns = *batch_received_ns.get_or_insert_with(|| origin.elapsed().as_nanos() as u64);
                if payload::read_stamp(record.value, ids.warmup).is_some() {
                    progress.warmup_read.store(true, Ordering::Release);
                    return;
                }
                let Some(sent_ns) = payload::read_stamp(record.value, ids.measured) else {
                    return; // another run's record
                };
                let next = next_offsets.entry(record.partition).or_insert(i64::MIN);
                if record.offset < *next {
                    duplicate_count += 1;
                    return;
                }
                *next = record.offset + 1;
                samples.push((sent_ns, Duration::from_nanos(received_ns.saturating_sub(sent_ns))));
                read_measured = true;
            },
            &mut client_error_count,
        )?;
        if read_measured {
            last_read = Instant::now();
        }
    }
    Ok(ConsumerResult { samples, duplicate_count, client_error_count })
}
