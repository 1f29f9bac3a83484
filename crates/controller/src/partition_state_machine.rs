//! The partition state machine (Kafka's `ZkPartitionStateMachine`), pure: it changes the
//! [`ControllerContext`] and returns [`Effect`]s for the event loop to carry out.
//!
//! ```text
//! NonExistent ──▶ New ──▶ Online ◀──▶ Offline ──▶ NonExistent
//!                  └──────────────────▲
//! ```

use tracing::{debug, error, info, warn};

use model::{LeaderRecoveryState, TopicPartition};

use crate::context::{ControllerContext, LeaderIsrAndControllerEpoch, MovedFrom};
use crate::effect::Effect;

/// A partition's state, with Kafka's meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionState {
    /// Never created, or deleted.
    NonExistent,
    /// Has an assignment but no leader yet.
    New,
    /// Has a live leader.
    Online,
    /// Its leader died (or its topic is being deleted).
    Offline,
}

impl PartitionState {
    /// The states a partition may move to `self` from. This is the only place the legal
    /// moves are written down.
    pub fn valid_previous(self) -> &'static [PartitionState] {
        use PartitionState::*;
        match self {
            NonExistent => &[Offline],
            New => &[NonExistent],
            Online => &[New, Online, Offline],
            Offline => &[New, Online, Offline],
        }
    }

    /// Whether a partition in `from` may move to `self`.
    pub fn can_move_from(self, from: PartitionState) -> bool {
        self.valid_previous().contains(&from)
    }
}

/// How a partition moving to Online picks its leader (Kafka's
/// `PartitionLeaderElectionStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionStrategy {
    /// The leader is gone: the first online in-sync replica in assignment order; when the
    /// topic allows unclean election and no in-sync replica is online, the first online
    /// replica (whose log may lack acknowledged records).
    Offline,
    /// The leader is in controlled shutdown: the first in-sync replica in assignment order
    /// that is not shutting down; the shutting-down brokers leave the ISR.
    ControlledShutdown,
    /// Kafka's `PreferredReplicaPartitionLeaderElectionStrategy` (ElectLeaders PREFERRED, the
    /// automatic rebalance): the first assigned replica, when it is online and in the ISR;
    /// the ISR stays as it is.
    Preferred,
    /// ElectLeaders UNCLEAN (Kafka's `OfflinePartitionLeaderElectionStrategy(allowUnclean =
    /// true)`): as [`ElectionStrategy::Offline`], but an out-of-sync replica may lead whatever
    /// the topic's `unclean.leader.election.enable` says.
    OfflineAllowUnclean,
}

/// A leader election's outcome for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elected {
    /// The new leader.
    pub leader: model::BrokerId,
    /// The new ISR.
    pub isr: Vec<model::BrokerId>,
    /// Whether the leader was not in the ISR (unclean election).
    pub unclean: bool,
    /// The replicas that get the LeaderAndIsr.
    pub recipients: Vec<model::BrokerId>,
}

/// Kafka's `PartitionLeaderElectionAlgorithms` plus the ISR each election leaves: `None`
/// when no replica may lead. Pure; the caller writes the result.
pub fn elect(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    current: &LeaderIsrAndControllerEpoch,
    strategy: ElectionStrategy,
) -> Option<Elected> {
    let replicas = ctx.replicas(tp);
    match strategy {
        ElectionStrategy::Offline | ElectionStrategy::OfflineAllowUnclean => {
            let online: Vec<_> = replicas
                .iter()
                .copied()
                .filter(|&b| ctx.is_replica_online(b))
                .collect();
            if let Some(&leader) = online.iter().find(|b| current.isr.contains(b)) {
                let isr = current
                    .isr
                    .iter()
                    .copied()
                    .filter(|&b| ctx.is_replica_online(b))
                    .collect();
                return Some(Elected {
                    leader,
                    isr,
                    unclean: false,
                    recipients: online,
                });
            }
            if strategy == ElectionStrategy::Offline
                && !ctx.unclean_election_topics.contains(&tp.topic)
            {
                return None;
            }
            let &leader = online.first()?;
            Some(Elected {
                leader,
                isr: vec![leader],
                unclean: true,
                recipients: online,
            })
        }
        ElectionStrategy::ControlledShutdown => {
            let leader = replicas
                .iter()
                .copied()
                .find(|&b| ctx.is_replica_online(b) && current.isr.contains(&b))?;
            let isr = current
                .isr
                .iter()
                .copied()
                .filter(|b| !ctx.shutting_down_brokers.contains(b))
                .collect();
            let recipients = replicas
                .iter()
                .copied()
                .filter(|&b| ctx.is_live(b))
                .collect();
            Some(Elected {
                leader,
                isr,
                unclean: false,
                recipients,
            })
        }
        ElectionStrategy::Preferred => {
            let &leader = replicas.first()?;
            if !ctx.is_replica_online(leader) || !current.isr.contains(&leader) {
                return None;
            }
            let recipients = replicas
                .iter()
                .copied()
                .filter(|&b| ctx.is_replica_online(b))
                .collect();
            Some(Elected {
                leader,
                isr: current.isr.clone(),
                unclean: false,
                recipients,
            })
        }
    }
}

/// Moves `partitions` to `target`, refusing (and logging on `state_change`) every invalid
/// move; partitions moving to Online from Online or Offline elect with the Offline
/// strategy. Returns the effects in the order they must happen.
pub fn handle_state_changes(
    ctx: &mut ControllerContext,
    partitions: &[TopicPartition],
    target: PartitionState,
) -> Vec<Effect> {
    handle_state_changes_with(ctx, partitions, target, ElectionStrategy::Offline)
}

/// [`handle_state_changes`] with the election strategy for partitions moving to Online.
pub fn handle_state_changes_with(
    ctx: &mut ControllerContext,
    partitions: &[TopicPartition],
    target: PartitionState,
    strategy: ElectionStrategy,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    // One info line per call (per-partition lines are at debug): a 10,000-partition create
    // would otherwise log 10,000 of them.
    let mut moved = MovedFrom::default();
    for tp in partitions {
        let current = ctx.partition_state(tp);
        if !target.can_move_from(current) {
            error!(
                target: "state_change",
                controller_epoch = ctx.epoch, %tp, from = ?current, to = ?target,
                "invalid partition state transition refused"
            );
            continue;
        }
        match target {
            PartitionState::New => set_state(ctx, tp, current, target),
            PartitionState::Online if current == PartitionState::New => {
                initialize_leader_and_isr(ctx, tp, &mut effects)
            }
            PartitionState::Online => elect_leader(ctx, tp, current, strategy, &mut effects),
            PartitionState::Offline => set_state(ctx, tp, current, target),
            PartitionState::NonExistent => {
                debug!(target: "state_change", %tp, from = ?current, to = ?target, "partition state change");
                ctx.partition_states.remove(tp);
            }
        }
        if ctx.partition_state(tp) == target {
            moved.add(current);
        }
    }
    if moved.total() > 0 {
        info!(target: "state_change", controller_epoch = ctx.epoch, to = ?target, partitions = moved.total(),
            from = ?moved.counts(), "partition state changes");
    }
    effects
}

fn set_state(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    from: PartitionState,
    to: PartitionState,
) {
    debug!(target: "state_change", controller_epoch = ctx.epoch, %tp, ?from, ?to, "partition state change");
    ctx.partition_states.insert(tp.clone(), to);
}

/// New -> Online: the first live replica leads and the live replicas form the ISR (SPEC
/// section 2, step 3).
fn initialize_leader_and_isr(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    effects: &mut Vec<Effect>,
) {
    let replicas = ctx.replicas(tp).to_vec();
    let live: Vec<_> = replicas
        .iter()
        .copied()
        .filter(|&b| ctx.is_replica_online(b))
        .collect();
    let Some(&leader) = live.first() else {
        error!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, ?replicas,
            "cannot move partition from New to Online: no replica is on a live broker"
        );
        return;
    };
    let state = LeaderIsrAndControllerEpoch {
        leader,
        leader_epoch: 0,
        isr: live.clone(),
        controller_epoch: ctx.epoch,
        zk_version: 0,
        leader_recovery_state: LeaderRecoveryState::Recovered,
    };
    ctx.leadership.insert(tp.clone(), state.clone());
    set_state(ctx, tp, PartitionState::New, PartitionState::Online);
    effects.push(Effect::CreatePartitionState {
        tp: tp.clone(),
        state,
    });
    effects.push(Effect::LeaderAndIsr {
        brokers: live,
        tp: tp.clone(),
        is_new: true,
    });
    effects.push(Effect::UpdateMetadata {
        brokers: ctx.live_broker_ids(),
        partitions: vec![tp.clone()],
    });
}

/// Online/Offline -> Online: elect a leader with `strategy` and write it with the leader
/// epoch moved on. A partition whose leader is online and in the ISR needs no election under
/// the Offline strategy; one that finds no leader stays where it was (Offline, "Leader:
/// none" once its last leader left the ISR) until a replica returns.
fn elect_leader(
    ctx: &mut ControllerContext,
    tp: &TopicPartition,
    from: PartitionState,
    strategy: ElectionStrategy,
    effects: &mut Vec<Effect>,
) {
    let Some(current) = ctx.leadership.get(tp).cloned() else {
        error!(target: "state_change", %tp, ?from, "cannot elect a leader: the partition has no leadership state");
        return;
    };
    if matches!(
        strategy,
        ElectionStrategy::Offline | ElectionStrategy::OfflineAllowUnclean
    ) && ctx.is_replica_online(current.leader)
        && current.isr.contains(&current.leader)
    {
        set_state(ctx, tp, from, PartitionState::Online);
        return;
    }
    let Some(elected) = elect(ctx, tp, &current, strategy) else {
        let replicas = ctx.replicas(tp);
        if ctx.cluster_stopping() {
            // Every broker still registered is in controlled shutdown: a whole-cluster stop,
            // whose expected end is partitions with no leader.
            info!(
                target: "state_change",
                controller_epoch = ctx.epoch, %tp, ?strategy, ?replicas, isr = ?current.isr,
                "no replica may lead the partition while every broker shuts down; it keeps its state until a replica returns"
            );
        } else if replicas.iter().all(|&b| !ctx.is_replica_online(b)) {
            // Every replica's broker is gone or shutting down: the partition waits for one of
            // them (whose departure is logged as a broker change), as a stopped broker's
            // partitions do; nothing here needs an operator unless that broker never returns.
            warn!(
                target: "state_change",
                controller_epoch = ctx.epoch, %tp, ?strategy, ?replicas, isr = ?current.isr,
                "no replica may lead the partition: every broker holding one is stopped or shutting down; it keeps its state until a replica returns"
            );
        } else {
            // A replica is on a running broker and still may not lead (out of the ISR with
            // unclean election off): the partition stays offline until an operator acts.
            error!(
                target: "state_change",
                controller_epoch = ctx.epoch, %tp, ?strategy, ?replicas, isr = ?current.isr,
                "no replica may lead the partition; it keeps its state until a replica returns"
            );
        }
        if matches!(
            strategy,
            ElectionStrategy::Offline | ElectionStrategy::OfflineAllowUnclean
        ) {
            set_state(ctx, tp, from, PartitionState::Offline);
        }
        return;
    };
    if elected.unclean {
        warn!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, leader = elected.leader, isr = ?current.isr,
            "unclean leader election: the new leader was not in the ISR; acknowledged records may be lost"
        );
    }
    let state = LeaderIsrAndControllerEpoch {
        leader: elected.leader,
        leader_epoch: current.leader_epoch + 1,
        isr: elected.isr,
        controller_epoch: ctx.epoch,
        zk_version: current.zk_version + 1,
        // Kafka 3.9's `Election.leaderForOffline`: a leader from outside the ISR marks the
        // partition RECOVERING; any other election keeps the state it had.
        leader_recovery_state: if elected.unclean {
            LeaderRecoveryState::Recovering
        } else {
            current.leader_recovery_state
        },
    };
    // Per partition at debug (a broker failure elects thousands; the state machine's summary
    // line is at info), except an unclean election: data may be lost, so it is always told.
    if elected.unclean {
        warn!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, ?strategy, leader = state.leader,
            leader_epoch = state.leader_epoch, isr = ?state.isr,
            "elected a leader from outside the ISR (unclean election): records may be lost"
        );
    } else {
        debug!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, ?strategy, leader = state.leader,
            leader_epoch = state.leader_epoch, isr = ?state.isr, "elected leader"
        );
    }
    ctx.leadership.insert(tp.clone(), state.clone());
    set_state(ctx, tp, from, PartitionState::Online);
    effects.push(Effect::UpdatePartitionState {
        tp: tp.clone(),
        state,
        expected_zk_version: current.zk_version,
    });
    effects.push(Effect::LeaderAndIsr {
        brokers: elected.recipients,
        tp: tp.clone(),
        is_new: false,
    });
    effects.push(Effect::UpdateMetadata {
        brokers: ctx.live_broker_ids(),
        partitions: vec![tp.clone()],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{ctx_with, tp};

    #[test]
    fn valid_previous_states_are_kafkas() {
        use PartitionState::*;
        let cases = [
            (NonExistent, NonExistent, false),
            (NonExistent, New, true),
            (NonExistent, Online, false),
            (New, Online, true),
            (New, Offline, true),
            (New, NonExistent, false),
            (Online, Online, true),
            (Online, Offline, true),
            (Online, NonExistent, false),
            (Offline, Online, true),
            (Offline, NonExistent, true),
            (Offline, New, false),
        ];
        for (from, to, ok) in cases {
            assert_eq!(to.can_move_from(from), ok, "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn new_partition_goes_online_with_first_live_replica_as_leader() {
        let mut ctx = ctx_with(&[0, 1, 3], &[("t", &[&[3, 1, 2]])]);
        let p0 = tp("t", 0);
        assert!(
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::New)
                .is_empty()
        );
        let effects =
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online);
        let state = LeaderIsrAndControllerEpoch {
            leader: 3,
            leader_epoch: 0,
            isr: vec![3, 1],
            controller_epoch: 1,
            zk_version: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            effects,
            vec![
                Effect::CreatePartitionState {
                    tp: p0.clone(),
                    state: state.clone()
                },
                Effect::LeaderAndIsr {
                    brokers: vec![3, 1],
                    tp: p0.clone(),
                    is_new: true
                },
                Effect::UpdateMetadata {
                    brokers: vec![0, 1, 3],
                    partitions: vec![p0.clone()]
                },
            ]
        );
        assert_eq!(ctx.partition_state(&p0), PartitionState::Online);
        assert_eq!(ctx.leadership[&p0], state);
    }

    #[test]
    fn new_partition_without_live_replicas_stays_new() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[5, 6]])]);
        let p0 = tp("t", 0);
        handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::New);
        assert!(
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online)
                .is_empty()
        );
        assert_eq!(ctx.partition_state(&p0), PartitionState::New);
        assert!(!ctx.leadership.contains_key(&p0));
    }

    #[test]
    fn invalid_transition_is_refused_and_changes_nothing() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[0]])]);
        let p0 = tp("t", 0);
        // NonExistent -> Online skips New: refused.
        assert!(
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online)
                .is_empty()
        );
        assert_eq!(ctx.partition_state(&p0), PartitionState::NonExistent);
        // NonExistent -> NonExistent: refused too.
        handle_state_changes(
            &mut ctx,
            std::slice::from_ref(&p0),
            PartitionState::NonExistent,
        );
        assert_eq!(ctx.partition_state(&p0), PartitionState::NonExistent);
    }

    #[test]
    fn offline_partition_elects_first_live_isr_replica() {
        let mut ctx = ctx_with(&[1, 2], &[("t", &[&[0, 1, 2]])]);
        let p0 = tp("t", 0);
        ctx.partition_states
            .insert(p0.clone(), PartitionState::Offline);
        ctx.leadership.insert(
            p0.clone(),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 4,
                isr: vec![0, 2],
                controller_epoch: 1,
                zk_version: 7,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
        let effects =
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online);
        let state = LeaderIsrAndControllerEpoch {
            leader: 2,
            leader_epoch: 5,
            isr: vec![2],
            controller_epoch: 1,
            zk_version: 8,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            effects,
            vec![
                Effect::UpdatePartitionState {
                    tp: p0.clone(),
                    state,
                    expected_zk_version: 7
                },
                Effect::LeaderAndIsr {
                    brokers: vec![1, 2],
                    tp: p0.clone(),
                    is_new: false
                },
                Effect::UpdateMetadata {
                    brokers: vec![1, 2],
                    partitions: vec![p0.clone()]
                },
            ]
        );
    }

    #[test]
    fn offline_partition_without_live_isr_stays_offline() {
        let mut ctx = ctx_with(&[1], &[("t", &[&[0, 1]])]);
        let p0 = tp("t", 0);
        ctx.partition_states
            .insert(p0.clone(), PartitionState::Offline);
        ctx.leadership.insert(
            p0.clone(),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 0,
                isr: vec![0],
                controller_epoch: 1,
                zk_version: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
        assert!(
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online)
                .is_empty()
        );
        assert_eq!(ctx.partition_state(&p0), PartitionState::Offline);
    }

    /// t-0 on [0, 1], Offline: leader 0 gone, ISR [0] (broker 0 not live, 1 live).
    fn offline_with_only_an_out_of_sync_replica(
        recovery: LeaderRecoveryState,
    ) -> (ControllerContext, TopicPartition) {
        let mut ctx = ctx_with(&[1], &[("t", &[&[0, 1]])]);
        let p0 = tp("t", 0);
        ctx.partition_states
            .insert(p0.clone(), PartitionState::Offline);
        ctx.leadership.insert(
            p0.clone(),
            LeaderIsrAndControllerEpoch {
                leader: -1,
                leader_epoch: 4,
                isr: vec![0],
                controller_epoch: 1,
                zk_version: 6,
                leader_recovery_state: recovery,
            },
        );
        (ctx, p0)
    }

    #[test]
    fn unclean_election_marks_the_partition_recovering() {
        // Kafka 3.9's Election.leaderForOffline: a leader from outside the ISR gets ISR
        // [leader] and RECOVERING, by the topic's config or by ElectLeaders UNCLEAN.
        for by_config in [true, false] {
            let (mut ctx, p0) =
                offline_with_only_an_out_of_sync_replica(LeaderRecoveryState::Recovered);
            let strategy = if by_config {
                ctx.unclean_election_topics.insert("t".parse().unwrap());
                ElectionStrategy::Offline
            } else {
                ElectionStrategy::OfflineAllowUnclean
            };
            let effects = handle_state_changes_with(
                &mut ctx,
                std::slice::from_ref(&p0),
                PartitionState::Online,
                strategy,
            );
            let state = LeaderIsrAndControllerEpoch {
                leader: 1,
                leader_epoch: 5,
                isr: vec![1],
                controller_epoch: 1,
                zk_version: 7,
                leader_recovery_state: LeaderRecoveryState::Recovering,
            };
            assert_eq!(
                effects[0],
                Effect::UpdatePartitionState {
                    tp: p0.clone(),
                    state: state.clone(),
                    expected_zk_version: 6
                },
                "{strategy:?}"
            );
            assert_eq!(ctx.leadership[&p0], state);
            assert_eq!(ctx.partition_state(&p0), PartitionState::Online);
        }
    }

    #[test]
    fn a_clean_election_keeps_the_recovery_state() {
        // The recovering leader (in the ISR) comes back: it leads again, still RECOVERING;
        // a recovered partition's clean election stays RECOVERED.
        for recovery in [
            LeaderRecoveryState::Recovering,
            LeaderRecoveryState::Recovered,
        ] {
            let (mut ctx, p0) = offline_with_only_an_out_of_sync_replica(recovery);
            ctx.leadership.get_mut(&p0).unwrap().isr = vec![1];
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online);
            let state = &ctx.leadership[&p0];
            assert_eq!((state.leader, state.leader_epoch), (1, 5));
            assert_eq!(state.leader_recovery_state, recovery);
        }
    }

    #[test]
    fn without_unclean_election_nothing_is_marked() {
        let (mut ctx, p0) =
            offline_with_only_an_out_of_sync_replica(LeaderRecoveryState::Recovered);
        assert!(
            handle_state_changes(&mut ctx, std::slice::from_ref(&p0), PartitionState::Online)
                .is_empty()
        );
        assert_eq!(
            ctx.leadership[&p0].leader_recovery_state,
            LeaderRecoveryState::Recovered
        );
    }
}
