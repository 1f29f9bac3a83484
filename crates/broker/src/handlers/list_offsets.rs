//! ListOffsets (v0–v9): earliest (-2), latest (-1) or the exact first record at or after a
//! timestamp (the time index finds the batch, the batch is decoded whatever its codec), on
//! partitions this broker leads. v7 adds MAX_TIMESTAMP (-3, the record with the largest
//! timestamp, KIP-734), v8 EARLIEST_LOCAL_TIMESTAMP (-4, KIP-405: without tiered storage the
//! log start offset, as -2) and v9 LATEST_TIERED_TIMESTAMP (-5: without tiered storage offset
//! -1, timestamp -1, epoch -1). As Kafka 3.9, any other negative timestamp, or one of these
//! below the version that introduced it, is UNSUPPORTED_VERSION for that partition (v0 knows
//! only -1 and -2). v0 answers in `old_style_offsets`; from v4 the leader epoch is returned
//! too and the request's `current_leader_epoch` is checked (FENCED_LEADER_EPOCH /
//! UNKNOWN_LEADER_EPOCH). Latest is the high watermark, the last stable offset at
//! READ_COMMITTED (`isolation_level` 1, v2+; lookups by time then answer only below it too),
//! or the log end for a replica (`replica_id` >= 0, a follower resetting
//! its fetch offset).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use model::TopicPartition;

use crate::context::BrokerContext;

/// ListOffsets' MAX_TIMESTAMP target (KIP-734).
const MAX_TIMESTAMP: i64 = -3;
/// ListOffsets' EARLIEST_LOCAL_TIMESTAMP target (KIP-405).
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// ListOffsets' LATEST_TIERED_TIMESTAMP target (KIP-1005).
const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// The first version that knows a negative (special) timestamp, as Kafka 3.9's
/// `timestampMinSupportedVersion`; `None` for a negative timestamp no version knows.
fn special_timestamp_min_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        -1 | -2 => Some(0),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL_TIMESTAMP => Some(8),
        LATEST_TIERED_TIMESTAMP => Some(9),
        _ => None,
    }
}

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // DESCRIBE on each topic, as Kafka's handleListOffsetRequest.
    let denied = super::denied_topics(
        ctx,
        rctx,
        security::acl::Operation::Describe,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    // Lookups by time scan the time index and a batch: off the async workers.
    let rm = ctx.replica_manager.clone();
    crate::blocking::run(move || list_offsets(&rm, request, version, &denied)).await
}

fn list_offsets(
    rm: &replication::ReplicaManager,
    request: ListOffsetsRequest,
    version: i16,
    denied: &std::collections::HashSet<String>,
) -> ListOffsetsResponse {
    let reader = if request.replica_id.0 >= 0 {
        replication::OffsetsReader::Replica
    } else if version == 0 {
        replication::OffsetsReader::LegacyClient
    } else if version >= 2 && request.isolation_level == 1 {
        // READ_COMMITTED: the latest offset is the last stable offset (Kafka's
        // `fetchOffsetForTimestamp` with the transactional isolation).
        replication::OffsetsReader::CommittedClient
    } else {
        replication::OffsetsReader::Client
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name: Option<model::TopicName> = topic.name.0.parse().ok();
            let refused = denied.contains(topic.name.0.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    let supported = match special_timestamp_min_version(p.timestamp) {
                        _ if refused => Err(ResponseError::TopicAuthorizationFailed),
                        Some(min) if version < min => Err(ResponseError::UnsupportedVersion),
                        None if p.timestamp < 0 => Err(ResponseError::UnsupportedVersion),
                        _ => Ok(()),
                    };
                    let result = supported
                        .and_then(|()| name.as_ref().ok_or(ResponseError::UnknownTopicOrPartition))
                        .and_then(|n| {
                            let tp = TopicPartition::new(n.clone(), p.partition_index);
                            let partition = rm.partition(&tp).map_err(|e| e.response_error())?;
                            let epoch = p.current_leader_epoch;
                            let found = match p.timestamp {
                                MAX_TIMESTAMP => {
                                    partition.offset_for(p.timestamp, true, epoch, reader)
                                }
                                // No tiered storage: the local log start is the log start.
                                EARLIEST_LOCAL_TIMESTAMP => {
                                    partition.offset_for(-2, false, epoch, reader)
                                }
                                // No tiered storage: nothing is tiered (after the leader check).
                                LATEST_TIERED_TIMESTAMP => partition
                                    .offset_for(-1, false, epoch, reader)
                                    .map(|_| (-1, -1, Some(-1))),
                                t => partition.offset_for(t, false, epoch, reader),
                            };
                            found.map_err(|e| e.response_error())
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
