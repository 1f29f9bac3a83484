//! The seed's view of committed offsets, `/consumers/<group>/offsets/<topic>/<partition>` in
//! the metadata store, kept behind `__consumer_offsets` for ZooKeeper-reading tools (Burrow's
//! `kafka_zk` module, the seed's examples) and for OffsetCommit/OffsetFetch v0, which Kafka 2.8
//! serves from ZooKeeper.
//!
//! A coordinator queues every commit it has appended (and every offset it deleted) here, never
//! waiting: the commit's answer does not depend on the store. A task writes the queue every
//! [`MIRROR_INTERVAL`], one store `multi` per group holding only the latest offset of each
//! partition, so a busy group costs one write per interval however often it commits. A failed
//! write is queued again (a newer commit wins). How far behind the mirror is, is the age of
//! the oldest queued change: `gregor_consumer_offsets_zk_mirror_lag_ms` (and
//! `..._pending`, the queued partitions) on `/metrics`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use model::TopicPartition;
use tracing::warn;

use crate::context::BrokerContext;

/// How often queued changes are written to the metadata store.
pub(crate) const MIRROR_INTERVAL: Duration = Duration::from_secs(1);

/// One queued change of a partition's mirrored offset, with when it was first queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Change {
    offset: Option<i64>,
    since: Instant,
}

type Queue = BTreeMap<String, BTreeMap<TopicPartition, Change>>;

/// The queue of changes not yet in the metadata store.
#[derive(Debug, Default)]
pub(crate) struct OffsetsMirror {
    queue: Mutex<Queue>,
}

fn lock(m: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    // Every update is a map edit; a poisoned map is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OffsetsMirror {
    /// Queues committed offsets of `group` (`None`: the offset was deleted).
    pub(crate) fn queue(
        &self,
        group: &str,
        changes: impl IntoIterator<Item = (TopicPartition, Option<i64>)>,
    ) {
        let now = Instant::now();
        let mut queue = lock(&self.queue);
        let pending = queue.entry(group.to_owned()).or_default();
        for (tp, offset) in changes {
            let since = pending.get(&tp).map_or(now, |c| c.since);
            pending.insert(tp, Change { offset, since });
        }
        if pending.is_empty() {
            queue.remove(group);
        }
    }

    /// How long the oldest queued change has waited, and how many partitions are queued.
    pub(crate) fn lag(&self) -> (Duration, usize) {
        let queue = lock(&self.queue);
        let oldest = queue
            .values()
            .flat_map(|p| p.values())
            .map(|c| c.since)
            .min();
        let pending = queue.values().map(BTreeMap::len).sum();
        (oldest.map_or(Duration::ZERO, |t| t.elapsed()), pending)
    }

    fn take(&self) -> Queue {
        std::mem::take(&mut *lock(&self.queue))
    }

    /// Puts back what could not be written, under anything queued meanwhile (newer).
    fn requeue(&self, group: String, changes: BTreeMap<TopicPartition, Change>) {
        let mut queue = lock(&self.queue);
        let pending = queue.entry(group).or_default();
        for (tp, change) in changes {
            match pending.get_mut(&tp) {
                Some(newer) => newer.since = newer.since.min(change.since),
                None => {
                    pending.insert(tp, change);
                }
            }
        }
    }
}

/// Starts the task that writes the queue to the metadata store every [`MIRROR_INTERVAL`].
pub(crate) fn start(ctx: &Arc<BrokerContext>) {
    let weak: Weak<BrokerContext> = Arc::downgrade(ctx);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(MIRROR_INTERVAL).await;
            let Some(ctx) = weak.upgrade() else { return };
            flush(&ctx).await;
        }
    });
}

/// Writes every queued change: one multi of set-or-create per group, one of deletes.
pub(crate) async fn flush(ctx: &BrokerContext) {
    let mirror = &ctx.groups.mirror;
    for (group, changes) in mirror.take() {
        let sets: Vec<(TopicPartition, i64)> = changes
            .iter()
            .filter_map(|(tp, c)| Some((tp.clone(), c.offset?)))
            .collect();
        let deletes: Vec<TopicPartition> = changes
            .iter()
            .filter(|(_, c)| c.offset.is_none())
            .map(|(tp, _)| tp.clone())
            .collect();
        let zk = ctx.zk();
        let mut result = zk.commit_consumer_offsets(&group, &sets).await;
        if result.is_ok() && !deletes.is_empty() {
            result = zk.delete_consumer_offsets(&group, &deletes).await;
        }
        if let Err(err) = result {
            warn!(group, %err, partitions = changes.len(), "cannot mirror committed offsets to /consumers; retrying");
            mirror.requeue(group, changes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t".parse().unwrap(), p)
    }

    #[test]
    fn the_queue_keeps_the_latest_offset_and_the_oldest_time() {
        let mirror = OffsetsMirror::default();
        assert_eq!(mirror.lag(), (Duration::ZERO, 0));
        mirror.queue("g", [(tp(0), Some(1)), (tp(1), Some(5))]);
        let first = lock(&mirror.queue)["g"][&tp(0)].since;
        std::thread::sleep(Duration::from_millis(5));
        mirror.queue("g", [(tp(0), Some(2)), (tp(1), None)]);
        let queued = mirror.take();
        assert_eq!(queued["g"][&tp(0)].offset, Some(2));
        assert_eq!(
            queued["g"][&tp(0)].since,
            first,
            "lag counts from the first change"
        );
        assert_eq!(queued["g"][&tp(1)].offset, None);
        assert_eq!(mirror.lag().1, 0);
        // A failed write goes back under a newer change queued meanwhile.
        mirror.queue("g", [(tp(0), Some(3))]);
        mirror.requeue("g".to_owned(), queued["g"].clone());
        let queue = mirror.take();
        assert_eq!(queue["g"][&tp(0)].offset, Some(3));
        assert_eq!(queue["g"][&tp(0)].since, first);
        assert_eq!(queue["g"][&tp(1)].offset, None);
    }
}
