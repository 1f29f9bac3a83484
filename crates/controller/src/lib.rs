//! The controller: topic administration (phase 1, inside the request: validate, fill
//! defaults, place replicas, write the store) and the active controller's event loop
//! (phase 2: turn store changes into partition and replica state transitions, partition
//! state znodes and LeaderAndIsr / UpdateMetadata / StopReplica requests to brokers).
//!
//! Owns election through `/controller`, the controller context, the two state machines, the
//! topic deletion manager and the per-broker control request queues. Does not own znode paths
//! or JSON (`znodes`), placement (`assignment`), the wire client (`client`) or anything a
//! broker does with a control request (`broker`).
//!
//! The state machines and the deletion manager are pure (`ControllerContext` in,
//! [`effect::Effect`]s out); [`core::Core`] decides how they are carried out (a step function
//! in raft-rs's `RawNode` shape, no I/O); only the event loop's task writes to the store or
//! sends requests, and every controller write is conditional on the controller epoch's znode
//! version (the election itself aside).

pub mod admin;
pub mod alter_partition;
pub mod channel_manager;
pub mod context;
pub mod core;
pub mod effect;
pub mod election;
pub mod event;
pub mod event_loop;
pub mod lifecycle;
pub mod partition_state_machine;
pub mod reassignment;
pub mod replica_election;
pub mod replica_state_machine;
pub mod request_queue;
pub mod topic_deletion;

mod handle;
#[cfg(test)]
mod replication_sim;
#[cfg(test)]
mod simulation_tests;
#[cfg(test)]
mod test_support;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use model::{BrokerId, TopicName};

pub use admin::CreateTopicPolicy;
pub use handle::{start, ControllerHandle};

/// How many events may wait for the controller's event loop.
pub const CONTROLLER_QUEUE_CAPACITY: usize = 1024;

/// A function run after a topic's deletion completes (group offsets of the topic are dropped
/// here once consumer groups exist).
#[derive(Clone, Default)]
pub struct TopicDeletedHook(Option<HookFn>);

type HookFn = Arc<dyn Fn(&TopicName) + Send + Sync>;

impl TopicDeletedHook {
    /// A hook running `f`.
    pub fn new(f: impl Fn(&TopicName) + Send + Sync + 'static) -> Self {
        TopicDeletedHook(Some(Arc::new(f)))
    }

    /// Runs the hook, if any.
    pub fn run(&self, topic: &TopicName) {
        if let Some(f) = &self.0 {
            f(topic);
        }
    }
}

impl fmt::Debug for TopicDeletedHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "TopicDeletedHook(set)"
        } else {
            "TopicDeletedHook(none)"
        })
    }
}

/// A function told how long each controller event took, by the name of the controller
/// state Kafka times it under (`ControllerStats.<state>RateAndTimeMs`); the broker's
/// `/metrics` keeps the histograms.
#[derive(Clone, Default)]
pub struct EventObserver(Option<ObserverFn>);

type ObserverFn = Arc<dyn Fn(&'static str, Duration) + Send + Sync>;

impl EventObserver {
    /// An observer running `f`.
    pub fn new(f: impl Fn(&'static str, Duration) + Send + Sync + 'static) -> Self {
        EventObserver(Some(Arc::new(f)))
    }

    /// Tells the observer, if any.
    pub fn observe(&self, state: &'static str, elapsed: Duration) {
        if let Some(f) = &self.0 {
            f(state, elapsed);
        }
    }
}

impl fmt::Debug for EventObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "EventObserver(set)"
        } else {
            "EventObserver(none)"
        })
    }
}

/// The controller's settings, named after Kafka's broker configs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// This broker's id (`broker.id`).
    pub broker_id: BrokerId,
    /// Partitions of a topic created with -1 (`num.partitions`).
    pub num_partitions: i32,
    /// Replication factor of a topic created with -1 (`default.replication.factor`).
    pub default_replication_factor: i16,
    /// Whether DeleteTopics deletes (`delete.topic.enable`).
    pub delete_topic_enable: bool,
    /// Placement of new topics and partitions (`placement.strategy`).
    pub placement_strategy: assignment::Strategy,
    /// Rules a new topic must satisfy (`create.topic.policy.*`).
    pub create_topic_policy: CreateTopicPolicy,
    /// Timeout of each control request to a broker (`controller.socket.timeout.ms`).
    pub request_timeout: Duration,
    /// Run after a topic's deletion completes.
    pub on_topic_deleted: TopicDeletedHook,
    /// The broker default of `unclean.leader.election.enable` (a topic override wins).
    pub unclean_leader_election_enable: bool,
    /// The most partitions one CreateTopics or CreatePartitions request may add
    /// (`max.partitions.per.request`; Kafka's KRaft controller has the same cap of 10,000).
    pub max_partitions_per_request: i32,
    /// The cluster's control-plane secret: control requests carry a proof made with it, so
    /// brokers can tell them from forgeries. `None` sends no proof (tests with fake brokers).
    pub control_plane_key: Option<security::control_plane::ControlPlaneKey>,
    /// `inter.broker.listener.name`: the endpoint followers fetch from.
    pub inter_broker_listener: String,
    /// Where control requests go: `control.plane.listener.name`, else the inter-broker
    /// listener.
    pub control_plane_listener: String,
    /// How the channel manager connects there (TLS, the broker's SASL login).
    pub control_plane_security: client::Security,
    /// Told how long each event took.
    pub on_event: EventObserver,
    /// Whether the controller moves leaderships back to the preferred replicas by itself
    /// (`auto.leader.rebalance.enable`).
    pub auto_leader_rebalance_enable: bool,
    /// The share of a broker's preferred partitions that may be led elsewhere before the
    /// check moves them back, in percent (`leader.imbalance.per.broker.percentage`).
    pub leader_imbalance_per_broker_percentage: u32,
    /// How often the check runs (`leader.imbalance.check.interval.seconds`).
    pub leader_imbalance_check_interval: Duration,
}

/// The default of [`ControllerConfig::max_partitions_per_request`].
pub const DEFAULT_MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            broker_id: 0,
            num_partitions: 1,
            default_replication_factor: 1,
            delete_topic_enable: true,
            placement_strategy: assignment::Strategy::Balanced,
            create_topic_policy: CreateTopicPolicy::default(),
            request_timeout: Duration::from_millis(30_000),
            on_topic_deleted: TopicDeletedHook::default(),
            unclean_leader_election_enable: false,
            max_partitions_per_request: DEFAULT_MAX_PARTITIONS_PER_REQUEST,
            control_plane_key: None,
            inter_broker_listener: "PLAINTEXT".to_owned(),
            control_plane_listener: "PLAINTEXT".to_owned(),
            control_plane_security: client::Security::default(),
            on_event: EventObserver::default(),
            auto_leader_rebalance_enable: true,
            leader_imbalance_per_broker_percentage: 10,
            leader_imbalance_check_interval: Duration::from_secs(300),
        }
    }
}

/// Errors of the controller's store work.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Another controller was elected: the epoch fence refused our write.
    #[error("controller moved: another broker was elected controller since epoch {epoch}")]
    ControllerMoved {
        /// The epoch this controller held.
        epoch: i32,
    },
    /// The store refused or failed an operation.
    #[error("metadata store operation failed: {0}")]
    Store(#[from] znodes::zk_client::ZkClientError),
}
