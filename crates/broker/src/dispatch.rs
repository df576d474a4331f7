//! From a request frame to a response frame.
//!
//! Order of checks, each before any allocation sized by the client:
//! fixed header -> served API and version (the table ApiVersions advertises)
//! -> full header -> pre-decode guard -> `kafka-protocol` decode -> handler.
//! A request that fails before its handler closes the connection (as Kafka
//! does), except an unsupported ApiVersions version, answered per KIP-511.

use bytes::{BufMut, Bytes, BytesMut};
use kafgres_wire::apis::{served, Served};
use kafgres_wire::guard::check_request_body;
use kafgres_wire::header::{
    peek_fixed_header, put_response_header, response_header_version, split_request, RequestHeader,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::api;
use crate::server::BrokerContext;

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Send these bytes (length prefix included).
    Respond(Bytes),
    /// Send these parts in order (length prefix in the first): bytes, and
    /// file ranges sent with sendfile. A fetch answered because an append
    /// woke it carries that append's publish instant, so the connection can
    /// time the broker's share of end-to-end latency up to the last byte sent.
    RespondParts { parts: Vec<crate::splice::ResponsePart>, woken_at: Option<std::time::Instant> },
    /// Send nothing (Produce with acks=0).
    NoResponse,
    /// Close the connection, logging the reason.
    Close(String),
}

pub async fn handle_frame(ctx: &BrokerContext, peer: std::net::SocketAddr, frame: Bytes) -> Outcome {
    let Some((api_key, api_version, correlation_id)) = peek_fixed_header(&frame) else {
        return Outcome::Close("request shorter than a header".into());
    };
    let key = match served(api_key, api_version) {
        Served::Yes(key) => key,
        Served::UnsupportedVersion(ApiKey::ApiVersions) => {
            return respond(ApiKey::ApiVersions, 0, correlation_id, &api::api_versions::unsupported_version_answer());
        }
        Served::UnsupportedVersion(key) => {
            return Outcome::Close(format!(
                "{key:?} v{api_version} is not supported (correlation id {correlation_id})"
            ));
        }
        Served::Unknown => return Outcome::Close(format!("API key {api_key} is not served")),
    };
    let (header, body) = match split_request(frame, key.request_header_version(api_version)) {
        Ok(parts) => parts,
        Err(e) => return Outcome::Close(format!("bad {key:?} request header: {e}")),
    };
    if let Err(e) = check_request_body(api_key, api_version, &body) {
        return Outcome::Close(format!("malformed {key:?} v{api_version} request: {e}"));
    }
    route(ctx, peer, key, &header, body).await
}

async fn route(
    ctx: &BrokerContext,
    peer: std::net::SocketAddr,
    key: ApiKey,
    header: &RequestHeader,
    mut body: Bytes,
) -> Outcome {
    let v = header.api_version;
    let c = header.correlation_id;
    macro_rules! decode {
        ($ty:ty) => {
            match <$ty>::decode(&mut body, v) {
                Ok(req) => req,
                Err(e) => return Outcome::Close(format!("cannot decode {key:?} v{v}: {e}")),
            }
        };
    }
    match key {
        ApiKey::ApiVersions => {
            let req = decode!(ApiVersionsRequest);
            respond(key, v, c, &api::api_versions::handle(v, &req))
        }
        ApiKey::Metadata => {
            let req = decode!(MetadataRequest);
            respond(key, v, c, &api::metadata::handle(ctx, v, req).await)
        }
        ApiKey::CreateTopics => {
            let req = decode!(CreateTopicsRequest);
            respond(key, v, c, &api::create_topics::handle(ctx, v, req).await)
        }
        ApiKey::Produce => {
            let req = decode!(ProduceRequest);
            match api::produce::handle(ctx, v, req).await {
                Some(resp) => respond(key, v, c, &resp),
                None => Outcome::NoResponse,
            }
        }
        ApiKey::Fetch => {
            let req = decode!(FetchRequest);
            let answer = api::fetch::handle(ctx, v, req).await;
            respond_spliced(key, v, c, &answer.response, answer.ranges, answer.woken_at)
        }
        ApiKey::ListOffsets => {
            let req = decode!(ListOffsetsRequest);
            respond(key, v, c, &api::list_offsets::handle(ctx, v, req))
        }
        ApiKey::DeleteTopics => {
            let req = decode!(DeleteTopicsRequest);
            respond(key, v, c, &api::delete_topics::handle(ctx, v, req).await)
        }
        ApiKey::CreatePartitions => {
            let req = decode!(CreatePartitionsRequest);
            respond(key, v, c, &api::create_partitions::handle(ctx, v, req).await)
        }
        ApiKey::DeleteRecords => {
            let req = decode!(DeleteRecordsRequest);
            respond(key, v, c, &api::delete_records::handle(ctx, v, req).await)
        }
        ApiKey::DescribeCluster => {
            let req = decode!(DescribeClusterRequest);
            respond(key, v, c, &api::describe_cluster::handle(ctx, v, &req))
        }
        ApiKey::DescribeConfigs => {
            let req = decode!(DescribeConfigsRequest);
            respond(key, v, c, &api::describe_configs::handle(ctx, v, req))
        }
        ApiKey::IncrementalAlterConfigs => {
            let req = decode!(IncrementalAlterConfigsRequest);
            respond(key, v, c, &api::alter_configs::incremental(ctx, v, req).await)
        }
        ApiKey::AlterConfigs => {
            let req = decode!(AlterConfigsRequest);
            respond(key, v, c, &api::alter_configs::legacy(ctx, v, req).await)
        }
        ApiKey::DescribeLogDirs => {
            let req = decode!(DescribeLogDirsRequest);
            respond(key, v, c, &api::describe_log_dirs::handle(ctx, v, req).await)
        }
        ApiKey::DescribeProducers => {
            let req = decode!(DescribeProducersRequest);
            respond(key, v, c, &api::describe_producers::handle(ctx, v, req))
        }
        ApiKey::DescribeTopicPartitions => {
            let req = decode!(DescribeTopicPartitionsRequest);
            respond(key, v, c, &api::describe_topic_partitions::handle(ctx, req))
        }
        ApiKey::OffsetForLeaderEpoch => {
            let req = decode!(OffsetForLeaderEpochRequest);
            respond(key, v, c, &api::offset_for_leader_epoch::handle(ctx, v, req))
        }
        ApiKey::InitProducerId => {
            let req = decode!(InitProducerIdRequest);
            respond(key, v, c, &api::init_producer_id::handle(ctx, v, req).await)
        }
        ApiKey::FindCoordinator => {
            let req = decode!(FindCoordinatorRequest);
            respond(key, v, c, &api::group_admin::find_coordinator(ctx, v, req))
        }
        ApiKey::JoinGroup => {
            let req = decode!(JoinGroupRequest);
            let client = api::group_membership::Client {
                id: header.client_id.clone().unwrap_or_default(),
                host: format!("/{}", peer.ip()),
            };
            respond(key, v, c, &api::group_membership::join_group(ctx, v, req, client).await)
        }
        ApiKey::SyncGroup => {
            let req = decode!(SyncGroupRequest);
            respond(key, v, c, &api::group_membership::sync_group(ctx, v, req).await)
        }
        ApiKey::Heartbeat => {
            let req = decode!(HeartbeatRequest);
            respond(key, v, c, &api::group_membership::heartbeat(ctx, v, req))
        }
        ApiKey::LeaveGroup => {
            let req = decode!(LeaveGroupRequest);
            respond(key, v, c, &api::group_membership::leave_group(ctx, v, req))
        }
        ApiKey::OffsetCommit => {
            let req = decode!(OffsetCommitRequest);
            respond(key, v, c, &api::group_offsets::offset_commit(ctx, v, req).await)
        }
        ApiKey::OffsetFetch => {
            let req = decode!(OffsetFetchRequest);
            respond(key, v, c, &api::group_offsets::offset_fetch(ctx, v, req))
        }
        ApiKey::OffsetDelete => {
            let req = decode!(OffsetDeleteRequest);
            respond(key, v, c, &api::group_offsets::offset_delete(ctx, v, req).await)
        }
        ApiKey::ListGroups => {
            let req = decode!(ListGroupsRequest);
            respond(key, v, c, &api::group_admin::list_groups(ctx, v, req))
        }
        ApiKey::DescribeGroups => {
            let req = decode!(DescribeGroupsRequest);
            respond(key, v, c, &api::group_admin::describe_groups(ctx, v, req))
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let req = decode!(ConsumerGroupHeartbeatRequest);
            let client = api::group_membership::Client {
                id: header.client_id.clone().unwrap_or_default(),
                host: format!("/{}", peer.ip()),
            };
            respond(key, v, c, &api::consumer_group::heartbeat(ctx, v, req, client))
        }
        ApiKey::ConsumerGroupDescribe => {
            let req = decode!(ConsumerGroupDescribeRequest);
            respond(key, v, c, &api::consumer_group::describe(ctx, v, req))
        }
        ApiKey::AddPartitionsToTxn => {
            let req = decode!(AddPartitionsToTxnRequest);
            respond(key, v, c, &api::transactions::add_partitions(ctx, v, req).await)
        }
        ApiKey::AddOffsetsToTxn => {
            let req = decode!(AddOffsetsToTxnRequest);
            respond(key, v, c, &api::transactions::add_offsets(ctx, v, req).await)
        }
        ApiKey::TxnOffsetCommit => {
            let req = decode!(TxnOffsetCommitRequest);
            respond(key, v, c, &api::transactions::txn_offset_commit(ctx, v, req).await)
        }
        ApiKey::EndTxn => {
            let req = decode!(EndTxnRequest);
            respond(key, v, c, &api::transactions::end_txn(ctx, v, req).await)
        }
        ApiKey::DeleteGroups => {
            let req = decode!(DeleteGroupsRequest);
            respond(key, v, c, &api::group_admin::delete_groups(ctx, v, req).await)
        }
        other => Outcome::Close(format!("{other:?} is in the served table but has no handler")),
    }
}

/// Encodes a response whose body refers to file ranges (Fetch): the parts
/// to send, the ranges left in place of their placeholders.
fn respond_spliced<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
    ranges: crate::splice::FileRanges,
    woken_at: Option<std::time::Instant>,
) -> Outcome {
    if ranges.is_empty() {
        return match respond(key, version, correlation_id, body) {
            Outcome::Respond(bytes) => {
                Outcome::RespondParts { parts: vec![crate::splice::ResponsePart::Bytes(bytes)], woken_at }
            }
            other => other,
        };
    }
    let mut out = crate::splice::SpliceBuf::new(RESPONSE_HEADER_BYTES_MAX + 4096, ranges);
    out.put_i32(0);
    let mut header = BytesMut::with_capacity(RESPONSE_HEADER_BYTES_MAX);
    put_response_header(&mut header, correlation_id, response_header_version(key, version));
    out.put_slice(&header);
    if let Err(e) = body.encode(&mut out, version) {
        return Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}"));
    }
    let len = (kafka_protocol::protocol::buf::ByteBufMut::offset(&out) - 4) as i32;
    if let Err(e) = out.patch_i32(0, len) {
        return Outcome::Close(format!("cannot frame {key:?} v{version} response: {e}"));
    }
    match out.finish() {
        Ok(parts) => Outcome::RespondParts { parts, woken_at },
        Err(e) => Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}")),
    }
}

/// Length prefix, correlation id and an empty tagged-field section.
const RESPONSE_HEADER_BYTES_MAX: usize = 4 + 4 + 1;

/// Encodes a response frame: length prefix, header, body.
fn respond<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Outcome {
    // Sized up front: a Fetch answer of tens of megabytes would otherwise be
    // copied again at every doubling of the buffer.
    let body_bytes = body.compute_size(version).unwrap_or(0);
    let mut out = BytesMut::with_capacity(RESPONSE_HEADER_BYTES_MAX + body_bytes);
    out.put_i32(0);
    put_response_header(&mut out, correlation_id, response_header_version(key, version));
    if let Err(e) = body.encode(&mut out, version) {
        return Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}"));
    }
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Outcome::Respond(out.freeze())
}
