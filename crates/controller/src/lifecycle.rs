//! The controller's reactions to cluster changes (Kafka's `KafkaController.on*` methods),
//! pure: each changes the context through the state machines and returns effects.

use std::collections::BTreeSet;

use model::{BrokerId, TopicPartition};

use crate::context::{ControllerContext, PartitionAndReplica};
use crate::effect::Effect;
use crate::partition_state_machine::{self as psm, PartitionState};
use crate::replica_state_machine::{self as rsm, ReplicaState};
use crate::topic_deletion;

/// New-partition creation (SPEC section 2): partitions NonExistent -> New, their replicas
/// -> New, partitions -> Online (leader, ISR, state znodes, LeaderAndIsr + UpdateMetadata),
/// replicas -> Online.
pub fn on_new_partition_creation(
    ctx: &mut ControllerContext,
    partitions: &[TopicPartition],
) -> Vec<Effect> {
    let replicas = ctx.replicas_for_partitions(partitions);
    let mut effects = psm::handle_state_changes(ctx, partitions, PartitionState::New);
    effects.extend(rsm::handle_state_changes(ctx, &replicas, ReplicaState::New));
    effects.extend(psm::handle_state_changes(
        ctx,
        partitions,
        PartitionState::Online,
    ));
    effects.extend(rsm::handle_state_changes(
        ctx,
        &replicas,
        ReplicaState::Online,
    ));
    effects
}

/// Right after winning an election: derive every partition's and replica's state from the
/// loaded context, tell every live broker the whole metadata and every replica its
/// leadership, bring New/Offline partitions online, and resume pending deletions.
pub fn on_controller_failover(ctx: &mut ControllerContext) -> Vec<Effect> {
    initialize_states(ctx);
    let all_partitions: Vec<_> = ctx.leadership.keys().cloned().collect();
    let mut effects = vec![Effect::UpdateMetadata {
        brokers: ctx.live_broker_ids(),
        partitions: all_partitions,
    }];
    let online_replicas: Vec<_> = ctx
        .replica_states
        .iter()
        .filter(|(r, &state)| {
            state == ReplicaState::Online && !ctx.is_topic_queued_for_deletion(&r.tp.topic)
        })
        .map(|(r, _)| r.clone())
        .collect();
    effects.extend(rsm::handle_state_changes(
        ctx,
        &online_replicas,
        ReplicaState::Online,
    ));
    effects.extend(trigger_online_partition_state_change(ctx));
    effects.extend(topic_deletion::resume_deletions(ctx));
    effects
}

/// Brokers registered: they learn the metadata, their replicas come online, partitions
/// waiting for them come online, and deletions waiting for them resume.
pub fn on_broker_startup(
    ctx: &mut ControllerContext,
    new_brokers: &BTreeSet<BrokerId>,
) -> Vec<Effect> {
    let existing: Vec<_> = ctx
        .live_broker_ids()
        .into_iter()
        .filter(|b| !new_brokers.contains(b))
        .collect();
    let mut effects = vec![
        Effect::UpdateMetadata {
            brokers: existing,
            partitions: Vec::new(),
        },
        Effect::UpdateMetadata {
            brokers: new_brokers.iter().copied().collect(),
            partitions: ctx.leadership.keys().cloned().collect(),
        },
    ];
    let replicas: Vec<PartitionAndReplica> = new_brokers
        .iter()
        .flat_map(|&b| ctx.replicas_on_broker(b))
        .collect();
    let (deleting, serving): (Vec<_>, Vec<_>) = replicas
        .into_iter()
        .partition(|r| ctx.is_topic_queued_for_deletion(&r.tp.topic));
    effects.extend(rsm::handle_state_changes(
        ctx,
        &serving,
        ReplicaState::Online,
    ));
    effects.extend(trigger_online_partition_state_change(ctx));
    let topics: BTreeSet<_> = deleting.into_iter().map(|r| r.tp.topic).collect();
    effects.extend(topic_deletion::resume_deletion_for_topics(ctx, &topics));
    effects
}

/// Brokers gone (their registration vanished): partitions they led elect new leaders,
/// their replicas go offline, and deletions in flight on them fail for a later retry.
pub fn on_broker_failure(
    ctx: &mut ControllerContext,
    dead_brokers: &BTreeSet<BrokerId>,
) -> Vec<Effect> {
    let replicas: Vec<_> = dead_brokers
        .iter()
        .flat_map(|&b| ctx.replicas_on_broker(b))
        .collect();
    let (deleting, serving): (Vec<_>, Vec<_>) = replicas
        .into_iter()
        .partition(|r| ctx.is_topic_queued_for_deletion(&r.tp.topic));
    let offline_leader: Vec<_> = ctx
        .leadership
        .iter()
        .filter(|(tp, state)| {
            dead_brokers.contains(&state.leader) && !ctx.is_topic_queued_for_deletion(&tp.topic)
        })
        .map(|(tp, _)| tp.clone())
        .collect();
    let mut effects = psm::handle_state_changes(ctx, &offline_leader, PartitionState::Offline);
    effects.extend(trigger_online_partition_state_change(ctx));
    effects.extend(rsm::handle_state_changes(
        ctx,
        &serving,
        ReplicaState::Offline,
    ));
    effects.extend(topic_deletion::fail_replica_deletion(ctx, &deleting));
    if offline_leader.is_empty() {
        effects.push(Effect::UpdateMetadata {
            brokers: ctx.live_broker_ids(),
            partitions: Vec::new(),
        });
    }
    effects
}

/// Every New or Offline partition of a topic not being deleted -> Online.
pub fn trigger_online_partition_state_change(ctx: &mut ControllerContext) -> Vec<Effect> {
    let partitions: Vec<_> = ctx
        .partition_states
        .iter()
        .filter(|(tp, &state)| {
            matches!(state, PartitionState::New | PartitionState::Offline)
                && !ctx.is_topic_queued_for_deletion(&tp.topic)
        })
        .map(|(tp, _)| tp.clone())
        .collect();
    psm::handle_state_changes(ctx, &partitions, PartitionState::Online)
}

/// Kafka's `initializePartitionState` and `initializeReplicaState`: states as the store
/// shows them, without transitions.
fn initialize_states(ctx: &mut ControllerContext) {
    let partitions: Vec<_> = ctx
        .all_topics
        .clone()
        .iter()
        .flat_map(|t| ctx.partitions_for_topic(t))
        .collect();
    for tp in partitions {
        let state = match ctx.leadership.get(&tp) {
            Some(l) if ctx.is_live(l.leader) => PartitionState::Online,
            Some(_) => PartitionState::Offline,
            None => PartitionState::New,
        };
        ctx.partition_states.insert(tp.clone(), state);
        for &replica in ctx.replicas(&tp).to_vec().iter() {
            let state = if ctx.is_live(replica) {
                ReplicaState::Online
            } else {
                ReplicaState::Offline
            };
            ctx.replica_states.insert(
                PartitionAndReplica {
                    tp: tp.clone(),
                    replica,
                },
                state,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::LeaderIsrAndControllerEpoch;
    use crate::test_support::{broker, ctx_with, name, tp};

    #[test]
    fn new_topic_creation_writes_state_and_sends_requests() {
        // SPEC section 2's example: replicas [3,1,2], live brokers 0,1,3.
        let mut ctx = ctx_with(&[0, 1, 3], &[("t", &[&[3, 1, 2], &[1, 2, 0]])]);
        let partitions = ctx.partitions_for_topic(&name("t"));
        let effects = on_new_partition_creation(&mut ctx, &partitions);
        let creates: Vec<_> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::CreatePartitionState { tp, state } => {
                    Some((tp.partition, state.leader, state.isr.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(creates, vec![(0, 3, vec![3, 1]), (1, 1, vec![1, 0])]);
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![1, 0],
            tp: tp("t", 1),
            is_new: true
        }));
        for tp in &partitions {
            assert_eq!(ctx.partition_state(tp), PartitionState::Online);
        }
        assert!(ctx
            .replica_states
            .values()
            .all(|&s| s == ReplicaState::Online));
    }

    #[test]
    fn broker_failure_moves_leadership_and_startup_brings_replica_back() {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1]])]);
        let p0 = tp("t", 0);
        on_new_partition_creation(&mut ctx, std::slice::from_ref(&p0));
        ctx.live_brokers.remove(&0);
        let effects = on_broker_failure(&mut ctx, &BTreeSet::from([0]));
        assert!(effects.iter().any(|e| matches!(
            e,
            Effect::UpdatePartitionState {
                state: LeaderIsrAndControllerEpoch {
                    leader: 1,
                    leader_epoch: 1,
                    ..
                },
                expected_zk_version: 0,
                ..
            }
        )));
        assert_eq!(
            ctx.replica_state(&PartitionAndReplica {
                tp: p0.clone(),
                replica: 0
            }),
            ReplicaState::Offline
        );

        ctx.live_brokers.insert(0, broker(0));
        let effects = on_broker_startup(&mut ctx, &BTreeSet::from([0]));
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![0],
            tp: p0.clone(),
            is_new: false
        }));
        assert_eq!(
            ctx.replica_state(&PartitionAndReplica { tp: p0, replica: 0 }),
            ReplicaState::Online
        );
    }

    #[test]
    fn partition_created_while_its_brokers_were_down_comes_online_when_they_register() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[5]])]);
        let p0 = tp("t", 0);
        on_new_partition_creation(&mut ctx, std::slice::from_ref(&p0));
        assert_eq!(ctx.partition_state(&p0), PartitionState::New);
        ctx.live_brokers.insert(5, broker(5));
        let effects = on_broker_startup(&mut ctx, &BTreeSet::from([5]));
        assert!(effects
            .iter()
            .any(|e| matches!(e, Effect::CreatePartitionState { state, .. } if state.leader == 5)));
        assert_eq!(ctx.partition_state(&p0), PartitionState::Online);
    }

    #[test]
    fn failover_resumes_a_pending_deletion() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[0]])]);
        ctx.leadership.insert(
            tp("t", 0),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 0,
                isr: vec![0],
                controller_epoch: 1,
                zk_version: 0,
            },
        );
        ctx.topics_to_be_deleted.insert(name("t"));
        let effects = on_controller_failover(&mut ctx);
        assert!(
            effects.contains(&Effect::StopReplica {
                broker: 0,
                tp: tp("t", 0),
                delete: true
            }),
            "{effects:?}"
        );
        // A topic being deleted is not brought online again.
        assert!(
            !effects
                .iter()
                .any(|e| matches!(e, Effect::LeaderAndIsr { .. })),
            "{effects:?}"
        );
    }

    #[test]
    fn failover_sends_leadership_to_every_online_replica() {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1]]), ("u", &[&[1]])]);
        ctx.leadership.insert(
            tp("t", 0),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 2,
                isr: vec![0, 1],
                controller_epoch: 1,
                zk_version: 3,
            },
        );
        let effects = on_controller_failover(&mut ctx);
        assert_eq!(
            effects[0],
            Effect::UpdateMetadata {
                brokers: vec![0, 1],
                partitions: vec![tp("t", 0)]
            }
        );
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![0],
            tp: tp("t", 0),
            is_new: false
        }));
        // "u" had no state znode: it is created now.
        assert!(effects.iter().any(
            |e| matches!(e, Effect::CreatePartitionState { tp, .. } if tp.topic.as_str() == "u")
        ));
    }
}
