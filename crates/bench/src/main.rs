//! `kafgres-bench`: a benchmark CLI that drives any Kafka-compatible broker
//! (Kafgres, Apache Kafka, ...) through librdkafka, the client most users run,
//! so the same binary measures both sides of a comparison. One diagnostic
//! workload, `bare`, bypasses librdkafka to show what the client adds.
//!
//! It owns the workloads and their result lines; it never talks to Postgres
//! and never assumes the broker is Kafgres. Each subcommand prints exactly one
//! `key=value` line to stdout; everything else (client settings, failures,
//! librdkafka logs) goes to stderr. See README.md for every field.
//!
//! Map:
//! - `cli`      arguments, one subcommand per workload (and delete-topics)
//! - `admin`    the delete-topics subcommand, for cleaning up after a run
//! - `client`   librdkafka clients with the benchmark's defaults; topic creation
//! - `events`   waiting for delivery reports by blocking on the event queue
//! - `payload`  record values: filler and end-to-end send-time stamps
//! - `raw`      the per-record produce and consume calls on librdkafka's C API
//! - `summary`  exact percentiles (nearest rank over all samples), rates
//! - `workload` sync, produce, consume, e2e, partitions, group; bare (the same
//!   patterns on kafgres-client's blocking connections, no librdkafka)

mod admin;
mod cli;
mod client;
mod error;
mod events;
mod payload;
mod raw;
mod summary;
mod workload;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Workload};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (_, librdkafka_version) = rdkafka::util::get_rdkafka_version();
    eprintln!("kafgres-bench {}: librdkafka {librdkafka_version}", env!("CARGO_PKG_VERSION"));
    let result = match &cli.workload {
        Workload::Sync(args) => workload::sync::run(args),
        Workload::Produce(args) => workload::produce::run(args),
        Workload::Consume(args) => workload::consume::run(args),
        Workload::E2e(args) => workload::e2e::run(args),
        Workload::Partitions(args) => workload::partitions::run(args),
        Workload::Group(args) => workload::group::run(args),
        Workload::Bare(args) => workload::bare::run(args),
        Workload::DeleteTopics(args) => admin::delete_topics(args),
    };
    match result {
        Ok(outcome) => {
            println!("{}", outcome.line);
            if outcome.clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(err) => {
            eprintln!("kafgres-bench: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(2)
        }
    }
}
