//! Command-line arguments: one subcommand per workload, each with the
//! connection options in [`Common`].

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kafgres-bench",
    version,
    about = "Benchmarks any Kafka-compatible broker through librdkafka.",
    long_about = "Benchmarks any Kafka-compatible broker through librdkafka. Each workload prints \
                  exactly one result line of key=value pairs to stdout and its diagnostics to \
                  stderr. Exit status: 0 when every record was delivered (and, where checked, \
                  read back), 1 when the run finished with errors (the line still says how many), \
                  2 when it could not run at all."
)]
pub struct Cli {
    #[command(subcommand)]
    pub workload: Workload,
}

#[derive(Debug, Subcommand)]
pub enum Workload {
    /// Sequential synchronous sends: produce one record, wait for its
    /// delivery report, repeat; latency percentiles.
    Sync(SyncArgs),
    /// N producer threads sending as fast as the client allows; records/s and MB/s.
    Produce(ProduceArgs),
    /// Read a topic from the beginning with assign(); records/s and MB/s, count verified.
    Consume(ConsumeArgs),
    /// Produce at a fixed rate while a consumer reads; end-to-end latency percentiles.
    E2e(E2eArgs),
    /// The produce workload spread over many partitions and connections:
    /// by default 200 producer clients, each cycling over 1,000 partitions.
    Partitions(PartitionsArgs),
    /// Consumers in one group reading what others produce: records read,
    /// the time until every partition is assigned, end-to-end latency.
    Group(GroupArgs),
    /// The `sync` and `e2e` patterns without librdkafka: one blocking
    /// connection and one thread per side, so that what the broker and
    /// loopback take can be told from what a client library adds.
    Bare(BareArgs),
    /// Not a workload: deletes topics (a benchmark script cleans up after
    /// each run with it, so the disk does not fill).
    DeleteTopics(DeleteTopicsArgs),
}

/// Options every workload takes.
#[derive(Debug, Args)]
pub struct Common {
    /// Broker to bootstrap from (librdkafka's bootstrap.servers).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,

    /// Create the topic with this many partitions (replication factor 1) if
    /// it does not exist yet.
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub create_partitions: Option<i32>,

    /// Config of a topic this run creates, e.g. --topic-config
    /// flush.messages=1 (repeatable); a topic that exists is kept as it is.
    #[arg(long = "topic-config", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub topic_configs: Vec<(String, String)>,

    /// Extra librdkafka setting for every client, applied last (repeatable),
    /// e.g. --set compression.type=lz4.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, String)>,

    /// Hard limit on the whole run, in seconds; when it passes the workload
    /// stops, reports what it has and counts the rest as errors. The default
    /// depends on the workload (see --help of each).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub deadline_s: Option<u64>,
}

impl Common {
    pub fn deadline_or(&self, default: Duration) -> Duration {
        self.deadline_s.map(Duration::from_secs).unwrap_or(default)
    }
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long, default_value = "kafgres-bench-sync")]
    pub topic: String,

    /// Sends made first and left out of the figures (connection set-up,
    /// metadata, first-touch costs).
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,

    /// Measured sends.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub count: u64,

    /// Record value size in bytes.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=64 << 20))]
    pub size: u64,

    /// librdkafka message.timeout.ms: how long one record may take before it
    /// is reported as failed.
    #[arg(long, default_value_t = 30_000)]
    pub message_timeout_ms: u32,

    /// Also write every measured latency to this file, for plotting
    /// (`at_s latency_ms` per line; at = start of the send, seconds since the
    /// first measured send).
    #[arg(long, value_name = "PATH")]
    pub samples_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long, default_value = "kafgres-bench-produce")]
    pub topic: String,

    /// Producer threads, each with its own client (and so its own connections).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub producers: u64,

    /// Record value size in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=64 << 20))]
    pub size: u64,

    /// Send for this many seconds, then wait for the outstanding reports
    /// (the default when neither --seconds nor --count is given: 10).
    #[arg(long, conflicts_with = "count", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: Option<u64>,

    /// Send exactly this many records in total, split across the producers.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Records per second for all producers together, evenly spaced (a
    /// producer behind schedule catches up at once); unlimited when not given.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub rate: Option<u64>,

    /// Producer acks: all (or -1), 1 or 0.
    #[arg(long, default_value = "all", value_parser = ["all", "-1", "1", "0"])]
    pub acks: String,

    /// linger.ms; librdkafka's default (5 ms) when not given.
    #[arg(long)]
    pub linger_ms: Option<u32>,

    /// librdkafka message.timeout.ms.
    #[arg(long, default_value_t = 30_000)]
    pub message_timeout_ms: u32,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long)]
    pub topic: String,

    /// Records the topic must hold; the run fails if it holds another number
    /// or fewer are read. Default deadline: 300 s.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub expect: u64,
}

#[derive(Debug, Args)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long, default_value = "kafgres-bench-e2e")]
    pub topic: String,

    /// Records per second, evenly spaced.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rate: u64,

    /// How long the measured phase produces. Default deadline: this plus
    /// 90 s (warm-up limit 30 s, then 60 s).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,

    /// Minimum warm-up before measuring, in seconds, at the same rate; it
    /// also lasts until the consumer has read a warm-up record.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub warmup_s: u64,

    /// Record value size in bytes (at least 16: run id and send time).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(16..=64 << 20))]
    pub size: u64,

    /// Producer acks: all (or -1), 1 or 0.
    #[arg(long, default_value = "all", value_parser = ["all", "-1", "1", "0"])]
    pub acks: String,

    /// linger.ms of the producer.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u32,

    /// librdkafka message.timeout.ms.
    #[arg(long, default_value_t = 30_000)]
    pub message_timeout_ms: u32,

    /// Also write every measured latency to this file, for plotting
    /// (`at_s latency_ms` per line, in the order read; at = send time,
    /// seconds since the measured phase began).
    #[arg(long, value_name = "PATH")]
    pub samples_file: Option<std::path::PathBuf>,

    /// Where each record's latency starts: `send`, the moment it was handed
    /// to the producer (a producer behind schedule hides the wait for its
    /// turn: coordinated omission), or `scheduled`, its due time on the
    /// fixed schedule, whether or not it went out then (an open-loop
    /// measurement: the time a record waited for the sender counts).
    #[arg(long, value_enum, default_value_t = LatencyFrom::Send)]
    pub latency_from: LatencyFrom,
}

/// Where an `e2e` record's latency is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LatencyFrom {
    /// The actual send: when the record was handed to the producer.
    Send,
    /// The scheduled send time (start of the phase + n / rate).
    Scheduled,
}

impl LatencyFrom {
    pub fn name(self) -> &'static str {
        match self {
            LatencyFrom::Send => "send",
            LatencyFrom::Scheduled => "scheduled",
        }
    }
}

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    pub common: Common,

    /// The topic to read, or with --topics N the prefix of <topic>-0 .. <topic>-N-1.
    #[arg(long, default_value = "kafgres-bench-partitions")]
    pub topic: String,

    /// How many topics (see --topic); 1: the topic itself.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub topics: u32,

    /// Consumer threads, each with its own client, all in one group.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub consumers: u64,

    /// The group id (default: one of its own per run).
    #[arg(long)]
    pub group: Option<String>,

    /// librdkafka group.protocol: classic (JoinGroup/SyncGroup, the
    /// client's assignor) or consumer (KIP-848, the broker assigns).
    #[arg(long, default_value = "classic", value_parser = ["classic", "consumer"])]
    pub group_protocol: String,

    /// Read for this many seconds (from the start, the group's forming included).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,
}

#[derive(Debug, Args)]
pub struct PartitionsArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long, default_value = "kafgres-bench-partitions")]
    pub topic: String,

    /// Partitions of the topic: it is created with this many if it does not
    /// exist, and the run refuses a topic with any other number.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub partitions: i32,

    /// Spread over this many topics of --partitions partitions each, named
    /// <topic>-0 .. <topic>-N-1 (each created when missing); every producer
    /// cycles over every partition of every topic. 1: the topic itself.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub topics: u32,

    /// Producer threads, each with its own client (one produce connection each).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub producers: u64,

    /// Record value size in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=64 << 20))]
    pub size: u64,

    /// Send for this many seconds, then wait for the outstanding reports
    /// (the default when neither --seconds nor --count is given: 10).
    #[arg(long, conflicts_with = "count", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: Option<u64>,

    /// Send exactly this many records in total, split across the producers.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Producer acks: all (or -1), 1 or 0.
    #[arg(long, default_value = "all", value_parser = ["all", "-1", "1", "0"])]
    pub acks: String,

    /// linger.ms; librdkafka's default (5 ms) when not given.
    #[arg(long)]
    pub linger_ms: Option<u32>,

    /// librdkafka message.timeout.ms.
    #[arg(long, default_value_t = 30_000)]
    pub message_timeout_ms: u32,

    /// Each producer's send buffer (librdkafka queue.buffering.max.kbytes).
    /// librdkafka's default, 1 GiB, times 200 clients would exhaust memory,
    /// and a deep queue per client only makes records wait: each record goes
    /// to another partition, so a batch holds about one record whatever the
    /// buffer. On 2 cores 200 clients with 4 MiB each queued records past the
    /// 30 s message timeout, and with 256 KiB each the queues took several
    /// times the send phase to drain. 64 KiB each is 12.5 MiB in all.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=2_097_151))]
    pub buffer_kbytes: u32,
}

/// What `bare` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BarePattern {
    /// Produce one record (acks=all), wait for the answer, repeat.
    Sync,
    /// Produce at a fixed rate on one connection while another long-polls
    /// Fetch; the time from each Produce sent to its record fetched.
    E2e,
}

#[derive(Debug, Args)]
pub struct BareArgs {
    #[command(flatten)]
    pub common: Common,

    #[arg(long, default_value = "kafgres-bench-bare")]
    pub topic: String,

    #[arg(long, value_enum, default_value_t = BarePattern::Sync)]
    pub pattern: BarePattern,

    /// Records sent first and left out of the figures.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub warmup: u64,

    /// Measured records.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub count: u64,

    /// Records per second, evenly spaced (e2e only).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub rate: u64,

    /// Record value size in bytes (at least 16: run id and send time).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
    pub size: u64,

    /// Also write every measured latency to this file (`at_s latency_ms`).
    #[arg(long, value_name = "PATH")]
    pub samples_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct DeleteTopicsArgs {
    #[command(flatten)]
    pub common: Common,

    /// Topics to delete; one that does not exist is counted, not an error.
    #[arg(required = true, value_name = "TOPIC")]
    pub topics: Vec<String>,
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sync_defaults_match_the_issue() {
        let cli = Cli::parse_from(["kafgres-bench", "sync", "--topic", "t"]);
        let Workload::Sync(args) = cli.workload else { panic!("not sync") };
        assert_eq!((args.warmup, args.count, args.size), (20, 200, 100));
        assert_eq!(args.common.bootstrap, "127.0.0.1:9092");
    }

    #[test]
    fn settings_parse_and_seconds_conflicts_with_count() {
        assert_eq!(parse_setting("a.b=c=d"), Ok(("a.b".into(), "c=d".into())));
        assert!(parse_setting("novalue").is_err());
        assert!(Cli::try_parse_from(["kafgres-bench", "produce", "--seconds", "1", "--count", "5"]).is_err());
    }

    #[test]
    fn bare_defaults_and_limits() {
        let cli = Cli::parse_from(["kafgres-bench", "bare", "--pattern", "e2e"]);
        let Workload::Bare(args) = cli.workload else { panic!("not bare") };
        assert_eq!(
            (args.pattern, args.warmup, args.count, args.rate, args.size),
            (BarePattern::E2e, 200, 2000, 1000, 100)
        );
        assert!(Cli::try_parse_from(["kafgres-bench", "bare", "--size", "15"]).is_err());
        assert!(Cli::try_parse_from(["kafgres-bench", "bare", "--pattern", "fast"]).is_err());
    }

    #[test]
    fn e2e_measures_from_the_send_unless_told() {
        let cli = Cli::parse_from(["kafgres-bench", "e2e"]);
        let Workload::E2e(args) = cli.workload else { panic!("not e2e") };
        assert_eq!(args.latency_from, LatencyFrom::Send);
        let cli = Cli::parse_from(["kafgres-bench", "e2e", "--latency-from", "scheduled"]);
        let Workload::E2e(args) = cli.workload else { panic!("not e2e") };
        assert_eq!(args.latency_from.name(), "scheduled");
        assert!(Cli::try_parse_from(["kafgres-bench", "e2e", "--latency-from", "ack"]).is_err());
    }

    #[test]
    fn partitions_defaults_match_the_issue() {
        let cli = Cli::parse_from(["kafgres-bench", "partitions"]);
        let Workload::Partitions(args) = cli.workload else { panic!("not partitions") };
        assert_eq!((args.partitions, args.producers, args.size), (1000, 200, 1024));
        assert_eq!(args.acks, "all");
        assert!(Cli::try_parse_from(["kafgres-bench", "partitions", "--partitions", "0"]).is_err());
    }
}
