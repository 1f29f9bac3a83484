//! The log cleaner's threads (Kafka's `LogCleaner` and `LogCleanerManager`): each of
//! `log.cleaner.threads` OS threads (never the async workers) repeatedly picks the hosted
//! compacted log that is most due (forced by `max.compaction.lag.ms` first, then the highest
//! dirty ratio at or above `min.cleanable.dirty.ratio`), cleans it with storage's cleaner,
//! and records the new first dirty offset in its log dir's `cleaner-offset-checkpoint`.
//! When no log is due, a thread waits `log.cleaner.backoff.ms`. Nothing runs with
//! `log.cleaner.enable=false`.
//!
//! Broker settings: `log.cleaner.enable` (true), `log.cleaner.threads` (1),
//! `log.cleaner.io.max.bytes.per.second` (unlimited; each thread gets its share),
//! `log.cleaner.dedupe.buffer.size` (128 MiB, shared by the threads),
//! `log.cleaner.backoff.ms` (15000).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use model::TopicPartition;
use replication::ReplicaManager;
use storage::checkpoint::{read_offsets, write_offsets};
use storage::log::cleaner::{CleanerConfig, Throttle, CLEANER_OFFSET_CHECKPOINT};
use tracing::{info, warn};

use crate::data_plane::now_ms;

/// The cleaner's settings from `server.properties` (Kafka's names and defaults).
pub(crate) fn cleaner_config(originals: &BTreeMap<String, String>) -> CleanerConfig {
    let get = |key: &str| originals.get(key).map(|v| v.trim().to_owned());
    let d = CleanerConfig::default();
    CleanerConfig {
        enable: get("log.cleaner.enable").map_or(d.enable, |v| v != "false"),
        threads: get("log.cleaner.threads")
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n >= 1)
            .unwrap_or(d.threads),
        io_max_bytes_per_second: get("log.cleaner.io.max.bytes.per.second")
            .and_then(|v| v.parse().ok())
            .filter(|&r: &f64| r > 0.0)
            .unwrap_or(d.io_max_bytes_per_second),
        dedupe_buffer_size: get("log.cleaner.dedupe.buffer.size")
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n >= 24)
            .unwrap_or(d.dedupe_buffer_size),
        backoff_ms: get("log.cleaner.backoff.ms")
            .and_then(|v| v.parse().ok())
            .filter(|&n: &u64| n > 0)
            .unwrap_or(d.backoff_ms),
    }
}

/// The running cleaner; dropping it does not stop it, [`LogCleaner::stop`] does.
#[derive(Debug)]
pub(crate) struct LogCleaner {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: CleanerConfig,
    replica_manager: ReplicaManager,
    /// First dirty offset per partition (the checkpoint files' content).
    checkpoints: Mutex<HashMap<TopicPartition, i64>>,
    in_progress: Mutex<HashSet<TopicPartition>>,
    stopped: AtomicBool,
    wake: (Mutex<()>, Condvar),
}

impl LogCleaner {
    /// Reads every log dir's `cleaner-offset-checkpoint` and starts the threads (none when
    /// `log.cleaner.enable=false`).
    pub(crate) fn start(
        config: CleanerConfig,
        replica_manager: ReplicaManager,
        log_dirs: Vec<PathBuf>,
    ) -> LogCleaner {
        let mut checkpoints = HashMap::new();
        for dir in &log_dirs {
            match read_offsets(&dir.join(CLEANER_OFFSET_CHECKPOINT)) {
                Ok(offsets) => checkpoints.extend(offsets),
                Err(err) => {
                    warn!(dir = %dir.display(), error = %err, "cannot read the cleaner checkpoint; cleaning those logs from their start")
                }
            }
        }
        let shared = Arc::new(Shared {
            config,
            replica_manager,
            checkpoints: Mutex::new(checkpoints),
            in_progress: Mutex::new(HashSet::new()),
            stopped: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
        });
        if shared.config.enable {
            for i in 0..shared.config.threads {
                let shared = Arc::clone(&shared);
                let spawned = std::thread::Builder::new()
                    .name(format!("log-cleaner-{i}"))
                    .spawn(move || shared.run());
                if let Err(err) = spawned {
                    warn!(error = %err, "cannot start a log cleaner thread");
                }
            }
            info!(threads = shared.config.threads, "log cleaner started");
        }
        LogCleaner { shared }
    }

    /// Stops the threads after their current group (a cleaning in progress is discarded
    /// and redone after the next start).
    pub(crate) fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.wake.1.notify_all();
    }
}

impl Shared {
    fn run(&self) {
        let threads = self.config.threads.max(1) as f64;
        let mut throttle = Throttle::new(self.config.io_max_bytes_per_second / threads);
        let capacity = self.config.map_capacity();
        while !self.stopped.load(Ordering::SeqCst) {
            if !self.clean_most_due(capacity, &mut throttle) {
                let guard = self.wake.0.lock().unwrap_or_else(|p| p.into_inner());
                let _ = self
                    .wake
                    .1
                    .wait_timeout(guard, Duration::from_millis(self.config.backoff_ms));
            }
        }
    }

    /// Cleans the most due log, if any. Returns whether one was cleaned.
    fn clean_most_due(&self, capacity: usize, throttle: &mut Throttle) -> bool {
        let now = now_ms();
        let mut best = None;
        {
            let in_progress = self.in_progress.lock().unwrap_or_else(|p| p.into_inner());
            let checkpoints = self.checkpoints.lock().unwrap_or_else(|p| p.into_inner());
            for p in self.replica_manager.partitions() {
                let tp = p.topic_partition();
                if in_progress.contains(tp) {
                    continue;
                }
                let Some(plan) = p.clean_plan(checkpoints.get(tp).copied(), now) else {
                    continue;
                };
                if !plan.is_due() {
                    continue;
                }
                let rank = (plan.forced, plan.dirty_ratio());
                if best.as_ref().is_none_or(|(r, _, _)| rank > *r) {
                    best = Some((rank, p.clone(), plan));
                }
            }
        }
        let Some((_, partition, plan)) = best else {
            return false;
        };
        let tp = partition.topic_partition().clone();
        self.in_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tp.clone());
        let result = partition.clean(&plan, capacity, throttle, now);
        self.in_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&tp);
        match result {
            Ok(stats) => {
                let secs = stats.elapsed.as_secs_f64().max(1e-9);
                info!(%tp, from = plan.first_dirty_offset, to = stats.end_offset, groups = stats.groups,
                    read_mb = stats.bytes_read as f64 / 1e6, written_mb = stats.bytes_written as f64 / 1e6,
                    records_read = stats.records_read, records_kept = stats.records_kept,
                    mb_per_s = stats.bytes_read as f64 / 1e6 / secs, "cleaned log");
                if stats.end_offset > plan.first_dirty_offset {
                    self.checkpoints
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(tp.clone(), stats.end_offset);
                    self.write_checkpoint(&partition.log_dir());
                }
                stats.end_offset > plan.first_dirty_offset
            }
            Err(err) => {
                warn!(%tp, error = %err, "log cleaning failed; will retry after the backoff");
                false
            }
        }
    }

    /// Writes `dir`'s `cleaner-offset-checkpoint`: every partition whose directory is there.
    fn write_checkpoint(&self, dir: &std::path::Path) {
        let checkpoints = self
            .checkpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let entries: BTreeMap<TopicPartition, i64> = checkpoints
            .into_iter()
            .filter(|(tp, _)| dir.join(format!("{}-{}", tp.topic, tp.partition)).is_dir())
            .collect();
        if let Err(err) = write_offsets(&dir.join(CLEANER_OFFSET_CHECKPOINT), &entries) {
            warn!(dir = %dir.display(), error = %err, "cannot write the cleaner checkpoint");
        }
    }
}
