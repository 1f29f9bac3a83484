//! OffsetDelete.

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Delete, &request.group_id) {
        ctx.groups.serving(ctx).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => groups.offset_delete(request).await,
        Err(code) => OffsetDeleteResponse::default().with_error_code(code),
    }
}
