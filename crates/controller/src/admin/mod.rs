//! Phase 1 of every topic change (SPEC section 1): validate the request, fill defaults,
//! compute the assignment and write the store, inside the request. The event loop picks the
//! written znodes up through its watches, exactly as for znodes written by hand.

pub mod create_partitions;
pub mod create_topics;
pub mod delete_topics;

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use model::BrokerId;

/// Rules every new topic must satisfy (Kafka's `create.topic.policy.class.name`, as
/// configuration instead of a class). Refusals are `POLICY_VIOLATION`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTopicPolicy {
    /// The least number of partitions a topic may have.
    pub min_partitions: Option<i32>,
    /// The least replication factor a topic may have.
    pub min_replication_factor: Option<i16>,
    /// Config keys every new topic must set.
    pub required_configs: Vec<String>,
}

impl CreateTopicPolicy {
    /// Checks a topic about to be created; the message says which rule refused it.
    pub fn validate(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        if let Some(min) = self.min_partitions {
            if partitions < min {
                return Err(format!(
                    "Topic '{topic}' has {partitions} partitions, but the create topic policy requires at least {min}."
                ));
            }
        }
        if let Some(min) = self.min_replication_factor {
            if replication_factor < min {
                return Err(format!(
                    "Topic '{topic}' has replication factor {replication_factor}, but the create topic policy requires at least {min}."
                ));
            }
        }
        let missing: Vec<_> = self
            .required_configs
            .iter()
            .filter(|k| !configs.contains_key(*k))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "Topic '{topic}' does not set {}, which the create topic policy requires.",
                missing.join(", ")
            ));
        }
        Ok(())
    }
}

/// Why one topic of an admin request was refused: a Kafka error code and a message a
/// person can act on. The only place admin refusals become codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// INVALID_TOPIC_EXCEPTION.
    #[error("{0}")]
    InvalidTopic(String),
    /// TOPIC_ALREADY_EXISTS.
    #[error("{0}")]
    TopicAlreadyExists(String),
    /// INVALID_PARTITIONS.
    #[error("{0}")]
    InvalidPartitions(String),
    /// INVALID_REPLICATION_FACTOR.
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// INVALID_REPLICA_ASSIGNMENT.
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// INVALID_REQUEST.
    #[error("{0}")]
    InvalidRequest(String),
    /// INVALID_CONFIG.
    #[error("{0}")]
    InvalidConfig(String),
    /// POLICY_VIOLATION.
    #[error("{0}")]
    PolicyViolation(String),
    /// REASSIGNMENT_IN_PROGRESS.
    #[error("{0}")]
    ReassignmentInProgress(String),
    /// UNKNOWN_TOPIC_OR_PARTITION.
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    /// UNKNOWN_TOPIC_ID.
    #[error("{0}")]
    UnknownTopicId(String),
    /// TOPIC_DELETION_DISABLED.
    #[error("{0}")]
    TopicDeletionDisabled(String),
    /// NOT_CONTROLLER (the controller moved while handling the request).
    #[error("{0}")]
    NotController(String),
    /// UNKNOWN_SERVER_ERROR (the store failed).
    #[error("{0}")]
    Unknown(String),
}

impl AdminError {
    /// The Kafka error code.
    pub fn code(&self) -> i16 {
        let error = match self {
            AdminError::InvalidTopic(_) => ResponseError::InvalidTopicException,
            AdminError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
            AdminError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
            AdminError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
            AdminError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            AdminError::InvalidRequest(_) => ResponseError::InvalidRequest,
            AdminError::InvalidConfig(_) => ResponseError::InvalidConfig,
            AdminError::PolicyViolation(_) => ResponseError::PolicyViolation,
            AdminError::ReassignmentInProgress(_) => ResponseError::ReassignmentInProgress,
            AdminError::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
            AdminError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
            AdminError::TopicDeletionDisabled(_) => ResponseError::TopicDeletionDisabled,
            AdminError::NotController(_) => ResponseError::NotController,
            AdminError::Unknown(_) => ResponseError::UnknownServerError,
        };
        error.code()
    }

    /// A store failure while writing: NOT_CONTROLLER when the epoch fence refused it.
    pub(crate) fn from_store(err: znodes::zk_client::ZkClientError) -> AdminError {
        match err {
            znodes::zk_client::ZkClientError::ControllerMoved { .. } => {
                AdminError::NotController("This broker is no longer the controller.".to_owned())
            }
            other => AdminError::Unknown(format!("Metadata store error: {other}")),
        }
    }

    /// A placement failure, with the code Kafka gives it.
    pub(crate) fn from_assignment(err: assignment::AssignmentError) -> AdminError {
        use assignment::AssignmentError as E;
        let message = err.to_string();
        match err {
            E::InvalidPartitions(_)
            | E::TooManyPartitions { .. }
            | E::PartitionsNotIncreased { .. } => AdminError::InvalidPartitions(message),
            E::ReplicationFactorNotPositive(_)
            | E::InvalidReplicationFactor { .. }
            | E::NoBrokers => AdminError::InvalidReplicationFactor(message),
            E::MissingPartitionZero { .. } => AdminError::InvalidReplicaAssignment(message),
            _ => AdminError::Unknown(message),
        }
    }
}

/// Checks an explicit replica assignment as Kafka's `validateTopicCreate` does.
pub(crate) fn validate_create_assignment(
    assignment: &BTreeMap<i32, Vec<BrokerId>>,
    count: usize,
) -> Result<(), AdminError> {
    if assignment.len() != count {
        return Err(AdminError::InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence (a partition index appears twice)".to_owned(),
        ));
    }
    if let Some((p, _)) = assignment.iter().find(|(_, replicas)| replicas.is_empty()) {
        return Err(AdminError::InvalidReplicaAssignment(format!(
            "Cannot have replication factor of 0 for partition id {p}."
        )));
    }
    let sizes: std::collections::BTreeSet<_> = assignment.values().map(Vec::len).collect();
    if sizes.len() != 1 {
        return Err(AdminError::InvalidReplicaAssignment(
            "All partitions should have the same number of replicas".to_owned(),
        ));
    }
    for (p, replicas) in assignment {
        let distinct: std::collections::BTreeSet<_> = replicas.iter().collect();
        if distinct.len() != replicas.len() {
            return Err(AdminError::InvalidReplicaAssignment(format!(
                "Duplicate replica assignment found: partition {p} has replicas {replicas:?}"
            )));
        }
    }
    if !assignment.keys().copied().eq(0..assignment.len() as i32) {
        return Err(AdminError::InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence".to_owned(),
        ));
    }
    Ok(())
}

/// Live brokers as placement sees them, sorted by id.
pub(crate) fn broker_metadata(
    ctx: &crate::context::ControllerContext,
) -> Vec<assignment::BrokerMetadata> {
    ctx.live_brokers
        .values()
        .map(|b| assignment::BrokerMetadata {
            id: b.id,
            rack: b.rack.clone(),
        })
        .collect()
}

/// What a successful admin result waits for before the response goes out (Kafka's delayed
/// create/delete operations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwaitCondition {
    /// Every partition below `partitions` has a leader.
    Online {
        /// The topic.
        topic: model::TopicName,
        /// Its partition count after the request.
        partitions: i32,
    },
    /// The topic is gone.
    Deleted(model::TopicName),
    /// Nothing more in the context: the control requests the event queued (met at once, so
    /// the answer waits only for every broker to have them).
    Sent,
}

/// One result of a response that waits for `condition` (REQUEST_TIMED_OUT if it is not met
/// before the request's timeout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Await {
    /// The index of the result in the response.
    pub index: usize,
    /// What it waits for.
    pub condition: AwaitCondition,
}
