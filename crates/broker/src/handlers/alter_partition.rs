//! AlterPartition (API 56; `AlterIsr` v0 in Kafka 2.8): a partition leader's ISR change, for
//! the active controller (NOT_CONTROLLER on any other broker). Validation, the conditional
//! state write and the UpdateMetadata to every broker are the controller's
//! (`controller::alter_partition`).

use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    ctx.controller().alter_partition(request, version).await
}
