//! Random valid GetTelemetrySubscriptions and PushTelemetry requests (v0 only; see
//! `requests_data.rs` for the conventions).

use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use proptest::prelude::*;

use super::gen::{blob, unknown_tags, uuid, uuid_bytes};

pub(super) fn get_telemetry_subscriptions(_v: i16) -> impl Strategy<Value = GetTelemetrySubscriptionsRequest> {
    (uuid_bytes(), unknown_tags(true)).prop_map(|(id, tags)| {
        GetTelemetrySubscriptionsRequest::default()
            .with_client_instance_id(uuid(id).topic_id)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn push_telemetry(_v: i16) -> impl Strategy<Value = PushTelemetryRequest> {
    (uuid_bytes(), any::<i32>(), any::<bool>(), any::<i8>(), blob(), unknown_tags(true)).prop_map(
        |(id, subscription_id, terminating, compression_type, metrics, tags)| {
            PushTelemetryRequest::default()
                .with_client_instance_id(uuid(id).topic_id)
                .with_subscription_id(subscription_id)
                .with_terminating(terminating)
                .with_compression_type(compression_type)
                .with_metrics(metrics)
                .with_unknown_tagged_fields(tags)
        },
    )
}
