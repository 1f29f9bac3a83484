//! ListPartitionReassignments (API 46): answered by the controller from its context
//! (NOT_CONTROLLER when this broker is not the active controller).

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    ctx.controller().list_partition_reassignments(request).await
}
