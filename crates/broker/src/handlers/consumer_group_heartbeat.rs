//! ConsumerGroupHeartbeat (KIP-848): joins, heartbeats and leaves with server-side assignment.

use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::groups::client_info;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &ConsumerGroupHeartbeatRequest,
    client_id: Option<&str>,
) -> ConsumerGroupHeartbeatResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => {
            groups
                .consumer_group_heartbeat(request, &client_info(client_id))
                .await
        }
        Err(code) => ConsumerGroupHeartbeatResponse::default().with_error_code(code),
    }
}
