//! A follower's connection to its leader: Kafka requests over one TCP
//! connection, one at a time, every read bounded by a deadline and every
//! response frame by a size limit (the leader is trusted to speak Kafka, not
//! to be free of bugs).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The client id a follower's requests carry (and the leader's logs show).
pub const FOLLOWER_CLIENT_ID: &str = "kafgres-follower";

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("cannot reach the leader at {address}: {source}")]
    Connect { address: String, source: std::io::Error },
    #[error("the connection to the leader failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the leader did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the leader's answer is malformed: {0}")]
    Protocol(String),
    #[error("the leader refused the follower's login: {0}")]
    Refused(String),
}

pub struct LeaderLink {
    stream: TcpStream,
    next_correlation_id: i32,
    frame_bytes_max: usize,
}

impl LeaderLink {
    pub async fn connect(address: &str, timeout: Duration, frame_bytes_max: usize) -> Result<LeaderLink, LinkError> {
        let connect = tokio::time::timeout(timeout, TcpStream::connect(address)).await;
        let stream = match connect {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => return Err(LinkError::Connect { address: address.to_owned(), source }),
            Err(_) => return Err(LinkError::Timeout(timeout)),
        };
        stream.set_nodelay(true)?;
        Ok(LeaderLink { stream, next_correlation_id: 0, frame_bytes_max })
    }

    /// Logs in as the internal superuser (`crate::sasl::internal`). A leader
    /// that answers the handshake ILLEGAL_SASL_STATE (a build from before the
    /// mechanism, without authentication) is followed unauthenticated.
    pub async fn log_in(&mut self, secret: &str, timeout: Duration) -> Result<(), LinkError> {
        use crate::sasl::internal;
        use kafgres_wire::error_code;
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        use kafka_protocol::protocol::StrBytes;

        let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(internal::MECHANISM));
        let answer = self.call(1, &handshake, timeout).await?;
        match answer.error_code {
            error_code::NONE => {}
            error_code::ILLEGAL_SASL_STATE => {
                log::info!("the leader does not take {} logins: following it unauthenticated", internal::MECHANISM);
                return Ok(());
            }
            code => return Err(LinkError::Refused(format!("SaslHandshake error {code}"))),
        }
        let request = SaslAuthenticateRequest::default().with_auth_bytes(internal::token(secret, "").into());
        let answer = self.call(2, &request, timeout).await?;
        match answer.error_code {
            error_code::NONE => Ok(()),
            code => Err(LinkError::Refused(format!(
                "SaslAuthenticate error {code}: {} (is this standby's kafgres.cluster.internal_secret the leader's?)",
                answer.error_message.as_deref().unwrap_or("")
            ))),
        }
    }

    /// Sends `request` at `version` and waits (at most `timeout`) for its answer.
    pub async fn call<R>(&mut self, version: i16, request: &R, timeout: Duration) -> Result<R::Response, LinkError>
    where
        R: Request + Encodable,
        R::Response: Decodable,
    {
        let key = ApiKey::try_from(R::KEY).map_err(|_| LinkError::Protocol(format!("unknown api key {}", R::KEY)))?;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let correlation_id = self.next_correlation_id;
        let mut body = BytesMut::new();
        request.encode(&mut body, version).map_err(|e| LinkError::Protocol(format!("encoding {key:?}: {e}")))?;
        let header_version = key.request_header_version(version);
        let header_bytes = 10 + FOLLOWER_CLIENT_ID.len() + usize::from(header_version >= 2);
        let mut frame = BytesMut::with_capacity(4 + header_bytes + body.len());
        frame.put_i32((header_bytes + body.len()) as i32);
        frame.put_i16(R::KEY);
        frame.put_i16(version);
        frame.put_i32(correlation_id);
        frame.put_i16(FOLLOWER_CLIENT_ID.len() as i16);
        frame.put_slice(FOLLOWER_CLIENT_ID.as_bytes());
        if header_version >= 2 {
            frame.put_u8(0);
        }
        frame.put_slice(&body);
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let len = self.stream.read_i32().await?;
            let len = usize::try_from(len).map_err(|_| LinkError::Protocol(format!("frame length {len}")))?;
            if len > self.frame_bytes_max || len < 4 {
                return Err(LinkError::Protocol(format!("a {len}-byte response frame")));
            }
            let mut response = BytesMut::zeroed(len);
            self.stream.read_exact(&mut response).await?;
            Ok::<_, LinkError>(response.freeze())
        };
        let mut response: Bytes = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result?,
            Err(_) => return Err(LinkError::Timeout(timeout)),
        };
        let answered = response.get_i32();
        if answered != correlation_id {
            return Err(LinkError::Protocol(format!("correlation id {answered}, expected {correlation_id}")));
        }
        if key.response_header_version(version) >= 1 {
            // Tagged fields of the header: none is defined; skip the section.
            let count = read_unsigned_varint(&mut response)?;
            for _ in 0..count {
                let _tag = read_unsigned_varint(&mut response)?;
                let size = read_unsigned_varint(&mut response)? as usize;
                if response.remaining() < size {
                    return Err(LinkError::Protocol("truncated response header".into()));
                }
                response.advance(size);
            }
        }
        R::Response::decode(&mut response, version).map_err(|e| LinkError::Protocol(format!("decoding {key:?}: {e}")))
    }
}

fn read_unsigned_varint(buf: &mut Bytes) -> Result<u32, LinkError> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        if !buf.has_remaining() {
            return Err(LinkError::Protocol("truncated varint".into()));
        }
        let byte = buf.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(LinkError::Protocol("overlong varint".into()))
}
