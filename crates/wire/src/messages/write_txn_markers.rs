//! WriteTxnMarkers (key 27) to v2. v2 (Kafka 4.4, KIP-1228) adds each marker's
//! TransactionVersion (int8, after CoordinatorEpoch); the response is laid out
//! as v1's.

use anyhow::Result;
use kafka_protocol::messages::{self as kp, ApiKey};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    get_array, get_array_with, get_bool, known, put_array, put_array_with, put_bool, read_tags, request, same_layout,
    size_by_encoding, unsupported, write_tags, Tags,
};

const TRANSACTION_VERSION_VERSION: i16 = 2;
/// The layout of v2's topics.
const TOPIC_LAYOUT: i16 = 1;

/// A WriteTxnMarkers request, v1-v2.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteTxnMarkersRequest {
    pub markers: Vec<WritableTxnMarker>,
    pub unknown_tagged_fields: Tags,
}

/// One marker: kafka-protocol's, and the transaction version v2 adds (0 below v2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritableTxnMarker {
    pub marker: kp::write_txn_markers_request::WritableTxnMarker,
    /// 0 or 1: transactions of version 0/1; 2: KIP-890's (TV2).
    pub transaction_version: i8,
}

impl Message for WriteTxnMarkersRequest {
    const VERSIONS: VersionRange = VersionRange { min: 1, max: TRANSACTION_VERSION_VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for WriteTxnMarkersRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if !known::<Self>(version) {
            return Err(unsupported("WriteTxnMarkersRequest", version));
        }
        // Flexible at every version.
        put_array_with(buf, &self.markers, true, |buf, m| m.encode(buf, version))?;
        write_tags(buf, &self.unknown_tagged_fields)
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        size_by_encoding(self, version)
    }
}

impl Decodable for WriteTxnMarkersRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if !known::<Self>(version) {
            return Err(unsupported("WriteTxnMarkersRequest", version));
        }
        let markers = get_array_with(buf, true, |buf| WritableTxnMarker::decode(buf, version))?;
        Ok(WriteTxnMarkersRequest { markers, unknown_tagged_fields: read_tags(buf)? })
    }
}

impl HeaderVersion for WriteTxnMarkersRequest {
    fn header_version(_version: i16) -> i16 {
        2
    }
}

impl WritableTxnMarker {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if known::<kp::WriteTxnMarkersRequest>(version) {
            if self.transaction_version != 0 {
                anyhow::bail!("a transaction version is set, which WriteTxnMarkers v{version} lacks");
            }
            return self.marker.encode(buf, version);
        }
        let m = &self.marker;
        buf.put_i64(m.producer_id.0);
        buf.put_i16(m.producer_epoch);
        put_bool(buf, m.transaction_result);
        put_array(buf, &m.topics, TOPIC_LAYOUT, true)?;
        buf.put_i32(m.coordinator_epoch);
        buf.put_i8(self.transaction_version);
        write_tags(buf, &m.unknown_tagged_fields)
    }
}

impl WritableTxnMarker {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<WritableTxnMarker> {
        if known::<kp::WriteTxnMarkersRequest>(version) {
            let marker = kp::write_txn_markers_request::WritableTxnMarker::decode(buf, version)?;
            return Ok(WritableTxnMarker { marker, transaction_version: 0 });
        }
        let mut m = kp::write_txn_markers_request::WritableTxnMarker::default();
        m.producer_id = buf.try_get_i64()?.into();
        m.producer_epoch = buf.try_get_i16()?;
        m.transaction_result = get_bool(buf)?;
        m.topics = get_array(buf, TOPIC_LAYOUT, true)?;
        m.coordinator_epoch = buf.try_get_i32()?;
        let transaction_version = buf.try_get_i8()?;
        m.unknown_tagged_fields = read_tags(buf)?;
        Ok(WritableTxnMarker { marker: m, transaction_version })
    }
}

same_layout!(
    /// A WriteTxnMarkers response, v1-v2.
    WriteTxnMarkersResponse(kp::WriteTxnMarkersResponse), max 2, as 1
);
request!(WriteTxnMarkersRequest => WriteTxnMarkersResponse, key ApiKey::WriteTxnMarkers);
