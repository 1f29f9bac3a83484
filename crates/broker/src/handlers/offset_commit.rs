//! OffsetCommit: one store transaction per request.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

/// Kafka's `handleOffsetCommitRequest` checks: READ on the group (else every partition is
/// GROUP_AUTHORIZATION_FAILED), then READ on each topic (a refused topic's partitions are
/// TOPIC_AUTHORIZATION_FAILED and nothing of them is committed).
pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    if !super::authorized_group(ctx, rctx, Operation::Read, &request.group_id) {
        return refused(request, super::GROUP_AUTHORIZATION_FAILED);
    }
    let (allowed, denied) =
        super::split_authorized_topics(ctx, rctx, Operation::Read, request.topics.clone(), |t| {
            &t.name
        });
    if denied.is_empty() {
        commit(ctx, request, version).await
    } else {
        let mut only = request.clone();
        only.topics = allowed;
        let mut response = commit(ctx, &only, version).await;
        let mut denied_request = request.clone();
        denied_request.topics = denied;
        response
            .topics
            .extend(refused(&denied_request, super::TOPIC_AUTHORIZATION_FAILED).topics);
        response
    }
}

async fn commit(
    ctx: &BrokerContext,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    if request.topics.is_empty() {
        return OffsetCommitResponse::default();
    }
    match ctx.groups.serving(ctx, &request.group_id).await {
        Ok(groups) => groups.offset_commit(request, version).await,
        Err(code) => refused(request, code),
    }
}

/// Every partition of the request refused with `code`.
fn refused(request: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}
