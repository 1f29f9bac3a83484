//! DescribeCluster: cluster id, controller and live brokers from the metadata cache.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::context::BrokerContext;

pub(super) fn handle(
    ctx: &BrokerContext,
    _request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let snapshot = ctx.metadata_cache.snapshot();
    let brokers = super::metadata::live_brokers(ctx, &snapshot)
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
        .with_controller_id(BrokerId(snapshot.controller_id))
        .with_brokers(brokers)
}
