//! Client telemetry requests (KIP-714): GetTelemetrySubscriptions and PushTelemetry. Both have
//! only v0, flexible from v0. The pushed metrics are opaque bytes here (an OTLP payload, maybe
//! compressed); the broker bounds and decodes them itself.

use crate::guard::schema::{between, field, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// GetTelemetrySubscriptions (key 71): v0, flexible. A zero client_instance_id asks for one.

pub(crate) static GET_TELEMETRY_SUBSCRIPTIONS: ApiSchema =
    ApiSchema { key: 71, versions: between(0, 0), flexible_since: 0, body: &GET_TELEMETRY_SUBSCRIPTIONS_REQUEST };

pub(crate) const GET_TELEMETRY_SUBSCRIPTIONS_REQUEST: StructSchema =
    StructSchema::new("GetTelemetrySubscriptionsRequest", &[field("client_instance_id", Kind::Uuid, ALL)]);

// ---------------------------------------------------------------------------------------------
// PushTelemetry (key 72): v0, flexible.

pub(crate) static PUSH_TELEMETRY: ApiSchema =
    ApiSchema { key: 72, versions: between(0, 0), flexible_since: 0, body: &PUSH_TELEMETRY_REQUEST };

pub(crate) const PUSH_TELEMETRY_REQUEST: StructSchema = StructSchema::new(
    "PushTelemetryRequest",
    &[
        field("client_instance_id", Kind::Uuid, ALL),
        field("subscription_id", Kind::Int32, ALL),
        field("terminating", Kind::Bool, ALL),
        field("compression_type", Kind::Int8, ALL),
        field("metrics", Kind::Bytes, ALL),
    ],
);
