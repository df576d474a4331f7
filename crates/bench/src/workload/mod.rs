//! The workloads. Each one runs against the broker named on the command line
//! and returns its single result line; `main` prints it.

pub mod bare;
pub mod consume;
pub mod e2e;
pub mod group;
pub mod partitions;
pub mod produce;
pub mod sync;

use std::path::Path;
use std::time::Duration;

use crate::error::BenchError;
use crate::summary::{latency_fields, write_samples, LatencySummary};

/// The latency part of a result line from `(at, latency)` samples, after
/// writing them to `samples_file` when one was asked for (`at` as each
/// workload defines it).
pub fn latency_report(
    samples: &[(Duration, Duration)],
    quantiles: &[(&'static str, f64)],
    samples_file: Option<&Path>,
) -> Result<String, BenchError> {
    if let Some(path) = samples_file {
        write_samples(path, samples).map_err(|source| BenchError::Io { path: path.display().to_string(), source })?;
    }
    let mut latencies: Vec<Duration> = samples.iter().map(|&(_, latency)| latency).collect();
    Ok(latency_fields(LatencySummary::from_samples(&mut latencies, quantiles).as_ref(), quantiles))
}

/// What a workload hands back: the result line (without newline) and whether
/// it ran clean. A line is produced even when records failed, so the failure
/// count is on record; `clean == false` makes the exit status 1.
#[derive(Debug)]
pub struct Outcome {
    pub line: String,
    pub clean: bool,
}
