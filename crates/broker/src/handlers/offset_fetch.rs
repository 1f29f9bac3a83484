//! OffsetFetch (one group before v8, several from v8).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: &OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    match ctx.groups.serving(ctx).await {
        Ok(groups) => groups.offset_fetch(request, version),
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
