//! ListPartitionReassignments (API 46): answered by the controller from its context
//! (NOT_CONTROLLER when this broker is not the active controller).

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    // DESCRIBE on the cluster, as Kafka's handleListPartitionReassignmentsRequest.
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Describe) {
        let code = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed;
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_string(
                code.to_string(),
            )));
    }
    ctx.controller().list_partition_reassignments(request).await
}
