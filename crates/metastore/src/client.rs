//! [`Client`]: one session on either backend, and [`Events`], its ordered event stream.

use std::fmt;
use std::sync::Arc;

use crate::embedded::EmbeddedClient;
use crate::event_queue::EventReceiver;
use crate::path::{join, parent_and_name, validate_path};
use crate::zookeeper::ZkClient;
use crate::{CreateMode, Error, Event, Op, OpResult, Result, Stat};

/// How many times the recursive helpers retry when a concurrent writer races them.
const RECURSIVE_RETRIES: usize = 16;

/// A cheap handle to one session of a store. Clones share the session.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Backend>,
    /// How long each write took to be acknowledged (the embedded store's group commit and
    /// fsync, or ZooKeeper's quorum commit, plus the way there and back).
    write_latency: Arc<telemetry::Histogram>,
}

enum Backend {
    Embedded(EmbeddedClient),
    ZooKeeper(Box<ZkClient>),
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.inner {
            Backend::Embedded(c) => f.debug_tuple("Client").field(c).finish(),
            Backend::ZooKeeper(c) => f.debug_tuple("Client").field(c).finish(),
        }
    }
}

impl Client {
    pub(crate) fn from_embedded(client: EmbeddedClient) -> Client {
        Client {
            inner: Arc::new(Backend::Embedded(client)),
            write_latency: Arc::default(),
        }
    }

    pub(crate) fn from_zookeeper(client: ZkClient) -> Client {
        Client {
            inner: Arc::new(Backend::ZooKeeper(Box::new(client))),
            write_latency: Arc::default(),
        }
    }

    /// Creates a node and returns its path (with the sequence suffix for sequential modes).
    /// The parent must exist ([`Error::NoNode`]) and must not be ephemeral.
    pub async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        let op = Op::Create {
            path: path.to_string(),
            data: data.to_vec(),
            mode,
        };
        match self.write_one(op).await? {
            OpResult::Created(path) => Ok(path),
            other => Err(unexpected(&other)),
        }
    }

    /// Creates the missing ancestors of `path` (persistent, empty), then `path` itself.
    /// Fails with [`Error::NodeExists`] if `path` (non-sequential) already exists.
    pub async fn create_recursive(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String> {
        validate_path(path)?;
        let mut last_err = None;
        for _ in 0..RECURSIVE_RETRIES {
            match self.create(path, data, mode).await {
                Err(Error::NoNode(_)) => {}
                other => return other,
            }
            // Create each ancestor from the top; someone else creating it first is fine.
            let (parent, _) = parent_and_name(path);
            for ancestor in ancestors(parent) {
                match self.create(ancestor, &[], CreateMode::Persistent).await {
                    Ok(_) | Err(Error::NodeExists(_)) => {}
                    Err(err) => {
                        last_err = Some(err);
                        break;
                    }
                }
            }
        }
        Err(last_err.unwrap_or_else(|| Error::NoNode(path.to_string())))
    }

    /// Reads a node's data and stat. `watch` registers a one-shot data watch (fires on
    /// change or delete).
    pub async fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)> {
        match &*self.inner {
            Backend::Embedded(c) => c.get_data(path, watch),
            Backend::ZooKeeper(c) => c.get_data(path, watch).await,
        }
    }

    /// Reads many nodes' data and stats, without watches: one result per path, in order.
    /// On ZooKeeper the reads go in multi-reads of a thousand nodes each, so reading a whole
    /// cluster's partition states costs tens of requests, not tens of thousands.
    pub async fn get_data_many(&self, paths: &[&str]) -> Vec<Result<(Vec<u8>, Stat)>> {
        match &*self.inner {
            Backend::Embedded(c) => c.get_data_many(paths),
            Backend::ZooKeeper(c) => c.get_data_many(paths).await,
        }
    }

    /// The node's stat, or `None`. `watch` registers a one-shot watch that fires on create,
    /// data change or delete.
    pub async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>> {
        match &*self.inner {
            Backend::Embedded(c) => c.exists(path, watch),
            Backend::ZooKeeper(c) => c.exists(path, watch).await,
        }
    }

    /// The node's child names, sorted. `watch` registers a one-shot child watch (fires on a
    /// child create/delete, or on the node's own delete).
    pub async fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>> {
        let mut children = match &*self.inner {
            Backend::Embedded(c) => c.get_children(path, watch)?,
            Backend::ZooKeeper(c) => c.get_children(path, watch).await?,
        };
        children.sort_unstable();
        Ok(children)
    }

    /// Replaces a node's data if its version is `version` (`None`: any version).
    pub async fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        let op = Op::SetData {
            path: path.to_string(),
            data: data.to_vec(),
            version,
        };
        match self.write_one(op).await? {
            OpResult::SetData(stat) => Ok(stat),
            other => Err(unexpected(&other)),
        }
    }

    /// Deletes a childless node if its version is `version` (`None`: any version).
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        match self
            .write_one(Op::Delete {
                path: path.to_string(),
                version,
            })
            .await?
        {
            OpResult::Deleted => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Deletes `path` and everything below it, deepest first. `Ok` if it is already gone.
    /// Not atomic: a concurrent creator can race it, in which case it retries.
    pub async fn delete_recursive(&self, path: &str) -> Result<()> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::BadArguments(
                "the root node cannot be deleted".to_string(),
            ));
        }
        for _ in 0..RECURSIVE_RETRIES {
            let mut order = Vec::new();
            let mut stack = vec![path.to_string()];
            while let Some(node) = stack.pop() {
                match self.get_children(&node, false).await {
                    Ok(children) => stack.extend(children.iter().map(|name| join(&node, name))),
                    Err(Error::NoNode(_)) => continue,
                    Err(err) => return Err(err),
                }
                order.push(node);
            }
            let mut raced = false;
            for node in order.iter().rev() {
                match self.delete(node, None).await {
                    Ok(()) | Err(Error::NoNode(_)) => {}
                    Err(Error::NotEmpty(_)) => {
                        raced = true;
                        break;
                    }
                    Err(err) => return Err(err),
                }
            }
            if !raced {
                return Ok(());
            }
        }
        Err(Error::NotEmpty(path.to_string()))
    }

    /// Applies all `ops` atomically, or none: on failure, [`Error::Multi`] names the first
    /// failing op.
    pub async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let started = std::time::Instant::now();
        let result = match &*self.inner {
            Backend::Embedded(c) => c.write(ops, false).await,
            Backend::ZooKeeper(c) => c.multi(ops).await,
        };
        self.write_latency.observe(started.elapsed());
        result
    }

    /// The latency of this session's writes so far (every create, set, delete and multi,
    /// until the store acknowledged it).
    pub fn write_latency(&self) -> telemetry::HistogramSnapshot {
        self.write_latency.snapshot()
    }

    /// This session's id (the `ephemeral_owner` of its ephemeral nodes).
    pub fn session_id(&self) -> i64 {
        match &*self.inner {
            Backend::Embedded(c) => c.session_id(),
            Backend::ZooKeeper(c) => c.session_id(),
        }
    }

    /// Ends the session: its ephemeral nodes are deleted and its stream ends with
    /// `Event::Session(Closed)`. Later calls fail with [`Error::Closed`]. Idempotent.
    pub async fn close(&self) {
        match &*self.inner {
            Backend::Embedded(c) => c.close().await,
            Backend::ZooKeeper(c) => c.close().await,
        }
    }

    /// Fault injection for tests: makes the store expire this session as if it timed out.
    /// Its ephemeral nodes are deleted (firing other sessions' watches), this client's stream
    /// gets `Event::Session(Expired)` and its later calls fail with [`Error::SessionExpired`].
    /// On ZooKeeper the expiry is noticed on the next contact with the server, so it may take
    /// a moment (up to a few ticks) before the event arrives.
    pub async fn expire_session(&self) -> Result<()> {
        match &*self.inner {
            Backend::Embedded(c) => {
                c.expire().await;
                Ok(())
            }
            Backend::ZooKeeper(c) => c.expire_session().await,
        }
    }

    async fn write_one(&self, op: Op) -> Result<OpResult> {
        let started = std::time::Instant::now();
        let result = self.write_one_unmeasured(op).await;
        self.write_latency.observe(started.elapsed());
        result
    }

    async fn write_one_unmeasured(&self, op: Op) -> Result<OpResult> {
        match &*self.inner {
            Backend::Embedded(c) => {
                let mut results = c.write(vec![op], true).await?;
                results
                    .pop()
                    .ok_or_else(|| Error::Backend("a write returned no result".into()))
            }
            Backend::ZooKeeper(c) => match op {
                Op::Create { path, data, mode } => {
                    c.create(&path, &data, mode).await.map(OpResult::Created)
                }
                Op::SetData {
                    path,
                    data,
                    version,
                } => c
                    .set_data(&path, &data, version)
                    .await
                    .map(OpResult::SetData),
                Op::Delete { path, version } => {
                    c.delete(&path, version).await.map(|()| OpResult::Deleted)
                }
                Op::Check { .. } => c
                    .multi(vec![op])
                    .await?
                    .pop()
                    .ok_or_else(|| Error::Backend("a check returned no result".into())),
            },
        }
    }
}

/// A client's single ordered stream of watch and session events.
#[derive(Debug)]
pub struct Events {
    rx: EventReceiver,
}

impl Events {
    pub(crate) fn new(rx: EventReceiver) -> Events {
        Events { rx }
    }

    /// The next event, or `None` once the session is closed or expired (after its
    /// `Event::Session` was delivered). A session whose stream holds more than its bound of
    /// unread watch events is ended as expired (see the `event_queue` module).
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// The next event if one is already queued.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv()
    }
}

/// `/a/b/c` -> `/a`, `/a/b`, `/a/b/c` (nothing for the root).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .skip(1)
        .map(move |(i, _)| &path[..i])
        .chain((path != "/").then_some(path))
}

fn unexpected(result: &OpResult) -> Error {
    Error::Backend(format!(
        "the store answered an op with an unexpected result {result:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::ancestors;

    #[test]
    fn ancestors_from_the_top() {
        assert_eq!(
            ancestors("/a/b/c").collect::<Vec<_>>(),
            ["/a", "/a/b", "/a/b/c"]
        );
        assert_eq!(ancestors("/a").collect::<Vec<_>>(), ["/a"]);
        assert!(ancestors("/").next().is_none());
    }
}
