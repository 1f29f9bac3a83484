//! LeaderAndIsr: create the partition's directory (with `partition.metadata`) if this broker
//! has none, open its log with the topic's effective config (broker `log.*` defaults under
//! `/config/topics/<t>` overrides), and become leader or follower
//! (`replication::ReplicaManager::become_leader_or_follower`: the leader epoch goes into
//! `leader-epoch-checkpoint`, for a new partition only with its first append; a follower
//! fetches from the leader the request names). A leader
//! epoch older than the current one, or the same one without a newer partition epoch, is
//! answered STALE_CONTROLLER_EPOCH and changes nothing, as in Kafka. Answers an error per
//! partition.
//!
//! The partitions of one request are one batch on the blocking pool (`control_batch`), so a
//! request that creates 10,000 logs never holds an async worker; the topic configs are read
//! from the store first, concurrently.

use std::path::PathBuf;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leader_and_isr_request::LeaderAndIsrPartitionState;
use kafka_protocol::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_protocol::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use model::{TopicId, TopicPartition};
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::auth::{control_plane, RequestContext};
use crate::context::{BrokerContext, ReplicaRole};

pub(super) async fn handle(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: LeaderAndIsrRequest,
) -> LeaderAndIsrResponse {
    let version = header.request_api_version;
    if let Err(code) = control_plane::check(
        ctx,
        rctx,
        header,
        "LeaderAndIsr",
        request.controller_id.0,
        request.controller_epoch,
    )
    .await
    {
        return LeaderAndIsrResponse::default().with_error_code(code.code());
    }
    if let Err(code) = super::refuse_kraft_controller("LeaderAndIsr", request.is_k_raft_controller)
    {
        return LeaderAndIsrResponse::default().with_error_code(code.code());
    }
    if ctx.is_broker_epoch_stale(request.broker_epoch) {
        warn!(
            request_epoch = request.broker_epoch,
            "LeaderAndIsr addressed to an older registration of this broker"
        );
        return LeaderAndIsrResponse::default()
            .with_error_code(ResponseError::StaleBrokerEpoch.code());
    }
    if !ctx.accept_controller_epoch(request.controller_epoch).await {
        warn!(
            controller = request.controller_id.0,
            epoch = request.controller_epoch,
            "LeaderAndIsr from a stale controller"
        );
        return LeaderAndIsrResponse::default()
            .with_error_code(ResponseError::StaleControllerEpoch.code());
    }
    // Versions below 2 list partitions flat; later ones group them by topic (with ids from v5).
    let mut groups: Vec<(String, Uuid, Vec<LeaderAndIsrPartitionState>)> = Vec::new();
    for state in request.ungrouped_partition_states {
        groups.push((state.topic_name.0.to_string(), Uuid::nil(), vec![state]));
    }
    for topic in request.topic_states {
        groups.push((
            topic.topic_name.0.to_string(),
            topic.topic_id,
            topic.partition_states,
        ));
    }
    let leaders: Vec<replication::fetcher::LeaderEndpoint> = request
        .live_leaders
        .iter()
        .map(|l| replication::fetcher::LeaderEndpoint {
            broker_id: l.broker_id.0,
            addr: format!("{}:{}", l.host_name, l.port),
        })
        .collect();
    // One store read per topic, concurrently.
    let config_reads: Vec<_> = groups
        .iter()
        .map(|(topic, _, _)| async move {
            match topic.parse::<model::TopicName>() {
                Ok(name) => crate::data_plane::topic_partition_config(ctx, &name).await,
                Err(_) => replication::PartitionConfig::default(),
            }
        })
        .collect();
    let configs: Vec<Arc<replication::PartitionConfig>> = stream::iter(config_reads)
        .buffered(64)
        .map(Arc::new)
        .collect()
        .await;
    let leaders = Arc::new(leaders);
    let mut work = Vec::new();
    for ((topic, topic_id, states), config) in groups.iter().zip(&configs) {
        let topic: Arc<str> = Arc::from(topic.as_str());
        for state in states {
            work.push(Work {
                topic: Arc::clone(&topic),
                topic_id: *topic_id,
                state: state.clone(),
                config: Arc::clone(config),
            });
        }
    }
    // One control request at a time changes replicas (see BrokerContext): this is what
    // makes the partitions of concurrent batches distinct.
    let _state_change = ctx.replica_state_change.lock().await;
    let started = std::time::Instant::now();
    let mut results = apply_batch(ctx, work.clone(), &leaders).await;
    // A log of an older topic of the same name is removed if the store confirms it is stale,
    // and the partition is tried again.
    let mut retry = Vec::new();
    for (i, (item, result)) in work.iter().zip(&results).enumerate() {
        if matches!(result, Err(ResponseError::InconsistentTopicId))
            && replaced_stale_log(ctx, &item.topic, item.state.partition_index, item.topic_id).await
        {
            retry.push(i);
        }
    }
    if !retry.is_empty() {
        let again = retry.iter().map(|&i| work[i].clone()).collect();
        for (i, result) in retry
            .into_iter()
            .zip(apply_batch(ctx, again, &leaders).await)
        {
            results[i] = result;
        }
    }
    // One info line per request; the per-partition lines are at debug.
    let (mut led, mut followers, mut unchanged, mut failed) = (0usize, 0usize, 0usize, 0usize);
    for result in &results {
        match result {
            Ok(replication::Transition::BecameLeader) => led += 1,
            Ok(replication::Transition::BecameFollower) => followers += 1,
            Ok(replication::Transition::SameEpoch) => unchanged += 1,
            Err(_) => failed += 1,
        }
    }
    info!(target: "state_change", controller = request.controller_id.0,
        controller_epoch = request.controller_epoch, partitions = results.len(), leaders = led,
        followers, unchanged, failed, elapsed_ms = started.elapsed().as_millis() as u64,
        "LeaderAndIsr applied");
    let mut results = results.into_iter();
    let mut response = LeaderAndIsrResponse::default();
    for (topic, topic_id, states) in groups {
        let errors: Vec<LeaderAndIsrPartitionError> = states
            .iter()
            .map(|state| {
                let result = results
                    .next()
                    .unwrap_or(Err(ResponseError::UnknownServerError));
                LeaderAndIsrPartitionError::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_index(state.partition_index)
                    .with_error_code(result.err().map_or(0, |e| e.code()))
            })
            .collect();
        if version >= 5 {
            response.topics.push(
                LeaderAndIsrTopicError::default()
                    .with_topic_id(topic_id)
                    .with_partition_errors(errors),
            );
        } else {
            response.partition_errors.extend(errors);
        }
    }
    response
}

/// One partition of the request.
#[derive(Debug, Clone)]
struct Work {
    topic: Arc<str>,
    topic_id: Uuid,
    state: LeaderAndIsrPartitionState,
    config: Arc<replication::PartitionConfig>,
}

/// Applies `work` as one batch off the async workers; a partition whose files could not be
/// made durable at the end answers KAFKA_STORAGE_ERROR.
async fn apply_batch(
    ctx: &Arc<BrokerContext>,
    work: Vec<Work>,
    leaders: &Arc<Vec<replication::fetcher::LeaderEndpoint>>,
) -> Vec<Result<replication::Transition, ResponseError>> {
    let (batch_ctx, leaders) = (Arc::clone(ctx), Arc::clone(leaders));
    let ran = crate::control_batch::run(work, move |w| {
        apply(
            &batch_ctx, &w.topic, w.topic_id, &w.state, &w.config, &leaders,
        )
    })
    .await;
    ran.results
        .into_iter()
        .map(|result| match result {
            Ok((dir, _)) if ran.unsynced_dirs.contains(&dir) => {
                Err(ResponseError::KafkaStorageError)
            }
            Ok((_, transition)) => Ok(transition),
            Err(err) => Err(err),
        })
        .collect()
}

/// The local log of the partition belongs to an older topic of the same name (SPEC section
/// 9: it was deleted while this broker was away): removed if the store confirms it.
async fn replaced_stale_log(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    topic_id: Uuid,
) -> bool {
    let Ok(name) = topic.parse::<model::TopicName>() else {
        return false;
    };
    crate::stray_logs::remove_if_stale(ctx, &TopicPartition::new(name, partition), topic_id).await
}

fn apply(
    ctx: &BrokerContext,
    topic: &str,
    topic_id: Uuid,
    state: &LeaderAndIsrPartitionState,
    config: &replication::PartitionConfig,
    leaders: &[replication::fetcher::LeaderEndpoint],
) -> Result<(PathBuf, replication::Transition), ResponseError> {
    let name: model::TopicName = topic
        .parse()
        .map_err(|_| ResponseError::InvalidTopicException)?;
    let tp = TopicPartition::new(name, state.partition_index);
    if !state.replicas.iter().any(|r| r.0 == ctx.broker_id) {
        warn!(%tp, "LeaderAndIsr for a partition this broker does not replicate");
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let role = if state.leader.0 == ctx.broker_id {
        if state.leader_recovery_state == model::LeaderRecoveryState::Recovering.value() {
            // KIP-704, as Kafka 3.9's `Partition.makeLeader`: the leader of an unclean
            // election recovers at once; its next AlterPartition (the ISR growing when a
            // follower catches up) carries RECOVERED and clears it at the controller.
            info!(%tp, leader_epoch = state.leader_epoch,
                "the partition was marked as RECOVERING; marking it as RECOVERED");
        }
        ReplicaRole::Leader {
            leader_epoch: state.leader_epoch,
        }
    } else {
        ReplicaRole::Follower {
            leader: state.leader.0,
            leader_epoch: state.leader_epoch,
        }
    };
    let topic_id = (!topic_id.is_nil()).then(|| TopicId::from_bytes(*topic_id.as_bytes()));
    let storage::PartitionDir { dir, fresh } = ctx
        .log_manager
        .open_or_create_partition(&tp, topic_id)
        .map_err(|err| {
            warn!(%tp, error = %err, "cannot create partition log");
            match err {
                storage::StorageError::InconsistentTopicId { .. } => {
                    ResponseError::InconsistentTopicId
                }
                _ => ResponseError::KafkaStorageError,
            }
        })?;
    let leadership = replication::PartitionLeadership {
        leader: state.leader.0,
        leader_epoch: state.leader_epoch,
        isr: state.isr.iter().map(|r| r.0).collect(),
        partition_epoch: state.partition_epoch,
        replicas: state.replicas.iter().map(|r| r.0).collect(),
    };
    let endpoint = leaders
        .iter()
        .find(|l| l.broker_id == state.leader.0)
        .cloned();
    let transition = ctx
        .replica_manager
        .become_leader_or_follower_in(
            &tp,
            &dir,
            fresh,
            config.clone(),
            &leadership,
            endpoint,
            crate::data_plane::now_ms(),
        )
        .map_err(|err| {
            match &err {
                replication::ReplicationError::StaleLeaderEpoch { .. } => {
                    // Counted in the request's "LeaderAndIsr applied" line (failed).
                    debug!(%tp, error = %err, "ignoring LeaderAndIsr")
                }
                _ => warn!(%tp, error = %err, "cannot open partition log"),
            }
            err.response_error()
        })?;
    if let (Some(id), Some(partition)) = (topic_id, ctx.replica_manager.get(&tp)) {
        partition.set_topic_id(id);
    }
    if transition != replication::Transition::SameEpoch {
        ctx.replicas().insert(tp, role);
    }
    Ok((dir, transition))
}
