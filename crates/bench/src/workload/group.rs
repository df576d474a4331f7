//! `group`: consumers in one group reading what other processes produce, the
//! shape of a fleet of services consuming many topics.
//!
//! `--consumers` threads, each with its own client, join one group
//! subscribed to the topic (or, with `--topics N`, to `<topic>-0` ..
//! `<topic>-N-1`), starting at the log end (`auto.offset.reset=latest`), and
//! read for `--seconds` from the start. The run reports how long the group
//! took until every partition of the topics was assigned to one of its
//! members (so a group's members all run in this one process), the
//! records read, and end-to-end latency: the time of the read less the
//! record's timestamp (CreateTime: librdkafka stamps a record when it is
//! produced, so the producers must run on this machine's clock), over the
//! records read once every partition was assigned (what rebalancing delays
//! is in the assignment time instead). Milliseconds, as record timestamps
//! are. Nothing checks the records: `partitions` counts what it produced.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};

use crate::cli::GroupArgs;
use crate::error::BenchError;
use crate::workload::partitions::topic_names;
use crate::workload::{latency_report, Outcome};

const QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p99", 0.99), ("p999", 0.999)];
const POLL_WAIT: Duration = Duration::from_millis(100);
/// How often each consumer publishes its assignment's size (reading a
/// 10,000-partition assignment on every poll would cost the client more).
const ASSIGNMENT_CHECK: Duration = Duration::from_millis(250);

/// What one consumer thread read: (read at, latency) pairs and its count.
struct Reads {
    samples: Vec<(Instant, Duration)>,
    records: u64,
    errors: u64,
    first_error: Option<String>,
}

pub fn run(args: &GroupArgs) -> Result<Outcome, BenchError> {
    let topics = topic_names(&args.topic, args.topics);
    let group = args.group.clone().unwrap_or_else(|| format!("kafgres-bench-group-{}", std::process::id()));
    let consumer_count = usize::try_from(args.consumers).map_err(|_| BenchError::Usage("--consumers".into()))?;
    let partition_total = partition_count(args, &topics)?;
    let assigned: Arc<Vec<AtomicUsize>> = Arc::new((0..consumer_count).map(|_| AtomicUsize::new(0)).collect());
    let started = Instant::now();
    let end = started + Duration::from_secs(args.seconds);

    let (all_assigned_at, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..consumer_count)
            .map(|index| {
                let (topics, group, assigned) = (&topics, &group, Arc::clone(&assigned));
                std::thread::Builder::new()
                    .name(format!("consumer-{index}"))
                    .spawn_scoped(scope, move || consume(args, topics, group, index, &assigned, end))
                    .map_err(BenchError::Thread)
            })
            .collect();
        // Watch the members' assignments until they cover every partition.
        let mut all_assigned_at = None;
        while Instant::now() < end && all_assigned_at.is_none() {
            if assigned.iter().map(|a| a.load(Ordering::Relaxed)).sum::<usize>() >= partition_total {
                all_assigned_at = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let results: Vec<_> =
            handles.into_iter().map(|h| h.and_then(|h| h.join().unwrap_or(Err(BenchError::ThreadPanicked)))).collect();
        (all_assigned_at, results)
    });

    let mut samples = Vec::new();
    let (mut records, mut errors, mut first_error) = (0u64, 0u64, None);
    for result in results {
        let reads = result?;
        records += reads.records;
        errors += reads.errors;
        first_error = first_error.or(reads.first_error);
        if let Some(at) = all_assigned_at {
            samples.extend(
                reads
                    .samples
                    .into_iter()
                    .filter(|(read_at, _)| *read_at >= at)
                    .map(|(read_at, latency)| (read_at - started, latency)),
            );
        }
    }
    if let Some(reason) = &first_error {
        eprintln!("kafgres-bench: {errors} consumer errors; first: {reason}");
    }
    let assigned_s = all_assigned_at.map_or("never".to_string(), |at| format!("{:.3}", (at - started).as_secs_f64()));
    let latency = latency_report(&samples, &QUANTILES, None)?;
    let line = format!(
        "workload=group topics={} partitions={partition_total} consumers={consumer_count} protocol={} \
         seconds={} assigned_after_s={assigned_s} records={records} measured_records={} errors={errors} {latency}",
        topics.len(),
        args.group_protocol,
        args.seconds,
        samples.len(),
    );
    Ok(Outcome { line, clean: errors == 0 && all_assigned_at.is_some() })
}

/// The partitions of every topic, from one metadata request.
fn partition_count(args: &GroupArgs, topics: &[String]) -> Result<usize, BenchError> {
    let consumer = crate::client::consumer(&args.common)?;
    let metadata = consumer
        .fetch_metadata(None, crate::client::REQUEST_TIMEOUT)
        .map_err(|source| BenchError::client("Metadata".to_string(), source))?;
    let mut total = 0;
    for topic in topics {
        let count = metadata.topics().iter().find(|t| t.name() == topic).map_or(0, |t| t.partitions().len());
        if count == 0 {
            return Err(BenchError::Topic { topic: topic.clone(), reason: "does not exist (nothing to read)".into() });
        }
        total += count;
    }
    Ok(total)
}

fn consume(
    args: &GroupArgs,
    topics: &[String],
    group: &str,
    index: usize,
    assigned: &[AtomicUsize],
    end: Instant,
) -> Result<Reads, BenchError> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.common.bootstrap)
        .set("group.id", group)
        .set("group.protocol", &args.group_protocol)
        .set("auto.offset.reset", "latest")
        .set("enable.partition.eof", "false");
    for (key, value) in &args.common.settings {
        config.set(key, value);
    }
    if index == 0 {
        let mut pairs: Vec<String> = config.config_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        eprintln!("kafgres-bench: consumer config: {}", pairs.join(" "));
    }
    let consumer: BaseConsumer =
        config.create().map_err(|source| BenchError::ClientCreation { role: "group consumer", source })?;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&names).map_err(|source| BenchError::client("subscribe".to_string(), source))?;
    let mut reads = Reads { samples: Vec::new(), records: 0, errors: 0, first_error: None };
    let mut checked_at = Instant::now() - ASSIGNMENT_CHECK;
    while Instant::now() < end {
        if checked_at.elapsed() >= ASSIGNMENT_CHECK {
            checked_at = Instant::now();
            let count = consumer.assignment().map_or(0, |a| a.count());
            assigned[index].store(count, Ordering::Relaxed);
        }
        match consumer.poll(POLL_WAIT.min(end.saturating_duration_since(Instant::now()))) {
            None => {}
            Some(Ok(message)) => {
                reads.records += 1;
                if let Timestamp::CreateTime(ms) | Timestamp::LogAppendTime(ms) = message.timestamp() {
                    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                    let latency = Duration::from_millis(u64::try_from(now_ms - ms).unwrap_or(0));
                    reads.samples.push((Instant::now(), latency));
                }
            }
            Some(Err(e)) => {
                reads.errors += 1;
                reads.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    // Leave the group now rather than at the session timeout, so a next run
    // is not slowed by members that are gone.
    consumer.unsubscribe();
    Ok(reads)
}
