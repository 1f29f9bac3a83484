//! The partitions this broker hosts (Kafka's `ReplicaManager` and `Partition`): the open
//! [`storage::log::Log`] of each, this broker's role (leader or follower, with the leader
//! epoch and `leader-epoch-checkpoint`), per-partition idempotent-producer state, the high
//! watermark, and the append notification that wakes long-polling fetches.
//!
//! It also owns the per-log-dir `recovery-point-offset-checkpoint` and
//! `log-start-offset-checkpoint` files (read when a partition opens, written by
//! [`ReplicaManager::checkpoint`] on a schedule and at clean shutdown), and the `flush.ms`
//! and retention passes the broker runs on a schedule.
//!
//! # Replication
//!
//! A follower runs one [`fetcher`] task per followed partition: it fetches from the leader
//! at its log end offset with its broker id as `replica_id` and appends the leader's batches
//! unchanged (offsets, leader epochs and CRCs kept, so the segment files are identical). The
//! leader records each follower's log end offset from its fetch offset; the high watermark is
//! the smallest log end offset among the in-sync replicas the controller set (the leader does
//! not shrink or expand the ISR itself). Consumers read below the high watermark, ListOffsets
//! latest answers it, and acks=-1 produces wait for it (`min.insync.replicas` is checked
//! before appending). With replication factor 1 the high watermark is the log end offset.
//! A broker that becomes a follower truncates to its high watermark first (checkpointed per
//! log dir in `replication-offset-checkpoint`), as Kafka did before KIP-101; epoch-based
//! truncation (OffsetForLeaderEpoch) is not done.
//! Only the leader serves consumer Fetch, ListOffsets and DeleteRecords; a follower answers
//! NOT_LEADER_OR_FOLLOWER.
//!
//! Not owned here: the wire protocol (the broker's handlers translate requests and errors),
//! the partition directories' creation and deletion (`storage::LogManager`), and leadership
//! decisions (the controller, through LeaderAndIsr).

pub mod fetcher;
mod partition;
pub mod producer_state;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kafka_protocol::error::ResponseError;
use model::TopicPartition;
use storage::checkpoint::{
    read_offsets, write_offsets, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use storage::log::LogError;
use tokio::sync::watch;
use tracing::{info, warn};

pub use partition::{AppendResult, Partition, PartitionConfig, ReadResult, RegionRead, Role};
pub use producer_state::SequenceError;

/// Why a data-plane operation on a partition failed. [`ReplicationError::code`] gives the
/// Kafka error code to answer.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// This broker does not host the partition.
    #[error("this broker does not host {0}")]
    UnknownTopicOrPartition(TopicPartition),
    /// This broker hosts the partition but does not lead it.
    #[error("this broker is not the leader of {0}")]
    NotLeader(TopicPartition),
    /// A follower-only operation reached the partition's leader.
    #[error("this broker leads {0}; it does not fetch it from another broker")]
    NotFollower(TopicPartition),
    /// The record set is malformed, corrupt or of an old message format.
    #[error(transparent)]
    Records(#[from] records::RecordsError),
    /// A produced record set failed the leader's checks (Kafka's `LogValidator`).
    #[error(transparent)]
    Produce(#[from] records::ProduceError),
    /// The log refused the operation or failed on disk.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An idempotent producer's batch is out of sequence or from a stale epoch.
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    /// A checkpoint file could not be read or written.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
    /// A file of this crate's own (the clean-shutdown marker) could not be written or removed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ReplicationError {
    /// The Kafka error to answer, as Kafka 2.8's `ReplicaManager` maps its exceptions.
    pub fn response_error(&self) -> ResponseError {
        use records::RecordsError as R;
        match self {
            ReplicationError::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
            ReplicationError::NotLeader(_) | ReplicationError::NotFollower(_) => {
                ResponseError::NotLeaderOrFollower
            }
            ReplicationError::Records(R::UnsupportedMagic { .. }) => {
                ResponseError::UnsupportedForMessageFormat
            }
            ReplicationError::Records(_) => ResponseError::CorruptMessage,
            ReplicationError::Produce(e) => match e.kind {
                records::ProduceErrorKind::CorruptMessage => ResponseError::CorruptMessage,
                records::ProduceErrorKind::InvalidRecord => ResponseError::InvalidRecord,
                records::ProduceErrorKind::InvalidTimestamp => ResponseError::InvalidTimestamp,
                records::ProduceErrorKind::UnsupportedForMessageFormat => {
                    ResponseError::UnsupportedForMessageFormat
                }
                records::ProduceErrorKind::UnsupportedCompressionType => {
                    ResponseError::UnsupportedCompressionType
                }
            },
            ReplicationError::Log(LogError::InvalidRecords(R::UnsupportedMagic { .. })) => {
                ResponseError::UnsupportedForMessageFormat
            }
            ReplicationError::Log(LogError::InvalidRecords(_)) => ResponseError::CorruptMessage,
            ReplicationError::Log(LogError::RecordTooLarge { .. }) => {
                ResponseError::MessageTooLarge
            }
            ReplicationError::Log(LogError::OffsetOutOfRange { .. }) => {
                ResponseError::OffsetOutOfRange
            }
            ReplicationError::Log(_)
            | ReplicationError::Storage(_)
            | ReplicationError::Io { .. } => ResponseError::KafkaStorageError,
            ReplicationError::Sequence(SequenceError::InvalidProducerEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            ReplicationError::Sequence(SequenceError::OutOfOrderSequence { .. }) => {
                ResponseError::OutOfOrderSequenceNumber
            }
        }
    }

    /// The records a produce refused one by one (Produce v8 `record_errors`).
    pub fn record_errors(&self) -> &[records::validate::RecordError] {
        match self {
            ReplicationError::Produce(e) => &e.record_errors,
            _ => &[],
        }
    }

    /// The Kafka error code to answer.
    pub fn code(&self) -> i16 {
        self.response_error().code()
    }
}

/// Kafka's marker of a clean shutdown, written in each log directory after every log was
/// flushed and checkpointed; removed at start so that only that one start trusts it.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Kafka's per-dir checkpoint of high watermarks (same format as the other offset
/// checkpoints). A follower truncates to its high watermark before fetching from a leader.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";

/// What the checkpoints of a log directory said about a partition at startup.
#[derive(Debug, Clone, Copy)]
struct Checkpointed {
    recovery_point: i64,
    log_start_offset: i64,
    high_watermark: i64,
    /// The directory was closed cleanly: open without rescanning.
    clean: bool,
}

/// The partitions hosted by one broker. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct ReplicaManager {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Checkpointed state found at startup, by partition.
    checkpointed: RwLock<HashMap<TopicPartition, Checkpointed>>,
    /// Bumped after every append; long-polling fetches wait on it.
    appended: watch::Sender<u64>,
}

impl ReplicaManager {
    /// Reads the recovery-point and log-start-offset checkpoints of every log directory;
    /// partitions open later with these values.
    pub fn new(log_dirs: &[PathBuf]) -> Result<ReplicaManager, ReplicationError> {
        let mut checkpointed = HashMap::new();
        for dir in log_dirs {
            let recovery = read_offsets(&dir.join(RECOVERY_POINT_CHECKPOINT))?;
            let starts = read_offsets(&dir.join(LOG_START_OFFSET_CHECKPOINT))?;
            let hws = read_offsets(&dir.join(REPLICATION_OFFSET_CHECKPOINT))?;
            let marker = dir.join(CLEAN_SHUTDOWN_FILE);
            let clean = marker.exists();
            if clean {
                std::fs::remove_file(&marker).map_err(|source| ReplicationError::Io {
                    op: "remove the clean-shutdown marker",
                    path: marker.clone(),
                    source,
                })?;
            }
            for (tp, recovery_point) in recovery {
                let log_start_offset = starts.get(&tp).copied().unwrap_or(0);
                let high_watermark = hws.get(&tp).copied().unwrap_or(0);
                checkpointed.insert(
                    tp,
                    Checkpointed {
                        recovery_point,
                        log_start_offset,
                        high_watermark,
                        clean,
                    },
                );
            }
        }
        Ok(ReplicaManager {
            inner: Arc::new(Inner {
                partitions: RwLock::new(HashMap::new()),
                checkpointed: RwLock::new(checkpointed),
                appended: watch::channel(0).0,
            }),
        })
    }

    /// Opens the partition's log in `dir` if it is not open yet, and records `role`
    /// (LeaderAndIsr). Returns the partition.
    pub fn become_replica(
        &self,
        tp: &TopicPartition,
        dir: &Path,
        config: PartitionConfig,
        role: Role,
        now_ms: i64,
    ) -> Result<Arc<Partition>, ReplicationError> {
        if let Some(p) = self.get(tp) {
            p.set_config(config);
            p.set_role(role)?;
            if matches!(role, Role::Leader { .. }) {
                p.stop_fetcher();
            }
            return Ok(p);
        }
        let checkpointed = self
            .inner
            .checkpointed
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp)
            .unwrap_or(Checkpointed {
                recovery_point: 0,
                log_start_offset: 0,
                high_watermark: 0,
                clean: false,
            });
        let partition = Arc::new(Partition::open(
            tp.clone(),
            dir,
            config,
            if checkpointed.clean {
                None
            } else {
                Some(checkpointed.recovery_point)
            },
            checkpointed.log_start_offset,
            checkpointed.high_watermark,
            role,
            now_ms,
        )?);
        let mut partitions = self.write();
        let entry = partitions
            .entry(tp.clone())
            .or_insert_with(|| Arc::clone(&partition));
        Ok(Arc::clone(entry))
    }

    /// Closes the partition's log (StopReplica), fsyncing unflushed data unless the log is
    /// about to be deleted. Returns whether it was open.
    pub fn stop_replica(&self, tp: &TopicPartition, deleting: bool) -> bool {
        let removed = self.write().remove(tp);
        if let Some(partition) = &removed {
            partition.stop_fetcher();
            if !deleting {
                if let Err(err) = partition.flush() {
                    warn!(%tp, error = %err, "could not flush a closing log");
                }
            }
        }
        removed.is_some()
    }

    /// The hosted partition, if open.
    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.inner
            .partitions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp)
            .cloned()
    }

    /// The hosted partition, or UNKNOWN_TOPIC_OR_PARTITION.
    pub fn partition(&self, tp: &TopicPartition) -> Result<Arc<Partition>, ReplicationError> {
        self.get(tp)
            .ok_or_else(|| ReplicationError::UnknownTopicOrPartition(tp.clone()))
    }

    /// Every hosted partition.
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.inner
            .partitions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Applies changed topic settings to every hosted partition of `topic`.
    pub fn set_topic_config(&self, topic: &model::TopicName, config: &PartitionConfig) {
        for p in self.partitions() {
            if &p.topic_partition().topic == topic {
                p.set_config(config.clone());
            }
        }
    }

    /// Appends to a partition this broker leads and wakes waiting fetches.
    pub fn append(
        &self,
        tp: &TopicPartition,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<AppendResult, ReplicationError> {
        let result = self.partition(tp)?.append(records, now_ms)?;
        if !result.duplicate {
            self.notify_appended();
        }
        Ok(result)
    }

    /// A follower's fetch: see [`Partition::read_for_follower`]. Wakes waiting produces and
    /// fetches when the high watermark moved.
    pub fn read_for_follower(
        &self,
        tp: &TopicPartition,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
    ) -> Result<ReadResult, ReplicationError> {
        let (read, moved) = self
            .partition(tp)?
            .read_for_follower(replica_id, offset, max_bytes)?;
        if moved {
            self.notify_appended();
        }
        Ok(read)
    }

    /// Waits until `tp`'s high watermark reaches `offset` (acks=-1), at most until
    /// `deadline`. Returns whether it did.
    pub async fn wait_for_high_watermark(
        &self,
        tp: &TopicPartition,
        offset: i64,
        deadline: tokio::time::Instant,
    ) -> bool {
        let mut changes = self.subscribe_appends();
        loop {
            changes.borrow_and_update();
            match self.get(tp) {
                Some(p) if p.high_watermark() >= offset => return true,
                Some(_) => {}
                None => return false,
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.get(tp).is_some_and(|p| p.high_watermark() >= offset),
            }
        }
    }

    /// Tells waiting fetches that data was appended somewhere.
    pub fn notify_appended(&self) {
        self.inner.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes after every append (long polling waits on it).
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.inner.appended.subscribe()
    }

    /// Writes each log directory's recovery-point and log-start-offset checkpoints.
    pub fn checkpoint(&self, log_dirs: &[PathBuf]) -> Result<(), ReplicationError> {
        /// Recovery points, log start offsets and high watermarks of one log directory.
        type DirCheckpoints = [BTreeMap<TopicPartition, i64>; 3];
        let mut per_dir: BTreeMap<PathBuf, DirCheckpoints> = log_dirs
            .iter()
            .map(|d| (d.clone(), Default::default()))
            .collect();
        for p in self.partitions() {
            let (dir, recovery_point, log_start, hw) = p.checkpoint_entry();
            let [rp, ls, hws] = per_dir.entry(dir).or_default();
            rp.insert(p.topic_partition().clone(), recovery_point);
            ls.insert(p.topic_partition().clone(), log_start);
            hws.insert(p.topic_partition().clone(), hw);
        }
        // Partitions not opened since startup keep their checkpointed values.
        for (tp, c) in self
            .inner
            .checkpointed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            for (dir, [rp, ls, hws]) in per_dir.iter_mut() {
                if dir.join(format!("{}-{}", tp.topic, tp.partition)).is_dir() {
                    rp.entry(tp.clone()).or_insert(c.recovery_point);
                    ls.entry(tp.clone()).or_insert(c.log_start_offset);
                    hws.entry(tp.clone()).or_insert(c.high_watermark);
                }
            }
        }
        for (dir, [rp, ls, hws]) in per_dir {
            if !dir.is_dir() {
                continue;
            }
            write_offsets(&dir.join(RECOVERY_POINT_CHECKPOINT), &rp)?;
            write_offsets(&dir.join(LOG_START_OFFSET_CHECKPOINT), &ls)?;
            write_offsets(&dir.join(REPLICATION_OFFSET_CHECKPOINT), &hws)?;
        }
        Ok(())
    }

    /// One `flush.ms` pass over every partition.
    pub fn flush_due(&self, now_ms: i64) {
        for p in self.partitions() {
            if let Err(err) = p.flush_if_due(now_ms) {
                warn!(tp = %p.topic_partition(), error = %err, "scheduled flush failed");
            }
        }
    }

    /// One retention pass over every partition. Returns how many segments were removed.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        let mut removed = 0;
        for p in self.partitions() {
            match p.apply_retention(now_ms) {
                Ok(n) => removed += n,
                Err(err) => {
                    warn!(tp = %p.topic_partition(), error = %err, "retention pass failed")
                }
            }
        }
        removed
    }

    /// Clean shutdown: fsyncs every log, writes the checkpoints and the clean-shutdown marker,
    /// so the next start opens the logs without rescanning them.
    pub fn shutdown(&self, log_dirs: &[PathBuf]) -> Result<(), ReplicationError> {
        // No follower may append while the logs are flushed for the last time.
        for p in self.partitions() {
            p.stop_fetcher();
        }
        for p in self.partitions() {
            p.flush()?;
        }
        self.checkpoint(log_dirs)?;
        for dir in log_dirs.iter().filter(|d| d.is_dir()) {
            let marker = dir.join(CLEAN_SHUTDOWN_FILE);
            std::fs::write(&marker, b"").map_err(|source| ReplicationError::Io {
                op: "write the clean-shutdown marker",
                path: marker.clone(),
                source,
            })?;
        }
        info!(
            partitions = self.partitions().len(),
            "flushed logs and wrote checkpoints"
        );
        Ok(())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<TopicPartition, Arc<Partition>>> {
        self.inner
            .partitions
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
