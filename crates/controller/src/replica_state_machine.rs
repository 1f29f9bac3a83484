//! The replica state machine (Kafka's `ZkReplicaStateMachine`), pure: it changes the
//! [`ControllerContext`] and returns [`Effect`]s for the event loop to carry out.

use tracing::{error, info};

use crate::context::{ControllerContext, PartitionAndReplica};
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
            // Followers stop fetching; a dead broker cannot be told.
            ReplicaState::Offline if ctx.is_live(broker) => {
                effects.push(Effect::StopReplica {
                    broker,
                    tp: tp.clone(),
                    delete: false,
                });
            }
            ReplicaState::ReplicaDeletionStarted => {
                effects.push(Effect::StopReplica {
                    broker,
                    tp: tp.clone(),
                    delete: true,
                });
            }
            _ => {}
        }
        info!(
            target: "state_change",
            controller_epoch = ctx.epoch, %tp, replica = broker, from = ?current, to = ?target,
            "replica state change"
        );
        if target == ReplicaState::NonExistent {
            ctx.replica_states.remove(replica);
        } else {
            ctx.replica_states.insert(replica.clone(), target);
        }
    }
    effects
}

#[cfg(test)]
mod tests {
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
    fn offline_replica_on_dead_broker_sends_nothing() {
        let mut ctx = ctx_with(&[0], &[("t", &[&[0, 1]])]);
        let replica = r("t", 0, 1);
        ctx.replica_states.insert(replica.clone(), Online);
        assert!(handle_state_changes(&mut ctx, std::slice::from_ref(&replica), Offline).is_empty());
        assert_eq!(ctx.replica_state(&replica), Offline);
    }
}
