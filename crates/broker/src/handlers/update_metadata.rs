//! UpdateMetadata: replace the metadata cache's view with the controller's.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestHeader, UpdateMetadataRequest, UpdateMetadataResponse};
use tracing::{debug, warn};

use crate::auth::{control_plane, RequestContext};
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    if let Err(code) = control_plane::check(
        ctx,
        rctx,
        header,
        "UpdateMetadata",
        request.controller_id.0,
        request.controller_epoch,
    )
    .await
    {
        return UpdateMetadataResponse::default().with_error_code(code.code());
    }
    if let Err(code) =
        super::refuse_kraft_controller("UpdateMetadata", request.is_k_raft_controller)
    {
        return UpdateMetadataResponse::default().with_error_code(code.code());
    }
    if ctx.is_broker_epoch_stale(request.broker_epoch) {
        warn!(
            request_epoch = request.broker_epoch,
            "UpdateMetadata addressed to an older registration of this broker"
        );
        return UpdateMetadataResponse::default()
            .with_error_code(ResponseError::StaleBrokerEpoch.code());
    }
    if !ctx.accept_controller_epoch(request.controller_epoch).await {
        warn!(
            controller = request.controller_id.0,
            epoch = request.controller_epoch,
            "UpdateMetadata from a stale controller"
        );
        return UpdateMetadataResponse::default()
            .with_error_code(ResponseError::StaleControllerEpoch.code());
    }
    let removed = ctx.metadata_cache.update(&request);
    crate::groups::on_metadata_update(ctx);
    crate::stray_logs::on_update_metadata(ctx);
    debug!(
        live_brokers = request.live_brokers.len(),
        removed = removed.len(),
        "metadata cache updated"
    );
    UpdateMetadataResponse::default()
}
