//! The partitions of an internal topic (`__consumer_offsets`, `__transaction_state`) whose
//! coordinator this broker is: the ones it leads, each loading (its log being replayed) or
//! loaded (served), at the leader epoch it was led at. The group and transaction
//! coordinators both follow leadership with it: [`LedPartitions::reconcile`] says what to load
//! and unload, and a load ends with [`LedPartitions::finish_load`] unless leadership moved while
//! the log was read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use model::TopicPartition;

/// Where a led partition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// Its log is being replayed: requests for it answer COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Replayed and served.
    Loaded,
}

/// Led partitions by number: (leader epoch, load state).
#[derive(Debug, Default)]
pub(crate) struct LedPartitions {
    held: Mutex<BTreeMap<i32, (i32, Load)>>,
}

/// What [`LedPartitions::reconcile`] found changed.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// Newly led partitions, now loading: (partition, leader epoch).
    pub to_load: Vec<(i32, i32)>,
    /// Partitions no longer led (or led at another epoch): their state must be dropped.
    pub to_unload: BTreeSet<i32>,
}

impl LedPartitions {
    fn held(&self) -> MutexGuard<'_, BTreeMap<i32, (i32, Load)>> {
        // Every update is a single map edit, so a poisoned value is consistent.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition's leader epoch and load state, if this broker leads it.
    pub(crate) fn get(&self, partition: i32) -> Option<(i32, Load)> {
        self.held().get(&partition).copied()
    }

    /// Whether some led partition is still loading.
    pub(crate) fn any_loading(&self) -> bool {
        self.held().values().any(|(_, load)| *load == Load::Loading)
    }

    /// Forgets every partition (the broker stops coordinating).
    pub(crate) fn clear(&self) {
        self.held().clear();
    }

    /// Compares the first `count` partitions of the topic (`tp` names them) that this broker
    /// leads with those it holds. Only those partitions are looked up: a broker may host
    /// 100,000 others, and this runs every half second and after every metadata change.
    pub(crate) fn reconcile(
        &self,
        replicas: &replication::ReplicaManager,
        count: i32,
        tp: impl Fn(i32) -> TopicPartition,
    ) -> Changes {
        let led: BTreeMap<i32, i32> = (0..count)
            .filter_map(|partition| match replicas.get(&tp(partition))?.role() {
                Some(replication::Role::Leader { leader_epoch }) => Some((partition, leader_epoch)),
                _ => None,
            })
            .collect();
        let mut changes = Changes::default();
        let mut held = self.held();
        held.retain(|partition, held| {
            let keep = led.get(partition) == Some(&held.0);
            if !keep {
                changes.to_unload.insert(*partition);
            }
            keep
        });
        for (&partition, &epoch) in &led {
            if let std::collections::btree_map::Entry::Vacant(entry) = held.entry(partition) {
                entry.insert((epoch, Load::Loading));
                changes.to_load.push((partition, epoch));
            }
        }
        changes
    }

    /// A load that failed: the partition is forgotten (the next reconcile loads it again),
    /// unless leadership moved meanwhile.
    pub(crate) fn load_failed(&self, partition: i32, epoch: i32) {
        let mut held = self.held();
        if held.get(&partition) == Some(&(epoch, Load::Loading)) {
            held.remove(&partition);
        }
    }

    /// Ends the load of `partition` at `epoch`: if it is still loading at that epoch, runs
    /// `apply` (installing what was replayed) and marks it loaded, both under the lock, so no
    /// reconcile unloads it in between. `None` when leadership moved while the log was read
    /// (the newer state wins).
    pub(crate) fn finish_load<R>(
        &self,
        partition: i32,
        epoch: i32,
        apply: impl FnOnce() -> R,
    ) -> Option<R> {
        let mut held = self.held();
        if held.get(&partition) != Some(&(epoch, Load::Loading)) {
            return None;
        }
        let result = apply();
        held.insert(partition, (epoch, Load::Loaded));
        Some(result)
    }
}

/// When this broker last asked the controller to create a coordinator's internal topic, so
/// that FindCoordinator asks at most once per interval while the topic does not exist yet.
#[derive(Debug, Default)]
pub(crate) struct CreationAsked(Mutex<Option<Instant>>);

impl CreationAsked {
    /// Whether to ask now (nothing asked in the last `every`); if so, records the ask.
    pub(crate) fn ask_now(&self, every: Duration) -> bool {
        let mut asked = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if asked.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        *asked = Some(now);
        true
    }
}
