//! The in-memory znode tree of the embedded backend: nodes, stats, versions and the
//! primitive mutations (with an undo log, so a failing multi applies nothing).
//!
//! This module does no I/O: the embedded writer decides when a change is durable.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::path::{parent_and_name, validate_path};
use crate::{CreateMode, Error, Op, OpResult, Result, Stat, WatchedEventKind};

/// The persisted part of a node's stat. `num_children` and `data_length` are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct NodeStat {
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub ephemeral_owner: i64,
}

/// One znode. Children are kept as a sorted set of names so that listing a parent with
/// 200,000 children never scans its grandchildren.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub data: Vec<u8>,
    pub stat: NodeStat,
    pub children: BTreeSet<Box<str>>,
}

impl Node {
    pub fn stat(&self) -> Stat {
        let s = self.stat;
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            ephemeral_owner: s.ephemeral_owner,
            data_length: i32::try_from(self.data.len()).unwrap_or(i32::MAX),
            num_children: i32::try_from(self.children.len()).unwrap_or(i32::MAX),
        }
    }
}

/// How to take back one primitive mutation.
#[derive(Debug)]
enum Undo {
    Created(String),
    Deleted(String, Node),
    SetData(String, Vec<u8>, NodeStat),
    ParentStat(String, NodeStat),
}

/// A change a watch may be interested in, in the order it happened.
pub(crate) type Change = (WatchedEventKind, String);

/// A fast non-cryptographic hasher for paths (the multiply-rotate scheme of rustc's
/// FxHash). SipHash was a quarter of the time to reload a million nodes; paths come from
/// our own clients, so hash flooding is not a concern here.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PathHasher(u64);

impl PathHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type PathMap<V> = HashMap<String, V, BuildHasherDefault<PathHasher>>;

/// The whole tree plus the global transaction counter.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    nodes: PathMap<Node>,
    /// Ephemeral node paths by owner session.
    ephemerals: HashMap<i64, BTreeSet<String>>,
    /// The zxid of the last applied transaction.
    zxid: i64,
}

/// The bookkeeping of one transaction in progress.
#[derive(Debug)]
pub(crate) struct Txn<'a> {
    tree: &'a mut Tree,
    zxid: i64,
    now_ms: i64,
    undo: Vec<Undo>,
    /// Fired changes, in order.
    pub changes: Vec<Change>,
    /// Paths whose node changed (created, modified or deleted) and must be persisted.
    pub dirty: &'a mut HashSet<String>,
}

impl Tree {
    /// A tree holding only the root.
    pub fn new() -> Tree {
        Tree::with_capacity(1)
    }

    /// A tree holding only the root, with room for `capacity` nodes.
    pub fn with_capacity(capacity: usize) -> Tree {
        let mut nodes = PathMap::with_capacity_and_hasher(capacity, Default::default());
        nodes.insert("/".to_string(), Node::default());
        Tree {
            nodes,
            ephemerals: HashMap::new(),
            zxid: 0,
        }
    }

    /// Rebuilds a tree from persisted nodes given in sorted path order (parents first).
    pub fn from_sorted(
        capacity: usize,
        zxid: i64,
        entries: impl Iterator<Item = Result<(String, Vec<u8>, NodeStat)>>,
    ) -> Result<Tree> {
        let mut tree = Tree::with_capacity(capacity);
        tree.zxid = zxid;
        for entry in entries {
            let (path, data, stat) = entry?;
            if path == "/" {
                let root = tree.nodes.get_mut("/").expect("root exists");
                root.data = data;
                root.stat = stat;
                continue;
            }
            let (parent, name) = parent_and_name(&path);
            let Some(parent_node) = tree.nodes.get_mut(parent) else {
                return Err(Error::Backend(format!(
                    "corrupt store: node {path} has no parent {parent}"
                )));
            };
            parent_node.children.insert(name.into());
            if stat.ephemeral_owner != 0 {
                tree.ephemerals
                    .entry(stat.ephemeral_owner)
                    .or_default()
                    .insert(path.clone());
            }
            tree.nodes.insert(
                path,
                Node {
                    data,
                    stat,
                    children: BTreeSet::new(),
                },
            );
        }
        Ok(tree)
    }

    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Sets the last zxid (log replay).
    pub fn set_zxid(&mut self, zxid: i64) {
        self.zxid = zxid;
    }

    /// Creates or replaces a node as it was logged, keeping its children (log replay).
    /// The parent must exist.
    pub fn put_node(&mut self, path: &str, data: Vec<u8>, stat: NodeStat) -> Result<()> {
        if let Some(node) = self.nodes.get_mut(path) {
            let old_owner = node.stat.ephemeral_owner;
            node.data = data;
            node.stat = stat;
            if old_owner != stat.ephemeral_owner {
                if old_owner != 0 {
                    remove_ephemeral(&mut self.ephemerals, old_owner, path);
                }
                if stat.ephemeral_owner != 0 {
                    self.ephemerals
                        .entry(stat.ephemeral_owner)
                        .or_default()
                        .insert(path.to_string());
                }
            }
            return Ok(());
        }
        let (parent, name) = parent_and_name(path);
        let Some(parent_node) = self.nodes.get_mut(parent) else {
            return Err(Error::Backend(format!(
                "corrupt store log: {path} has no parent {parent}"
            )));
        };
        parent_node.children.insert(name.into());
        if stat.ephemeral_owner != 0 {
            self.ephemerals
                .entry(stat.ephemeral_owner)
                .or_default()
                .insert(path.to_string());
        }
        self.nodes.insert(
            path.to_string(),
            Node {
                data,
                stat,
                children: BTreeSet::new(),
            },
        );
        Ok(())
    }

    /// Removes a childless node if present (log replay).
    pub fn remove_node(&mut self, path: &str) -> Result<()> {
        let Some(node) = self.nodes.get(path) else {
            return Ok(());
        };
        if !node.children.is_empty() || path == "/" {
            return Err(Error::Backend(format!(
                "corrupt store log: deletes {path} with children"
            )));
        }
        let node = self.nodes.remove(path).expect("checked above");
        if node.stat.ephemeral_owner != 0 {
            remove_ephemeral(&mut self.ephemerals, node.stat.ephemeral_owner, path);
        }
        let (parent, name) = parent_and_name(path);
        if let Some(parent) = self.nodes.get_mut(parent) {
            parent.children.remove(name);
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Makes the nodes at `paths` what they are in `source` (copied, or removed where
    /// `source` has none), with `source`'s zxid: publishes a committed batch of `source`'s
    /// changes into this copy. `paths` must hold every node the batch changed, parents
    /// included (a transaction's `dirty` set does).
    pub fn sync_from<'a>(&mut self, source: &Tree, paths: impl IntoIterator<Item = &'a String>) {
        for path in paths {
            let old_owner = self
                .nodes
                .get(path)
                .map_or(0, |node| node.stat.ephemeral_owner);
            if old_owner != 0 {
                remove_ephemeral(&mut self.ephemerals, old_owner, path);
            }
            match source.nodes.get(path) {
                Some(node) => {
                    if node.stat.ephemeral_owner != 0 {
                        self.ephemerals
                            .entry(node.stat.ephemeral_owner)
                            .or_default()
                            .insert(path.clone());
                    }
                    self.nodes.insert(path.clone(), node.clone());
                }
                None => {
                    self.nodes.remove(path);
                }
            }
        }
        self.zxid = source.zxid;
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Every ephemeral node's path, whoever owns it.
    pub fn all_ephemerals(&self) -> Vec<String> {
        self.ephemerals.values().flatten().cloned().collect()
    }

    /// Ephemeral node paths owned by `session`.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Starts a transaction with the next zxid. Drop it after `commit` or `rollback`.
    pub fn begin<'a>(&'a mut self, now_ms: i64, dirty: &'a mut HashSet<String>) -> Txn<'a> {
        let zxid = self.zxid + 1;
        Txn {
            tree: self,
            zxid,
            now_ms,
            undo: Vec::new(),
            changes: Vec::new(),
            dirty,
        }
    }
}

impl Txn<'_> {
    /// Applies `ops` in order; on the first failure everything is undone and the error
    /// names the failing op. A txn with no successful mutation still consumes its zxid
    /// only if it commits.
    pub fn apply_all(
        &mut self,
        ops: &[Op],
        session: i64,
    ) -> std::result::Result<Vec<OpResult>, (usize, Error)> {
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            match self.apply(op, session) {
                Ok(result) => results.push(result),
                Err(err) => {
                    self.rollback();
                    return Err((index, err));
                }
            }
        }
        Ok(results)
    }

    /// Makes the transaction's zxid the tree's last zxid and returns the fired changes.
    pub fn commit(self) -> Vec<Change> {
        if !self.undo.is_empty() {
            self.tree.zxid = self.zxid;
        }
        self.changes
    }

    fn apply(&mut self, op: &Op, session: i64) -> Result<OpResult> {
        match op {
            Op::Create { path, data, mode } => self
                .create(path, data, *mode, session)
                .map(OpResult::Created),
            Op::SetData {
                path,
                data,
                version,
            } => self.set_data(path, data, *version).map(OpResult::SetData),
            Op::Delete { path, version } => self.delete(path, *version).map(|()| OpResult::Deleted),
            Op::Check { path, version } => self.check(path, *version).map(|()| OpResult::Checked),
        }
    }

    pub fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        session: i64,
    ) -> Result<String> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::NodeExists(path.to_string()));
        }
        let (parent_path, _) = parent_and_name(path);
        let parent_path = parent_path.to_string();
        let Some(parent) = self.tree.nodes.get(&parent_path) else {
            return Err(Error::NoNode(path.to_string()));
        };
        if parent.stat.ephemeral_owner != 0 {
            return Err(Error::NoChildrenForEphemerals(path.to_string()));
        }
        let created = if mode.is_sequential() {
            // ZooKeeper names sequential nodes after the parent's cversion.
            format!("{path}{:010}", parent.stat.cversion)
        } else {
            path.to_string()
        };
        if self.tree.nodes.contains_key(&created) {
            return Err(Error::NodeExists(created));
        }
        let owner = if mode.is_ephemeral() { session } else { 0 };
        let parent = self
            .tree
            .nodes
            .get_mut(&parent_path)
            .expect("checked above");
        self.undo
            .push(Undo::ParentStat(parent_path.clone(), parent.stat));
        parent.stat.cversion += 1;
        parent.stat.pzxid = self.zxid;
        let (_, name) = parent_and_name(&created);
        parent.children.insert(name.into());
        let stat = NodeStat {
            czxid: self.zxid,
            mzxid: self.zxid,
            pzxid: self.zxid,
            ctime: self.now_ms,
            mtime: self.now_ms,
            version: 0,
            cversion: 0,
            ephemeral_owner: owner,
        };
        self.tree.nodes.insert(
            created.clone(),
            Node {
                data: data.to_vec(),
                stat,
                children: BTreeSet::new(),
            },
        );
        if owner != 0 {
            self.tree
                .ephemerals
                .entry(owner)
                .or_default()
                .insert(created.clone());
        }
        self.undo.push(Undo::Created(created.clone()));
        self.dirty.insert(created.clone());
        self.dirty.insert(parent_path.clone());
        self.changes
            .push((WatchedEventKind::NodeCreated, created.clone()));
        self.changes
            .push((WatchedEventKind::NodeChildrenChanged, parent_path));
        Ok(created)
    }

    pub fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        validate_path(path)?;
        let Some(node) = self.tree.nodes.get_mut(path) else {
            return Err(Error::NoNode(path.to_string()));
        };
        if let Some(expected) = version {
            if node.stat.version != expected {
                return Err(Error::BadVersion {
                    path: path.to_string(),
                    expected,
                });
            }
        }
        let old_data = std::mem::replace(&mut node.data, data.to_vec());
        self.undo
            .push(Undo::SetData(path.to_string(), old_data, node.stat));
        node.stat.version = node.stat.version.wrapping_add(1);
        node.stat.mzxid = self.zxid;
        node.stat.mtime = self.now_ms;
        let stat = node.stat();
        self.dirty.insert(path.to_string());
        self.changes
            .push((WatchedEventKind::NodeDataChanged, path.to_string()));
        Ok(stat)
    }

    pub fn delete(&mut self, path: &str, version: Option<i32>) -> Result<()> {
        validate_path(path)?;
        if path == "/" {
            return Err(Error::BadArguments(
                "the root node cannot be deleted".to_string(),
            ));
        }
        let Some(node) = self.tree.nodes.get(path) else {
            return Err(Error::NoNode(path.to_string()));
        };
        if let Some(expected) = version {
            if node.stat.version != expected {
                return Err(Error::BadVersion {
                    path: path.to_string(),
                    expected,
                });
            }
        }
        if !node.children.is_empty() {
            return Err(Error::NotEmpty(path.to_string()));
        }
        let node = self.tree.nodes.remove(path).expect("checked above");
        if node.stat.ephemeral_owner != 0 {
            remove_ephemeral(&mut self.tree.ephemerals, node.stat.ephemeral_owner, path);
        }
        let (parent_path, name) = parent_and_name(path);
        let parent = self
            .tree
            .nodes
            .get_mut(parent_path)
            .expect("a node's parent exists");
        self.undo
            .push(Undo::ParentStat(parent_path.to_string(), parent.stat));
        parent.stat.cversion += 1;
        parent.stat.pzxid = self.zxid;
        parent.children.remove(name);
        self.undo.push(Undo::Deleted(path.to_string(), node));
        self.dirty.insert(path.to_string());
        self.dirty.insert(parent_path.to_string());
        self.changes
            .push((WatchedEventKind::NodeDeleted, path.to_string()));
        self.changes.push((
            WatchedEventKind::NodeChildrenChanged,
            parent_path.to_string(),
        ));
        Ok(())
    }

    pub fn check(&mut self, path: &str, version: i32) -> Result<()> {
        validate_path(path)?;
        let Some(node) = self.tree.nodes.get(path) else {
            return Err(Error::NoNode(path.to_string()));
        };
        if node.stat.version != version {
            return Err(Error::BadVersion {
                path: path.to_string(),
                expected: version,
            });
        }
        Ok(())
    }

    /// Takes back every mutation of this transaction, newest first.
    fn rollback(&mut self) {
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::Created(path) => {
                    let node = self.tree.nodes.remove(&path).expect("created node exists");
                    if node.stat.ephemeral_owner != 0 {
                        remove_ephemeral(
                            &mut self.tree.ephemerals,
                            node.stat.ephemeral_owner,
                            &path,
                        );
                    }
                    let (parent, name) = parent_and_name(&path);
                    if let Some(parent) = self.tree.nodes.get_mut(parent) {
                        parent.children.remove(name);
                    }
                }
                Undo::Deleted(path, node) => {
                    if node.stat.ephemeral_owner != 0 {
                        self.tree
                            .ephemerals
                            .entry(node.stat.ephemeral_owner)
                            .or_default()
                            .insert(path.clone());
                    }
                    let (parent, name) = parent_and_name(&path);
                    if let Some(parent) = self.tree.nodes.get_mut(parent) {
                        parent.children.insert(name.into());
                    }
                    self.tree.nodes.insert(path, node);
                }
                Undo::SetData(path, data, stat) => {
                    let node = self
                        .tree
                        .nodes
                        .get_mut(&path)
                        .expect("modified node exists");
                    node.data = data;
                    node.stat = stat;
                }
                Undo::ParentStat(path, stat) => {
                    self.tree.nodes.get_mut(&path).expect("parent exists").stat = stat;
                }
            }
        }
        self.changes.clear();
    }
}

fn remove_ephemeral(ephemerals: &mut HashMap<i64, BTreeSet<String>>, owner: i64, path: &str) {
    if let Some(set) = ephemerals.get_mut(&owner) {
        set.remove(path);
        if set.is_empty() {
            ephemerals.remove(&owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(tree: &mut Tree, path: &str, mode: CreateMode) -> Result<String> {
        let mut dirty = HashSet::new();
        let mut txn = tree.begin(1, &mut dirty);
        let result = txn.apply_all(
            &[Op::Create {
                path: path.into(),
                data: b"x".to_vec(),
                mode,
            }],
            7,
        );
        txn.commit();
        result
            .map(|mut r| match r.remove(0) {
                OpResult::Created(p) => p,
                other => panic!("unexpected {other:?}"),
            })
            .map_err(|(_, e)| e)
    }

    #[test]
    fn failed_multi_leaves_tree_and_zxid_untouched() {
        let mut tree = Tree::new();
        create(&mut tree, "/a", CreateMode::Persistent).unwrap();
        let before_zxid = tree.zxid();
        let before_stat = tree.get("/a").unwrap().stat();
        let mut dirty = HashSet::new();
        let mut txn = tree.begin(2, &mut dirty);
        let err = txn
            .apply_all(
                &[
                    Op::Create {
                        path: "/a/b".into(),
                        data: vec![],
                        mode: CreateMode::Persistent,
                    },
                    Op::SetData {
                        path: "/a".into(),
                        data: b"y".to_vec(),
                        version: Some(0),
                    },
                    Op::Delete {
                        path: "/a/b".into(),
                        version: None,
                    },
                    Op::Check {
                        path: "/a".into(),
                        version: 0,
                    },
                ],
                7,
            )
            .unwrap_err();
        assert_eq!(err.0, 3);
        assert!(txn.commit().is_empty());
        assert_eq!(tree.zxid(), before_zxid);
        assert_eq!(tree.get("/a").unwrap().stat(), before_stat);
        assert_eq!(tree.get("/a").unwrap().data, b"x");
        assert!(tree.get("/a/b").is_none());
    }

    #[test]
    fn sequential_suffix_follows_parent_cversion() {
        let mut tree = Tree::new();
        create(&mut tree, "/q", CreateMode::Persistent).unwrap();
        assert_eq!(
            create(&mut tree, "/q/n-", CreateMode::PersistentSequential).unwrap(),
            "/q/n-0000000000"
        );
        create(&mut tree, "/q/other", CreateMode::Persistent).unwrap();
        assert_eq!(
            create(&mut tree, "/q/n-", CreateMode::EphemeralSequential).unwrap(),
            "/q/n-0000000002"
        );
        assert_eq!(tree.ephemerals_of(7), vec!["/q/n-0000000002".to_string()]);
    }
}
