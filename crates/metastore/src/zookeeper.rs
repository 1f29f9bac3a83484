//! The ZooKeeper backend: a real ZooKeeper 3.6+ ensemble through the `zookeeper-client` crate.
//!
//! # How watches are delivered, and the order guarantee
//! The crate hands out one `OneshotWatcher` per watch; awaiting many of them from separate
//! tasks would deliver events in whatever order the tasks happen to run. Instead, each client
//! registers ONE persistent recursive watch on its chroot root when it connects. ZooKeeper
//! sends every change under the chroot on that watch, on the session's single connection, in
//! the order the changes were committed (zxid order), and the crate queues them in that order
//! on a single channel. A forwarder task replays that stream through the same one-shot watch
//! table as the embedded backend ([`crate::watch::Watches`]): a `NodeCreated` or
//! `NodeDeleted` also counts as `NodeChildrenChanged` of the parent, exactly as ZooKeeper
//! fires it. So:
//!
//! - Every event on a client's [`Events`] stream is in ZooKeeper's commit order,
//!   across all paths and kinds, and session events are in place in that stream.
//! - A read with `watch: true` registers its watch after the read, then reads the node's
//!   stat once more (see `ZkClient::arm`): a change between the two reads that the stream
//!   had already passed fires the watch at once, with the kind the stats show. So a watch
//!   never misses a change made after its read and never fires for a change the read saw.
//!   Only in that race is the event placed a little late in the stream (after changes
//!   received meanwhile). The cost is one extra round trip per watching read.
//! - An exists watch on a missing node that is created and deleted again between the two
//!   reads is not fired (the stats agree); ZooKeeper would fire `NodeCreated`.
//! - After a reconnection (`Session(Disconnected)` then `Session(Connected)`), ZooKeeper does
//!   not resend persistent-watch events missed while disconnected (ZOOKEEPER-4698), so every
//!   registered watch is fired once (`NodeDataChanged` for data and exists watches,
//!   `NodeChildrenChanged` for child watches) to make the owner re-read. The persistent
//!   watch itself is registered again on the new connection by the crate (`SetWatches2`;
//!   ZooKeeper drops a connection's watches with it), so the stream carries every change
//!   after the reconnection, whichever server of the ensemble the session moved to (issue
//!   32: the crate's release sent only the one-shot kinds; `vendor/zookeeper-client`).
//!
//! Connection loss: a request issued while disconnected waits inside the crate until the
//! session reconnects (or expires); an idempotent read whose connection drops while it is in
//! flight (`ConnectionLoss`) is retried up to [`READ_ATTEMPTS`] times.
//!
//! Writes are retried across connection loss too, as Kafka's `KafkaZkClient` does, for as long
//! as the session may still be alive (twice its timeout; an expired session ends the retries
//! with [`Error::SessionExpired`]). A write whose answer was lost may or may not have applied,
//! so before each retry, and again when the retry is refused in the way an applied first
//! attempt would make it refused, the node is read back:
//! - create: the node exists with our data (an ephemeral one owned by this session): done;
//!   `NodeExists` after a lost attempt is success only then.
//! - sequential create: the parent's `cversion` is read before the first attempt (it is the
//!   sequence number the node gets); a child with our name prefix, a sequence at least that,
//!   our data (and, if ephemeral, our session) is ours. A concurrent writer creating the same
//!   name prefix with identical data at that moment would be taken for us: for Kafka's
//!   sequential nodes (change notifications) a duplicate and a missing one are equivalent.
//! - set data: the node holds our data (and, for a conditional write at version `v`, is at
//!   `v + 1`): done; `BadVersion` after a lost attempt is success only then.
//! - delete: the node is gone: done (`NoNode` after a lost attempt is success).
//! - multi: every create, set and delete of it is visible as above: done (checks change
//!   nothing and are not verified). A multi with a sequential create is not retried.
//!
//! So a retried write is applied once. Deadline reached still disconnected: the caller gets
//! [`Error::ConnectionLoss`].
//!
//! The cost: each client receives every change under its chroot. For Kafka's metadata (a few
//! clients per cluster: brokers and the controller) that traffic is small.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::oneshot;
use zookeeper_client as zk;

use crate::event_queue::{self, EventSender, Sent};
use crate::path::{parent_and_name, validate_path};
use crate::watch::{WatchKind, Watches};
use crate::{
    Client, CreateMode, Error, Event, Events, Op, OpResult, Result, SessionOptions, SessionState,
    Stat, WatchedEvent, WatchedEventKind,
};

/// Attempts of an idempotent read when the connection is lost (the crate reconnects meanwhile).
const READ_ATTEMPTS: u32 = 5;
const READ_RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Reads in one ZooKeeper multi-read: a partition state and its stat are ~200 bytes, so a
/// response stays far under the 1 MiB `jute.maxbuffer`.
const MULTI_READ_MAX_OPS: usize = 1000;
/// The pause before a write is sent again after a connection loss.
const WRITE_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long [`ZkClient::close`] waits for ZooKeeper to confirm the session's end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Session and connection timeout of the second connection that expires a session.
const EXPIRE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to ZooKeeper. `connect` is `host:port[,host:port...][/chroot]`; the chroot is
/// created (persistent, empty, with its parents) if missing, as Kafka does.
pub async fn connect_zookeeper(connect: &str, opts: SessionOptions) -> Result<(Client, Events)> {
    connect_with_capacity(connect, opts, event_queue::EVENT_QUEUE_CAPACITY).await
}

/// [`connect_zookeeper`] with a session event stream of `capacity` watch events.
pub(crate) async fn connect_with_capacity(
    connect: &str,
    opts: SessionOptions,
    capacity: usize,
) -> Result<(Client, Events)> {
    let (hosts, chroot) = parse_connect(connect)?;
    let root_client = zk::Client::connector()
        .with_session_timeout(opts.session_timeout)
        .connect(hosts)
        .await
        .map_err(|err| connect_error(connect, &err))?;
    let client = match chroot {
        None => root_client,
        Some(chroot) => {
            create_chroot(&root_client, chroot).await?;
            root_client.chroot(chroot.to_string()).map_err(|_| {
                Error::BadArguments(format!("invalid chroot {chroot:?} in {connect:?}"))
            })?
        }
    };
    let watcher = client
        .watch("/", zk::AddWatchMode::PersistentRecursive)
        .await
        .map_err(|err| map_error(err, "/"))?;
    let (events_tx, events_rx) = event_queue::channel(capacity);
    let state = Arc::new(Mutex::new(WatchState {
        raw: Some(watcher),
        watches: Watches::default(),
        events: Some(events_tx),
        forwarder_waker: None,
        disconnected: false,
        overrun: false,
    }));
    let (done_tx, done_rx) = oneshot::channel();
    let forwarder_state = state.clone();
    tokio::spawn(async move {
        std::future::poll_fn(|cx| {
            let mut state = lock(&forwarder_state);
            state.forwarder_waker = Some(cx.waker().clone());
            state.poll_raw(cx)
        })
        .await;
        let _ = done_tx.send(());
    });
    let zk_client = ZkClient {
        hosts: hosts.to_string(),
        session_id: client.session_id().0,
        session: client.session().clone(),
        session_timeout: opts.session_timeout,
        client: Mutex::new(Some(client)),
        state,
        forwarder_done: tokio::sync::Mutex::new(Some(done_rx)),
    };
    Ok((Client::from_zookeeper(zk_client), Events::new(events_rx)))
}

/// One ZooKeeper session.
pub(crate) struct ZkClient {
    hosts: String,
    session_id: i64,
    session: zk::SessionInfo,
    session_timeout: Duration,
    /// `None` once closed: dropping the crate's last client handle closes the session.
    client: Mutex<Option<zk::Client>>,
    state: Arc<Mutex<WatchState>>,
    forwarder_done: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

impl fmt::Debug for ZkClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkClient")
            .field("hosts", &self.hosts)
            .field("session_id", &format_args!("{:#x}", self.session_id))
            .finish()
    }
}

impl ZkClient {
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    pub async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        validate_path(path)?;
        let options = zk_mode(mode).with_acls(zk::Acls::anyone_all());
        let options = &options;
        let write = |c: zk::Client| async move {
            let (_, sequence) = c.create(path, data, options).await?;
            Ok(if mode.is_sequential() {
                format!("{path}{sequence}")
            } else {
                path.to_string()
            })
        };
        if mode.is_sequential() {
            // The sequence the node will get is the parent's cversion now (or later).
            let (parent, prefix) = parent_and_name(path);
            let first_sequence = match self
                .retry_read(parent, |c| async move { c.check_stat(parent).await })
                .await
            {
                Ok(Some(stat)) => i64::from(stat.cversion),
                // No parent: the create fails with NoNode, no read back needed.
                Ok(None) => i64::MAX,
                Err(err) => return Err(err),
            };
            let landed = || async move {
                self.find_sequential(parent, prefix, first_sequence, data, mode)
                    .await
            };
            return self.write(path, write, landed, |_| false).await;
        }
        let landed = || async move {
            let (existing, stat) = self
                .retry_read(path, |c| async move { c.get_data(path).await })
                .await
                .ok()?;
            let ours = existing == data
                && (!mode.is_ephemeral() || stat.ephemeral_owner == self.session_id);
            ours.then(|| path.to_string())
        };
        self.write(path, write, landed, |err| {
            matches!(err, zk::Error::NodeExists)
        })
        .await
    }

    /// Sends a write, and again after a connection loss, until it is answered or the session
    /// cannot be alive any more. After a lost attempt, `landed` reads back whether that
    /// attempt applied (`Some`: its result) before the write is sent again, and once more if
    /// the retry's refusal is one an applied first attempt causes (`maybe_ours`).
    async fn write<R, W, WF, L, LF>(
        &self,
        path: &str,
        write: W,
        landed: L,
        maybe_ours: impl Fn(&zk::Error) -> bool,
    ) -> Result<R>
    where
        W: Fn(zk::Client) -> WF,
        WF: Future<Output = std::result::Result<R, zk::Error>>,
        L: Fn() -> LF,
        LF: Future<Output = Option<R>>,
    {
        let deadline = tokio::time::Instant::now() + self.session_timeout * 2;
        let mut lost = false;
        loop {
            let client = self.client()?;
            match write(client).await {
                Ok(value) => return Ok(value),
                Err(err) if connection_lost(&err) && tokio::time::Instant::now() < deadline => {
                    tracing::info!(%path, error = %err, "connection lost during a write; checking whether it applied before sending it again");
                    lost = true;
                    tokio::time::sleep(WRITE_RETRY_BACKOFF).await;
                    if let Some(value) = landed().await {
                        tracing::info!(%path, "the write applied before the connection was lost");
                        return Ok(value);
                    }
                }
                Err(err) if lost && maybe_ours(&err) => {
                    return match landed().await {
                        Some(value) => Ok(value),
                        None => Err(map_error(err, path)),
                    };
                }
                Err(err) if connection_lost(&err) => return Err(Error::ConnectionLoss),
                Err(err) => return Err(map_error(err, path)),
            }
        }
    }

    /// A child of `parent` that a sequential create of `prefix` with `data` made at sequence
    /// `first_sequence` or later (owned by this session if ephemeral): its path.
    async fn find_sequential(
        &self,
        parent: &str,
        prefix: &str,
        first_sequence: i64,
        data: &[u8],
        mode: CreateMode,
    ) -> Option<String> {
        let (children, _) = self
            .retry_read(parent, |c| async move { c.get_children(parent).await })
            .await
            .ok()?;
        let mut candidates: Vec<(i64, String)> = children
            .into_iter()
            .filter_map(|child| {
                let sequence: i64 = child.strip_prefix(prefix)?.parse().ok()?;
                (sequence >= first_sequence).then_some((sequence, child))
            })
            .collect();
        candidates.sort();
        for (_, child) in candidates {
            let full = if parent == "/" {
                format!("/{child}")
            } else {
                format!("{parent}/{child}")
            };
            let full_ref = full.as_str();
            let Ok((existing, stat)) = self
                .retry_read(full_ref, |c| async move { c.get_data(full_ref).await })
                .await
            else {
                continue;
            };
            if existing == data && (!mode.is_ephemeral() || stat.ephemeral_owner == self.session_id)
            {
                return Some(full);
            }
        }
        None
    }

    pub async fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)> {
        validate_path(path)?;
        let (data, stat) = self
            .retry_read(path, |c| async move { c.get_data(path).await })
            .await?;
        if watch {
            self.arm(WatchKind::Data, path, Some(stat)).await;
        }
        Ok((data, convert_stat(&stat)))
    }

    /// Reads many nodes (no watches) in ZooKeeper multi-reads (3.6+) of up to
    /// [`MULTI_READ_MAX_OPS`] each, all sent before the first answer is awaited: one request
    /// per chunk instead of one per node. A chunk that fails as a whole (connection lost, a
    /// server without multi-read, an invalid path) is read node by node, with the retries of
    /// [`ZkClient::get_data`].
    pub async fn get_data_many(&self, paths: &[&str]) -> Vec<Result<(Vec<u8>, Stat)>> {
        let client = match self.client() {
            Ok(client) => client,
            Err(err) => return paths.iter().map(|_| Err(err.clone())).collect(),
        };
        // `commit` sends its request at once; the futures only wait for the answers.
        let pending: Vec<_> = paths
            .chunks(MULTI_READ_MAX_OPS)
            .map(|chunk| {
                let mut reader = client.new_multi_reader();
                let added = chunk.iter().try_for_each(|path| reader.add_get_data(path));
                (chunk, added.map(|()| reader.commit()))
            })
            .collect();
        let mut results = Vec::with_capacity(paths.len());
        for (chunk, sent) in pending {
            let answers = match sent {
                Ok(answer) => answer.await.ok().filter(|a| a.len() == chunk.len()),
                Err(_) => None,
            };
            match answers {
                Some(answers) => results.extend(
                    chunk
                        .iter()
                        .zip(answers)
                        .map(|(path, answer)| get_data_answer(path, answer)),
                ),
                None => {
                    for path in chunk {
                        results.push(self.get_data(path, false).await);
                    }
                }
            }
        }
        results
    }

    pub async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>> {
        validate_path(path)?;
        let stat = self
            .retry_read(path, |c| async move { c.check_stat(path).await })
            .await?;
        if watch {
            // An exists watch fires on create, data change and delete, whichever state the
            // node is in, which is what the exist table does.
            self.arm(WatchKind::Exist, path, stat).await;
        }
        Ok(stat.as_ref().map(convert_stat))
    }

    pub async fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>> {
        validate_path(path)?;
        let (children, stat) = self
            .retry_read(path, |c| async move { c.get_children(path).await })
            .await?;
        if watch {
            self.arm(WatchKind::Child, path, Some(stat)).await;
        }
        Ok(children)
    }

    pub async fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        validate_path(path)?;
        let write = |c: zk::Client| async move { c.set_data(path, data, version).await };
        let landed = || async move {
            let (existing, stat) = self
                .retry_read(path, |c| async move { c.get_data(path).await })
                .await
                .ok()?;
            let ours =
                existing == data && version.is_none_or(|v| stat.version == v.wrapping_add(1));
            ours.then_some(stat)
        };
        let stat = self
            .write(path, write, landed, |err| {
                version.is_some() && matches!(err, zk::Error::BadVersion)
            })
            .await
            .map_err(|err| with_expected_version(err, path, version))?;
        Ok(convert_stat(&stat))
    }

    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::BadArguments(
                "the root node cannot be deleted".to_string(),
            ));
        }
        let write = |c: zk::Client| async move { c.delete(path, version).await };
        let landed = || async move {
            let stat = self
                .retry_read(path, |c| async move { c.check_stat(path).await })
                .await
                .ok()?;
            stat.is_none().then_some(())
        };
        self.write(path, write, landed, |err| matches!(err, zk::Error::NoNode))
            .await
            .map_err(|err| with_expected_version(err, path, version))
    }

    pub async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        for op in &ops {
            validate_path(op_path(op))?;
        }
        let sequential = ops
            .iter()
            .any(|op| matches!(op, Op::Create { mode, .. } if mode.is_sequential()));
        let changes = ops.iter().any(|op| !matches!(op, Op::Check { .. }));
        let deadline = tokio::time::Instant::now() + self.session_timeout * 2;
        let mut lost = false;
        loop {
            match self.multi_once(&ops).await {
                Err(Error::ConnectionLoss)
                    if !sequential && tokio::time::Instant::now() < deadline =>
                {
                    tracing::info!(ops = ops.len(), "connection lost during a multi; checking whether it applied before sending it again");
                    lost = true;
                    tokio::time::sleep(WRITE_RETRY_BACKOFF).await;
                    if changes {
                        if let Some(results) = self.multi_landed(&ops).await {
                            tracing::info!("the multi applied before the connection was lost");
                            return Ok(results);
                        }
                    }
                }
                Err(err @ Error::Multi { .. }) if lost && changes => {
                    return match self.multi_landed(&ops).await {
                        Some(results) => Ok(results),
                        None => Err(err),
                    };
                }
                other => return other,
            }
        }
    }

    /// Whether every create, set and delete of `ops` is visible in the store (see the module
    /// docs): the results the multi would have answered.
    async fn multi_landed(&self, ops: &[Op]) -> Option<Vec<OpResult>> {
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            let path = op_path(op);
            let result = match op {
                Op::Check { .. } => OpResult::Checked,
                Op::Delete { .. } => {
                    let stat = self
                        .retry_read(path, |c| async move { c.check_stat(path).await })
                        .await
                        .ok()?;
                    if stat.is_some() {
                        return None;
                    }
                    OpResult::Deleted
                }
                Op::Create { data, mode, .. } => {
                    let (existing, stat) = self
                        .retry_read(path, |c| async move { c.get_data(path).await })
                        .await
                        .ok()?;
                    let ours = existing == *data
                        && (!mode.is_ephemeral() || stat.ephemeral_owner == self.session_id);
                    if !ours {
                        return None;
                    }
                    OpResult::Created(path.to_string())
                }
                Op::SetData { data, version, .. } => {
                    let (existing, stat) = self
                        .retry_read(path, |c| async move { c.get_data(path).await })
                        .await
                        .ok()?;
                    let ours = existing == *data
                        && version.is_none_or(|v| stat.version == v.wrapping_add(1));
                    if !ours {
                        return None;
                    }
                    OpResult::SetData(convert_stat(&stat))
                }
            };
            results.push(result);
        }
        Some(results)
    }

    async fn multi_once(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        let client = self.client()?;
        let mut writer = client.new_multi_writer();
        for op in ops {
            let added = match op {
                Op::Create { path, data, mode } => writer.add_create(
                    path,
                    data,
                    &zk_mode(*mode).with_acls(zk::Acls::anyone_all()),
                ),
                Op::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, *version),
                Op::Delete { path, version } => writer.add_delete(path, *version),
                Op::Check { path, version } => writer.add_check_version(path, *version),
            };
            added.map_err(|err| map_error(err, op_path(op)))?;
        }
        let results = writer.commit().await.map_err(|err| match err {
            zk::MultiWriteError::RequestFailed { source } if connection_lost(&source) => {
                Error::ConnectionLoss
            }
            zk::MultiWriteError::RequestFailed { source } => map_error(source, "(multi)"),
            zk::MultiWriteError::OperationFailed { index, source } => {
                let op = &ops[index.min(ops.len().saturating_sub(1))];
                Error::Multi {
                    index,
                    source: Box::new(map_version_error(source, op_path(op), op_version(op))),
                }
            }
        })?;
        results
            .into_iter()
            .map(|result| match result {
                zk::MultiWriteResult::Check => Ok(OpResult::Checked),
                zk::MultiWriteResult::Delete => Ok(OpResult::Deleted),
                zk::MultiWriteResult::Create { path, .. } => Ok(OpResult::Created(path)),
                zk::MultiWriteResult::SetData { stat } => {
                    Ok(OpResult::SetData(convert_stat(&stat)))
                }
                other => Err(Error::Backend(format!("unexpected multi result {other:?}"))),
            })
            .collect()
    }

    /// Closes the session and waits (bounded) until ZooKeeper confirmed it, so that the
    /// session's ephemeral nodes are gone when this returns.
    pub async fn close(&self) {
        let client = lock(&self.client).take();
        let Some(client) = client else { return };
        drop(client);
        let done = self.forwarder_done.lock().await.take();
        if let Some(done) = done {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, done).await;
        }
    }

    /// Makes ZooKeeper expire this session, the way Kafka's and Curator's tests do: a second
    /// connection joins the same session (id and password) and closes it; this client then
    /// learns on its next contact that its session expired.
    pub async fn expire_session(&self) -> Result<()> {
        // The joining connection only has to live long enough to close the session; give it a
        // roomy timeout so a busy machine does not fail the handshake.
        let timeout = self.session_timeout.max(EXPIRE_CONNECT_TIMEOUT);
        let mut attempt = 1;
        loop {
            let joined = zk::Client::connector()
                .with_session(self.session.clone())
                .with_session_timeout(timeout)
                .with_connection_timeout(timeout)
                .connect(&self.hosts)
                .await;
            match joined {
                Ok(other) => {
                    // Dropping the last handle sends CloseSession, but this client may win the
                    // session back (it reconnects when ZooKeeper moves the session to the
                    // joiner) before the close goes out; then the session lives on. So wait
                    // until the joiner saw its close answered, and join again if it did not.
                    let mut state = other.state_watcher();
                    drop(other);
                    let closed = tokio::time::timeout(timeout, async {
                        loop {
                            match state.changed().await {
                                zk::SessionState::Closed | zk::SessionState::Expired => break,
                                _ => continue,
                            }
                        }
                    })
                    .await
                    .is_ok();
                    if closed {
                        return Ok(());
                    }
                    if attempt >= READ_ATTEMPTS {
                        return Err(Error::Backend(format!(
                            "could not expire session {:#x}: {attempt} closes went unanswered",
                            self.session.id().0
                        )));
                    }
                    attempt += 1;
                }
                // Already gone: as good as expired.
                Err(zk::Error::SessionExpired) => return Ok(()),
                Err(zk::Error::Timeout) if attempt < READ_ATTEMPTS => attempt += 1,
                Err(err) => return Err(map_error(err, "/")),
            }
        }
    }

    /// Registers a one-shot watch for a read that returned `before`, without missing a
    /// change made after that read and without firing for one it already saw.
    ///
    /// The stream may be ahead of or behind the read's answer, so the watch is registered
    /// (after handling every change already received) and the node is read again. Nothing
    /// received before the registration can come after the second read's answer, and every
    /// change after the registration fires the watch. So if the two reads agree, no change
    /// was missed; if they differ and the watch has not fired yet, the change was handled
    /// before the registration, and the watch fires now with the kind the difference shows.
    async fn arm(&self, kind: WatchKind, path: &str, before: Option<zk::Stat>) {
        lock(&self.state).register(kind, path);
        let after = self
            .retry_read(path, |c| async move { c.check_stat(path).await })
            .await;
        let mut state = lock(&self.state);
        state.drain();
        match after {
            Ok(after) => {
                if let Some(change) = missed_change(kind, before.as_ref(), after.as_ref()) {
                    state.fire_registered(kind, path, change);
                }
            }
            // The session ends or reconnects; both fire or drop every watch.
            Err(err) => tracing::debug!(%path, error = %err, "could not verify a new watch"),
        }
    }

    async fn retry_read<T, F, Fut>(&self, path: &str, read: F) -> Result<T>
    where
        F: Fn(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        let mut attempt = 1;
        loop {
            let client = self.client()?;
            match read(client).await {
                Ok(value) => return Ok(value),
                Err(err) if connection_lost(&err) && attempt < READ_ATTEMPTS => {
                    tracing::debug!(%path, attempt, error = %err, "connection lost during a read; retrying");
                    attempt += 1;
                    tokio::time::sleep(READ_RETRY_BACKOFF).await;
                }
                Err(err) => return Err(map_error(err, path)),
            }
        }
    }

    fn client(&self) -> Result<zk::Client> {
        if lock(&self.state).overrun {
            // The stream already told the client its session expired: make it so (dropping
            // the last handle closes the session and its ephemeral nodes).
            drop(lock(&self.client).take());
            return Err(Error::SessionExpired);
        }
        lock(&self.client).clone().ok_or(Error::Closed)
    }
}

/// The client's view of its persistent watch stream and its one-shot watches.
struct WatchState {
    /// `None` after a terminal session event: the crate panics if polled again.
    raw: Option<zk::PersistentWatcher>,
    watches: Watches,
    /// Dropped after the session's last event, so `Events::recv` ends.
    events: Option<EventSender>,
    /// The forwarder's waker: whoever polls the stream polls it with this one, so the
    /// forwarder is always the task woken by new events.
    forwarder_waker: Option<Waker>,
    disconnected: bool,
    /// The client stopped reading its events: the stream ended as expired, and the session
    /// is closed at the next call.
    overrun: bool,
}

impl WatchState {
    fn register(&mut self, kind: WatchKind, path: &str) {
        self.drain();
        if self.events.is_some() {
            self.watches.add(kind, path, 0);
        }
    }

    /// Handles every change already received. It polls with the forwarder's waker so that
    /// the forwarder stays the task that new changes wake.
    fn drain(&mut self) {
        let waker = self
            .forwarder_waker
            .clone()
            .unwrap_or_else(|| Waker::noop().clone());
        let _ = self.poll_raw(&mut Context::from_waker(&waker));
    }

    /// Fires `change` at `path` if the watch `kind` there is still registered.
    fn fire_registered(&mut self, kind: WatchKind, path: &str, change: WatchedEventKind) {
        if self.watches.contains(kind, path, 0) {
            self.fire(change, path);
        }
    }

    /// Handles every queued raw event; `Ready` once the session is over.
    fn poll_raw(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let Some(raw) = self.raw.as_mut() else {
                return Poll::Ready(());
            };
            let event = {
                let changed = pin!(raw.changed());
                match changed.poll(cx) {
                    Poll::Ready(event) => event,
                    Poll::Pending => return Poll::Pending,
                }
            };
            self.handle(event);
        }
    }

    fn handle(&mut self, event: zk::WatchedEvent) {
        let kind = match event.event_type {
            zk::EventType::Session => return self.handle_session(event.session_state),
            zk::EventType::NodeCreated => WatchedEventKind::NodeCreated,
            zk::EventType::NodeDeleted => WatchedEventKind::NodeDeleted,
            zk::EventType::NodeDataChanged => WatchedEventKind::NodeDataChanged,
            // Not sent for recursive watches; derived from creates and deletes below.
            zk::EventType::NodeChildrenChanged => return,
        };
        self.fire(kind, &event.path);
        if matches!(
            kind,
            WatchedEventKind::NodeCreated | WatchedEventKind::NodeDeleted
        ) && event.path != "/"
        {
            let (parent, _) = parent_and_name(&event.path);
            let parent = parent.to_string();
            self.fire(WatchedEventKind::NodeChildrenChanged, &parent);
        }
    }

    fn handle_session(&mut self, state: zk::SessionState) {
        match state {
            zk::SessionState::Disconnected => {
                self.disconnected = true;
                self.deliver(Event::Session(SessionState::Disconnected));
            }
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                if std::mem::take(&mut self.disconnected) {
                    self.deliver(Event::Session(SessionState::Connected));
                    for (kind, path) in self.watches.drain_all() {
                        let kind = match kind {
                            WatchKind::Data | WatchKind::Exist => WatchedEventKind::NodeDataChanged,
                            WatchKind::Child => WatchedEventKind::NodeChildrenChanged,
                        };
                        self.deliver(Event::Watch(WatchedEvent { kind, path }));
                    }
                }
            }
            zk::SessionState::Expired | zk::SessionState::AuthFailed => {
                self.end(SessionState::Expired)
            }
            zk::SessionState::Closed => self.end(SessionState::Closed),
        }
    }

    fn end(&mut self, state: SessionState) {
        self.deliver(Event::Session(state));
        self.watches = Watches::default();
        self.events = None;
        self.raw = None;
    }

    fn fire(&mut self, kind: WatchedEventKind, path: &str) {
        if !self.watches.trigger(kind, path).is_empty() {
            self.deliver(Event::Watch(WatchedEvent {
                kind,
                path: path.to_string(),
            }));
        }
    }

    fn deliver(&mut self, event: Event) {
        let Some(events) = &self.events else {
            return;
        };
        // A dropped `Events` only means nobody listens any more.
        if events.send(event) == Sent::Overrun && !self.overrun {
            tracing::error!("a ZooKeeper session stopped reading its events; ending it as expired (it must re-sync from the store)");
            self.overrun = true;
            self.end(SessionState::Expired);
        }
    }
}

/// What changed between two reads of a node, as the event the watch `kind` would have fired.
fn missed_change(
    kind: WatchKind,
    before: Option<&zk::Stat>,
    after: Option<&zk::Stat>,
) -> Option<WatchedEventKind> {
    match (before, after) {
        (None, None) => None,
        (None, Some(_)) => Some(WatchedEventKind::NodeCreated),
        (Some(_), None) => Some(WatchedEventKind::NodeDeleted),
        (Some(b), Some(a)) if a.czxid != b.czxid => Some(WatchedEventKind::NodeDeleted),
        (Some(b), Some(a)) => match kind {
            WatchKind::Data | WatchKind::Exist => {
                (a.mzxid != b.mzxid).then_some(WatchedEventKind::NodeDataChanged)
            }
            WatchKind::Child => {
                (a.pzxid != b.pzxid).then_some(WatchedEventKind::NodeChildrenChanged)
            }
        },
    }
}

fn parse_connect(connect: &str) -> Result<(&str, Option<&str>)> {
    let (hosts, chroot) = match connect.find('/') {
        Some(i) => (&connect[..i], Some(&connect[i..])),
        None => (connect, None),
    };
    if hosts.is_empty() {
        return Err(Error::BadArguments(format!(
            "no ZooKeeper host in {connect:?}"
        )));
    }
    match chroot {
        None | Some("/") => Ok((hosts, None)),
        Some(chroot) => {
            validate_path(chroot)?;
            Ok((hosts, Some(chroot)))
        }
    }
}

async fn create_chroot(client: &zk::Client, chroot: &str) -> Result<()> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut end = 0;
    while end < chroot.len() {
        end = chroot[end + 1..]
            .find('/')
            .map_or(chroot.len(), |i| end + 1 + i);
        let ancestor = &chroot[..end];
        match client.create(ancestor, &[], &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(err) => return Err(map_error(err, ancestor)),
        }
    }
    Ok(())
}

fn zk_mode(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
    }
}

fn convert_stat(stat: &zk::Stat) -> Stat {
    Stat {
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        pzxid: stat.pzxid,
        ctime: stat.ctime,
        mtime: stat.mtime,
        version: stat.version,
        cversion: stat.cversion,
        ephemeral_owner: stat.ephemeral_owner,
        data_length: stat.data_length,
        num_children: stat.num_children,
    }
}

fn op_path(op: &Op) -> &str {
    match op {
        Op::Create { path, .. }
        | Op::SetData { path, .. }
        | Op::Delete { path, .. }
        | Op::Check { path, .. } => path,
    }
}

fn op_version(op: &Op) -> Option<i32> {
    match op {
        Op::Create { .. } => None,
        Op::SetData { version, .. } | Op::Delete { version, .. } => *version,
        Op::Check { version, .. } => Some(*version),
    }
}

/// Whether a request failed because its connection went away (its outcome unknown): the
/// crate answers `ConnectionLoss`, or the socket's I/O error itself (`Custom`) for requests
/// in flight when the connection broke.
fn connection_lost(err: &zk::Error) -> bool {
    matches!(err, zk::Error::ConnectionLoss | zk::Error::Custom(_))
}

/// A `BadVersion` error with the version the caller expected.
fn with_expected_version(err: Error, path: &str, version: Option<i32>) -> Error {
    match (err, version) {
        (Error::BadVersion { .. }, Some(expected)) => Error::BadVersion {
            path: path.to_string(),
            expected,
        },
        (err, _) => err,
    }
}

fn map_version_error(err: zk::Error, path: &str, version: Option<i32>) -> Error {
    match (err, version) {
        (zk::Error::BadVersion, Some(expected)) => Error::BadVersion {
            path: path.to_string(),
            expected,
        },
        (err, _) => map_error(err, path),
    }
}

/// One multi-read answer to a get_data of `path`, as [`ZkClient::get_data`] answers.
fn get_data_answer(path: &str, answer: zk::MultiReadResult) -> Result<(Vec<u8>, Stat)> {
    match answer {
        zk::MultiReadResult::Data { data, stat } => Ok((data, convert_stat(&stat))),
        zk::MultiReadResult::Error { err } => Err(map_error(err, path)),
        other => Err(Error::Backend(format!(
            "a multi-read answered {other:?} for get_data of {path}"
        ))),
    }
}

fn map_error(err: zk::Error, path: &str) -> Error {
    match err {
        zk::Error::NoNode => Error::NoNode(path.to_string()),
        zk::Error::NodeExists => Error::NodeExists(path.to_string()),
        zk::Error::BadVersion => Error::BadVersion {
            path: path.to_string(),
            expected: -1,
        },
        zk::Error::NotEmpty => Error::NotEmpty(path.to_string()),
        zk::Error::NoChildrenForEphemerals => Error::NoChildrenForEphemerals(path.to_string()),
        zk::Error::BadArguments(why) => Error::BadArguments(format!("{path}: {why}")),
        zk::Error::SessionExpired => Error::SessionExpired,
        zk::Error::ClientClosed => Error::Closed,
        zk::Error::ConnectionLoss => Error::ConnectionLoss,
        other => Error::Backend(format!("ZooKeeper error at {path}: {other}")),
    }
}

fn connect_error(connect: &str, err: &zk::Error) -> Error {
    match err {
        zk::Error::SessionExpired => Error::SessionExpired,
        other => Error::Backend(format!("cannot connect to ZooKeeper at {connect}: {other}")),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::{connect_with_capacity, parse_connect};
    use crate::{CreateMode, Error, Event, SessionOptions, SessionState};

    /// Issue 14: on ZooKeeper too, a session that does not read its events is ended as
    /// expired instead of buffering them without bound (needs GREGOR_TEST_ZOOKEEPER, like
    /// the conformance tests; GREGOR_SKIP_ZOOKEEPER=1 skips it).
    #[tokio::test]
    async fn issue_14_an_overrun_session_is_expired() {
        let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
            assert_eq!(
                std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref(),
                Ok("1"),
                "GREGOR_TEST_ZOOKEEPER is not set (or set GREGOR_SKIP_ZOOKEEPER=1)"
            );
            return;
        };
        let root = format!("{hosts}/gregor-overrun-{}", std::process::id());
        let opts = SessionOptions::default();
        let (writer, _events) = connect_with_capacity(&root, opts.clone(), 1 << 16)
            .await
            .unwrap();
        let (slow, mut slow_events) = connect_with_capacity(&root, opts, 4).await.unwrap();
        for i in 0..10 {
            let path = format!("/n{i}");
            writer
                .create(&path, b"0", CreateMode::Persistent)
                .await
                .unwrap();
            slow.get_data(&path, true).await.unwrap();
        }
        slow.create("/slow-alive", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        for i in 0..10 {
            writer
                .set_data(&format!("/n{i}"), b"1", None)
                .await
                .unwrap();
        }
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), slow_events.recv())
            .await
            .unwrap();
        assert!(
            matches!(first, Some(Event::Session(SessionState::Expired))),
            "{first:?}"
        );
        assert!(slow_events.recv().await.is_none());
        assert!(matches!(
            slow.get_data("/n0", false).await,
            Err(Error::SessionExpired)
        ));
        let mut gone = false;
        for _ in 0..100 {
            if writer.exists("/slow-alive", false).await.unwrap().is_none() {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(gone, "the overrun session's ephemeral node is removed");
        for i in 0..10 {
            writer.delete(&format!("/n{i}"), None).await.unwrap();
        }
        writer.close().await;
    }

    #[test]
    fn connect_strings() {
        assert_eq!(parse_connect("h:1").unwrap(), ("h:1", None));
        assert_eq!(parse_connect("h:1,g:2/").unwrap(), ("h:1,g:2", None));
        assert_eq!(
            parse_connect("h:1,g:2/a/b").unwrap(),
            ("h:1,g:2", Some("/a/b"))
        );
        assert!(parse_connect("/a").is_err());
        assert!(parse_connect("h:1/a/").is_err());
    }
}
