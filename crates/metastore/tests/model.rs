//! Model-based test of the embedded store: random sequences of creates, sets, deletes and
//! multis (with checks) run against the store and against a plain `BTreeMap` model of
//! ZooKeeper's rules; every result and the final tree must agree, also after a reopen.

use std::collections::BTreeMap;

use metastore::{CreateMode, EmbeddedStore, Error, Op, OpResult, SessionOptions};
use proptest::prelude::*;

/// A small universe of paths, so that ops often collide.
const PATHS: &[&str] = &["/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/z", "/a/x-"];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ModelNode {
    data: Vec<u8>,
    version: i32,
    cversion: i32,
}

/// ZooKeeper's rules over a map; root always present.
#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<String, ModelNode>,
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_string(), ModelNode::default());
        Model { nodes }
    }

    fn parent(path: &str) -> String {
        match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => path[..i].to_string(),
            None => unreachable!("absolute paths"),
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .keys()
            .filter(|p| {
                p.len() > prefix.len() && p.starts_with(&prefix) && !p[prefix.len()..].contains('/')
            })
            .map(|p| p[prefix.len()..].to_string())
            .collect()
    }

    fn apply(&mut self, op: &Op) -> Result<OpResult, Error> {
        match op {
            Op::Create { path, data, mode } => {
                let parent = Model::parent(path);
                let Some(p) = self.nodes.get(&parent) else {
                    return Err(Error::NoNode(path.clone()));
                };
                let created = if mode.is_sequential() {
                    format!("{path}{:010}", p.cversion)
                } else {
                    path.clone()
                };
                if self.nodes.contains_key(&created) {
                    return Err(Error::NodeExists(created));
                }
                self.nodes.get_mut(&parent).unwrap().cversion += 1;
                self.nodes.insert(
                    created.clone(),
                    ModelNode {
                        data: data.clone(),
                        ..Default::default()
                    },
                );
                Ok(OpResult::Created(created))
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                let Some(node) = self.nodes.get_mut(path) else {
                    return Err(Error::NoNode(path.clone()));
                };
                if let Some(expected) = version {
                    if *expected != node.version {
                        return Err(Error::BadVersion {
                            path: path.clone(),
                            expected: *expected,
                        });
                    }
                }
                node.data = data.clone();
                node.version += 1;
                // The stat is compared separately; the variant is what matters here.
                Ok(OpResult::SetData(Default::default()))
            }
            Op::Delete { path, version } => {
                let Some(node) = self.nodes.get(path) else {
                    return Err(Error::NoNode(path.clone()));
                };
                if let Some(expected) = version {
                    if *expected != node.version {
                        return Err(Error::BadVersion {
                            path: path.clone(),
                            expected: *expected,
                        });
                    }
                }
                if !self.children(path).is_empty() {
                    return Err(Error::NotEmpty(path.clone()));
                }
                self.nodes.remove(path);
                self.nodes.get_mut(&Model::parent(path)).unwrap().cversion += 1;
                Ok(OpResult::Deleted)
            }
            Op::Check { path, version } => match self.nodes.get(path) {
                None => Err(Error::NoNode(path.clone())),
                Some(node) if node.version != *version => Err(Error::BadVersion {
                    path: path.clone(),
                    expected: *version,
                }),
                Some(_) => Ok(OpResult::Checked),
            },
        }
    }

    fn multi(&mut self, ops: &[Op]) -> Result<Vec<OpResult>, Error> {
        let mut scratch = self.clone();
        let mut results = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            match scratch.apply(op) {
                Ok(result) => results.push(result),
                Err(source) => {
                    return Err(Error::Multi {
                        index,
                        source: Box::new(source),
                    })
                }
            }
        }
        *self = scratch;
        Ok(results)
    }
}

#[derive(Debug, Clone)]
enum Action {
    Single(Op),
    Multi(Vec<Op>),
}

fn op() -> impl Strategy<Value = Op> {
    let path = prop::sample::select(PATHS).prop_map(str::to_string);
    let data = prop::collection::vec(any::<u8>(), 0..8);
    let version = prop::option::of(0..3i32);
    prop_oneof![
        3 => (path.clone(), data.clone(), any::<bool>()).prop_map(|(path, data, seq)| Op::Create {
            path,
            data,
            mode: if seq { CreateMode::PersistentSequential } else { CreateMode::Persistent },
        }),
        2 => (path.clone(), data, version.clone()).prop_map(|(path, data, version)| Op::SetData { path, data, version }),
        2 => (path.clone(), version).prop_map(|(path, version)| Op::Delete { path, version }),
        1 => (path, 0..3i32).prop_map(|(path, version)| Op::Check { path, version }),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => op().prop_filter("checks only in multis", |op| !matches!(op, Op::Check { .. })).prop_map(Action::Single),
        1 => prop::collection::vec(op(), 1..4).prop_map(Action::Multi),
    ]
}

/// Results compared by kind (stats are checked through the final tree).
fn same(a: &Result<Vec<OpResult>, Error>, b: &Result<Vec<OpResult>, Error>) -> bool {
    let kind = |r: &OpResult| match r {
        OpResult::SetData(_) => OpResult::SetData(Default::default()),
        other => other.clone(),
    };
    match (a, b) {
        (Ok(a), Ok(b)) => a.iter().map(kind).eq(b.iter().map(kind)),
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

async fn assert_tree_matches(client: &metastore::Client, model: &Model) {
    for (path, node) in &model.nodes {
        let (data, stat) = client.get_data(path, false).await.unwrap();
        assert_eq!(data, node.data, "{path}");
        assert_eq!(
            (stat.version, stat.cversion),
            (node.version, node.cversion),
            "{path}"
        );
        let children = client.get_children(path, false).await.unwrap();
        assert_eq!(children, model.children(path), "{path}");
        assert_eq!(stat.num_children as usize, children.len(), "{path}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn embedded_store_follows_the_model(actions in prop::collection::vec(action(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = EmbeddedStore::open(dir.path()).unwrap();
            let (client, _events) = store.connect(SessionOptions::default());
            let mut model = Model::new();
            for action in &actions {
                let (got, want) = match action {
                    Action::Single(op) => {
                        let got = client.multi(vec![op.clone()]).await.map_err(|err| match err {
                            Error::Multi { source, .. } => *source,
                            other => other,
                        });
                        let want = model.apply(op).map(|r| vec![r]);
                        (got, want)
                    }
                    Action::Multi(ops) => (client.multi(ops.clone()).await, model.multi(ops)),
                };
                assert!(same(&got, &want), "{action:?}: store {got:?}, model {want:?}");
            }
            assert_tree_matches(&client, &model).await;
            assert_eq!(store.node_count(), model.nodes.len());
            store.close().await;

            let store = EmbeddedStore::open(dir.path()).unwrap();
            let (client, _events) = store.connect(SessionOptions::default());
            assert_tree_matches(&client, &model).await;
            assert_eq!(store.node_count(), model.nodes.len());
        });
    }
}
