//! ListConfigResources (KIP-714's ListClientMetricsResources, widened to
//! every config resource type by KIP-1142 in v1): the resources whose configs
//! DescribeConfigs answers, for `kafka-configs.sh --describe` without a name.
//! Here: every topic and this broker. Client metrics subscriptions and group
//! configs do not exist in Kafgres, so those types list nothing (as on a
//! Kafka where none is set); broker loggers are not served by DescribeConfigs
//! and are not listed (Kafka lists its broker id).

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::topics::Topics;

const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_CLIENT_METRICS: i8 = 16;
/// The types v1 may ask for; an empty list asks for all of them.
const LISTABLE: [i8; 5] =
    [RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP];

pub struct ListConfigResources;

impl Handler for ListConfigResources {
    const KEY: ApiKey = ApiKey::ListConfigResources;
    /// v0-v1: Kafka 4.1's range; v0 (ListClientMetricsResources) lists client
    /// metrics subscriptions only, v1 asks by resource type.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = ListConfigResourcesRequest;
    type Response = ListConfigResourcesResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ListConfigResourcesRequest,
    ) -> Answer<Self::Response> {
        let mut response = ListConfigResourcesResponse::default();
        if !cx.may_on_cluster(Operation::DescribeConfigs) {
            response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
            return response.into();
        }
        let types: Vec<i8> = match (cx.api_version, req.resource_types.is_empty()) {
            (0, _) => vec![RESOURCE_CLIENT_METRICS],
            (_, true) => LISTABLE.to_vec(),
            (_, false) => req.resource_types,
        };
        if types.iter().any(|t| !LISTABLE.contains(t)) {
            // Kafka's answer to a type it cannot list.
            response.error_code = error_code::UNSUPPORTED_VERSION;
            return response.into();
        }
        let resource = |resource_type: i8, name: &str| {
            let mut r = ConfigResource::default();
            r.resource_type = resource_type;
            r.resource_name = str_bytes(name);
            r
        };
        if types.contains(&RESOURCE_TOPIC) {
            response.config_resources.extend(topics.all().iter().map(|t| resource(RESOURCE_TOPIC, &t.name)));
        }
        if types.contains(&RESOURCE_BROKER) {
            response.config_resources.push(resource(RESOURCE_BROKER, &config.node_id.to_string()));
        }
        response.into()
    }
}
