//! DeleteTopics: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata).

use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    // Waits for the deletion (up to the request's timeout): parked, as in Kafka's purgatory.
    crate::limits::parked(ctx.controller().delete_topics(request, version)).await
}
