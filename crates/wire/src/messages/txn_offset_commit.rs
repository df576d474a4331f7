//! TxnOffsetCommit (key 28) to v6. v6 (KIP-1319, stable from Kafka 4.4) names
//! topics by id instead of by name, in the request and the response; the
//! partitions are laid out as v5's. Kafka renamed GenerationId to
//! GenerationIdOrMemberEpoch at the same time (a consumer-protocol member sends
//! its epoch there). kafka-protocol's topic structs have no `topic_id`, so the
//! request, the response and their topics are our own structs; v0-v5 go through
//! kafka-protocol's codec, converted.

use anyhow::{bail, Result};
use kafka_protocol::messages::txn_offset_commit_request::{self as kp_req, TxnOffsetCommitRequestPartition};
use kafka_protocol::messages::txn_offset_commit_response::{self as kp_resp, TxnOffsetCommitResponsePartition};
use kafka_protocol::messages::{self as kp, ApiKey, GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};

use super::kit::{
    get_array, get_array_with, get_nullable_str, get_str, get_uuid, known, put_array, put_array_with, put_nullable_str,
    put_str, put_uuid, read_tags, request, size_by_encoding, unsupported, write_tags, Tags,
};

/// The first version naming topics by id.
pub const TOPIC_ID_VERSION: i16 = 6;
/// The layout of v6's partitions.
const PARTITION_LAYOUT: i16 = 5;

/// A TxnOffsetCommit request, v0-v6.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnOffsetCommitRequest {
    pub transactional_id: TransactionalId,
    pub group_id: GroupId,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    /// v3+: the generation of a classic group, or the member epoch of a
    /// consumer-protocol group; -1 when not sent.
    pub generation_id_or_member_epoch: i32,
    /// v3+.
    pub member_id: StrBytes,
    /// v3+.
    pub group_instance_id: Option<StrBytes>,
    pub topics: Vec<TxnOffsetCommitRequestTopic>,
    pub unknown_tagged_fields: Tags,
}

/// A topic of the request: by name to v5, by id from v6 (the other is unset).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxnOffsetCommitRequestTopic {
    pub name: TopicName,
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<TxnOffsetCommitRequestPartition>,
    pub unknown_tagged_fields: Tags,
}

/// A TxnOffsetCommit response, v0-v6.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxnOffsetCommitResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<TxnOffsetCommitResponseTopic>,
    pub unknown_tagged_fields: Tags,
}

/// A topic of the response: by name to v5, by id from v6 (the other is unset).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxnOffsetCommitResponseTopic {
    pub name: TopicName,
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<TxnOffsetCommitResponsePartition>,
    pub unknown_tagged_fields: Tags,
}

impl Default for TxnOffsetCommitRequest {
    /// Kafka's defaults (generation -1, empty member id), as kafka-protocol has them.
    fn default() -> Self {
        kp::TxnOffsetCommitRequest::default().into()
    }
}

impl From<kp::TxnOffsetCommitRequest> for TxnOffsetCommitRequest {
    fn from(r: kp::TxnOffsetCommitRequest) -> Self {
        TxnOffsetCommitRequest {
            transactional_id: r.transactional_id,
            group_id: r.group_id,
            producer_id: r.producer_id,
            producer_epoch: r.producer_epoch,
            generation_id_or_member_epoch: r.generation_id,
            member_id: r.member_id,
            group_instance_id: r.group_instance_id,
            topics: r
                .topics
                .into_iter()
                .map(|t| TxnOffsetCommitRequestTopic {
                    name: t.name,
                    topic_id: uuid::Uuid::nil(),
                    partitions: t.partitions,
                    unknown_tagged_fields: t.unknown_tagged_fields,
                })
                .collect(),
            unknown_tagged_fields: r.unknown_tagged_fields,
        }
    }
}

impl TxnOffsetCommitRequest {
    /// kafka-protocol's message, for a version below v6 (which has no topic ids).
    fn to_named(&self, version: i16) -> Result<kp::TxnOffsetCommitRequest> {
        let mut r = kp::TxnOffsetCommitRequest::default();
        r.transactional_id = self.transactional_id.clone();
        r.group_id = self.group_id.clone();
        r.producer_id = self.producer_id;
        r.producer_epoch = self.producer_epoch;
        r.generation_id = self.generation_id_or_member_epoch;
        r.member_id = self.member_id.clone();
        r.group_instance_id = self.group_instance_id.clone();
        r.unknown_tagged_fields = self.unknown_tagged_fields.clone();
        r.topics = self
            .topics
            .iter()
            .map(|t| {
                if !t.topic_id.is_nil() {
                    bail!("a topic id is set, which TxnOffsetCommit v{version} lacks");
                }
                let mut out = kp_req::TxnOffsetCommitRequestTopic::default();
                out.name = t.name.clone();
                out.partitions = t.partitions.clone();
                out.unknown_tagged_fields = t.unknown_tagged_fields.clone();
                Ok(out)
            })
            .collect::<Result<_>>()?;
        Ok(r)
    }
}

impl From<kp::TxnOffsetCommitResponse> for TxnOffsetCommitResponse {
    fn from(r: kp::TxnOffsetCommitResponse) -> Self {
        TxnOffsetCommitResponse {
            throttle_time_ms: r.throttle_time_ms,
            topics: r
                .topics
                .into_iter()
                .map(|t| TxnOffsetCommitResponseTopic {
                    name: t.name,
                    topic_id: uuid::Uuid::nil(),
                    partitions: t.partitions,
                    unknown_tagged_fields: t.unknown_tagged_fields,
                })
                .collect(),
            unknown_tagged_fields: r.unknown_tagged_fields,
        }
    }
}

impl TxnOffsetCommitResponse {
    /// kafka-protocol's message, for a version below v6 (which has no topic ids).
    fn to_named(&self, version: i16) -> Result<kp::TxnOffsetCommitResponse> {
        let mut r = kp::TxnOffsetCommitResponse::default();
        r.throttle_time_ms = self.throttle_time_ms;
        r.unknown_tagged_fields = self.unknown_tagged_fields.clone();
        r.topics = self
            .topics
            .iter()
            .map(|t| {
                if !t.topic_id.is_nil() {
                    bail!("a topic id is set, which TxnOffsetCommit v{version} lacks");
                }
                let mut out = kp_resp::TxnOffsetCommitResponseTopic::default();
                out.name = t.name.clone();
                out.partitions = t.partitions.clone();
                out.unknown_tagged_fields = t.unknown_tagged_fields.clone();
                Ok(out)
            })
            .collect::<Result<_>>()?;
        Ok(r)
    }
}

impl Message for TxnOffsetCommitRequest {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: TOPIC_ID_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for TxnOffsetCommitResponse {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: TOPIC_ID_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for TxnOffsetCommitRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::TxnOffsetCommitRequest>(version) {
            return self.to_named(version)?.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("TxnOffsetCommitRequest", version));
        }
        put_str(buf, &self.transactional_id)?;
        put_str(buf, &self.group_id)?;
        buf.put_i64(self.producer_id.0);
        buf.put_i16(self.producer_epoch);
        buf.put_i32(self.generation_id_or_member_epoch);
        put_str(buf, &self.member_id)?;
        put_nullable_str(buf, self.group_instance_id.as_deref())?;
        put_array_with(buf, &self.topics, true, |buf, t| {
            if !t.name.is_empty() {
                bail!("a topic name is set, which TxnOffsetCommit v{version} lacks");
            }
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, PARTITION_LAYOUT, true)?;
            write_tags(buf, &t.unknown_tagged_fields)
        })?;
        write_tags(buf, &self.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::TxnOffsetCommitRequest>(version) {
            return self.to_named(version)?.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for TxnOffsetCommitRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::TxnOffsetCommitRequest>(version) {
            return kp::TxnOffsetCommitRequest::decode(buf, version).map(Into::into);
        }
        if !known::<Self>(version) {
            return Err(unsupported("TxnOffsetCommitRequest", version));
        }
        Ok(TxnOffsetCommitRequest {
            transactional_id: get_str(buf)?.into(),
            group_id: get_str(buf)?.into(),
            producer_id: buf.try_get_i64()?.into(),
            producer_epoch: buf.try_get_i16()?,
            generation_id_or_member_epoch: buf.try_get_i32()?,
            member_id: get_str(buf)?,
            group_instance_id: get_nullable_str(buf)?,
            topics: get_array_with(buf, true, |buf| {
                Ok(TxnOffsetCommitRequestTopic {
                    name: TopicName::default(),
                    topic_id: get_uuid(buf)?,
                    partitions: get_array(buf, PARTITION_LAYOUT, true)?,
                    unknown_tagged_fields: read_tags(buf)?,
                })
            })?,
            unknown_tagged_fields: read_tags(buf)?,
        })
    }
}

impl Encodable for TxnOffsetCommitResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::TxnOffsetCommitResponse>(version) {
            return self.to_named(version)?.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("TxnOffsetCommitResponse", version));
        }
        buf.put_i32(self.throttle_time_ms);
        put_array_with(buf, &self.topics, true, |buf, t| {
            if !t.name.is_empty() {
                bail!("a topic name is set, which TxnOffsetCommit v{version} lacks");
            }
            put_uuid(buf, &t.topic_id);
            put_array(buf, &t.partitions, PARTITION_LAYOUT, true)?;
            write_tags(buf, &t.unknown_tagged_fields)
        })?;
        write_tags(buf, &self.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::TxnOffsetCommitResponse>(version) {
            return self.to_named(version)?.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for TxnOffsetCommitResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::TxnOffsetCommitResponse>(version) {
            return kp::TxnOffsetCommitResponse::decode(buf, version).map(Into::into);
        }
        if !known::<Self>(version) {
            return Err(unsupported("TxnOffsetCommitResponse", version));
        }
        Ok(TxnOffsetCommitResponse {
            throttle_time_ms: buf.try_get_i32()?,
            topics: get_array_with(buf, true, |buf| {
                Ok(TxnOffsetCommitResponseTopic {
                    name: TopicName::default(),
                    topic_id: get_uuid(buf)?,
                    partitions: get_array(buf, PARTITION_LAYOUT, true)?,
                    unknown_tagged_fields: read_tags(buf)?,
                })
            })?,
            unknown_tagged_fields: read_tags(buf)?,
        })
    }
}

impl HeaderVersion for TxnOffsetCommitRequest {
    fn header_version(version: i16) -> i16 {
        // v6 is flexible, as v3-v5 are.
        <kp::TxnOffsetCommitRequest as HeaderVersion>::header_version(version.min(PARTITION_LAYOUT))
    }
}

impl HeaderVersion for TxnOffsetCommitResponse {
    fn header_version(version: i16) -> i16 {
        <kp::TxnOffsetCommitResponse as HeaderVersion>::header_version(version.min(PARTITION_LAYOUT))
    }
}

request!(TxnOffsetCommitRequest => TxnOffsetCommitResponse, key ApiKey::TxnOffsetCommit);
