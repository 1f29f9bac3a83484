//! `ControllerContext`: the active controller's in-memory picture of the cluster.
//!
//! Loaded from the store on election and kept up to date by the event loop. The state
//! machines read and change it; they never touch the store themselves.

use std::collections::{BTreeMap, BTreeSet};

use model::{BrokerId, LeaderRecoveryState, TopicId, TopicName, TopicPartition};

use crate::partition_state_machine::PartitionState;
use crate::replica_state_machine::ReplicaState;

/// The leader Kafka puts in UpdateMetadata for a partition whose topic is being deleted.
pub const LEADER_DURING_DELETE: BrokerId = -2;
/// The leader epoch Kafka puts in StopReplica for a partition whose topic is being deleted.
pub const EPOCH_DURING_DELETE: i32 = -2;
/// "No leader" in partition state and in control requests.
pub const NO_LEADER: BrokerId = -1;

/// A live broker as its `/brokers/ids/<id>` registration describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    /// The broker id.
    pub id: BrokerId,
    /// Host of its inter-broker endpoint (what followers fetch from).
    pub host: String,
    /// Port of its inter-broker endpoint.
    pub port: i32,
    /// Its `broker.rack`, if set.
    pub rack: Option<String>,
    /// The broker epoch: the czxid of its registration znode.
    pub epoch: i64,
    /// Every endpoint it registered: (listener name, host, port, security protocol id), sent
    /// in UpdateMetadata so each listener's clients see that listener's endpoints.
    pub endpoints: Vec<(String, String, i32, i16)>,
}

impl LiveBroker {
    /// Its (host, port) on `listener`.
    pub fn endpoint(&self, listener: &str) -> Option<(&str, i32)> {
        self.endpoints
            .iter()
            .find(|(name, _, _, _)| name == listener)
            .map(|(_, host, port, _)| (host.as_str(), *port))
    }
}

/// Leadership of one partition as `/brokers/topics/<t>/partitions/<p>/state` holds it, plus
/// the znode version that conditional updates need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderIsrAndControllerEpoch {
    /// The leader broker, or [`NO_LEADER`].
    pub leader: BrokerId,
    /// Incremented on every leader change.
    pub leader_epoch: i32,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// The epoch of the controller that wrote this state.
    pub controller_epoch: i32,
    /// The state znode's version (Kafka's `zkVersion`, the partition epoch).
    pub zk_version: i32,
    /// KIP-704: RECOVERING from an unclean election until the leader reports RECOVERED in an
    /// AlterPartition; every other leader change keeps it, as Kafka's `newLeaderAndIsr`.
    pub leader_recovery_state: LeaderRecoveryState,
}

/// The replicas an ongoing reassignment of one partition adds and removes (Kafka's
/// `ReplicaAssignment.addingReplicas` / `removingReplicas`); the partition's replica set in
/// [`ControllerContext::assignments`] is then the target followed by the original replicas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reassigning {
    /// Replicas in the target that are not in the original set.
    pub adding: Vec<BrokerId>,
    /// Original replicas that are not in the target.
    pub removing: Vec<BrokerId>,
    /// The original replicas in their order (empty when not known: a reassignment started
    /// by Kafka's controller or a hand-written znode; then they are the replicas minus
    /// `adding`, in the target's order, as Kafka has them).
    pub origin: Vec<BrokerId>,
}

/// One replica: a partition on a broker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionAndReplica {
    /// The partition.
    pub tp: TopicPartition,
    /// The broker holding the replica.
    pub replica: BrokerId,
}

/// Everything the active controller knows. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct ControllerContext {
    /// This controller's epoch (the value of `/controller_epoch`).
    pub epoch: i32,
    /// The version of `/controller_epoch`: every write is conditional on it.
    pub epoch_zk_version: i32,
    /// Live brokers by id.
    pub live_brokers: BTreeMap<BrokerId, LiveBroker>,
    /// Every topic under `/brokers/topics`.
    pub all_topics: BTreeSet<TopicName>,
    /// Topic ids from the assignment znodes.
    pub topic_ids: BTreeMap<TopicName, TopicId>,
    /// Replica assignment of every partition, by topic and partition id.
    pub assignments: BTreeMap<TopicName, BTreeMap<i32, Vec<BrokerId>>>,
    /// Topics whose assignment znode names adding or removing replicas.
    pub topics_being_reassigned: BTreeSet<TopicName>,
    /// Partitions being reassigned (Kafka's `partitionsBeingReassigned`), with what their
    /// reassignment adds and removes. Kept in step with `topics_being_reassigned` by
    /// [`ControllerContext::set_reassigning`].
    pub reassignments: BTreeMap<TopicPartition, Reassigning>,
    /// Every broker this controller has seen registered, and every broker an assignment
    /// names: a reassignment may target one of them while it is down (it waits for it), but
    /// not a broker id the cluster has never had.
    pub known_brokers: BTreeSet<BrokerId>,
    /// Leadership of every partition that has a state znode.
    pub leadership: BTreeMap<TopicPartition, LeaderIsrAndControllerEpoch>,
    /// The partition state machine's states.
    pub partition_states: BTreeMap<TopicPartition, PartitionState>,
    /// The replica state machine's states.
    pub replica_states: BTreeMap<PartitionAndReplica, ReplicaState>,
    /// Topics queued for deletion (TopicDeletionManager's `topicsToBeDeleted`).
    pub topics_to_be_deleted: BTreeSet<TopicName>,
    /// Queued topics whose deletion cannot progress for now (a replica on an offline broker).
    pub topics_ineligible_for_deletion: BTreeSet<TopicName>,
    /// Queued topics whose partitions were already moved to NonExistent.
    pub topics_with_deletion_started: BTreeSet<TopicName>,
    /// Brokers in controlled shutdown (Kafka's `shuttingDownBrokerIds`): still registered and
    /// told about metadata, but never elected leader and dropped from ISRs.
    pub shutting_down_brokers: BTreeSet<BrokerId>,
    /// Topics whose effective `unclean.leader.election.enable` is true, as the event loop read
    /// it (topic override, else the broker default) for the topics about to elect a leader
    /// without a live in-sync replica. Elections of other topics are always clean.
    pub unclean_election_topics: BTreeSet<TopicName>,
}

impl ControllerContext {
    /// Whether `broker` is registered under `/brokers/ids` (shutting down or not): it can be
    /// sent requests.
    pub fn is_live(&self, broker: BrokerId) -> bool {
        self.live_brokers.contains_key(&broker)
    }

    /// Whether a replica on `broker` can lead or stay in an ISR: registered and not in
    /// controlled shutdown (Kafka's `isReplicaOnline`).
    pub fn is_replica_online(&self, broker: BrokerId) -> bool {
        self.is_live(broker) && !self.shutting_down_brokers.contains(&broker)
    }

    /// Whether the whole cluster is stopping: every broker still registered is in
    /// controlled shutdown (true too when none is left).
    pub fn cluster_stopping(&self) -> bool {
        self.live_brokers
            .keys()
            .all(|b| self.shutting_down_brokers.contains(b))
    }

    /// Live broker ids, ascending.
    pub fn live_broker_ids(&self) -> Vec<BrokerId> {
        self.live_brokers.keys().copied().collect()
    }

    /// The replicas of `tp`, in assignment order (the first is the preferred leader).
    pub fn replicas(&self, tp: &TopicPartition) -> &[BrokerId] {
        self.assignments
            .get(&tp.topic)
            .and_then(|partitions| partitions.get(&tp.partition))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Every partition of `topic`, ascending.
    pub fn partitions_for_topic(&self, topic: &TopicName) -> Vec<TopicPartition> {
        self.assignments
            .get(topic)
            .map(|partitions| {
                partitions
                    .keys()
                    .map(|&p| TopicPartition::new(topic.clone(), p))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every replica of every partition of `topic`.
    pub fn replicas_for_topic(&self, topic: &TopicName) -> Vec<PartitionAndReplica> {
        self.partitions_for_topic(topic)
            .into_iter()
            .flat_map(|tp| {
                self.replicas(&tp)
                    .iter()
                    .map(|&replica| PartitionAndReplica {
                        tp: tp.clone(),
                        replica,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The replicas of `partitions` on every broker.
    pub fn replicas_for_partitions(
        &self,
        partitions: &[TopicPartition],
    ) -> Vec<PartitionAndReplica> {
        partitions
            .iter()
            .flat_map(|tp| {
                self.replicas(tp)
                    .iter()
                    .map(|&replica| PartitionAndReplica {
                        tp: tp.clone(),
                        replica,
                    })
            })
            .collect()
    }

    /// Every replica hosted by `broker`.
    pub fn replicas_on_broker(&self, broker: BrokerId) -> Vec<PartitionAndReplica> {
        self.assignments
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions
                    .iter()
                    .filter(move |(_, replicas)| replicas.contains(&broker))
                    .map(move |(&p, _)| PartitionAndReplica {
                        tp: TopicPartition::new(topic.clone(), p),
                        replica: broker,
                    })
            })
            .collect()
    }

    /// Whether `topic` is queued for deletion.
    pub fn is_topic_queued_for_deletion(&self, topic: &TopicName) -> bool {
        self.topics_to_be_deleted.contains(topic)
    }

    /// The state of a partition; NonExistent when it has none.
    pub fn partition_state(&self, tp: &TopicPartition) -> PartitionState {
        self.partition_states
            .get(tp)
            .copied()
            .unwrap_or(PartitionState::NonExistent)
    }

    /// The state of a replica; NonExistent when it has none.
    pub fn replica_state(&self, replica: &PartitionAndReplica) -> ReplicaState {
        self.replica_states
            .get(replica)
            .copied()
            .unwrap_or(ReplicaState::NonExistent)
    }

    /// Whether every replica of `topic` is in `state`.
    pub fn are_all_replicas_in_state(&self, topic: &TopicName, state: ReplicaState) -> bool {
        self.replicas_for_topic(topic)
            .iter()
            .all(|r| self.replica_state(r) == state)
    }

    /// Whether some replica of `topic` is in `state`.
    pub fn is_any_replica_in_state(&self, topic: &TopicName, state: ReplicaState) -> bool {
        self.replicas_for_topic(topic)
            .iter()
            .any(|r| self.replica_state(r) == state)
    }

    /// Records (or, with `None` or nothing to add or remove, ends) the reassignment of `tp`,
    /// and whether its topic has a partition being reassigned.
    pub fn set_reassigning(&mut self, tp: &TopicPartition, reassigning: Option<Reassigning>) {
        match reassigning {
            Some(r) if !r.adding.is_empty() || !r.removing.is_empty() => {
                self.reassignments.insert(tp.clone(), r);
            }
            _ => {
                self.reassignments.remove(tp);
            }
        }
        if self.reassignments.keys().any(|p| p.topic == tp.topic) {
            self.topics_being_reassigned.insert(tp.topic.clone());
        } else {
            self.topics_being_reassigned.remove(&tp.topic);
        }
    }

    /// Records a topic's assignment (replacing what was known).
    pub fn set_topic_assignment(
        &mut self,
        topic: TopicName,
        assignment: BTreeMap<i32, Vec<BrokerId>>,
    ) {
        self.all_topics.insert(topic.clone());
        self.known_brokers
            .extend(assignment.values().flatten().copied());
        self.assignments.insert(topic, assignment);
    }

    /// Forgets everything about `topic` (after its deletion completes).
    pub fn remove_topic(&mut self, topic: &TopicName) {
        self.all_topics.remove(topic);
        self.topic_ids.remove(topic);
        self.assignments.remove(topic);
        self.topics_being_reassigned.remove(topic);
        self.reassignments.retain(|tp, _| &tp.topic != topic);
        self.leadership.retain(|tp, _| &tp.topic != topic);
        self.partition_states.retain(|tp, _| &tp.topic != topic);
        self.replica_states.retain(|r, _| &r.tp.topic != topic);
        self.topics_to_be_deleted.remove(topic);
        self.topics_ineligible_for_deletion.remove(topic);
        self.topics_with_deletion_started.remove(topic);
        self.unclean_election_topics.remove(topic);
    }

    /// The replicas of `topic` in `state`.
    pub fn replicas_in_state(
        &self,
        topic: &TopicName,
        state: ReplicaState,
    ) -> Vec<PartitionAndReplica> {
        self.replicas_for_topic(topic)
            .into_iter()
            .filter(|r| self.replica_state(r) == state)
            .collect()
    }

    /// Leaders and replicas per broker over every topic not being deleted: what placement
    /// balances against.
    pub fn cluster_load(&self) -> assignment::ClusterLoad {
        assignment::ClusterLoad::from_assignments(
            self.assignments
                .iter()
                .filter(|(t, _)| !self.is_topic_queued_for_deletion(t))
                .map(|(_, a)| a),
        )
    }
}

/// How many partitions or replicas a state-machine call moved, per state they left: the
/// one info line each call logs (the per-item lines are at debug).
#[derive(Debug)]
pub(crate) struct MovedFrom<S>(Vec<(S, usize)>);

impl<S> Default for MovedFrom<S> {
    fn default() -> Self {
        MovedFrom(Vec::new())
    }
}

impl<S: PartialEq> MovedFrom<S> {
    /// Counts one item that left `from`.
    pub(crate) fn add(&mut self, from: S) {
        match self.0.iter_mut().find(|(s, _)| *s == from) {
            Some((_, count)) => *count += 1,
            None => self.0.push((from, 1)),
        }
    }

    /// Items counted, over every state.
    pub(crate) fn total(&self) -> usize {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// The counts, in the order the states were first met.
    pub(crate) fn counts(&self) -> &[(S, usize)] {
        &self.0
    }
}
