//! `consume`: how fast one consumer reads a topic from the beginning.
//!
//! The topic's partitions and their [low, high) watermarks are read first;
//! together they say how many records the topic holds at the start. Every
//! partition is then assigned from the beginning (assign(), no consumer
//! group) and read until each has been read up to its start-time high
//! watermark. Records written after the start are ignored, and a record seen
//! twice is counted once. The run is clean only when the topic held exactly
//! `--expect` records and every one of them was read. The clock starts just
//! before assign(), so it includes finding the start offsets and the first
//! fetch, as a user's consumer would see.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::cli::ConsumeArgs;
use crate::client::{self, Deadline};
use crate::error::BenchError;
use crate::raw::ConsumerQueue;
use crate::summary::Throughput;
use crate::workload::Outcome;

const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Upper bound of one poll; it returns as soon as a record is there.
const POLL_WAIT: Duration = Duration::from_millis(500);

/// Reading progress of one partition.
struct PartitionProgress {
    /// The next offset not yet counted.
    next_offset: i64,
    /// High watermark at the start: reading is done at this offset.
    end_offset: i64,
}

pub fn run(args: &ConsumeArgs) -> Result<Outcome, BenchError> {
    client::ensure_topic(&args.common, &args.topic)?;
    let deadline = Deadline::after(args.common.deadline_or(DEFAULT_DEADLINE));
    let consumer = client::consumer(&args.common)?;
    let watermarks = client::partition_watermarks(&consumer, &args.topic)?;
    let available: u64 = watermarks.iter().map(|&(_, low, high)| (high - low).max(0) as u64).sum();
    eprintln!(
        "kafgres-bench: {} holds {available} records in {} partitions; expected {}",
        args.topic,
        watermarks.len(),
        args.expect
    );

    let mut progress: HashMap<i32, PartitionProgress> = watermarks
        .iter()
        .map(|&(p, low, high)| (p, PartitionProgress { next_offset: low, end_offset: high }))
        .collect();
    let mut pending_partitions = progress.values().filter(|p| p.next_offset < p.end_offset).count();

    let started = Instant::now();
    let mut assignment = TopicPartitionList::new();
    for &(partition, _, _) in &watermarks {
        assignment
            .add_partition_offset(&args.topic, partition, Offset::Beginning)
            .map_err(|source| BenchError::client("building the assignment", source))?;
    }
    consumer.assign(&assignment).map_err(|source| BenchError::client("assign", source))?;

    let mut queue = ConsumerQueue::of(&consumer)?;
    let mut record_count = 0u64;
    let mut byte_count = 0u64;
    let mut duplicate_count = 0u64;
    let mut client_error_count = 0u64;
    let mut finished_at = started;
    while pending_partitions > 0 && !deadline.passed() {
        let taken = queue.consume_batch(
            POLL_WAIT.min(deadline.remaining()),
            |record| {
                let Some(part) = progress.get_mut(&record.partition) else {
                    return;
                };
                if record.offset < part.next_offset {
                    duplicate_count += 1;
                    return;
                }
                if record.offset >= part.end_offset {
                    return; // written after the start
                }
                record_count += 1;
                byte_count += record.value.len() as u64;
                part.next_offset = record.offset + 1;
                if part.next_offset >= part.end_offset {
                    pending_partitions -= 1;
                }
            },
            &mut client_error_count,
        )?;
        if taken > 0 {
            finished_at = Instant::now();
        }
    }

    if pending_partitions > 0 {
        eprintln!("kafgres-bench: deadline passed with {pending_partitions} partitions not read to their end");
    }
    if duplicate_count > 0 {
        eprintln!("kafgres-bench: {duplicate_count} records delivered twice (counted once)");
    }
    // Missing records, and a topic holding a different number than expected.
    let error_count = (available - record_count) + available.abs_diff(args.expect);
    if available != args.expect {
        eprintln!("kafgres-bench: count mismatch: the topic holds {available} records, --expect {}", args.expect);
    }
    let throughput = Throughput { record_count, byte_count, elapsed: finished_at - started };
    let line = format!(
        "workload=consume expected={} available={available} records={record_count} bytes={byte_count} \
         errors={error_count} {throughput} client_errors={client_error_count}",
        args.expect
    );
    Ok(Outcome { line, clean: error_count == 0 })
}
