//! The partitions a broker hosts (Kafka's `ReplicaManager` and `Partition`): the open
//! [`storage::log::Log`] of each, this broker's role (leader or follower, with the leader
//! epoch), the leader-epoch cache (`leader-epoch-checkpoint`), per-partition
//! idempotent-producer state, the high watermark, and the append notification that wakes
//! long-polling fetches and acks=all produces.
//!
//! It also owns the per-log-dir `recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint` and `replication-offset-checkpoint` files (read when a
//! partition opens, written by [`ReplicaManager::checkpoint`] on a schedule and at clean
//! shutdown), and the `flush.ms` and retention passes the broker runs on a schedule.
//!
//! # Replication
//!
//! - **Leader.** It tracks each follower's fetch position and last caught-up time
//!   ([`isr`]); a follower not caught up for `replica.lag.time.max.ms` leaves the ISR and
//!   one that reaches the high watermark within the current leader epoch joins it. ISR
//!   changes go to the controller as AlterPartition ([`alter_partition`]); the leader uses a
//!   new ISR once the controller accepted it (while an expansion is in flight the high
//!   watermark already waits for the new member). The high watermark is the smallest log end
//!   over the ISR, never moves backwards, and acks=-1 produces wait for it (below
//!   `min.insync.replicas`: NOT_ENOUGH_REPLICAS before the append,
//!   NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile). It serves
//!   OffsetsForLeaderEpoch from its leader-epoch cache ([`leader_epoch`]) and keeps the
//!   incremental fetch sessions of its fetchers ([`fetch_session`]).
//! - **Follower.** One fetcher per source broker ([`fetcher`], `num.replica.fetchers` of them)
//!   carries every partition followed from that broker in one Fetch, in an incremental fetch
//!   session. A new follower first asks the leader where its latest epoch ends and truncates
//!   exactly at the divergence point ([`truncation`], KIP-101/KIP-279); the high watermark is
//!   only used when the leader cannot say. A LeaderAndIsr that keeps the leader and skips no
//!   epoch never truncates. Fetched batches are appended unchanged (offsets, leader epochs and
//!   CRCs kept, so the segment files are identical). An append that fails marks only that
//!   partition failed; it is retried with backoff while the others go on.
//!
//! Consumers read below the high watermark, ListOffsets latest answers it. Only the leader
//! serves consumer Fetch, ListOffsets, DeleteRecords and OffsetsForLeaderEpoch; a follower
//! answers NOT_LEADER_OR_FOLLOWER, and a request naming an older leader epoch gets
//! FENCED_LEADER_EPOCH (a newer one UNKNOWN_LEADER_EPOCH).
//!
//! Not owned here: the wire protocol (the broker's handlers translate requests and errors),
//! the partition directories' creation and deletion (`storage::LogManager`), where the
//! controller is (the broker's [`ControllerChannel`]) and leadership decisions (the
//! controller, through LeaderAndIsr).

pub mod alter_partition;
pub mod fetch_session;
pub mod fetcher;
pub mod isr;
pub mod leader_epoch;
mod partition;
pub mod producer_state;
pub mod quota;
pub mod truncation;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use model::TopicPartition;
use storage::checkpoint::{
    read_offsets, write_offsets, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use storage::log::LogError;
use tokio::sync::watch;
use tracing::{error, info, warn};

pub use alter_partition::ControllerChannel;
use alter_partition::{AlterIsrItem, AlterIsrResult, AlterPartitionManager};
use fetch_session::FetchSessionCache;
use fetcher::{FetcherManager, LeaderEndpoint};
pub use partition::{
    AppendResult, FollowerRead, FollowerStart, OffsetsReader, Partition, PartitionConfig,
    PartitionLeadership, ReadResult, RegionRead, Role,
};
pub use producer_state::SequenceError;

/// Why a data-plane operation on a partition failed. [`ReplicationError::code`] gives the
/// Kafka error code to answer.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// This broker does not host the partition.
    #[error("this broker does not host {0}")]
    UnknownTopicOrPartition(TopicPartition),
    /// This broker should host the partition but could not open its log.
    #[error("the log of {0} could not be opened on this broker")]
    Offline(TopicPartition),
    /// This broker hosts the partition but does not lead it.
    #[error("this broker is not the leader of {0}")]
    NotLeader(TopicPartition),
    /// A follower-only operation reached the partition's leader.
    #[error("this broker leads {0}; it does not fetch it from another broker")]
    NotFollower(TopicPartition),
    /// A replica fetch from a broker that does not replicate the partition.
    #[error("broker {replica_id} is not a replica of {tp}")]
    NotReplica { tp: TopicPartition, replica_id: i32 },
    /// The request names an older leader epoch than this broker's.
    #[error("{tp}: the request's leader epoch {requested} is older than the current {current}")]
    FencedLeaderEpoch {
        tp: TopicPartition,
        requested: i32,
        current: i32,
    },
    /// The request names a newer leader epoch than this broker knows.
    #[error("{tp}: the request's leader epoch {requested} is newer than the current {current}")]
    UnknownLeaderEpoch {
        tp: TopicPartition,
        requested: i32,
        current: i32,
    },
    /// A LeaderAndIsr with an older (or the same) leader epoch.
    #[error("{tp}: LeaderAndIsr leader epoch {requested} is not newer than the current {current}")]
    StaleLeaderEpoch {
        tp: TopicPartition,
        requested: i32,
        current: i32,
    },
    /// acks=-1 with fewer in-sync replicas than `min.insync.replicas`; nothing was written.
    #[error("the ISR of {tp} has {isr} replicas, fewer than min.insync.replicas={min}")]
    NotEnoughReplicas {
        tp: TopicPartition,
        isr: usize,
        min: i32,
    },
    /// acks=-1: written, but the ISR shrank below `min.insync.replicas` meanwhile.
    #[error("written to {tp}, but its ISR shrank to {isr} replicas, fewer than min.insync.replicas={min}")]
    NotEnoughReplicasAfterAppend {
        tp: TopicPartition,
        isr: usize,
        min: i32,
    },
    /// ListOffsets from a client while a new leader's high watermark is still below the
    /// offset its epoch started at; the client retries.
    #[error(
        "{tp}: the high watermark {high_watermark} has not caught up with the start offset {epoch_start} \
         of this leader epoch yet (a leader elected just now); retry"
    )]
    OffsetNotAvailable {
        tp: TopicPartition,
        high_watermark: i64,
        epoch_start: i64,
    },
    /// acks=-1: the in-sync replicas did not catch up within the request's timeout.
    #[error("the in-sync replicas of {0} did not catch up within the request timeout")]
    Timeout(TopicPartition),
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
            ReplicationError::NotLeader(_)
            | ReplicationError::NotFollower(_)
            | ReplicationError::NotReplica { .. } => ResponseError::NotLeaderOrFollower,
            ReplicationError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            ReplicationError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
            ReplicationError::StaleLeaderEpoch { .. } => ResponseError::StaleControllerEpoch,
            ReplicationError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
            ReplicationError::NotEnoughReplicasAfterAppend { .. } => {
                ResponseError::NotEnoughReplicasAfterAppend
            }
            ReplicationError::Timeout(_) => ResponseError::RequestTimedOut,
            ReplicationError::OffsetNotAvailable { .. } => ResponseError::OffsetNotAvailable,
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
            | ReplicationError::Offline(_)
            | ReplicationError::Storage(_)
            | ReplicationError::Io { .. } => ResponseError::KafkaStorageError,
            ReplicationError::Sequence(SequenceError::InvalidProducerEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            ReplicationError::Sequence(SequenceError::OutOfOrderSequence { .. }) => {
                ResponseError::OutOfOrderSequenceNumber
            }
            ReplicationError::Sequence(SequenceError::InvalidTxnState { .. }) => {
                ResponseError::InvalidTxnState
            }
            ReplicationError::Sequence(SequenceError::CoordinatorFenced { .. }) => {
                ResponseError::TransactionCoordinatorFenced
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

/// The broker settings replication follows (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `broker.id`.
    pub broker_id: i32,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
    /// `num.replica.fetchers`: fetchers per source broker.
    pub num_replica_fetchers: usize,
    /// `replica.fetch.max.bytes`: per partition.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: per fetch.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`.
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`: pause after an error.
    pub replica_fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms`: how long a fetcher waits for an answer (beyond the wait).
    pub replica_socket_timeout_ms: u64,
    /// `max.incremental.fetch.session.cache.slots`.
    pub fetch_session_cache_slots: usize,
    /// `inter.broker.listener.name` (for log lines).
    pub inter_broker_listener: String,
    /// How fetchers and the AlterPartition sender connect to the inter-broker listener
    /// (TLS, SASL login), built by the broker from its listener settings.
    pub inter_broker_security: client::Security,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            broker_id: 0,
            replica_lag_time_max_ms: 30_000,
            num_replica_fetchers: 1,
            replica_fetch_max_bytes: 1024 * 1024,
            replica_fetch_response_max_bytes: 10 * 1024 * 1024,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_min_bytes: 1,
            replica_fetch_backoff_ms: 1_000,
            replica_socket_timeout_ms: 30_000,
            fetch_session_cache_slots: 1_000,
            inter_broker_listener: "PLAINTEXT".to_owned(),
            inter_broker_security: client::Security::default(),
        }
    }
}

/// What a LeaderAndIsr did to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// This broker leads it now.
    BecameLeader,
    /// This broker follows it now (and fetches it).
    BecameFollower,
    /// Same leader epoch: at most the ISR changed.
    SameEpoch,
}

/// ISR change and fetcher counters (tests, metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationStats {
    /// ISR shrinks the controller accepted.
    pub isr_shrinks: u64,
    /// ISR expansions the controller accepted.
    pub isr_expands: u64,
    /// Follower appends that failed.
    pub failed_appends: u64,
    /// Running fetchers.
    pub fetchers: usize,
    /// Partitions being fetched.
    pub fetched_partitions: usize,
    /// Fetched partitions marked failed (retrying with backoff, or fenced).
    pub failed_partitions: usize,
}

/// Kafka's marker of a clean shutdown, written in each log directory after every log was
/// flushed and checkpointed; removed at start so that only that one start trusts it.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Kafka's per-dir checkpoint of high watermarks (same format as the other offset
/// checkpoints). A follower falls back to it when the leader cannot place its epochs.
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
    config: ReplicationConfig,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Checkpointed state found at startup, by partition.
    checkpointed: RwLock<HashMap<TopicPartition, Checkpointed>>,
    /// Bumped after every append and high watermark move; long polls and acks=-1 wait on it.
    appended: watch::Sender<u64>,
    alter_partition: Arc<AlterPartitionManager>,
    fetchers: FetcherManager,
    fetch_sessions: FetchSessionCache,
    /// The background tasks started by [`ReplicaManager::start`].
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    isr_shrinks: AtomicU64,
    isr_expands: AtomicU64,
    failed_appends: AtomicU64,
    /// `*.replication.throttled.rate` and the topics' throttled replicas.
    throttles: quota::ReplicationThrottles,
    /// Partitions this broker should host whose log could not be opened: they answer
    /// KAFKA_STORAGE_ERROR (not UNKNOWN_TOPIC_OR_PARTITION) until a LeaderAndIsr opens them
    /// or a StopReplica drops them.
    offline: RwLock<HashSet<TopicPartition>>,
    /// Set by [`ReplicaManager::stop_serving`]: acks=-1 waits answer at once.
    stopping: AtomicBool,
}

impl ReplicaManager {
    /// Reads the recovery-point, log-start-offset and high-watermark checkpoints of every log
    /// directory; partitions open later with these values.
    pub fn new(
        log_dirs: &[PathBuf],
        config: ReplicationConfig,
    ) -> Result<ReplicaManager, ReplicationError> {
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
        let fetch_sessions = FetchSessionCache::new(config.fetch_session_cache_slots);
        Ok(ReplicaManager {
            inner: Arc::new(Inner {
                fetchers: FetcherManager::new(config.clone()),
                config,
                partitions: RwLock::new(HashMap::new()),
                checkpointed: RwLock::new(checkpointed),
                appended: watch::channel(0).0,
                alter_partition: Arc::default(),
                fetch_sessions,
                tasks: Mutex::new(Vec::new()),
                isr_shrinks: AtomicU64::new(0),
                isr_expands: AtomicU64::new(0),
                failed_appends: AtomicU64::new(0),
                throttles: quota::ReplicationThrottles::default(),
                offline: RwLock::new(HashSet::new()),
                stopping: AtomicBool::new(false),
            }),
        })
    }

    /// Starts the AlterPartition sender (to the controller `channel` finds) and the periodic
    /// ISR check (every half `replica.lag.time.max.ms`, as Kafka). Must run inside a Tokio
    /// runtime; [`ReplicaManager::shutdown`] stops them.
    pub fn start(&self, channel: Arc<dyn ControllerChannel>) {
        let sender = tokio::spawn(alter_partition::send_loop(
            self.clone(),
            Arc::clone(&self.inner.alter_partition),
            channel,
            self.inner.config.broker_id,
        ));
        let rm = self.clone();
        let period =
            Duration::from_millis((self.inner.config.replica_lag_time_max_ms / 2).max(1) as u64);
        let expiration = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                rm.maybe_shrink_isrs(now_ms());
            }
        });
        let mut tasks = self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.push(sender.abort_handle());
        tasks.push(expiration.abort_handle());
    }

    /// The settings.
    pub fn config(&self) -> &ReplicationConfig {
        &self.inner.config
    }

    /// The replication throttles (rates and throttled replicas), set by the broker from its
    /// dynamic config and the topic configs.
    pub fn throttles(&self) -> &quota::ReplicationThrottles {
        &self.inner.throttles
    }

    /// The leader's fetch session cache.
    pub fn fetch_sessions(&self) -> &FetchSessionCache {
        &self.inner.fetch_sessions
    }

    /// Applies one partition's LeaderAndIsr (Kafka's `becomeLeaderOrFollower`): opens the log
    /// in `dir` if needed, then becomes leader (no fetching) or follower (fetching from
    /// `leader`, after finding the divergence point unless the leader stayed and no epoch was
    /// missed). The same leader epoch changes at most the ISR (when the partition epoch is
    /// newer) and answers STALE_CONTROLLER_EPOCH otherwise, as does an older one.
    pub fn become_leader_or_follower(
        &self,
        tp: &TopicPartition,
        dir: &Path,
        config: PartitionConfig,
        leadership: &PartitionLeadership,
        leader: Option<LeaderEndpoint>,
        now_ms: i64,
    ) -> Result<Transition, ReplicationError> {
        self.become_leader_or_follower_in(tp, dir, false, config, leadership, leader, now_ms)
    }

    /// [`ReplicaManager::become_leader_or_follower`]; `fresh_dir` says that the LogManager
    /// created `dir` just now (`storage::PartitionDir::fresh`), so a log not open yet starts
    /// empty without reading the disk.
    #[allow(clippy::too_many_arguments)]
    pub fn become_leader_or_follower_in(
        &self,
        tp: &TopicPartition,
        dir: &Path,
        fresh_dir: bool,
        config: PartitionConfig,
        leadership: &PartitionLeadership,
        leader: Option<LeaderEndpoint>,
        now_ms: i64,
    ) -> Result<Transition, ReplicationError> {
        let partition = self.open_partition(tp, dir, fresh_dir, config.clone(), now_ms)?;
        partition.set_config(config);
        let current = partition.leader_epoch();
        if partition.role().is_some() && leadership.leader_epoch <= current {
            if leadership.leader_epoch == current
                && partition.adopt_same_epoch(leadership, now_ms).is_some()
            {
                self.inner.alter_partition.clear_pending(tp);
                // The ISR may have changed even when the high watermark did not.
                self.notify_changed(tp);
                return Ok(Transition::SameEpoch);
            }
            return Err(ReplicationError::StaleLeaderEpoch {
                tp: tp.clone(),
                requested: leadership.leader_epoch,
                current,
            });
        }
        let local = self.inner.config.broker_id;
        self.inner.alter_partition.clear_pending(tp);
        if leadership.leader == local {
            self.inner.fetchers.remove(tp);
            let moved = partition.make_leader(leadership, now_ms)?;
            // Waiting produces and fetches learn the new role either way.
            let _ = moved;
            self.notify_changed(tp);
            return Ok(Transition::BecameLeader);
        }
        let start = partition.make_follower(leadership)?;
        self.notify_changed(tp);
        match leader {
            Some(endpoint) => {
                self.inner
                    .fetchers
                    .add(self, &partition, endpoint, leadership.leader_epoch, start);
            }
            None => {
                warn!(%tp, leader = leadership.leader, "no endpoint for the leader; not fetching");
                self.inner.fetchers.remove(tp);
            }
        }
        Ok(Transition::BecameFollower)
    }

    fn open_partition(
        &self,
        tp: &TopicPartition,
        dir: &Path,
        fresh_dir: bool,
        config: PartitionConfig,
        now_ms: i64,
    ) -> Result<Arc<Partition>, ReplicationError> {
        if let Some(p) = self.get(tp) {
            return Ok(p);
        }
        let checkpointed = self
            .inner
            .checkpointed
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp);
        // A new directory with checkpoints from before (its log was removed by hand) is
        // opened the slow way, which honours them.
        let fresh = fresh_dir && checkpointed.is_none();
        let checkpointed = checkpointed.unwrap_or(Checkpointed {
            recovery_point: 0,
            log_start_offset: 0,
            high_watermark: 0,
            clean: false,
        });
        let opened = if fresh {
            Partition::create_new(
                tp.clone(),
                dir,
                config,
                self.inner.config.broker_id,
                self.inner.config.replica_lag_time_max_ms,
                now_ms,
            )
        } else {
            Partition::open(
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
                self.inner.config.broker_id,
                self.inner.config.replica_lag_time_max_ms,
                now_ms,
            )
        };
        let partition = match opened {
            Ok(partition) => Arc::new(partition),
            Err(err) => {
                error!(%tp, dir = %dir.display(), error = %err,
                    "cannot open the partition's log; it is offline here (KAFKA_STORAGE_ERROR)");
                self.offline_set().insert(tp.clone());
                return Err(err);
            }
        };
        self.offline_set().remove(tp);
        let mut partitions = self.write();
        let entry = partitions
            .entry(tp.clone())
            .or_insert_with(|| Arc::clone(&partition));
        Ok(Arc::clone(entry))
    }

    /// Closes the partition's log (StopReplica), fsyncing unflushed data unless the log is
    /// about to be deleted. Returns whether it was open.
    pub fn stop_replica(&self, tp: &TopicPartition, deleting: bool) -> bool {
        self.inner.fetchers.remove(tp);
        self.inner.alter_partition.clear_pending(tp);
        self.offline_set().remove(tp);
        let removed = self.write().remove(tp);
        // Fetches of it learn at once that it is gone.
        self.notify_changed(tp);
        if let Some(partition) = &removed {
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
        self.get(tp).ok_or_else(|| {
            if self.is_offline(tp) {
                ReplicationError::Offline(tp.clone())
            } else {
                ReplicationError::UnknownTopicOrPartition(tp.clone())
            }
        })
    }

    /// Whether this broker should host `tp` but could not open its log.
    pub fn is_offline(&self, tp: &TopicPartition) -> bool {
        self.inner
            .offline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(tp)
    }

    fn offline_set(&self) -> std::sync::RwLockWriteGuard<'_, HashSet<TopicPartition>> {
        // Every update is one insert or remove: a poisoned set is still consistent.
        self.inner
            .offline
            .write()
            .unwrap_or_else(|p| p.into_inner())
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

    /// Appends to a partition this broker leads (see [`Partition::append`]) and wakes waiting
    /// fetches.
    pub fn append(
        &self,
        tp: &TopicPartition,
        records: &mut [u8],
        required_acks: i16,
        now_ms: i64,
    ) -> Result<AppendResult, ReplicationError> {
        let (result, _) = self.partition(tp)?.append(records, required_acks, now_ms)?;
        if !result.duplicate {
            self.notify_changed(tp);
        }
        Ok(result)
    }

    /// Appends a transaction marker to a partition this broker leads (see
    /// [`Partition::append_marker`]) and wakes waiting fetches. Returns the marker's offset.
    pub fn append_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: records::control::EndTxnMarker,
        now_ms: i64,
    ) -> Result<i64, ReplicationError> {
        let (offset, _) =
            self.partition(tp)?
                .append_marker(producer_id, producer_epoch, marker, now_ms)?;
        self.notify_changed(tp);
        Ok(offset)
    }

    /// A follower's fetch: see [`Partition::read_for_follower`]. Sends a proposed ISR
    /// expansion and wakes waiting produces and fetches when the high watermark moved.
    pub fn read_for_follower(
        &self,
        tp: &TopicPartition,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        now_ms: i64,
    ) -> Result<ReadResult, ReplicationError> {
        self.fetch_for_follower(
            tp,
            replica_id,
            offset,
            max_bytes,
            current_leader_epoch,
            now_ms,
        )
        .map(|(read, _)| read)
    }

    /// [`ReplicaManager::read_for_follower`], also telling whether the follower is in the ISR
    /// at the log end ([`FollowerRead::at_end`]: its fetch session may hold it quiet).
    pub fn fetch_for_follower(
        &self,
        tp: &TopicPartition,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(ReadResult, bool), ReplicationError> {
        let partition = self.partition(tp)?;
        // The leader throttle (KIP-73): a replica outside the ISR catching up on a throttled
        // partition gets no records while the leader quota is used up.
        let throttles = &self.inner.throttles;
        let throttled = throttles.leader.rate().is_some()
            && throttles.is_leader_throttled(tp)
            && !partition.isr().contains(&replica_id);
        let read = if throttled && throttles.leader.is_exceeded() {
            partition.read_for_follower_with(
                replica_id,
                offset,
                max_bytes,
                current_leader_epoch,
                now_ms,
                false,
            )?
        } else {
            partition.read_for_follower(
                replica_id,
                offset,
                max_bytes,
                current_leader_epoch,
                now_ms,
            )?
        };
        if throttled {
            throttles.leader.record(read.read.records.len());
        }
        if let Some(item) = read.expand {
            self.inner.alter_partition.submit(item);
        }
        if read.high_watermark_moved {
            self.notify_changed(tp);
        }
        Ok((read.read, read.at_end))
    }

    /// Waits until the in-sync replicas have `tp` up to `offset` (acks=-1), at most until
    /// `deadline`: see [`Partition::check_enough_replicas_reach`]; REQUEST_TIMED_OUT after
    /// the deadline.
    pub async fn wait_for_acks(
        &self,
        tp: &TopicPartition,
        offset: i64,
        deadline: tokio::time::Instant,
    ) -> Result<(), ReplicationError> {
        let mut changes = self.subscribe_appends();
        loop {
            changes.borrow_and_update();
            let partition = self
                .get(tp)
                .ok_or_else(|| ReplicationError::NotLeader(tp.clone()))?;
            if partition.check_enough_replicas_reach(offset)? {
                return Ok(());
            }
            if self.inner.stopping.load(Ordering::SeqCst) {
                // The broker is going away: the producer retries on the partition's next
                // leader now instead of when this request times out.
                return Err(ReplicationError::NotLeader(tp.clone()));
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => {
                    let partition = self
                        .get(tp)
                        .ok_or_else(|| ReplicationError::NotLeader(tp.clone()))?;
                    return match partition.check_enough_replicas_reach(offset)? {
                        true => Ok(()),
                        false => Err(ReplicationError::Timeout(tp.clone())),
                    };
                }
            }
        }
    }

    /// One pass of the ISR check over every partition this broker leads.
    pub fn maybe_shrink_isrs(&self, now_ms: i64) {
        for p in self.partitions() {
            if let Some(item) = p.maybe_shrink_isr(now_ms) {
                self.inner.alter_partition.submit(item);
            }
        }
    }

    /// The ISR changes waiting for the controller.
    pub fn pending_isr_changes(&self) -> Vec<AlterIsrItem> {
        self.inner.alter_partition.pending()
    }

    /// Hands the controller's answer to the partition that proposed `item`.
    pub(crate) fn on_alter_partition_answer(
        &self,
        item: &AlterIsrItem,
        answer: Result<AlterIsrResult, ResponseError>,
    ) {
        let Some(partition) = self.get(&item.tp) else {
            return;
        };
        let outcome = partition.on_alter_partition_answer(item, answer, now_ms());
        match outcome.committed {
            Some(partition::IsrChange::Shrink) => {
                self.inner.isr_shrinks.fetch_add(1, Ordering::Relaxed);
            }
            Some(partition::IsrChange::Expand) => {
                self.inner.isr_expands.fetch_add(1, Ordering::Relaxed);
            }
            None => {}
        }
        if let Some(again) = outcome.resubmit {
            self.inner.alter_partition.submit(again);
        }
        // A new ISR changes which followers' reads may go quiet, too.
        if outcome.high_watermark_moved || outcome.committed.is_some() {
            self.notify_changed(&item.tp);
        }
    }

    /// Counters of ISR changes and fetchers.
    pub fn stats(&self) -> ReplicationStats {
        let fetchers = self.inner.fetchers.stats();
        ReplicationStats {
            isr_shrinks: self.inner.isr_shrinks.load(Ordering::Relaxed),
            isr_expands: self.inner.isr_expands.load(Ordering::Relaxed),
            failed_appends: self.inner.failed_appends.load(Ordering::Relaxed),
            fetchers: fetchers.0,
            fetched_partitions: fetchers.1,
            failed_partitions: fetchers.2,
        }
    }

    /// The fetch state of a followed partition (tests and diagnostics).
    pub fn fetch_state(&self, tp: &TopicPartition) -> Option<fetcher::FetchStateView> {
        self.inner.fetchers.state_of(tp)
    }

    pub(crate) fn count_failed_append(&self) {
        self.inner.failed_appends.fetch_add(1, Ordering::Relaxed);
    }

    /// Tells waiting produces and fetches that something changed that cannot be pinned to a
    /// partition: every fetch session reads everything at its next fetch. Prefer
    /// [`ReplicaManager::notify_changed`].
    pub fn notify_appended(&self) {
        self.inner.fetch_sessions.changed_everything();
        self.inner.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Tells waiting produces and fetches that what a read of `tp` answers changed (records
    /// appended, the high watermark or the leadership moved): fetch sessions holding it
    /// quiet read it again (see [`fetch_session`]).
    pub fn notify_changed(&self, tp: &TopicPartition) {
        self.inner
            .fetch_sessions
            .changed(fetch_session::session_key(tp));
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
                Ok(n) => {
                    if n > 0 {
                        // The log start moved: fetch sessions answer it.
                        self.notify_changed(p.topic_partition());
                    }
                    removed += n
                }
                Err(err) => {
                    warn!(tp = %p.topic_partition(), error = %err, "retention pass failed")
                }
            }
        }
        removed
    }

    /// The broker stops serving (its listeners are closing, after a controlled shutdown moved
    /// its leaderships away or not): produces waiting for acks=-1 answer
    /// NOT_LEADER_OR_FOLLOWER at once, as a Kafka broker's closed connections make its clients
    /// retry on the new leaders. Otherwise they would hold their connections open, and the
    /// shutdown, until their timeouts: the LeaderAndIsr that makes this broker a follower
    /// may never reach a broker that is shutting down, so its followers, now fetching from
    /// the new leaders, never complete them.
    pub fn stop_serving(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        self.notify_appended();
    }

    /// Clean shutdown: fsyncs every log, writes the checkpoints and the clean-shutdown marker,
    /// so the next start opens the logs without rescanning them.
    pub fn shutdown(&self, log_dirs: &[PathBuf]) -> Result<(), ReplicationError> {
        // No follower may append while the logs are flushed for the last time.
        self.inner.fetchers.shutdown();
        for task in self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
        // One syncfs per filesystem first: the fsyncs of each partition's files that follow
        // (which also record how far each log is flushed) then find them clean. Without
        // it, a stop after writes to 10,000 partitions costs 10,000 journal commits.
        let existing: Vec<PathBuf> = log_dirs.iter().filter(|d| d.is_dir()).cloned().collect();
        if let Err(err) = storage::sync_dirs(&existing) {
            warn!(error = %err, "syncfs of the log directories failed; fsyncing each log");
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

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests;
