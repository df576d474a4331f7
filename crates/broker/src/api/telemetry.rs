//! GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72): client
//! telemetry, KIP-714. Served only while `kafgres.client_telemetry_metrics`
//! asks for some metrics ([`Gate::ClientTelemetry`]), as Kafka serves them
//! only with a telemetry-capable metrics reporter; the rules are in
//! [`crate::telemetry::store`].
//!
//! Each answers with its error code only on failure (Kafka's
//! `getErrorResponse`). A push's payload is decoded after its checks and
//! outside the store's lock; one that does not decompress or decode is
//! INVALID_RECORD (what Kafka answers when its reporter refuses a payload).

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest, PushTelemetryResponse,
};

use super::handler::{Answer, Gate, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::config::BrokerConfig;
use crate::telemetry::{ClientTelemetry, Push, Sender, ACCEPTED_COMPRESSION_TYPES};

pub struct GetTelemetrySubscriptions;

impl Handler for GetTelemetrySubscriptions {
    const KEY: ApiKey = ApiKey::GetTelemetrySubscriptions;
    /// v0, the only version (Kafka 3.7 to 4.4).
    const VERSIONS: Versions = Versions::new(0, 0);
    const GATE: Gate = Gate::ClientTelemetry;
    type Request = GetTelemetrySubscriptionsRequest;
    type Response = GetTelemetrySubscriptionsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a ClientTelemetry);

    async fn handle(
        (config, telemetry): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: GetTelemetrySubscriptionsRequest,
    ) -> Answer<GetTelemetrySubscriptionsResponse> {
        let settings = config.live.client_telemetry();
        let sender = Sender { client_id: cx.client_id, address: cx.peer };
        let mut response = GetTelemetrySubscriptionsResponse::default();
        match telemetry.subscribe(crate::now_ms(), request.client_instance_id, &settings, sender) {
            Ok(granted) => {
                response.client_instance_id = granted.client_instance_id;
                response.subscription_id = granted.subscription_id;
                response.accepted_compression_types = ACCEPTED_COMPRESSION_TYPES.to_vec();
                response.push_interval_ms = settings.push_interval_ms;
                response.telemetry_max_bytes = settings.metrics_bytes_max;
                response.delta_temporality = true;
                response.requested_metrics = settings.requested_metrics.iter().map(|m| str_bytes(m)).collect();
            }
            Err(code) => response.error_code = code,
        }
        response.into()
    }
}

pub struct PushTelemetry;

impl Handler for PushTelemetry {
    const KEY: ApiKey = ApiKey::PushTelemetry;
    /// v0, the only version (Kafka 3.7 to 4.4).
    const VERSIONS: Versions = Versions::new(0, 0);
    const GATE: Gate = Gate::ClientTelemetry;
    type Request = PushTelemetryRequest;
    type Response = PushTelemetryResponse;
    type Services<'a> = (&'a BrokerConfig, &'a ClientTelemetry);

    async fn handle(
        (config, telemetry): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: PushTelemetryRequest,
    ) -> Answer<PushTelemetryResponse> {
        let settings = config.live.client_telemetry();
        let push = Push {
            client_instance_id: request.client_instance_id,
            subscription_id: request.subscription_id,
            terminating: request.terminating,
            compression_type: request.compression_type,
            payload_bytes: request.metrics.len(),
            sender: Sender { client_id: cx.client_id, address: cx.peer },
        };
        let mut response = PushTelemetryResponse::default();
        if let Err(code) = telemetry.check_push(crate::now_ms(), &push, &settings) {
            response.error_code = code;
            return response.into();
        }
        if request.metrics.is_empty() {
            return response.into();
        }
        match crate::telemetry::read_payload(request.compression_type, &request.metrics, &settings) {
            Ok(metrics) => telemetry.keep(crate::now_ms(), request.client_instance_id, &settings, metrics),
            Err(e) => {
                log::debug!("PushTelemetry from {} ({}): {e}", cx.peer, request.client_instance_id);
                telemetry.payload_refused(request.client_instance_id);
                response.error_code = error_code::INVALID_RECORD;
            }
        }
        response.into()
    }
}
