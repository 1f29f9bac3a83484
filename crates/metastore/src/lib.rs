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
//! # Ordering and delivery guarantees, per backend
//! - Embedded: one writer applies every change in zxid order and queues the fired events on
//!   each session's stream before it acknowledges the write and before any read can see the
//!   change. So events arrive in exact zxid order, a client sees the event for a watched node
//!   before it can read the node's new data, and no event is lost while the session lives.
//! - ZooKeeper: each client's events come from one persistent recursive watch on its chroot,
//!   which ZooKeeper sends in commit order on the session's connection; one-shot semantics
//!   are applied on our side. Events arrive in ZooKeeper's commit order. A watch never misses
//!   a change made after its read and never fires for a change the read already saw; when a
//!   change races the read, its event may be queued slightly late (after changes received
//!   meanwhile). After a reconnection (`Session(Disconnected)` then `Session(Connected)`),
//!   every registered watch fires once, because ZooKeeper does not resend missed events of
//!   persistent watches; re-read on every event. See the `zookeeper` module for details.
//! - Both: a session's stream ends (`recv` returns `None`) right after its
//!   `Event::Session(Closed | Expired)`. `Session(Connected)` is only sent after a
//!   `Session(Disconnected)`, never at the start.
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
//!     async fn expire_session(&self) -> Result<()>                                          // fault injection: expire this session
//! }
//! pub struct Events; impl Events {
//!     async fn recv(&mut self) -> Option<Event>                                             // None once closed/expired
//!     fn try_recv(&mut self) -> Option<Event>
//! }
//!
//! #[derive(Clone)] pub struct EmbeddedStore     // one durable store shared by in-process clients
//! impl EmbeddedStore {
//!     fn open(dir: &Path) -> Result<EmbeddedStore>                                          // reload; drop old ephemerals; Error::StoreLocked
//!     fn open_read_only(dir: &Path) -> Result<EmbeddedStore>                                // snapshot of a stopped server's store
//!     fn open_in_memory() -> EmbeddedStore                                                  // not durable; for tests
//!     fn connect(&self, opts: SessionOptions) -> (Client, Events)
//!     fn expire_session(&self, session_id: i64)                                             // test hook: as if it timed out
//!     async fn close(&self)                                                                 // end all sessions, release the file
//!     async fn halt(&self)                                                                  // release the file like a killed process
//!     fn node_count(&self) -> usize; fn last_zxid(&self) -> i64; fn commit_stats(&self) -> CommitStats
//! }
//! async fn connect_zookeeper(connect: &str /* "h:p[,h:p]/chroot" */, opts: SessionOptions) -> Result<(Client, Events)>
//! pub const EMBEDDED_SUBDIR: &str = "metadata";   // <data-dir>/metadata/ holds a broker's embedded store
//! ```
//!
//! The embedded store is a redb file written by one group-committing writer (see the
//! `embedded` and `durable` modules); the ZooKeeper backend goes through the
//! `zookeeper-client` crate (ZooKeeper 3.6 or later, for persistent recursive watches).

use std::time::Duration;

mod client;
mod durable;
mod embedded;
mod event_queue;
mod path;
mod tree;
mod watch;
mod zookeeper;

pub use client::{Client, Events};
#[doc(hidden)]
pub use durable::fuzzing;
pub use embedded::{CommitStats, EmbeddedStore, DEFAULT_CACHE_BYTES, STORE_FILE};
pub use zookeeper::connect_zookeeper;

/// Where a broker keeps its embedded store, relative to its data directory
/// (`<data-dir>/metadata/`). The broker and `gregor meta --data-dir` both use it.
pub const EMBEDDED_SUBDIR: &str = "metadata";

/// The result type of every store operation.
pub type Result<T> = std::result::Result<T, Error>;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Deleted when the creating session ends; cannot have children.
    Ephemeral,
    /// Persistent, with a 10-digit sequence suffix appended to the name.
    PersistentSequential,
    /// Ephemeral, with a 10-digit sequence suffix appended to the name.
    EphemeralSequential,
}

impl CreateMode {
    /// Whether the node vanishes with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
    /// Whether the name gets a sequence suffix.
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
    /// Length of the data in bytes.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
}

/// One operation of an atomic [`Client::multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Like [`Client::create`].
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    },
    /// Like [`Client::set_data`].
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    /// Like [`Client::delete`].
    Delete { path: String, version: Option<i32> },
    /// Succeeds only if the node exists with this version (ZooKeeper's check op).
    Check { path: String, version: i32 },
}

/// The result of one op of a successful multi, in op order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The created path (with its sequence suffix for sequential nodes).
    Created(String),
    /// The node's stat after the change.
    SetData(Stat),
    /// The node was deleted.
    Deleted,
    /// The check passed.
    Checked,
}

/// What changed, for a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchedEventKind {
    /// The node was created (fires exists watches set on a missing node).
    NodeCreated,
    /// The node was deleted (fires data, exists and child watches).
    NodeDeleted,
    /// The node's data was set (fires data and exists watches).
    NodeDataChanged,
    /// A child was created or deleted (fires child watches).
    NodeChildrenChanged,
}

/// A fired one-shot watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened.
    pub kind: WatchedEventKind,
    /// The watched node's path.
    pub path: String,
}

/// The life of a session as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Connected again after a [`SessionState::Disconnected`] (ZooKeeper backend only).
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
    /// A one-shot watch fired.
    Watch(WatchedEvent),
    /// The session's state changed.
    Session(SessionState),
}

/// Store errors, typed as ZooKeeper's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The node (or, for a create, its parent) does not exist.
    #[error("no node at {0}")]
    NoNode(String),
    /// A create found the node already there.
    #[error("node {0} already exists")]
    NodeExists(String),
    /// A conditional write found another version (`expected` is -1 when ZooKeeper did not
    /// say which version was asked for).
    #[error("version mismatch at {path}: expected {expected}")]
    BadVersion { path: String, expected: i32 },
    /// A delete found children.
    #[error("node {0} has children")]
    NotEmpty(String),
    /// A create under an ephemeral node.
    #[error("ephemeral node {0} cannot have children")]
    NoChildrenForEphemerals(String),
    /// An invalid path, or a write to a read-only snapshot.
    #[error("invalid path or argument: {0}")]
    BadArguments(String),
    /// Op `index` of a multi failed with `source`; nothing was applied.
    #[error("multi op {index} failed: {source}")]
    Multi { index: usize, source: Box<Error> },
    /// The session expired: its ephemeral nodes are gone; open a new client.
    #[error("session expired")]
    SessionExpired,
    /// The client (or the whole embedded store) was closed.
    #[error("client closed")]
    Closed,
    /// The ZooKeeper connection was lost during a write; whether it applied is unknown.
    #[error("connection to the store lost")]
    ConnectionLoss,
    /// Anything else: I/O errors, a poisoned embedded store, unexpected ZooKeeper errors.
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
    /// How long ZooKeeper keeps a silent session alive (the embedded store ignores it: its
    /// sessions live until closed, expired or dropped).
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
