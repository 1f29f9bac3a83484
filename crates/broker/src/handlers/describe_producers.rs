//! DescribeProducers (v0, `kafka-transactions.sh describe-producers`): the producers with
//! data or a transaction marker in each requested partition's log, as Kafka's
//! `Partition.activeProducerState` (any replica that hosts the log answers). A topic the
//! metadata cache does not know is UNKNOWN_TOPIC_OR_PARTITION; a known partition this broker
//! does not host is NOT_LEADER_OR_FOLLOWER. The coordinator epoch is that of the producer's
//! last marker, the current transaction's start offset the first offset of the transaction
//! it has open in the partition (-1: none).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use model::{TopicName, TopicPartition};

use crate::context::BrokerContext;

pub(super) fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let snapshot = ctx.metadata_cache.snapshot();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let topic_error = match name.parse::<TopicName>() {
                // READ on the topic, as Kafka's handleDescribeProducersRequest.
                _ if !super::authorized(
                    ctx,
                    rctx,
                    security::acl::Operation::Read,
                    security::acl::ResourceType::Topic,
                    name,
                ) =>
                {
                    Some((
                        ResponseError::TopicAuthorizationFailed,
                        ResponseError::TopicAuthorizationFailed.to_string(),
                    ))
                }
                Err(err) => Some((ResponseError::InvalidTopicException, err.to_string())),
                Ok(_) if !snapshot.topics.contains_key(name) => Some((
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                )),
                Ok(_) => None,
            };
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let refuse = |error: ResponseError, message: String| {
                        PartitionResponse::default()
                            .with_partition_index(index)
                            .with_error_code(error.code())
                            .with_error_message(Some(StrBytes::from_string(message)))
                    };
                    if let Some((error, message)) = &topic_error {
                        return refuse(*error, message.clone());
                    }
                    let tp = TopicPartition::new(name.parse().expect("checked above"), index);
                    match ctx.replica_manager.get(&tp) {
                        Some(partition) => PartitionResponse::default()
                            .with_partition_index(index)
                            .with_active_producers(
                                partition
                                    .active_producers()
                                    .into_iter()
                                    .map(|p| {
                                        ProducerState::default()
                                            .with_producer_id(ProducerId(p.producer_id))
                                            .with_producer_epoch(i32::from(p.producer_epoch))
                                            .with_last_sequence(p.last_sequence)
                                            .with_last_timestamp(p.last_timestamp)
                                            .with_coordinator_epoch(p.coordinator_epoch)
                                            .with_current_txn_start_offset(
                                                p.current_txn_start_offset,
                                            )
                                    })
                                    .collect(),
                            ),
                        None if snapshot.topics[name].partitions.contains_key(&index) => refuse(
                            ResponseError::NotLeaderOrFollower,
                            format!("this broker does not host {tp}"),
                        ),
                        None => refuse(
                            ResponseError::UnknownTopicOrPartition,
                            format!("{tp} does not exist"),
                        ),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
