//! SyncGroup: followers wait for the leader's assignment.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    match ctx.groups.serving(ctx).await {
        // Followers wait for the leader's assignment: parked.
        Ok(groups) => crate::limits::parked(groups.sync_group(request, version)).await,
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    }
}
