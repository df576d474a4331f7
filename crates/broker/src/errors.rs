//! Kafka error codes the broker answers with, by name.
//!
//! Numbers are Kafka's (`org.apache.kafka.common.protocol.Errors`); only the
//! ones this broker returns are listed, so a grep shows every use.

pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const RECORD_LIST_TOO_LARGE: i16 = 18;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const INVALID_REQUEST: i16 = 42;
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const INVALID_RECORD: i16 = 87;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
