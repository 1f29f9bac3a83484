//! CreateTopics: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata).
//!
//! With an authorizer, Kafka's `handleCreateTopicsRequest` path: CREATE on the cluster allows
//! every topic, otherwise CREATE on each topic (literal or prefixed ACLs); a refused topic
//! answers TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and is not created.

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use security::acl::Operation;

use crate::auth::RequestContext;
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    if super::authorized_cluster(ctx, rctx, Operation::Create) {
        return create(ctx, request, version).await;
    }
    let mut request = request;
    let (allowed, denied) = super::split_authorized_topics(
        ctx,
        rctx,
        Operation::Create,
        std::mem::take(&mut request.topics),
        |t| &t.name,
    );
    request.topics = allowed;
    let mut response = if request.topics.is_empty() {
        CreateTopicsResponse::default()
    } else {
        create(ctx, request, version).await
    };
    response.topics.extend(denied.into_iter().map(|t| {
        CreatableTopicResult::default()
            .with_name(t.name)
            .with_error_code(super::TOPIC_AUTHORIZATION_FAILED)
            .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
            .with_topic_config_error_code(super::TOPIC_AUTHORIZATION_FAILED)
    }));
    response
}

async fn create(
    ctx: &BrokerContext,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    // Waits for the controller and the metadata propagation: parked, as in Kafka's purgatory.
    crate::limits::parked(ctx.controller().create_topics(request, version)).await
}
