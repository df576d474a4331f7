//! Why a workload could not run. Failures *during* a run (a delivery error, a
//! missing record) are not errors here: they are counted, printed on the
//! result line and turn the exit status non-zero, but the line is still
//! printed. These are the failures that leave no line to print.

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("invalid arguments: {0}")]
    Usage(String),

    #[error("could not create the {role} client: {source}")]
    ClientCreation {
        role: &'static str,
        #[source]
        source: KafkaError,
    },

    #[error("{action} failed: {source}")]
    Client {
        action: String,
        #[source]
        source: KafkaError,
    },

    #[error("{action} failed: {source}")]
    BareClient {
        action: String,
        #[source]
        source: kafgres_client::ClientError,
    },

    #[error("creating topic {topic} failed: {code}")]
    TopicCreation { topic: String, code: RDKafkaErrorCode },

    #[error("topic {topic}: {reason}")]
    Topic { topic: String, reason: String },

    #[error("the client reported a fatal error: {0}")]
    Fatal(String),

    #[error("could not start a thread: {0}")]
    Thread(#[source] std::io::Error),

    #[error("writing {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("a worker thread panicked")]
    ThreadPanicked,
}

impl BenchError {
    pub fn client(action: impl Into<String>, source: KafkaError) -> BenchError {
        BenchError::Client { action: action.into(), source }
    }
}
