//! ShareFetch (key 78) to v2. v2 (Kafka 4.2, KIP-1206 and KIP-1222) adds,
//! after BatchSize, ShareAcquireMode (int8: 0 batch-optimized, 1 record-limit)
//! and IsRenewAck (bool: the acknowledgements hold RENEW, type 4); the topics
//! and forgotten topics are laid out as v1's. The response is laid out as v1's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    get_array, get_bool, get_nullable_str, known, put_array, put_bool, put_nullable_str, read_tags, request,
    same_layout, size_by_encoding, unsupported, write_tags,
};

/// The first version with an acquire mode and renew acknowledgements.
pub const RENEW_VERSION: i16 = 2;
/// The layout of v2's topics and forgotten topics.
const NESTED_LAYOUT: i16 = 1;

/// ShareFetch's acquire modes (KIP-1206), as the request's ShareAcquireMode.
pub mod acquire_mode {
    /// Whole batches: MaxRecords may be exceeded to end on a batch boundary.
    pub const BATCH_OPTIMIZED: i8 = 0;
    /// Never more than MaxRecords records.
    pub const RECORD_LIMIT: i8 = 1;
}

/// A ShareFetch request, v1-v2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareFetchRequest {
    pub request: kp::ShareFetchRequest,
    /// v2: one of [`acquire_mode`] (0, batch-optimized, below v2).
    pub share_acquire_mode: i8,
    /// v2: whether the acknowledgements hold RENEW ones (false below v2).
    pub is_renew_ack: bool,
}

impl From<kp::ShareFetchRequest> for ShareFetchRequest {
    fn from(request: kp::ShareFetchRequest) -> Self {
        ShareFetchRequest { request, ..ShareFetchRequest::default() }
    }
}

impl std::ops::Deref for ShareFetchRequest {
    type Target = kp::ShareFetchRequest;
    fn deref(&self) -> &kp::ShareFetchRequest {
        &self.request
    }
}

impl std::ops::DerefMut for ShareFetchRequest {
    fn deref_mut(&mut self) -> &mut kp::ShareFetchRequest {
        &mut self.request
    }
}

impl Message for ShareFetchRequest {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: RENEW_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for ShareFetchRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::ShareFetchRequest>(version) {
            // As Kafka's request builder: v1 cannot say either.
            if self.is_renew_ack || self.share_acquire_mode != acquire_mode::BATCH_OPTIMIZED {
                anyhow::bail!("an acquire mode or renew acknowledgements, which ShareFetch v{version} lacks");
            }
            return self.request.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareFetchRequest", version));
        }
        let r = &self.request;
        put_nullable_str(buf, r.group_id.as_ref().map(|g| g.0.as_str()))?;
        put_nullable_str(buf, r.member_id.as_deref())?;
        buf.put_i32(r.share_session_epoch);
        buf.put_i32(r.max_wait_ms);
        buf.put_i32(r.min_bytes);
        buf.put_i32(r.max_bytes);
        buf.put_i32(r.max_records);
        buf.put_i32(r.batch_size);
        buf.put_i8(self.share_acquire_mode);
        put_bool(buf, self.is_renew_ack);
        put_array(buf, &r.topics, NESTED_LAYOUT, true)?;
        put_array(buf, &r.forgotten_topics_data, NESTED_LAYOUT, true)?;
        write_tags(buf, &r.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::ShareFetchRequest>(version) {
            return self.request.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for ShareFetchRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::ShareFetchRequest>(version) {
            return kp::ShareFetchRequest::decode(buf, version).map(ShareFetchRequest::from);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareFetchRequest", version));
        }
        let mut r = kp::ShareFetchRequest::default();
        r.group_id = get_nullable_str(buf)?.map(Into::into);
        r.member_id = get_nullable_str(buf)?;
        r.share_session_epoch = buf.try_get_i32()?;
        r.max_wait_ms = buf.try_get_i32()?;
        r.min_bytes = buf.try_get_i32()?;
        r.max_bytes = buf.try_get_i32()?;
        r.max_records = buf.try_get_i32()?;
        r.batch_size = buf.try_get_i32()?;
        let share_acquire_mode = buf.try_get_i8()?;
        let is_renew_ack = get_bool(buf)?;
        r.topics = get_array(buf, NESTED_LAYOUT, true)?;
        r.forgotten_topics_data = get_array(buf, NESTED_LAYOUT, true)?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(ShareFetchRequest { request: r, share_acquire_mode, is_renew_ack })
    }
}

impl HeaderVersion for ShareFetchRequest {
    fn header_version(version: i16) -> i16 {
        <kp::ShareFetchRequest as HeaderVersion>::header_version(NESTED_LAYOUT.min(version))
    }
}

same_layout!(
    /// A ShareFetch response, v1-v2.
    ShareFetchResponse(kp::ShareFetchResponse), max 2, as 1
);
request!(ShareFetchRequest => ShareFetchResponse, key ApiKey::ShareFetch);
