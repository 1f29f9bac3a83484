//! One-shot watch bookkeeping with ZooKeeper's rules, shared by both backends (the
//! ZooKeeper backend replays the server's change stream through it, see `zookeeper.rs`).

use std::collections::{HashMap, HashSet};

use crate::WatchedEventKind;

/// Which read registered a watch: `get_data` (or `exists` on a present node), `exists` on a
/// missing node, or `get_children`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchKind {
    Data,
    Exist,
    Child,
}

/// Registered one-shot watches: path -> sessions.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    data: HashMap<String, HashSet<i64>>,
    exist: HashMap<String, HashSet<i64>>,
    child: HashMap<String, HashSet<i64>>,
}

impl Watches {
    pub fn add(&mut self, kind: WatchKind, path: &str, session: i64) {
        let table = match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
        };
        table.entry(path.to_string()).or_default().insert(session);
    }

    /// Whether `session` has a watch of `kind` at `path`.
    pub fn contains(&self, kind: WatchKind, path: &str, session: i64) -> bool {
        let table = match kind {
            WatchKind::Data => &self.data,
            WatchKind::Exist => &self.exist,
            WatchKind::Child => &self.child,
        };
        table.get(path).is_some_and(|set| set.contains(&session))
    }

    /// Removes the watches a change triggers and returns the sessions to tell, each once.
    pub fn trigger(&mut self, kind: WatchedEventKind, path: &str) -> Vec<i64> {
        let mut sessions: Vec<i64> = Vec::new();
        let mut take = |table: &mut HashMap<String, HashSet<i64>>| {
            if let Some(set) = table.remove(path) {
                sessions.extend(set);
            }
        };
        match kind {
            WatchedEventKind::NodeCreated | WatchedEventKind::NodeDataChanged => {
                take(&mut self.data);
                take(&mut self.exist);
            }
            WatchedEventKind::NodeDeleted => {
                take(&mut self.data);
                take(&mut self.exist);
                take(&mut self.child);
            }
            WatchedEventKind::NodeChildrenChanged => take(&mut self.child),
        }
        sessions.sort_unstable();
        sessions.dedup();
        sessions
    }

    pub fn remove_session(&mut self, session: i64) {
        for table in [&mut self.data, &mut self.exist, &mut self.child] {
            table.retain(|_, set| {
                set.remove(&session);
                !set.is_empty()
            });
        }
    }

    /// Every registered watch, for a conservative replay after a reconnection.
    pub fn drain_all(&mut self) -> Vec<(WatchKind, String)> {
        let mut all = Vec::new();
        for (kind, table) in [
            (WatchKind::Data, &mut self.data),
            (WatchKind::Exist, &mut self.exist),
            (WatchKind::Child, &mut self.child),
        ] {
            let mut paths: Vec<String> = table.drain().map(|(path, _)| path).collect();
            paths.sort_unstable();
            all.extend(paths.into_iter().map(|path| (kind, path)));
        }
        all
    }
}
