//! Heartbeat (classic protocol).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &HeartbeatRequest,
) -> HeartbeatResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => groups.heartbeat(request),
        Err(code) => HeartbeatResponse::default().with_error_code(code),
    }
}
