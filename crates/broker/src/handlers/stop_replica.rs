//! StopReplica: stop being a replica of a partition and close its log (fsynced unless it is
//! being deleted); with `delete_partition`, hand its directory to the LogManager for the
//! rename-then-remove deletion. The partitions of one request are one job on the blocking
//! pool, so deleting 10,000 logs never holds an async worker.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{RequestHeader, StopReplicaRequest, StopReplicaResponse, TopicName};
use model::TopicPartition;
use tracing::{info, warn};

use crate::auth::{control_plane, RequestContext};
use crate::context::BrokerContext;

pub(super) async fn handle(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: StopReplicaRequest,
) -> StopReplicaResponse {
    if let Err(code) = control_plane::check(
        ctx,
        rctx,
        header,
        "StopReplica",
        request.controller_id.0,
        request.controller_epoch,
    )
    .await
    {
        return StopReplicaResponse::default().with_error_code(code.code());
    }
    if ctx.is_broker_epoch_stale(request.broker_epoch) {
        warn!(
            request_epoch = request.broker_epoch,
            "StopReplica addressed to an older registration of this broker"
        );
        return StopReplicaResponse::default()
            .with_error_code(ResponseError::StaleBrokerEpoch.code());
    }
    if !ctx.accept_controller_epoch(request.controller_epoch).await {
        warn!(
            controller = request.controller_id.0,
            epoch = request.controller_epoch,
            "StopReplica from a stale controller"
        );
        return StopReplicaResponse::default()
            .with_error_code(ResponseError::StaleControllerEpoch.code());
    }
    // v0 lists partitions flat, v1-v2 group them by topic, v3 carries delete per partition.
    let mut work: Vec<(String, i32, bool)> = Vec::new();
    for p in &request.ungrouped_partitions {
        work.push((
            p.topic_name.0.to_string(),
            p.partition_index,
            request.delete_partitions,
        ));
    }
    for t in &request.topics {
        for &p in &t.partition_indexes {
            work.push((t.name.0.to_string(), p, request.delete_partitions));
        }
    }
    for t in &request.topic_states {
        for p in &t.partition_states {
            work.push((
                t.topic_name.0.to_string(),
                p.partition_index,
                p.delete_partition,
            ));
        }
    }
    // Closing (fsync) and renaming logs is disk work: off the async workers; one control
    // request at a time changes replicas (see BrokerContext).
    let _state_change = ctx.replica_state_change.lock().await;
    let rm = ctx.replica_manager.clone();
    let log_manager = ctx.log_manager.clone();
    let stopped = crate::blocking::run(move || {
        work.into_iter()
            .map(|(topic, partition, delete)| {
                let result = stop(&rm, &log_manager, &topic, partition, delete);
                (topic, partition, delete, result)
            })
            .collect::<Vec<_>>()
    })
    .await;
    let partition_errors = stopped
        .into_iter()
        .map(|(topic, partition, delete, result)| {
            let (stopped, result) = result;
            if let Some(tp) = &stopped {
                if ctx.replicas().remove(tp).is_some() {
                    info!(target: "state_change", %tp, delete, "stopped replica");
                }
            }
            let code = result.err().map_or(0, |e| e.code());
            StopReplicaPartitionError::default()
                .with_topic_name(TopicName(topic.into()))
                .with_partition_index(partition)
                .with_error_code(code)
        })
        .collect();
    StopReplicaResponse::default().with_partition_errors(partition_errors)
}

/// Closes the partition's log and, with `delete`, renames its directory for removal.
/// Returns the partition when it was stopped (even if its deletion then failed).
fn stop(
    rm: &replication::ReplicaManager,
    log_manager: &storage::LogManager,
    topic: &str,
    partition: i32,
    delete: bool,
) -> (Option<TopicPartition>, Result<(), ResponseError>) {
    let Ok(name) = topic.parse::<model::TopicName>() else {
        return (None, Err(ResponseError::InvalidTopicException));
    };
    let tp = TopicPartition::new(name, partition);
    rm.stop_replica(&tp, delete);
    let deleted = if delete {
        log_manager.delete_partition(&tp).map(drop).map_err(|err| {
            warn!(%tp, error = %err, "cannot delete partition log");
            ResponseError::KafkaStorageError
        })
    } else {
        Ok(())
    };
    (Some(tp), deleted)
}
