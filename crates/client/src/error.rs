//! The client's one error type.

use kafgres_record::BatchError;
use kafgres_wire::error_code;

/// Why an operation failed. After [`ClientError::Io`], [`ClientError::Timeout`],
/// [`ClientError::Interrupted`] or a framing error the connection is left
/// mid-request and every later call answers [`ClientError::Broken`]: reconnect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The socket failed (connect refused, reset, closed by the broker).
    #[error("{api}: {source}")]
    Io {
        api: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The operation's deadline passed before it finished.
    #[error("{api}: no answer from the broker before the deadline")]
    Timeout { api: &'static str },
    /// The waiter gave up (in Postgres: a query cancel or termination).
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// The broker's answer did not follow the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A response frame longer than the configured limit; nothing was allocated for it.
    #[error("{api}: response of {len} bytes exceeds the limit of {bytes_max} bytes")]
    FrameTooLarge { api: &'static str, len: usize, bytes_max: usize },
    /// The broker answered with a Kafka error code (`name`: Kafka's, `UNKNOWN`
    /// for a code this build does not know).
    #[error("{api}: {name} ({code}){}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Kafka { api: &'static str, code: i16, name: &'static str, message: String },
    /// A fetch offset outside the partition's log (Kafka's OFFSET_OUT_OF_RANGE).
    #[error(
        "offset {offset} is out of range for {topic}-{partition} (log start {log_start_offset}, end {log_end_offset})"
    )]
    OffsetOutOfRange { topic: String, partition: i32, offset: i64, log_start_offset: i64, log_end_offset: i64 },
    /// A fetched record batch is corrupt or decompresses past the cap.
    #[error("record batch at offset {base_offset}: {source}")]
    Batch {
        base_offset: i64,
        #[source]
        source: BatchError,
    },
    /// The caller asked for something that cannot be encoded or makes no sense.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An earlier error left the connection mid-request; open a new client.
    #[error("the connection was abandoned by an earlier error; reconnect")]
    Broken,
}

impl ClientError {
    /// A Kafka error for a non-zero `code`.
    pub fn kafka(api: &'static str, code: i16, message: impl Into<String>) -> ClientError {
        ClientError::Kafka { api, code, name: error_code::name(code).unwrap_or("UNKNOWN"), message: message.into() }
    }

    /// The Kafka error code, for [`ClientError::Kafka`] and [`ClientError::OffsetOutOfRange`].
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka { code, .. } => Some(*code),
            ClientError::OffsetOutOfRange { .. } => Some(error_code::OFFSET_OUT_OF_RANGE),
            _ => None,
        }
    }
}
