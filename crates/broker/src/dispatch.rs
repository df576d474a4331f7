//! From a request frame to a response frame.
//!
//! Order of checks, each before any allocation sized by the client:
//! fixed header -> served API and version (the table ApiVersions advertises)
//! -> full header -> pre-decode guard -> `kafka-protocol` decode -> handler.
//! A request that fails before its handler closes the connection (as Kafka
//! does), except an unsupported ApiVersions version, answered per KIP-511.
//! The routing is one `match` generated from the list of handlers in
//! [`crate::api`]: each arm calls its handler directly (no boxing, no
//! dynamic dispatch).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::{BufMut, Bytes, BytesMut};
use kafgres_wire::error_code;
use kafgres_wire::guard::check_request_body;
use kafgres_wire::header::{peek_fixed_header, put_response_header, response_header_version, split_request};
use kafgres_wire::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::acl::Identity;
use crate::api::error_counts::ErrorCounts;
use crate::api::throttle_time::ThrottleTime;
use crate::api::{self, Answer, Handler, RequestContext, Served};
use crate::context::{BrokerContext, Pick};

/// What the connection does after a request.
pub enum Outcome {
    /// Send these bytes (length prefix included).
    Respond(Bytes),
    /// Send these parts in order (length prefix in the first): bytes, and
    /// file ranges sent with sendfile. A fetch answered because an append
    /// woke it carries that append's publish instant, so the connection can
    /// time the broker's share of end-to-end latency up to the last byte sent.
    RespondParts { parts: Vec<crate::splice::ResponsePart>, woken_at: Option<std::time::Instant> },
    /// Send nothing (Produce with acks=0).
    NoResponse,
    /// Close the connection, logging the reason.
    Close(String),
    /// Send what this resolves to, after the answers of every earlier
    /// request of the connection (a produce waiting for durability: see
    /// [`Answer::Later`]).
    Later(Pin<Box<dyn Future<Output = Outcome> + Send + 'static>>),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Respond(bytes) => f.debug_tuple("Respond").field(&bytes.len()).finish(),
            Outcome::RespondParts { parts, woken_at } => {
                f.debug_struct("RespondParts").field("parts", &parts.len()).field("woken_at", woken_at).finish()
            }
            Outcome::NoResponse => f.write_str("NoResponse"),
            Outcome::Close(reason) => f.debug_tuple("Close").field(reason).finish(),
            Outcome::Later(_) => f.write_str("Later"),
        }
    }
}

/// The quotas' throttle times a request's answer carries (KIP-219).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttles {
    /// Its byte rate's (Produce, Fetch): given to the handler.
    pub bytes_ms: i32,
    /// Its request time's (`request_percentage`): set on any answer.
    pub request_ms: i32,
}

/// Answers one request frame from `peer`, whose connection authenticated as
/// `principal` (if authentication is on).
/// What a standby's broker serves: how to find the leader (Metadata,
/// FindCoordinator, DescribeCluster), authentication, and the data APIs,
/// which answer NOT_LEADER_OR_FOLLOWER so that clients refresh their
/// metadata. The coordinators' APIs (groups, transactions, producer ids) are
/// refused with NOT_COORDINATOR (their handlers' `refused`): a client that
/// still holds this node as its coordinator from before a failover (an old
/// primary back as a standby, same address and node id) looks it up again at
/// once. Anything else closes the connection: a client only sends it to a
/// broker Metadata named, which a standby never is.
const SERVED_BY_A_FOLLOWER: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::DescribeCluster,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetForLeaderEpoch,
];

pub async fn handle_frame(
    ctx: &BrokerContext,
    peer: SocketAddr,
    principal: Option<&str>,
    identity: &Identity,
    endpoint: &crate::listener::Endpoint,
    throttle: Throttles,
    frame: Bytes,
) -> Outcome {
    let Some((api_key, api_version, correlation_id)) = peek_fixed_header(&frame) else {
        return Outcome::Close("request shorter than a header".into());
    };
    // A gated API whose setting is off is unknown here as in ApiVersions.
    let gates = ctx.config.live.gates();
    let key = match api::served(api_key, api_version, gates) {
        Served::Yes(key) => key,
        Served::UnsupportedVersion(ApiKey::ApiVersions) => {
            let answer = api::api_versions::unsupported_version_answer(gates);
            return respond(ApiKey::ApiVersions, 0, correlation_id, &answer);
        }
        Served::UnsupportedVersion(key) => {
            return Outcome::Close(format!(
                "{key:?} v{api_version} is not supported (correlation id {correlation_id})"
            ));
        }
        Served::Unknown => return Outcome::Close(format!("API key {api_key} is not served")),
    };
    let (header, body) = match split_request(frame, key.request_header_version(api_version)) {
        Ok(parts) => parts,
        Err(e) => return Outcome::Close(format!("bad {key:?} request header: {e}")),
    };
    if let Err(e) = check_request_body(api_key, api_version, &body) {
        return Outcome::Close(format!("malformed {key:?} v{api_version} request: {e}"));
    }
    let cx = RequestContext {
        api_version,
        correlation_id,
        client_id: header.client_id.as_deref().unwrap_or(""),
        peer,
        principal,
        identity,
        acls: &ctx.acls,
        endpoint,
        throttle_time_ms: throttle.bytes_ms,
        request_throttle_ms: throttle.request_ms,
    };
    route(ctx, key, &cx, body).await
}

macro_rules! routes {
    ($($handler:path),* $(,)?) => {
        async fn route(ctx: &BrokerContext, key: ApiKey, cx: &RequestContext<'_>, body: Bytes) -> Outcome {
            // Awaited here, in code written out for each handler: from a
            // generic `async fn` over `Handler`, rustc 1.95 cannot prove the
            // connection task `Send` (rust-lang/rust#100013).
            match key {
                $(<$handler as Handler>::KEY => match decode::<$handler>(body, cx) {
                    Ok(request) if ctx.config.is_follower() && !SERVED_BY_A_FOLLOWER.contains(&key) => {
                        refuse_on_a_standby::<$handler>(cx, &request)
                    }
                    Ok(request) => {
                        let answer = <$handler>::handle(Pick::pick(ctx), cx, request).await;
                        encode::<$handler>(cx, ctx.config.metrics, answer)
                    }
                    Err(closed) => closed,
                },)*
                // `served` answers only keys of the same list.
                other => Outcome::Close(format!("{other:?} is served but not routed")),
            }
        }
    };
}
api::served_apis!(routes);

/// A request a standby's broker does not serve: NOT_COORDINATOR where the
/// API has such an answer, else the connection closes.
fn refuse_on_a_standby<H: Handler>(cx: &RequestContext<'_>, request: &H::Request) -> Outcome {
    match H::refused(cx, request, error_code::NOT_COORDINATOR) {
        Some(response) => respond(H::KEY, cx.api_version, cx.correlation_id, &response),
        None => Outcome::Close(format!(
            "{:?}: this broker is a standby's follower; clients are sent to the leader by Metadata",
            H::KEY
        )),
    }
}

fn decode<H: Handler>(mut body: Bytes, cx: &RequestContext<'_>) -> Result<H::Request, Outcome> {
    H::Request::decode(&mut body, cx.api_version)
        .map_err(|e| Outcome::Close(format!("cannot decode {:?} v{}: {e}", H::KEY, cx.api_version)))
}

fn encode<H: Handler>(
    cx: &RequestContext<'_>,
    metrics: &'static crate::metrics::BrokerMetrics,
    answer: Answer<H::Response>,
) -> Outcome
where
    H::Response: ErrorCounts + ThrottleTime + Send + 'static,
{
    let to = ResponseTo { key: H::KEY, version: cx.api_version, correlation_id: cx.correlation_id };
    let request_throttle_ms = cx.request_throttle_ms;
    let count = move |response: &mut H::Response| {
        response.error_codes(&mut |code| metrics.api.count_error(to.key as i16, code));
        if request_throttle_ms > 0 {
            response.raise_throttle_time_ms(request_throttle_ms);
        }
    };
    match answer {
        Answer::Respond(mut response) => {
            count(&mut response);
            respond(to.key, to.version, to.correlation_id, &response)
        }
        Answer::Spliced { mut response, ranges, woken_at } => {
            count(&mut response);
            respond_spliced(to.key, to.version, to.correlation_id, &response, ranges, woken_at)
        }
        Answer::Silent => Outcome::NoResponse,
        Answer::Later(later) => Outcome::Later(Box::pin(async move {
            let mut response = later.await;
            count(&mut response);
            respond(to.key, to.version, to.correlation_id, &response)
        })),
    }
}

/// Whom a response answers: its API, version and correlation id.
#[derive(Debug, Clone, Copy)]
struct ResponseTo {
    key: ApiKey,
    version: i16,
    correlation_id: i32,
}

/// Encodes a response whose body refers to file ranges (Fetch): the parts
/// to send, the ranges left in place of their placeholders.
fn respond_spliced<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
    ranges: crate::splice::FileRanges,
    woken_at: Option<std::time::Instant>,
) -> Outcome {
    if ranges.is_empty() {
        return match respond(key, version, correlation_id, body) {
            Outcome::Respond(bytes) => {
                Outcome::RespondParts { parts: vec![crate::splice::ResponsePart::Bytes(bytes)], woken_at }
            }
            other => other,
        };
    }
    let mut out = crate::splice::SpliceBuf::new(RESPONSE_HEADER_BYTES_MAX + 4096, ranges);
    out.put_i32(0);
    let mut header = BytesMut::with_capacity(RESPONSE_HEADER_BYTES_MAX);
    put_response_header(&mut header, correlation_id, response_header_version(key, version));
    out.put_slice(&header);
    if let Err(e) = body.encode(&mut out, version) {
        return Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}"));
    }
    let len = (kafka_protocol::protocol::buf::ByteBufMut::offset(&out) - 4) as i32;
    if let Err(e) = out.patch_i32(0, len) {
        return Outcome::Close(format!("cannot frame {key:?} v{version} response: {e}"));
    }
    match out.finish() {
        Ok(parts) => Outcome::RespondParts { parts, woken_at },
        Err(e) => Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}")),
    }
}

/// Length prefix, correlation id and an empty tagged-field section.
const RESPONSE_HEADER_BYTES_MAX: usize = 4 + 4 + 1;

/// Encodes a response frame: length prefix, header, body.
fn respond<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Outcome {
    // Sized up front: a Fetch answer of tens of megabytes would otherwise be
    // copied again at every doubling of the buffer.
    let body_bytes = body.compute_size(version).unwrap_or(0);
    let mut out = BytesMut::with_capacity(RESPONSE_HEADER_BYTES_MAX + body_bytes);
    out.put_i32(0);
    put_response_header(&mut out, correlation_id, response_header_version(key, version));
    if let Err(e) = body.encode(&mut out, version) {
        return Outcome::Close(format!("cannot encode {key:?} v{version} response: {e}"));
    }
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Outcome::Respond(out.freeze())
}
