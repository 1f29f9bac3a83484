//! ListGroups: the groups this broker coordinates (those of the offsets partitions it leads).

use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::groups::NOT_COORDINATOR;
use security::acl::Operation;

/// DESCRIBE on the cluster lists every group; otherwise only the groups the principal may
/// describe (Kafka's handleListGroupsRequest).
pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &ListGroupsRequest,
) -> ListGroupsResponse {
    match ctx.groups.serving_all() {
        Ok(groups) => {
            let mut response = groups.list_groups(request);
            if !super::authorized_cluster(ctx, rctx, Operation::Describe) {
                response.groups.retain(|g| {
                    super::authorized_group(ctx, rctx, Operation::Describe, &g.group_id)
                });
            }
            response
        }
        // A broker that coordinates nothing has nothing to list (Kafka lists per broker).
        Err(NOT_COORDINATOR) => ListGroupsResponse::default(),
        Err(code) => ListGroupsResponse::default().with_error_code(code),
    }
}
