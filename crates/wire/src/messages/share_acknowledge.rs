//! ShareAcknowledge (key 79) to v2. v2 (Kafka 4.2, KIP-1222) adds the
//! request's IsRenewAck (bool, after ShareSessionEpoch: the acknowledgements
//! hold RENEW, type 4) and the response's AcquisitionLockTimeoutMs (int32,
//! after ErrorMessage: how long a renewed lock lasts; ignorable, so dropped
//! below v2). The topics are laid out as v1's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    get_array, get_bool, get_nullable_str, known, put_array, put_bool, put_nullable_str, read_tags, request,
    size_by_encoding, unsupported, write_tags,
};

/// The first version with renew acknowledgements.
pub const RENEW_VERSION: i16 = 2;
/// The layout of v2's nested structs.
const NESTED_LAYOUT: i16 = 1;

/// A ShareAcknowledge request, v1-v2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareAcknowledgeRequest {
    pub request: kp::ShareAcknowledgeRequest,
    /// v2: whether the acknowledgements hold RENEW ones (false below v2).
    pub is_renew_ack: bool,
}

/// A ShareAcknowledge response, v1-v2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareAcknowledgeResponse {
    pub response: kp::ShareAcknowledgeResponse,
    /// v2: the acquisition lock's duration, for the renewed records.
    pub acquisition_lock_timeout_ms: i32,
}

impl From<kp::ShareAcknowledgeRequest> for ShareAcknowledgeRequest {
    fn from(request: kp::ShareAcknowledgeRequest) -> Self {
        ShareAcknowledgeRequest { request, is_renew_ack: false }
    }
}

impl From<kp::ShareAcknowledgeResponse> for ShareAcknowledgeResponse {
    fn from(response: kp::ShareAcknowledgeResponse) -> Self {
        ShareAcknowledgeResponse { response, acquisition_lock_timeout_ms: 0 }
    }
}

impl std::ops::Deref for ShareAcknowledgeRequest {
    type Target = kp::ShareAcknowledgeRequest;
    fn deref(&self) -> &kp::ShareAcknowledgeRequest {
        &self.request
    }
}

impl std::ops::DerefMut for ShareAcknowledgeRequest {
    fn deref_mut(&mut self) -> &mut kp::ShareAcknowledgeRequest {
        &mut self.request
    }
}

impl std::ops::Deref for ShareAcknowledgeResponse {
    type Target = kp::ShareAcknowledgeResponse;
    fn deref(&self) -> &kp::ShareAcknowledgeResponse {
        &self.response
    }
}

impl std::ops::DerefMut for ShareAcknowledgeResponse {
    fn deref_mut(&mut self) -> &mut kp::ShareAcknowledgeResponse {
        &mut self.response
    }
}

impl Message for ShareAcknowledgeRequest {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: RENEW_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for ShareAcknowledgeResponse {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: RENEW_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for ShareAcknowledgeRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::ShareAcknowledgeRequest>(version) {
            // As Kafka's request builder: v1 has no RENEW.
            if self.is_renew_ack {
                anyhow::bail!("renew acknowledgements, which ShareAcknowledge v{version} lacks");
            }
            return self.request.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareAcknowledgeRequest", version));
        }
        let r = &self.request;
        put_nullable_str(buf, r.group_id.as_ref().map(|g| g.0.as_str()))?;
        put_nullable_str(buf, r.member_id.as_deref())?;
        buf.put_i32(r.share_session_epoch);
        put_bool(buf, self.is_renew_ack);
        put_array(buf, &r.topics, NESTED_LAYOUT, true)?;
        write_tags(buf, &r.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::ShareAcknowledgeRequest>(version) {
            return self.request.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for ShareAcknowledgeRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::ShareAcknowledgeRequest>(version) {
            return kp::ShareAcknowledgeRequest::decode(buf, version).map(ShareAcknowledgeRequest::from);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareAcknowledgeRequest", version));
        }
        let mut r = kp::ShareAcknowledgeRequest::default();
        r.group_id = get_nullable_str(buf)?.map(Into::into);
        r.member_id = get_nullable_str(buf)?;
        r.share_session_epoch = buf.try_get_i32()?;
        let is_renew_ack = get_bool(buf)?;
        r.topics = get_array(buf, NESTED_LAYOUT, true)?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(ShareAcknowledgeRequest { request: r, is_renew_ack })
    }
}

impl Encodable for ShareAcknowledgeResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        // The lock timeout is ignorable: below v2 it is dropped, not refused.
        if known::<kp::ShareAcknowledgeResponse>(version) {
            return self.response.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareAcknowledgeResponse", version));
        }
        let r = &self.response;
        buf.put_i32(r.throttle_time_ms);
        buf.put_i16(r.error_code);
        put_nullable_str(buf, r.error_message.as_deref())?;
        buf.put_i32(self.acquisition_lock_timeout_ms);
        put_array(buf, &r.responses, NESTED_LAYOUT, true)?;
        put_array(buf, &r.node_endpoints, NESTED_LAYOUT, true)?;
        write_tags(buf, &r.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        if known::<kp::ShareAcknowledgeResponse>(version) {
            return self.response.compute_size(version);
        }
        size_by_encoding(self, version)
    }
}

impl Decodable for ShareAcknowledgeResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::ShareAcknowledgeResponse>(version) {
            return kp::ShareAcknowledgeResponse::decode(buf, version).map(ShareAcknowledgeResponse::from);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ShareAcknowledgeResponse", version));
        }
        let mut r = kp::ShareAcknowledgeResponse::default();
        r.throttle_time_ms = buf.try_get_i32()?;
        r.error_code = buf.try_get_i16()?;
        r.error_message = get_nullable_str(buf)?;
        let acquisition_lock_timeout_ms = buf.try_get_i32()?;
        r.responses = get_array(buf, NESTED_LAYOUT, true)?;
        r.node_endpoints = get_array(buf, NESTED_LAYOUT, true)?;
        r.unknown_tagged_fields = read_tags(buf)?;
        Ok(ShareAcknowledgeResponse { response: r, acquisition_lock_timeout_ms })
    }
}

impl HeaderVersion for ShareAcknowledgeRequest {
    fn header_version(version: i16) -> i16 {
        <kp::ShareAcknowledgeRequest as HeaderVersion>::header_version(NESTED_LAYOUT.min(version))
    }
}

impl HeaderVersion for ShareAcknowledgeResponse {
    fn header_version(version: i16) -> i16 {
        <kp::ShareAcknowledgeResponse as HeaderVersion>::header_version(NESTED_LAYOUT.min(version))
    }
}

request!(ShareAcknowledgeRequest => ShareAcknowledgeResponse, key ApiKey::ShareAcknowledge);
