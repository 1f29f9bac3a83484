//! A ZooKeeper-model metadata store: hierarchical znodes with versions and stats, ephemeral
//! and sequential nodes, sessions, one-shot watches and atomic multi-ops.
//!
//! Knows nothing about Kafka: `znodes` owns every path and JSON format. Two backends sit
//! behind one [`Client`]: an embedded durable store (no other process needed) and a real
//! ZooKeeper ensemble.
//!
//! # The contract (what every backend guarantees)
//! - Paths are absolute (`/a/b`), with no trailing slash except the root `/`.
//! - `version` starts at 0 on create and increases by one on every `set_data`; `cversion`
//!   increases on every child create/delete. Conditional writes take `Some(expected)` and fail
//!   with [`Error::BadVersion`]; `None` means "any version" (ZooKeeper's -1).
//! - Sequential nodes get a 10-digit zero-padded suffix from the parent's counter.
//! - Ephemeral nodes belong to the session of the client that created them and vanish when
//!   that session is closed or expires; they cannot have children.
//! - Watches are one-shot and are registered by passing `watch: true` to a read. Every watch
//!   event and session event of one client is delivered on that client's single
//!   [`Events`] stream, in the order the changes were applied to the store.
//! - [`Client::multi`] applies all its ops or none.
//!
//! # The API (both backends, one concrete type)
//! ```text
//! #[derive(Clone)] pub struct Client            // cheap handle to one session
//! impl Client {
//!     async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String>   // the created path
//!     async fn create_recursive(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> // parents persistent, empty
//!     async fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)>          // watch: data change / delete
//!     async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>>               // watch: create / change / delete
//!     async fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>>          // sorted names; watch: child change / delete
//!     async fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat>
//!     async fn delete(&self, path: &str, version: Option<i32>) -> Result<()>
//!     async fn delete_recursive(&self, path: &str) -> Result<()>                            // Ok if already missing
//!     async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>>                          // Error::Multi on failure
//!     fn session_id(&self) -> i64
//!     async fn close(&self)                                                                 // ends the session
//! }
//! pub struct Events; impl Events { async fn recv(&mut self) -> Option<Event> }           // None once closed/expired
//!
//! #[derive(Clone)] pub struct EmbeddedStore     // one durable store shared by in-process clients
//! impl EmbeddedStore {
//!     fn open(dir: &Path) -> Result<EmbeddedStore>                                          // reload; drop old ephemerals
//!     fn connect(&self, opts: SessionOptions) -> (Client, Events)
//!     fn expire_session(&self, session_id: i64)                                             // test hook: as if it timed out
//! }
//! async fn connect_zookeeper(connect: &str /* "h:p[,h:p]/chroot" */, opts: SessionOptions) -> Result<(Client, Events)>
//! ```

use std::time::Duration;

mod client;
mod durable;
mod embedded;
mod path;
mod tree;
mod watch;
mod zookeeper;

pub use client::{Client, Events};
pub use embedded::{CommitStats, EmbeddedStore, STORE_FILE};
pub use zookeeper::connect_zookeeper;

/// Where a broker keeps its embedded store, relative to its data directory
/// (`<data-dir>/metadata/`). The broker and `gregor meta --data-dir` both use it.
pub const EMBEDDED_SUBDIR: &str = "metadata";

/// The result type of every store operation.
pub type Result<T> = std::result::Result<T, Error>;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
}

impl CreateMode {
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// A node's metadata, with ZooKeeper's fields and meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// Transaction id of the create.
    pub czxid: i64,
    /// Transaction id of the last data change.
    pub mzxid: i64,
    /// Transaction id of the last child change.
    pub pzxid: i64,
    /// Milliseconds since the epoch at create.
    pub ctime: i64,
    /// Milliseconds since the epoch at the last data change.
    pub mtime: i64,
    /// Number of data changes.
    pub version: i32,
    /// Number of child changes.
    pub cversion: i32,
    /// Session id of the owner if the node is ephemeral, else 0.
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
}

/// One operation of an atomic [`Client::multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    /// Succeeds only if the node exists with this version (ZooKeeper's check op).
    Check {
        path: String,
        version: i32,
    },
}

/// The result of one op of a successful multi, in op order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The created path (with its sequence suffix for sequential nodes).
    Created(String),
    SetData(Stat),
    Deleted,
    Checked,
}

/// What changed, for a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchedEventKind {
    NodeCreated,
    NodeDeleted,
    NodeDataChanged,
    NodeChildrenChanged,
}

/// A fired one-shot watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub kind: WatchedEventKind,
    pub path: String,
}

/// The life of a session as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Connected,
    /// Temporarily disconnected; the session may still be alive (ZooKeeper backend only).
    Disconnected,
    /// The session is gone: its ephemeral nodes are deleted and its watches are dropped.
    /// The owner must open a new client and re-register.
    Expired,
    /// Closed by its owner.
    Closed,
}

/// Everything delivered on a client's [`Events`] stream, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Watch(WatchedEvent),
    Session(SessionState),
}

/// Store errors, typed as ZooKeeper's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("no node at {0}")]
    NoNode(String),
    #[error("node {0} already exists")]
    NodeExists(String),
    #[error("version mismatch at {path}: expected {expected}")]
    BadVersion { path: String, expected: i32 },
    #[error("node {0} has children")]
    NotEmpty(String),
    #[error("ephemeral node {0} cannot have children")]
    NoChildrenForEphemerals(String),
    #[error("invalid path or argument: {0}")]
    BadArguments(String),
    /// Op `index` of a multi failed with `source`; nothing was applied.
    #[error("multi op {index} failed: {source}")]
    Multi { index: usize, source: Box<Error> },
    #[error("session expired")]
    SessionExpired,
    #[error("client closed")]
    Closed,
    #[error("connection to the store lost")]
    ConnectionLoss,
    #[error("store backend error: {0}")]
    Backend(String),
    /// The embedded store file is open in another process (or another handle of this one),
    /// typically a running server.
    #[error(
        "the store at {0} is locked by another process (is a server running on this data dir?)"
    )]
    StoreLocked(String),
}

/// Session options common to both backends.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub session_timeout: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        // Kafka's zookeeper.session.timeout.ms default.
        SessionOptions {
            session_timeout: Duration::from_millis(18_000),
        }
    }
}
