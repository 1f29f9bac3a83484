//! OffsetFetch (one group before v8, several from v8).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

/// Kafka's UNSTABLE_OFFSET_COMMIT (retriable: the consumer asks again).
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    // Kafka's handleOffsetFetchRequest: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED),
    // then DESCRIBE on each topic: a named topic the principal may not describe answers
    // TOPIC_AUTHORIZATION_FAILED, and "every topic" leaves such topics out. Reading changes
    // nothing, so the checks are applied to the answer.
    if version >= 8 {
        // Several groups: each answered by this broker only if it coordinates it.
        let (coordinator, served, refused) = ctx
            .groups
            .split(ctx, request.groups.clone(), |g| g.group_id.0.as_str());
        let mut response = match coordinator {
            Some(groups) if !served.is_empty() => {
                let mut only = request.clone();
                only.groups = served;
                let mut response = groups.offset_fetch(&only, version);
                if ctx.authorizer.is_some() {
                    authorize_answer(ctx, rctx, &only, &mut response);
                }
                if request.require_stable {
                    for group in &mut response.groups {
                        for t in &mut group.topics {
                            for p in &mut t.partitions {
                                if ctx.groups.has_pending(
                                    &group.group_id,
                                    &t.name,
                                    p.partition_index,
                                ) {
                                    p.committed_offset = -1;
                                    p.metadata = None;
                                    p.error_code = UNSTABLE_OFFSET_COMMIT;
                                }
                            }
                        }
                    }
                }
                response
            }
            _ => OffsetFetchResponse::default(),
        };
        response.groups.extend(refused.into_iter().map(|(g, code)| {
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_error_code(code)
        }));
        return response;
    }
    if version == 0 && super::authorized_group(ctx, rctx, Operation::Describe, &request.group_id) {
        let mut response = fetch_v0(ctx, request).await;
        if ctx.authorizer.is_some() {
            authorize_answer(ctx, rctx, request, &mut response);
        }
        return response;
    }
    let serving = if super::authorized_group(ctx, rctx, Operation::Describe, &request.group_id) {
        ctx.groups.serving(ctx, &request.group_id).await
    } else {
        Err(super::GROUP_AUTHORIZATION_FAILED)
    };
    match serving {
        Ok(groups) => {
            let mut response = groups.offset_fetch(request, version);
            if ctx.authorizer.is_some() {
                authorize_answer(ctx, rctx, request, &mut response);
            }
            // v7+: an offset a transaction wrote and has not settled is unstable (KIP-447).
            if request.require_stable {
                for t in &mut response.topics {
                    for p in &mut t.partitions {
                        if ctx
                            .groups
                            .has_pending(&request.group_id, &t.name, p.partition_index)
                        {
                            p.committed_offset = -1;
                            p.metadata = None;
                            p.error_code = UNSTABLE_OFFSET_COMMIT;
                        }
                    }
                }
            }
            response
        }
        Err(code) => {
            // Before v2 the error travels in each requested partition.
            let topics = request
                .topics
                .iter()
                .flatten()
                .map(|t| {
                    OffsetFetchResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partition_indexes
                                .iter()
                                .map(|&p| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(-1)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code)
                })
                .collect();
            OffsetFetchResponse::default()
                .with_error_code(code)
                .with_topics(topics)
                .with_groups(groups)
        }
    }
}

/// OffsetFetch v0 reads `/consumers/<group>/offsets/<topic>/<partition>` from the metadata
/// store on any broker, as Kafka 2.8 does: a partition without an offset there (or that does
/// not exist) answers offset -1 with no error; a store failure answers
/// COORDINATOR_NOT_AVAILABLE for that partition.
async fn fetch_v0(ctx: &BrokerContext, request: &OffsetFetchRequest) -> OffsetFetchResponse {
    let snapshot = ctx.metadata_cache.snapshot();
    let group = request.group_id.0.as_str();
    let zk = ctx.zk();
    let mut topics = Vec::new();
    for topic in request.topics.iter().flatten() {
        let known = snapshot.topics.get(topic.name.0.as_str());
        let name = topic.name.0.as_str().parse::<model::TopicName>().ok();
        let mut partitions = Vec::new();
        for &p in &topic.partition_indexes {
            let exists =
                known.is_some_and(|t| usize::try_from(p).is_ok_and(|i| i < t.partitions.len()));
            let (offset, code) = match (&name, exists) {
                (Some(name), true) => {
                    let tp = model::TopicPartition::new(name.clone(), p);
                    match zk.get_consumer_offset(group, &tp).await {
                        Ok(offset) => (offset.unwrap_or(-1), 0),
                        Err(err) => {
                            tracing::warn!(group, %tp, %err, "OffsetFetch v0: cannot read /consumers");
                            (-1, crate::groups::COORDINATOR_NOT_AVAILABLE)
                        }
                    }
                }
                _ => (-1, 0),
            };
            partitions.push(
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_metadata(Some(Default::default()))
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetFetchResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    OffsetFetchResponse::default().with_topics(topics)
}

/// Applies the group and topic checks to a computed answer.
fn authorize_answer(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &OffsetFetchRequest,
    response: &mut OffsetFetchResponse,
) {
    let topic_ok = |t: &str| {
        super::authorized(
            ctx,
            rctx,
            Operation::Describe,
            security::acl::ResourceType::Topic,
            t,
        )
    };
    let named = request.topics.is_some();
    response.topics.retain_mut(|t| {
        if topic_ok(&t.name) {
            return true;
        }
        for p in &mut t.partitions {
            p.committed_offset = -1;
            p.metadata = None;
            p.error_code = super::TOPIC_AUTHORIZATION_FAILED;
        }
        named
    });
    for group in &mut response.groups {
        if !super::authorized_group(ctx, rctx, Operation::Describe, &group.group_id) {
            group.error_code = super::GROUP_AUTHORIZATION_FAILED;
            group.topics.clear();
            continue;
        }
        let named = request
            .groups
            .iter()
            .find(|g| g.group_id == group.group_id)
            .is_some_and(|g| g.topics.is_some());
        group.topics.retain_mut(|t| {
            if topic_ok(&t.name) {
                return true;
            }
            for p in &mut t.partitions {
                p.committed_offset = -1;
                p.metadata = None;
                p.error_code = super::TOPIC_AUTHORIZATION_FAILED;
            }
            named
        });
    }
}
