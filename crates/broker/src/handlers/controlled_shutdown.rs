//! ControlledShutdown: a broker about to stop asks the active controller to move its
//! leaderships away (others answer NOT_CONTROLLER). Only a broker can ask (its proof is
//! checked first, see `auth::control_plane`); the controller checks the broker epoch.

use kafka_protocol::messages::{
    ControlledShutdownRequest, ControlledShutdownResponse, RequestHeader,
};

use crate::auth::{control_plane, RequestContext};
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: ControlledShutdownRequest,
) -> ControlledShutdownResponse {
    if let Err(code) = control_plane::check_broker(
        ctx,
        rctx,
        header,
        "ControlledShutdown",
        request.broker_id.0,
        request.broker_epoch,
    ) {
        return ControlledShutdownResponse::default().with_error_code(code.code());
    }
    ctx.controller().controlled_shutdown(request).await
}
