//! DescribeCluster (v0-1): cluster id, controller and live brokers from the metadata cache.
//! v1 adds the endpoint type (KIP-919): a broker answers only `1` (brokers); asking it for
//! controllers (`2`) is MISMATCHED_ENDPOINT_TYPE, any other type UNSUPPORTED_ENDPOINT_TYPE
//! (INVALID_REQUEST at v0, which has neither code), as Kafka 3.9's `AuthHelper` answers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::context::BrokerContext;

/// Kafka's `EndpointType` ids.
const BROKER_ENDPOINT: i8 = 1;
const CONTROLLER_ENDPOINT: i8 = 2;

/// Kafka's error codes.
const INVALID_REQUEST: i16 = 42;
const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;

pub(super) fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let refuse = |code: i16, message: String| {
        DescribeClusterResponse::default()
            .with_error_code(if version == 0 { INVALID_REQUEST } else { code })
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    match request.endpoint_type {
        BROKER_ENDPOINT => {}
        CONTROLLER_ENDPOINT => {
            return refuse(
                MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_owned(),
            )
        }
        other => {
            return refuse(
                UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {other}"),
            )
        }
    }
    let snapshot = ctx.metadata_cache.snapshot();
    let live = super::metadata::live_brokers(ctx, &snapshot, &rctx.listener);
    // A controller id the broker list does not show would confuse the client: -1 then.
    let controller_id = if live.iter().any(|b| b.id == snapshot.controller_id) {
        snapshot.controller_id
    } else {
        -1
    };
    let brokers = live
        .into_iter()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(ctx.cluster_id.clone()))
        .with_controller_id(BrokerId(controller_id))
        .with_brokers(brokers)
        .with_endpoint_type(BROKER_ENDPOINT)
}
