//! AlterPartitionReassignments (API 45): handled by the controller (NOT_CONTROLLER for the
//! whole request when this broker is not the active controller; clients then find the
//! controller through Metadata). The answer comes once each reassignment is started or
//! refused; ListPartitionReassignments shows its progress.

use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    crate::limits::parked(ctx.controller().alter_partition_reassignments(request)).await
}
