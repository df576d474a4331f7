//! The client's one error type, and Kafka error codes by name.

use kafgres_record::BatchError;

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
    /// The broker answered with a Kafka error code.
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
        ClientError::Kafka { api, code, name: error_name(code), message: message.into() }
    }

    /// The Kafka error code, for [`ClientError::Kafka`] and [`ClientError::OffsetOutOfRange`].
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka { code, .. } => Some(*code),
            ClientError::OffsetOutOfRange { .. } => Some(OFFSET_OUT_OF_RANGE),
            _ => None,
        }
    }
}

pub(crate) const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Kafka's name for an error code (`org.apache.kafka.common.protocol.Errors`),
/// for the codes a client of Kafgres can meet; `UNKNOWN` for the others.
pub fn error_name(code: i16) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        0 => "NONE",
        1 => "OFFSET_OUT_OF_RANGE",
        2 => "CORRUPT_MESSAGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        4 => "INVALID_FETCH_SIZE",
        5 => "LEADER_NOT_AVAILABLE",
        6 => "NOT_LEADER_OR_FOLLOWER",
        7 => "REQUEST_TIMED_OUT",
        10 => "MESSAGE_TOO_LARGE",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        17 => "INVALID_TOPIC_EXCEPTION",
        18 => "RECORD_LIST_TOO_LARGE",
        21 => "INVALID_REQUIRED_ACKS",
        24 => "INVALID_GROUP_ID",
        25 => "UNKNOWN_MEMBER_ID",
        27 => "REBALANCE_IN_PROGRESS",
        29 => "TOPIC_AUTHORIZATION_FAILED",
        30 => "GROUP_AUTHORIZATION_FAILED",
        32 => "INVALID_TIMESTAMP",
        35 => "UNSUPPORTED_VERSION",
        36 => "TOPIC_ALREADY_EXISTS",
        37 => "INVALID_PARTITIONS",
        38 => "INVALID_REPLICATION_FACTOR",
        39 => "INVALID_REPLICA_ASSIGNMENT",
        40 => "INVALID_CONFIG",
        41 => "NOT_CONTROLLER",
        42 => "INVALID_REQUEST",
        43 => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        44 => "POLICY_VIOLATION",
        45 => "OUT_OF_ORDER_SEQUENCE_NUMBER",
        47 => "INVALID_PRODUCER_EPOCH",
        56 => "KAFKA_STORAGE_ERROR",
        68 => "NON_EMPTY_GROUP",
        69 => "GROUP_ID_NOT_FOUND",
        73 => "TOPIC_DELETION_DISABLED",
        87 => "INVALID_RECORD",
        100 => "UNKNOWN_TOPIC_ID",
        _ => "UNKNOWN",
    }
}
