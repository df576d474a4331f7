//! ApiVersions (key 18) to v5. v5 (Kafka 4.4, KIP-1242) adds ClusterId
//! (nullable string) and NodeId (int32) to the request: the cluster and node
//! the client means to reach, so that a broker that is not that node answers
//! REBOOTSTRAP_REQUIRED. The response is laid out as v4's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};

use super::kit::{
    get_nullable_str, get_str, known, put_nullable_str, put_str, read_tags, request, same_layout, size_by_encoding,
    unsupported, write_tags,
};

/// An ApiVersions request, v0-v5.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiVersionsRequest {
    pub request: kp::ApiVersionsRequest,
    /// v5: the cluster the client means to reach, or null.
    pub cluster_id: Option<StrBytes>,
    /// v5: the node the client means to reach, or -1.
    pub node_id: i32,
}

impl Default for ApiVersionsRequest {
    fn default() -> Self {
        ApiVersionsRequest { request: kp::ApiVersionsRequest::default(), cluster_id: None, node_id: -1 }
    }
}

impl From<kp::ApiVersionsRequest> for ApiVersionsRequest {
    fn from(request: kp::ApiVersionsRequest) -> Self {
        ApiVersionsRequest { request, ..ApiVersionsRequest::default() }
    }
}

impl std::ops::Deref for ApiVersionsRequest {
    type Target = kp::ApiVersionsRequest;
    fn deref(&self) -> &kp::ApiVersionsRequest {
        &self.request
    }
}

impl Message for ApiVersionsRequest {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for ApiVersionsRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::ApiVersionsRequest>(version) {
            if self.cluster_id.is_some() || self.node_id != -1 {
                anyhow::bail!("a cluster or node id is set, which ApiVersions v{version} lacks");
            }
            return self.request.encode(buf, version);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ApiVersionsRequest", version));
        }
        put_str(buf, &self.request.client_software_name)?;
        put_str(buf, &self.request.client_software_version)?;
        put_nullable_str(buf, self.cluster_id.as_deref())?;
        buf.put_i32(self.node_id);
        write_tags(buf, &self.request.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        size_by_encoding(self, version)
    }
}

impl Decodable for ApiVersionsRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if known::<kp::ApiVersionsRequest>(version) {
            return kp::ApiVersionsRequest::decode(buf, version).map(ApiVersionsRequest::from);
        }
        if !known::<Self>(version) {
            return Err(unsupported("ApiVersionsRequest", version));
        }
        let mut request = kp::ApiVersionsRequest::default();
        request.client_software_name = get_str(buf)?;
        request.client_software_version = get_str(buf)?;
        let cluster_id = get_nullable_str(buf)?;
        let node_id = buf.try_get_i32()?;
        request.unknown_tagged_fields = read_tags(buf)?;
        Ok(ApiVersionsRequest { request, cluster_id, node_id })
    }
}

impl HeaderVersion for ApiVersionsRequest {
    fn header_version(version: i16) -> i16 {
        <kp::ApiVersionsRequest as HeaderVersion>::header_version(version.min(4))
    }
}

same_layout!(
    /// An ApiVersions response, v0-v5.
    ApiVersionsResponse(kp::ApiVersionsResponse), max 5, as 4
);
request!(ApiVersionsRequest => ApiVersionsResponse, key ApiKey::ApiVersions);
