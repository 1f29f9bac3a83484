use std::path::PathBuf;

use model::{TopicId, TopicPartition};

/// Everything that can go wrong on disk, with the path involved.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// No log directory was configured.
    #[error("no log directory configured (set log.dirs)")]
    NoLogDirs,
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What we were doing ("create directory", "rename", ...).
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A `partition.metadata` file is not in Kafka's format.
    #[error("malformed partition metadata file {path}: {reason}")]
    MalformedPartitionMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A log directory's `meta.properties` is unreadable or names another cluster or broker.
    #[error("{path}: {reason}")]
    BadMetaProperties {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A checkpoint file is not in Kafka's format.
    #[error("malformed checkpoint file {path}: {reason}")]
    MalformedCheckpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The partition's directory already names another topic id (Kafka's
    /// `InconsistentTopicIdException`): a topic of the same name was deleted and re-created
    /// while this broker still held the old log.
    #[error("partition {tp} on disk has topic id {on_disk}, but {requested} was requested")]
    InconsistentTopicId {
        /// The partition.
        tp: TopicPartition,
        /// The id in `partition.metadata`.
        on_disk: TopicId,
        /// The id the caller named.
        requested: TopicId,
    },
}

impl StorageError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StorageError {
        let path = path.into();
        move |source| StorageError::Io { op, path, source }
    }
}
