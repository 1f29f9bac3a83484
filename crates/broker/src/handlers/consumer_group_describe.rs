//! ConsumerGroupDescribe (KIP-848).

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.consumer_group_describe(request),
        Err(code) => ConsumerGroupDescribeResponse::default().with_groups(
            request
                .group_ids
                .iter()
                .map(|g| {
                    DescribedGroup::default()
                        .with_group_id(g.clone())
                        .with_error_code(code)
                        .with_authorized_operations(i32::MIN)
                })
                .collect(),
        ),
    }
}
