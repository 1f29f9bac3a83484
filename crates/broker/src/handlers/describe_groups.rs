//! DescribeGroups.

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.describe_groups(request),
        Err(code) => DescribeGroupsResponse::default().with_groups(
            request
                .groups
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
