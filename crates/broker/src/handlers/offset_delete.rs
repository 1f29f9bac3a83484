//! OffsetDelete. With an authorizer, Kafka's handleOffsetDeleteRequest checks: DELETE on the
//! group (GROUP_AUTHORIZATION_FAILED for the request), then READ on each topic (a refused
//! topic's partitions answer TOPIC_AUTHORIZATION_FAILED and keep their offsets).

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let serving = if super::authorized_group(ctx, rctx, Operation::Delete, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    let groups = match serving {
        Ok(groups) => groups,
        Err(code) => return OffsetDeleteResponse::default().with_error_code(code),
    };
    let (allowed, denied) =
        super::split_authorized_topics(ctx, rctx, Operation::Read, request.topics.clone(), |t| {
            &t.name
        });
    if denied.is_empty() {
        return groups.offset_delete(request).await;
    }
    let mut only = request.clone();
    only.topics = allowed;
    let mut response = if only.topics.is_empty() {
        OffsetDeleteResponse::default()
    } else {
        groups.offset_delete(&only).await
    };
    response.topics.extend(denied.into_iter().map(|t| {
        OffsetDeleteResponseTopic::default()
            .with_name(t.name)
            .with_partitions(
                t.partitions
                    .iter()
                    .map(|p| {
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(super::TOPIC_AUTHORIZATION_FAILED)
                    })
                    .collect(),
            )
    }));
    response
}
