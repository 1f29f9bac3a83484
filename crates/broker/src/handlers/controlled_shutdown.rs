//! ControlledShutdown: a broker about to stop asks the active controller to move its
//! leaderships away (others answer NOT_CONTROLLER). The controller checks the broker epoch.

use kafka_protocol::messages::{ControlledShutdownRequest, ControlledShutdownResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: ControlledShutdownRequest,
) -> ControlledShutdownResponse {
    ctx.controller().controlled_shutdown(request).await
}
