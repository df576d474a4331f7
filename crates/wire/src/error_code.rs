//! Kafka error codes, defined once for every crate.
//!
//! Each constant is `ResponseError::X.code()` from `kafka-protocol`, which
//! carries Kafka's `Errors` table, so no number is written here by hand. The
//! name Kafka gives a code ([`name`]) is derived from the same variant, and so
//! is whether a client may retry it ([`is_retriable`]). A code Kafka adds in a
//! later `kafka-protocol` fails `every_known_code_has_a_constant` until it is
//! listed here.

use std::collections::HashMap;
use std::sync::OnceLock;

pub use kafka_protocol::error::ResponseError;

/// No error (Kafka's `NONE`): `kafka-protocol` has no variant for success.
pub const NONE: i16 = 0;

macro_rules! error_codes {
    ($($name:ident = $variant:ident,)*) => {
        $(pub const $name: i16 = ResponseError::$variant.code();)*

        /// Every constant with its name as written, so a test can hold each
        /// name to the one derived from its variant.
        #[cfg(test)]
        const NAMED: &[(&str, i16)] = &[$((stringify!($name), $name)),*];
    };
}

error_codes! {
    UNKNOWN_SERVER_ERROR = UnknownServerError,
    OFFSET_OUT_OF_RANGE = OffsetOutOfRange,
    CORRUPT_MESSAGE = CorruptMessage,
    UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartition,
    INVALID_FETCH_SIZE = InvalidFetchSize,
    LEADER_NOT_AVAILABLE = LeaderNotAvailable,
    NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollower,
    REQUEST_TIMED_OUT = RequestTimedOut,
    BROKER_NOT_AVAILABLE = BrokerNotAvailable,
    REPLICA_NOT_AVAILABLE = ReplicaNotAvailable,
    MESSAGE_TOO_LARGE = MessageTooLarge,
    STALE_CONTROLLER_EPOCH = StaleControllerEpoch,
    OFFSET_METADATA_TOO_LARGE = OffsetMetadataTooLarge,
    NETWORK_EXCEPTION = NetworkException,
    COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgress,
    COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailable,
    NOT_COORDINATOR = NotCoordinator,
    INVALID_TOPIC_EXCEPTION = InvalidTopicException,
    RECORD_LIST_TOO_LARGE = RecordListTooLarge,
    NOT_ENOUGH_REPLICAS = NotEnoughReplicas,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = NotEnoughReplicasAfterAppend,
    INVALID_REQUIRED_ACKS = InvalidRequiredAcks,
    ILLEGAL_GENERATION = IllegalGeneration,
    INCONSISTENT_GROUP_PROTOCOL = InconsistentGroupProtocol,
    INVALID_GROUP_ID = InvalidGroupId,
    UNKNOWN_MEMBER_ID = UnknownMemberId,
    INVALID_SESSION_TIMEOUT = InvalidSessionTimeout,
    REBALANCE_IN_PROGRESS = RebalanceInProgress,
    INVALID_COMMIT_OFFSET_SIZE = InvalidCommitOffsetSize,
    TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailed,
    GROUP_AUTHORIZATION_FAILED = GroupAuthorizationFailed,
    CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationFailed,
    INVALID_TIMESTAMP = InvalidTimestamp,
    UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanism,
    ILLEGAL_SASL_STATE = IllegalSaslState,
    UNSUPPORTED_VERSION = UnsupportedVersion,
    TOPIC_ALREADY_EXISTS = TopicAlreadyExists,
    INVALID_PARTITIONS = InvalidPartitions,
    INVALID_REPLICATION_FACTOR = InvalidReplicationFactor,
    INVALID_REPLICA_ASSIGNMENT = InvalidReplicaAssignment,
    INVALID_CONFIG = InvalidConfig,
    NOT_CONTROLLER = NotController,
    INVALID_REQUEST = InvalidRequest,
    UNSUPPORTED_FOR_MESSAGE_FORMAT = UnsupportedForMessageFormat,
    POLICY_VIOLATION = PolicyViolation,
    OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumber,
    DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumber,
    INVALID_PRODUCER_EPOCH = InvalidProducerEpoch,
    INVALID_TXN_STATE = InvalidTxnState,
    INVALID_PRODUCER_ID_MAPPING = InvalidProducerIdMapping,
    INVALID_TRANSACTION_TIMEOUT = InvalidTransactionTimeout,
    CONCURRENT_TRANSACTIONS = ConcurrentTransactions,
    TRANSACTION_COORDINATOR_FENCED = TransactionCoordinatorFenced,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = TransactionalIdAuthorizationFailed,
    SECURITY_DISABLED = SecurityDisabled,
    OPERATION_NOT_ATTEMPTED = OperationNotAttempted,
    KAFKA_STORAGE_ERROR = KafkaStorageError,
    LOG_DIR_NOT_FOUND = LogDirNotFound,
    SASL_AUTHENTICATION_FAILED = SaslAuthenticationFailed,
    UNKNOWN_PRODUCER_ID = UnknownProducerId,
    REASSIGNMENT_IN_PROGRESS = ReassignmentInProgress,
    DELEGATION_TOKEN_AUTH_DISABLED = DelegationTokenAuthDisabled,
    DELEGATION_TOKEN_NOT_FOUND = DelegationTokenNotFound,
    DELEGATION_TOKEN_OWNER_MISMATCH = DelegationTokenOwnerMismatch,
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = DelegationTokenRequestNotAllowed,
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = DelegationTokenAuthorizationFailed,
    DELEGATION_TOKEN_EXPIRED = DelegationTokenExpired,
    INVALID_PRINCIPAL_TYPE = InvalidPrincipalType,
    NON_EMPTY_GROUP = NonEmptyGroup,
    GROUP_ID_NOT_FOUND = GroupIdNotFound,
    FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFound,
    INVALID_FETCH_SESSION_EPOCH = InvalidFetchSessionEpoch,
    LISTENER_NOT_FOUND = ListenerNotFound,
    TOPIC_DELETION_DISABLED = TopicDeletionDisabled,
    FENCED_LEADER_EPOCH = FencedLeaderEpoch,
    UNKNOWN_LEADER_EPOCH = UnknownLeaderEpoch,
    UNSUPPORTED_COMPRESSION_TYPE = UnsupportedCompressionType,
    STALE_BROKER_EPOCH = StaleBrokerEpoch,
    OFFSET_NOT_AVAILABLE = OffsetNotAvailable,
    MEMBER_ID_REQUIRED = MemberIdRequired,
    PREFERRED_LEADER_NOT_AVAILABLE = PreferredLeaderNotAvailable,
    GROUP_MAX_SIZE_REACHED = GroupMaxSizeReached,
    FENCED_INSTANCE_ID = FencedInstanceId,
    ELIGIBLE_LEADERS_NOT_AVAILABLE = EligibleLeadersNotAvailable,
    ELECTION_NOT_NEEDED = ElectionNotNeeded,
    NO_REASSIGNMENT_IN_PROGRESS = NoReassignmentInProgress,
    GROUP_SUBSCRIBED_TO_TOPIC = GroupSubscribedToTopic,
    INVALID_RECORD = InvalidRecord,
    UNSTABLE_OFFSET_COMMIT = UnstableOffsetCommit,
    THROTTLING_QUOTA_EXCEEDED = ThrottlingQuotaExceeded,
    PRODUCER_FENCED = ProducerFenced,
    RESOURCE_NOT_FOUND = ResourceNotFound,
    DUPLICATE_RESOURCE = DuplicateResource,
    UNACCEPTABLE_CREDENTIAL = UnacceptableCredential,
    INCONSISTENT_VOTER_SET = InconsistentVoterSet,
    INVALID_UPDATE_VERSION = InvalidUpdateVersion,
    FEATURE_UPDATE_FAILED = FeatureUpdateFailed,
    PRINCIPAL_DESERIALIZATION_FAILURE = PrincipalDeserializationFailure,
    SNAPSHOT_NOT_FOUND = SnapshotNotFound,
    POSITION_OUT_OF_RANGE = PositionOutOfRange,
    UNKNOWN_TOPIC_ID = UnknownTopicId,
    DUPLICATE_BROKER_REGISTRATION = DuplicateBrokerRegistration,
    BROKER_ID_NOT_REGISTERED = BrokerIdNotRegistered,
    INCONSISTENT_TOPIC_ID = InconsistentTopicId,
    INCONSISTENT_CLUSTER_ID = InconsistentClusterId,
    TRANSACTIONAL_ID_NOT_FOUND = TransactionalIdNotFound,
    FETCH_SESSION_TOPIC_ID_ERROR = FetchSessionTopicIdError,
    INELIGIBLE_REPLICA = IneligibleReplica,
    NEW_LEADER_ELECTED = NewLeaderElected,
    OFFSET_MOVED_TO_TIERED_STORAGE = OffsetMovedToTieredStorage,
    FENCED_MEMBER_EPOCH = FencedMemberEpoch,
    UNRELEASED_INSTANCE_ID = UnreleasedInstanceId,
    UNSUPPORTED_ASSIGNOR = UnsupportedAssignor,
    STALE_MEMBER_EPOCH = StaleMemberEpoch,
    MISMATCHED_ENDPOINT_TYPE = MismatchedEndpointType,
    UNSUPPORTED_ENDPOINT_TYPE = UnsupportedEndpointType,
    UNKNOWN_CONTROLLER_ID = UnknownControllerId,
    UNKNOWN_SUBSCRIPTION_ID = UnknownSubscriptionId,
    TELEMETRY_TOO_LARGE = TelemetryTooLarge,
    INVALID_REGISTRATION = InvalidRegistration,
    TRANSACTION_ABORTABLE = TransactionAbortable,
    INVALID_RECORD_STATE = InvalidRecordState,
    SHARE_SESSION_NOT_FOUND = ShareSessionNotFound,
    INVALID_SHARE_SESSION_EPOCH = InvalidShareSessionEpoch,
    FENCED_STATE_EPOCH = FencedStateEpoch,
    INVALID_VOTER_KEY = InvalidVoterKey,
    DUPLICATE_VOTER = DuplicateVoter,
    VOTER_NOT_FOUND = VoterNotFound,
    INVALID_REGULAR_EXPRESSION = InvalidRegularExpression,
    REBOOTSTRAP_REQUIRED = RebootstrapRequired,
    STREAMS_INVALID_TOPOLOGY = StreamsInvalidTopology,
    STREAMS_INVALID_TOPOLOGY_EPOCH = StreamsInvalidTopologyEpoch,
    STREAMS_TOPOLOGY_FENCED = StreamsTopologyFenced,
    SHARE_SESSION_LIMIT_REACHED = ShareSessionLimitReached,
}

/// Kafka's name for `code` as its `Errors` enum spells it
/// (`UNKNOWN_TOPIC_OR_PARTITION`, `NONE` for 0), or `None` for a code this
/// build of `kafka-protocol` does not know.
pub fn name(code: i16) -> Option<&'static str> {
    static NAMES: OnceLock<HashMap<i16, String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let mut names: HashMap<i16, String> = (i16::MIN..=i16::MAX)
            .filter_map(|code| match ResponseError::try_from_code(code)? {
                ResponseError::Unknown(_) => None,
                known => Some((code, upper_snake(&known.to_string()))),
            })
            .collect();
        names.insert(NONE, "NONE".to_owned());
        names
    });
    names.get(&code).map(String::as_str)
}

/// Whether Kafka marks `code` retriable (a client may send the request again
/// unchanged); false for success and for unknown codes.
pub fn is_retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// `UnknownTopicOrPartition` → `UNKNOWN_TOPIC_OR_PARTITION`: Kafka's Java
/// constant for a `kafka-protocol` variant name.
fn upper_snake(variant: &str) -> String {
    let mut out = String::with_capacity(variant.len() + 8);
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kafkas() {
        assert_eq!(name(NONE), Some("NONE"));
        assert_eq!(name(-1), Some("UNKNOWN_SERVER_ERROR"));
        assert_eq!(name(3), Some("UNKNOWN_TOPIC_OR_PARTITION"));
        assert_eq!(name(6), Some("NOT_LEADER_OR_FOLLOWER"));
        assert_eq!(name(17), Some("INVALID_TOPIC_EXCEPTION"));
        assert_eq!(name(100), Some("UNKNOWN_TOPIC_ID"));
        assert_eq!(name(9999), None);
    }

    #[test]
    fn constants_carry_kafkas_numbers() {
        // Spot checks against Kafka's protocol guide, independent of the derivation.
        assert_eq!((NONE, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_OR_PARTITION), (0, -1, 3));
        assert_eq!((TOPIC_ALREADY_EXISTS, INVALID_REQUEST, PRODUCER_FENCED), (36, 42, 90));
        assert!(ResponseError::try_from_code(NONE).is_none());
    }

    #[test]
    fn every_constant_is_named_as_its_variant() {
        for &(constant, code) in NAMED {
            assert_eq!(name(code), Some(constant), "code {code}");
        }
    }

    #[test]
    fn every_known_code_has_a_constant() {
        for code in i16::MIN..=i16::MAX {
            if let Some(ResponseError::Unknown(_)) | None = ResponseError::try_from_code(code) {
                continue;
            }
            assert!(NAMED.iter().any(|&(_, c)| c == code), "code {code} ({:?}) has no constant", name(code));
        }
    }

    #[test]
    fn retriable_flags_come_from_kafka() {
        assert!(is_retriable(UNKNOWN_TOPIC_OR_PARTITION));
        assert!(is_retriable(COORDINATOR_NOT_AVAILABLE));
        assert!(!is_retriable(TOPIC_ALREADY_EXISTS));
        assert!(!is_retriable(NONE));
        assert!(!is_retriable(9999));
    }
}
