//! OffsetsForLeaderEpoch (API 23, v0–v4): where a leader epoch ends in this leader's log
//! (`replication::leader_epoch::LeaderEpochCache::end_offset_for`), so a follower can
//! truncate exactly where its log diverged (KIP-101, KIP-279) and a consumer can check its
//! position after a leader change (KIP-320). Only the leader answers
//! (NOT_LEADER_OR_FOLLOWER otherwise); `current_leader_epoch` (v2+) is checked
//! (FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer). An epoch newer than
//! every known one answers epoch and offset -1. v0 has no leader epoch in the answer.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use model::TopicPartition;

use crate::context::BrokerContext;

pub(super) fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: OffsetForLeaderEpochRequest,
    version: i16,
) -> OffsetForLeaderEpochResponse {
    // CLUSTER_ACTION on the cluster (followers), else DESCRIBE on each topic (KIP-320
    // consumers), as Kafka's handleOffsetForLeaderEpochRequest.
    let denied = if super::authorized_cluster(ctx, rctx, security::acl::Operation::ClusterAction) {
        Default::default()
    } else {
        super::denied_topics(
            ctx,
            rctx,
            security::acl::Operation::Describe,
            request.topics.iter().map(|t| t.topic.0.as_str()),
        )
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let refused = denied.contains(topic.topic.0.as_str());
            let name: Option<model::TopicName> = topic.topic.0.parse().ok();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let out = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let answer = (!refused)
                        .then_some(())
                        .ok_or(ResponseError::TopicAuthorizationFailed)
                        .and_then(|()| name.as_ref().ok_or(ResponseError::UnknownTopicOrPartition))
                        .and_then(|n| {
                            let tp = TopicPartition::new(n.clone(), p.partition);
                            ctx.replica_manager
                                .partition(&tp)
                                .and_then(|partition| {
                                    partition.last_offset_for_leader_epoch(
                                        p.current_leader_epoch,
                                        p.leader_epoch,
                                    )
                                })
                                .map_err(|e| e.response_error())
                        });
                    match answer {
                        Ok((epoch, end_offset)) => out
                            .with_leader_epoch(if version >= 1 { epoch } else { -1 })
                            .with_end_offset(end_offset),
                        Err(error) => out.with_error_code(error.code()),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
