//! `partitions`: the produce workload spread over many partitions and many
//! connections, the shape of a broker serving a fleet of services.
//!
//! By default 200 producer threads, each with its own client (and so its own
//! produce connection), send 1 KiB records for 10 s. Each producer chooses
//! the partition itself and cycles through all 1,000 partitions of the topic,
//! starting at a different one ([`Partitioning::RoundRobin`]), so every
//! produce request carries batches for many partitions and every partition
//! gets writes from every connection. The topic is created with
//! `--partitions` partitions when missing; a topic with another count is
//! refused before the clock starts. Each client's send buffer is bounded
//! (`--buffer-kbytes`) so 200 of them fit in memory. With `--topics N` the
//! same cycle runs over N topics of `--partitions` each (`<topic>-0` ..
//! `<topic>-N-1`), the shape of many services' topics on one broker. Timing
//! and counting are the produce workload's (`workload::produce`).

use std::time::Duration;

use crate::cli::PartitionsArgs;
use crate::client;
use crate::error::BenchError;
use crate::workload::produce::{self, Partitioning, Plan};
use crate::workload::Outcome;

const DEFAULT_SECONDS: u64 = 10;

pub fn run(args: &PartitionsArgs) -> Result<Outcome, BenchError> {
    if let Some(requested) = args.common.create_partitions.filter(|&p| p != args.partitions) {
        return Err(BenchError::Usage(format!(
            "--create-partitions {requested} contradicts --partitions {} (give --partitions only)",
            args.partitions
        )));
    }
    let topics = topic_names(&args.topic, args.topics);
    for topic in &topics {
        client::create_topic_if_missing(&args.common, topic, args.partitions)?;
    }
    let plan = Plan {
        common: &args.common,
        topics: &topics,
        producer_count: usize::try_from(args.producers).map_err(|_| BenchError::Usage("--producers".into()))?,
        size: usize::try_from(args.size).map_err(|_| BenchError::Usage("--size too large".into()))?,
        count: args.count,
        seconds: if args.count.is_some() { None } else { Some(args.seconds.unwrap_or(DEFAULT_SECONDS)) },
        rate: None,
        acks: &args.acks,
        linger_ms: args.linger_ms,
        message_timeout: Duration::from_millis(args.message_timeout_ms.into()),
        client_settings: vec![("queue.buffering.max.kbytes", args.buffer_kbytes.to_string())],
        partitioning: Partitioning::RoundRobin { partition_count: args.partitions },
    };
    let totals = produce::run_plan(&plan)?;
    let line = format!(
        "workload=partitions topics={} partitions={} producers={} size={} acks={} records={} errors={} {}",
        args.topics,
        args.partitions,
        args.producers,
        args.size,
        args.acks,
        totals.delivered_count,
        totals.error_count,
        totals.throughput
    );
    Ok(Outcome { line, clean: totals.error_count == 0 })
}

/// The topics of a run: `topic` itself, or `topic-0` .. `topic-{count-1}`.
pub(crate) fn topic_names(topic: &str, count: u32) -> Vec<String> {
    if count <= 1 {
        vec![topic.to_string()]
    } else {
        (0..count).map(|i| format!("{topic}-{i}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::topic_names;

    #[test]
    fn one_topic_keeps_its_name_and_several_are_numbered() {
        assert_eq!(topic_names("t", 1), ["t"]);
        assert_eq!(topic_names("t", 3), ["t-0", "t-1", "t-2"]);
    }
}
