//! The embedded backend: one durable store in this process, shared by any number of
//! in-process clients, each with its own session.
//!
//! # Design
//! - Reads see the published [`Tree`], under a shared lock on it.
//! - One writer thread owns every mutation, on its own working copy of the tree. It drains
//!   queued requests (group commit: up to [`MAX_BATCH`] at a time), applies them in order to
//!   the working copy, appends the new state of every changed node to the store file as ONE
//!   log entry and commits it with `Durability::Immediate` (fsync; see `durable.rs` for the
//!   file layout and checkpoints). Meanwhile reads go on against the published tree, which
//!   does not have the batch yet: no read waits on an fsync. Once durable, the writer takes
//!   the published tree's exclusive lock for as long as it takes to copy the changed nodes
//!   over, fire the watches and queue their events, then acknowledges each caller. So a read
//!   never sees a change that is not yet durable, and a client that sees new data has its
//!   watch event for that change already queued (ZooKeeper's rule). The price is a second
//!   copy of the tree in memory.
//! - If a commit fails (disk error), the store is poisoned: every later call fails with
//!   [`Error::Backend`], because memory is then ahead of the disk.
//! - Ephemeral nodes are stored with their owner session id. Session ids are
//!   `(open_epoch << 32) | counter`, where `open_epoch` is bumped in the file on every open,
//!   so ids never repeat across restarts. On open, every ephemeral node left by a previous
//!   process is deleted (no session can own it any more) and no watch fires.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use redb::Durability;
use tokio::sync::{mpsc, oneshot};

pub use crate::durable::DEFAULT_CACHE_BYTES;
use crate::durable::{self, Durable};
use crate::event_queue::{self, EventSender, Sent};
use crate::path::validate_path;
use crate::tree::{Change, Node, Tree};
use crate::watch::{WatchKind, Watches};
use crate::{
    Client, Error, Event, Events, Op, OpResult, Result, SessionOptions, SessionState, Stat,
    WatchedEvent,
};

/// The file inside the store directory.
pub const STORE_FILE: &str = "metastore.redb";

/// Most requests applied and committed in one group commit.
const MAX_BATCH: usize = 1024;
/// Write requests waiting for the writer; senders wait when it is full.
const WRITE_QUEUE_CAPACITY: usize = 4096;

/// One durable store shared by in-process clients (one per broker in a dev cluster).
///
/// Cloning is cheap; every clone is the same store. The file stays open (and locked against
/// other processes) until [`EmbeddedStore::close`] is called or every handle and client is
/// dropped.
#[derive(Clone)]
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    requests: mpsc::Sender<Request>,
}

impl fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("location", &self.shared.location)
            .finish()
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the durable store in `dir`, reloads the tree and deletes the
    /// ephemeral nodes of the previous process without firing watches.
    ///
    /// Fails with [`Error::StoreLocked`] if another process (or another open handle in this
    /// process) has the store open.
    pub fn open(dir: &Path) -> Result<EmbeddedStore> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`EmbeddedStore::open`] with redb's page cache capped at `cache_bytes` instead of
    /// [`DEFAULT_CACHE_BYTES`]. The cache fills up to its cap and stays there; reads never
    /// use it (they are served by the in-memory tree), so a small one only costs the writer
    /// re-reading pages from the OS page cache.
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<EmbeddedStore> {
        std::fs::create_dir_all(dir).map_err(|err| {
            Error::Backend(format!(
                "cannot create the store directory {}: {err}",
                dir.display()
            ))
        })?;
        let file = dir.join(STORE_FILE);
        let (durable, tree, epoch) = Durable::open(&file, cache_bytes)?;
        Ok(Self::start(
            tree,
            epoch,
            Some(durable),
            file.display().to_string(),
        ))
    }

    /// Loads a read-only snapshot of the store in `dir` without modifying the file (stale
    /// ephemeral nodes are kept, as they were when the owning process stopped), then releases
    /// the file at once. Writes to the snapshot fail with [`Error::BadArguments`]. This is what
    /// `gregor meta --data-dir` uses on a stopped server.
    ///
    /// Fails with [`Error::StoreLocked`] while a process has the store open, and with
    /// [`Error::Backend`] if there is no store or it needs the crash recovery that only
    /// [`EmbeddedStore::open`] performs.
    pub fn open_read_only(dir: &Path) -> Result<EmbeddedStore> {
        let file = dir.join(STORE_FILE);
        if !file.is_file() {
            return Err(Error::Backend(format!(
                "there is no metadata store at {}",
                file.display()
            )));
        }
        let tree = durable::load_read_only(&file)?;
        let store = Self::start(tree, 0, None, file.display().to_string());
        store.shared.read_only.store(true, Ordering::Release);
        Ok(store)
    }

    /// A store kept only in memory (lost when dropped), for fast tests.
    pub fn open_in_memory() -> EmbeddedStore {
        Self::start(Tree::new(), 1, None, "memory".to_string())
    }

    /// Opens a new session. Its events (watches, then its own end) arrive on the returned
    /// [`Events`]. The session lives until [`Client::close`], [`EmbeddedStore::expire_session`]
    /// or the drop of the last clone of the client.
    pub fn connect(&self, _opts: SessionOptions) -> (Client, Events) {
        self.connect_with_capacity(event_queue::EVENT_QUEUE_CAPACITY)
    }

    /// [`EmbeddedStore::connect`] with a session event stream of `capacity` watch events.
    pub(crate) fn connect_with_capacity(&self, capacity: usize) -> (Client, Events) {
        let id =
            (self.shared.epoch << 32) | self.shared.next_session.fetch_add(1, Ordering::Relaxed);
        let (events_tx, events_rx) = event_queue::channel(capacity);
        // Decided under the sessions lock, which the writer's shutdown also takes, so a
        // session is either seen (and ended) by the shutdown or starts closed.
        let mut sessions = lock(&self.shared.sessions);
        let closed = self.is_closed();
        let session = Arc::new(Session {
            id,
            state: AtomicU8::new(if closed { STATE_CLOSED } else { STATE_ALIVE }),
            // A session of a closed store has nothing to say: its stream ends at once.
            events: Mutex::new((!closed).then_some(events_tx)),
        });
        if !closed {
            sessions.insert(id, session.clone());
        }
        drop(sessions);
        let client = EmbeddedClient {
            shared: self.shared.clone(),
            requests: self.requests.clone(),
            session,
        };
        (Client::from_embedded(client), Events::new(events_rx))
    }

    /// Ends the session as if it timed out: its ephemeral nodes are deleted (firing other
    /// sessions' watches), then its client receives `Event::Session(Expired)` and every later
    /// call of that client fails with [`Error::SessionExpired`]. Unknown ids are ignored.
    pub fn expire_session(&self, session_id: i64) {
        send_from_sync(
            &self.requests,
            Request::EndSession {
                session: session_id,
                expired: true,
                reply: None,
            },
        );
    }

    /// Closes every session, commits, and releases the store file. Later calls of any client
    /// of this store fail with [`Error::Closed`]. Idempotent.
    pub async fn close(&self) {
        self.shutdown(true).await;
    }

    /// Stops the store the way a killed process would, for crash tests: the file is released
    /// without ending any session, so their ephemeral nodes stay on disk until the next
    /// [`EmbeddedStore::open`] removes them. Later calls of any client fail with
    /// [`Error::Closed`].
    pub async fn halt(&self) {
        self.shutdown(false).await;
    }

    async fn shutdown(&self, end_sessions: bool) {
        let (reply, done) = oneshot::channel();
        let request = Request::Shutdown {
            end_sessions,
            reply,
        };
        if self.requests.send(request).await.is_ok() {
            let _ = done.await;
        }
    }

    /// The number of znodes, including the root.
    pub fn node_count(&self) -> usize {
        read(&self.shared.tree).len()
    }

    /// Group-commit counters since open.
    pub fn commit_stats(&self) -> CommitStats {
        let stats = &self.shared.stats;
        CommitStats {
            commits: stats.commits.load(Ordering::Relaxed),
            requests: stats.requests.load(Ordering::Relaxed),
            commit_micros: stats.commit_micros.load(Ordering::Relaxed),
            checkpoints: stats.checkpoints.load(Ordering::Relaxed),
            cache_bytes: stats.cache_bytes.load(Ordering::Relaxed),
        }
    }

    /// The zxid of the last applied transaction.
    pub fn last_zxid(&self) -> i64 {
        read(&self.shared.tree).zxid()
    }

    fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire) || self.requests.is_closed()
    }

    fn start(tree: Tree, epoch: i64, durable: Option<Durable>, location: String) -> EmbeddedStore {
        let shared = Arc::new(Shared {
            tree: RwLock::new(tree),
            watches: Mutex::new(Watches::default()),
            sessions: Mutex::new(HashMap::new()),
            failure: Mutex::new(None),
            epoch,
            next_session: AtomicI64::new(1),
            location,
            stats: StatsCounters::default(),
            read_only: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            #[cfg(test)]
            commit_delay_ms: AtomicU64::new(0),
        });
        let (requests, rx) = mpsc::channel(WRITE_QUEUE_CAPACITY);
        let writer_shared = shared.clone();
        let working = read(&shared.tree).clone();
        std::thread::Builder::new()
            .name("metastore-writer".to_string())
            .spawn(move || {
                Writer {
                    shared: writer_shared,
                    working,
                    overrun: Vec::new(),
                    durable,
                }
                .run(rx)
            })
            .expect("spawning the metastore writer thread");
        EmbeddedStore { shared, requests }
    }
}

/// Group-commit counters of an [`EmbeddedStore`] (see [`EmbeddedStore::commit_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Durable commits (each one fsync).
    pub commits: u64,
    /// Requests (writes, multis, session ends) acknowledged by those commits.
    pub requests: u64,
    /// Time spent in redb commits (writing and fsync), in microseconds.
    pub commit_micros: u64,
    /// Checkpoints that folded the commit log into the node table.
    pub checkpoints: u64,
    /// Bytes in redb's page cache after the last commit or checkpoint (at most the cap
    /// given at open, [`DEFAULT_CACHE_BYTES`] by default).
    pub cache_bytes: u64,
}

#[derive(Debug, Default)]
struct StatsCounters {
    commits: AtomicU64,
    requests: AtomicU64,
    commit_micros: AtomicU64,
    checkpoints: AtomicU64,
    cache_bytes: AtomicU64,
}

/// A client session of the embedded store.
pub(crate) struct EmbeddedClient {
    shared: Arc<Shared>,
    requests: mpsc::Sender<Request>,
    session: Arc<Session>,
}

impl fmt::Debug for EmbeddedClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedClient")
            .field("session_id", &self.session.id)
            .finish()
    }
}

impl Drop for EmbeddedClient {
    fn drop(&mut self) {
        if self.session.state.load(Ordering::Acquire) == STATE_ALIVE {
            send_from_sync(
                &self.requests,
                Request::EndSession {
                    session: self.session.id,
                    expired: false,
                    reply: None,
                },
            );
        }
    }
}

impl EmbeddedClient {
    pub fn session_id(&self) -> i64 {
        self.session.id
    }

    pub async fn write(&self, ops: Vec<Op>, single: bool) -> Result<Vec<OpResult>> {
        self.check_alive()?;
        let (reply, done) = oneshot::channel();
        let request = Request::Txn {
            session: self.session.id,
            ops,
            single,
            reply,
        };
        if self.requests.send(request).await.is_err() {
            return Err(Error::Closed);
        }
        match done.await {
            Ok(Err(Error::Closed)) | Err(_) => Err(self.dead_error()),
            Ok(result) => result,
        }
    }

    pub fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)> {
        self.read(path, |tree, watches| {
            let node = tree
                .get(path)
                .ok_or_else(|| Error::NoNode(path.to_string()))?;
            if watch {
                watches.add(WatchKind::Data, path, self.session.id);
            }
            Ok((node.data.clone(), node.stat()))
        })
    }

    /// Reads many nodes (no watches), each as [`EmbeddedClient::get_data`].
    pub fn get_data_many(&self, paths: &[&str]) -> Vec<Result<(Vec<u8>, Stat)>> {
        paths
            .iter()
            .map(|path| self.get_data(path, false))
            .collect()
    }

    pub fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>> {
        self.read(path, |tree, watches| {
            let stat = tree.get(path).map(Node::stat);
            if watch {
                let kind = if stat.is_some() {
                    WatchKind::Data
                } else {
                    WatchKind::Exist
                };
                watches.add(kind, path, self.session.id);
            }
            Ok(stat)
        })
    }

    pub fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>> {
        self.read(path, |tree, watches| {
            let node = tree
                .get(path)
                .ok_or_else(|| Error::NoNode(path.to_string()))?;
            if watch {
                watches.add(WatchKind::Child, path, self.session.id);
            }
            Ok(node.children.iter().map(|name| name.to_string()).collect())
        })
    }

    /// Expires this session and waits until it is over.
    pub async fn expire(&self) {
        let (reply, done) = oneshot::channel();
        let request = Request::EndSession {
            session: self.session.id,
            expired: true,
            reply: Some(reply),
        };
        if self.requests.send(request).await.is_ok() {
            let _ = done.await;
        }
    }

    pub async fn close(&self) {
        if self.session.state.load(Ordering::Acquire) != STATE_ALIVE {
            return;
        }
        let (reply, done) = oneshot::channel();
        let request = Request::EndSession {
            session: self.session.id,
            expired: false,
            reply: Some(reply),
        };
        if self.requests.send(request).await.is_ok() {
            let _ = done.await;
        }
        // The writer may be gone (store closed): the session is over either way.
        let _ = self.session.state.compare_exchange(
            STATE_ALIVE,
            STATE_CLOSED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Runs a read under the tree's shared lock (so a watch registration and the state it
    /// was registered against are atomic with respect to writes).
    fn read<T>(&self, path: &str, f: impl FnOnce(&Tree, &mut Watches) -> Result<T>) -> Result<T> {
        validate_path(path)?;
        let tree = read(&self.shared.tree);
        self.check_alive()?;
        if let Some(failure) = lock(&self.shared.failure).as_ref() {
            return Err(Error::Backend(failure.clone()));
        }
        let mut watches = lock(&self.shared.watches);
        f(&tree, &mut watches)
    }

    fn check_alive(&self) -> Result<()> {
        match self.session.state.load(Ordering::Acquire) {
            STATE_ALIVE => Ok(()),
            _ => Err(self.dead_error()),
        }
    }

    fn dead_error(&self) -> Error {
        match self.session.state.load(Ordering::Acquire) {
            STATE_EXPIRED => Error::SessionExpired,
            _ => Error::Closed,
        }
    }
}

const STATE_ALIVE: u8 = 0;
const STATE_CLOSED: u8 = 1;
const STATE_EXPIRED: u8 = 2;

struct Session {
    id: i64,
    state: AtomicU8,
    /// Dropped (set to `None`) after the session's last event, so `Events::recv` ends.
    events: Mutex<Option<EventSender>>,
}

impl Session {
    /// Queues `event`; false when the session's stream is overrun (the session must end).
    fn deliver(&self, event: Event) -> bool {
        match lock(&self.events).as_ref().map(|tx| tx.send(event)) {
            // A dropped `Events` only means nobody listens any more.
            None | Some(Sent::Queued | Sent::Gone) => true,
            Some(Sent::Overrun) => false,
        }
    }

    fn hang_up(&self) {
        lock(&self.events).take();
    }
}

struct Shared {
    tree: RwLock<Tree>,
    watches: Mutex<Watches>,
    sessions: Mutex<HashMap<i64, Arc<Session>>>,
    /// Set when a commit failed; the store then refuses everything.
    failure: Mutex<Option<String>>,
    epoch: i64,
    next_session: AtomicI64,
    location: String,
    stats: StatsCounters,
    /// A snapshot from [`EmbeddedStore::open_read_only`]: every write is refused.
    read_only: AtomicBool,
    /// Set by the writer when the store shuts down: new sessions start closed.
    closed: AtomicBool,
    /// A slow disk, for tests: every commit first sleeps this long.
    #[cfg(test)]
    commit_delay_ms: AtomicU64,
}

enum Request {
    Txn {
        session: i64,
        ops: Vec<Op>,
        single: bool,
        reply: oneshot::Sender<Result<Vec<OpResult>>>,
    },
    EndSession {
        session: i64,
        expired: bool,
        reply: Option<oneshot::Sender<()>>,
    },
    Shutdown {
        end_sessions: bool,
        reply: oneshot::Sender<()>,
    },
}

/// What to tell a caller once its batch is durable.
enum Ack {
    Txn(
        oneshot::Sender<Result<Vec<OpResult>>>,
        Result<Vec<OpResult>>,
    ),
    Done(Option<oneshot::Sender<()>>),
}

struct Writer {
    shared: Arc<Shared>,
    /// The writer's own copy of the tree: ahead of the published one by the batch being
    /// committed.
    working: Tree,
    /// Sessions whose event streams were overrun, to end as expired in the next batch.
    overrun: Vec<i64>,
    /// `None` for in-memory and read-only stores.
    durable: Option<Durable>,
}

/// What a batch tells sessions once it is durable, in order: watch triggers are resolved
/// only when the batch is published, against the watches registered by then.
enum Pending {
    Changes(Vec<Change>),
    Event(Arc<Session>, Event),
    HangUp(Arc<Session>),
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Request>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        loop {
            // Overrun sessions end first, without waiting for a request.
            for session in self.overrun.drain(..) {
                batch.push(Request::EndSession {
                    session,
                    expired: true,
                    reply: None,
                });
            }
            if batch.is_empty() {
                match rx.blocking_recv() {
                    Some(first) => batch.push(first),
                    None => break,
                }
            }
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            if self.process(&mut batch) {
                break;
            }
        }
        // Close the file (and release its lock) before anyone waiting on shutdown hears back.
        self.close_file();
        rx.close();
        while let Ok(request) = rx.try_recv() {
            fail(request, Error::Closed);
        }
    }

    /// Applies, commits, publishes and acknowledges one batch. Returns true on shutdown.
    fn process(&mut self, batch: &mut Vec<Request>) -> bool {
        let shared = self.shared.clone();
        if let Some(failure) = lock(&self.shared.failure).clone() {
            for request in batch.drain(..) {
                fail(request, Error::Backend(failure.clone()));
            }
            return false;
        }
        let now = now_ms();
        let mut dirty = HashSet::new();
        let mut acks = Vec::with_capacity(batch.len());
        let mut pending = Vec::new();
        let mut shutdown_reply = None;
        for request in batch.drain(..) {
            match request {
                Request::Txn {
                    session,
                    ops,
                    single,
                    reply,
                } => {
                    if !lock(&self.shared.sessions).contains_key(&session) {
                        acks.push(Ack::Txn(reply, Err(Error::Closed)));
                        continue;
                    }
                    if self.shared.read_only.load(Ordering::Acquire) {
                        let err = Error::BadArguments(format!(
                            "the store at {} was opened read-only",
                            self.shared.location
                        ));
                        acks.push(Ack::Txn(reply, Err(err)));
                        continue;
                    }
                    let mut txn = self.working.begin(now, &mut dirty);
                    let result = match txn.apply_all(&ops, session) {
                        Ok(results) => {
                            pending.push(Pending::Changes(txn.commit()));
                            Ok(results)
                        }
                        Err((_, err)) if single => Err(err),
                        Err((index, err)) => Err(Error::Multi {
                            index,
                            source: Box::new(err),
                        }),
                    };
                    acks.push(Ack::Txn(reply, result));
                }
                Request::EndSession {
                    session,
                    expired,
                    reply,
                } => {
                    self.end_session(&mut dirty, now, session, expired, &mut pending);
                    acks.push(Ack::Done(reply));
                }
                Request::Shutdown {
                    end_sessions,
                    reply,
                } => {
                    let ids: Vec<i64> = {
                        let sessions = lock(&self.shared.sessions);
                        self.shared.closed.store(true, Ordering::Release);
                        sessions.keys().copied().collect()
                    };
                    for session in ids {
                        if end_sessions {
                            self.end_session(&mut dirty, now, session, false, &mut pending);
                        } else if let Some(handle) = lock(&self.shared.sessions).remove(&session) {
                            handle.state.store(STATE_CLOSED, Ordering::Release);
                            pending.push(Pending::HangUp(handle));
                        }
                    }
                    shutdown_reply = Some(reply);
                }
            }
        }
        let commit_start = std::time::Instant::now();
        let persisted = self.persist(&dirty);
        let stats = &self.shared.stats;
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats
            .requests
            .fetch_add(acks.len() as u64, Ordering::Relaxed);
        let micros = u64::try_from(commit_start.elapsed().as_micros()).unwrap_or(u64::MAX);
        stats.commit_micros.fetch_add(micros, Ordering::Relaxed);
        if let Err(err) = persisted {
            tracing::error!(location = %self.shared.location, error = %err, "metastore commit failed; store poisoned");
            *lock(&self.shared.failure) = Some(err.clone());
            for ack in acks {
                match ack {
                    Ack::Txn(reply, _) => {
                        let _ = reply.send(Err(Error::Backend(err.clone())));
                    }
                    Ack::Done(reply) => drop(reply),
                }
            }
            return shutdown_reply.is_some();
        }
        self.publish(&shared, &dirty, pending);
        for ack in acks {
            match ack {
                Ack::Txn(reply, result) => {
                    let _ = reply.send(result);
                }
                Ack::Done(Some(reply)) => {
                    let _ = reply.send(());
                }
                Ack::Done(None) => {}
            }
        }
        if let Some(reply) = shutdown_reply {
            self.close_file();
            let _ = reply.send(());
            return true;
        }
        // After the acks, so a checkpoint delays the next batch, not this one.
        self.maybe_checkpoint();
        false
    }

    /// Makes a durable batch visible: copies its nodes into the published tree and queues
    /// its events, all under the published tree's exclusive lock (held for that only).
    /// Sessions whose event streams were overrun are queued to be ended as expired.
    fn publish(&mut self, shared: &Shared, dirty: &HashSet<String>, pending: Vec<Pending>) {
        let mut published = write(&shared.tree);
        published.sync_from(&self.working, dirty);
        let mut overrun = Vec::new();
        for item in pending {
            match item {
                Pending::Changes(changes) => overrun.extend(self.fire(&changes)),
                Pending::Event(session, event) => {
                    if !session.deliver(event) {
                        overrun.push(session.id);
                    }
                }
                Pending::HangUp(session) => session.hang_up(),
            }
        }
        drop(published);
        for id in overrun {
            if !self.overrun.contains(&id) {
                tracing::error!(session = id, "a session stopped reading its events; ending it as expired (it must re-sync from the store)");
                self.overrun.push(id);
            }
        }
    }

    fn end_session(
        &mut self,
        dirty: &mut HashSet<String>,
        now: i64,
        session: i64,
        expired: bool,
        pending: &mut Vec<Pending>,
    ) {
        let Some(handle) = lock(&self.shared.sessions).remove(&session) else {
            return;
        };
        handle.state.store(
            if expired { STATE_EXPIRED } else { STATE_CLOSED },
            Ordering::Release,
        );
        lock(&self.shared.watches).remove_session(session);
        let paths = self.working.ephemerals_of(session);
        let mut txn = self.working.begin(now, dirty);
        for path in &paths {
            // Ephemeral nodes never have children, so this cannot fail.
            if let Err(err) = txn.delete(path, None) {
                tracing::error!(%path, error = %err, "could not delete an ephemeral node");
            }
        }
        pending.push(Pending::Changes(txn.commit()));
        let state = if expired {
            SessionState::Expired
        } else {
            SessionState::Closed
        };
        pending.push(Pending::Event(handle.clone(), Event::Session(state)));
        pending.push(Pending::HangUp(handle));
    }

    /// Queues the events of the watches `changes` trigger (the published tree's lock held).
    /// Returns the sessions whose streams were overrun.
    fn fire(&self, changes: &[Change]) -> Vec<i64> {
        let mut watches = lock(&self.shared.watches);
        let sessions = lock(&self.shared.sessions);
        let mut overrun = Vec::new();
        for (kind, path) in changes {
            for id in watches.trigger(*kind, path) {
                if let Some(session) = sessions.get(&id) {
                    let event = Event::Watch(WatchedEvent {
                        kind: *kind,
                        path: path.clone(),
                    });
                    if !session.deliver(event) {
                        overrun.push(id);
                    }
                }
            }
        }
        overrun
    }

    fn persist(&mut self, dirty: &HashSet<String>) -> std::result::Result<(), String> {
        #[cfg(test)]
        {
            let delay = self.shared.commit_delay_ms.load(Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(std::time::Duration::from_millis(delay));
            }
        }
        let Some(durable) = self.durable.as_mut() else {
            return Ok(());
        };
        let appended = durable.append(&self.working, dirty);
        self.record_cache_bytes();
        appended
    }

    fn record_cache_bytes(&self) {
        if let Some(durable) = &self.durable {
            let used = u64::try_from(durable.cache_used_bytes()).unwrap_or(u64::MAX);
            self.shared.stats.cache_bytes.store(used, Ordering::Relaxed);
        }
    }

    /// Folds the log into the checkpoint when it is due; a failure poisons the store.
    fn maybe_checkpoint(&mut self) {
        let Some(durable) = self.durable.as_mut() else {
            return;
        };
        if !durable.wants_checkpoint() {
            return;
        }
        self.shared
            .stats
            .checkpoints
            .fetch_add(1, Ordering::Relaxed);
        if let Err(err) = durable.checkpoint(Durability::None) {
            tracing::error!(location = %self.shared.location, error = %err, "metastore checkpoint failed; store poisoned");
            *lock(&self.shared.failure) = Some(err);
        }
        self.record_cache_bytes();
    }

    /// Checkpoints durably (so the next open has no log to replay) and closes the file.
    fn close_file(&mut self) {
        if let Some(mut durable) = self.durable.take() {
            if lock(&self.shared.failure).is_none() {
                if let Err(err) = durable.checkpoint(Durability::Immediate) {
                    tracing::warn!(location = %self.shared.location, error = %err, "final checkpoint failed; the log will be replayed on open");
                }
            }
        }
    }
}

fn fail(request: Request, err: Error) {
    match request {
        Request::Txn { reply, .. } => {
            let _ = reply.send(Err(err));
        }
        Request::EndSession { reply, .. } => drop(reply),
        Request::Shutdown { reply, .. } => {
            let _ = reply.send(());
        }
    }
}

/// Queues a request from synchronous code (a `Drop`, a test hook) without blocking an async
/// runtime: if the queue is full, a short-lived thread waits for room.
fn send_from_sync(requests: &mpsc::Sender<Request>, request: Request) {
    match requests.try_send(request) {
        Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
        Err(mpsc::error::TrySendError::Full(request)) => {
            let requests = requests.clone();
            std::thread::spawn(move || {
                let _ = requests.blocking_send(request);
            });
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

// A panic while holding one of these locks is a bug that already failed loudly; keep serving.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read<T>(rw: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(rw: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    rw.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::CreateMode;

    /// Issue 14: readers never wait on the writer's fsync. With every commit taking 400 ms,
    /// a read issued while a write is being committed answers at once, from the state before
    /// that write; once the write is acknowledged, reads see it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn issue_14_reads_do_not_wait_for_a_commit_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let (client, _events) = store.connect(SessionOptions::default());
        client
            .create("/before", b"x", CreateMode::Persistent)
            .await
            .unwrap();
        store.shared.commit_delay_ms.store(400, Ordering::Relaxed);
        let writer = client.clone();
        let write = tokio::spawn(async move {
            writer
                .create("/during", b"y", CreateMode::Persistent)
                .await
                .unwrap()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let children = client.get_children("/", false).await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_millis(250),
            "a read waited {waited:?}"
        );
        assert!(children.contains(&"before".to_string()));
        assert!(
            !children.contains(&"during".to_string()),
            "a read never sees a change that is not durable yet"
        );
        write.await.unwrap();
        assert!(client.exists("/during", false).await.unwrap().is_some());
        store.shared.commit_delay_ms.store(0, Ordering::Relaxed);
        client.close().await;
        store.close().await;
    }

    /// Issue 14: a session's event stream is bounded. A session that registers watches on
    /// 20 nodes and reads none of its events, with room for 8, is ended as expired when the
    /// watches fire: its stream says Expired (nothing else), its calls fail, its ephemeral
    /// node goes. Others are unaffected.
    #[tokio::test]
    async fn issue_14_a_session_that_does_not_read_its_events_is_expired_not_buffered() {
        let store = EmbeddedStore::open_in_memory();
        let (writer, _writer_events) = store.connect(SessionOptions::default());
        let (slow, mut slow_events) = store.connect_with_capacity(8);
        for i in 0..20 {
            writer
                .create(&format!("/n{i}"), b"0", CreateMode::Persistent)
                .await
                .unwrap();
            slow.get_data(&format!("/n{i}"), true).await.unwrap();
        }
        slow.create("/slow-alive", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        for i in 0..20 {
            writer
                .set_data(&format!("/n{i}"), b"1", None)
                .await
                .unwrap();
        }
        // The ending is its own batch right after the overrun one: wait for it.
        for _ in 0..100 {
            if writer.exists("/slow-alive", false).await.unwrap().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(writer.exists("/slow-alive", false).await.unwrap().is_none());
        assert!(matches!(
            slow_events.recv().await,
            Some(Event::Session(SessionState::Expired))
        ));
        assert!(slow_events.recv().await.is_none());
        assert!(matches!(
            slow.get_data("/n0", false).await,
            Err(Error::SessionExpired)
        ));
        // The writer's session goes on.
        writer.get_data("/n0", true).await.unwrap();
        store.close().await;
    }
}
