//! `Effect`: what the pure state machines ask the event loop to do.
//!
//! The state machines change the [`ControllerContext`](crate::context::ControllerContext)
//! and return effects; only the event loop writes to the store or sends requests. Control
//! request effects name partitions, not payloads: the event loop builds the requests from
//! the context once every store write of the event is done, so a write that fails or finds
//! an existing znode is reflected in what brokers are told.

use model::{BrokerId, TopicName, TopicPartition};

use crate::context::LeaderIsrAndControllerEpoch;

/// One thing for the event loop to carry out, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Create `/brokers/topics/<t>/partitions/<p>/state` (and its parents), fenced on the
    /// controller epoch.
    CreatePartitionState {
        /// The partition.
        tp: TopicPartition,
        /// Its first leadership.
        state: LeaderIsrAndControllerEpoch,
    },
    /// Overwrite a partition's state znode at `expected_zk_version`, fenced on the epoch.
    UpdatePartitionState {
        /// The partition.
        tp: TopicPartition,
        /// The new leadership.
        state: LeaderIsrAndControllerEpoch,
        /// The version the znode must have.
        expected_zk_version: i32,
    },
    /// Send LeaderAndIsr for `tp` to these (live) brokers.
    LeaderAndIsr {
        /// Receivers.
        brokers: Vec<BrokerId>,
        /// The partition.
        tp: TopicPartition,
        /// Whether the replicas are new (the broker may create the log).
        is_new: bool,
    },
    /// Send UpdateMetadata for these partitions to these (live) brokers; an empty partition
    /// list still sends the live broker list.
    UpdateMetadata {
        /// Receivers.
        brokers: Vec<BrokerId>,
        /// Partitions whose metadata changed.
        partitions: Vec<TopicPartition>,
    },
    /// Send StopReplica for `tp` to `broker`.
    StopReplica {
        /// Receiver.
        broker: BrokerId,
        /// The partition.
        tp: TopicPartition,
        /// Whether the broker deletes the replica's log.
        delete: bool,
    },
    /// Delete `/brokers/topics/<t>` (recursively), `/config/topics/<t>` and
    /// `/admin/delete_topics/<t>`: the last step of a topic deletion.
    DeleteTopicZnodes(TopicName),
    /// Run the topic-deleted hook (dropping group offsets of the topic).
    TopicDeleted(TopicName),
    /// Write `/brokers/topics/<t>` from the context (replicas, `adding_replicas`,
    /// `removing_replicas`), fenced on the epoch: a reassignment started, changed or ended.
    /// Written once per event however often it is named, after the partition states.
    WriteTopicAssignment(TopicName),
    /// Remove `tp` from `/admin/reassign_partitions` (only when its target there is
    /// `replicas`, if given); the znode is deleted when no partition is left, as Kafka does.
    RemoveFromZkReassignment {
        /// The partition.
        tp: TopicPartition,
        /// The target it must have there to be removed (`None`: any).
        replicas: Option<Vec<BrokerId>>,
    },
}
