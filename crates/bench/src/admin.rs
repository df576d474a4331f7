//! `delete-topics`: the one subcommand that is not a workload. A benchmark
//! script deletes each run's topics with it, so that gigabytes of records do
//! not pile up between workloads, using the same client as the workloads.
//!
//! The line is `action=delete-topics deleted=N unknown=M errors=E`: a topic
//! that does not exist is counted under `unknown`, not as an error; any other
//! refusal is an error (and makes the exit status 1).

use rdkafka::types::RDKafkaErrorCode;

use crate::cli::DeleteTopicsArgs;
use crate::client;
use crate::error::BenchError;
use crate::workload::Outcome;

pub fn delete_topics(args: &DeleteTopicsArgs) -> Result<Outcome, BenchError> {
    let admin = client::admin(&args.common)?;
    let names: Vec<&str> = args.topics.iter().map(String::as_str).collect();
    let results = futures_executor::block_on(admin.delete_topics(&names, &client::admin_options()))
        .map_err(|source| BenchError::client("DeleteTopics", source))?;
    let (mut deleted_count, mut unknown_count, mut error_count) = (0u64, 0u64, 0u64);
    for result in results {
        match result {
            Ok(_) => deleted_count += 1,
            Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => unknown_count += 1,
            Err((name, code)) => {
                eprintln!("kafgres-bench: deleting topic {name} failed: {code}");
                error_count += 1;
            }
        }
    }
    let line = format!("action=delete-topics deleted={deleted_count} unknown={unknown_count} errors={error_count}");
    Ok(Outcome { line, clean: error_count == 0 })
}
