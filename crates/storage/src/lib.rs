//! Partition logs on local disk. For now this is the [`LogManager`]: which log directory holds
//! which `<topic>-<partition>` directory, the `partition.metadata` file naming the topic id,
//! and Kafka's rename-then-delete of removed partitions. Segments, indexes, recovery and
//! retention come with the data plane.
//!
//! Knows nothing about leaders, replicas or the network: the broker tells it what to create
//! and what to delete.

pub mod checkpoint;
mod error;
pub mod log;
mod log_manager;
mod partition_metadata;

pub use error::StorageError;
pub use log_manager::{LogManager, LogManagerConfig, DELETE_DIR_SUFFIX};
pub use partition_metadata::{read_partition_metadata, PARTITION_METADATA_FILE};
