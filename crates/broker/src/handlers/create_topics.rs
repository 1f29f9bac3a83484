//! CreateTopics: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata).

use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    // Waits for the controller and the metadata propagation: parked, as in Kafka's purgatory.
    crate::limits::parked(ctx.controller().create_topics(request, version)).await
}
