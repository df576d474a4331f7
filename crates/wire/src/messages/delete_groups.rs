//! DeleteGroups (key 42) to v3. v3 (Kafka 4.4) adds each group result's
//! ErrorMessage (nullable string, after ErrorCode); the request is laid out as
//! v2's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};

use super::kit::{
    get_array_with, get_nullable_str, get_str, known, put_array_with, put_nullable_str, put_str, read_tags, request,
    same_layout, size_by_encoding, unsupported, write_tags, Tags,
};

const ERROR_MESSAGE_VERSION: i16 = 3;
const FLEXIBLE_VERSION: i16 = 2;

same_layout!(
    /// A DeleteGroups request, v0-v3.
    DeleteGroupsRequest(kp::DeleteGroupsRequest), max 3, as 2
);
request!(DeleteGroupsRequest => DeleteGroupsResponse, key ApiKey::DeleteGroups);

/// A DeleteGroups response, v0-v3.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteGroupsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<DeletableGroupResult>,
    pub unknown_tagged_fields: Tags,
}

/// One group's result: kafka-protocol's, and the message v3 adds (dropped
/// below v3, where Kafka's field is ignorable).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletableGroupResult {
    pub result: kp::delete_groups_response::DeletableGroupResult,
    pub error_message: Option<StrBytes>,
}

impl Message for DeleteGroupsResponse {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: ERROR_MESSAGE_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for DeleteGroupsResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if !known::<Self>(version) {
            return Err(unsupported("DeleteGroupsResponse", version));
        }
        let flexible = version >= FLEXIBLE_VERSION;
        buf.put_i32(self.throttle_time_ms);
        put_array_with(buf, &self.results, flexible, |buf, r| {
            if version < ERROR_MESSAGE_VERSION {
                return r.result.encode(buf, version);
            }
            put_str(buf, &r.result.group_id)?;
            buf.put_i16(r.result.error_code);
            put_nullable_str(buf, r.error_message.as_deref())?;
            write_tags(buf, &r.result.unknown_tagged_fields)
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

impl Decodable for DeleteGroupsResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if !known::<Self>(version) {
            return Err(unsupported("DeleteGroupsResponse", version));
        }
        let flexible = version >= FLEXIBLE_VERSION;
        let throttle_time_ms = buf.try_get_i32()?;
        let results = get_array_with(buf, flexible, |buf| decode_result(buf, version))?;
        let unknown_tagged_fields = if flexible { read_tags(buf)? } else { Tags::new() };
        Ok(DeleteGroupsResponse { throttle_time_ms, results, unknown_tagged_fields })
    }
}

fn decode_result<B: ByteBuf>(buf: &mut B, version: i16) -> Result<DeletableGroupResult> {
    if version < ERROR_MESSAGE_VERSION {
        let result = kp::delete_groups_response::DeletableGroupResult::decode(buf, version)?;
        return Ok(DeletableGroupResult { result, error_message: None });
    }
    let mut result = kp::delete_groups_response::DeletableGroupResult::default();
    result.group_id = get_str(buf)?.into();
    result.error_code = buf.try_get_i16()?;
    let error_message = get_nullable_str(buf)?;
    result.unknown_tagged_fields = read_tags(buf)?;
    Ok(DeletableGroupResult { result, error_message })
}

impl HeaderVersion for DeleteGroupsResponse {
    fn header_version(version: i16) -> i16 {
        if version >= FLEXIBLE_VERSION {
            1
        } else {
            0
        }
    }
}
