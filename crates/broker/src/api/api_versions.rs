//! ApiVersions: the served table, verbatim.
//!
//! Only the fields Kafka itself sends are set: from v3 the supported and
//! finalized features (tagged fields 0-2, [`super::features`]); never
//! ZkMigrationReady, which Kafka omits while false and `kafka-protocol` omits
//! at its default.
//!
//! v5 (KIP-1242) names the cluster and node the client means to reach. As
//! Kafka 4.4's `KafkaApis`: giving one without the other is INVALID_REQUEST;
//! a cluster id that is not this cluster's, or a node id that is not this
//! broker's, is REBOOTSTRAP_REQUIRED (the client starts again from its
//! bootstrap servers). Both answers carry only the error code, as Kafka's
//! `getErrorResponse` builds them.

use kafgres_wire::error_code;
use kafgres_wire::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::api_versions_response::ApiVersion;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{features, Gates};

/// Features are in the response from v3 (KIP-584, tagged fields).
const FEATURES_VERSION_MIN: i16 = 3;
/// The request names the cluster and node it is for from v5 (KIP-1242).
const TARGET_VERSION: i16 = 5;

pub struct ApiVersions;

impl Handler for ApiVersions {
    const KEY: ApiKey = ApiKey::ApiVersions;
    /// v0-v5, Kafka 4.4's range; a version above is answered per KIP-511 (see
    /// [`unsupported_version_answer`]) rather than by closing the connection.
    const VERSIONS: Versions = Versions::new(0, TARGET_VERSION);
    type Request = ApiVersionsRequest;
    type Response = ApiVersionsResponse;
    type Services<'a> = &'a crate::config::BrokerConfig;

    async fn handle(
        config: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: ApiVersionsRequest,
    ) -> Answer<ApiVersionsResponse> {
        if cx.api_version >= TARGET_VERSION {
            if let Some(code) = wrong_target(config, &request) {
                let mut response = ApiVersionsResponse::from(kafka_protocol::messages::ApiVersionsResponse::default());
                response.error_code = code;
                return response.into();
            }
        }
        let mut response = ApiVersionsResponse::from(kafka_protocol::messages::ApiVersionsResponse::default());
        response.api_keys = served_versions(config.live.gates());
        if cx.api_version >= FEATURES_VERSION_MIN {
            // Tagged fields 0-2, as Kafka sends them (librdkafka 2.0.2 reads them; it is
            // ZkMigrationReady, tag 3, that Kafka leaves out while false).
            response.supported_features = features::supported_features();
            response.finalized_features_epoch = config.live.features_epoch();
            response.finalized_features = features::finalized_features(config.live.transaction_version());
        }
        if cx.api_version >= 3
            && !(valid_software_field(&request.client_software_name)
                && valid_software_field(&request.client_software_version))
        {
            response.error_code = error_code::INVALID_REQUEST;
        }
        response.into()
    }
}

/// Kafka 4.4's checks of v5's ClusterId and NodeId (`ApiVersionsRequest.isValid`,
/// then `KafkaApis`): both or neither, and if given, this broker's.
fn wrong_target(config: &crate::config::BrokerConfig, request: &ApiVersionsRequest) -> Option<i16> {
    match (&request.cluster_id, request.node_id) {
        (None, -1) => None,
        (None, _) | (Some(_), -1) => Some(error_code::INVALID_REQUEST),
        (Some(cluster_id), node_id) if cluster_id.as_str() != config.cluster_id || node_id != config.node_id => {
            Some(error_code::REBOOTSTRAP_REQUIRED)
        }
        (Some(_), _) => None,
    }
}

/// The served table as the live settings open it (a gated API, such as the
/// telemetry ones while `kafgres.client_telemetry_metrics` is empty, is left out).
fn served_versions(gates: Gates) -> Vec<ApiVersion> {
    super::served_now(gates)
        .map(|a| {
            let mut v = ApiVersion::default();
            v.api_key = a.key as i16;
            v.min_version = a.versions.advertised_min;
            v.max_version = a.versions.max;
            v
        })
        .collect()
}

/// The KIP-511 answer to an ApiVersions version this broker does not know:
/// v0 layout, UNSUPPORTED_VERSION, and the served table so the client can
/// retry at a version both sides support.
pub fn unsupported_version_answer(gates: Gates) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::from(kafka_protocol::messages::ApiVersionsResponse::default());
    response.error_code = error_code::UNSUPPORTED_VERSION;
    response.api_keys = served_versions(gates);
    response
}

/// Kafka's rule for client software name and version: `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software_field(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge_ok = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            edge_ok(first)
                && edge_ok(last)
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kafka_rules() {
        assert!(valid_software_field("librdkafka"));
        assert!(valid_software_field("2.12.0-RC1"));
        assert!(!valid_software_field(""));
        assert!(!valid_software_field("-x"));
        assert!(!valid_software_field("a b"));
    }
}
