//! The request path up to the handlers, as dispatch runs it: fixed header,
//! full header, the pre-decode guard, then the kafka-protocol decoder (or
//! `kafgres_wire::messages`' where Kafka 4.4's versions go further).
//! Nothing may panic or abort (an allocation from a wire count would abort
//! the process, which libFuzzer reports as a crash). Dispatch also checks the
//! served versions (the broker's handler list) before the guard; here the
//! guard alone decides, so every version it has a schema for is decoded, a
//! superset of what dispatch lets through.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kafgres_wire::guard::check_request_body;
use kafgres_wire::header::{peek_fixed_header, split_request};
use libfuzzer_sys::fuzz_target;

fn decode(key: ApiKey, version: i16, mut body: Bytes) {
    macro_rules! d {
        ($t:ty) => {{
            let _ = <$t>::decode(&mut body, version);
        }};
    }
    match key {
        ApiKey::Produce => d!(ProduceRequest),
        ApiKey::Fetch => d!(FetchRequest),
        ApiKey::ListOffsets => d!(kafgres_wire::messages::ListOffsetsRequest),
        ApiKey::Metadata => d!(MetadataRequest),
        ApiKey::ApiVersions => d!(kafgres_wire::messages::ApiVersionsRequest),
        ApiKey::CreateTopics => d!(CreateTopicsRequest),
        ApiKey::DeleteTopics => d!(DeleteTopicsRequest),
        ApiKey::DescribeConfigs => d!(DescribeConfigsRequest),
        ApiKey::CreatePartitions => d!(CreatePartitionsRequest),
        ApiKey::DescribeCluster => d!(DescribeClusterRequest),
        ApiKey::DeleteRecords => d!(DeleteRecordsRequest),
        ApiKey::InitProducerId => d!(InitProducerIdRequest),
        ApiKey::FindCoordinator => d!(FindCoordinatorRequest),
        ApiKey::JoinGroup => d!(JoinGroupRequest),
        ApiKey::SyncGroup => d!(SyncGroupRequest),
        ApiKey::Heartbeat => d!(HeartbeatRequest),
        ApiKey::LeaveGroup => d!(LeaveGroupRequest),
        ApiKey::OffsetCommit => d!(kafgres_wire::messages::OffsetCommitRequest),
        ApiKey::OffsetFetch => d!(kafgres_wire::messages::OffsetFetchRequest),
        ApiKey::ListGroups => d!(ListGroupsRequest),
        ApiKey::DescribeGroups => d!(DescribeGroupsRequest),
        ApiKey::DeleteGroups => d!(kafgres_wire::messages::DeleteGroupsRequest),
        ApiKey::OffsetDelete => d!(OffsetDeleteRequest),
        ApiKey::IncrementalAlterConfigs => d!(IncrementalAlterConfigsRequest),
        ApiKey::AlterConfigs => d!(AlterConfigsRequest),
        ApiKey::DescribeLogDirs => d!(kafgres_wire::messages::DescribeLogDirsRequest),
        ApiKey::OffsetForLeaderEpoch => d!(OffsetForLeaderEpochRequest),
        ApiKey::DescribeTopicPartitions => d!(DescribeTopicPartitionsRequest),
        ApiKey::ConsumerGroupHeartbeat => d!(ConsumerGroupHeartbeatRequest),
        ApiKey::ConsumerGroupDescribe => d!(ConsumerGroupDescribeRequest),
        ApiKey::ShareGroupHeartbeat => d!(ShareGroupHeartbeatRequest),
        ApiKey::ShareGroupDescribe => d!(ShareGroupDescribeRequest),
        ApiKey::ShareFetch => d!(ShareFetchRequest),
        ApiKey::ShareAcknowledge => d!(ShareAcknowledgeRequest),
        ApiKey::DescribeShareGroupOffsets => d!(DescribeShareGroupOffsetsRequest),
        ApiKey::AddPartitionsToTxn => d!(AddPartitionsToTxnRequest),
        ApiKey::AddOffsetsToTxn => d!(AddOffsetsToTxnRequest),
        ApiKey::EndTxn => d!(EndTxnRequest),
        ApiKey::TxnOffsetCommit => d!(TxnOffsetCommitRequest),
        ApiKey::WriteTxnMarkers => d!(kafgres_wire::messages::WriteTxnMarkersRequest),
        ApiKey::SaslHandshake => d!(SaslHandshakeRequest),
        ApiKey::SaslAuthenticate => d!(SaslAuthenticateRequest),
        ApiKey::DescribeAcls => d!(DescribeAclsRequest),
        ApiKey::CreateAcls => d!(CreateAclsRequest),
        ApiKey::DeleteAcls => d!(DeleteAclsRequest),
        ApiKey::DescribeProducers => d!(DescribeProducersRequest),
        ApiKey::DescribeTransactions => d!(DescribeTransactionsRequest),
        ApiKey::ListTransactions => d!(ListTransactionsRequest),
        other => panic!("the guard has a schema for {other:?} but this target cannot decode it: add it here"),
    }
}

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    let Some((api_key, api_version, _)) = peek_fixed_header(&frame) else { return };
    let Ok(key) = ApiKey::try_from(api_key) else { return };
    let Ok((_, body)) = split_request(frame, key.request_header_version(api_version)) else { return };
    if check_request_body(api_key, api_version, &body).is_ok() {
        decode(key, api_version, body);
    }
});
