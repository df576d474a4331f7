//! DescribeCluster: this one broker, which is also the controller.

use kafgres_wire::error_code;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::str_bytes;
use crate::server::BrokerContext;

/// Endpoint type 1 is "brokers"; 2 ("controllers", KIP-919) has no endpoint here.
const ENDPOINT_TYPE_BROKERS: i8 = 1;

pub fn handle(ctx: &BrokerContext, version: i16, request: &DescribeClusterRequest) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.cluster_id = str_bytes(&ctx.config.cluster_id);
    response.controller_id = BrokerId(ctx.config.node_id);
    response.cluster_authorized_operations = super::authorized_operations::if_asked(
        request.include_cluster_authorized_operations,
        super::authorized_operations::CLUSTER,
    );
    if version >= 1 {
        response.endpoint_type = request.endpoint_type;
        if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
            response.error_code = error_code::UNSUPPORTED_ENDPOINT_TYPE;
            response.error_message = Some(str_bytes("only the brokers endpoint type is served"));
            return response;
        }
    }
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(ctx.config.node_id);
    broker.host = str_bytes(&ctx.config.advertised_host);
    broker.port = i32::from(ctx.advertised_port);
    response.brokers = vec![broker];
    response
}
