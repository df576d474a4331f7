//! OffsetFetch (key 9) to v10. v10 (KIP-848, stable from Kafka 4.4) names
//! topics by id instead of by name. kafka-protocol already answers at v10 and
//! its request types carry `topic_id`, but its request codec stops at v9: v10's
//! request is written here; the response is kafka-protocol's own.

use anyhow::Result;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    deref_to, get_array_with, get_bool, get_nullable_array_with, get_nullable_str, get_str, get_uuid, known,
    put_array_with, put_bool, put_nullable_array_with, put_nullable_str, put_str, put_uuid, read_tags, request,
    size_by_encoding, unsupported, write_tags,
};

/// The first version naming topics by id.
pub const TOPIC_ID_VERSION: i16 = 10;

/// An OffsetFetch request, v1-v10: at v10 each topic's `topic_id` is set and its name is not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchRequest(pub kp::OffsetFetchRequest);

impl Message for OffsetFetchRequest {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: TOPIC_ID_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for OffsetFetchRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::OffsetFetchRequest>(version) {
            return self.0.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetFetchRequest", version));
        }
        put_array_with(buf, &self.groups, true, |buf, g| {
            put_str(buf, &g.group_id)?;
            put_nullable_str(buf, g.member_id.as_deref())?;
            buf.put_i32(g.member_epoch);
            put_nullable_array_with(buf, g.topics.as_deref(), |buf, t| {
                if !t.name.is_empty() {
                    anyhow::bail!("a topic name is set, which OffsetFetch v{version} lacks");
                }
                put_uuid(buf, &t.topic_id);
                put_array_with(buf, &t.partition_indexes, true, |buf, p| {
                    buf.put_i32(*p);
                    Ok(())
                })?;
                write_tags(buf, &t.unknown_tagged_fields)
            })?;
            write_tags(buf, &g.unknown_tagged_fields)
        })?;
        put_bool(buf, self.require_stable);
        write_tags(buf, &self.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::OffsetFetchRequest>(version) {
            return self.0.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for OffsetFetchRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::OffsetFetchRequest>(version) {
            return kp::OffsetFetchRequest::decode(buf, version).map(OffsetFetchRequest);
        }
        if !known::<Self>(version) {
            return Err(unsupported("OffsetFetchRequest", version));
        }
        let mut r = kp::OffsetFetchRequest::default();
        r.groups = get_array_with(buf, true, decode_group_v10)?;
        r.require_stable = get_bool(buf)?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(OffsetFetchRequest(r))
    }
}

fn decode_group_v10<B: ByteBuf>(buf: &mut B) -> Result<OffsetFetchRequestGroup> {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = get_str(buf)?.into();
    g.member_id = get_nullable_str(buf)?;
    g.member_epoch = buf.try_get_i32()?;
    g.topics = get_nullable_array_with(buf, true, |buf| {
        let mut t = OffsetFetchRequestTopics::default();
        t.topic_id = get_uuid(buf)?;
        t.partition_indexes = get_array_with(buf, true, |buf| Ok(buf.try_get_i32()?))?;
        t.unknown_tagged_fields = read_tags(buf)?;
        Ok(t)
    })?;
    g.unknown_tagged_fields = read_tags(buf)?;
    Ok(g)
}

impl HeaderVersion for OffsetFetchRequest {
    fn header_version(version: i16) -> i16 {
        <kp::OffsetFetchRequest as HeaderVersion>::header_version(version)
    }
}

deref_to!(OffsetFetchRequest => kp::OffsetFetchRequest);
request!(OffsetFetchRequest => kp::OffsetFetchResponse, key ApiKey::OffsetFetch);
