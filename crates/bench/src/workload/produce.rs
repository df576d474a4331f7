//! `produce`: how many records per second N producers get acknowledged.
//!
//! Each producer thread has its own client, connects and fetches metadata
//! before the clock starts, then all start together and send as fast as
//! librdkafka accepts records, serving delivery reports as they come. When
//! the send phase ends (after --seconds, or after its share of --count) each
//! waits for its outstanding reports. The elapsed time runs from the common
//! start to the last producer's last report, and only acknowledged records
//! count towards the rates.
//!
//! The engine ([`Plan`], [`run_plan`]) is shared with `partitions`, which
//! differs only in its defaults and in choosing each record's partition
//! itself ([`Partitioning::RoundRobin`]).

use std::sync::Barrier;
use std::time::{Duration, Instant};

use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;

use crate::cli::{Common, ProduceArgs};
use crate::client::{self, Deadline, REQUEST_TIMEOUT};
use crate::error::BenchError;
use crate::events::{DeliveryQueue, Served};
use crate::payload;
use crate::raw::TopicProducer;
use crate::summary::Throughput;
use crate::workload::Outcome;

const DEFAULT_SECONDS: u64 = 10;
/// How long a producer waits on its queue when librdkafka's buffer is full;
/// it returns as soon as a report frees room.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(100);
/// Unpaced, a producer enqueues this many records per librdkafka call
/// (`rd_kafka_produce_batch`, see crate::raw), and looks at the clock and
/// serves ready delivery reports once per call: per record, each costs a
/// clock read or a lock, a visible share of a 100-byte record's cost.
const RECORDS_PER_CALL: u64 = 64;

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

/// Where each producer sends its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioning {
    /// Sticky, as librdkafka's partitioner treats keyless records: each
    /// group of [`RECORDS_PER_CALL`] records goes to one partition, the next
    /// group to the next partition (producer `i` starts at partition `i`).
    Sticky,
    /// Producer `i` of `n` sends its k-th record to partition
    /// `(i * P / n + k) mod P`: every producer cycles through all P
    /// partitions, each starting at a different one. With several topics of
    /// P partitions each, the cycle runs over every partition of every topic
    /// (topic after topic). Every producer checks before the clock starts
    /// that each topic has exactly P partitions.
    RoundRobin { partition_count: i32 },
}

impl Partitioning {
    /// The partition of the `record_index`-th record of producer `index` of
    /// `producer_count`, for round-robin (None for sticky: see [`Self::group_partition`]).
    #[cfg(test)]
    fn partition(self, index: usize, producer_count: usize, record_index: u64) -> Option<i32> {
        self.place(index, producer_count, 1, record_index).map(|(_, partition)| partition)
    }

    /// The (topic index, partition) of the `record_index`-th record of
    /// producer `index` of `producer_count` over `topic_count` topics, for
    /// round-robin (None for sticky).
    fn place(self, index: usize, producer_count: usize, topic_count: usize, record_index: u64) -> Option<(usize, i32)> {
        match self {
            Partitioning::Sticky => None,
            Partitioning::RoundRobin { partition_count } => {
                let p = u64::try_from(partition_count).ok().filter(|&p| p > 0)?;
                let all = p * topic_count.max(1) as u64;
                let first = index as u64 * all / producer_count.max(1) as u64;
                let global = (first + record_index % all) % all;
                Some((usize::try_from(global / p).ok()?, i32::try_from(global % p).ok()?))
            }
        }
    }
}

/// The partition of a sticky producer's `call_index`-th group, given the
/// topic's `known_partitions`.
fn group_partition(index: usize, known_partitions: i32, call_index: u64) -> i32 {
    let known = u64::try_from(known_partitions).unwrap_or(0).max(1);
    ((index as u64 + call_index) % known) as i32
}

/// One produce run: everything `produce` and `partitions` decide.
pub struct Plan<'a> {
    pub common: &'a Common,
    /// One topic, or (round-robin only) several of the same partition count.
    pub topics: &'a [String],
    pub producer_count: usize,
    /// Record value size in bytes.
    pub size: usize,
    /// Send exactly this many records in total, or (None) for `seconds`.
    pub count: Option<u64>,
    pub seconds: Option<u64>,
    /// Records per second for all producers together, or (None) unlimited.
    pub rate: Option<u64>,
    pub acks: &'a str,
    pub linger_ms: Option<u32>,
    pub message_timeout: Duration,
    /// librdkafka settings of this workload, applied before the user's `--set`.
    pub client_settings: Vec<(&'static str, String)>,
    pub partitioning: Partitioning,
}

/// What a produce run achieved.
pub struct Totals {
    pub delivered_count: u64,
    pub error_count: u64,
    pub throughput: Throughput,
}

pub fn run(args: &ProduceArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let topics = [args.topic.clone()];
    let plan = Plan {
        common: &args.common,
        topics: &topics,
        producer_count: usize::try_from(args.producers).map_err(|_| BenchError::Usage("--producers".into()))?,
        size: usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?,
        count: args.count,
        seconds: if args.count.is_some() { None } else { Some(args.seconds.unwrap_or(DEFAULT_SECONDS)) },
        rate: args.rate,
        acks: &args.acks,
        linger_ms: args.linger_ms,
        message_timeout: Duration::from_millis(args.message_timeout_ms.into()),
        client_settings: Vec::new(),
        partitioning: Partitioning::Sticky,
    };
    let totals = run_plan(&plan)?;
    let mut line = format!(
        "workload=produce producers={} size={} acks={} records={} errors={} {}",
        args.producers, args.size, args.acks, totals.delivered_count, totals.error_count, totals.throughput
    );
    if let Some(rate) = args.rate {
        line.push_str(&format!(" rate={rate}"));
    }
    Ok(Outcome { line, clean: totals.error_count == 0 })
}

/// Runs `plan` against a topic that already exists.
pub fn run_plan(plan: &Plan<'_>) -> Result<Totals, BenchError> {
    let default_deadline = match plan.seconds {
        Some(s) => Duration::from_secs(s) + plan.message_timeout + Duration::from_secs(60),
        None => Duration::from_secs(600),
    };
    let deadline = Deadline::after(plan.common.deadline_or(default_deadline));
    let producer_count = plan.producer_count;
    let barrier = Barrier::new(producer_count + 1);

    let (started, results) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(producer_count);
        for index in 0..producer_count {
            let barrier = &barrier;
            let handle = std::thread::Builder::new()
                .name(format!("producer-{index}"))
                .spawn_scoped(scope, move || producer_thread(plan, index, deadline, barrier))
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
    // With a count, records a producer never got to send are missing too.
    if let Some(count) = plan.count {
        error_count += count.saturating_sub(sent_count + enqueue_error_count);
    }
    let throughput = Throughput {
        record_count: reports.delivered_count,
        byte_count: reports.delivered_count * plan.size as u64,
        elapsed: finished_at - started,
    };
    Ok(Totals { delivered_count: reports.delivered_count, error_count, throughput })
}

fn producer_thread(
    plan: &Plan<'_>,
    index: usize,
    deadline: Deadline,
    barrier: &Barrier,
) -> Result<ProducerStats, BenchError> {
    // Set up before the barrier; on failure still reach the barrier so the
    // others are not left waiting, then report the error.
    let setup = (|| {
        let producer = client::producer_with(
            plan.common,
            plan.acks,
            plan.linger_ms,
            plan.message_timeout,
            &plan.client_settings,
            index > 0,
        )?;
        // Connect and learn the partitions now, outside the measured time:
        // one topic's metadata, or every topic's at once.
        let first_topic = plan.topics.first().ok_or_else(|| BenchError::Usage("no topic".into()))?;
        let asked = (plan.topics.len() == 1).then_some(first_topic.as_str());
        let metadata = producer
            .client()
            .fetch_metadata(asked, REQUEST_TIMEOUT)
            .map_err(|source| BenchError::client(format!("Metadata for {first_topic}"), source))?;
        let mut known_first = 0;
        for topic in plan.topics {
            let known = metadata.topics().iter().find(|t| t.name() == topic).map_or(0, |t| t.partitions().len());
            let known = i32::try_from(known).unwrap_or(i32::MAX);
            if known == 0 {
                return Err(BenchError::Topic {
                    topic: topic.clone(),
                    reason: "has no partitions in the metadata (create it with --create-partitions P)".into(),
                });
            }
            if let Partitioning::RoundRobin { partition_count } = plan.partitioning {
                if known != partition_count {
                    return Err(BenchError::Topic {
                        topic: topic.clone(),
                        reason: format!("has {known} partitions, the run needs exactly {partition_count}"),
                    });
                }
            }
            if topic == first_topic {
                known_first = known;
            }
        }
        Ok::<_, BenchError>((producer, known_first))
    })();
    barrier.wait();
    let (producer, known_partitions) = setup?;
    let share = match (plan.count, plan.seconds) {
        (Some(count), _) => {
            // Split as evenly as possible; the first producers take the remainder.
            let n = plan.producer_count as u64;
            Share::Count(count / n + u64::from((index as u64) < count % n))
        }
        (None, Some(s)) => Share::Until(Instant::now() + Duration::from_secs(s)),
        (None, None) => Share::Until(Instant::now()),
    };
    let queue = DeliveryQueue::of(&producer);
    let topics: Vec<TopicProducer<'_>> =
        plan.topics.iter().map(|name| TopicProducer::new(&producer, name)).collect::<Result<_, _>>()?;
    // Sent without copying (see crate::raw), so it must outlive every
    // delivery, including any the producer's drop still waits for: leaked,
    // one value per producer thread for the life of the process.
    let value: &'static [u8] = Box::leak(payload::filler(plan.size, 0x5eed + index as u64).into_boxed_slice());
    let mut stats = ProducerStats::default();
    // With a rate, this producer's k-th record is due at paced_from + k * interval.
    let interval = plan.rate.map(|rate| Duration::from_secs_f64(plan.producer_count as f64 / rate as f64));
    let paced_from = Instant::now();

    let mut partitions = Vec::with_capacity(RECORDS_PER_CALL as usize);
    let mut slots = Vec::with_capacity(RECORDS_PER_CALL as usize);
    let mut calls = 0u64;
    loop {
        let attempted = stats.sent_count + stats.enqueue_error_count;
        let left = match share {
            Share::Count(n) => n.saturating_sub(attempted),
            Share::Until(end) => u64::from(Instant::now() < end) * RECORDS_PER_CALL,
        };
        if left == 0 || deadline.passed() || stats.reports.fatal.is_some() {
            break;
        }
        // Paced: one record when it is due. Unpaced: a group per call.
        let group = match interval {
            Some(interval) => {
                let due = paced_from + interval.mul_f64(attempted as f64);
                let now = Instant::now();
                if now < due {
                    // Not yet due: serve reports meanwhile, blocking on the
                    // queue until the due time at most (no sleep, no spin).
                    stats.reports.add(queue.serve_one((due - now).min(deadline.remaining())));
                    continue;
                }
                1
            }
            None => left.min(RECORDS_PER_CALL),
        };
        let (enqueued, refused) = match plan.partitioning {
            Partitioning::Sticky => {
                calls += 1;
                topics[0].send_group(group_partition(index, known_partitions, calls), group as usize, value, &mut slots)
            }
            Partitioning::RoundRobin { .. } => {
                // The group's records in cycle order, sent one run of the
                // same topic at a time (a run ends where the cycle moves on
                // to the next topic).
                let mut enqueued = 0;
                let mut refused = None;
                let mut k = 0;
                while k < group && refused.is_none() {
                    let place =
                        |k| plan.partitioning.place(index, plan.producer_count, topics.len(), stats.sent_count + k);
                    let Some((topic_index, _)) = place(k) else { break };
                    partitions.clear();
                    while k < group {
                        match place(k) {
                            Some((t, partition)) if t == topic_index => partitions.push(partition),
                            _ => break,
                        }
                        k += 1;
                    }
                    let (sent, error) = topics[topic_index].send_spread(&partitions, value, &mut slots);
                    enqueued += sent;
                    refused = error;
                }
                (enqueued, refused)
            }
        };
        stats.sent_count += enqueued as u64;
        match refused {
            None => {}
            Some(RDKafkaErrorCode::QueueFull) => {
                // Buffer full: block until a report frees room.
                stats.reports.add(queue.serve_one(QUEUE_FULL_WAIT.min(deadline.remaining())));
                continue;
            }
            Some(code) => {
                // Anything else (unknown topic, record too large) would fail
                // every record the same way: count them and stop this producer.
                stats.enqueue_error_count += group - enqueued as u64;
                stats.first_enqueue_error.get_or_insert_with(|| format!("librdkafka refused the record: {code}"));
                break;
            }
        }
        // Serve whatever reports are ready, without waiting.
        stats.reports.add(queue.serve_one(Duration::ZERO));
    }
    drop(topics);

    let sent = stats.sent_count;
    let before = stats.reports.delivered_count + stats.reports.failed_count;
    let rest = queue.serve_until(deadline.0, |s| before + s.delivered_count + s.failed_count >= sent);
    stats.reports.add(rest);
    stats.finished_at = Some(Instant::now());
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_cycles_every_partition_from_a_staggered_start() {
        let rr = Partitioning::RoundRobin { partition_count: 1000 };
        // 200 producers over 1000 partitions: producer i starts at 5 * i.
        assert_eq!(rr.partition(0, 200, 0), Some(0));
        assert_eq!(rr.partition(1, 200, 0), Some(5));
        assert_eq!(rr.partition(199, 200, 0), Some(995));
        assert_eq!(rr.partition(199, 200, 5), Some(0));
        let seen: std::collections::BTreeSet<_> = (0..1000).filter_map(|k| rr.partition(7, 200, k)).collect();
        assert_eq!(seen.len(), 1000);
        assert_eq!(rr.partition(7, 200, 1000), rr.partition(7, 200, 0));
    }

    #[test]
    fn round_robin_over_several_topics_visits_every_partition_of_each_once_per_cycle() {
        let rr = Partitioning::RoundRobin { partition_count: 100 };
        // 200 producers over 100 topics of 100 partitions: producer i starts at 50 * i.
        assert_eq!(rr.place(0, 200, 100, 0), Some((0, 0)));
        assert_eq!(rr.place(3, 200, 100, 0), Some((1, 50)));
        assert_eq!(rr.place(3, 200, 100, 50), Some((2, 0)), "past a topic's last partition comes the next topic");
        assert_eq!(rr.place(199, 200, 100, 50), Some((0, 0)), "past the last topic comes the first");
        let seen: std::collections::BTreeSet<_> = (0..10_000).filter_map(|k| rr.place(11, 200, 100, k)).collect();
        assert_eq!(seen.len(), 10_000);
        assert_eq!(rr.place(11, 200, 100, 10_000), rr.place(11, 200, 100, 0));
        assert_eq!(Partitioning::Sticky.place(0, 1, 3, 0), None);
    }

    #[test]
    fn sticky_groups_cycle_the_partitions_from_the_producers_index() {
        assert_eq!(Partitioning::Sticky.partition(3, 4, 9), None);
        assert_eq!(Partitioning::RoundRobin { partition_count: 0 }.partition(0, 1, 0), None);
        // Producer 2 of a 3-partition topic: groups go to 0, 1, 2, 0, ...
        // from call 1 on (2 + 1 = 3 ≡ 0), so every partition gets groups.
        let groups: Vec<i32> = (1..=4).map(|call| group_partition(2, 3, call)).collect();
        assert_eq!(groups, [0, 1, 2, 0]);
        assert_eq!(group_partition(0, 1, 17), 0);
        assert_eq!(group_partition(5, 0, 1), 0, "no partitions known: partition 0, never a division by zero");
    }
}
