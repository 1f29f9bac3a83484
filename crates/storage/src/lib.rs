//! Partition logs on local disk: the [`LogManager`] (which log directory holds which
//! `<topic>-<partition>` directory, the `partition.metadata` file naming the topic id, and
//! Kafka's rename-then-delete of removed partitions), the partition [`log::Log`] (segments,
//! offset and time indexes, rolls, retention, recovery, truncation, replicated appends) and
//! Kafka's [`checkpoint`] files. Which logs are open, and when checkpoints are written, is the
//! `replication` crate's business.
//!
//! Knows nothing about leaders, replicas or the network: the broker tells it what to create
//! and what to delete.

pub mod checkpoint;
mod error;
mod file;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod log;
mod log_manager;
mod meta_properties;
pub mod open_files;
mod partition_metadata;
mod sync_group;

pub use error::StorageError;
#[cfg(any(test, feature = "fault-injection"))]
pub use file::faults;
pub use log_manager::{LogManager, LogManagerConfig, PartitionDir, DELETE_DIR_SUFFIX};
pub use meta_properties::{
    check_log_dirs, read_meta_properties, write_meta_properties, LogDirsState, MetaProperties,
    META_PROPERTIES_FILE,
};
pub use partition_metadata::{read_partition_metadata, PARTITION_METADATA_FILE};
pub use sync_group::{sync_dirs, EnteredGroup, SyncGroup};
