//! Heartbeat (classic protocol).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(ctx: &BrokerContext, request: &HeartbeatRequest) -> HeartbeatResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.heartbeat(request),
        Err(code) => HeartbeatResponse::default().with_error_code(code),
    }
}
