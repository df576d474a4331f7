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
//! (`--buffer-kbytes`) so 200 of them fit in memory. Timing and counting are
//! the produce workload's (`workload::produce`).

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
    client::create_topic_if_missing(&args.common, &args.topic, args.partitions)?;
    let plan = Plan {
        common: &args.common,
        topic: &args.topic,
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
        "workload=partitions partitions={} producers={} size={} acks={} records={} errors={} {}",
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
