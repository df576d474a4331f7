//! SASL authentication of Kafka connections against PostgreSQL roles.
//!
//! Each connection holds a [`SaslSession`], consulted for every request frame
//! before dispatch ([`SaslSession::gate`]). With `kafgres.authentication =
//! none` it lets everything through, and dispatch answers SaslHandshake and
//! SaslAuthenticate with ILLEGAL_SASL_STATE (`crate::api::sasl`), as a Kafka
//! PLAINTEXT listener does. With `scram-sha-256`, as Kafka's
//! `SaslServerAuthenticator`:
//!
//! ```text
//! AwaitingHandshake ──SaslHandshake v1 "SCRAM-SHA-256"──▶ AwaitingClientFirst{framed}
//!   │ ApiVersions: dispatched          (v0: the next frames are bare SCRAM tokens)
//!   │ anything else: connection closed
//! AwaitingClientFirst ──SaslAuthenticate(client-first)──▶ AwaitingClientFinal
//!                       (the role's verifier read through the catalog)
//! AwaitingClientFinal ──SaslAuthenticate(client-final)──▶ Open{principal}
//! ```
//! Once open, every frame is dispatched (SASL requests too, answered
//! ILLEGAL_SASL_STATE there), unless `kafgres.connections_max_reauth_ms`
//! gives sessions an end (KIP-368): then SaslAuthenticate tells the client
//! its session's lifetime, a SaslHandshake v1 on an open connection starts a
//! re-authentication (same mechanism, same role, or the connection closes),
//! and a request after the end closes the connection. On a TLS listener (SASL_SSL) the handshake
//! also offers PLAIN ([`plain`]): one SaslAuthenticate whose password is
//! checked against the same SCRAM verifier, and OAUTHBEARER when a key set
//! is configured ([`oauthbearer`]: a JWT whose subject is, or maps to, the
//! role; `crate::oauth` validates it, `crate::ident` maps it). A SCRAM
//! client-first message with `tokenauth=true` logs in with a delegation
//! token (`crate::delegation`): the token id as user name, its HMAC as
//! password, the connection then its owner's role, token-authenticated. An SSL
//! listener opens a connection as the role of its client certificate
//! ([`SaslSession::open_as`]).
//! Any failure answers SASL_AUTHENTICATION_FAILED (or UNSUPPORTED_SASL_MECHANISM
//! at the handshake) and closes the connection. Frames before authentication
//! are capped at [`UNAUTHENTICATED_FRAME_BYTES_MAX`] (Kafka's
//! `sasl.server.max.receive.size`), so an anonymous peer cannot make the
//! broker allocate `kafgres.max_frame_bytes`.
//!
//! Credentials are read from `pg_authid` at every authentication (no cache):
//! a changed password, NOLOGIN or VALID UNTIL applies from the next connection,
//! or the next re-authentication; without one, established connections stay
//! (as in Kafka).

pub mod internal;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use kafgres_wire::error_code;
use kafgres_wire::guard::check_request_body;
use kafgres_wire::header::{peek_fixed_header, put_response_header, response_header_version, split_request};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::acl::Identity;
use crate::api::handler::Handler;
use crate::api::sasl::{SaslAuthenticate, SaslHandshake};
use crate::catalog::Catalog;
pub use crate::config::Authentication;
use crate::ident::IdentityRules;
use scram::{ClientFirst, ScramCredential, ServerExchange};

/// Largest request accepted before a connection is authenticated: Kafka's
/// `sasl.server.max.receive.size` default.
pub const UNAUTHENTICATED_FRAME_BYTES_MAX: usize = 512 * 1024;

/// What every failed exchange tells the client (Kafka's words): whether the
/// user exists, may log in, or typed the wrong password is for the server log.
pub const AUTHENTICATION_FAILED_MESSAGE: &str =
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256";

/// What the connection does with a frame after the gate.
#[derive(Debug)]
pub enum Gate {
    /// Dispatch it as usual.
    Dispatch(Bytes),
    /// Send these bytes (length prefix included); the gate answered.
    Respond(Bytes),
    /// A failed login: send these bytes (none for SaslHandshake v0's bare
    /// tokens), then close the connection, logging the reason.
    RespondAndClose(Bytes, String),
    /// Close the connection without an answer, logging the reason.
    Close(String),
}

/// One connection's authentication state.
#[derive(Debug)]
pub struct SaslSession {
    authentication: Authentication,
    /// `kafgres.cluster.internal_secret`: `KAFGRES-INTERNAL` is accepted iff set.
    internal_secret: Option<String>,
    state: State,
    /// The user a client-first message named, kept for the failed-login
    /// limits (`crate::limits::FailedLogins`) once the exchange fails.
    attempted_user: Option<String>,
    /// Whether the connection is TLS: SASL/PLAIN is offered only then.
    tls: bool,
    /// The mechanism the handshake chose, for the log lines.
    mechanism: &'static str,
    /// How a bearer token's subject becomes a role (and whether
    /// OAUTHBEARER is on), as when the connection was accepted.
    identities: std::sync::Arc<IdentityRules>,
    /// What a failed exchange tells the client, when not the mechanism's
    /// usual words (Kafka's OAUTHBEARER answers say more).
    client_error: Option<String>,
    /// Kafka's `connections.max.reauth.ms` when the connection was accepted;
    /// 0: a session never ends, and re-authentication is not offered.
    reauth_ms: u64,
    /// When the authenticated session ends (ms since the epoch): a request
    /// after it closes the connection, unless it starts a re-authentication.
    session_ends_ms: Option<i64>,
    /// A bearer token's expiry, from the exchange in progress.
    token_expires_ms: Option<i64>,
    /// During a re-authentication (KIP-368): who the connection was, and
    /// with which mechanism; both must stay the same.
    reauthenticating: Option<(Identity, &'static str)>,
    /// The delegation tokens a SCRAM login with `tokenauth=true` is checked
    /// against (none: such a login fails).
    tokens: Option<std::sync::Arc<crate::delegation::DelegationTokens>>,
}

#[derive(Debug)]
enum State {
    /// Authentication is off, or done: requests are dispatched.
    Open {
        /// The authenticated role; `None` when authentication is off.
        identity: Option<Identity>,
    },
    /// Only ApiVersions and SaslHandshake are accepted.
    AwaitingHandshake,
    /// `framed`: tokens come in SaslAuthenticate requests (SaslHandshake v1),
    /// else as bare length-prefixed tokens (v0).
    AwaitingClientFirst { framed: bool },
    AwaitingClientFinal {
        framed: bool,
        exchange: Box<ServerExchange>,
        /// A delegation token's login: its owner (the role the connection
        /// becomes) and its expiry.
        token: Option<(String, i64)>,
    },
    /// After a `KAFGRES-INTERNAL` handshake: its one SaslAuthenticate.
    AwaitingInternalToken,
    /// After a PLAIN handshake: the token (framed as for SCRAM).
    AwaitingPlainToken { framed: bool },
    /// After an OAUTHBEARER handshake: the client's message with its token.
    AwaitingOAuthToken { framed: bool },
    /// A token was refused with the `invalid_token` challenge: the client's
    /// `\x01` comes next, and is answered with the failure.
    AwaitingOAuthErrorAck { framed: bool },
    /// An exchange failed; the connection is closing.
    Failed,
}

impl SaslSession {
    /// `tls`: the connection came in on a TLS listener (PLAIN, and
    /// OAUTHBEARER when `identities` has a token validator, are offered).
    /// `reauth_ms`: Kafka's `connections.max.reauth.ms` (0: off).
    pub fn new(
        authentication: &Authentication,
        internal_secret: Option<String>,
        tls: bool,
        identities: std::sync::Arc<IdentityRules>,
        reauth_ms: u64,
    ) -> SaslSession {
        let state = match authentication {
            Authentication::None => State::Open { identity: None },
            Authentication::ScramSha256 { .. } => State::AwaitingHandshake,
        };
        SaslSession {
            authentication: authentication.clone(),
            internal_secret,
            state,
            attempted_user: None,
            tls,
            mechanism: scram::MECHANISM,
            identities,
            client_error: None,
            reauth_ms,
            session_ends_ms: None,
            token_expires_ms: None,
            reauthenticating: None,
            tokens: None,
        }
    }

    /// Accepts SCRAM logins with delegation tokens (KIP-48) from `tokens`.
    pub fn with_delegation_tokens(mut self, tokens: std::sync::Arc<crate::delegation::DelegationTokens>) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Opens a connection without SASL as `identity` (the role a TLS
    /// client certificate named, on an SSL listener).
    pub fn open_as(&mut self, identity: Identity) {
        if matches!(self.state, State::Open { identity: None }) {
            self.state = State::Open { identity: Some(identity) };
        }
    }

    /// The mechanisms this connection may use, as the handshake lists them.
    fn mechanisms(&self) -> Vec<StrBytes> {
        let mut names = vec![StrBytes::from_static_str(scram::MECHANISM)];
        if self.tls {
            names.push(StrBytes::from_static_str(plain::MECHANISM));
            if self.identities.oauth.is_some() {
                names.push(StrBytes::from_static_str(oauthbearer::MECHANISM));
            }
        }
        names
    }

    /// The user the client tried to authenticate as, if it got that far.
    pub fn attempted_user(&self) -> Option<&str> {
        self.attempted_user.as_deref()
    }

    /// The authenticated role, once authenticated.
    pub fn principal(&self) -> Option<&str> {
        match &self.state {
            State::Open { identity } => identity.as_ref().map(|i| i.role.as_str()),
            _ => None,
        }
    }

    /// Who the connection is for the authorizer: its role once
    /// authenticated, `User:ANONYMOUS` while authentication is off.
    pub fn identity(&self) -> &Identity {
        static ANONYMOUS: std::sync::LazyLock<Identity> = std::sync::LazyLock::new(Identity::anonymous);
        match &self.state {
            State::Open { identity: Some(identity) } => identity,
            _ => &ANONYMOUS,
        }
    }

    /// Whether the connection has yet to authenticate.
    pub fn authenticating(&self) -> bool {
        !matches!(self.state, State::Open { .. })
    }

    /// The frame limit in force: `configured` once open, at most
    /// [`UNAUTHENTICATED_FRAME_BYTES_MAX`] before.
    pub fn frame_bytes_max(&self, configured: usize) -> usize {
        match self.state {
            State::Open { .. } => configured,
            _ => configured.min(UNAUTHENTICATED_FRAME_BYTES_MAX),
        }
    }

    /// Decides what happens to a request frame (without its length prefix).
    pub async fn gate(&mut self, catalog: &dyn Catalog, peer: SocketAddr, frame: Bytes) -> Gate {
        match self.state {
            // Without authentication, Kafgres's own clients may still log in
            // as the internal principal (or as a role, for the authorizer);
            // every other SASL request goes on to ILLEGAL_SASL_STATE.
            State::Open { identity: None } if self.is_internal_handshake(&frame) => return self.handshake(frame),
            State::Open { identity: Some(ref identity) } if self.reauth_ms > 0 && is_handshake_v1(&frame) => {
                self.reauthenticating = Some((identity.clone(), self.mechanism));
                return self.handshake(frame);
            }
            State::Open { identity: Some(ref identity) } => {
                if let Some(ends) = self.session_ends_ms.filter(|ends| crate::now_ms() >= *ends) {
                    return Gate::Close(format!(
                        "the session of role {:?} ended {} ms ago without a re-authentication \
                         (kafgres.connections_max_reauth_ms)",
                        identity.role,
                        crate::now_ms() - ends
                    ));
                }
                return Gate::Dispatch(frame);
            }
            State::Open { .. } => return Gate::Dispatch(frame),
            State::AwaitingClientFirst { framed: false }
            | State::AwaitingClientFinal { framed: false, .. }
            | State::AwaitingPlainToken { framed: false }
            | State::AwaitingOAuthToken { framed: false }
            | State::AwaitingOAuthErrorAck { framed: false } => {
                return match self.step(catalog, peer, &frame).await.and_then(|token| self.logged_in().map(|_| token)) {
                    Ok(token) => {
                        let mut out = BytesMut::with_capacity(4 + token.len());
                        out.put_u32(token.len() as u32);
                        out.put_slice(&token);
                        Gate::Respond(out.freeze())
                    }
                    // No answer in v0, but held like any failed login.
                    Err(reason) => Gate::RespondAndClose(Bytes::new(), reason),
                };
            }
            State::Failed => return Gate::Close("SASL authentication failed".into()),
            _ => {}
        }
        let Some((api_key, api_version, _)) = peek_fixed_header(&frame) else {
            return Gate::Close("request shorter than a header".into());
        };
        let key = ApiKey::try_from(api_key).ok();
        match (&self.state, key) {
            (State::AwaitingHandshake, Some(ApiKey::ApiVersions)) => Gate::Dispatch(frame),
            (State::AwaitingHandshake, Some(ApiKey::SaslHandshake)) => self.handshake(frame),
            (
                State::AwaitingClientFirst { .. }
                | State::AwaitingClientFinal { .. }
                | State::AwaitingInternalToken
                | State::AwaitingPlainToken { .. }
                | State::AwaitingOAuthToken { .. }
                | State::AwaitingOAuthErrorAck { .. },
                Some(ApiKey::SaslAuthenticate),
            ) => self.authenticate(catalog, peer, frame).await,
            (state, _) => {
                let name = key.map_or_else(|| format!("API key {api_key}"), |k| format!("{k:?}"));
                let stage = match state {
                    State::AwaitingHandshake => "SASL handshake",
                    _ => "SASL authentication",
                };
                Gate::Close(format!("unexpected Kafka request of type {name} v{api_version} during {stage}"))
            }
        }
    }

    fn handshake(&mut self, frame: Bytes) -> Gate {
        let (version, correlation_id, request) = match decode::<SaslHandshake>(frame) {
            Ok(decoded) => decoded,
            Err(reason) => return Gate::Close(reason),
        };
        let response = SaslHandshakeResponse::default().with_mechanisms(self.mechanisms());
        let sasl_enabled = matches!(self.authentication, Authentication::ScramSha256 { .. });
        if let Some((_, mechanism)) = self.reauthenticating.as_ref().filter(|(_, m)| *m != request.mechanism.as_str()) {
            // Kafka's words: a session keeps its mechanism.
            let reason = format!(
                "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                truncated(request.mechanism.as_str()),
                mechanism
            );
            self.state = State::Failed;
            let response = response.with_error_code(error_code::UNSUPPORTED_SASL_MECHANISM);
            return match respond(ApiKey::SaslHandshake, version, correlation_id, &response) {
                Gate::Respond(bytes) => Gate::RespondAndClose(bytes, reason),
                other => other,
            };
        }
        if request.mechanism.as_str() == internal::MECHANISM && self.internal_secret.is_some() && version >= 1 {
            self.state = State::AwaitingInternalToken;
            self.mechanism = internal::MECHANISM;
            let response =
                SaslHandshakeResponse::default().with_mechanisms(vec![StrBytes::from_static_str(internal::MECHANISM)]);
            respond(ApiKey::SaslHandshake, version, correlation_id, &response)
        } else if request.mechanism.as_str() == scram::MECHANISM && sasl_enabled {
            self.state = State::AwaitingClientFirst { framed: version >= 1 };
            self.mechanism = scram::MECHANISM;
            respond(ApiKey::SaslHandshake, version, correlation_id, &response)
        } else if request.mechanism.as_str() == plain::MECHANISM && sasl_enabled && self.tls {
            self.state = State::AwaitingPlainToken { framed: version >= 1 };
            self.mechanism = plain::MECHANISM;
            respond(ApiKey::SaslHandshake, version, correlation_id, &response)
        } else if request.mechanism.as_str() == oauthbearer::MECHANISM
            && sasl_enabled
            && self.tls
            && self.identities.oauth.is_some()
        {
            self.state = State::AwaitingOAuthToken { framed: version >= 1 };
            self.mechanism = oauthbearer::MECHANISM;
            respond(ApiKey::SaslHandshake, version, correlation_id, &response)
        } else {
            self.state = State::Failed;
            let response = response.with_error_code(error_code::UNSUPPORTED_SASL_MECHANISM);
            match respond(ApiKey::SaslHandshake, version, correlation_id, &response) {
                Gate::Respond(bytes) => {
                    Gate::RespondAndClose(bytes, self.refused_mechanism(request.mechanism.as_str()))
                }
                other => other,
            }
        }
    }

    /// Why a mechanism was refused, for the log: the ones Postgres cannot
    /// back say so, since no setting enables them.
    fn refused_mechanism(&self, mechanism: &str) -> String {
        let enabled: Vec<String> = self.mechanisms().iter().map(|m| m.to_string()).collect();
        let why = match mechanism {
            "SCRAM-SHA-512" => {
                "; PostgreSQL stores only SCRAM-SHA-256 verifiers (pg_authid.rolpassword), so no role has a \
                 SCRAM-SHA-512 credential: use SCRAM-SHA-256"
            }
            plain::MECHANISM if !self.tls => {
                "; PLAIN sends the password as is, so it is served only on SASL_SSL listeners"
            }
            oauthbearer::MECHANISM if !self.tls => {
                "; a bearer token is a credential anyone who reads it can replay, so OAUTHBEARER is served only on \
                 SASL_SSL listeners"
            }
            oauthbearer::MECHANISM => "; kafgres.oauthbearer_jwks_file is not set, so no token can be validated",
            _ => "",
        };
        format!("unsupported SASL mechanism {:?} (enabled: {}){why}", truncated(mechanism), enabled.join(", "))
    }

    /// After an exchange that authenticated: a re-authentication must name
    /// the role the session had (Kafka: a session keeps its principal), and
    /// with `connections.max.reauth.ms` set the session gets its end, at
    /// most the bearer token's expiry. Returns the session's lifetime for
    /// SaslAuthenticate (0: no end).
    fn logged_in(&mut self) -> Result<i64, String> {
        let token_expires_ms = self.token_expires_ms.take();
        let State::Open { identity: Some(identity) } = &self.state else { return Ok(0) };
        if let Some((before, _)) = self.reauthenticating.take() {
            if before.role != identity.role {
                let message = format!(
                    "Cannot change principals during re-authentication from User:{}: User:{}",
                    before.role, identity.role
                );
                self.client_error = Some(message.clone());
                self.state = State::Failed;
                return Err(message);
            }
        }
        // Kafgres's own clients (the SQL bridge, a standby) log in with a
        // secret, not a credential that can expire, and do not re-authenticate.
        if self.reauth_ms == 0 || self.mechanism == internal::MECHANISM {
            self.session_ends_ms = None;
            return Ok(0);
        }
        let now = crate::now_ms();
        let reauth_ms = i64::try_from(self.reauth_ms).unwrap_or(i64::MAX);
        let lifetime = token_expires_ms.map_or(reauth_ms, |expires| reauth_ms.min(expires.saturating_sub(now)).max(1));
        self.session_ends_ms = Some(now.saturating_add(lifetime));
        Ok(lifetime)
    }

    /// A SaslHandshake v1 asking for `KAFGRES-INTERNAL`.
    fn is_internal_handshake(&self, frame: &Bytes) -> bool {
        if self.internal_secret.is_none() {
            return false;
        }
        match peek_fixed_header(frame) {
            Some((key, version, _)) if key == ApiKey::SaslHandshake as i16 && version >= 1 => {
                matches!(decode::<SaslHandshake>(frame.clone()), Ok((_, _, r)) if r.mechanism.as_str() == internal::MECHANISM)
            }
            _ => false,
        }
    }

    async fn authenticate(&mut self, catalog: &dyn Catalog, peer: SocketAddr, frame: Bytes) -> Gate {
        let (version, correlation_id, request) = match decode::<SaslAuthenticate>(frame) {
            Ok(decoded) => decoded,
            Err(reason) => return Gate::Close(reason),
        };
        match self.step(catalog, peer, &request.auth_bytes).await.and_then(|token| Ok((token, self.logged_in()?))) {
            Ok((token, session_lifetime_ms)) => {
                let response = SaslAuthenticateResponse::default()
                    .with_error_message(None)
                    .with_auth_bytes(token)
                    .with_session_lifetime_ms(session_lifetime_ms);
                respond(ApiKey::SaslAuthenticate, version, correlation_id, &response)
            }
            Err(reason) => {
                let message = self.client_error.take().unwrap_or_else(|| failed_message(self.mechanism));
                let response = SaslAuthenticateResponse::default()
                    .with_error_code(error_code::SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_string(message)));
                match respond(ApiKey::SaslAuthenticate, version, correlation_id, &response) {
                    Gate::Respond(bytes) => Gate::RespondAndClose(bytes, reason),
                    other => other,
                }
            }
        }
    }

    /// One SCRAM step: the client's token in, the server's token out. An
    /// error (the reason, for the log) leaves the session failed.
    async fn step(&mut self, catalog: &dyn Catalog, peer: SocketAddr, token: &[u8]) -> Result<Bytes, String> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let fail = |e: &dyn std::fmt::Display| format!("SASL/SCRAM-SHA-256 authentication of {peer} failed: {e}");
        match state {
            State::AwaitingPlainToken { .. } => {
                let plain_fail = |e: &dyn std::fmt::Display| format!("SASL/PLAIN authentication of {peer} failed: {e}");
                let token = plain::PlainToken::parse(token).map_err(|e| plain_fail(&e))?;
                self.attempted_user = Some(token.username.clone());
                let credential = catalog
                    .scram_credential(token.username.clone())
                    .await
                    .map_err(|e| plain_fail(&format_args!("credentials could not be obtained: {e}")))?;
                let Some(credential) = credential else {
                    return Err(plain_fail(&scram::ScramError::UnknownUser(token.username)));
                };
                // Thousands of HMACs: off the connection threads.
                let password = token.prepared_password();
                let matches = tokio::task::spawn_blocking(move || credential.matches_password(&password))
                    .await
                    .map_err(|e| plain_fail(&format_args!("the password check failed: {e}")))?;
                if !matches {
                    return Err(plain_fail(&scram::ScramError::WrongProof(token.username)));
                }
                let identity = catalog
                    .identity(token.username.clone())
                    .await
                    .map_err(|e| plain_fail(&format_args!("the role's memberships could not be read: {e}")))?;
                log::debug!("{peer} authenticated as role {:?} (SASL/PLAIN)", token.username);
                self.state = State::Open { identity: Some(identity) };
                Ok(Bytes::new())
            }
            State::AwaitingOAuthToken { framed } => self.oauth_token(catalog, peer, token, framed).await,
            State::AwaitingOAuthErrorAck { .. } => {
                // Kafka answers the client's \x01 with the error it sent as
                // the challenge; anything else ends the exchange the same way.
                self.client_error = Some(oauthbearer::INVALID_TOKEN_CHALLENGE.to_owned());
                Err(format!(
                    "SASL/OAUTHBEARER authentication of {peer} failed: the token was refused (said before){}",
                    if token == [oauthbearer::SEPARATOR] { "" } else { "; the client did not acknowledge with \\x01" }
                ))
            }
            State::AwaitingInternalToken => {
                let internal_fail = |e: &dyn std::fmt::Display| {
                    format!("SASL/{} authentication of {peer} failed: {e}", internal::MECHANISM)
                };
                let secret = self.internal_secret.as_deref().ok_or_else(|| internal_fail(&"no internal secret"))?;
                let identity = match internal::verify(secret, token).map_err(|e| internal_fail(&e))? {
                    internal::InternalLogin::Superuser => internal::superuser(),
                    internal::InternalLogin::Role(role) => {
                        self.attempted_user = Some(role.clone());
                        catalog.identity(role).await.map_err(|e| {
                            internal_fail(&format_args!("the role's memberships could not be read: {e}"))
                        })?
                    }
                };
                log::debug!("{peer} authenticated as {:?} ({})", identity.role, internal::MECHANISM);
                self.state = State::Open { identity: Some(identity) };
                Ok(Bytes::new())
            }
            State::AwaitingClientFirst { framed } => {
                let client = ClientFirst::parse(token).map_err(|e| fail(&e))?;
                self.attempted_user = Some(client.username.clone());
                let Authentication::ScramSha256 { mock_secret } = &self.authentication else {
                    return Err(fail(&"authentication is off"));
                };
                let (credential, token) = if client.token_auth {
                    // Kafka fails an unknown token at once (no mock exchange):
                    // a token id is random, not a name worth hiding.
                    let login = self
                        .tokens
                        .as_ref()
                        .and_then(|tokens| tokens.login(&client.username, crate::now_ms()))
                        .ok_or_else(|| fail(&scram::ScramError::UnknownToken(client.username.clone())))?;
                    (Some(login.credential), Some((login.owner, login.expiry_ms)))
                } else {
                    let credential: Option<ScramCredential> =
                        catalog
                            .scram_credential(client.username.clone())
                            .await
                            .map_err(|e| fail(&format_args!("credentials could not be obtained: {e}")))?;
                    (credential, None)
                };
                let exchange = ServerExchange::start(client, credential, mock_secret, &server_nonce());
                let reply = Bytes::copy_from_slice(exchange.server_first().as_bytes());
                self.state = State::AwaitingClientFinal { framed, exchange: Box::new(exchange), token };
                Ok(reply)
            }
            State::AwaitingClientFinal { exchange, token: login_token, .. } => {
                let done = exchange.finish(token).map_err(|e| fail(&e))?;
                // A token's login is its owner's (Kafka's principal with
                // `tokenAuthenticated` set).
                let role = login_token.as_ref().map_or_else(|| done.principal.clone(), |(owner, _)| owner.clone());
                // Read once the password is proven, so that an unknown
                // client learns nothing from it.
                let mut identity = catalog
                    .identity(role.clone())
                    .await
                    .map_err(|e| fail(&format_args!("the role's memberships could not be read: {e}")))?;
                match login_token {
                    Some((_, expiry_ms)) => {
                        identity.token_authenticated = true;
                        self.token_expires_ms = Some(expiry_ms);
                        log::debug!(
                            "{peer} authenticated as role {role:?} with delegation token {:?} (SASL/SCRAM-SHA-256)",
                            done.principal
                        );
                    }
                    None => log::debug!("{peer} authenticated as role {role:?} (SASL/SCRAM-SHA-256)"),
                }
                self.state = State::Open { identity: Some(identity) };
                Ok(Bytes::from(done.server_final.into_bytes()))
            }
            other => {
                self.state = other;
                Err(fail(&"no SCRAM exchange in progress"))
            }
        }
    }
}

impl SaslSession {
    /// The OAUTHBEARER client message: the token validated off the
    /// connection threads (a signature check), its subject mapped to a role
    /// that must exist and may log in. A refused token is answered with
    /// Kafka's `invalid_token` challenge and fails at the client's next
    /// message; a message that does not parse fails at once.
    async fn oauth_token(
        &mut self,
        catalog: &dyn Catalog,
        peer: SocketAddr,
        token: &[u8],
        framed: bool,
    ) -> Result<Bytes, String> {
        let fail = |e: &dyn std::fmt::Display| format!("SASL/OAUTHBEARER authentication of {peer} failed: {e}");
        let first = oauthbearer::ClientFirst::parse(token).map_err(|e| fail(&e))?;
        let validator = self.identities.oauth.clone().ok_or_else(|| fail(&"OAUTHBEARER is not configured"))?;
        let jwt = first.token;
        let validated = tokio::task::spawn_blocking(move || validator.validate(&jwt, crate::oauth::now_ms()))
            .await
            .map_err(|e| fail(&format_args!("the token check failed: {e}")))?;
        let token = match validated {
            Ok(token) => token,
            Err(e) => {
                log::info!("{}", fail(&e));
                self.state = State::AwaitingOAuthErrorAck { framed };
                return Ok(Bytes::from_static(oauthbearer::INVALID_TOKEN_CHALLENGE.as_bytes()));
            }
        };
        self.attempted_user = Some(first.authorization_id.clone().unwrap_or_else(|| token.subject.clone()));
        let role = self.identities.token_role(&token.subject, first.authorization_id.as_deref()).map_err(|e| {
            if first.authorization_id.is_some() && self.identities.oauth_map.is_none() {
                self.client_error = Some(format!("Authentication failed: {e}"));
            }
            fail(&format_args!("the token's subject {:?}: {e}", token.subject))
        })?;
        self.attempted_user = Some(role.clone());
        let identity = catalog
            .external_login(role.clone())
            .await
            .map_err(|e| fail(&format_args!("role {role:?} could not be read: {e}")))?
            .ok_or_else(|| fail(&format_args!("role {role:?} does not exist or may not log in")))?;
        log::debug!("{peer} authenticated as role {role:?} (SASL/OAUTHBEARER, subject {:?})", token.subject);
        self.token_expires_ms = Some(token.expires_at_ms);
        self.state = State::Open { identity: Some(identity) };
        Ok(Bytes::new())
    }
}

/// A SaslHandshake at v1 or later: the only way a re-authentication starts
/// (its tokens then come in SaslAuthenticate v1+, which carries the session's
/// lifetime).
fn is_handshake_v1(frame: &Bytes) -> bool {
    matches!(peek_fixed_header(frame), Some((key, version, _)) if key == ApiKey::SaslHandshake as i16 && version >= 1)
}

/// What a failed exchange tells the client, in Kafka's words.
fn failed_message(mechanism: &str) -> String {
    match mechanism {
        plain::MECHANISM => "Authentication failed: Invalid username or password".to_owned(),
        oauthbearer::MECHANISM => format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
        ),
        _ => AUTHENTICATION_FAILED_MESSAGE.to_owned(),
    }
}

/// A fresh server nonce: 244 random bits (two v4 UUIDs), base64 (printable, no comma).
fn server_nonce() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
}

/// At most 64 characters of a client-supplied string, for a log line.
fn truncated(s: &str) -> String {
    s.chars().take(64).collect()
}

/// The served-version check, header, guard and decode of dispatch, for the
/// two SASL requests (their versions are their handlers'): (version,
/// correlation id, request) or why the connection closes.
fn decode<H: Handler>(frame: Bytes) -> Result<(i16, i32, H::Request), String> {
    let key = H::KEY;
    let Some((_, version, correlation_id)) = peek_fixed_header(&frame) else {
        return Err("request shorter than a header".into());
    };
    if !H::VERSIONS.accepts(version) {
        return Err(format!("{key:?} v{version} is not supported (correlation id {correlation_id})"));
    }
    let (_, mut body) = split_request(frame, key.request_header_version(version))
        .map_err(|e| format!("bad {key:?} request header: {e}"))?;
    check_request_body(key as i16, version, &body).map_err(|e| format!("malformed {key:?} v{version} request: {e}"))?;
    let request =
        H::Request::decode(&mut body, version).map_err(|e| format!("cannot decode {key:?} v{version}: {e}"))?;
    Ok((version, correlation_id, request))
}

/// Encodes a response frame: length prefix, header, body.
fn respond<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Gate {
    let mut out = BytesMut::with_capacity(64);
    out.put_i32(0);
    put_response_header(&mut out, correlation_id, response_header_version(key, version));
    if let Err(e) = body.encode(&mut out, version) {
        return Gate::Close(format!("cannot encode {key:?} v{version} response: {e}"));
    }
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Gate::Respond(out.freeze())
}
