//! [`Client`]: a connection plus the operations SQL functions need, one
//! module per area. Every operation has a deadline: the request timeout, plus
//! the fetch's maximum wait for a fetch.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafgres_wire::error_code;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use crate::api::Pinned;
use crate::connection::Connection;
use crate::error::ClientError;
use crate::wait::Wait;

mod fetch;
mod groups;
mod offsets;
mod producers;
mod shares;
mod topics;

pub use fetch::FetchResult;
pub use groups::{GroupInfo, ListedGroup};
pub use offsets::{LogBounds, OffsetSpec, PartitionOffset};
pub use producers::{PartitionAnswer, PartitionBatch, ProducerState};
pub use shares::{AcknowledgeType, AcquiredRecord, ShareAcknowledgement, ShareMember};
pub use topics::{PartitionInfo, TopicInfo};

/// Limits and timeouts of one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// How long connecting, or any request, may take (a fetch adds its maximum wait).
    pub request_timeout: Duration,
    /// Log in with `KAFGRES-INTERNAL` right after connecting (Kafgres's own
    /// clients: the SQL functions and the SQL bridge).
    pub internal_login: Option<InternalLogin>,
    /// The longest response frame accepted; a longer one is an error, not an allocation.
    pub frame_bytes_max: usize,
    /// What the compressed batches of one fetch may inflate to, together.
    pub decompressed_bytes_max: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            request_timeout: Duration::from_secs(30),
            internal_login: None,
            frame_bytes_max: 64 << 20,
            decompressed_bytes_max: 64 << 20,
        }
    }
}

/// A `KAFGRES-INTERNAL` login (`kafgres_broker::sasl::internal`): the
/// cluster's internal secret, and the role to act as (empty: the internal
/// superuser).
#[derive(Clone, PartialEq, Eq)]
pub struct InternalLogin {
    pub secret: String,
    pub role: String,
}

impl std::fmt::Debug for InternalLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InternalLogin").field("secret", &"…").field("role", &self.role).finish()
    }
}

const INTERNAL_MECHANISM: &str = "KAFGRES-INTERNAL";

/// The longest timeout or wait accepted, so that deadlines never overflow.
const DURATION_MAX: Duration = Duration::from_secs(24 * 3600);

/// A blocking client on one connection to a Kafgres broker.
pub struct Client<W: Wait> {
    conn: Connection<W>,
    config: ClientConfig,
}

impl<W: Wait> Client<W> {
    /// Connects with the default [`ClientConfig`].
    pub fn connect(addr: SocketAddr, client_id: &str, waiter: W) -> Result<Self, ClientError> {
        Self::connect_with(addr, client_id, waiter, ClientConfig::default())
    }

    pub fn connect_with(
        addr: SocketAddr,
        client_id: &str,
        waiter: W,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        if config.request_timeout.is_zero() || config.request_timeout > DURATION_MAX {
            return Err(ClientError::InvalidArgument(format!("request timeout {:?}", config.request_timeout)));
        }
        let deadline = Instant::now() + config.request_timeout;
        let conn = Connection::open(addr, client_id, waiter, config.frame_bytes_max, deadline)?;
        let mut client = Client { conn, config };
        if let Some(login) = client.config.internal_login.clone() {
            client.log_in(&login, deadline)?;
        }
        Ok(client)
    }

    fn log_in(&mut self, login: &InternalLogin, deadline: Instant) -> Result<(), ClientError> {
        const API: &str = "SaslAuthenticate";
        let code = self.conn.sasl_handshake_v1(INTERNAL_MECHANISM, deadline)?;
        if code != error_code::NONE {
            return Err(ClientError::kafka("SaslHandshake", code, format!("the broker refused {INTERNAL_MECHANISM}")));
        }
        let mut token = Vec::with_capacity(login.secret.len() + 1 + login.role.len());
        token.extend_from_slice(login.secret.as_bytes());
        token.push(0);
        token.extend_from_slice(login.role.as_bytes());
        let request = kafka_protocol::messages::SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let answer = self.conn.call(&request, deadline)?;
        match answer.error_code {
            error_code::NONE => Ok(()),
            code => Err(ClientError::kafka(API, code, answer.error_message.map(|m| m.to_string()).unwrap_or_default())),
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Whether an earlier error abandoned a request mid-way; such a client
    /// answers every call with [`ClientError::Broken`].
    pub fn is_broken(&self) -> bool {
        self.conn.is_broken()
    }

    pub fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    /// Bounds the requests made from now on (e.g. a last one while the
    /// process exits). A zero or out-of-range timeout is refused.
    pub fn set_request_timeout(&mut self, timeout: Duration) -> Result<(), ClientError> {
        if timeout.is_zero() || timeout > DURATION_MAX {
            return Err(ClientError::InvalidArgument(format!("request timeout {timeout:?}")));
        }
        self.config.request_timeout = timeout;
        Ok(())
    }

    pub fn waiter_mut(&mut self) -> &mut W {
        self.conn.waiter_mut()
    }

    /// The deadline of an operation starting now that may also wait `extra`.
    fn deadline(&self, extra: Duration) -> Instant {
        Instant::now() + self.config.request_timeout + extra.min(DURATION_MAX)
    }

    /// The request timeout in milliseconds, for requests that carry one.
    fn timeout_ms(&self) -> i32 {
        i32::try_from(self.config.request_timeout.as_millis()).unwrap_or(i32::MAX)
    }

    fn call<R: Pinned>(&mut self, request: &R) -> Result<R::Response, ClientError> {
        let deadline = self.deadline(Duration::ZERO);
        self.conn.call(request, deadline)
    }
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

pub(crate) fn string(s: Option<&StrBytes>) -> String {
    s.map(|s| s.to_string()).unwrap_or_default()
}

/// A topic's error as a [`ClientError`], or `Ok` for code 0.
pub(crate) fn check_code(
    api: &'static str,
    code: i16,
    message: Option<&StrBytes>,
    what: &str,
) -> Result<(), ClientError> {
    if code == error_code::NONE {
        return Ok(());
    }
    let message = match message {
        Some(m) if !m.is_empty() => format!("{what}: {m}"),
        _ => what.to_owned(),
    };
    Err(ClientError::kafka(api, code, message))
}

/// A response that does not answer what was asked.
pub(crate) fn unexpected(api: &'static str, what: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol(format!("{api}: the response {what}"))
}
