//! DescribeLogDirs (key 35) to v5. v5 (Kafka 4.4) adds each log directory's
//! IsCordoned (bool, after UsableBytes); the request is laid out as v4's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    get_array, get_array_with, get_bool, get_str, known, put_array, put_array_with, put_bool, put_str, read_tags,
    request, same_layout, size_by_encoding, unsupported, write_tags, Tags,
};

const CORDONED_VERSION: i16 = 5;
const FLEXIBLE_VERSION: i16 = 2;
const TOP_ERROR_CODE_VERSION: i16 = 3;
/// The layout of v5's topics.
const TOPIC_LAYOUT: i16 = 4;

same_layout!(
    /// A DescribeLogDirs request, v1-v5.
    DescribeLogDirsRequest(kp::DescribeLogDirsRequest), max 5, as 4
);
request!(DescribeLogDirsRequest => DescribeLogDirsResponse, key ApiKey::DescribeLogDirs);

/// A DescribeLogDirs response, v1-v5.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsResponse {
    pub throttle_time_ms: i32,
    /// v3+.
    pub error_code: i16,
    pub results: Vec<DescribeLogDirsResult>,
    pub unknown_tagged_fields: Tags,
}

/// One log directory: kafka-protocol's, and whether it is cordoned (v5; dropped
/// below, where Kafka's field is ignorable).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsResult {
    pub result: kp::describe_log_dirs_response::DescribeLogDirsResult,
    pub is_cordoned: bool,
}

impl Message for DescribeLogDirsResponse {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: CORDONED_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for DescribeLogDirsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if !known::<Self>(version) {
            return Err(unsupported("DescribeLogDirsResponse", version));
        }
        let flexible = version >= FLEXIBLE_VERSION;
        buf.put_i32(self.throttle_time_ms);
        if version >= TOP_ERROR_CODE_VERSION {
            buf.put_i16(self.error_code);
        }
        put_array_with(buf, &self.results, flexible, |buf, r| {
            if version < CORDONED_VERSION {
                return r.result.encode(buf, version);
            }
            let d = &r.result;
            buf.put_i16(d.error_code);
            put_str(buf, &d.log_dir)?;
            put_array(buf, &d.topics, TOPIC_LAYOUT, true)?;
            buf.put_i64(d.total_bytes);
            buf.put_i64(d.usable_bytes);
            put_bool(buf, r.is_cordoned);
            write_tags(buf, &d.unknown_tagged_fields)
        })?;
        if flexible {
            write_tags(buf, &self.unknown_tagged_fields)?;
        }
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        size_by_encoding(self, version)
    }
}

impl Decodable for DescribeLogDirsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if !known::<Self>(version) {
            return Err(unsupported("DescribeLogDirsResponse", version));
        }
        let flexible = version >= FLEXIBLE_VERSION;
        let throttle_time_ms = buf.try_get_i32()?;
        let error_code = if version >= TOP_ERROR_CODE_VERSION { buf.try_get_i16()? } else { 0 };
        let results = get_array_with(buf, flexible, |buf| decode_result(buf, version))?;
        let unknown_tagged_fields = if flexible { read_tags(buf)? } else { Tags::new() };
        Ok(DescribeLogDirsResponse { throttle_time_ms, error_code, results, unknown_tagged_fields })
    }
}

fn decode_result<B: ByteBuf>(buf: &mut B, version: i16) -> Result<DescribeLogDirsResult> {
    if version < CORDONED_VERSION {
        let result = kp::describe_log_dirs_response::DescribeLogDirsResult::decode(buf, version)?;
        return Ok(DescribeLogDirsResult { result, is_cordoned: false });
    }
    let mut d = kp::describe_log_dirs_response::DescribeLogDirsResult::default();
    d.error_code = buf.try_get_i16()?;
    d.log_dir = get_str(buf)?;
    d.topics = get_array(buf, TOPIC_LAYOUT, true)?;
    d.total_bytes = buf.try_get_i64()?;
    d.usable_bytes = buf.try_get_i64()?;
    let is_cordoned = get_bool(buf)?;
    d.unknown_tagged_fields = read_tags(buf)?;
    Ok(DescribeLogDirsResult { result: d, is_cordoned })
}

impl HeaderVersion for DescribeLogDirsResponse {
    fn header_version(version: i16) -> i16 {
        if version >= FLEXIBLE_VERSION {
            1
        } else {
            0
        }
    }
}
