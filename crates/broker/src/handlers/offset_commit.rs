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
    if version == 0 {
        return commit_v0(ctx, request).await;
    }
    match ctx.groups.serving(ctx, &request.group_id).await {
        Ok(groups) => groups.offset_commit(request, version).await,
        Err(code) => refused(request, code),
    }
}

/// OffsetCommit v0 writes `/consumers/<group>/offsets/<topic>/<partition>` in the metadata
/// store, on any broker and without the group coordinator, as Kafka 2.8 does: a partition
/// that does not exist is UNKNOWN_TOPIC_OR_PARTITION, metadata over `offset.metadata.max.bytes`
/// OFFSET_METADATA_TOO_LARGE, a store failure COORDINATOR_NOT_AVAILABLE (clients retry).
async fn commit_v0(ctx: &BrokerContext, request: &OffsetCommitRequest) -> OffsetCommitResponse {
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    const METADATA_MAX_BYTES: usize = 4096;
    let snapshot = ctx.metadata_cache.snapshot();
    let group = request.group_id.0.as_str();
    let mut to_write = Vec::new();
    let mut codes: Vec<Vec<i16>> = Vec::new();
    for topic in &request.topics {
        let known = snapshot.topics.get(topic.name.0.as_str());
        let mut topic_codes = Vec::new();
        for p in &topic.partitions {
            let exists = known.is_some_and(|t| {
                usize::try_from(p.partition_index).is_ok_and(|i| i < t.partitions.len())
            });
            let code = if !exists {
                UNKNOWN_TOPIC_OR_PARTITION
            } else if p
                .committed_metadata
                .as_ref()
                .is_some_and(|m| m.len() > METADATA_MAX_BYTES)
            {
                OFFSET_METADATA_TOO_LARGE
            } else {
                match topic.name.0.as_str().parse::<model::TopicName>() {
                    Ok(name) => {
                        to_write.push((
                            model::TopicPartition::new(name, p.partition_index),
                            p.committed_offset,
                        ));
                        0
                    }
                    Err(_) => UNKNOWN_TOPIC_OR_PARTITION,
                }
            };
            topic_codes.push(code);
        }
        codes.push(topic_codes);
    }
    let stored = ctx.zk().commit_consumer_offsets(group, &to_write).await;
    if let Err(err) = &stored {
        tracing::warn!(group, %err, "OffsetCommit v0: cannot write /consumers");
    }
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .zip(codes)
            .map(|(t, topic_codes)| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .zip(topic_codes)
                            .map(|(p, code)| {
                                let code = match (code, &stored) {
                                    (0, Err(_)) => crate::groups::COORDINATOR_NOT_AVAILABLE,
                                    (code, _) => code,
                                };
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
