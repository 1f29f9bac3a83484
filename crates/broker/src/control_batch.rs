//! Runs the per-partition disk work of a control request (LeaderAndIsr, StopReplica) off the
//! async workers, as one batch.
//!
//! Creating, opening or deleting a partition's log is filesystem work (directories, files,
//! renames, fsyncs). Done inline it would hold a tokio worker for as long as the whole
//! request takes, and with two cores that stalls every other connection: Metadata, Produce
//! and Fetch for existing partitions. So the batch runs on the blocking pool, split over a
//! few threads, and the small files it writes (`partition.metadata`, the leader-epoch
//! checkpoints of existing logs) are made durable together at the end, with one `syncfs` per
//! filesystem ([`storage::SyncGroup`]) instead of one fsync each. The request is answered
//! after that.

use std::collections::BTreeSet;
use std::path::PathBuf;

use tracing::error;

/// At most this many threads work on one batch.
const MAX_THREADS: usize = 4;
/// Items one thread takes at least (smaller batches run on one thread).
const MIN_ITEMS_PER_THREAD: usize = 256;

/// What [`run`] returns: each item's result, in order, and the partition directories whose
/// files could not be made durable at the end (their items must report a storage error).
#[derive(Debug)]
pub(crate) struct Ran<R> {
    pub results: Vec<R>,
    pub unsynced_dirs: BTreeSet<PathBuf>,
}

/// Runs `work` on every item on the blocking pool (a few threads for big batches), inside one
/// [`storage::SyncGroup`] committed before returning. `work` may use the tokio runtime (spawn
/// tasks): every thread runs inside it.
pub(crate) async fn run<T, R, F>(items: Vec<T>, work: F) -> Ran<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> R + Send + Sync + 'static,
{
    if items.is_empty() {
        return Ran {
            results: Vec::new(),
            unsynced_dirs: BTreeSet::new(),
        };
    }
    let runtime = tokio::runtime::Handle::current();
    let batch = tokio::task::spawn_blocking(move || run_blocking(items, &work, &runtime)).await;
    match batch {
        Ok(ran) => ran,
        // A panic in the work: the runtime reports it; nothing to answer but the panic again.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

fn run_blocking<T, R, F>(items: Vec<T>, work: &F, runtime: &tokio::runtime::Handle) -> Ran<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    let group = storage::SyncGroup::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores
        .min(MAX_THREADS)
        .min(items.len().div_ceil(MIN_ITEMS_PER_THREAD))
        .max(1);
    let count = items.len();
    let mut results: Vec<Option<R>> = (0..count).map(|_| None).collect();
    if threads == 1 {
        let _entered = group.enter();
        for (slot, item) in results.iter_mut().zip(items) {
            *slot = Some(work(item));
        }
    } else {
        // Deal the items out round-robin, so each thread gets a share of every topic.
        let mut shares: Vec<Vec<(usize, T)>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, item) in items.into_iter().enumerate() {
            shares[i % threads].push((i, item));
        }
        let done: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| {
                    let group = &group;
                    scope.spawn(move || {
                        let _runtime = runtime.enter();
                        let _entered = group.enter();
                        share
                            .into_iter()
                            .map(|(i, item)| (i, work(item)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for (i, result) in done.into_iter().flatten() {
            results[i] = Some(result);
        }
    }
    let mut unsynced_dirs = BTreeSet::new();
    for (path, err) in group.commit() {
        error!(path = %path.display(), error = %err, "a file of a partition could not be made durable");
        if let Some(dir) = path.parent() {
            unsynced_dirs.insert(dir.to_path_buf());
        }
    }
    Ran {
        results: results
            .into_iter()
            .map(|r| r.expect("every item ran"))
            .collect(),
        unsynced_dirs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn results_keep_the_order_and_files_are_in_place_after_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let items: Vec<usize> = (0..1000).collect();
        let ran = run(items, move |i| {
            let sub = root.join(format!("p-{i}"));
            std::fs::create_dir(&sub).unwrap();
            // A checkpoint file goes through the group.
            storage::checkpoint::write_leader_epochs(
                &sub.join("leader-epoch-checkpoint"),
                &[(0, 0)],
            )
            .unwrap();
            // The runtime is there for the work.
            let handle = tokio::runtime::Handle::current();
            drop(handle.spawn(async {}));
            i * 2
        })
        .await;
        assert_eq!(ran.results, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
        assert!(ran.unsynced_dirs.is_empty());
        for i in [0, 511, 999] {
            let file = dir.path().join(format!("p-{i}/leader-epoch-checkpoint"));
            assert_eq!(std::fs::read_to_string(file).unwrap(), "0\n1\n0 0\n");
        }
    }
}
