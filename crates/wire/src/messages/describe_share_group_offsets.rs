//! DescribeShareGroupOffsets (key 90) to v1. v1 (Kafka 4.2, KIP-1226) adds each
//! partition's Lag (int64, after LeaderEpoch; -1 when unknown); the request is
//! laid out as v0's. Both versions are flexible; the response is written here
//! at both, since kafka-protocol's partition struct has no lag.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};

use super::kit::{
    get_array_with, get_nullable_str, get_str, get_uuid, known, put_array_with, put_nullable_str, put_str, put_uuid,
    read_tags, request, same_layout, size_by_encoding, unsupported, write_tags, Tags,
};

/// The first version with a lag per partition.
pub const LAG_VERSION: i16 = 1;
/// Kafka's Lag when it is not known (a share-partition not initialized yet).
pub const LAG_UNKNOWN: i64 = -1;

same_layout!(
    /// A DescribeShareGroupOffsets request, v0-v1.
    DescribeShareGroupOffsetsRequest(kp::DescribeShareGroupOffsetsRequest), max 1, as 0
);
request!(DescribeShareGroupOffsetsRequest => DescribeShareGroupOffsetsResponse, key ApiKey::DescribeShareGroupOffsets);

/// A DescribeShareGroupOffsets response, v0-v1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeShareGroupOffsetsResponse {
    pub throttle_time_ms: i32,
    pub groups: Vec<DescribeShareGroupOffsetsResponseGroup>,
    pub unknown_tagged_fields: Tags,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeShareGroupOffsetsResponseGroup {
    pub group_id: GroupId,
    pub topics: Vec<DescribeShareGroupOffsetsResponseTopic>,
    pub error_code: i16,
    pub error_message: Option<StrBytes>,
    pub unknown_tagged_fields: Tags,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeShareGroupOffsetsResponseTopic {
    pub topic_name: TopicName,
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<DescribeShareGroupOffsetsResponsePartition>,
    pub unknown_tagged_fields: Tags,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeShareGroupOffsetsResponsePartition {
    pub partition_index: i32,
    pub start_offset: i64,
    pub leader_epoch: i32,
    /// v1+ (ignorable: dropped at v0).
    pub lag: i64,
    pub error_code: i16,
    pub error_message: Option<StrBytes>,
    pub unknown_tagged_fields: Tags,
}

impl Default for DescribeShareGroupOffsetsResponsePartition {
    /// Kafka's default lag is -1 (unknown).
    fn default() -> Self {
        DescribeShareGroupOffsetsResponsePartition {
            partition_index: 0,
            start_offset: 0,
            leader_epoch: 0,
            lag: LAG_UNKNOWN,
            error_code: 0,
            error_message: None,
            unknown_tagged_fields: Tags::new(),
        }
    }
}

impl Message for DescribeShareGroupOffsetsResponse {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: LAG_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for DescribeShareGroupOffsetsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if !known::<Self>(version) {
            return Err(unsupported("DescribeShareGroupOffsetsResponse", version));
        }
        buf.put_i32(self.throttle_time_ms);
        put_array_with(buf, &self.groups, true, |buf, g| {
            put_str(buf, &g.group_id)?;
            put_array_with(buf, &g.topics, true, |buf, t| {
                put_str(buf, &t.topic_name)?;
                put_uuid(buf, &t.topic_id);
                put_array_with(buf, &t.partitions, true, |buf, p| {
                    buf.put_i32(p.partition_index);
                    buf.put_i64(p.start_offset);
                    buf.put_i32(p.leader_epoch);
                    if version >= LAG_VERSION {
                        buf.put_i64(p.lag);
                    }
                    buf.put_i16(p.error_code);
                    put_nullable_str(buf, p.error_message.as_deref())?;
                    write_tags(buf, &p.unknown_tagged_fields)
                })?;
                write_tags(buf, &t.unknown_tagged_fields)
            })?;
            buf.put_i16(g.error_code);
            put_nullable_str(buf, g.error_message.as_deref())?;
            write_tags(buf, &g.unknown_tagged_fields)
        })?;
        write_tags(buf, &self.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        size_by_encoding(self, version)
    }
}

impl Decodable for DescribeShareGroupOffsetsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if !known::<Self>(version) {
            return Err(unsupported("DescribeShareGroupOffsetsResponse", version));
        }
        let throttle_time_ms = buf.try_get_i32()?;
        let groups = get_array_with(buf, true, |buf| {
            let group_id = get_str(buf)?.into();
            let topics = get_array_with(buf, true, |buf| {
                let topic_name = get_str(buf)?.into();
                let topic_id = get_uuid(buf)?;
                let partitions = get_array_with(buf, true, |buf| {
                    let partition_index = buf.try_get_i32()?;
                    let start_offset = buf.try_get_i64()?;
                    let leader_epoch = buf.try_get_i32()?;
                    let lag = if version >= LAG_VERSION { buf.try_get_i64()? } else { LAG_UNKNOWN };
                    Ok(DescribeShareGroupOffsetsResponsePartition {
                        partition_index,
                        start_offset,
                        leader_epoch,
                        lag,
                        error_code: buf.try_get_i16()?,
                        error_message: get_nullable_str(buf)?,
                        unknown_tagged_fields: read_tags(buf)?,
                    })
                })?;
                Ok(DescribeShareGroupOffsetsResponseTopic {
                    topic_name,
                    topic_id,
                    partitions,
                    unknown_tagged_fields: read_tags(buf)?,
                })
            })?;
            Ok(DescribeShareGroupOffsetsResponseGroup {
                group_id,
                topics,
                error_code: buf.try_get_i16()?,
                error_message: get_nullable_str(buf)?,
                unknown_tagged_fields: read_tags(buf)?,
            })
        })?;
        Ok(DescribeShareGroupOffsetsResponse { throttle_time_ms, groups, unknown_tagged_fields: read_tags(buf)? })
    }
}

impl HeaderVersion for DescribeShareGroupOffsetsResponse {
    fn header_version(_version: i16) -> i16 {
        1
    }
}
