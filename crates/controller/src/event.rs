//! `ControllerEvent`: everything the event loop processes, one at a time, in order.

use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, AlterPartitionRequest,
    AlterPartitionResponse, ControlledShutdownResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, ElectLeadersRequest, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

use model::{BrokerId, TopicPartition};

/// One unit of controller work.
#[derive(Debug)]
pub enum ControllerEvent {
    /// Run for controller (the first event).
    Startup,
    /// `/controller` was created, changed or deleted: re-elect if it is gone.
    ControllerChange,
    /// The children of `/brokers/ids` changed.
    BrokerChange,
    /// The children of `/brokers/topics` changed.
    TopicChange,
    /// `/brokers/topics/<t>` changed (maybe partitions were added).
    PartitionModifications(String),
    /// The children of `/admin/delete_topics` changed.
    TopicDeletion,
    /// A CreateTopics request.
    CreateTopics {
        /// The request.
        request: CreateTopicsRequest,
        /// Its version.
        api_version: i16,
        /// Where the response goes.
        reply: oneshot::Sender<CreateTopicsResponse>,
        /// When the request reached the controller: its timeout counts from here, and a
        /// request already past it when dequeued is answered REQUEST_TIMED_OUT unrun.
        received: Instant,
    },
    /// A CreatePartitions request.
    CreatePartitions {
        /// The request.
        request: CreatePartitionsRequest,
        /// Its version.
        api_version: i16,
        /// Where the response goes.
        reply: oneshot::Sender<CreatePartitionsResponse>,
        /// When the request reached the controller: its timeout counts from here, and a
        /// request already past it when dequeued is answered REQUEST_TIMED_OUT unrun.
        received: Instant,
    },
    /// A DeleteTopics request.
    DeleteTopics {
        /// The request.
        request: DeleteTopicsRequest,
        /// Its version.
        api_version: i16,
        /// Where the response goes.
        reply: oneshot::Sender<DeleteTopicsResponse>,
        /// When the request reached the controller: its timeout counts from here, and a
        /// request already past it when dequeued is answered REQUEST_TIMED_OUT unrun.
        received: Instant,
    },
    /// An AlterPartition request from a partition leader.
    AlterPartition {
        /// The request.
        request: AlterPartitionRequest,
        /// Its version.
        api_version: i16,
        /// Where the response goes.
        reply: oneshot::Sender<AlterPartitionResponse>,
    },
    /// A broker asks to give up its leaderships before it stops (ControlledShutdown).
    ControlledShutdown {
        /// The broker shutting down.
        broker_id: BrokerId,
        /// Its broker epoch as it knows it (-1: unknown, as before KIP-380).
        broker_epoch: i64,
        /// Where the response goes.
        reply: oneshot::Sender<ControlledShutdownResponse>,
    },
    /// A broker answered (or could not be sent) a StopReplica request.
    StopReplicaResponse {
        /// The broker.
        broker: BrokerId,
        /// Per partition that was to be deleted: its error code (0 = deleted).
        deleted: Vec<(TopicPartition, i16)>,
    },
    // ---- Replica leader elections (replica_election.rs) ----
    /// An ElectLeaders request.
    ElectLeaders {
        /// The request.
        request: ElectLeadersRequest,
        /// Where the answer goes: the response and the leader each elected partition got.
        reply: oneshot::Sender<crate::replica_election::ElectLeadersAnswer>,
    },
    /// `/admin/preferred_replica_election` was created, changed or deleted.
    PreferredReplicaElection,
    /// The periodic leader-imbalance check (`auto.leader.rebalance.enable`).
    AutoLeaderRebalance,
    // ---- Reassignment (crate::reassignment) ----
    /// An AlterPartitionReassignments request.
    AlterPartitionReassignments {
        /// The request.
        request: AlterPartitionReassignmentsRequest,
        /// Where the response goes.
        reply: oneshot::Sender<AlterPartitionReassignmentsResponse>,
    },
    /// A ListPartitionReassignments request.
    ListPartitionReassignments {
        /// The request.
        request: ListPartitionReassignmentsRequest,
        /// Where the response goes.
        reply: oneshot::Sender<ListPartitionReassignmentsResponse>,
    },
    /// `/admin/reassign_partitions` was created or changed.
    ZkPartitionReassignment,
    // ---- end of reassignment ----
    /// The session ended: resign for good.
    SessionExpired,
    /// Resign and stop the loop.
    Shutdown(oneshot::Sender<()>),
}

impl ControllerEvent {
    /// Every name [`ControllerEvent::state_name`] returns, so `/metrics` can serve each
    /// state's timer from the start (Kafka registers its `ControllerStats` timers at startup).
    pub const STATE_NAMES: [&'static str; 14] = [
        "ControllerChange",
        "BrokerChange",
        "TopicChange",
        "TopicDeletion",
        "CreateTopics",
        "CreatePartitions",
        "DeleteTopics",
        "ControlledShutdown",
        "IsrChange",
        "ControllerShutdown",
        "ManualLeaderBalance",
        "AutoLeaderBalance",
        "AlterPartitionReassignment",
        "ListPartitionReassignment",
    ];

    /// The controller state Kafka times this event under (`ControllerState`, the names of
    /// `ControllerStats.<state>RateAndTimeMs`); the admin requests Kafka's controller does
    /// not run as events are named after their API.
    pub fn state_name(&self) -> &'static str {
        match self {
            ControllerEvent::Startup
            | ControllerEvent::ControllerChange
            | ControllerEvent::SessionExpired => "ControllerChange",
            ControllerEvent::BrokerChange => "BrokerChange",
            ControllerEvent::TopicChange | ControllerEvent::PartitionModifications(_) => {
                "TopicChange"
            }
            ControllerEvent::TopicDeletion | ControllerEvent::StopReplicaResponse { .. } => {
                "TopicDeletion"
            }
            ControllerEvent::CreateTopics { .. } => "CreateTopics",
            ControllerEvent::CreatePartitions { .. } => "CreatePartitions",
            ControllerEvent::DeleteTopics { .. } => "DeleteTopics",
            ControllerEvent::ControlledShutdown { .. } => "ControlledShutdown",
            // Kafka 2.8 times AlterIsr under ControllerState.IsrChange.
            ControllerEvent::AlterPartition { .. } => "IsrChange",
            ControllerEvent::Shutdown(_) => "ControllerShutdown",
            ControllerEvent::ElectLeaders { .. } | ControllerEvent::PreferredReplicaElection => {
                "ManualLeaderBalance"
            }
            ControllerEvent::AutoLeaderRebalance => "AutoLeaderBalance",
            // Kafka 2.8 runs both the API and the znode under AlterPartitionReassignment.
            ControllerEvent::AlterPartitionReassignments { .. }
            | ControllerEvent::ZkPartitionReassignment => "AlterPartitionReassignment",
            ControllerEvent::ListPartitionReassignments { .. } => "ListPartitionReassignment",
        }
    }
}
