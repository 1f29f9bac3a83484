//! JoinGroup: parked until the group's rebalance answers it.

use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::groups::client_info;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: JoinGroupRequest,
    version: i16,
    client_id: Option<&str>,
) -> JoinGroupResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => {
            // Waits for the rebalance: parked.
            crate::limits::parked(groups.join_group(request, version, client_info(client_id))).await
        }
        Err(code) => JoinGroupResponse::default()
            .with_error_code(code)
            .with_member_id(request.member_id),
    }
}
