//! Partition reassignment (Kafka 2.8's `KafkaController.onPartitionReassignment`, KIP-455),
//! pure: it changes the [`ControllerContext`] and returns [`Effect`]s.
//!
//! With ORS the original replicas, TRS the target and RS the replica set the assignment znode
//! holds, a reassignment goes:
//!
//! - U: RS = TRS followed by ORS (distinct), `adding_replicas` = TRS - ORS and
//!   `removing_replicas` = ORS - TRS, written to `/brokers/topics/<t>` (the only place ORS
//!   is kept, so a new controller resumes from it). Replacing a reassignment stops the
//!   replicas the new RS no longer names.
//! - A (TRS not all in the ISR): the leader epoch moves on and every replica of RS gets a
//!   LeaderAndIsr with RS (the added ones as new): they create their logs and catch up as
//!   ordinary followers, and the leader adds them to the ISR (AlterPartition).
//! - B (TRS all in the ISR, checked after every accepted AlterPartition): the leader moves
//!   into TRS if it is not there or not online (new leader epoch; otherwise the epoch moves
//!   on with the same leader), the removed replicas leave the ISR and are stopped and
//!   deleted (StopReplica with delete), RS = TRS is written, the partition leaves
//!   `/admin/reassign_partitions` and every broker gets the new metadata.
//!
//! Cancelling (no target) reassigns to ORS. A target on a broker that is down waits: the
//! partition stays in phase A (and in ListPartitionReassignments) until the broker registers,
//! which resumes it. Refusals are Kafka's: an unknown partition or a topic being deleted
//! UNKNOWN_TOPIC_OR_PARTITION; an empty list, a repeated or negative broker id, or a broker
//! the cluster does not know INVALID_REPLICA_ASSIGNMENT; cancelling a partition that is not
//! being reassigned NO_REASSIGNMENT_IN_PROGRESS.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    BrokerId as WireBrokerId, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::{error, info, warn};

use model::{BrokerId, TopicName, TopicPartition};

use crate::context::{
    ControllerContext, LeaderIsrAndControllerEpoch, PartitionAndReplica, Reassigning, NO_LEADER,
};
use crate::effect::Effect;
use crate::partition_state_machine::{self as psm, PartitionState};
use crate::replica_state_machine::{self as rsm, ReplicaState};
use crate::topic_deletion;

/// A partition's full replica assignment (Kafka's `ReplicaAssignment`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaAssignment {
    /// RS: every replica, the target's first.
    pub replicas: Vec<BrokerId>,
    /// Replicas the reassignment adds.
    pub adding: Vec<BrokerId>,
    /// Replicas the reassignment removes.
    pub removing: Vec<BrokerId>,
    /// ORS in its order, when known (see [`ReplicaAssignment::origin`]).
    pub original: Vec<BrokerId>,
}

impl ReplicaAssignment {
    /// What the context holds for `tp`.
    pub fn of(ctx: &ControllerContext, tp: &TopicPartition) -> Self {
        let reassigning = ctx.reassignments.get(tp).cloned().unwrap_or_default();
        ReplicaAssignment {
            replicas: ctx.replicas(tp).to_vec(),
            adding: reassigning.adding,
            removing: reassigning.removing,
            original: reassigning.origin,
        }
    }

    /// Whether a reassignment is in progress.
    pub fn is_being_reassigned(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// TRS: the replicas once the reassignment is done.
    pub fn target(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|b| !self.removing.contains(b))
            .collect()
    }

    /// ORS: the replicas before the reassignment, in their order. Kafka derives them as RS
    /// minus the added replicas, which keeps the set but takes the target's order (a move of
    /// [0, 1, 2] to [1, 2, 3] has RS [1, 2, 3, 0] and ORS [1, 2, 0]: a cancel would make 1
    /// the preferred leader). Gregor keeps the list as it was (`original_replicas` in the
    /// assignment znode) and falls back to Kafka's derivation only when that list is
    /// missing or does not match the set.
    pub fn origin(&self) -> Vec<BrokerId> {
        let derived: Vec<BrokerId> = self
            .replicas
            .iter()
            .copied()
            .filter(|b| !self.adding.contains(b))
            .collect();
        let same_set = self.original.len() == derived.len()
            && self.original.iter().all(|b| derived.contains(b));
        if same_set {
            self.original.clone()
        } else {
            derived
        }
    }

    /// The assignment while moving from this one's original replicas to `target`.
    pub fn reassign_to(&self, target: &[BrokerId]) -> Self {
        let origin = self.origin();
        let mut replicas = Vec::with_capacity(target.len() + origin.len());
        for &b in target.iter().chain(&origin) {
            if !replicas.contains(&b) {
                replicas.push(b);
            }
        }
        let adding: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|b| !origin.contains(b))
            .collect();
        let removing: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|b| !target.contains(b))
            .collect();
        let moving = !adding.is_empty() || !removing.is_empty();
        ReplicaAssignment {
            replicas,
            adding,
            removing,
            original: if moving { origin } else { Vec::new() },
        }
    }

    fn settled(replicas: Vec<BrokerId>) -> Self {
        ReplicaAssignment {
            replicas,
            ..ReplicaAssignment::default()
        }
    }
}

/// A refusal: Kafka's code and a message a person can act on.
pub type Refusal = (ResponseError, String);

/// Whether `target` is a replica list a reassignment may move `tp` to.
pub fn validate_target(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    target: &[BrokerId],
) -> Result<(), Refusal> {
    let distinct: BTreeSet<BrokerId> = target.iter().copied().collect();
    if target.is_empty() {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "Empty replica list specified in partition reassignment.".to_owned(),
        ));
    }
    if distinct.len() != target.len() {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!("Duplicate replica ids in partition reassignment replica list: {target:?}"),
        ));
    }
    if target.iter().any(|&b| b < 0) {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!("Invalid broker id in replica list: {target:?}"),
        ));
    }
    let adding = ReplicaAssignment::of(ctx, tp).reassign_to(target).adding;
    let unknown: Vec<_> = adding
        .iter()
        .copied()
        .filter(|b| !ctx.is_live(*b) && !ctx.known_brokers.contains(b))
        .collect();
    if !unknown.is_empty() {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!(
                "Replica assignment has brokers the cluster does not know: {unknown:?} (live brokers: {:?}). \
                 A broker that is down but known may be a target; the reassignment waits for it.",
                ctx.live_broker_ids()
            ),
        ));
    }
    Ok(())
}

fn unknown_partition(ctx: &ControllerContext, tp: &TopicPartition) -> Option<Refusal> {
    if ctx.is_topic_queued_for_deletion(&tp.topic) {
        info!(%tp, "refusing to reassign a partition of a topic being deleted");
        return Some((
            ResponseError::UnknownTopicOrPartition,
            "The partition does not exist (its topic is being deleted).".to_owned(),
        ));
    }
    if ctx.replicas(tp).is_empty() {
        return Some((
            ResponseError::UnknownTopicOrPartition,
            "The partition does not exist.".to_owned(),
        ));
    }
    None
}

/// Validates one requested change (`None`: cancel) and starts it. `Ok` carries the effects.
pub fn request(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    target: Option<&[BrokerId]>,
) -> Result<Vec<Effect>, Refusal> {
    if let Some(refusal) = unknown_partition(ctx, tp) {
        return Err(refusal);
    }
    if let Some(target) = target {
        validate_target(ctx, tp, target)?;
    }
    let current = ReplicaAssignment::of(ctx, tp);
    let new = match target {
        Some(target) => current.reassign_to(target),
        None if current.is_being_reassigned() => {
            info!(%tp, origin = ?current.origin(), "cancelling the reassignment: back to the original replicas");
            current.reassign_to(&current.origin())
        }
        None => {
            return Err((
                ResponseError::NoReassignmentInProgress,
                format!("No reassignment of partition {tp} is in progress."),
            ))
        }
    };
    info!(%tp, replicas = ?new.replicas, adding = ?new.adding, removing = ?new.removing, "reassignment requested");
    Ok(on_partition_reassignment(ctx, tp, new))
}

/// Kafka's `onPartitionReassignment`: phase U, then A or B (see the module docs).
pub fn on_partition_reassignment(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    reassignment: ReplicaAssignment,
) -> Vec<Effect> {
    if ctx.is_topic_queued_for_deletion(&tp.topic) {
        // Deletion waits until the reassignment ends.
        ctx.topics_ineligible_for_deletion.insert(tp.topic.clone());
    }
    let mut effects = update_current(ctx, tp, &reassignment);
    if !is_complete(ctx, tp, &reassignment) {
        effects.extend(bump_leader_epoch(ctx, tp, &reassignment));
        let starting: Vec<_> = reassignment
            .adding
            .iter()
            .map(|&replica| PartitionAndReplica {
                tp: tp.clone(),
                replica,
            })
            .filter(|r| ctx.replica_state(r) == ReplicaState::NonExistent)
            .collect();
        effects.extend(rsm::handle_state_changes(ctx, &starting, ReplicaState::New));
        return effects;
    }
    effects.extend(complete(ctx, tp, &reassignment));
    effects
}

/// Phase U: write the new assignment (when it differs) and stop the replicas the previous
/// one was adding that the new one does not name.
fn update_current(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    reassignment: &ReplicaAssignment,
) -> Vec<Effect> {
    let current = ReplicaAssignment::of(ctx, tp);
    if &current == reassignment {
        return Vec::new();
    }
    set_assignment(ctx, tp, reassignment);
    let mut effects = vec![Effect::WriteTopicAssignment(tp.topic.clone())];
    let unneeded: Vec<_> = current
        .replicas
        .iter()
        .copied()
        .filter(|b| !reassignment.replicas.contains(b))
        .collect();
    if !unneeded.is_empty() {
        info!(%tp, replicas = ?unneeded, "stopping replicas the replaced reassignment was adding");
        effects.extend(stop_removed_replicas(ctx, tp, &unneeded));
    }
    effects
}

fn set_assignment(ctx: &mut ControllerContext, tp: &TopicPartition, a: &ReplicaAssignment) {
    if let Some(partitions) = ctx.assignments.get_mut(&tp.topic) {
        partitions.insert(tp.partition, a.replicas.clone());
    }
    ctx.known_brokers.extend(a.replicas.iter().copied());
    ctx.set_reassigning(
        tp,
        Some(Reassigning {
            adding: a.adding.clone(),
            removing: a.removing.clone(),
            origin: if a.is_being_reassigned() {
                a.origin()
            } else {
                Vec::new()
            },
        }),
    );
}

/// Kafka's `isReassignmentComplete`: nothing to move, or every target replica in the ISR.
fn is_complete(ctx: &ControllerContext, tp: &TopicPartition, a: &ReplicaAssignment) -> bool {
    if !a.is_being_reassigned() {
        return true;
    }
    ctx.leadership
        .get(tp)
        .is_some_and(|l| a.target().iter().all(|b| l.isr.contains(b)))
}

/// Phase B. Waits (returns nothing) when no target replica can lead: the leader must move
/// into TRS first, and removing the old replicas would leave the partition without one.
fn complete(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    reassignment: &ReplicaAssignment,
) -> Vec<Effect> {
    let target = reassignment.target();
    let Some(current) = ctx.leadership.get(tp).cloned() else {
        return Vec::new();
    };
    let leader_stays = target.contains(&current.leader) && ctx.is_replica_online(current.leader);
    let new_leader = if leader_stays {
        current.leader
    } else {
        match target
            .iter()
            .copied()
            .find(|&b| ctx.is_replica_online(b) && current.isr.contains(&b))
        {
            Some(b) => b,
            None => {
                warn!(%tp, ?target, isr = ?current.isr,
                    "reassignment caught up but no target replica is online to lead; it waits for one");
                return Vec::new();
            }
        }
    };
    info!(%tp, ?target, "target replicas are all in the ISR: completing the reassignment");
    // B1: the added replicas are online.
    let added: Vec<_> = reassignment
        .adding
        .iter()
        .map(|&replica| PartitionAndReplica {
            tp: tp.clone(),
            replica,
        })
        .collect();
    // An added replica already in the ISR (the kept last member of a leaderless partition)
    // skipped phase A: it becomes New first, so that it has a state to leave later.
    let unstarted: Vec<_> = added
        .iter()
        .filter(|r| ctx.replica_state(r) == ReplicaState::NonExistent)
        .cloned()
        .collect();
    let mut effects = rsm::handle_state_changes(ctx, &unstarted, ReplicaState::New);
    effects.extend(rsm::handle_state_changes(ctx, &added, ReplicaState::Online));
    // B2: RS = TRS in memory.
    set_assignment(ctx, tp, &ReplicaAssignment::settled(target.clone()));
    // B3: the leader moves into TRS (or keeps its place with a new epoch); RS = TRS goes to
    // the target replicas so the leader stops counting the removed ones.
    let state = LeaderIsrAndControllerEpoch {
        leader: new_leader,
        leader_epoch: current.leader_epoch + 1,
        isr: current.isr.clone(),
        controller_epoch: ctx.epoch,
        zk_version: current.zk_version + 1,
        leader_recovery_state: current.leader_recovery_state,
    };
    if !leader_stays {
        info!(target: "state_change", controller_epoch = ctx.epoch, %tp, from = current.leader,
            to = new_leader, leader_epoch = state.leader_epoch, "moving the leader into the reassignment's target");
    }
    ctx.leadership.insert(tp.clone(), state.clone());
    ctx.partition_states
        .insert(tp.clone(), PartitionState::Online);
    effects.push(Effect::UpdatePartitionState {
        tp: tp.clone(),
        state,
        expected_zk_version: current.zk_version,
    });
    effects.push(Effect::LeaderAndIsr {
        brokers: target.clone(),
        tp: tp.clone(),
        is_new: false,
    });
    // B4, B5: the removed replicas leave the ISR, stop and are deleted.
    effects.extend(stop_removed_replicas(ctx, tp, &reassignment.removing));
    // B6: RS = TRS in the store.
    effects.push(Effect::WriteTopicAssignment(tp.topic.clone()));
    // B7: out of /admin/reassign_partitions when it asked for this.
    effects.push(Effect::RemoveFromZkReassignment {
        tp: tp.clone(),
        replicas: Some(target),
    });
    // B8: every broker learns the new replicas and ISR.
    effects.push(Effect::UpdateMetadata {
        brokers: ctx.live_broker_ids(),
        partitions: vec![tp.clone()],
    });
    info!(%tp, replicas = ?ctx.replicas(tp), "reassignment completed");
    if ctx.is_topic_queued_for_deletion(&tp.topic)
        && !ctx.topics_being_reassigned.contains(&tp.topic)
    {
        effects.extend(topic_deletion::resume_deletion_for_topics(
            ctx,
            &BTreeSet::from([tp.topic.clone()]),
        ));
    }
    effects
}

/// Kafka's `updateLeaderEpochAndSendRequest`: same leader and ISR, the next leader epoch,
/// and LeaderAndIsr with the assignment to RS (the added replicas as new).
fn bump_leader_epoch(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    a: &ReplicaAssignment,
) -> Vec<Effect> {
    if ctx.is_topic_queued_for_deletion(&tp.topic) {
        // Kafka's updateLeaderEpoch refuses partitions being deleted.
        error!(target: "state_change", %tp, "not sending the reassignment's LeaderAndIsr: the topic is being deleted");
        return Vec::new();
    }
    let Some(current) = ctx.leadership.get(tp).cloned() else {
        warn!(%tp, "the partition has no leader yet; its new replicas start when it gets one");
        return Vec::new();
    };
    let state = LeaderIsrAndControllerEpoch {
        leader_epoch: current.leader_epoch + 1,
        controller_epoch: ctx.epoch,
        zk_version: current.zk_version + 1,
        ..current.clone()
    };
    info!(target: "state_change", controller_epoch = ctx.epoch, %tp, leader = state.leader,
        leader_epoch = state.leader_epoch, replicas = ?a.replicas, adding = ?a.adding,
        removing = ?a.removing, "sending LeaderAndIsr with the reassignment's replicas");
    ctx.leadership.insert(tp.clone(), state.clone());
    vec![
        Effect::UpdatePartitionState {
            tp: tp.clone(),
            state,
            expected_zk_version: current.zk_version,
        },
        Effect::LeaderAndIsr {
            brokers: a.origin(),
            tp: tp.clone(),
            is_new: false,
        },
        Effect::LeaderAndIsr {
            brokers: a.adding.clone(),
            tp: tp.clone(),
            is_new: true,
        },
        Effect::UpdateMetadata {
            brokers: ctx.live_broker_ids(),
            partitions: vec![tp.clone()],
        },
    ]
}

/// Kafka's `stopRemovedReplicasOfReassignedPartition`: Offline (out of the ISR, StopReplica),
/// then deletion started (StopReplica with delete) and done, without waiting for the
/// response. A partition left without a leader (a removed replica led it) elects one.
fn stop_removed_replicas(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    removed: &[BrokerId],
) -> Vec<Effect> {
    let replicas: Vec<_> = removed
        .iter()
        .map(|&replica| PartitionAndReplica {
            tp: tp.clone(),
            replica,
        })
        .collect();
    let mut effects = rsm::handle_state_changes(ctx, &replicas, ReplicaState::Offline);
    for state in [
        ReplicaState::ReplicaDeletionStarted,
        ReplicaState::ReplicaDeletionSuccessful,
        ReplicaState::NonExistent,
    ] {
        effects.extend(rsm::handle_state_changes(ctx, &replicas, state));
    }
    if ctx
        .leadership
        .get(tp)
        .is_some_and(|l| l.leader == NO_LEADER)
        && !ctx.is_topic_queued_for_deletion(&tp.topic)
    {
        effects.extend(psm::handle_state_changes(
            ctx,
            std::slice::from_ref(tp),
            PartitionState::Online,
        ));
    }
    effects
}

/// After accepted ISR changes: completes the reassignments among `partitions` whose target
/// replicas are all in the ISR now (Kafka's `maybeCompleteReassignment`).
pub fn maybe_complete(ctx: &mut ControllerContext, partitions: &[TopicPartition]) -> Vec<Effect> {
    let mut effects = Vec::new();
    for tp in partitions {
        if !ctx.reassignments.contains_key(tp) {
            continue;
        }
        let a = ReplicaAssignment::of(ctx, tp);
        if is_complete(ctx, tp, &a) {
            effects.extend(on_partition_reassignment(ctx, tp, a));
        }
    }
    effects
}

/// Brokers registered: reassignments whose target names one of them go on.
pub fn on_broker_startup(ctx: &mut ControllerContext, brokers: &BTreeSet<BrokerId>) -> Vec<Effect> {
    let resume: Vec<_> = ctx
        .reassignments
        .keys()
        .filter(|tp| {
            ReplicaAssignment::of(ctx, tp)
                .target()
                .iter()
                .any(|b| brokers.contains(b))
        })
        .cloned()
        .collect();
    resume_partitions(ctx, &resume)
}

/// After a failover: every reassignment the assignment znodes record goes on, except those
/// in `skip` (just replaced through `/admin/reassign_partitions`).
pub fn resume_all(ctx: &mut ControllerContext, skip: &BTreeSet<TopicPartition>) -> Vec<Effect> {
    let resume: Vec<_> = ctx
        .reassignments
        .keys()
        .filter(|tp| !skip.contains(*tp))
        .cloned()
        .collect();
    if !resume.is_empty() {
        info!(
            partitions = resume.len(),
            "resuming the reassignments in progress"
        );
    }
    resume_partitions(ctx, &resume)
}

fn resume_partitions(ctx: &mut ControllerContext, partitions: &[TopicPartition]) -> Vec<Effect> {
    let mut effects = Vec::new();
    for tp in partitions {
        let a = ReplicaAssignment::of(ctx, tp);
        effects.extend(on_partition_reassignment(ctx, tp, a));
    }
    effects
}

/// What `/admin/reassign_partitions` asked, as the event loop read it.
#[derive(Debug, Default)]
pub struct ZkOutcome {
    /// Store writes and control requests.
    pub effects: Vec<Effect>,
    /// The partitions whose reassignment started (or completed at once).
    pub started: BTreeSet<TopicPartition>,
}

/// Kafka's `processZkPartitionReassignment`: starts each entry; an entry that cannot start
/// (unknown partition, bad replica list) is logged and removed from the znode.
pub fn on_zk_reassignment(
    ctx: &mut ControllerContext,
    entries: &[(String, i32, Vec<BrokerId>)],
) -> ZkOutcome {
    let mut outcome = ZkOutcome::default();
    for (topic, partition, replicas) in entries {
        let Ok(topic) = topic.parse::<TopicName>() else {
            warn!(%topic, partition, "the reassignment znode names an illegal topic; ignoring the entry");
            continue;
        };
        let tp = TopicPartition::new(topic, *partition);
        match request(ctx, &tp, Some(replicas)) {
            Ok(effects) => {
                outcome.effects.extend(effects);
                outcome.started.insert(tp);
            }
            Err((error, message)) => {
                warn!(%tp, ?replicas, ?error, %message,
                    "reassignment from the reassignment znode refused; removing it from the znode");
                outcome
                    .effects
                    .push(Effect::RemoveFromZkReassignment { tp, replicas: None });
            }
        }
    }
    outcome
}

/// One partition's outcome in an [`AlterPlan`].
type PartitionResult = (i32, Result<(), Refusal>);

/// What [`alter`] decided, answered by [`alter_response`] once the effects ran.
#[derive(Debug)]
pub struct AlterPlan {
    results: Vec<(String, Vec<PartitionResult>)>,
    /// Store writes and control requests for the event loop.
    pub effects: Vec<Effect>,
}

/// AlterPartitionReassignments: each partition validated and started (or cancelled) in
/// request order; the latest request wins over `/admin/reassign_partitions`, as in Kafka.
pub fn alter(ctx: &mut ControllerContext, req: &AlterPartitionReassignmentsRequest) -> AlterPlan {
    let mut results = Vec::with_capacity(req.topics.len());
    let mut effects = Vec::new();
    for topic in &req.topics {
        let name = topic.name.0.to_string();
        let parsed: Option<TopicName> = name.parse().ok();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let result = match &parsed {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist.".to_owned(),
                )),
                Some(t) => {
                    let tp = TopicPartition::new(t.clone(), p.partition_index);
                    let target: Option<Vec<BrokerId>> =
                        p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    match request(ctx, &tp, target.as_deref()) {
                        Ok(e) => {
                            effects.push(Effect::RemoveFromZkReassignment {
                                tp: tp.clone(),
                                replicas: None,
                            });
                            effects.extend(e);
                            Ok(())
                        }
                        Err(refusal) => {
                            info!(%tp, error = ?refusal.0, message = %refusal.1, "AlterPartitionReassignments refused");
                            Err(refusal)
                        }
                    }
                }
            };
            partitions.push((p.partition_index, result));
        }
        results.push((name, partitions));
    }
    AlterPlan { results, effects }
}

/// The response once the effects ran: partitions of topics whose assignment could not be
/// written get UNKNOWN_SERVER_ERROR.
pub fn alter_response(
    plan: AlterPlan,
    failed_topics: &BTreeSet<TopicName>,
) -> AlterPartitionReassignmentsResponse {
    let responses = plan
        .results
        .into_iter()
        .map(|(name, partitions)| {
            let failed = failed_topics.iter().any(|t| t.as_str() == name);
            let partitions = partitions
                .into_iter()
                .map(|(index, result)| {
                    let result = match result {
                        Ok(()) if failed => Err((
                            ResponseError::UnknownServerError,
                            "The topic's assignment could not be written; see the controller's log."
                                .to_owned(),
                        )),
                        other => other,
                    };
                    let (code, message) = match result {
                        Ok(()) => (0, None),
                        Err((error, message)) => {
                            (error.code(), Some(StrBytes::from_string(message)))
                        }
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                        .with_error_message(message)
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(WireTopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default().with_responses(responses)
}

/// A response refusing the whole request.
pub fn alter_refused(error: ResponseError, message: &str) -> AlterPartitionReassignmentsResponse {
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
}

/// ListPartitionReassignments: the named partitions (or all) that are being reassigned, each
/// with its replicas, adding and removing replicas. Partitions not being reassigned (or
/// unknown) are left out, as Kafka does.
pub fn list(
    ctx: &ControllerContext,
    req: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let partitions: Vec<TopicPartition> = match &req.topics {
        None => ctx.reassignments.keys().cloned().collect(),
        Some(topics) => topics
            .iter()
            .filter_map(|t| t.name.0.parse::<TopicName>().ok().map(|n| (n, t)))
            .flat_map(|(n, t)| {
                t.partition_indexes
                    .iter()
                    .map(move |&p| TopicPartition::new(n.clone(), p))
            })
            .collect(),
    };
    let mut by_topic: BTreeMap<TopicName, BTreeMap<i32, OngoingPartitionReassignment>> =
        BTreeMap::new();
    for tp in partitions {
        let a = ReplicaAssignment::of(ctx, &tp);
        if !a.is_being_reassigned() {
            continue;
        }
        let wire = |ids: &[BrokerId]| ids.iter().map(|&b| WireBrokerId(b)).collect::<Vec<_>>();
        by_topic.entry(tp.topic.clone()).or_default().insert(
            tp.partition,
            OngoingPartitionReassignment::default()
                .with_partition_index(tp.partition)
                .with_replicas(wire(&a.replicas))
                .with_adding_replicas(wire(&a.adding))
                .with_removing_replicas(wire(&a.removing)),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(WireTopicName(StrBytes::from_string(
                    topic.as_str().to_owned(),
                )))
                .with_partitions(partitions.into_values().collect())
        })
        .collect();
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}

/// A response refusing the whole request.
pub fn list_refused(error: ResponseError) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default().with_error_code(error.code())
}

/// A hand edit of `/brokers/topics/<t>` that changed the replicas of existing partitions
/// (Kafka 2.4+ no longer moves replicas this way): the partitions whose znode replicas,
/// adding or removing replicas differ from the context's, with what the znode says.
pub fn hand_edits(
    ctx: &ControllerContext,
    topic: &TopicName,
    znode: &znodes::json::TopicAssignment,
) -> Vec<(i32, Vec<BrokerId>)> {
    let Some(known) = ctx.assignments.get(topic) else {
        return Vec::new();
    };
    known
        .iter()
        .filter_map(|(&p, replicas)| {
            let tp = TopicPartition::new(topic.clone(), p);
            let theirs = znode.partitions.get(&p)?;
            let r = ctx.reassignments.get(&tp).cloned().unwrap_or_default();
            let adding = znode.adding_replicas.get(&p).cloned().unwrap_or_default();
            let removing = znode.removing_replicas.get(&p).cloned().unwrap_or_default();
            (theirs != replicas || adding != r.adding || removing != r.removing)
                .then(|| (p, theirs.clone()))
        })
        .collect()
}

/// The assignment znode of `topic` as the context has it (for writes).
pub fn topic_znode(
    ctx: &ControllerContext,
    topic: &TopicName,
) -> Option<znodes::json::TopicAssignment> {
    let partitions = ctx.assignments.get(topic)?.clone();
    let topic_id = ctx.topic_ids.get(topic).copied();
    let mut adding = BTreeMap::new();
    let mut removing = BTreeMap::new();
    let mut original = BTreeMap::new();
    for (tp, r) in ctx.reassignments.range(
        TopicPartition::new(topic.clone(), i32::MIN)..=TopicPartition::new(topic.clone(), i32::MAX),
    ) {
        if !r.adding.is_empty() {
            adding.insert(tp.partition, r.adding.clone());
        }
        if !r.removing.is_empty() {
            removing.insert(tp.partition, r.removing.clone());
        }
        if !r.origin.is_empty() {
            original.insert(tp.partition, r.origin.clone());
        }
    }
    Some(znodes::json::TopicAssignment {
        version: if topic_id.is_some() { 3 } else { 2 },
        topic_id,
        partitions,
        adding_replicas: adding,
        removing_replicas: removing,
        original_replicas: original,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle;
    use crate::test_support::{broker, ctx_with, name, tp};

    /// Topic `t`, one partition on {0,1,2}, brokers 0-3 live, online.
    fn moving_ctx() -> ControllerContext {
        let mut ctx = ctx_with(&[0, 1, 2, 3], &[("t", &[&[0, 1, 2]])]);
        lifecycle::on_new_partition_creation(&mut ctx, &[tp("t", 0)]);
        ctx
    }

    fn stops(effects: &[Effect]) -> Vec<(BrokerId, bool)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::StopReplica { broker, delete, .. } => Some((*broker, *delete)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reassign_to_lists_the_target_first_then_the_original_replicas() {
        let a = ReplicaAssignment::settled(vec![0, 1, 2]).reassign_to(&[1, 2, 3]);
        assert_eq!(a.replicas, vec![1, 2, 3, 0]);
        assert_eq!(a.adding, vec![3]);
        assert_eq!(a.removing, vec![0]);
        assert_eq!(a.target(), vec![1, 2, 3]);
        assert_eq!(a.origin(), vec![0, 1, 2], "in their order");
        // Without the list (a znode Kafka wrote), the set as Kafka derives it.
        let kafkas = ReplicaAssignment {
            original: Vec::new(),
            ..a.clone()
        };
        assert_eq!(kafkas.origin(), vec![1, 2, 0]);
        // Replacing it: the original replicas stay the original ones.
        let b = a.reassign_to(&[2, 1, 0]);
        assert_eq!(b.replicas, vec![2, 1, 0]);
        assert!(!b.is_being_reassigned());
    }

    #[test]
    fn a_move_adds_the_new_replica_then_completes_when_it_is_in_the_isr() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        let effects = request(&mut ctx, &p, Some(&[1, 2, 3])).unwrap();
        assert!(effects.contains(&Effect::WriteTopicAssignment(name("t"))));
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![3],
            tp: p.clone(),
            is_new: true
        }));
        assert!(effects.iter().any(|e| matches!(e,
            Effect::UpdatePartitionState { state, expected_zk_version: 0, .. }
                if state.leader == 0 && state.leader_epoch == 1 && state.isr == vec![0, 1, 2])));
        assert!(
            stops(&effects).is_empty(),
            "nothing is removed before the catch-up"
        );
        assert_eq!(ctx.replicas(&p), &[1, 2, 3, 0]);
        assert!(ctx.topics_being_reassigned.contains(&name("t")));
        let znode = topic_znode(&ctx, &name("t")).unwrap();
        assert_eq!(znode.adding_replicas[&0], vec![3]);
        assert_eq!(znode.removing_replicas[&0], vec![0]);
        assert_eq!(znode.original_replicas[&0], vec![0, 1, 2]);

        // Not caught up yet: nothing happens.
        assert!(maybe_complete(&mut ctx, std::slice::from_ref(&p)).is_empty());
        // The leader added 3 to the ISR (AlterPartition accepted).
        ctx.leadership.get_mut(&p).unwrap().isr = vec![0, 1, 2, 3];
        let effects = maybe_complete(&mut ctx, std::slice::from_ref(&p));
        let l = &ctx.leadership[&p];
        assert_eq!(l.leader, 1, "the leader moved into the target");
        assert_eq!(l.isr, vec![1, 2, 3], "the removed replica left the ISR");
        assert_eq!(l.leader_epoch, 3, "moved, then shrunk");
        assert_eq!(ctx.replicas(&p), &[1, 2, 3]);
        assert!(ctx.reassignments.is_empty());
        assert!(!ctx.topics_being_reassigned.contains(&name("t")));
        assert!(stops(&effects).contains(&(0, true)), "{effects:?}");
        assert!(effects.contains(&Effect::WriteTopicAssignment(name("t"))));
        assert!(effects.contains(&Effect::RemoveFromZkReassignment {
            tp: p.clone(),
            replicas: Some(vec![1, 2, 3])
        }));
        assert_eq!(
            ctx.replica_state(&PartitionAndReplica {
                tp: p.clone(),
                replica: 0
            }),
            ReplicaState::NonExistent
        );
        let znode = topic_znode(&ctx, &name("t")).unwrap();
        assert!(znode.adding_replicas.is_empty() && znode.removing_replicas.is_empty());
    }

    #[test]
    fn a_leader_in_the_target_keeps_leading_with_a_new_epoch() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        request(&mut ctx, &p, Some(&[0, 1, 3])).unwrap();
        ctx.leadership.get_mut(&p).unwrap().isr = vec![0, 1, 2, 3];
        let effects = maybe_complete(&mut ctx, std::slice::from_ref(&p));
        assert_eq!(ctx.leadership[&p].leader, 0);
        assert_eq!(ctx.leadership[&p].isr, vec![0, 1, 3]);
        assert!(stops(&effects).contains(&(2, true)));
    }

    #[test]
    fn cancelling_goes_back_to_the_original_replicas_and_deletes_the_added_one() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        request(&mut ctx, &p, Some(&[1, 2, 3])).unwrap();
        let effects = request(&mut ctx, &p, None).unwrap();
        assert_eq!(
            ctx.replicas(&p),
            &[0, 1, 2],
            "the original list, in its order (Kafka's would be [1, 2, 0])"
        );
        let znode = topic_znode(&ctx, &name("t")).unwrap();
        assert_eq!(znode.partitions[&0], vec![0, 1, 2]);
        assert!(znode.original_replicas.is_empty(), "{znode:?}");
        assert!(ctx.reassignments.is_empty());
        assert!(stops(&effects).contains(&(3, true)), "{effects:?}");
        assert_eq!(ctx.leadership[&p].leader, 0);
        let err = request(&mut ctx, &p, None).unwrap_err();
        assert_eq!(err.0, ResponseError::NoReassignmentInProgress);
    }

    #[test]
    fn bad_targets_get_kafkas_codes_and_change_nothing() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        let before = ctx.clone();
        for (target, needle) in [
            (vec![], "Empty replica list"),
            (vec![1, 1, 2], "Duplicate replica ids"),
            (vec![1, -2, 3], "Invalid broker id"),
            (vec![1, 2, 99], "does not know: [99]"),
        ] {
            let (error, message) = request(&mut ctx, &p, Some(&target)).unwrap_err();
            assert_eq!(error, ResponseError::InvalidReplicaAssignment, "{target:?}");
            assert!(message.contains(needle), "{message}");
        }
        let (error, _) = request(&mut ctx, &tp("t", 7), Some(&[1])).unwrap_err();
        assert_eq!(error, ResponseError::UnknownTopicOrPartition);
        let (error, _) = request(&mut ctx, &tp("nope", 0), None).unwrap_err();
        assert_eq!(error, ResponseError::UnknownTopicOrPartition);
        assert_eq!(ctx.assignments, before.assignments);
        assert_eq!(ctx.leadership, before.leadership);
        assert!(ctx.reassignments.is_empty());
    }

    #[test]
    fn a_target_on_a_known_broker_that_is_down_waits_for_it() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        ctx.known_brokers.insert(3);
        ctx.live_brokers.remove(&3);
        request(&mut ctx, &p, Some(&[1, 2, 3])).unwrap();
        assert!(ctx.reassignments.contains_key(&p), "waiting");
        let listed = list(&ctx, &ListPartitionReassignmentsRequest::default());
        assert_eq!(
            listed.topics[0].partitions[0].adding_replicas,
            vec![WireBrokerId(3)]
        );
        ctx.live_brokers.insert(3, broker(3));
        let effects = on_broker_startup(&mut ctx, &BTreeSet::from([3]));
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![3],
            tp: p.clone(),
            is_new: true
        }));
        // Unrelated brokers do not resume it.
        assert!(on_broker_startup(&mut ctx, &BTreeSet::from([0])).is_empty());
    }

    #[test]
    fn deletion_waits_for_the_reassignment_and_resumes_when_it_ends() {
        let mut ctx = moving_ctx();
        let p = tp("t", 0);
        request(&mut ctx, &p, Some(&[1, 2, 3])).unwrap();
        let effects = topic_deletion::enqueue_topics(&mut ctx, &BTreeSet::from([name("t")]));
        assert!(stops(&effects).is_empty(), "deletion waits: {effects:?}");
        // A new reassignment of a topic being deleted is refused.
        assert_eq!(
            request(&mut ctx, &p, Some(&[0, 1, 2])).unwrap_err().0,
            ResponseError::UnknownTopicOrPartition
        );
        ctx.leadership.get_mut(&p).unwrap().isr = vec![0, 1, 2, 3];
        let effects = maybe_complete(&mut ctx, std::slice::from_ref(&p));
        assert!(
            effects.iter().any(|e| matches!(
                e,
                Effect::StopReplica {
                    broker: 1,
                    delete: true,
                    ..
                }
            )),
            "the deletion started: {effects:?}"
        );
    }

    #[test]
    fn zk_entries_that_cannot_start_are_removed_from_the_znode() {
        let mut ctx = moving_ctx();
        let outcome = on_zk_reassignment(
            &mut ctx,
            &[
                ("t".to_owned(), 0, vec![1, 2, 3]),
                ("t".to_owned(), 5, vec![1]),
                ("t".to_owned(), 0, vec![]),
            ],
        );
        assert_eq!(outcome.started, BTreeSet::from([tp("t", 0)]));
        assert!(outcome.effects.contains(&Effect::RemoveFromZkReassignment {
            tp: tp("t", 5),
            replicas: None
        }));
        assert_eq!(ctx.replicas(&tp("t", 0)), &[1, 2, 3, 0]);
    }

    #[test]
    fn hand_edits_of_existing_partitions_are_found() {
        let ctx = moving_ctx();
        let mut znode = topic_znode(&ctx, &name("t")).unwrap();
        assert!(hand_edits(&ctx, &name("t"), &znode).is_empty());
        znode.partitions.insert(0, vec![3, 2, 1]);
        znode.partitions.insert(1, vec![3]);
        assert_eq!(
            hand_edits(&ctx, &name("t"), &znode),
            vec![(0, vec![3, 2, 1])]
        );
    }

    /// Seeded random histories: reassignments requested (valid or not), cancelled and
    /// replaced, targets catching up, brokers dying and returning. After every step: replica
    /// sets are distinct, adding/removing are disjoint parts of RS, leader and ISR are in RS,
    /// a refused request changed nothing, and no StopReplica(delete) ever names a replica the
    /// partition still has. At the end (every broker back, every target caught up) nothing is
    /// being moved and each partition has the last target asked for (or, cancelled, its
    /// original replicas), except a partition stranded as Kafka strands it: its only in-sync
    /// replica was moved away while leaderless (few runs have one). A failing run prints its
    /// seed; `REASSIGN_SEED=<n>` runs that seed alone.
    #[test]
    fn random_reassignment_histories_keep_invariants_and_finish() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};

        const BROKERS: i32 = 6;
        let mut stranded_partitions = 0;
        for seed in std::env::var("REASSIGN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(0..60u64, |s: u64| s..s + 1)
        {
            let result = std::panic::catch_unwind(|| {
                let mut rng = StdRng::seed_from_u64(seed);
                let ids: Vec<i32> = (0..BROKERS).collect();
                let mut ctx = ctx_with(
                    &ids,
                    &[("t", &[&[0, 1, 2], &[1, 2, 3], &[2, 3, 4], &[3, 4, 5]])],
                );
                ctx.known_brokers.extend(ids.iter().copied());
                let partitions = ctx.partitions_for_topic(&name("t"));
                lifecycle::on_new_partition_creation(&mut ctx, &partitions);
                let mut expected: BTreeMap<TopicPartition, BTreeSet<BrokerId>> = partitions
                    .iter()
                    .map(|tp| (tp.clone(), ctx.replicas(tp).iter().copied().collect()))
                    .collect();
                for _ in 0..200 {
                    let tp = partitions[rng.random_range(0..partitions.len())].clone();
                    let effects = match rng.random_range(0..10) {
                        0..=3 => {
                            let len = rng.random_range(0..=4);
                            let target: Vec<i32> = (0..len)
                                .map(|_| rng.random_range(-1..BROKERS + 1))
                                .collect();
                            let before = (ReplicaAssignment::of(&ctx, &tp), ctx.leadership.clone());
                            match request(&mut ctx, &tp, Some(&target)) {
                                Ok(e) => {
                                    expected.insert(tp.clone(), target.iter().copied().collect());
                                    e
                                }
                                Err(_) => {
                                    assert_eq!(
                                        (ReplicaAssignment::of(&ctx, &tp), ctx.leadership.clone()),
                                        before,
                                        "a refused request changed nothing"
                                    );
                                    Vec::new()
                                }
                            }
                        }
                        4 => {
                            let origin = ReplicaAssignment::of(&ctx, &tp).origin();
                            match request(&mut ctx, &tp, None) {
                                Ok(e) => {
                                    expected.insert(tp.clone(), origin.into_iter().collect());
                                    e
                                }
                                Err((error, _)) => {
                                    assert_eq!(error, ResponseError::NoReassignmentInProgress);
                                    Vec::new()
                                }
                            }
                        }
                        5..=7 => catch_up_one(&mut ctx, &tp, &mut rng),
                        8 if ctx.live_brokers.len() > 3 => {
                            let live = ctx.live_broker_ids();
                            let dead = live[rng.random_range(0..live.len())];
                            ctx.live_brokers.remove(&dead);
                            lifecycle::on_broker_failure(&mut ctx, &BTreeSet::from([dead]))
                        }
                        _ => {
                            let down: Vec<i32> =
                                ids.iter().copied().filter(|b| !ctx.is_live(*b)).collect();
                            if down.is_empty() {
                                Vec::new()
                            } else {
                                let back = down[rng.random_range(0..down.len())];
                                ctx.live_brokers.insert(back, broker(back));
                                let new = BTreeSet::from([back]);
                                let mut e = lifecycle::on_broker_startup(&mut ctx, &new);
                                e.extend(on_broker_startup(&mut ctx, &new));
                                e
                            }
                        }
                    };
                    check(&ctx, &effects);
                }
                // Settle: every broker back, every target replica catches up.
                for &b in &ids {
                    if !ctx.is_live(b) {
                        ctx.live_brokers.insert(b, broker(b));
                        let new = BTreeSet::from([b]);
                        let mut e = lifecycle::on_broker_startup(&mut ctx, &new);
                        e.extend(on_broker_startup(&mut ctx, &new));
                        check(&ctx, &e);
                    }
                }
                for _ in 0..50 {
                    let moving: Vec<_> = ctx.reassignments.keys().cloned().collect();
                    if moving.is_empty() {
                        break;
                    }
                    for tp in moving {
                        let e = catch_up_one(&mut ctx, &tp, &mut rng);
                        check(&ctx, &e);
                    }
                }
                // Leaderless only where its last in-sync replica was moved away while it was
                // the only one (see `check`): such a partition cannot elect cleanly, so a
                // later reassignment of it cannot catch up either (as in Kafka 2.8).
                let stranded = |tp: &TopicPartition| {
                    let l = &ctx.leadership[tp];
                    l.leader == NO_LEADER && l.isr.iter().all(|b| !ctx.replicas(tp).contains(b))
                };
                for tp in ctx.reassignments.keys() {
                    assert!(stranded(tp), "{tp} still moving: {:?}", ctx.reassignments);
                }
                for tp in partitions.iter().filter(|tp| !stranded(tp)) {
                    let now: BTreeSet<BrokerId> = ctx.replicas(tp).iter().copied().collect();
                    assert_eq!(now, expected[tp], "{tp}");
                    assert_ne!(ctx.leadership[tp].leader, NO_LEADER, "{tp} has a leader");
                }
                partitions.iter().filter(|tp| stranded(tp)).count()
            });
            match result {
                Ok(n) => stranded_partitions += n,
                Err(panic) => {
                    eprintln!("reassignment simulation failed with seed {seed}");
                    std::panic::resume_unwind(panic);
                }
            }
        }
        // Stranding needs an unlucky history (every in-sync replica but a removed one dead).
        eprintln!("stranded partitions over 60 runs: {stranded_partitions} of 240");
        assert!(
            stranded_partitions <= 24,
            "{stranded_partitions} partitions stranded"
        );
    }

    /// One live target replica of `tp` that is not in the ISR joins it (an accepted
    /// AlterPartition from a live leader), then the reassignment may complete.
    fn catch_up_one(
        ctx: &mut ControllerContext,
        tp: &TopicPartition,
        rng: &mut rand::rngs::StdRng,
    ) -> Vec<Effect> {
        use rand::Rng;
        let a = ReplicaAssignment::of(ctx, tp);
        let Some(l) = ctx.leadership.get(tp).cloned() else {
            return Vec::new();
        };
        if !ctx.is_replica_online(l.leader) {
            return Vec::new();
        }
        let lagging: Vec<i32> = a
            .target()
            .into_iter()
            .filter(|b| ctx.is_replica_online(*b) && !l.isr.contains(b))
            .collect();
        if !lagging.is_empty() {
            let joining = lagging[rng.random_range(0..lagging.len())];
            let state = ctx.leadership.get_mut(tp).unwrap();
            state.isr.push(joining);
            state.zk_version += 1;
        }
        maybe_complete(ctx, std::slice::from_ref(tp))
    }

    fn check(ctx: &ControllerContext, effects: &[Effect]) {
        for (topic, partitions) in &ctx.assignments {
            for (&p, rs) in partitions {
                let tp = TopicPartition::new(topic.clone(), p);
                let distinct: BTreeSet<_> = rs.iter().collect();
                assert_eq!(distinct.len(), rs.len(), "{tp}: {rs:?}");
                assert!(!rs.is_empty(), "{tp} has replicas");
                if let Some(r) = ctx.reassignments.get(&tp) {
                    assert!(
                        r.adding.iter().all(|b| rs.contains(b)),
                        "{tp}: {r:?} {rs:?}"
                    );
                    assert!(
                        r.removing.iter().all(|b| rs.contains(b)),
                        "{tp}: {r:?} {rs:?}"
                    );
                    assert!(
                        r.adding.iter().all(|b| !r.removing.contains(b)),
                        "{tp}: {r:?}"
                    );
                    assert!(r.removing.len() < rs.len(), "{tp}: a target is left");
                    assert!(ctx.topics_being_reassigned.contains(topic));
                }
                if let Some(l) = ctx.leadership.get(&tp) {
                    assert!(
                        l.leader == NO_LEADER || rs.contains(&l.leader),
                        "{tp}: {l:?} {rs:?}"
                    );
                    // Kafka's removeReplicasFromIsr keeps the last ISR member, so a
                    // leaderless partition may name a removed replica there (Kafka 2.8 too).
                    let kept_last = l.leader == NO_LEADER && l.isr.len() == 1;
                    assert!(
                        kept_last || l.isr.iter().all(|b| rs.contains(b)),
                        "{tp}: {l:?} {rs:?}"
                    );
                }
            }
        }
        for e in effects {
            if let Effect::StopReplica {
                broker,
                tp,
                delete: true,
            } = e
            {
                assert!(
                    !ctx.replicas(tp).contains(broker),
                    "deleting a replica {tp} still has on {broker}: {:?}",
                    ctx.replicas(tp)
                );
            }
        }
    }
}
