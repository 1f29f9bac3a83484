//! AlterPartition (API 56; `AlterIsr` v0 in Kafka 2.8): a partition leader asks the controller
//! to change its partition's ISR. Validation is pure ([`plan`]): it checks the request against
//! the context, records the accepted states in it and returns the store writes
//! (`UpdatePartitionState`, conditional on the znode version the leader named) and one
//! UpdateMetadata for every live broker. The event loop carries the effects out and
//! [`response`] answers from what happened to each write. The leader gets its partition's new
//! state back in the response and no LeaderAndIsr, as in Kafka 2.8.
//!
//! Refusals, per partition (Kafka 3.9's order): an unknown partition gets
//! UNKNOWN_TOPIC_OR_PARTITION; a leader or partition epoch newer than the controller's
//! NOT_CONTROLLER (this controller is behind); an older leader epoch FENCED_LEADER_EPOCH; a
//! request that names the current state is answered with it (an idempotent retry); an older
//! partition epoch INVALID_UPDATE_VERSION; an ISR that is empty, repeats a broker, leaves out
//! the leader or names a broker outside the assignment INVALID_REQUEST; an ISR member that is
//! not live or is in controlled shutdown INELIGIBLE_REPLICA (KIP-841; OPERATION_NOT_ATTEMPTED
//! below v2, which has no INELIGIBLE_REPLICA). Leader recovery state (KIP-704): a request
//! naming the current ISR and the current state is answered with it; RECOVERING with more
//! than one ISR member, or RECOVERING for a RECOVERED partition, is INVALID_REQUEST (Kafka
//! 3.9's checks); RECOVERED for a RECOVERING partition (the leader of an unclean election
//! reporting it recovered) is written with the ISR asked for. For the whole request: a broker
//! that is not live, or live with another broker epoch, STALE_BROKER_EPOCH; a leader recovery
//! state that is neither 0 nor 1 UNKNOWN_SERVER_ERROR, changing nothing (Kafka 3.9's
//! `LeaderRecoveryState.of` throws, and the controller answers the exception's code).
//!
//! Versions (Kafka 3.9's ZooKeeper controller): v1 adds the leader recovery state; v2 names
//! topics by id (an unknown id is UNKNOWN_TOPIC_ID for each of its partitions) and answers by
//! id; v3 lists the ISR with each member's broker epoch, of which, as Kafka's ZooKeeper
//! controller, only the broker ids are read.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_response::{
    PartitionData as PartitionResult, TopicData as TopicResult,
};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerId as WireBrokerId,
    TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use model::{BrokerId, LeaderRecoveryState, TopicName, TopicPartition};

use crate::context::{ControllerContext, LeaderIsrAndControllerEpoch};
use crate::effect::Effect;

/// Kafka's INELIGIBLE_REPLICA (KIP-841), newer than `kafka-protocol`'s error table.
pub const INELIGIBLE_REPLICA: i16 = 107;

/// What [`plan`] decided, to be completed by [`response`] once the effects ran.
#[derive(Debug)]
pub struct Plan {
    /// The requested partitions, by topic as the request named it, in request order.
    topics: Vec<(TopicKey, Vec<(i32, Decision)>)>,
    /// The request's version: the response names topics as the request did.
    api_version: i16,
    /// Store writes and the UpdateMetadata, for the event loop.
    pub effects: Vec<Effect>,
}

/// A topic as the request named it (v0-1 by name, v2+ by id) and what the controller calls it.
#[derive(Debug)]
struct TopicKey {
    name: String,
    id: uuid::Uuid,
    known: Option<TopicName>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    Refused(ResponseError),
    /// An ISR member may not be in the ISR (KIP-841): INELIGIBLE_REPLICA from v2,
    /// OPERATION_NOT_ATTEMPTED below.
    Ineligible,
    /// The partition already has the requested state: answer it.
    Current,
    /// The state was written unless the write failed; `previous` is what the context held.
    Written {
        previous: LeaderIsrAndControllerEpoch,
        written: LeaderIsrAndControllerEpoch,
        requested_partition_epoch: i32,
    },
}

/// Validates `request` against the context (which must be the active controller's) and
/// records the accepted ISRs in it. `Err` is a top-level error that refuses the whole request.
pub fn plan(
    ctx: &mut ControllerContext,
    request: &AlterPartitionRequest,
    api_version: i16,
) -> Result<Plan, ResponseError> {
    let broker = request.broker_id.0;
    match ctx.live_brokers.get(&broker) {
        Some(live) if live.epoch == request.broker_epoch => {}
        Some(live) => {
            info!(
                broker,
                request_epoch = request.broker_epoch,
                live_epoch = live.epoch,
                "refusing AlterPartition with a stale broker epoch"
            );
            return Err(ResponseError::StaleBrokerEpoch);
        }
        None => {
            info!(
                broker,
                "refusing AlterPartition from a broker that is not live"
            );
            return Err(ResponseError::StaleBrokerEpoch);
        }
    }
    if api_version >= 1 {
        if let Some(bad) = request
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| LeaderRecoveryState::from_value(p.leader_recovery_state).is_none())
        {
            info!(
                broker,
                partition = bad.partition_index,
                leader_recovery_state = bad.leader_recovery_state,
                "refusing AlterPartition: the leader recovery state is neither 0 (RECOVERED) nor 1 (RECOVERING)"
            );
            return Err(ResponseError::UnknownServerError);
        }
    }
    let by_id: BTreeMap<[u8; 16], TopicName> = if api_version >= 2 {
        ctx.topic_ids
            .iter()
            .map(|(name, id)| (*id.as_bytes(), name.clone()))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut topics = Vec::new();
    let mut effects = Vec::new();
    let mut known = Vec::new();
    let mut seen = BTreeSet::new();
    for topic in &request.topics {
        let key = if api_version >= 2 {
            TopicKey {
                name: String::new(),
                id: topic.topic_id,
                known: by_id.get(topic.topic_id.as_bytes()).cloned(),
            }
        } else {
            let name = topic.topic_name.0.to_string();
            TopicKey {
                known: name.parse().ok(),
                name,
                id: uuid::Uuid::nil(),
            }
        };
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let unknown = if api_version >= 2 {
                ResponseError::UnknownTopicId
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            let parsed = key.known.clone();
            let decision = match parsed.map(|t| TopicPartition::new(t, p.partition_index)) {
                Some(tp) if !seen.insert(tp.clone()) => {
                    Decision::Refused(ResponseError::InvalidRequest)
                }
                Some(tp) => {
                    let isr: Vec<BrokerId> = if api_version >= 3 {
                        p.new_isr_with_epochs
                            .iter()
                            .map(|b| b.broker_id.0)
                            .collect()
                    } else {
                        p.new_isr.iter().map(|b| b.0).collect()
                    };
                    // Checked above; v0 has no field and means RECOVERED.
                    let recovery = if api_version >= 1 {
                        LeaderRecoveryState::from_value(p.leader_recovery_state).unwrap_or_default()
                    } else {
                        LeaderRecoveryState::Recovered
                    };
                    let ask = Ask {
                        broker,
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        isr,
                        recovery,
                    };
                    let decision = decide(ctx, &tp, &ask);
                    if let Decision::Written {
                        written, previous, ..
                    } = &decision
                    {
                        info!(target: "state_change", %tp, broker, from = ?previous.isr,
                            to = ?written.isr, partition_epoch = written.zk_version,
                            recovery = ?written.leader_recovery_state, "AlterPartition accepted");
                        ctx.leadership.insert(tp.clone(), written.clone());
                        effects.push(Effect::UpdatePartitionState {
                            tp: tp.clone(),
                            state: written.clone(),
                            expected_zk_version: previous.zk_version,
                        });
                    } else if let Decision::Refused(error) = &decision {
                        info!(%tp, broker, ?error, "AlterPartition refused");
                    }
                    if ctx.leadership.contains_key(&tp) {
                        known.push(tp);
                    }
                    decision
                }
                None => Decision::Refused(unknown),
            };
            partitions.push((p.partition_index, decision));
        }
        topics.push((key, partitions));
    }
    // Kafka tells every live broker about every requested partition, changed or not.
    if !known.is_empty() {
        effects.push(Effect::UpdateMetadata {
            brokers: ctx.live_broker_ids(),
            partitions: known,
        });
    }
    Ok(Plan {
        topics,
        effects,
        api_version,
    })
}

/// The response once the effects ran: `failed` lists the partitions whose state write failed
/// (the event loop reloaded their state from the store into the context, when it could).
pub fn response(
    mut plan: Plan,
    ctx: &mut ControllerContext,
    failed: &BTreeSet<TopicPartition>,
) -> AlterPartitionResponse {
    let mut topics = Vec::with_capacity(plan.topics.len());
    for (key, partitions) in std::mem::take(&mut plan.topics) {
        let topic = key.known.clone();
        let results = partitions
            .into_iter()
            .map(|(partition, decision)| {
                let tp = topic
                    .as_ref()
                    .map(|t| TopicPartition::new(t.clone(), partition));
                let answer = match (decision, tp) {
                    (Decision::Refused(error), _) => Err(error.code()),
                    (Decision::Ineligible, _) if plan.api_version >= 2 => Err(INELIGIBLE_REPLICA),
                    (Decision::Ineligible, _) => Err(ResponseError::OperationNotAttempted.code()),
                    (_, None) => Err(ResponseError::UnknownTopicOrPartition.code()),
                    (Decision::Current, Some(tp)) => ctx
                        .leadership
                        .get(&tp)
                        .cloned()
                        .ok_or(ResponseError::UnknownTopicOrPartition.code()),
                    (
                        Decision::Written {
                            previous,
                            written,
                            requested_partition_epoch,
                        },
                        Some(tp),
                    ) => written_answer(
                        ctx,
                        &tp,
                        previous,
                        written,
                        requested_partition_epoch,
                        failed,
                    )
                    .map_err(|e| e.code()),
                };
                partition_result(partition, answer)
            })
            .collect();
        let result = if plan.api_version >= 2 {
            TopicResult::default().with_topic_id(key.id)
        } else {
            TopicResult::default().with_topic_name(WireTopicName(StrBytes::from_string(key.name)))
        };
        topics.push(result.with_partitions(results));
    }
    AlterPartitionResponse::default().with_topics(topics)
}

/// A response that refuses the whole request with `error`.
pub fn refused(error: ResponseError) -> AlterPartitionResponse {
    AlterPartitionResponse::default().with_error_code(error.code())
}

/// One partition's request, as [`decide`] reads it.
struct Ask {
    broker: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: Vec<BrokerId>,
    recovery: LeaderRecoveryState,
}

fn decide(ctx: &ControllerContext, tp: &TopicPartition, ask: &Ask) -> Decision {
    use Decision::Refused;
    let Some(current) = ctx.leadership.get(tp) else {
        return Refused(ResponseError::UnknownTopicOrPartition);
    };
    if ask.leader_epoch > current.leader_epoch || ask.partition_epoch > current.zk_version {
        // The leader knows a newer state than this controller: it is probably not the
        // active controller any more; the leader looks it up again.
        return Refused(ResponseError::NotController);
    }
    if ask.leader_epoch < current.leader_epoch {
        return Refused(ResponseError::FencedLeaderEpoch);
    }
    if current.leader != ask.broker {
        // One leader per epoch: another broker asking at the leader's epoch is confused.
        return Refused(ResponseError::NotLeaderOrFollower);
    }
    if ask.recovery == current.leader_recovery_state && same_members(&ask.isr, &current.isr) {
        return Decision::Current;
    }
    if ask.partition_epoch < current.zk_version {
        return Refused(ResponseError::InvalidUpdateVersion);
    }
    let replicas = ctx.replicas(tp);
    let distinct: BTreeSet<BrokerId> = ask.isr.iter().copied().collect();
    if ask.isr.is_empty()
        || distinct.len() != ask.isr.len()
        || !distinct.contains(&current.leader)
        || !distinct.iter().all(|b| replicas.contains(b))
    {
        return Refused(ResponseError::InvalidRequest);
    }
    if ask.recovery == LeaderRecoveryState::Recovering {
        // Kafka 3.9: a recovering leader's ISR is itself alone, and a recovered partition
        // never goes back to recovering (only an unclean election makes it so).
        if ask.isr.len() > 1 {
            info!(%tp, broker = ask.broker, isr = ?ask.isr,
                "refusing AlterPartition: the leader is recovering and the ISR has more than one member");
            return Refused(ResponseError::InvalidRequest);
        }
        if current.leader_recovery_state == LeaderRecoveryState::Recovered {
            info!(%tp, broker = ask.broker,
                "refusing AlterPartition: the leader recovery state cannot change from RECOVERED to RECOVERING");
            return Refused(ResponseError::InvalidRequest);
        }
    }
    // KIP-841: only registered brokers outside controlled shutdown may be in an ISR.
    if !distinct.iter().all(|&b| ctx.is_replica_online(b)) {
        return Decision::Ineligible;
    }
    Decision::Written {
        previous: current.clone(),
        written: LeaderIsrAndControllerEpoch {
            leader: current.leader,
            leader_epoch: current.leader_epoch,
            isr: ask.isr.clone(),
            controller_epoch: ctx.epoch,
            zk_version: current.zk_version + 1,
            leader_recovery_state: ask.recovery,
        },
        requested_partition_epoch: ask.partition_epoch,
    }
}

fn written_answer(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    previous: LeaderIsrAndControllerEpoch,
    written: LeaderIsrAndControllerEpoch,
    requested_partition_epoch: i32,
    failed: &BTreeSet<TopicPartition>,
) -> Result<LeaderIsrAndControllerEpoch, ResponseError> {
    if !failed.contains(tp) {
        return ctx
            .leadership
            .get(tp)
            .cloned()
            .ok_or(ResponseError::UnknownTopicOrPartition);
    }
    // The write failed. The event loop reloads the znode after a failed write; if it could
    // not (the znode is gone), the context must not keep the state that was never written.
    if ctx.leadership.get(tp) == Some(&written) {
        ctx.leadership.insert(tp.clone(), previous);
    }
    match ctx.leadership.get(tp) {
        Some(now) if now.zk_version != requested_partition_epoch => {
            Err(ResponseError::InvalidUpdateVersion)
        }
        Some(_) => Err(ResponseError::UnknownServerError),
        None => Err(ResponseError::UnknownTopicOrPartition),
    }
}

fn partition_result(
    partition: i32,
    answer: Result<LeaderIsrAndControllerEpoch, i16>,
) -> PartitionResult {
    match answer {
        Ok(state) => PartitionResult::default()
            .with_partition_index(partition)
            .with_leader_id(WireBrokerId(state.leader))
            .with_leader_epoch(state.leader_epoch)
            .with_isr(state.isr.iter().map(|&b| WireBrokerId(b)).collect())
            .with_leader_recovery_state(state.leader_recovery_state.value())
            .with_partition_epoch(state.zk_version),
        Err(error) => PartitionResult::default()
            .with_partition_index(partition)
            .with_error_code(error)
            .with_leader_id(WireBrokerId(-1))
            .with_leader_epoch(-1)
            .with_partition_epoch(-1),
    }
}

fn same_members(a: &[BrokerId], b: &[BrokerId]) -> bool {
    let a: BTreeMap<BrokerId, ()> = a.iter().map(|&x| (x, ())).collect();
    let b: BTreeMap<BrokerId, ()> = b.iter().map(|&x| (x, ())).collect();
    a == b
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::alter_partition_request::{PartitionData, TopicData};

    use super::*;
    use crate::test_support::{ctx_with, tp};

    /// Partition t-0 on brokers 0, 1, 2 (all live), led by 0 at leader epoch 3, ISR [0, 1, 2],
    /// partition epoch 7.
    fn ctx() -> ControllerContext {
        let mut ctx = ctx_with(&[0, 1, 2], &[("t", &[&[0, 1, 2]])]);
        ctx.leadership.insert(
            tp("t", 0),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 3,
                isr: vec![0, 1, 2],
                controller_epoch: 1,
                zk_version: 7,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
        ctx
    }

    /// (topic, partition, leader epoch, new ISR, partition epoch).
    type Part<'a> = (&'a str, i32, i32, &'a [BrokerId], i32);

    fn request(broker: BrokerId, epoch: i64, parts: &[Part<'_>]) -> AlterPartitionRequest {
        let mut topics: Vec<TopicData> = Vec::new();
        for &(topic, partition, leader_epoch, isr, partition_epoch) in parts {
            let data = PartitionData::default()
                .with_partition_index(partition)
                .with_leader_epoch(leader_epoch)
                .with_new_isr(isr.iter().map(|&b| WireBrokerId(b)).collect())
                .with_partition_epoch(partition_epoch);
            match topics.iter_mut().find(|t| t.topic_name.0.as_str() == topic) {
                Some(t) => t.partitions.push(data),
                None => topics.push(
                    TopicData::default()
                        .with_topic_name(WireTopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(vec![data]),
                ),
            }
        }
        AlterPartitionRequest::default()
            .with_broker_id(WireBrokerId(broker))
            .with_broker_epoch(epoch)
            .with_topics(topics)
    }

    /// Plans `req` on `ctx`, pretends the writes in `failed` failed, and returns each
    /// partition's (error, isr, partition epoch).
    fn answer(
        ctx: &mut ControllerContext,
        req: &AlterPartitionRequest,
        failed: &[TopicPartition],
    ) -> Vec<(i16, Vec<BrokerId>, i32)> {
        let plan = super::plan(ctx, req, 0).expect("not refused as a whole");
        let resp = super::response(plan, ctx, &failed.iter().cloned().collect());
        resp.topics[0]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.error_code,
                    p.isr.iter().map(|b| b.0).collect(),
                    p.partition_epoch,
                )
            })
            .collect()
    }

    #[test]
    fn a_shrink_is_written_at_the_leaders_partition_epoch_and_announced() {
        let mut ctx = ctx();
        let req = request(0, 100, &[("t", 0, 3, &[0, 1], 7)]);
        let plan = super::plan(&mut ctx, &req, 0).unwrap();
        let written = LeaderIsrAndControllerEpoch {
            leader: 0,
            leader_epoch: 3,
            isr: vec![0, 1],
            controller_epoch: 1,
            zk_version: 8,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            plan.effects,
            vec![
                Effect::UpdatePartitionState {
                    tp: tp("t", 0),
                    state: written.clone(),
                    expected_zk_version: 7
                },
                // No LeaderAndIsr for an ISR-only change.
                Effect::UpdateMetadata {
                    brokers: vec![0, 1, 2],
                    partitions: vec![tp("t", 0)]
                },
            ]
        );
        assert_eq!(ctx.leadership[&tp("t", 0)], written);
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            (
                p.error_code,
                p.leader_id.0,
                p.leader_epoch,
                p.partition_epoch
            ),
            (0, 0, 3, 8)
        );
        assert_eq!(p.isr.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn stale_or_unknown_brokers_are_refused_as_a_whole() {
        let mut ctx = ctx();
        for (broker, epoch) in [(0, 99), (5, 105)] {
            let req = request(broker, epoch, &[("t", 0, 3, &[0, 1], 7)]);
            assert_eq!(
                super::plan(&mut ctx, &req, 0).unwrap_err(),
                ResponseError::StaleBrokerEpoch
            );
        }
        assert_eq!(
            ctx.leadership[&tp("t", 0)].isr,
            vec![0, 1, 2],
            "nothing changed"
        );
    }

    #[test]
    fn each_partition_gets_kafkas_refusal() {
        use ResponseError as E;
        let cases: &[(&str, Part<'_>, E)] = &[
            (
                "unknown partition",
                ("t", 9, 3, &[0], 7),
                E::UnknownTopicOrPartition,
            ),
            (
                "unknown topic",
                ("u", 0, 3, &[0], 7),
                E::UnknownTopicOrPartition,
            ),
            (
                "older leader epoch",
                ("t", 0, 2, &[0, 1], 7),
                E::FencedLeaderEpoch,
            ),
            (
                "newer leader epoch",
                ("t", 0, 4, &[0, 1], 7),
                E::NotController,
            ),
            (
                "newer partition epoch",
                ("t", 0, 3, &[0, 1], 8),
                E::NotController,
            ),
            (
                "older partition epoch",
                ("t", 0, 3, &[0, 1], 6),
                E::InvalidUpdateVersion,
            ),
            ("empty isr", ("t", 0, 3, &[], 7), E::InvalidRequest),
            (
                "isr without the leader",
                ("t", 0, 3, &[1, 2], 7),
                E::InvalidRequest,
            ),
            (
                "isr repeats a broker",
                ("t", 0, 3, &[0, 1, 1], 7),
                E::InvalidRequest,
            ),
            (
                "isr outside the assignment",
                ("t", 0, 3, &[0, 4], 7),
                E::InvalidRequest,
            ),
        ];
        for (what, part, error) in cases {
            let mut ctx = ctx();
            let before = ctx.leadership.clone();
            let req = request(0, 100, &[*part]);
            let plan = super::plan(&mut ctx, &req, 0).unwrap();
            assert!(
                !plan
                    .effects
                    .iter()
                    .any(|e| matches!(e, Effect::UpdatePartitionState { .. })),
                "{what}: nothing written"
            );
            assert_eq!(ctx.leadership, before, "{what}: the context is unchanged");
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            assert_eq!(
                resp.topics[0].partitions[0].error_code,
                error.code(),
                "{what}"
            );
        }
    }

    #[test]
    fn isr_members_must_be_live() {
        let mut ctx = ctx();
        ctx.live_brokers.remove(&2);
        // Shrinking to live brokers is fine; expanding to a dead one is not attempted.
        let mut c = ctx.clone();
        c.leadership.get_mut(&tp("t", 0)).unwrap().isr = vec![0];
        assert_eq!(
            answer(&mut c, &request(0, 100, &[("t", 0, 3, &[0, 2], 7)]), &[]),
            vec![(ResponseError::OperationNotAttempted.code(), vec![], -1)]
        );
        assert_eq!(
            answer(&mut ctx, &request(0, 100, &[("t", 0, 3, &[0, 1], 7)]), &[]),
            vec![(0, vec![0, 1], 8)]
        );
        // A broker in controlled shutdown may not rejoin either.
        let mut c = self::ctx();
        c.leadership.get_mut(&tp("t", 0)).unwrap().isr = vec![0, 1];
        c.shutting_down_brokers.insert(2);
        assert_eq!(
            answer(&mut c, &request(0, 100, &[("t", 0, 3, &[0, 1, 2], 7)]), &[]),
            vec![(ResponseError::OperationNotAttempted.code(), vec![], -1)]
        );
    }

    #[test]
    fn a_retry_of_an_applied_change_gets_the_current_state_without_a_write() {
        let mut ctx = ctx();
        ctx.leadership.get_mut(&tp("t", 0)).unwrap().isr = vec![0, 1];
        ctx.leadership.get_mut(&tp("t", 0)).unwrap().zk_version = 8;
        // The leader's first attempt was written but its response lost: it retries at 7.
        let req = request(0, 100, &[("t", 0, 3, &[1, 0], 7)]);
        let plan = super::plan(&mut ctx, &req, 0).unwrap();
        assert!(!plan
            .effects
            .iter()
            .any(|e| matches!(e, Effect::UpdatePartitionState { .. })));
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        let p = &resp.topics[0].partitions[0];
        assert_eq!((p.error_code, p.partition_epoch), (0, 8));
    }

    #[test]
    fn a_failed_write_answers_from_the_store_state() {
        // The znode moved on under the controller (the loop reloaded version 9).
        let mut ctx = ctx();
        let req = request(0, 100, &[("t", 0, 3, &[0, 1], 7)]);
        let plan = super::plan(&mut ctx, &req, 0).unwrap();
        let mut reloaded = ctx.leadership[&tp("t", 0)].clone();
        reloaded.zk_version = 9;
        reloaded.isr = vec![0, 1, 2];
        ctx.leadership.insert(tp("t", 0), reloaded.clone());
        let resp = super::response(plan, &mut ctx, &BTreeSet::from([tp("t", 0)]));
        assert_eq!(
            resp.topics[0].partitions[0].error_code,
            ResponseError::InvalidUpdateVersion.code()
        );
        assert_eq!(ctx.leadership[&tp("t", 0)], reloaded);

        // The znode vanished (no reload): the planned state is rolled back.
        let mut ctx2 = self::ctx();
        let before = ctx2.leadership[&tp("t", 0)].clone();
        let plan = super::plan(&mut ctx2, &req, 0).unwrap();
        let resp = super::response(plan, &mut ctx2, &BTreeSet::from([tp("t", 0)]));
        assert_eq!(ctx2.leadership[&tp("t", 0)], before);
        assert_eq!(
            resp.topics[0].partitions[0].error_code,
            ResponseError::UnknownServerError.code()
        );
    }

    #[test]
    fn several_partitions_are_decided_independently() {
        let mut ctx = ctx_with(&[0, 1, 2], &[("t", &[&[0, 1, 2], &[0, 1, 2]])]);
        for p in 0..2 {
            ctx.leadership.insert(
                tp("t", p),
                LeaderIsrAndControllerEpoch {
                    leader: 0,
                    leader_epoch: 3,
                    isr: vec![0, 1, 2],
                    controller_epoch: 1,
                    zk_version: 7,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                },
            );
        }
        let req = request(0, 100, &[("t", 0, 3, &[0, 1], 7), ("t", 1, 2, &[0, 1], 7)]);
        assert_eq!(
            answer(&mut ctx, &req, &[]),
            vec![
                (0, vec![0, 1], 8),
                (ResponseError::FencedLeaderEpoch.code(), vec![], -1)
            ]
        );
    }

    /// `req` (built by name) at v2+: topics by id, and at v3 the ISR with broker epochs.
    fn by_id(
        mut req: AlterPartitionRequest,
        id: uuid::Uuid,
        version: i16,
    ) -> AlterPartitionRequest {
        use kafka_protocol::messages::alter_partition_request::BrokerState;
        for topic in &mut req.topics {
            topic.topic_name = WireTopicName::default();
            topic.topic_id = id;
            if version >= 3 {
                for p in &mut topic.partitions {
                    p.new_isr_with_epochs = std::mem::take(&mut p.new_isr)
                        .into_iter()
                        .map(|b| {
                            BrokerState::default()
                                .with_broker_id(b)
                                .with_broker_epoch(-1)
                        })
                        .collect();
                }
            }
        }
        req
    }

    #[test]
    fn v2_and_v3_name_topics_by_id_and_answer_by_id() {
        let id = uuid::Uuid::from_bytes([7; 16]);
        for version in [2, 3] {
            let mut ctx = ctx();
            ctx.topic_ids
                .insert("t".parse().unwrap(), model::TopicId::from_bytes([7; 16]));
            let req = by_id(request(0, 100, &[("t", 0, 3, &[0, 1], 7)]), id, version);
            let plan = super::plan(&mut ctx, &req, version).unwrap();
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            let topic = &resp.topics[0];
            assert_eq!(topic.topic_id, id, "v{version}");
            assert_eq!(
                topic.topic_name.0.as_str(),
                "",
                "v{version}: no name past v1"
            );
            let p = &topic.partitions[0];
            assert_eq!((p.error_code, p.partition_epoch), (0, 8), "v{version}");
            assert_eq!(p.isr.iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 1]);
            assert_eq!(ctx.leadership[&tp("t", 0)].isr, vec![0, 1], "v{version}");

            // An id the controller does not know: UNKNOWN_TOPIC_ID, nothing written.
            let mut ctx = self::ctx();
            let unknown = uuid::Uuid::from_bytes([9; 16]);
            let req = by_id(
                request(0, 100, &[("t", 0, 3, &[0, 1], 7)]),
                unknown,
                version,
            );
            let plan = super::plan(&mut ctx, &req, version).unwrap();
            assert!(plan.effects.is_empty(), "v{version}");
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            assert_eq!(resp.topics[0].topic_id, unknown);
            assert_eq!(
                resp.topics[0].partitions[0].error_code,
                ResponseError::UnknownTopicId.code(),
                "v{version}"
            );
            assert_eq!(ctx.leadership[&tp("t", 0)].isr, vec![0, 1, 2]);
        }
    }

    #[test]
    fn an_ineligible_member_is_ineligible_replica_from_v2() {
        for (version, code) in [
            (0, ResponseError::OperationNotAttempted.code()),
            (1, ResponseError::OperationNotAttempted.code()),
            (2, INELIGIBLE_REPLICA),
            (3, INELIGIBLE_REPLICA),
        ] {
            let mut ctx = ctx();
            ctx.topic_ids
                .insert("t".parse().unwrap(), model::TopicId::from_bytes([7; 16]));
            ctx.leadership.get_mut(&tp("t", 0)).unwrap().isr = vec![0];
            ctx.live_brokers.remove(&2);
            let mut req = request(0, 100, &[("t", 0, 3, &[0, 2], 7)]);
            if version >= 2 {
                req = by_id(req, uuid::Uuid::from_bytes([7; 16]), version);
            }
            let plan = super::plan(&mut ctx, &req, version).unwrap();
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            assert_eq!(resp.topics[0].partitions[0].error_code, code, "v{version}");
            assert_eq!(ctx.leadership[&tp("t", 0)].isr, vec![0], "v{version}");
        }
    }

    const RECOVERING: i8 = 1;

    #[test]
    fn recovering_is_refused_from_a_recovered_partition() {
        // Kafka refuses RECOVERING with more than one member, and RECOVERED -> RECOVERING,
        // even for the current ISR.
        for isr in [&[0, 1][..], &[0], &[0, 1, 2]] {
            let mut ctx = ctx();
            let mut req = request(0, 100, &[("t", 0, 3, isr, 7)]);
            req.topics[0].partitions[0].leader_recovery_state = RECOVERING;
            let plan = super::plan(&mut ctx, &req, 1).unwrap();
            assert!(plan
                .effects
                .iter()
                .all(|e| !matches!(e, Effect::UpdatePartitionState { .. })));
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            assert_eq!(
                resp.topics[0].partitions[0].error_code,
                ResponseError::InvalidRequest.code(),
                "{isr:?}"
            );
            assert_eq!(ctx.leadership[&tp("t", 0)].isr, vec![0, 1, 2]);
            assert_eq!(
                ctx.leadership[&tp("t", 0)].leader_recovery_state,
                LeaderRecoveryState::Recovered
            );
        }
    }

    /// t-0 after an unclean election: leader 0 at leader epoch 3, ISR [0], RECOVERING.
    fn recovering_ctx() -> ControllerContext {
        let mut ctx = ctx();
        let state = ctx.leadership.get_mut(&tp("t", 0)).unwrap();
        state.isr = vec![0];
        state.leader_recovery_state = LeaderRecoveryState::Recovering;
        ctx
    }

    #[test]
    fn a_recovering_leader_reports_recovered_with_its_isr_grown() {
        // Kafka 3.9's leader marks itself RECOVERED on LeaderAndIsr and sends it with its
        // next ISR change: the controller writes both.
        for version in [1, 2, 3] {
            let mut ctx = recovering_ctx();
            ctx.topic_ids
                .insert("t".parse().unwrap(), model::TopicId::from_bytes([7; 16]));
            let mut req = request(0, 100, &[("t", 0, 3, &[0, 1], 7)]);
            if version >= 2 {
                req = by_id(req, uuid::Uuid::from_bytes([7; 16]), version);
            }
            let plan = super::plan(&mut ctx, &req, version).unwrap();
            let written = LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 3,
                isr: vec![0, 1],
                controller_epoch: 1,
                zk_version: 8,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            };
            assert_eq!(
                plan.effects[0],
                Effect::UpdatePartitionState {
                    tp: tp("t", 0),
                    state: written.clone(),
                    expected_zk_version: 7
                },
                "v{version}"
            );
            let resp = super::response(plan, &mut ctx, &BTreeSet::new());
            let p = &resp.topics[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{version}");
            assert_eq!(p.leader_recovery_state, 0, "v{version}");
            assert_eq!(p.isr, vec![WireBrokerId(0), WireBrokerId(1)]);
            assert_eq!(p.partition_epoch, 8);
            assert_eq!(ctx.leadership[&tp("t", 0)], written, "v{version}");
        }
    }

    #[test]
    fn recovered_with_the_same_isr_is_written_and_recovering_again_is_current() {
        // RECOVERED alone (the ISR unchanged) clears the state too.
        let mut ctx = recovering_ctx();
        let req = request(0, 100, &[("t", 0, 3, &[0], 7)]);
        let plan = super::plan(&mut ctx, &req, 1).unwrap();
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
        assert_eq!(resp.topics[0].partitions[0].partition_epoch, 8);
        assert_eq!(
            ctx.leadership[&tp("t", 0)].leader_recovery_state,
            LeaderRecoveryState::Recovered
        );
        // RECOVERING with ISR [leader] on a RECOVERING partition is its current state: the
        // answer is that state (RECOVERING), and nothing is written.
        let mut ctx = recovering_ctx();
        let mut req = request(0, 100, &[("t", 0, 3, &[0], 7)]);
        req.topics[0].partitions[0].leader_recovery_state = RECOVERING;
        let plan = super::plan(&mut ctx, &req, 1).unwrap();
        assert!(plan
            .effects
            .iter()
            .all(|e| !matches!(e, Effect::UpdatePartitionState { .. })));
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        let p = &resp.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_recovery_state), (0, RECOVERING));
        assert_eq!(p.partition_epoch, 7);
    }

    #[test]
    fn a_recovering_partition_refuses_recovering_with_more_members() {
        let mut ctx = recovering_ctx();
        let mut req = request(0, 100, &[("t", 0, 3, &[0, 1], 7)]);
        req.topics[0].partitions[0].leader_recovery_state = RECOVERING;
        let plan = super::plan(&mut ctx, &req, 1).unwrap();
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        assert_eq!(
            resp.topics[0].partitions[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            ctx.leadership[&tp("t", 0)],
            recovering_ctx().leadership[&tp("t", 0)]
        );
    }

    #[test]
    fn an_unknown_recovery_state_refuses_the_whole_request() {
        // Kafka 3.9's LeaderRecoveryState.of throws: UNKNOWN_SERVER_ERROR, nothing changes
        // (not even the other, valid partition).
        let mut ctx = recovering_ctx();
        let before = ctx.leadership.clone();
        let mut req = request(0, 100, &[("t", 0, 3, &[0, 1], 7), ("t", 1, 3, &[0], 7)]);
        req.topics[0].partitions[1].leader_recovery_state = 2;
        let err = super::plan(&mut ctx, &req, 1).unwrap_err();
        assert_eq!(err, ResponseError::UnknownServerError);
        assert_eq!(ctx.leadership, before);
        // At v0 the field does not exist: not read.
        let plan = super::plan(&mut ctx, &req, 0).unwrap();
        let resp = super::response(plan, &mut ctx, &BTreeSet::new());
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    }
}
