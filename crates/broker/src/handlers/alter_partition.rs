//! AlterPartition (API 56; `AlterIsr` v0 in Kafka 2.8): a partition leader's ISR change, for
//! the active controller (NOT_CONTROLLER on any other broker). Only a broker can send it (its
//! proof is checked first, as for ControlledShutdown, see `auth::control_plane`: otherwise a
//! client guessing a broker epoch could shrink ISRs). Validation, the conditional state write
//! and the UpdateMetadata to every broker are the controller's (`controller::alter_partition`).

use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, RequestHeader};

use crate::auth::{control_plane, RequestContext};
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    if let Err(code) = control_plane::check_broker(
        ctx,
        rctx,
        header,
        "AlterPartition",
        request.broker_id.0,
        request.broker_epoch,
    ) {
        return AlterPartitionResponse::default().with_error_code(code.code());
    }
    ctx.controller().alter_partition(request, version).await
}
