//! OffsetCommit (key 8) to v10. v10 (KIP-848, stable from Kafka 4.4) names
//! topics by id instead of by name, in the request and the response; the rest
//! is laid out as v9's. kafka-protocol's types already carry the `topic_id`
//! fields, so these are its messages with v10 written here.

use anyhow::Result;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponseTopic;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    deref_to, get_array, get_array_with, get_nullable_str, get_str, get_uuid, known, put_array, put_array_with,
    put_nullable_str, put_str, put_uuid, read_tags, request, size_by_encoding, unsupported, write_tags,
};

/// The first version naming topics by id.
pub const TOPIC_ID_VERSION: i16 = 10;
/// The layout of v10's partitions.
const PARTITION_LAYOUT: i16 = 9;

/// An OffsetCommit request, v2-v10: at v10 each topic's `topic_id` is set and its name is not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitRequest(pub kp::OffsetCommitRequest);

/// An OffsetCommit response, v2-v10: at v10 each topic's `topic_id` is set and its name is not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitResponse(pub kp::OffsetCommitResponse);

impl Message for OffsetCommitRequest {
    const VERSIONS: VersionRange = VersionRange { min: 2, max: TOPIC_ID_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for OffsetCommitResponse {
    const VERSIONS: VersionRange = VersionRange { min: 2, max: TOPIC_ID_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for OffsetCommitRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::OffsetCommitRequest>(version) {
            return self.0.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetCommitRequest", version));
        }
        let r = &self.0;
        put_str(buf, &r.group_id)?;
        buf.put_i32(r.generation_id_or_member_epoch);
        put_str(buf, &r.member_id)?;
        put_nullable_str(buf, r.group_instance_id.as_deref())?;
        put_array_with(buf, &r.topics, true, |buf, t| {
            if !t.name.is_empty() {
                anyhow::bail!("a topic name is set, which OffsetCommit v{version} lacks");
            }
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, PARTITION_LAYOUT, true)?;
            write_tags(buf, &t.unknown_tagged_fields)
        })?;
        write_tags(buf, &r.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::OffsetCommitRequest>(version) {
            return self.0.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for OffsetCommitRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::OffsetCommitRequest>(version) {
            return kp::OffsetCommitRequest::decode(buf, version).map(OffsetCommitRequest);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetCommitRequest", version));
        }
        let mut r = kp::OffsetCommitRequest::default();
        r.group_id = get_str(buf)?.into();
        r.generation_id_or_member_epoch = buf.try_get_i32()?;
        r.member_id = get_str(buf)?;
        r.group_instance_id = get_nullable_str(buf)?;
        r.topics = get_array_with(buf, true, |buf| {
            let mut t = OffsetCommitRequestTopic::default();
            t.topic_id = get_uuid(buf)?;
            t.partitions = get_array(buf, PARTITION_LAYOUT, true)?;
            t.unknown_tagged_fields = read_tags(buf)?;
            Ok(t)
        })?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(OffsetCommitRequest(r))
    }
}

impl Encodable for OffsetCommitResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::OffsetCommitResponse>(version) {
            return self.0.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetCommitResponse", version));
        }
        let r = &self.0;
        buf.put_i32(r.throttle_time_ms);
        put_array_with(buf, &r.topics, true, |buf, t| {
            if !t.name.is_empty() {
                anyhow::bail!("a topic name is set, which OffsetCommit v{version} lacks");
            }
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, PARTITION_LAYOUT, true)?;
            write_tags(buf, &t.unknown_tagged_fields)
        })?;
        write_tags(buf, &r.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::OffsetCommitResponse>(version) {
            return self.0.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for OffsetCommitResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::OffsetCommitResponse>(version) {
            return kp::OffsetCommitResponse::decode(buf, version).map(OffsetCommitResponse);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetCommitResponse", version));
        }
        let mut r = kp::OffsetCommitResponse::default();
        r.throttle_time_ms = buf.try_get_i32()?;
        r.topics = get_array_with(buf, true, |buf| {
            let mut t = OffsetCommitResponseTopic::default();
            t.topic_id = get_uuid(buf)?;
            t.partitions = get_array(buf, PARTITION_LAYOUT, true)?;
            t.unknown_tagged_fields = read_tags(buf)?;
            Ok(t)
        })?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(OffsetCommitResponse(r))
    }
}

impl HeaderVersion for OffsetCommitRequest {
    fn header_version(version: i16) -> i16 {
        <kp::OffsetCommitRequest as HeaderVersion>::header_version(version)
    }
}

impl HeaderVersion for OffsetCommitResponse {
    fn header_version(version: i16) -> i16 {
        <kp::OffsetCommitResponse as HeaderVersion>::header_version(version)
    }
}

deref_to!(OffsetCommitRequest => kp::OffsetCommitRequest);
deref_to!(OffsetCommitResponse => kp::OffsetCommitResponse);
request!(OffsetCommitRequest => OffsetCommitResponse, key ApiKey::OffsetCommit);
