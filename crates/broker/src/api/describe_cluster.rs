//! DescribeCluster: this one broker, which is also the controller.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::config::BrokerConfig;

/// Endpoint type 1 is "brokers"; 2 ("controllers", KIP-919) has no endpoint here.
const ENDPOINT_TYPE_BROKERS: i8 = 1;

pub struct DescribeCluster;

impl Handler for DescribeCluster {
    const KEY: ApiKey = ApiKey::DescribeCluster;
    /// v0-v2; v1 adds the endpoint type (KIP-919), of which only brokers are served.
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = DescribeClusterRequest;
    type Response = DescribeClusterResponse;
    type Services<'a> = &'a BrokerConfig;

    async fn handle(
        config: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DescribeClusterRequest,
    ) -> Answer<DescribeClusterResponse> {
        let version = cx.api_version;
        let mut response = DescribeClusterResponse::default();
        response.cluster_id = str_bytes(&config.cluster_id);
        let (node_id, host, port) = cx.serving_node(config);
        response.controller_id = BrokerId(node_id);
        // As Kafka: anyone may describe the cluster; its authorized operations
        // need DESCRIBE on it, and are none (0) without.
        response.cluster_authorized_operations = if !request.include_cluster_authorized_operations
            || cx.may_on_cluster(Operation::Describe)
        {
            cx.authorized_operations(request.include_cluster_authorized_operations, ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        };
        if version >= 1 {
            response.endpoint_type = request.endpoint_type;
            if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
                response.error_code = error_code::UNSUPPORTED_ENDPOINT_TYPE;
                response.error_message = Some(str_bytes("only the brokers endpoint type is served"));
                return response.into();
            }
        }
        let mut broker = DescribeClusterBroker::default();
        broker.broker_id = BrokerId(node_id);
        broker.host = str_bytes(host);
        broker.port = i32::from(port);
        response.brokers = vec![broker];
        response.into()
    }
}
