//! SyncGroup: followers wait for the leader's assignment.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        // Followers wait for the leader's assignment: parked.
        Ok(groups) => crate::limits::parked(groups.sync_group(request, version)).await,
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    }
}
