//! StopReplica: stop being a replica of a partition and close its log (fsynced unless it is
//! being deleted); with `delete_partition`, hand its directory to the LogManager for the
//! rename-then-remove deletion. The partitions of one request are one job on the blocking
//! pool, so deleting 10,000 logs never holds an async worker.
//!
//! From v3 each partition carries the controller's leader epoch (KIP-570): one older than the
//! epoch this broker's replica has is FENCED_LEADER_EPOCH and stops nothing; -1 (no epoch)
//! and -2 (the topic is being deleted) always stop, as Kafka 3.9's `ReplicaManager`. v4 adds
//! `is_kraft_controller`, refused (see [`super::refuse_kraft_controller`]).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{RequestHeader, StopReplicaRequest, StopReplicaResponse, TopicName};
use model::TopicPartition;
use tracing::{debug, info, warn};

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
    if let Err(code) = super::refuse_kraft_controller("StopReplica", request.is_k_raft_controller) {
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
    // v0 lists partitions flat, v1-v2 group them by topic, v3+ carry the leader epoch and
    // delete per partition (older versions: no epoch, -1).
    let mut work: Vec<(String, i32, bool, i32)> = Vec::new();
    for p in &request.ungrouped_partitions {
        work.push((
            p.topic_name.0.to_string(),
            p.partition_index,
            request.delete_partitions,
            NO_EPOCH,
        ));
    }
    for t in &request.topics {
        for &p in &t.partition_indexes {
            work.push((t.name.0.to_string(), p, request.delete_partitions, NO_EPOCH));
        }
    }
    for t in &request.topic_states {
        for p in &t.partition_states {
            work.push((
                t.topic_name.0.to_string(),
                p.partition_index,
                p.delete_partition,
                p.leader_epoch,
            ));
        }
    }
    // Closing (fsync) and renaming logs is disk work: off the async workers; one control
    // request at a time changes replicas (see BrokerContext).
    let _state_change = ctx.replica_state_change.lock().await;
    let started = std::time::Instant::now();
    let rm = ctx.replica_manager.clone();
    let log_manager = ctx.log_manager.clone();
    let stopped = crate::blocking::run(move || {
        work.into_iter()
            .map(|(topic, partition, delete, leader_epoch)| {
                let result = stop(&rm, &log_manager, &topic, partition, delete, leader_epoch);
                (topic, partition, delete, result)
            })
            .collect::<Vec<_>>()
    })
    .await;
    let requested = stopped.len();
    let (mut stopped_count, mut deleted_count, mut failed) = (0usize, 0usize, 0usize);
    let partition_errors: Vec<_> = stopped
        .into_iter()
        .map(|(topic, partition, delete, result)| {
            let (stopped, result) = result;
            if let Some(tp) = &stopped {
                if ctx.replicas().remove(tp).is_some() {
                    debug!(target: "state_change", %tp, delete, "stopped replica");
                    stopped_count += 1;
                    deleted_count += usize::from(delete && result.is_ok());
                }
            }
            failed += usize::from(result.is_err());
            let code = result.err().map_or(0, |e| e.code());
            StopReplicaPartitionError::default()
                .with_topic_name(TopicName(topic.into()))
                .with_partition_index(partition)
                .with_error_code(code)
        })
        .collect();
    info!(target: "state_change", partitions = requested, stopped = stopped_count,
        deleted = deleted_count, failed, elapsed_ms = started.elapsed().as_millis() as u64,
        "StopReplica applied");
    StopReplicaResponse::default().with_partition_errors(partition_errors)
}

/// A StopReplica partition without a leader epoch (versions below 3, or the controller knows
/// none): never fenced.
const NO_EPOCH: i32 = -1;
/// The leader epoch the controller sends for a topic being deleted: never fenced.
const EPOCH_DURING_DELETE: i32 = -2;

/// Closes the partition's log and, with `delete`, renames its directory for removal.
/// Returns the partition when it was stopped (even if its deletion then failed).
fn stop(
    rm: &replication::ReplicaManager,
    log_manager: &storage::LogManager,
    topic: &str,
    partition: i32,
    delete: bool,
    leader_epoch: i32,
) -> (Option<TopicPartition>, Result<(), ResponseError>) {
    let Ok(name) = topic.parse::<model::TopicName>() else {
        return (None, Err(ResponseError::InvalidTopicException));
    };
    let tp = TopicPartition::new(name, partition);
    if let Some(hosted) = rm.get(&tp) {
        let current = hosted.leader_epoch();
        if leader_epoch != NO_EPOCH && leader_epoch != EPOCH_DURING_DELETE && leader_epoch < current
        {
            warn!(%tp, delete, leader_epoch, current,
                "ignoring StopReplica: its leader epoch is older than the replica's");
            return (None, Err(ResponseError::FencedLeaderEpoch));
        }
    }
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
