//! DeleteTopics: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata).

use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    ctx.controller().delete_topics(request, version).await
}
