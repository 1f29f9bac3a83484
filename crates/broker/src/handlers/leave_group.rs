//! LeaveGroup.

use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.leave_group(request, version),
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
    }
}
