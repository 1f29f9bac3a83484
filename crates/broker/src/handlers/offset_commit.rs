//! OffsetCommit: one store transaction per request.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.offset_commit(request, version).await,
        Err(code) => OffsetCommitResponse::default().with_topics(
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
        ),
    }
}
