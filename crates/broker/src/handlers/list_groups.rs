//! ListGroups: the groups this broker coordinates (none unless it is the controller).

use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use crate::context::BrokerContext;
use crate::groups::NOT_COORDINATOR;

pub(super) async fn handle(ctx: &BrokerContext, request: &ListGroupsRequest) -> ListGroupsResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.list_groups(request),
        // A broker that coordinates nothing has nothing to list (Kafka lists per broker).
        Err(NOT_COORDINATOR) => ListGroupsResponse::default(),
        Err(code) => ListGroupsResponse::default().with_error_code(code),
    }
}
