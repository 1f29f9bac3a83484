//! Replica leader elections asked for by an operator or by the controller itself (Kafka's
//! `processReplicaLeaderElection` / `onReplicaElection` and
//! `checkAndTriggerAutoLeaderRebalance`), pure: each plan changes the context and returns
//! the effects and the per-partition answers decided without a write; the event loop writes
//! and answers the elected partitions from what each write did.
//!
//! Three triggers: ElectLeaders (API 43, `PREFERRED` or `UNCLEAN`), the legacy
//! `/admin/preferred_replica_election` znode, and the periodic leader-imbalance check
//! (`auto.leader.rebalance.enable`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName as WireName};
use kafka_protocol::protocol::StrBytes;
use tracing::{info, warn};

use model::{BrokerId, TopicName, TopicPartition};

use crate::context::{ControllerContext, NO_LEADER};
use crate::effect::Effect;
use crate::partition_state_machine::{self as psm, ElectionStrategy, PartitionState};

/// Kafka's `ElectionType` (the wire byte of ElectLeaders v1+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first assigned replica leads, where it is alive and in the ISR.
    Preferred,
    /// A partition without a live leader elects one, out of sync if need be.
    Unclean,
}

impl ElectionType {
    /// From the wire byte (0 PREFERRED, 1 UNCLEAN); `None` for anything else.
    pub fn from_wire(value: i8) -> Option<ElectionType> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }

    /// Kafka's name of it.
    pub fn name(self) -> &'static str {
        match self {
            ElectionType::Preferred => "PREFERRED",
            ElectionType::Unclean => "UNCLEAN",
        }
    }
}

/// Who asked for an election (Kafka's `ElectionTrigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// ElectLeaders.
    AdminClient,
    /// `/admin/preferred_replica_election`.
    Zk,
    /// The periodic leader-imbalance check.
    Auto,
}

/// One partition's answer: the leader elected, or an error code and message.
pub type Outcome = Result<BrokerId, (ResponseError, String)>;

/// The controller's answer to ElectLeaders: the response, and the leader of every partition
/// it elected, so the receiving broker can wait until its metadata cache shows them (Kafka's
/// `DelayedElectLeader`).
#[derive(Debug, Default)]
pub struct ElectLeadersAnswer {
    /// The response.
    pub response: ElectLeadersResponse,
    /// (topic, partition) -> the leader elected.
    pub elected: BTreeMap<(String, i32), BrokerId>,
}

/// What [`plan`] decided.
#[derive(Debug, Default)]
pub struct Plan {
    /// The writes and control requests of the elections.
    pub effects: Vec<Effect>,
    /// The partitions being elected: their answer depends on their write.
    pub electing: BTreeSet<TopicPartition>,
    /// The partitions answered without a write.
    pub decided: BTreeMap<TopicPartition, Outcome>,
}

/// Plans the elections of `election_type` for `partitions` (Kafka's rules): unknown
/// partitions are `UNKNOWN_TOPIC_OR_PARTITION`, those of topics being deleted
/// `INVALID_TOPIC_EXCEPTION`, those whose leader is already the preferred replica
/// (PREFERRED) or alive (UNCLEAN) `ELECTION_NOT_NEEDED`; the others elect, and those no
/// replica may lead get `PREFERRED_LEADER_NOT_AVAILABLE` (PREFERRED) or
/// `ELIGIBLE_LEADERS_NOT_AVAILABLE` (UNCLEAN). Only ElectLeaders may elect uncleanly.
pub fn plan(
    ctx: &mut ControllerContext,
    partitions: &BTreeSet<TopicPartition>,
    election_type: ElectionType,
    trigger: Trigger,
) -> Plan {
    let mut plan = Plan::default();
    let mut electable = Vec::new();
    for tp in partitions {
        if ctx.replicas(tp).is_empty() {
            info!(%tp, election = election_type.name(), ?trigger, "skipping replica leader election: the partition does not exist");
            plan.decided.insert(
                tp.clone(),
                Err((
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist.".to_owned(),
                )),
            );
            continue;
        }
        if ctx.is_topic_queued_for_deletion(&tp.topic) {
            warn!(%tp, election = election_type.name(), ?trigger, "skipping replica leader election: the topic is being deleted");
            plan.decided.insert(
                tp.clone(),
                Err((
                    ResponseError::InvalidTopicException,
                    "The topic is being deleted".to_owned(),
                )),
            );
            continue;
        }
        let leader = ctx.leadership.get(tp).map_or(NO_LEADER, |l| l.leader);
        let needed = match election_type {
            ElectionType::Preferred => ctx.replicas(tp).first() != Some(&leader),
            ElectionType::Unclean => leader == NO_LEADER || !ctx.is_live(leader),
        };
        if needed {
            electable.push(tp.clone());
        } else {
            plan.decided.insert(
                tp.clone(),
                Err((
                    ResponseError::ElectionNotNeeded,
                    "Leader election not needed for topic partition.".to_owned(),
                )),
            );
        }
    }
    if electable.is_empty() {
        return plan;
    }
    info!(
        election = election_type.name(),
        ?trigger,
        partitions = electable.len(),
        "starting replica leader election"
    );
    let strategy = match election_type {
        ElectionType::Preferred => ElectionStrategy::Preferred,
        ElectionType::Unclean if trigger == Trigger::AdminClient => {
            ElectionStrategy::OfflineAllowUnclean
        }
        ElectionType::Unclean => ElectionStrategy::Offline,
    };
    let effects = psm::handle_state_changes_with(ctx, &electable, PartitionState::Online, strategy);
    let written: BTreeSet<TopicPartition> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::UpdatePartitionState { tp, .. } | Effect::CreatePartitionState { tp, .. } => {
                Some(tp.clone())
            }
            _ => None,
        })
        .collect();
    for tp in electable {
        if written.contains(&tp) {
            plan.electing.insert(tp);
            continue;
        }
        let failure = not_elected(ctx, &tp, election_type);
        plan.decided.insert(tp, Err(failure));
    }
    plan.effects = effects;
    plan
}

/// Why `tp` could not be elected, in Kafka's code and words a person can act on.
fn not_elected(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    election_type: ElectionType,
) -> (ResponseError, String) {
    let replicas = ctx.replicas(tp);
    let isr = ctx
        .leadership
        .get(tp)
        .map(|l| l.isr.clone())
        .unwrap_or_default();
    match election_type {
        ElectionType::Preferred => {
            let preferred = replicas.first().copied().unwrap_or(NO_LEADER);
            let why = if !ctx.is_live(preferred) {
                "is not alive"
            } else if !ctx.is_replica_online(preferred) {
                "is shutting down"
            } else if !isr.contains(&preferred) {
                "is not in the ISR"
            } else {
                "cannot lead it now"
            };
            (
                ResponseError::PreferredLeaderNotAvailable,
                format!(
                    "Failed to elect leader for partition {tp} under strategy PreferredReplicaPartitionLeaderElectionStrategy: the preferred replica {preferred} {why} (replicas {replicas:?}, ISR {isr:?})."
                ),
            )
        }
        ElectionType::Unclean => (
            ResponseError::EligibleLeadersNotAvailable,
            format!(
                "Failed to elect leader for partition {tp} under strategy OfflinePartitionLeaderElectionStrategy(true): no replica of {replicas:?} is on a live broker."
            ),
        ),
    }
}

/// The partitions whose preferred replica should lead again, by Kafka 2.8's leader-imbalance
/// check: per preferred broker, when more than `imbalance_percentage` % of the partitions it
/// prefers are led by another broker, those of them whose preferred replica is online and in
/// the ISR. Nothing while any partition is being reassigned (Kafka waits for reassignments
/// to finish) and nothing of topics being deleted.
pub fn imbalanced_partitions(
    ctx: &ControllerContext,
    imbalance_percentage: u32,
) -> BTreeSet<TopicPartition> {
    let mut by_preferred: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
    for (topic, partitions) in &ctx.assignments {
        if ctx.is_topic_queued_for_deletion(topic) {
            continue;
        }
        for (&p, replicas) in partitions {
            if let Some(&preferred) = replicas.first() {
                by_preferred
                    .entry(preferred)
                    .or_default()
                    .push(TopicPartition::new(topic.clone(), p));
            }
        }
    }
    let mut candidates = BTreeSet::new();
    if !ctx.topics_being_reassigned.is_empty() {
        return candidates;
    }
    for (preferred, partitions) in by_preferred {
        let not_preferred: Vec<&TopicPartition> = partitions
            .iter()
            .filter(|tp| {
                ctx.leadership
                    .get(*tp)
                    .is_some_and(|l| l.leader != preferred)
            })
            .collect();
        let ratio = not_preferred.len() as f64 / partitions.len() as f64;
        if ratio <= f64::from(imbalance_percentage) / 100.0 {
            continue;
        }
        info!(
            broker = preferred,
            imbalance = format!("{ratio:.3}"),
            not_led = not_preferred.len(),
            "leader imbalance above leader.imbalance.per.broker.percentage"
        );
        candidates.extend(
            not_preferred
                .into_iter()
                .filter(|tp| {
                    ctx.is_replica_online(preferred)
                        && ctx
                            .leadership
                            .get(*tp)
                            .is_some_and(|l| l.isr.contains(&preferred))
                })
                .cloned(),
        );
    }
    candidates
}

/// The partitions an ElectLeaders request names (`None`: every partition the controller
/// knows), and whether one is named twice (answered `INVALID_REQUEST` by Kafka's client
/// before sending; a broker keeps the first).
pub fn requested_partitions(
    ctx: &ControllerContext,
    request: &ElectLeadersRequest,
) -> (BTreeSet<TopicPartition>, Vec<(String, i32)>) {
    let mut unparsable = Vec::new();
    let partitions = match &request.topic_partitions {
        None => ctx
            .assignments
            .iter()
            .flat_map(|(t, ps)| ps.keys().map(|&p| TopicPartition::new(t.clone(), p)))
            .collect(),
        Some(topics) => {
            let mut set = BTreeSet::new();
            for t in topics {
                match t.topic.0.as_str().parse::<TopicName>() {
                    Ok(name) => set.extend(
                        t.partitions
                            .iter()
                            .map(|&p| TopicPartition::new(name.clone(), p)),
                    ),
                    Err(_) => {
                        unparsable.extend(t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
                    }
                }
            }
            set
        }
    };
    (partitions, unparsable)
}

/// The ElectLeaders response for these outcomes (by topic, partitions ascending).
pub fn response(
    outcomes: &BTreeMap<(String, i32), (i16, Option<String>)>,
    top_level: Option<ResponseError>,
) -> ElectLeadersResponse {
    let mut by_topic: BTreeMap<&str, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, partition), (code, message)) in outcomes {
        by_topic.entry(topic).or_default().push(
            PartitionResult::default()
                .with_partition_id(*partition)
                .with_error_code(*code)
                .with_error_message(message.clone().map(StrBytes::from_string)),
        );
    }
    let code = top_level.map_or(0, |e| e.code());
    ElectLeadersResponse::default()
        .with_error_code(code)
        .with_replica_election_results(
            by_topic
                .into_iter()
                .map(|(topic, results)| {
                    ReplicaElectionResult::default()
                        .with_topic(WireName(StrBytes::from_string(topic.to_owned())))
                        .with_partition_result(results)
                })
                .collect(),
        )
}

/// Turns outcomes into the response's per-partition entries.
pub fn outcome_entries(
    outcomes: &BTreeMap<TopicPartition, Outcome>,
) -> BTreeMap<(String, i32), (i16, Option<String>)> {
    outcomes
        .iter()
        .map(|(tp, outcome)| {
            let entry = match outcome {
                Ok(_) => (0, None),
                Err((error, message)) => (error.code(), Some(message.clone())),
            };
            ((tp.topic.as_str().to_owned(), tp.partition), entry)
        })
        .collect()
}

/// Every named partition refused with `error` (NOT_CONTROLLER, an unknown election type...).
/// A null partition list gets an empty result list and the error at the top level (v1+).
pub fn refused(request: &ElectLeadersRequest, error: ResponseError) -> ElectLeadersResponse {
    let message = Some(error_message(error));
    let outcomes: BTreeMap<(String, i32), (i16, Option<String>)> = request
        .topic_partitions
        .iter()
        .flatten()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| ((t.topic.0.to_string(), p), (error.code(), message.clone())))
        })
        .collect();
    let top_level = request.topic_partitions.is_none().then_some(error);
    response(&outcomes, top_level)
}

fn error_message(error: ResponseError) -> String {
    match error {
        ResponseError::NotController => {
            "This broker is not the controller; send ElectLeaders to the controller.".to_owned()
        }
        ResponseError::InvalidRequest => {
            "Unknown election type: use 0 (PREFERRED) or 1 (UNCLEAN).".to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use model::LeaderRecoveryState;

    use super::*;
    use crate::context::LeaderIsrAndControllerEpoch;
    use crate::test_support::{ctx_with, tp};

    fn lead(ctx: &mut ControllerContext, p: &TopicPartition, leader: BrokerId, isr: &[BrokerId]) {
        ctx.partition_states
            .insert(p.clone(), PartitionState::Online);
        ctx.leadership.insert(
            p.clone(),
            LeaderIsrAndControllerEpoch {
                leader,
                leader_epoch: 3,
                isr: isr.to_vec(),
                controller_epoch: 1,
                zk_version: 5,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
    }

    fn code(plan: &Plan, p: &TopicPartition) -> i16 {
        match &plan.decided[p] {
            Ok(_) => 0,
            Err((e, _)) => e.code(),
        }
    }

    #[test]
    fn preferred_election_moves_leadership_to_the_first_replica_keeping_the_isr() {
        let mut ctx = ctx_with(&[0, 1, 2], &[("t", &[&[0, 1, 2], &[1, 2, 0]])]);
        let (p0, p1) = (tp("t", 0), tp("t", 1));
        lead(&mut ctx, &p0, 1, &[1, 2, 0]);
        lead(&mut ctx, &p1, 1, &[1, 2, 0]);
        let wanted: BTreeSet<_> = [p0.clone(), p1.clone(), tp("t", 7), tp("nope", 0)].into();
        let plan = plan(
            &mut ctx,
            &wanted,
            ElectionType::Preferred,
            Trigger::AdminClient,
        );
        assert_eq!(plan.electing, [p0.clone()].into());
        assert_eq!(code(&plan, &p1), ResponseError::ElectionNotNeeded.code());
        assert_eq!(code(&plan, &tp("t", 7)), 3);
        assert_eq!(code(&plan, &tp("nope", 0)), 3);
        let state = LeaderIsrAndControllerEpoch {
            leader: 0,
            leader_epoch: 4,
            isr: vec![1, 2, 0],
            controller_epoch: 1,
            zk_version: 6,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            plan.effects,
            vec![
                Effect::UpdatePartitionState {
                    tp: p0.clone(),
                    state: state.clone(),
                    expected_zk_version: 5
                },
                Effect::LeaderAndIsr {
                    brokers: vec![0, 1, 2],
                    tp: p0.clone(),
                    is_new: false
                },
                Effect::UpdateMetadata {
                    brokers: vec![0, 1, 2],
                    partitions: vec![p0.clone()]
                },
            ]
        );
        assert_eq!(ctx.leadership[&p0], state);
    }

    #[test]
    fn preferred_replica_dead_or_out_of_sync_is_not_available_and_nothing_changes() {
        let mut ctx = ctx_with(&[1, 2], &[("t", &[&[0, 1, 2], &[2, 1]])]);
        let (p0, p1) = (tp("t", 0), tp("t", 1));
        lead(&mut ctx, &p0, 1, &[1, 2]);
        lead(&mut ctx, &p1, 1, &[1]);
        let before = ctx.leadership.clone();
        let wanted: BTreeSet<_> = [p0.clone(), p1.clone()].into();
        let plan = plan(
            &mut ctx,
            &wanted,
            ElectionType::Preferred,
            Trigger::AdminClient,
        );
        assert!(plan.effects.is_empty() && plan.electing.is_empty());
        for p in [&p0, &p1] {
            assert_eq!(
                code(&plan, p),
                ResponseError::PreferredLeaderNotAvailable.code()
            );
        }
        let Err((_, message)) = &plan.decided[&p0] else {
            panic!()
        };
        assert!(
            message.contains("preferred replica 0 is not alive"),
            "{message}"
        );
        let Err((_, message)) = &plan.decided[&p1] else {
            panic!()
        };
        assert!(message.contains("is not in the ISR"), "{message}");
        assert_eq!(ctx.leadership, before);
    }

    #[test]
    fn unclean_election_elects_an_out_of_sync_replica_only_when_no_leader_is_alive() {
        let mut ctx = ctx_with(&[1, 2], &[("t", &[&[0, 1], &[1, 2], &[0, 3]])]);
        let (p0, p1, p2) = (tp("t", 0), tp("t", 1), tp("t", 2));
        // p0: leader 0 died, ISR {0}: broker 1 may lead only uncleanly.
        lead(&mut ctx, &p0, 0, &[0]);
        ctx.partition_states
            .insert(p0.clone(), PartitionState::Offline);
        lead(&mut ctx, &p1, 1, &[1, 2]);
        lead(&mut ctx, &p2, NO_LEADER, &[0]);
        ctx.partition_states
            .insert(p2.clone(), PartitionState::Offline);
        let wanted: BTreeSet<_> = [p0.clone(), p1.clone(), p2.clone()].into();
        // Not from the admin client: no unclean election without the topic config.
        let mut auto_ctx = ctx.clone();
        let refused = plan(&mut auto_ctx, &wanted, ElectionType::Unclean, Trigger::Zk);
        assert!(refused.electing.is_empty());
        let plan = plan(
            &mut ctx,
            &wanted,
            ElectionType::Unclean,
            Trigger::AdminClient,
        );
        assert_eq!(plan.electing, [p0.clone()].into());
        assert_eq!(ctx.leadership[&p0].leader, 1);
        assert_eq!(ctx.leadership[&p0].isr, vec![1]);
        assert_eq!(code(&plan, &p1), ResponseError::ElectionNotNeeded.code());
        assert_eq!(
            code(&plan, &p2),
            ResponseError::EligibleLeadersNotAvailable.code()
        );
    }

    #[test]
    fn topics_being_deleted_are_refused() {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1]])]);
        let p0 = tp("t", 0);
        lead(&mut ctx, &p0, 1, &[0, 1]);
        ctx.topics_to_be_deleted.insert(p0.topic.clone());
        let plan = plan(
            &mut ctx,
            &[p0.clone()].into(),
            ElectionType::Preferred,
            Trigger::AdminClient,
        );
        assert_eq!(
            code(&plan, &p0),
            ResponseError::InvalidTopicException.code()
        );
    }

    #[test]
    fn imbalance_check_follows_the_percentage_and_skips_unavailable_preferred_replicas() {
        // Broker 0 prefers 4 partitions; 1 of them led elsewhere = 25 %.
        let mut ctx = ctx_with(
            &[0, 1, 2],
            &[("t", &[&[0, 1], &[0, 1], &[0, 1], &[0, 1], &[2, 1], &[2, 1]])],
        );
        for p in 0..4 {
            lead(&mut ctx, &tp("t", p), 0, &[0, 1]);
        }
        lead(&mut ctx, &tp("t", 0), 1, &[0, 1]);
        // Broker 2 prefers 2 partitions, both led by 1; on p5 broker 2 is out of sync.
        lead(&mut ctx, &tp("t", 4), 1, &[1, 2]);
        lead(&mut ctx, &tp("t", 5), 1, &[1]);
        assert_eq!(
            imbalanced_partitions(&ctx, 10),
            [tp("t", 0), tp("t", 4)].into()
        );
        assert_eq!(imbalanced_partitions(&ctx, 25), [tp("t", 4)].into());
        assert!(imbalanced_partitions(&ctx, 100).is_empty());
        ctx.topics_being_reassigned.insert(tp("t", 0).topic);
        assert!(imbalanced_partitions(&ctx, 10).is_empty());
    }
}
