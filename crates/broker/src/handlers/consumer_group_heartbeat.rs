//! ConsumerGroupHeartbeat (KIP-848): joins, heartbeats and leaves with server-side assignment.

use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use crate::context::BrokerContext;
use crate::groups::client_info;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &ConsumerGroupHeartbeatRequest,
    client_id: Option<&str>,
) -> ConsumerGroupHeartbeatResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.consumer_group_heartbeat(request, &client_info(client_id)),
        Err(code) => ConsumerGroupHeartbeatResponse::default().with_error_code(code),
    }
}
