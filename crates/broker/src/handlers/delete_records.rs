//! DeleteRecords (v0–v2): move the log start offset of partitions this broker leads
//! (offset -1 means the high watermark). Segments wholly below it are removed; the answer's
//! low watermark is the new log start offset. An offset past the high watermark is
//! OFFSET_OUT_OF_RANGE, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use model::TopicPartition;
use tracing::info;

use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    // DELETE on each topic, as Kafka's handleDeleteRecordsRequest.
    let denied = super::denied_topics(
        ctx,
        rctx,
        security::acl::Operation::Delete,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    // Removing segments is disk work: off the async workers.
    let rm = ctx.replica_manager.clone();
    crate::blocking::run(move || delete_records(&rm, request, &denied)).await
}

fn delete_records(
    rm: &replication::ReplicaManager,
    request: DeleteRecordsRequest,
    denied: &std::collections::HashSet<String>,
) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let refused = denied.contains(topic.name.0.as_str());
            let name: Option<model::TopicName> = topic.name.0.parse().ok();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let result = (!refused)
                        .then_some(())
                        .ok_or(ResponseError::TopicAuthorizationFailed)
                        .and_then(|()| name.as_ref().ok_or(ResponseError::UnknownTopicOrPartition))
                        .and_then(|n| {
                            let tp = TopicPartition::new(n.clone(), p.partition_index);
                            let start = rm
                                .partition(&tp)
                                .and_then(|partition| partition.delete_records_before(p.offset))
                                .map_err(|e| e.response_error())?;
                            info!(%tp, log_start_offset = start, "deleted records");
                            // Followers' sessions learn the new log start.
                            rm.notify_changed(&tp);
                            Ok(start)
                        });
                    match result {
                        Ok(start) => out.low_watermark = start,
                        Err(error) => out.error_code = error.code(),
                    }
                    out
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
