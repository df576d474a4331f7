//! SaslHandshake and SaslAuthenticate, as dispatch answers them: only when
//! they are out of place. While a connection authenticates, the connection's
//! SASL gate (`crate::sasl`) answers them itself, with these versions; once it
//! has authenticated, or when authentication is off, they reach dispatch and
//! get ILLEGAL_SASL_STATE, as from Kafka's request handler.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::handler::{Answer, Handler, RequestContext, Versions};

pub struct SaslHandshake;

impl Handler for SaslHandshake {
    const KEY: ApiKey = ApiKey::SaslHandshake;
    /// v0-v1: Kafka 4.1's range. A v0 handshake is followed by bare SCRAM
    /// tokens rather than SaslAuthenticate requests, as in Kafka.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = SaslHandshakeRequest;
    type Response = SaslHandshakeResponse;
    type Services<'a> = ();

    async fn handle(
        _: Self::Services<'_>,
        _: &RequestContext<'_>,
        _: SaslHandshakeRequest,
    ) -> Answer<SaslHandshakeResponse> {
        SaslHandshakeResponse::default().with_error_code(error_code::ILLEGAL_SASL_STATE).into()
    }
}

pub struct SaslAuthenticate;

impl Handler for SaslAuthenticate {
    const KEY: ApiKey = ApiKey::SaslAuthenticate;
    /// v0-v2: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = SaslAuthenticateRequest;
    type Response = SaslAuthenticateResponse;
    type Services<'a> = ();

    async fn handle(
        _: Self::Services<'_>,
        _: &RequestContext<'_>,
        _: SaslAuthenticateRequest,
    ) -> Answer<SaslAuthenticateResponse> {
        SaslAuthenticateResponse::default()
            .with_error_code(error_code::ILLEGAL_SASL_STATE)
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate request received after successful authentication",
            )))
            .into()
    }
}
