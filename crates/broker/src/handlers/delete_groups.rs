//! DeleteGroups.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.delete_groups(request).await,
        Err(code) => DeleteGroupsResponse::default().with_results(
            request
                .groups_names
                .iter()
                .map(|g| {
                    DeletableGroupResult::default()
                        .with_group_id(g.clone())
                        .with_error_code(code)
                })
                .collect(),
        ),
    }
}
