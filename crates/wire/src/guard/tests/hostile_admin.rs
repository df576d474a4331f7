//! Hand-written hostile bodies for the topic, cluster, ACL and SASL APIs (see `hostile.rs`), and
//! the presence byte of DescribeTopicPartitions' nullable `cursor`.

use super::decode_measured;
use super::wire::{assert_accepted_and_decoded, assert_array_too_long, assert_truncated, guard, Wire};
use crate::guard::{FieldPath, GuardError};

#[test]
fn huge_counts_topics() {
    // CreatePartitions: topics, timeout_ms, validate_only; a topic is name, count, assignments
    // (nullable), an assignment is broker_ids.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(37, 0, &body, "CreatePartitionsRequest", "topics");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(37, 2, &body, "CreatePartitionsRequest", "topics");
    let body = Wire::new().i32(1).string("t").i32(3).huge_count().tail();
    assert_array_too_long(37, 1, &body, "CreatePartitionsTopic", "assignments");
    let body = Wire::new().uvarint(2).compact_string("t").i32(3).uvarint(2).huge_compact_count().tail();
    assert_array_too_long(37, 3, &body, "CreatePartitionsAssignment", "broker_ids");
    // Null assignments: let the broker choose.
    let body = Wire::new().i32(1).string("t").i32(3).i32(-1).i32(30_000).i8(0).done();
    assert_accepted_and_decoded(37, 0, &body);

    // DeleteRecords: topics, timeout_ms; a topic is name, partitions.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(21, 0, &body, "DeleteRecordsRequest", "topics");
    let body = Wire::new().uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(21, 2, &body, "DeleteRecordsTopic", "partitions");

    // OffsetForLeaderEpoch: replica_id (v3+), topics; a topic is topic, partitions.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(23, 2, &body, "OffsetForLeaderEpochRequest", "topics");
    let body = Wire::new().i32(-1).huge_count().tail();
    assert_array_too_long(23, 3, &body, "OffsetForLeaderEpochRequest", "topics");
    let body = Wire::new().i32(-1).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(23, 4, &body, "OffsetForLeaderTopic", "partitions");

    // DescribeTopicPartitions: topics, response_partition_limit, cursor.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(75, 0, &body, "DescribeTopicPartitionsRequest", "topics");
}

#[test]
fn huge_counts_cluster() {
    // AlterConfigs: resources, validate_only; a resource is type, name, configs.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(33, 0, &body, "AlterConfigsRequest", "resources");
    let body = Wire::new().i32(1).i8(2).string("t").huge_count().tail();
    assert_array_too_long(33, 1, &body, "AlterConfigsResource", "configs");
    let body = Wire::new().uvarint(2).i8(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(33, 2, &body, "AlterConfigsResource", "configs");

    // IncrementalAlterConfigs: the same layout, flexible from v1.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(44, 0, &body, "IncrementalAlterConfigsRequest", "resources");
    let body = Wire::new().uvarint(2).i8(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(44, 1, &body, "AlterConfigsResource", "configs");

    // DescribeLogDirs: topics (null: all); a topic is topic, partitions.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(35, 1, &body, "DescribeLogDirsRequest", "topics");
    let body = Wire::new().uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(35, 4, &body, "DescribableLogDirTopic", "partitions");
    assert_accepted_and_decoded(35, 1, &Wire::new().i32(-1).done());
    assert_accepted_and_decoded(35, 2, &Wire::new().uvarint(0).no_tags().done());

    // DescribeCluster has no array: a huge tagged-field count, and a body cut short.
    let body = Wire::new().i8(0).i8(1).huge_compact_count().tail();
    match guard(60, 1, &body) {
        Err(GuardError::ArrayTooLong { field, .. }) => {
            assert_eq!(field.structure, "DescribeClusterRequest");
        }
        other => panic!("expected ArrayTooLong, got {other:?}"),
    }
    assert_truncated(60, 2, &Wire::new().i8(0).i8(1).done(), "DescribeClusterRequest", "include_fenced_brokers");
}

#[test]
fn huge_counts_update_features() {
    // UpdateFeatures: timeout_ms, feature_updates, validate_only (v1+).
    let body = Wire::new().i32(30_000).huge_compact_count().tail();
    assert_array_too_long(57, 0, &body, "UpdateFeaturesRequest", "feature_updates");
    let body = Wire::new().i32(30_000).uvarint(1).i8(0).no_tags().done();
    assert_accepted_and_decoded(57, 1, &body);

    // ListConfigResources: resource_types (v1+); v0's body is only its tagged fields.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(74, 1, &body, "ListConfigResourcesRequest", "resource_types");
    assert_accepted_and_decoded(74, 0, &Wire::new().no_tags().done());
}

#[test]
fn huge_counts_users() {
    // DescribeUserScramCredentials: users (null: all).
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(50, 0, &body, "DescribeUserScramCredentialsRequest", "users");
    assert_accepted_and_decoded(50, 0, &Wire::new().uvarint(0).no_tags().done());

    // AlterUserScramCredentials: deletions, upsertions.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(51, 0, &body, "AlterUserScramCredentialsRequest", "deletions");
    let body = Wire::new().uvarint(1).huge_compact_count().tail();
    assert_array_too_long(51, 0, &body, "AlterUserScramCredentialsRequest", "upsertions");
}

#[test]
fn huge_counts_delegation_tokens() {
    // CreateDelegationToken v3: owner type, owner name, renewers, max_lifetime_ms.
    let body = Wire::new().uvarint(0).uvarint(0).huge_compact_count().tail();
    assert_array_too_long(38, 3, &body, "CreateDelegationTokenRequest", "renewers");
    let body = Wire::new().uvarint(0).uvarint(0).uvarint(1).i64(-1).no_tags().done();
    assert_accepted_and_decoded(38, 3, &body);
    // DescribeDelegationToken: owners (null: every owner).
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(41, 2, &body, "DescribeDelegationTokenRequest", "owners");
    assert_accepted_and_decoded(41, 3, &Wire::new().uvarint(0).no_tags().done());
}

#[test]
fn huge_counts_replicas() {
    // AlterReplicaLogDirs: dirs; a dir is path, topics; a topic is name, partitions.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(34, 1, &body, "AlterReplicaLogDirsRequest", "dirs");
    let body = Wire::new().i32(1).string("/d").huge_count().tail();
    assert_array_too_long(34, 1, &body, "AlterReplicaLogDir", "topics");
    let body = Wire::new().uvarint(2).compact_string("/d").uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(34, 2, &body, "AlterReplicaLogDirTopic", "partitions");

    // ElectLeaders: election_type (v1+), topic_partitions (null: all), timeout_ms.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(43, 0, &body, "ElectLeadersRequest", "topic_partitions");
    let body = Wire::new().i8(0).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(43, 2, &body, "TopicPartitions", "partitions");
    assert_accepted_and_decoded(43, 1, &Wire::new().i8(0).i32(-1).i32(30_000).done());

    // AlterPartitionReassignments: timeout_ms, allow_replication_factor_change (v1+), topics; a
    // partition's replicas null cancels.
    let body = Wire::new().i32(30_000).huge_compact_count().tail();
    assert_array_too_long(45, 0, &body, "AlterPartitionReassignmentsRequest", "topics");
    let body =
        Wire::new().i32(30_000).i8(1).uvarint(2).compact_string("t").uvarint(2).i32(0).huge_compact_count().tail();
    assert_array_too_long(45, 1, &body, "ReassignablePartition", "replicas");
    let cancel = Wire::new().i32(30_000).uvarint(2).compact_string("t").uvarint(2).i32(0).uvarint(0).no_tags();
    assert_accepted_and_decoded(45, 0, &cancel.no_tags().no_tags().done());

    // ListPartitionReassignments: timeout_ms, topics (null: all).
    let body = Wire::new().i32(30_000).huge_compact_count().tail();
    assert_array_too_long(46, 0, &body, "ListPartitionReassignmentsRequest", "topics");
    assert_accepted_and_decoded(46, 0, &Wire::new().i32(30_000).uvarint(0).no_tags().done());
}

#[test]
fn huge_counts_acls() {
    // CreateAcls: creations; a creation is resource_type, resource_name, resource_pattern_type,
    // principal, host, operation, permission_type.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(30, 1, &body, "CreateAclsRequest", "creations");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(30, 2, &body, "CreateAclsRequest", "creations");
    let body = Wire::new().uvarint(2).i8(2).huge_compact_count().tail();
    assert_truncated(30, 3, &body, "AclCreation", "resource_name");
    // A binding names its principal; only filters may leave it null.
    let at = FieldPath { structure: "AclCreation", field: "principal" };
    let body = Wire::new().i32(1).i8(2).string("t").i8(3).i16(-1).string("*").i8(2).i8(3).done();
    assert_eq!(guard(30, 1, &body), Err(GuardError::UnexpectedNull { field: at, offset: 9 }));
    assert!(decode_measured(30, 1, &body).0.is_err());

    // DeleteAcls: filters; a filter has the fields of a binding, its strings nullable.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(31, 1, &body, "DeleteAclsRequest", "filters");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(31, 3, &body, "DeleteAclsRequest", "filters");
    let body = Wire::new().i32(1).i8(2).i16(-1).i8(3).i16(-1).i16(-1).i8(1).i8(3).done();
    assert_accepted_and_decoded(31, 1, &body);

    // DescribeAcls is one filter, with no array: a huge name length, a huge tagged-field count,
    // and a filter of nulls (match anything).
    let body = Wire::new().i8(2).i16(i16::MAX).tail();
    assert_truncated(29, 1, &body, "DescribeAclsRequest", "resource_name_filter");
    let filter = || Wire::new().i8(2).uvarint(0).i8(3).uvarint(0).uvarint(0).i8(1).i8(3);
    let body = filter().huge_compact_count().tail();
    match guard(29, 2, &body) {
        Err(GuardError::ArrayTooLong { field, .. }) => {
            assert_eq!(field.structure, "DescribeAclsRequest");
        }
        other => panic!("expected ArrayTooLong, got {other:?}"),
    }
    assert_accepted_and_decoded(29, 3, &filter().no_tags().done());
}

#[test]
fn huge_lengths_sasl() {
    // SaslHandshake: mechanism.
    let body = Wire::new().i16(i16::MAX).tail();
    assert_truncated(17, 1, &body, "SaslHandshakeRequest", "mechanism");
    // SaslAuthenticate: auth_bytes, never null.
    let body = Wire::new().i32(i32::MAX).tail();
    assert_truncated(36, 0, &body, "SaslAuthenticateRequest", "auth_bytes");
    let body = Wire::new().huge_compact_count().tail();
    assert_truncated(36, 2, &body, "SaslAuthenticateRequest", "auth_bytes");
    let at = FieldPath { structure: "SaslAuthenticateRequest", field: "auth_bytes" };
    let body = Wire::new().i32(-1).done();
    assert_eq!(guard(36, 1, &body), Err(GuardError::UnexpectedNull { field: at, offset: 0 }));
    assert!(decode_measured(36, 1, &body).0.is_err());
}

#[test]
fn huge_lengths_telemetry() {
    // PushTelemetry v0: client_instance_id, subscription_id, terminating, compression_type, metrics.
    let head = || Wire::new().uuid().i32(1).i8(0).i8(0);
    assert_truncated(72, 0, &head().huge_compact_count().tail(), "PushTelemetryRequest", "metrics");
    assert_truncated(72, 0, &Wire::new().uuid().i32(1).done(), "PushTelemetryRequest", "terminating");
    assert_accepted_and_decoded(72, 0, &head().uvarint(1).no_tags().done());
    // GetTelemetrySubscriptions v0: a UUID cut short, and a huge tagged-field count.
    assert_truncated(71, 0, &Wire::new().i32(0).done(), "GetTelemetrySubscriptionsRequest", "client_instance_id");
    assert!(guard(71, 0, &Wire::new().uuid().huge_compact_count().tail()).is_err());
    assert_accepted_and_decoded(71, 0, &Wire::new().uuid().no_tags().done());
}

/// DescribeTopicPartitions v0 with no topics and a limit, then `marker` and what follows it.
fn describe_topic_partitions(marker: i8, rest: Wire) -> Vec<u8> {
    let mut body = Wire::new().uvarint(1).i32(100).i8(marker).done();
    body.extend(rest.done());
    body
}

/// kafka-protocol reads the cursor only after a marker of exactly 1 and takes any other marker
/// as null (Kafka takes any non-negative one as present); the guard reads it the same way.
#[test]
fn nullable_struct_presence_byte() {
    let cursor = || Wire::new().compact_string("t").i32(7).no_tags();
    assert_accepted_and_decoded(75, 0, &describe_topic_partitions(1, cursor().no_tags()));
    assert_accepted_and_decoded(75, 0, &describe_topic_partitions(-1, Wire::new().no_tags()));
    // Marker 0 or 5: null, and the cursor's bytes are read as the request's tagged fields (here:
    // two unknown tags, 't' and 0, of size 0, then trailing bytes), as kafka-protocol reads them.
    assert_accepted_and_decoded(75, 0, &describe_topic_partitions(0, cursor().no_tags()));
    assert_accepted_and_decoded(75, 0, &describe_topic_partitions(5, Wire::new().no_tags()));
    // A present cursor is walked like any struct.
    let rest = Wire::new().huge_compact_count();
    let body = [describe_topic_partitions(1, rest), vec![1, 2, 3]].concat();
    assert_truncated(75, 0, &body, "Cursor", "topic_name");
    let body = describe_topic_partitions(1, Wire::new().compact_string("t").i32(7));
    assert_truncated(75, 0, &body, "Cursor", "(tagged fields)");
    // The marker itself missing.
    let body = Wire::new().uvarint(1).i32(100).done();
    assert_truncated(75, 0, &body, "DescribeTopicPartitionsRequest", "cursor");
}
