//! JoinGroup: parked until the group's rebalance answers it.

use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use crate::context::BrokerContext;
use crate::groups::client_info;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: JoinGroupRequest,
    version: i16,
    client_id: Option<&str>,
) -> JoinGroupResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => {
            // Waits for the rebalance: parked.
            crate::limits::parked(groups.join_group(request, version, client_info(client_id))).await
        }
        Err(code) => JoinGroupResponse::default()
            .with_error_code(code)
            .with_member_id(request.member_id),
    }
}
