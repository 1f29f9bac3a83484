//! CreatePartitions: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata). With an
//! authorizer, ALTER on each topic (else TOPIC_AUTHORIZATION_FAILED, nothing changed).

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use security::acl::Operation;

use crate::auth::RequestContext;
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: CreatePartitionsRequest,
    version: i16,
) -> CreatePartitionsResponse {
    let mut request = request;
    let (allowed, denied) = super::split_authorized_topics(
        ctx,
        rctx,
        Operation::Alter,
        std::mem::take(&mut request.topics),
        |t| &t.name,
    );
    request.topics = allowed;
    let mut response = if request.topics.is_empty() && !denied.is_empty() {
        CreatePartitionsResponse::default()
    } else {
        // Waits for the controller and the metadata propagation: parked, as in Kafka's purgatory.
        crate::limits::parked(ctx.controller().create_partitions(request, version)).await
    };
    response.results.extend(denied.into_iter().map(|t| {
        CreatePartitionsTopicResult::default()
            .with_name(t.name)
            .with_error_code(super::TOPIC_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
    }));
    response
}
