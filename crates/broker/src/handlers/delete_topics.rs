//! DeleteTopics: handled by the controller (NOT_CONTROLLER in every result when this broker is not
//! the active controller; clients then find the controller through Metadata). With an
//! authorizer, DELETE on each topic (else TOPIC_AUTHORIZATION_FAILED, the topic stays); a
//! topic named by id is checked under the name the metadata cache has for it.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use security::acl::Operation;

use crate::auth::RequestContext;
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut request = request;
    let mut denied = Vec::new();
    if ctx.authorizer.is_some() {
        let (allowed, refused) = super::split_authorized_topics(
            ctx,
            rctx,
            Operation::Delete,
            std::mem::take(&mut request.topic_names),
            |t| t,
        );
        request.topic_names = allowed;
        denied.extend(refused.into_iter().map(|name| {
            DeletableTopicResult::default()
                .with_name(Some(name))
                .with_error_code(super::TOPIC_AUTHORIZATION_FAILED)
                .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
        }));
        let snapshot = ctx.metadata_cache.snapshot();
        let name_of = |t: &kafka_protocol::messages::delete_topics_request::DeleteTopicState| {
            t.name
                .as_ref()
                .map(|n| n.0.to_string())
                .or_else(|| snapshot.topic_name(t.topic_id).map(str::to_owned))
        };
        let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| {
                name_of(t).is_none_or(|name| {
                    super::authorized(
                        ctx,
                        rctx,
                        Operation::Delete,
                        security::acl::ResourceType::Topic,
                        &name,
                    )
                })
            });
        request.topics = allowed;
        denied.extend(refused.into_iter().map(|t| {
            DeletableTopicResult::default()
                .with_name(t.name)
                .with_topic_id(t.topic_id)
                .with_error_code(super::TOPIC_AUTHORIZATION_FAILED)
                .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
        }));
    }
    let mut response =
        if !denied.is_empty() && request.topics.is_empty() && request.topic_names.is_empty() {
            DeleteTopicsResponse::default()
        } else {
            // Waits for the deletion (up to the request's timeout): parked, as in Kafka's purgatory.
            crate::limits::parked(ctx.controller().delete_topics(request, version)).await
        };
    response.responses.extend(denied);
    response
}
