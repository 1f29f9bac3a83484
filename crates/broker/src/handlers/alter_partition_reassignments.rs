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
    rctx: &crate::auth::RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // ALTER on the cluster, as Kafka's handleAlterPartitionReassignmentsRequest.
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Alter) {
        let code = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed;
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_string(
                code.to_string(),
            )));
    }
    crate::limits::parked(ctx.controller().alter_partition_reassignments(request)).await
}
