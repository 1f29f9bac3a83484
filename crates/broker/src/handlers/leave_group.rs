//! LeaveGroup.

use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => groups.leave_group(request, version),
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
    }
}
