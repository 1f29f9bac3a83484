//! OffsetDelete.

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.offset_delete(request).await,
        Err(code) => OffsetDeleteResponse::default().with_error_code(code),
    }
}
