//! Domain nouns shared by every crate: broker ids, topic names and ids, topic-partitions,
//! replica-assignment strings, topic-level configs and a partition's leader recovery state.
//!
//! Pure data and validation: no I/O, no tokio, no serde. Every rule about what a legal topic
//! name, replica-assignment string or topic config value is lives here and only here; other
//! crates take the validated types ([`TopicName`], [`TopicConfig`]) instead of re-checking
//! strings. The JSON shapes these values take in the metadata store belong to `znodes`.

mod leader_recovery;
pub mod replica_assignment;
mod topic;
pub mod topic_config;
mod topic_id;

pub use leader_recovery::LeaderRecoveryState;
pub use replica_assignment::ReplicaAssignmentError;
pub use topic::{TopicError, TopicName, TopicPartition, INTERNAL_TOPICS, MAX_TOPIC_NAME_LENGTH};
pub use topic_config::{ConfigError, TopicConfig};
pub use topic_id::{TopicId, TopicIdError};

/// A broker's numeric id (`broker.id`), as Kafka's `int32`.
pub type BrokerId = i32;
