//! One broker's queue of control requests, bounded, that never drops a request silently.
//!
//! Requests are built from the controller context, so each carries the latest state of the
//! partitions it names. When the queue is full, a new request is merged into the newest
//! queued request of its kind (per partition, the newer state wins): for UpdateMetadata
//! always, for LeaderAndIsr and StopReplica unless a StopReplica (resp. LeaderAndIsr) queued
//! after it names one of the same partitions, since moving the new request ahead of that one
//! would change what the broker ends up doing. When that is not possible the queue refuses
//! the request ([`Push::Full`]); the channel manager then replaces the queue with a resync
//! built from the context (everything the broker must know, at most three requests).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kafka_protocol::messages::{LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest};
use uuid::Uuid;

use crate::channel_manager::ControlRequest;

/// What [`RequestQueue::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Appended.
    Queued,
    /// Merged into a queued request of the same kind (the queue was full).
    Coalesced,
    /// Full, and the request could not be merged without reordering; nothing changed.
    Full,
}

/// A bounded FIFO of control requests for one broker. See the module docs.
#[derive(Debug)]
pub struct RequestQueue {
    requests: VecDeque<ControlRequest>,
    capacity: usize,
}

impl RequestQueue {
    /// An empty queue holding at most `capacity` requests (at least 1).
    pub fn new(capacity: usize) -> Self {
        RequestQueue {
            requests: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Appends `request`, or merges it when the queue is full.
    pub fn push(&mut self, request: ControlRequest) -> Push {
        if self.requests.len() < self.capacity {
            self.requests.push_back(request);
            return Push::Queued;
        }
        if self.coalesce(request) {
            Push::Coalesced
        } else {
            Push::Full
        }
    }

    /// The oldest request.
    pub fn pop(&mut self) -> Option<ControlRequest> {
        self.requests.pop_front()
    }

    /// How many requests wait.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Drops everything (before a resync); returns how many requests were dropped.
    pub fn clear(&mut self) -> usize {
        let n = self.requests.len();
        self.requests.clear();
        n
    }

    /// Merges `request` into the newest queued request of its kind, if that keeps the
    /// broker's outcome; false (and `request` is dropped, to be replaced by a resync)
    /// otherwise.
    fn coalesce(&mut self, request: ControlRequest) -> bool {
        let kind = Kind::of(&request);
        let Some(index) = self.requests.iter().rposition(|r| Kind::of(r) == kind) else {
            return false;
        };
        if let Some(other) = kind.ordered_against() {
            let names = partitions(&request);
            let conflict = self
                .requests
                .iter()
                .skip(index + 1)
                .filter(|r| Kind::of(r) == other)
                .any(|r| !partitions(r).is_disjoint(&names));
            if conflict {
                return false;
            }
        }
        merge(&mut self.requests[index], request)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    LeaderAndIsr,
    UpdateMetadata,
    StopReplica,
}

impl Kind {
    fn of(request: &ControlRequest) -> Kind {
        match request {
            ControlRequest::LeaderAndIsr(_) => Kind::LeaderAndIsr,
            ControlRequest::UpdateMetadata(_) => Kind::UpdateMetadata,
            ControlRequest::StopReplica { .. } => Kind::StopReplica,
        }
    }

    /// The kind whose order against this one matters for the same partition (becoming a
    /// replica vs stopping or deleting it). UpdateMetadata only feeds the metadata cache,
    /// where the newest state of a partition is the right one whatever came between.
    fn ordered_against(self) -> Option<Kind> {
        match self {
            Kind::LeaderAndIsr => Some(Kind::StopReplica),
            Kind::StopReplica => Some(Kind::LeaderAndIsr),
            Kind::UpdateMetadata => None,
        }
    }
}

/// The (topic, partition) pairs a LeaderAndIsr or StopReplica names.
fn partitions(request: &ControlRequest) -> BTreeSet<(String, i32)> {
    match request {
        ControlRequest::LeaderAndIsr(r) => r
            .topic_states
            .iter()
            .flat_map(|t| {
                t.partition_states
                    .iter()
                    .map(|p| (t.topic_name.0.to_string(), p.partition_index))
            })
            .collect(),
        ControlRequest::StopReplica { request, .. } => request
            .topic_states
            .iter()
            .flat_map(|t| {
                t.partition_states
                    .iter()
                    .map(|p| (t.topic_name.0.to_string(), p.partition_index))
            })
            .collect(),
        ControlRequest::UpdateMetadata(_) => BTreeSet::new(),
    }
}

/// Merges `new` into `old` (same kind): header fields and broker lists from `new`, and per
/// partition the newer state. A topic named with two different topic ids (deleted and
/// created again) is not merged (false, nothing changed).
fn merge(old: &mut ControlRequest, new: ControlRequest) -> bool {
    match (old, new) {
        (ControlRequest::LeaderAndIsr(old), ControlRequest::LeaderAndIsr(new)) => {
            if ids_conflict(
                old.topic_states
                    .iter()
                    .map(|t| (t.topic_name.0.as_str(), t.topic_id)),
                new.topic_states
                    .iter()
                    .map(|t| (t.topic_name.0.as_str(), t.topic_id)),
            ) {
                return false;
            }
            merge_leader_and_isr(old, new);
            true
        }
        (ControlRequest::UpdateMetadata(old), ControlRequest::UpdateMetadata(new)) => {
            if ids_conflict(
                old.topic_states
                    .iter()
                    .map(|t| (t.topic_name.0.as_str(), t.topic_id)),
                new.topic_states
                    .iter()
                    .map(|t| (t.topic_name.0.as_str(), t.topic_id)),
            ) {
                return false;
            }
            merge_update_metadata(old, new);
            true
        }
        (
            ControlRequest::StopReplica { request, deleted },
            ControlRequest::StopReplica {
                request: new,
                deleted: new_deleted,
            },
        ) => {
            merge_stop_replica(request, new);
            for tp in new_deleted {
                if !deleted.contains(&tp) {
                    deleted.push(tp);
                }
            }
            true
        }
        _ => false,
    }
}

fn ids_conflict<'a>(
    old: impl Iterator<Item = (&'a str, Uuid)>,
    new: impl Iterator<Item = (&'a str, Uuid)>,
) -> bool {
    let old: BTreeMap<&str, Uuid> = old.collect();
    new.into_iter()
        .any(|(name, id)| old.get(name).is_some_and(|&known| known != id))
}

fn merge_leader_and_isr(old: &mut LeaderAndIsrRequest, new: LeaderAndIsrRequest) {
    old.controller_id = new.controller_id;
    old.controller_epoch = new.controller_epoch;
    old.broker_epoch = new.broker_epoch;
    for leader in new.live_leaders {
        old.live_leaders.retain(|l| l.broker_id != leader.broker_id);
        old.live_leaders.push(leader);
    }
    for topic in new.topic_states {
        let Some(known) = old
            .topic_states
            .iter_mut()
            .find(|t| t.topic_name == topic.topic_name)
        else {
            old.topic_states.push(topic);
            continue;
        };
        for mut state in topic.partition_states {
            match known
                .partition_states
                .iter_mut()
                .find(|p| p.partition_index == state.partition_index)
            {
                Some(existing) => {
                    // The broker may create the log if either request allowed it.
                    state.is_new |= existing.is_new;
                    *existing = state;
                }
                None => known.partition_states.push(state),
            }
        }
    }
}

fn merge_update_metadata(old: &mut UpdateMetadataRequest, new: UpdateMetadataRequest) {
    old.controller_id = new.controller_id;
    old.controller_epoch = new.controller_epoch;
    old.broker_epoch = new.broker_epoch;
    old.live_brokers = new.live_brokers;
    for topic in new.topic_states {
        let Some(known) = old
            .topic_states
            .iter_mut()
            .find(|t| t.topic_name == topic.topic_name)
        else {
            old.topic_states.push(topic);
            continue;
        };
        for state in topic.partition_states {
            match known
                .partition_states
                .iter_mut()
                .find(|p| p.partition_index == state.partition_index)
            {
                Some(existing) => *existing = state,
                None => known.partition_states.push(state),
            }
        }
    }
}

fn merge_stop_replica(old: &mut StopReplicaRequest, new: StopReplicaRequest) {
    old.controller_id = new.controller_id;
    old.controller_epoch = new.controller_epoch;
    old.broker_epoch = new.broker_epoch;
    for topic in new.topic_states {
        let Some(known) = old
            .topic_states
            .iter_mut()
            .find(|t| t.topic_name == topic.topic_name)
        else {
            old.topic_states.push(topic);
            continue;
        };
        for mut state in topic.partition_states {
            match known
                .partition_states
                .iter_mut()
                .find(|p| p.partition_index == state.partition_index)
            {
                Some(existing) => {
                    state.delete_partition |= existing.delete_partition;
                    *existing = state;
                }
                None => known.partition_states.push(state),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use model::LeaderRecoveryState;

    use super::*;
    use crate::channel_manager::{
        leader_and_isr_request, stop_replica_request, update_metadata_request,
    };
    use crate::context::{ControllerContext, LeaderIsrAndControllerEpoch};
    use crate::test_support::{ctx_with, tp};

    fn ctx() -> ControllerContext {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1], &[1, 0], &[0, 1]])]);
        for p in 0..3 {
            set_leader(&mut ctx, p, 0, 1);
        }
        ctx
    }

    fn set_leader(ctx: &mut ControllerContext, partition: i32, leader: i32, epoch: i32) {
        ctx.leadership.insert(
            tp("t", partition),
            LeaderIsrAndControllerEpoch {
                leader,
                leader_epoch: epoch,
                isr: vec![0, 1],
                controller_epoch: 1,
                zk_version: epoch,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            },
        );
    }

    fn lai(ctx: &ControllerContext, partitions: &[i32]) -> ControlRequest {
        let partitions = partitions.iter().map(|&p| (tp("t", p), false)).collect();
        ControlRequest::LeaderAndIsr(
            leader_and_isr_request(ctx, 9, &ctx.live_brokers[&0], &partitions).unwrap(),
        )
    }

    fn um(ctx: &ControllerContext, partitions: &[i32]) -> ControlRequest {
        let partitions = partitions.iter().map(|&p| tp("t", p)).collect();
        ControlRequest::UpdateMetadata(update_metadata_request(
            ctx,
            9,
            &ctx.live_brokers[&0],
            &partitions,
        ))
    }

    fn sr(ctx: &ControllerContext, partitions: &[i32], delete: bool) -> ControlRequest {
        let map = partitions.iter().map(|&p| (tp("t", p), delete)).collect();
        ControlRequest::StopReplica {
            request: stop_replica_request(ctx, 9, &ctx.live_brokers[&0], &map),
            deleted: if delete {
                partitions.iter().map(|&p| tp("t", p)).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// (partition, leader, leader epoch) of a LeaderAndIsr or UpdateMetadata.
    fn states(request: &ControlRequest) -> Vec<(i32, i32, i32)> {
        let mut out: Vec<_> = match request {
            ControlRequest::LeaderAndIsr(r) => r.topic_states[0]
                .partition_states
                .iter()
                .map(|p| (p.partition_index, p.leader.0, p.leader_epoch))
                .collect(),
            ControlRequest::UpdateMetadata(r) => r.topic_states[0]
                .partition_states
                .iter()
                .map(|p| (p.partition_index, p.leader.0, p.leader_epoch))
                .collect(),
            ControlRequest::StopReplica { request, .. } => request.topic_states[0]
                .partition_states
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        i32::from(p.delete_partition),
                        p.leader_epoch,
                    )
                })
                .collect(),
        };
        out.sort();
        out
    }

    #[test]
    fn a_full_queue_merges_metadata_so_the_newest_state_per_partition_wins() {
        let mut ctx = ctx();
        let mut queue = RequestQueue::new(2);
        assert_eq!(queue.push(um(&ctx, &[0])), Push::Queued);
        assert_eq!(queue.push(lai(&ctx, &[0])), Push::Queued);
        set_leader(&mut ctx, 0, 1, 2);
        assert_eq!(queue.push(um(&ctx, &[0, 1])), Push::Coalesced);
        set_leader(&mut ctx, 1, 1, 3);
        assert_eq!(queue.push(um(&ctx, &[1])), Push::Coalesced);
        assert_eq!(queue.len(), 2);
        let first = queue.pop().unwrap();
        assert_eq!(states(&first), vec![(0, 1, 2), (1, 1, 3)]);
        assert!(matches!(queue.pop(), Some(ControlRequest::LeaderAndIsr(_))));
        assert!(queue.is_empty());
    }

    #[test]
    fn leader_and_isr_merges_unless_a_later_stop_replica_names_the_partition() {
        let mut ctx = ctx();
        let mut queue = RequestQueue::new(2);
        queue.push(lai(&ctx, &[0]));
        queue.push(sr(&ctx, &[1], false));
        set_leader(&mut ctx, 0, 1, 2);
        // p0 and p2 are not named by the queued StopReplica: merged into the LeaderAndIsr.
        assert_eq!(queue.push(lai(&ctx, &[0, 2])), Push::Coalesced);
        // p1 is: moving this ahead of the stop would leave the broker stopped; refused.
        assert_eq!(queue.push(lai(&ctx, &[1])), Push::Full);
        // StopReplica for p0 after a queued LeaderAndIsr for p0 would overtake nothing
        // (the StopReplica is the newest of its kind and comes last): merged.
        assert_eq!(queue.push(sr(&ctx, &[0], true)), Push::Coalesced);
        let first = queue.pop().unwrap();
        assert_eq!(states(&first), vec![(0, 1, 2), (2, 0, 1)]);
        let ControlRequest::StopReplica { deleted, .. } = queue.pop().unwrap() else {
            panic!("expected the StopReplica")
        };
        assert_eq!(deleted, vec![tp("t", 0)]);
    }

    #[test]
    fn stop_replica_merges_deletes_and_refuses_to_overtake_leader_and_isr() {
        let ctx = ctx();
        let mut queue = RequestQueue::new(2);
        queue.push(sr(&ctx, &[0], false));
        queue.push(lai(&ctx, &[1]));
        assert_eq!(queue.push(sr(&ctx, &[0, 2], true)), Push::Coalesced);
        assert_eq!(queue.push(sr(&ctx, &[1], true)), Push::Full);
        let first = queue.pop().unwrap();
        // Delete wins over a stop without delete.
        assert_eq!(states(&first), vec![(0, 1, 1), (2, 1, 1)]);
    }

    #[test]
    fn a_kind_not_in_the_queue_and_a_recreated_topic_are_refused() {
        let mut ctx = ctx();
        let mut queue = RequestQueue::new(1);
        queue.push(lai(&ctx, &[0]));
        assert_eq!(queue.push(um(&ctx, &[0])), Push::Full);
        ctx.topic_ids
            .insert(crate::test_support::name("t"), model::TopicId::random());
        assert_eq!(queue.push(lai(&ctx, &[0])), Push::Full);
        assert_eq!(queue.len(), 1);
    }
}
