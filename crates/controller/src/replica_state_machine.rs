//! The replica state machine (Kafka's `ZkReplicaStateMachine`), pure: it changes the
//! [`ControllerContext`] and returns [`Effect`]s for the event loop to carry out.

use tracing::{debug, error, info};

use crate::context::{
    ControllerContext, LeaderIsrAndControllerEpoch, MovedFrom, PartitionAndReplica, NO_LEADER,
};
use crate::effect::Effect;

/// A replica's state, with Kafka's meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicaState {
    /// Never created, or fully deleted.
    NonExistent,
    /// Assigned; the broker has not been told to serve it yet.
    New,
    /// Served by a live broker.
    Online,
    /// Its broker is dead or it was told to stop.
    Offline,
    /// StopReplica(delete) sent; waiting for the response.
    ReplicaDeletionStarted,
    /// The broker deleted it.
    ReplicaDeletionSuccessful,
    /// Deletion failed or cannot start (offline broker); retried later.
    ReplicaDeletionIneligible,
}

impl ReplicaState {
    /// The states a replica may move to `self` from. This is the only place the legal moves
    /// are written down.
    pub fn valid_previous(self) -> &'static [ReplicaState] {
        use ReplicaState::*;
        match self {
            New => &[NonExistent],
            Online => &[New, Online, Offline, ReplicaDeletionIneligible],
            Offline => &[New, Online, Offline, ReplicaDeletionIneligible],
            ReplicaDeletionStarted => &[Offline],
            ReplicaDeletionSuccessful => &[ReplicaDeletionStarted],
            ReplicaDeletionIneligible => &[Offline, ReplicaDeletionStarted],
            NonExistent => &[ReplicaDeletionSuccessful],
        }
    }

    /// Whether a replica in `from` may move to `self`.
    pub fn can_move_from(self, from: ReplicaState) -> bool {
        self.valid_previous().contains(&from)
    }
}

/// Moves `replicas` to `target`, refusing (and logging on `state_change`) every invalid move.
pub fn handle_state_changes(
    ctx: &mut ControllerContext,
    replicas: &[PartitionAndReplica],
    target: ReplicaState,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    // One info line per call; the per-replica lines are at debug.
    let mut moved = MovedFrom::default();
    for replica in replicas {
        let current = ctx.replica_state(replica);
        if !target.can_move_from(current) {
            error!(
                target: "state_change",
                controller_epoch = ctx.epoch, tp = %replica.tp, replica = replica.replica,
                from = ?current, to = ?target,
                "invalid replica state transition refused"
            );
            continue;
        }
        let (tp, broker) = (&replica.tp, replica.replica);
        match target {
            // A replica coming back (its broker restarted): tell it the leadership.
            ReplicaState::Online
                if current != ReplicaState::New
                    && ctx.leadership.contains_key(tp)
                    && ctx.is_live(broker) =>
            {
                effects.push(Effect::LeaderAndIsr {
                    brokers: vec![broker],
                    tp: tp.clone(),
                    is_new: false,
                });
            }
            // Followers stop fetching (a dead broker cannot be told), and the replica leaves
            // the ISR of a partition that is not being deleted.
            ReplicaState::Offline => {
                if ctx.is_live(broker) {
                    effects.push(Effect::StopReplica {
                        broker,
                        tp: tp.clone(),
                        delete: false,
                    });
                }
                effects.extend(remove_replica_from_isr(ctx, replica));
            }
            // A replica on an offline broker is not told (it cannot be): the deletion
            // manager counts it as deleted, and the broker removes the log itself.
            ReplicaState::ReplicaDeletionStarted if ctx.is_live(broker) => {
                effects.push(Effect::StopReplica {
                    broker,
                    tp: tp.clone(),
                    delete: true,
                });
            }
            _ => {}
        }
        debug!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, replica = broker, from = ?current, to = ?target,
            "replica state change"
        );
        moved.add(current);
        if target == ReplicaState::NonExistent {
            ctx.replica_states.remove(replica);
        } else {
            ctx.replica_states.insert(replica.clone(), target);
        }
    }
    if moved.total() > 0 {
        info!(target: "state_change", controller_epoch = ctx.epoch, to = ?target, replicas = moved.total(),
            from = ?moved.counts(), "replica state changes");
    }
    effects
}

/// Kafka's `removeReplicasFromIsr` for one replica: the ISR loses it (unless it is the last
/// member, which stays so that a clean election can pick it when it returns), a leader that
/// is removed becomes "no leader", and the leader epoch moves on.
fn remove_replica_from_isr(
    ctx: &mut ControllerContext,
    replica: &PartitionAndReplica,
) -> Vec<Effect> {
    let tp = &replica.tp;
    if ctx.is_topic_queued_for_deletion(&tp.topic) {
        return Vec::new();
    }
    let Some(current) = ctx.leadership.get(tp).cloned() else {
        return Vec::new();
    };
    if !current.isr.contains(&replica.replica) && current.leader != replica.replica {
        return Vec::new();
    }
    let leader = if current.leader == replica.replica {
        NO_LEADER
    } else {
        current.leader
    };
    let isr = if current.isr.len() <= 1 {
        current.isr.clone()
    } else {
        current
            .isr
            .iter()
            .copied()
            .filter(|&b| b != replica.replica)
            .collect()
    };
    let state = LeaderIsrAndControllerEpoch {
        leader,
        leader_epoch: current.leader_epoch + 1,
        isr,
        controller_epoch: ctx.epoch,
        zk_version: current.zk_version + 1,
        leader_recovery_state: current.leader_recovery_state,
    };
    ctx.leadership.insert(tp.clone(), state.clone());
    let brokers: Vec<_> = ctx
        .replicas(tp)
        .iter()
        .copied()
        .filter(|&b| b != replica.replica && ctx.is_live(b))
        .collect();
    vec![
        Effect::UpdatePartitionState {
            tp: tp.clone(),
            state,
            expected_zk_version: current.zk_version,
        },
        Effect::LeaderAndIsr {
            brokers,
            tp: tp.clone(),
            is_new: false,
        },
        Effect::UpdateMetadata {
            brokers: ctx.live_broker_ids(),
            partitions: vec![tp.clone()],
        },
    ]
}

#[cfg(test)]
mod tests {
    use model::LeaderRecoveryState;

    use super::*;
    use crate::test_support::{ctx_with, tp};
    use ReplicaState::*;

    fn r(topic: &str, partition: i32, replica: i32) -> PartitionAndReplica {
        PartitionAndReplica {
            tp: tp(topic, partition),
            replica,
        }
    }

    #[test]
    fn valid_previous_states_are_kafkas() {
        let all = [
            NonExistent,
            New,
            Online,
            Offline,
            ReplicaDeletionStarted,
            ReplicaDeletionSuccessful,
            ReplicaDeletionIneligible,
        ];
        let legal = [
            (NonExistent, New),
            (New, Online),
            (Online, Online),
            (Offline, Online),
            (ReplicaDeletionIneligible, Online),
            (New, Offline),
            (Online, Offline),
            (Offline, Offline),
            (ReplicaDeletionIneligible, Offline),
            (Offline, ReplicaDeletionStarted),
            (ReplicaDeletionStarted, ReplicaDeletionSuccessful),
            (Offline, ReplicaDeletionIneligible),
            (ReplicaDeletionStarted, ReplicaDeletionIneligible),
            (ReplicaDeletionSuccessful, NonExistent),
        ];
        for from in all {
            for to in all {
                assert_eq!(
                    to.can_move_from(from),
                    legal.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn deletion_path_sends_stop_replica_then_delete() {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1]])]);
        let replicas = vec![r("t", 0, 0), r("t", 0, 1)];
        assert!(handle_state_changes(&mut ctx, &replicas, New).is_empty());
        assert!(handle_state_changes(&mut ctx, &replicas, Online).is_empty());
        assert_eq!(
            handle_state_changes(&mut ctx, &replicas, Offline),
            vec![
                Effect::StopReplica {
                    broker: 0,
                    tp: tp("t", 0),
                    delete: false
                },
                Effect::StopReplica {
                    broker: 1,
                    tp: tp("t", 0),
                    delete: false
                },
            ]
        );
        assert_eq!(
            handle_state_changes(&mut ctx, &replicas[..1], ReplicaDeletionStarted),
            vec![Effect::StopReplica {
                broker: 0,
                tp: tp("t", 0),
                delete: true
            }]
        );
        handle_state_changes(&mut ctx, &replicas[..1], ReplicaDeletionSuccessful);
        handle_state_changes(&mut ctx, &replicas[..1], NonExistent);
        assert!(!ctx.replica_states.contains_key(&replicas[0]));
        assert_eq!(ctx.replica_state(&replicas[1]), Offline);
    }

    #[test]
    fn invalid_transition_is_refused() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[0]])]);
        let replica = r("t", 0, 0);
        // NonExistent -> ReplicaDeletionStarted would send StopReplica(delete) for nothing.
        assert!(handle_state_changes(
            &mut ctx,
            std::slice::from_ref(&replica),
            ReplicaDeletionStarted
        )
        .is_empty());
        assert_eq!(ctx.replica_state(&replica), NonExistent);
    }

    #[test]
    fn offline_follower_leaves_the_isr() {
        let mut ctx = ctx_with(&[0, 2], &[("t", &[&[0, 1, 2]])]);
        let p0 = tp("t", 0);
        let follower = r("t", 0, 1);
        ctx.replica_states.insert(follower.clone(), Online);
        ctx.leadership.insert(
            p0.clone(),
            LeaderIsrAndControllerEpoch {
                leader: 0,
                leader_epoch: 3,
                isr: vec![0, 1, 2],
                controller_epoch: 1,
                zk_version: 5,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
        let effects = handle_state_changes(&mut ctx, std::slice::from_ref(&follower), Offline);
        let state = LeaderIsrAndControllerEpoch {
            leader: 0,
            leader_epoch: 4,
            isr: vec![0, 2],
            controller_epoch: 1,
            zk_version: 6,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        };
        assert_eq!(
            effects,
            vec![
                Effect::UpdatePartitionState {
                    tp: p0.clone(),
                    state,
                    expected_zk_version: 5
                },
                Effect::LeaderAndIsr {
                    brokers: vec![0, 2],
                    tp: p0.clone(),
                    is_new: false
                },
                Effect::UpdateMetadata {
                    brokers: vec![0, 2],
                    partitions: vec![p0]
                },
            ]
        );
    }

    #[test]
    fn last_isr_member_stays_in_the_isr_without_leading() {
        let mut ctx = ctx_with(&[], &[("t", &[&[1]])]);
        let p0 = tp("t", 0);
        let only = r("t", 0, 1);
        ctx.replica_states.insert(only.clone(), Online);
        ctx.leadership.insert(
            p0.clone(),
            LeaderIsrAndControllerEpoch {
                leader: 1,
                leader_epoch: 0,
                isr: vec![1],
                controller_epoch: 1,
                zk_version: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
        handle_state_changes(&mut ctx, std::slice::from_ref(&only), Offline);
        assert_eq!(ctx.leadership[&p0].leader, NO_LEADER);
        assert_eq!(ctx.leadership[&p0].isr, vec![1]);
    }

    #[test]
    fn offline_replica_on_dead_broker_sends_nothing() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[0, 1]])]);
        let replica = r("t", 0, 1);
        ctx.replica_states.insert(replica.clone(), Online);
        assert!(handle_state_changes(&mut ctx, std::slice::from_ref(&replica), Offline).is_empty());
        assert_eq!(ctx.replica_state(&replica), Offline);
    }
}
