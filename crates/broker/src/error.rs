use std::path::PathBuf;

/// Why a broker could not start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The embedded metadata store could not be opened.
    #[error("cannot open the metadata store in {path}: {source}")]
    OpenStore {
        /// The store directory.
        path: PathBuf,
        /// What the store said.
        source: metastore::Error,
    },
    /// The ZooKeeper ensemble could not be reached.
    #[error("cannot connect to ZooKeeper at {connect}: {source}")]
    ConnectZooKeeper {
        /// `zookeeper.connect`.
        connect: String,
        /// What the client said.
        source: metastore::Error,
    },
    /// A metadata store operation failed during start-up.
    #[error("metadata store: {0}")]
    Store(#[from] znodes::zk_client::ZkClientError),
    /// Another live broker registered the same `broker.id`.
    #[error(
        "broker.id {0} is already registered by another live broker (/brokers/ids/{0} exists)"
    )]
    DuplicateBrokerId(model::BrokerId),
    /// The log directories could not be opened.
    #[error("log directories: {0}")]
    Storage(#[from] storage::StorageError),
    /// The broker's log directories are new (no `meta.properties`, no partitions) but the
    /// store places replicas on it: its logs are somewhere else (another data directory, a
    /// wrong `log.dirs`), and starting would serve those partitions as empty. The message
    /// names the directories, the store and where logs were found.
    #[error("{0}")]
    LogsElsewhere(String),
    /// A listener could not be bound.
    #[error("cannot bind {what} listener on {addr}: {source}")]
    Bind {
        /// "Kafka" or "admin".
        what: &'static str,
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
}
