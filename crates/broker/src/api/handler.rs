//! What every API module declares: a [`Handler`], with its key, the versions
//! it serves, the services it uses and its handler function.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

use kafgres_wire::ApiKey;
use kafka_protocol::protocol::{Encodable, Request};

use crate::acl::{Authorizer, Identity, Operation, ResourceType, CLUSTER_NAME};
use crate::context::Pick;
use crate::splice::FileRanges;

/// One Kafka API as this broker serves it. Implemented by a unit struct in
/// the API's module and named once in the list in [`crate::api`], from which
/// come both what ApiVersions advertises and dispatch's routing.
pub trait Handler {
    const KEY: ApiKey;
    /// Keep the reason for each range, version by version, in a comment on
    /// the constant: what Kafka serves, what a version adds, why one is left out.
    const VERSIONS: Versions;
    /// Whether the API is served only while a setting turns it on
    /// (advertised and dispatched then, unknown otherwise).
    const GATE: Gate = Gate::Always;
    /// Its `KEY` must be this API's (checked where the list is built).
    type Request: Request<Response = Self::Response> + Send;
    type Response: Encodable + Send;
    /// The services the handler uses, picked from the broker for each
    /// request: a reference (`&'a Topics`), a tuple of them, or `()`.
    type Services<'a>: Pick<'a>;

    /// Answers one decoded request at `cx.api_version`; failures of parts of
    /// it are Kafka error codes in the response.
    fn handle(
        services: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: Self::Request,
    ) -> impl Future<Output = Answer<Self::Response>> + Send;

    /// The whole request refused with `code`, as Kafka's `getErrorResponse`
    /// builds it: what a standby's broker answers for a coordinator's API
    /// (NOT_COORDINATOR, so that the client looks its coordinator up again).
    /// `None`: no such answer, and a standby closes the connection.
    fn refused(_cx: &RequestContext<'_>, _request: &Self::Request, _code: i16) -> Option<Self::Response> {
        None
    }
}

/// The whole request refused with `code`, through the handler's
/// [`Handler::refused`] (an authorization failure, as Kafka's
/// `getErrorResponse`).
pub fn refusal<H: Handler>(cx: &RequestContext<'_>, request: &H::Request, code: i16) -> Answer<H::Response>
where
    H::Response: Default,
{
    Answer::Respond(H::refused(cx, request, code).unwrap_or_default())
}

/// The versions of an API: all of `accepted_min..=max` are handled;
/// ApiVersions lists `advertised_min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    pub advertised_min: i16,
    pub accepted_min: i16,
    pub max: i16,
}

impl Versions {
    /// `min..=max`, advertised as handled.
    pub const fn new(min: i16, max: i16) -> Versions {
        assert!(0 <= min && min <= max, "an empty or negative version range");
        Versions { advertised_min: min, accepted_min: min, max }
    }

    /// Advertised from `min`, below the accepted versions (which Kafka itself
    /// does for Produce); a request at one of those is refused like any
    /// unserved version.
    pub const fn advertised_from(self, min: i16) -> Versions {
        assert!(0 <= min && min <= self.accepted_min, "advertised above the accepted versions");
        Versions { advertised_min: min, ..self }
    }

    pub const fn accepts(self, version: i16) -> bool {
        self.accepted_min <= version && version <= self.max
    }
}

/// Who is asking, and in which version: everything a handler learns about
/// its request besides the body. Authorization checks read the principal and
/// the peer from here.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext<'a> {
    pub api_version: i16,
    pub correlation_id: i32,
    /// The request header's client id, `""` when null (as Kafka reads it).
    pub client_id: &'a str,
    pub peer: SocketAddr,
    /// The role the connection authenticated as (SASL), `None` when
    /// authentication is off.
    pub principal: Option<&'a str>,
    /// Who the connection is for the authorizer (`User:ANONYMOUS` when
    /// authentication is off).
    pub identity: &'a Identity,
    pub acls: &'a Authorizer,
    /// The listener the request came in on: where its client is sent back.
    pub endpoint: &'a crate::listener::Endpoint,
    /// The time the client is throttled for by its quota (Produce: this
    /// request's bytes counted; Fetch: already over its quota, so it gets an
    /// empty answer), for the response's `throttle_time_ms`.
    pub throttle_time_ms: i32,
    /// The time its `request_percentage` quota throttles the client for
    /// (already over it), which dispatch puts in any answer's
    /// `throttle_time_ms` (the larger of the two).
    pub request_throttle_ms: i32,
}

impl RequestContext<'_> {
    /// The node clients are sent to (Metadata, FindCoordinator,
    /// DescribeCluster): this broker at the endpoint of the listener the
    /// request came in on, or on a standby its leader, at the leader's
    /// listener of the same protocol (so a TLS client stays on TLS).
    pub fn serving_node<'c>(&'c self, config: &'c crate::config::BrokerConfig) -> (i32, &'c str, u16) {
        match &config.leader {
            Some(l) if config.is_follower() => {
                let (host, port) = l.endpoint_for(self.endpoint.security);
                (l.node_id, host, port)
            }
            _ => (config.node_id, &self.endpoint.host, self.endpoint.port),
        }
    }

    /// The client's host as Kafka reports it (DescribeGroups, ConsumerGroupDescribe).
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }

    /// Whether the client may do `operation` on the resource (always, while
    /// the authorizer is off).
    pub fn may(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.acls.authorize(self.identity, self.peer.ip(), operation, resource_type, name)
    }

    pub fn may_on_topic(&self, operation: Operation, topic: &str) -> bool {
        self.may(operation, ResourceType::Topic, topic)
    }

    pub fn may_on_group(&self, operation: Operation, group: &str) -> bool {
        self.may(operation, ResourceType::Group, group)
    }

    pub fn may_on_cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub fn may_on_transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.may(operation, ResourceType::TransactionalId, id)
    }

    /// Kafka's `authorizeByResourceType`: `operation` on some resource of the type.
    pub fn may_on_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        self.acls.authorize_any(self.identity, self.peer.ip(), operation, resource_type)
    }

    /// KIP-430's authorized operations of a resource, when the request asked
    /// for them (else Kafka's "omitted").
    pub fn authorized_operations(&self, asked: bool, resource_type: ResourceType, name: &str) -> i32 {
        if !asked {
            return crate::api::authorized_operations::OMITTED;
        }
        self.acls.authorized_operations(self.identity, self.peer.ip(), resource_type, name)
    }
}

/// What a handler answers.
pub enum Answer<R> {
    /// Encode the response and send it.
    Respond(R),
    /// Encode the response, whose record fields hold placeholders for
    /// `ranges` (see [`crate::splice`]), and send the ranges with sendfile.
    /// `woken_at`: when the append that ended a long poll published its data,
    /// so the connection can time the broker's share of the latency.
    Spliced { response: R, ranges: FileRanges, woken_at: Option<Instant> },
    /// Send nothing: the client reads no response (Produce with acks=0).
    Silent,
    /// The request's work is done (a produce's records are appended) and
    /// only a wait is left (their durability): the connection may read and
    /// start the next produce while this one waits, and sends the answers in
    /// request order (see [`crate::connection`]).
    Later(Later<R>),
}

/// The rest of an answer: a wait that borrows nothing from the request.
pub type Later<R> = std::pin::Pin<Box<dyn Future<Output = R> + Send + 'static>>;

impl<R> From<R> for Answer<R> {
    fn from(response: R) -> Answer<R> {
        Answer::Respond(response)
    }
}

/// One line of the served table: an API and its versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedApi {
    pub key: ApiKey,
    pub versions: Versions,
    pub gate: Gate,
}

/// What turns an API on. Most are always served; a few only while the
/// operator configured what they need, as Kafka serves them only with the
/// matching plugin (its `ApiVersionManager` filters them the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Always,
    /// KIP-714's telemetry APIs: while `kafgres.client_telemetry_metrics`
    /// asks for some metrics (Kafka: a telemetry-capable metrics reporter).
    ClientTelemetry,
}

/// Which gated APIs are on now (read from the live settings for each
/// request and each ApiVersions answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gates {
    pub client_telemetry: bool,
}

impl Gates {
    pub fn open(self, gate: Gate) -> bool {
        match gate {
            Gate::Always => true,
            Gate::ClientTelemetry => self.client_telemetry,
        }
    }
}

impl ServedApi {
    /// The line of a handler; a compile error if its request type is another API's.
    pub const fn of<H: Handler>() -> ServedApi {
        assert!(<H::Request as Request>::KEY == H::KEY as i16, "a handler's request type is another API's");
        ServedApi { key: H::KEY, versions: H::VERSIONS, gate: H::GATE }
    }
}

/// What dispatch should do with a request's API key and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Yes(ApiKey),
    /// Known and served, but not at this version.
    UnsupportedVersion(ApiKey),
    /// An API key this broker does not serve at all.
    Unknown,
}
