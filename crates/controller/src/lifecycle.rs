//! The controller's reactions to cluster changes (Kafka's `KafkaController.on*` methods),
//! pure: each changes the context through the state machines and returns effects.

use std::collections::BTreeSet;

use model::{BrokerId, TopicName, TopicPartition};

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
    // Replicas on brokers that died while no controller watched leave their ISRs (Kafka's
    // replica state machine startup), after the elections so that a partition whose leader
    // died is written once.
    let offline_replicas: Vec<_> = ctx
        .replica_states
        .iter()
        .filter(|(r, &state)| {
            state == ReplicaState::Offline && !ctx.is_topic_queued_for_deletion(&r.tp.topic)
        })
        .map(|(r, _)| r.clone())
        .collect();
    effects.extend(rsm::handle_state_changes(
        ctx,
        &offline_replicas,
        ReplicaState::Offline,
    ));
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
/// their replicas go offline, and their replicas of topics being deleted count as deleted
/// (the deletion does not wait for them).
pub fn on_broker_failure(
    ctx: &mut ControllerContext,
    dead_brokers: &BTreeSet<BrokerId>,
) -> Vec<Effect> {
    for broker in dead_brokers {
        ctx.shutting_down_brokers.remove(broker);
    }
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
    effects.extend(topic_deletion::consider_deleted_on_offline_brokers(
        ctx, &deleting,
    ));
    effects.extend(topic_deletion::resume_deletions(ctx));
    if offline_leader.is_empty() {
        effects.push(Effect::UpdateMetadata {
            brokers: ctx.live_broker_ids(),
            partitions: Vec::new(),
        });
    }
    effects
}

/// ControlledShutdown from `broker` (Kafka's `doControlledShutdown`; the caller checked the
/// broker epoch): the broker joins the shutting-down set, every partition it leads (with more
/// than one replica) elects another in-sync replica, and it leaves the ISR of every partition
/// it follows (its replica there is stopped). Partitions of topics being deleted are left
/// alone. What it still leads afterwards is [`partitions_led_by`].
pub fn on_controlled_shutdown(ctx: &mut ControllerContext, broker: BrokerId) -> Vec<Effect> {
    ctx.shutting_down_brokers.insert(broker);
    let (led, followed): (Vec<_>, Vec<_>) = ctx
        .replicas_on_broker(broker)
        .into_iter()
        .map(|r| r.tp)
        .filter(|tp| {
            ctx.replicas(tp).len() > 1
                && ctx.leadership.contains_key(tp)
                && !ctx.is_topic_queued_for_deletion(&tp.topic)
        })
        .partition(|tp| ctx.leadership[tp].leader == broker);
    let mut effects = psm::handle_state_changes_with(
        ctx,
        &led,
        PartitionState::Online,
        psm::ElectionStrategy::ControlledShutdown,
    );
    let followed: Vec<_> = followed
        .into_iter()
        .map(|tp| PartitionAndReplica {
            tp,
            replica: broker,
        })
        .collect();
    effects.extend(rsm::handle_state_changes(
        ctx,
        &followed,
        ReplicaState::Offline,
    ));
    effects
}

/// The partitions `broker` leads that another replica could lead (more than one replica,
/// topic not being deleted): what a ControlledShutdown response lists as remaining.
pub fn partitions_led_by(ctx: &ControllerContext, broker: BrokerId) -> Vec<TopicPartition> {
    ctx.leadership
        .iter()
        .filter(|(tp, l)| {
            l.leader == broker
                && ctx.replicas(tp).len() > 1
                && !ctx.is_topic_queued_for_deletion(&tp.topic)
        })
        .map(|(tp, _)| tp.clone())
        .collect()
}

/// Topics with a partition whose leader is not online and none of whose in-sync replicas is
/// online: the topics whose `unclean.leader.election.enable` the event loop reads before an
/// election (a clean one cannot succeed there). Usually empty, so usually no read.
pub fn topics_needing_unclean_decision(ctx: &ControllerContext) -> BTreeSet<TopicName> {
    ctx.leadership
        .iter()
        .filter(|(tp, l)| {
            !ctx.is_topic_queued_for_deletion(&tp.topic)
                && !ctx.is_replica_online(l.leader)
                && !l.isr.iter().any(|&b| ctx.is_replica_online(b))
        })
        .map(|(tp, _)| tp.topic.clone())
        .collect()
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
    use model::LeaderRecoveryState;

    use super::*;
    use crate::context::LeaderIsrAndControllerEpoch;
    use crate::context::NO_LEADER as NO_LEADER_ID;
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
                leader_recovery_state: LeaderRecoveryState::Recovered,
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
                leader_recovery_state: LeaderRecoveryState::Recovered,
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

    /// A context whose partitions have the given (leader, ISR), every replica Online.
    fn with_leadership(
        live: &[BrokerId],
        topics: &[(&str, &[&[BrokerId]])],
        states: &[(&str, i32, BrokerId, &[BrokerId])],
    ) -> ControllerContext {
        let mut ctx = ctx_with(live, topics);
        for &(topic, partition, leader, isr) in states {
            let p = tp(topic, partition);
            ctx.leadership.insert(
                p.clone(),
                LeaderIsrAndControllerEpoch {
                    leader,
                    leader_epoch: 5,
                    isr: isr.to_vec(),
                    controller_epoch: 1,
                    zk_version: 9,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                },
            );
            ctx.partition_states
                .insert(p.clone(), PartitionState::Online);
            for &replica in ctx.replicas(&p).to_vec().iter() {
                ctx.replica_states.insert(
                    PartitionAndReplica {
                        tp: p.clone(),
                        replica,
                    },
                    ReplicaState::Online,
                );
            }
        }
        ctx
    }

    /// Every state write of `effects`: (partition, leader, leader epoch, ISR).
    fn writes(effects: &[Effect]) -> Vec<(i32, BrokerId, i32, Vec<BrokerId>)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::UpdatePartitionState { tp, state, .. } => Some((
                    tp.partition,
                    state.leader,
                    state.leader_epoch,
                    state.isr.clone(),
                )),
                _ => None,
            })
            .collect()
    }

    fn kill(ctx: &mut ControllerContext, broker: BrokerId) -> Vec<Effect> {
        ctx.live_brokers.remove(&broker);
        on_broker_failure(ctx, &BTreeSet::from([broker]))
    }

    #[test]
    fn failed_leader_is_replaced_by_the_first_live_isr_member_in_assignment_order() {
        // p0: the ISR lists 2 before 1, but 1 comes first in the assignment.
        // p1: broker 0 follows; it leaves the ISR, the leader stays.
        let mut ctx = with_leadership(
            &[0, 1, 2],
            &[("t", &[&[0, 1, 2], &[1, 0, 2]])],
            &[("t", 0, 0, &[2, 1, 0]), ("t", 1, 1, &[1, 0, 2])],
        );
        let effects = kill(&mut ctx, 0);
        assert_eq!(
            writes(&effects),
            vec![(0, 1, 6, vec![2, 1]), (1, 1, 6, vec![1, 2])],
            "{effects:?}"
        );
        assert_eq!(ctx.partition_state(&tp("t", 0)), PartitionState::Online);
    }

    #[test]
    fn all_elections_of_one_event_go_out_as_one_request_per_broker_and_kind() {
        let partitions: Vec<&[BrokerId]> = (0..50).map(|_| &[0, 1, 2][..]).collect();
        let states: Vec<_> = (0..50).map(|p| ("t", p, 0, &[0, 1, 2][..])).collect();
        let mut ctx = with_leadership(&[0, 1, 2], &[("t", &partitions)], &states);
        let effects = kill(&mut ctx, 0);
        assert_eq!(writes(&effects).len(), 50, "one write per partition");
        let mut batch = crate::channel_manager::RequestBatch::default();
        for effect in &effects {
            match effect {
                Effect::LeaderAndIsr {
                    brokers,
                    tp,
                    is_new,
                    ..
                } => batch.add_leader_and_isr(brokers, tp, *is_new),
                Effect::UpdateMetadata {
                    brokers,
                    partitions,
                } => batch.add_update_metadata(brokers, partitions),
                Effect::StopReplica { broker, tp, delete } => {
                    batch.add_stop_replica(*broker, tp, *delete)
                }
                _ => {}
            }
        }
        let requests = batch.build(&ctx, 1);
        let kinds: Vec<_> = requests
            .iter()
            .map(|(b, r)| match r {
                crate::channel_manager::ControlRequest::LeaderAndIsr(r) => {
                    assert_eq!(r.topic_states[0].partition_states.len(), 50);
                    (*b, "LeaderAndIsr")
                }
                crate::channel_manager::ControlRequest::UpdateMetadata(r) => {
                    assert_eq!(r.topic_states[0].partition_states.len(), 50);
                    (*b, "UpdateMetadata")
                }
                crate::channel_manager::ControlRequest::StopReplica { .. } => (*b, "StopReplica"),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (1, "LeaderAndIsr"),
                (2, "LeaderAndIsr"),
                (1, "UpdateMetadata"),
                (2, "UpdateMetadata")
            ]
        );
    }

    #[test]
    fn partition_without_live_isr_shows_no_leader_and_comes_back_with_its_replica() {
        let mut ctx = with_leadership(&[0, 1], &[("t", &[&[0, 1]])], &[("t", 0, 0, &[0])]);
        let effects = kill(&mut ctx, 0);
        // Leader none; the last in-sync replica stays in the ISR (Kafka's rule).
        assert_eq!(writes(&effects), vec![(0, NO_LEADER_ID, 6, vec![0])]);
        assert_eq!(ctx.partition_state(&tp("t", 0)), PartitionState::Offline);
        assert!(topics_needing_unclean_decision(&ctx).contains(&name("t")));

        ctx.live_brokers.insert(0, broker(0));
        let effects = on_broker_startup(&mut ctx, &BTreeSet::from([0]));
        assert_eq!(writes(&effects), vec![(0, 0, 7, vec![0])]);
        assert_eq!(ctx.partition_state(&tp("t", 0)), PartitionState::Online);
    }

    #[test]
    fn unclean_election_only_where_the_topic_allows_it() {
        let mut ctx = with_leadership(
            &[0, 1],
            &[("clean", &[&[0, 1]]), ("dirty", &[&[0, 1]])],
            &[("clean", 0, 0, &[0]), ("dirty", 0, 0, &[0])],
        );
        ctx.unclean_election_topics.insert(name("dirty"));
        let effects = kill(&mut ctx, 0);
        let states: Vec<_> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::UpdatePartitionState { tp, state, .. } => Some((
                    tp.topic.as_str().to_owned(),
                    state.leader,
                    state.isr.clone(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            states,
            vec![
                ("dirty".to_owned(), 1, vec![1]),
                ("clean".to_owned(), NO_LEADER_ID, vec![0])
            ]
        );
    }

    #[test]
    fn controlled_shutdown_moves_leaders_and_leaves_isrs() {
        let mut ctx = with_leadership(
            &[0, 1, 2],
            &[("t", &[&[0, 1, 2], &[1, 0, 2], &[0]])],
            &[
                ("t", 0, 0, &[0, 1, 2]),
                ("t", 1, 1, &[1, 0, 2]),
                ("t", 2, 0, &[0]),
            ],
        );
        let effects = on_controlled_shutdown(&mut ctx, 0);
        assert_eq!(
            writes(&effects),
            vec![(0, 1, 6, vec![1, 2]), (1, 1, 6, vec![1, 2])]
        );
        // The shutting-down broker learns it follows p0, and stops its replica of p1.
        assert!(effects.contains(&Effect::LeaderAndIsr {
            brokers: vec![0, 1, 2],
            tp: tp("t", 0),
            is_new: false
        }));
        assert!(effects.contains(&Effect::StopReplica {
            broker: 0,
            tp: tp("t", 1),
            delete: false
        }));
        // The single-replica partition cannot move and is not reported as remaining.
        assert!(partitions_led_by(&ctx, 0).is_empty());
        assert_eq!(ctx.leadership[&tp("t", 2)].leader, 0);
        // A shutting-down broker is never elected, even when it is the only ISR member left.
        let effects = kill(&mut ctx, 1);
        assert_eq!(
            writes(&effects),
            vec![(0, 2, 7, vec![2]), (1, 2, 7, vec![2])]
        );
    }

    #[test]
    fn controlled_shutdown_reports_what_no_in_sync_replica_can_take() {
        let mut ctx = with_leadership(&[0, 1], &[("t", &[&[0, 1]])], &[("t", 0, 0, &[0])]);
        let effects = on_controlled_shutdown(&mut ctx, 0);
        assert!(writes(&effects).is_empty(), "{effects:?}");
        assert_eq!(partitions_led_by(&ctx, 0), vec![tp("t", 0)]);
        // Its registration vanishing ends the shutdown state.
        kill(&mut ctx, 0);
        assert!(ctx.shutting_down_brokers.is_empty());
    }

    #[test]
    fn failover_drops_brokers_that_died_unwatched_from_isrs() {
        // Broker 2 died while no controller watched: the new one finds it in ISRs.
        let mut ctx = with_leadership(
            &[0, 1],
            &[("t", &[&[0, 1, 2], &[2, 0, 1]])],
            &[("t", 0, 0, &[0, 1, 2]), ("t", 1, 2, &[2, 0, 1])],
        );
        ctx.partition_states.clear();
        ctx.replica_states.clear();
        let effects = on_controller_failover(&mut ctx);
        // One write per partition: p1 elects 0 (first live ISR member in assignment order)
        // and drops 2 in the same write; p0 just drops 2.
        let mut w = writes(&effects);
        w.sort();
        assert_eq!(w, vec![(0, 0, 6, vec![0, 1]), (1, 0, 6, vec![0, 1])]);
    }
}
