//! The workloads. Each one runs against the broker named on the command line
//! and returns its single result line; `main` prints it.

pub mod bare;
pub mod consume;
pub mod e2e;
pub mod partitions;
pub mod produce;
pub mod sync;

/// What a workload hands back: the result line (without newline) and whether
/// it ran clean. A line is produced even when records failed, so the failure
/// count is on record; `clean == false` makes the exit status 1.
#[derive(Debug)]
pub struct Outcome {
    pub line: String,
    pub clean: bool,
}
