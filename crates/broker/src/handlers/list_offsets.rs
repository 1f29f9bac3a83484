//! ListOffsets (v0–v6): earliest (-2), latest (-1) or the exact first record at or after a
//! timestamp (the time index finds the batch, the batch is decoded whatever its codec), on
//! partitions this broker leads. MAX_TIMESTAMP (-3) is served from v7, which the version
//! table does not offer yet (Kafka 2.8 stops at v6; issue 16 raises it): the lookup is there. v0 answers in
//! `old_style_offsets`; from v4 the leader epoch is returned too. Latest is the high
//! watermark (equal to the last stable offset: there are no transactions).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use model::TopicPartition;

use crate::context::BrokerContext;

/// ListOffsets' MAX_TIMESTAMP target (KIP-734).
const MAX_TIMESTAMP: i64 = -3;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // Lookups by time scan the time index and a batch: off the async workers.
    let rm = ctx.replica_manager.clone();
    crate::blocking::run(move || list_offsets(&rm, request, version)).await
}

fn list_offsets(
    rm: &replication::ReplicaManager,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name: Option<model::TopicName> = topic.name.0.parse().ok();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    let result = name
                        .as_ref()
                        .ok_or(ResponseError::UnknownTopicOrPartition)
                        .and_then(|n| {
                            let tp = TopicPartition::new(n.clone(), p.partition_index);
                            let partition = rm.partition(&tp).map_err(|e| e.response_error())?;
                            // MAX_TIMESTAMP (-3) exists from v7 (Kafka 3.0); below that -3 is
                            // an ordinary (negative) timestamp, as in Kafka 2.8.
                            let max_timestamp = version >= 7 && p.timestamp == MAX_TIMESTAMP;
                            partition
                                .offset_for(p.timestamp, max_timestamp)
                                .map_err(|e| e.response_error())
                        });
                    match result {
                        Ok((timestamp, offset, epoch)) => {
                            if version == 0 {
                                if offset >= 0 && p.max_num_offsets > 0 {
                                    out.old_style_offsets = vec![offset];
                                }
                            } else {
                                out.timestamp = timestamp;
                                out.offset = offset;
                                if version >= 4 {
                                    out.leader_epoch = epoch.unwrap_or(-1);
                                }
                            }
                        }
                        Err(error) => out.error_code = error.code(),
                    }
                    out
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
