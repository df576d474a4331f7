//! Request and response headers.
//!
//! The fixed part of a request header (api key, version, correlation id) is
//! read first and never fails on a well-sized frame, so even a request the
//! broker cannot serve can be answered (KIP-511) or logged with its
//! correlation id. The client id and the flexible-version tagged fields follow.

use crate::ApiKey;
use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::frame::REQUEST_HEADER_BYTES_MIN;

/// A parsed request header and where the body starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// Why a request header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    #[error("request shorter than the fixed header")]
    Truncated,
    #[error("client id length {len} runs past the end of the request ({remaining} bytes left)")]
    ClientIdTooLong { len: i16, remaining: usize },
    #[error("malformed tagged fields in the request header")]
    BadTaggedFields,
}

/// The fixed 8 bytes of a request header; `None` if the frame is shorter.
pub fn peek_fixed_header(frame: &[u8]) -> Option<(i16, i16, i32)> {
    if frame.len() < REQUEST_HEADER_BYTES_MIN {
        return None;
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Some((api_key, api_version, correlation_id))
}

/// The request header version an API uses at a version, or `None` for an API
/// key this build does not know.
pub fn request_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    let key = ApiKey::try_from(api_key).ok()?;
    Some(key.request_header_version(api_version))
}

/// Splits a request frame into its header and body. `header_version` is 1 or 2
/// (v0 headers, without a client id, are only used by ControlledShutdown v0).
pub fn split_request(frame: Bytes, header_version: i16) -> Result<(RequestHeader, Bytes), HeaderError> {
    let (api_key, api_version, correlation_id) = peek_fixed_header(&frame).ok_or(HeaderError::Truncated)?;
    let mut rest = frame.slice(REQUEST_HEADER_BYTES_MIN..);
    let mut client_id = None;
    if header_version >= 1 {
        if rest.remaining() < 2 {
            return Err(HeaderError::Truncated);
        }
        let len = rest.get_i16();
        if len >= 0 {
            let len_usize = len as usize;
            if len_usize > rest.remaining() {
                return Err(HeaderError::ClientIdTooLong { len, remaining: rest.remaining() });
            }
            let raw = rest.split_to(len_usize);
            // Kafka decodes client ids leniently (invalid UTF-8 becomes U+FFFD).
            client_id = Some(String::from_utf8_lossy(&raw).into_owned());
        }
    }
    if header_version >= 2 {
        skip_tagged_fields(&mut rest).ok_or(HeaderError::BadTaggedFields)?;
    }
    Ok((RequestHeader { api_key, api_version, correlation_id, client_id }, rest))
}

/// Reads an unsigned varint of at most 5 bytes.
pub fn read_unsigned_varint(buf: &mut Bytes) -> Option<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return None;
        }
        let byte = buf.get_u8();
        if i == 4 && byte > 0x0f {
            return None;
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn skip_tagged_fields(buf: &mut Bytes) -> Option<()> {
    let count = read_unsigned_varint(buf)?;
    for _ in 0..count {
        let _tag = read_unsigned_varint(buf)?;
        let size = read_unsigned_varint(buf)? as usize;
        if size > buf.remaining() {
            return None;
        }
        buf.advance(size);
    }
    Some(())
}

/// Writes a response header of `header_version` (0: correlation id only; 1:
/// plus an empty tagged-field section) into `out`.
pub fn put_response_header(out: &mut BytesMut, correlation_id: i32, header_version: i16) {
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0);
    }
}

/// The response header version for an API and version. ApiVersions always
/// answers with v0 whatever the request version (KIP-511).
pub fn response_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    api_key.response_header_version(api_version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(api_key: i16, version: i16, corr: i32, client: Option<&str>, tagged: bool) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api_key);
        b.put_i16(version);
        b.put_i32(corr);
        match client {
            Some(c) => {
                b.put_i16(c.len() as i16);
                b.put_slice(c.as_bytes());
            }
            None => b.put_i16(-1),
        }
        if tagged {
            b.put_u8(0);
        }
        b.put_slice(b"body");
        b.freeze()
    }

    #[test]
    fn splits_v1_and_v2_headers() {
        let (h, body) = split_request(frame(3, 1, 42, Some("rdkafka"), false), 1).unwrap();
        assert_eq!(
            h,
            RequestHeader { api_key: 3, api_version: 1, correlation_id: 42, client_id: Some("rdkafka".into()) }
        );
        assert_eq!(&body[..], b"body");
        let (h, body) = split_request(frame(3, 12, 7, None, true), 2).unwrap();
        assert_eq!(h.client_id, None);
        assert_eq!(&body[..], b"body");
    }

    #[test]
    fn refuses_client_id_past_the_end() {
        let mut b = BytesMut::new();
        b.put_i16(18);
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(500);
        b.put_slice(b"abc");
        assert_eq!(split_request(b.freeze(), 1), Err(HeaderError::ClientIdTooLong { len: 500, remaining: 3 }));
    }

    #[test]
    fn varints_are_bounded_to_five_bytes() {
        let mut ok = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(read_unsigned_varint(&mut ok), Some(u32::MAX));
        let mut overlong = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(read_unsigned_varint(&mut overlong), None);
    }

    #[test]
    fn api_versions_response_header_is_always_v0() {
        assert_eq!(response_header_version(ApiKey::ApiVersions, 3), 0);
        assert_eq!(response_header_version(ApiKey::Metadata, 12), 1);
    }
}
