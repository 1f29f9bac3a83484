//! One hosted partition: its open [`Log`], its producer state, its leader-epoch cache, this
//! broker's role and, as leader, the ISR and each follower's fetch state.
//!
//! Every method takes the partition's lock once and leaves the state consistent; proposed ISR
//! changes come back as [`AlterIsrItem`]s for the caller to hand to the AlterPartition sender
//! (after the lock is released).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use model::TopicPartition;
use records::BatchHeader;
use storage::log::{AbortedTxn, Log, LogConfig, LogError};
use tracing::{debug, info, warn};

use crate::alter_partition::{AlterIsrItem, AlterIsrResult};
use crate::isr::{self, IsrState, RemoteReplica};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{CompletedTxn, ProducerStateMap, SequenceCheck};
use crate::ReplicationError;

/// Chunk size used when scanning batch headers at open.
const SCAN_CHUNK_BYTES: usize = 1024 * 1024;

/// The topic settings a hosted partition follows: the log's own plus `flush.ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionConfig {
    /// Segment, index, retention, flush.messages and timestamp settings.
    pub log: LogConfig,
    /// `flush.ms`: fsync data older than this; `None` leaves it to the OS (Kafka's default).
    pub flush_ms: Option<i64>,
    /// `min.insync.replicas`: acks=-1 produces need at least this many in-sync replicas.
    pub min_insync_replicas: i32,
}

/// Where a produce request's records landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// Offset of the first record (of the original batch for a duplicate).
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The LogAppendTime stamped on the batches, or -1 under CreateTime.
    pub log_append_time_ms: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// Whether the request repeated batches already written (nothing was appended).
    pub duplicate: bool,
}

/// What a fetch read from one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole record batches as stored.
    pub records: Vec<u8>,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset: the first offset of the earliest open transaction, or the
    /// high watermark when that is lower.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// READ_COMMITTED: the aborted transactions the read's range overlaps (`None` for a
    /// READ_UNCOMMITTED read).
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

/// What [`Partition::read_region`] found: the records' place in a segment file.
#[derive(Debug, Clone)]
pub struct RegionRead {
    /// Whole record batches as stored, not read yet.
    pub region: Option<storage::log::FileRegion>,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset: the first offset of the earliest open transaction, or the
    /// high watermark when that is lower.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// READ_COMMITTED: the aborted transactions the read's range overlaps (`None` for a
    /// READ_UNCOMMITTED read).
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

/// This broker's role for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// This broker leads the partition at `leader_epoch`.
    Leader { leader_epoch: i32 },
    /// This broker follows another broker at `leader_epoch`.
    Follower { leader_epoch: i32 },
}

impl Role {
    /// The leader epoch of this role.
    pub fn leader_epoch(self) -> i32 {
        match self {
            Role::Leader { leader_epoch } | Role::Follower { leader_epoch } => leader_epoch,
        }
    }
}

/// A partition's leadership as a LeaderAndIsr request states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeadership {
    /// The leader's broker id.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// The state znode's version (the partition epoch).
    pub partition_epoch: i32,
    /// Every replica, in assignment order.
    pub replicas: Vec<i32>,
}

/// What a follower transition means for the fetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerStart {
    /// Same leader and no epoch missed: keep fetching where the log ends, no truncation.
    Continue,
    /// A new leader (or missed epochs): find the divergence point first.
    Truncate,
}

/// A leader's read for one of its followers, and what it changed.
#[derive(Debug)]
pub struct FollowerRead {
    /// What was read.
    pub read: ReadResult,
    /// Whether the high watermark moved (wake waiting produces and fetches).
    pub high_watermark_moved: bool,
    /// An ISR expansion to send to the controller.
    pub expand: Option<AlterIsrItem>,
    /// The follower is in the ISR and fetched from the log end: until the next append (or
    /// another change) a read answers nothing new.
    pub at_end: bool,
}

/// An ISR change the controller accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrChange {
    /// A follower joined.
    Expand,
    /// Followers left.
    Shrink,
}

/// What the controller's answer to an ISR change did.
#[derive(Debug, Default)]
pub struct AnswerOutcome {
    /// The change the controller accepted, if it did.
    pub committed: Option<IsrChange>,
    /// Whether the high watermark moved.
    pub high_watermark_moved: bool,
    /// Send this change again (a retriable error).
    pub resubmit: Option<AlterIsrItem>,
}

#[derive(Debug)]
pub(crate) struct PartitionState {
    pub(crate) log: Log,
    pub(crate) config: PartitionConfig,
    pub(crate) producers: ProducerStateMap,
    /// The aborted transactions with a marker in the log, in marker order (what the
    /// segments' `.txnindex` files hold).
    aborted: Vec<AbortedTxn>,
    /// `None` until the first LeaderAndIsr.
    role: Option<Role>,
    epochs: LeaderEpochCache,
    pub(crate) last_flush_ms: i64,
    high_watermark: i64,
    /// The leader the last LeaderAndIsr named (-1 before the first).
    leader_id: i32,
    /// Every replica, in assignment order.
    replicas: Vec<i32>,
    /// As leader: the ISR (committed or with a change in flight). Empty on a follower.
    isr: IsrState,
    /// The partition epoch (state znode version) this broker knows.
    partition_epoch: i32,
    /// As leader: the log end when this broker took over at the current epoch.
    leader_epoch_start_offset: Option<i64>,
    /// As leader: each follower's fetch state.
    remotes: BTreeMap<i32, RemoteReplica>,
    next_proposal: u64,
}

impl PartitionState {
    fn leader_epoch(&self) -> i32 {
        self.role.map_or(-1, Role::leader_epoch)
    }

    /// The last stable offset (Kafka's `UnifiedLog.lastStableOffset`): below it every
    /// transaction is decided; the first offset of the earliest open transaction, or the
    /// high watermark when that is lower.
    fn last_stable_offset(&self) -> i64 {
        self.producers
            .first_unstable_offset()
            .map_or(self.high_watermark, |first| first.min(self.high_watermark))
    }

    /// How far a consumer may read: the LSO at READ_COMMITTED, else the high watermark.
    fn fetch_limit(&self, read_committed: bool) -> i64 {
        if read_committed {
            self.last_stable_offset()
        } else {
            self.high_watermark
        }
    }

    /// The aborted transactions a READ_COMMITTED read of `from..upper` must know of (Kafka's
    /// `collectAbortedTransactions`): those whose marker is at or past `from` and whose first
    /// offset is below `upper`.
    fn aborted_between(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|t| t.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|t| t.first_offset < upper)
            .copied()
            .collect()
    }

    /// Records an ended transaction: an aborted one goes to the aborted list and the
    /// `.txnindex` of the segment holding its marker.
    fn complete(&mut self, completed: Option<CompletedTxn>) -> Result<(), ReplicationError> {
        if let Some(txn) = completed.filter(|t| t.aborted) {
            let entry = AbortedTxn {
                producer_id: txn.producer_id,
                first_offset: txn.first_offset,
                last_offset: txn.last_offset,
                last_stable_offset: txn.last_stable_offset,
            };
            self.aborted.push(entry);
            self.log.append_aborted_txn(&entry)?;
        }
        Ok(())
    }

    fn is_leader(&self) -> bool {
        matches!(self.role, Some(Role::Leader { .. }))
    }

    /// The current leader epoch if this broker leads, checked against the epoch a request
    /// names (`-1`: not checked): FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when
    /// newer, NOT_LEADER_OR_FOLLOWER on a follower.
    fn leader_epoch_checked(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: i32,
    ) -> Result<i32, ReplicationError> {
        self.check_epoch(tp, current_leader_epoch)?;
        match self.role {
            Some(Role::Leader { leader_epoch }) => Ok(leader_epoch),
            _ => Err(ReplicationError::NotLeader(tp.clone())),
        }
    }

    fn check_epoch(&self, tp: &TopicPartition, requested: i32) -> Result<(), ReplicationError> {
        if requested < 0 {
            return Ok(());
        }
        let current = self.leader_epoch();
        if requested < current {
            return Err(ReplicationError::FencedLeaderEpoch {
                tp: tp.clone(),
                requested,
                current,
            });
        }
        if requested > current {
            return Err(ReplicationError::UnknownLeaderEpoch {
                tp: tp.clone(),
                requested,
                current,
            });
        }
        Ok(())
    }

    /// Moves the leader's high watermark as far as the ISR allows (never backwards).
    /// Returns whether it moved.
    fn update_high_watermark(&mut self, local_id: i32, now_ms: i64, lag_ms: i64) -> bool {
        let leo = self.log.log_end_offset();
        let candidate =
            isr::high_watermark_candidate(&self.isr, local_id, &self.remotes, leo, now_ms, lag_ms);
        let hw = candidate.min(leo);
        if hw > self.high_watermark {
            self.high_watermark = hw;
            return true;
        }
        false
    }

    /// Proposes `next` as the ISR state and returns the item to send.
    fn propose(&mut self, tp: &TopicPartition, next: IsrState) -> AlterIsrItem {
        let item = AlterIsrItem {
            tp: tp.clone(),
            leader_epoch: self.leader_epoch(),
            new_isr: next.proposed_isr(),
            partition_epoch: self.partition_epoch,
            proposal: next.proposal().unwrap_or_default(),
        };
        self.isr = next;
        item
    }

    fn next_proposal(&mut self) -> u64 {
        self.next_proposal += 1;
        self.next_proposal
    }

    /// Rebuilds the remote replicas for the assignment `replicas`, keeping the fetch state of
    /// those kept when `keep_known`.
    fn set_replicas(&mut self, local_id: i32, replicas: &[i32], keep_known: bool) {
        let old = std::mem::take(&mut self.remotes);
        for &id in replicas.iter().filter(|&&id| id != local_id) {
            let remote = match old.get(&id) {
                Some(known) if keep_known => *known,
                _ => RemoteReplica::unknown(),
            };
            self.remotes.insert(id, remote);
        }
        self.replicas = replicas.to_vec();
    }

    /// After the log lost its tail: the epochs, producers and high watermark follow.
    fn after_truncation(&mut self, tp: &TopicPartition) -> Result<(), ReplicationError> {
        let end = self.log.log_end_offset();
        self.epochs.truncate_from_end(end)?;
        (self.producers, self.aborted) = rebuild_producer_state(&self.log)?;
        if self.high_watermark > end {
            info!(%tp, high_watermark = self.high_watermark, log_end_offset = end,
                "truncated below the high watermark");
        }
        self.high_watermark = self.high_watermark.min(end);
        Ok(())
    }
}

/// Who asks ListOffsets, which decides how far it may see (`Partition::offset_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetsReader {
    /// A follower (replica id 0 or more): the latest offset is the log end.
    Replica,
    /// A client on ListOffsets v1 or later: up to the high watermark, and
    /// OFFSET_NOT_AVAILABLE while a new leader's high watermark lags its epoch's start.
    Client,
    /// A client on ListOffsets v0 (Kafka's legacy path): up to the high watermark, without
    /// that check (such clients predate the error code).
    LegacyClient,
    /// A client on ListOffsets v2+ at READ_COMMITTED (isolation level 1): as `Client`, up to
    /// the last stable offset instead of the high watermark.
    CommittedClient,
}

/// One hosted partition.
#[derive(Debug)]
pub struct Partition {
    tp: TopicPartition,
    /// This broker's id.
    local_id: i32,
    /// `replica.lag.time.max.ms`.
    lag_time_max_ms: i64,
    /// The log's topic id (its `partition.metadata`, or the first LeaderAndIsr's, which the
    /// LogManager checked against it), which a Fetch by topic id must match (Kafka's
    /// `Partition.topicId`). A log's id never changes.
    topic_id: std::sync::OnceLock<model::TopicId>,
    state: Mutex<PartitionState>,
}

impl Partition {
    /// Opens (or creates) the log in `dir`, reads its leader-epoch checkpoint and rebuilds
    /// the producer state from its batches. `recovery_point` is `None` after a clean shutdown
    /// (nothing is rescanned); `high_watermark` is the checkpointed one. The partition has no
    /// role until [`Partition::make_leader`] or [`Partition::make_follower`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        tp: TopicPartition,
        dir: &Path,
        config: PartitionConfig,
        recovery_point: Option<i64>,
        log_start_offset: i64,
        high_watermark: i64,
        local_id: i32,
        lag_time_max_ms: i64,
        now_ms: i64,
    ) -> Result<Partition, ReplicationError> {
        let log = match recovery_point {
            Some(rp) => Log::open(dir, config.log.clone(), rp, log_start_offset)?,
            None => Log::open_clean(dir, config.log.clone(), log_start_offset)?,
        };
        let (producers, aborted) = rebuild_producer_state(&log)?;
        if recovery_point.is_some() {
            // Not closed cleanly: the indexes follow what recovery kept of the log.
            log.sync_txn_indexes(&aborted)?;
        }
        let epochs = LeaderEpochCache::open(dir)?;
        Partition::with_log(
            tp,
            dir,
            log,
            (producers, aborted),
            epochs,
            config,
            high_watermark,
            local_id,
            lag_time_max_ms,
            now_ms,
            true,
        )
    }

    /// A partition whose directory the LogManager created just now (so it holds no file):
    /// the empty log, no epochs, no producers, without reading the disk (what creating
    /// thousands of partitions at once costs). The topic id comes from the LeaderAndIsr
    /// ([`Partition::set_topic_id`]).
    pub(crate) fn create_new(
        tp: TopicPartition,
        dir: &Path,
        config: PartitionConfig,
        local_id: i32,
        lag_time_max_ms: i64,
        now_ms: i64,
    ) -> Result<Partition, ReplicationError> {
        let log = Log::create_new(dir, config.log.clone());
        let epochs = LeaderEpochCache::new_empty(dir);
        Partition::with_log(
            tp,
            dir,
            log,
            (ProducerStateMap::default(), Vec::new()),
            epochs,
            config,
            0,
            local_id,
            lag_time_max_ms,
            now_ms,
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn with_log(
        tp: TopicPartition,
        dir: &Path,
        log: Log,
        (producers, aborted): (ProducerStateMap, Vec<AbortedTxn>),
        mut epochs: LeaderEpochCache,
        config: PartitionConfig,
        high_watermark: i64,
        local_id: i32,
        lag_time_max_ms: i64,
        now_ms: i64,
        read_metadata: bool,
    ) -> Result<Partition, ReplicationError> {
        // The log may have lost a torn tail at recovery, or been cut by retention.
        epochs.truncate_from_end(log.log_end_offset())?;
        epochs.truncate_from_start(log.log_start_offset())?;
        let high_watermark = high_watermark.clamp(log.log_start_offset(), log.log_end_offset());
        // Unreadable metadata is the LogManager's to report (it refuses the partition on the
        // next LeaderAndIsr that names an id); here it only means no check.
        let topic_id = std::sync::OnceLock::new();
        if let Some(id) = read_metadata
            .then(|| storage::read_partition_metadata(dir).ok().flatten())
            .flatten()
            .filter(|id| *id != model::TopicId::ZERO)
        {
            let _ = topic_id.set(id);
        }
        Ok(Partition {
            tp,
            local_id,
            lag_time_max_ms,
            topic_id,
            state: Mutex::new(PartitionState {
                log,
                config,
                producers,
                aborted,
                role: None,
                epochs,
                last_flush_ms: now_ms,
                high_watermark,
                leader_id: -1,
                replicas: Vec::new(),
                isr: IsrState::Committed { isr: Vec::new() },
                partition_epoch: -1,
                leader_epoch_start_offset: None,
                remotes: BTreeMap::new(),
                next_proposal: 0,
            }),
        })
    }

    /// The partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// The topic id of the log (its `partition.metadata` when opened), if it has one.
    pub fn topic_id(&self) -> Option<model::TopicId> {
        self.topic_id.get().copied()
    }

    /// Records the log's topic id when it has none yet (a LeaderAndIsr names it; the
    /// LogManager refused the partition if it differed from `partition.metadata`).
    pub fn set_topic_id(&self, id: model::TopicId) {
        if id != model::TopicId::ZERO {
            let _ = self.topic_id.set(id);
        }
    }

    /// Whether a request naming `requested` (nil: by name) may read or write this log: the
    /// ids agree, or either side has none (Kafka's `hasConsistentTopicId`).
    pub fn has_consistent_topic_id(&self, requested: uuid::Uuid) -> bool {
        requested.is_nil()
            || self
                .topic_id
                .get()
                .is_none_or(|id| id.as_bytes() == requested.as_bytes())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, PartitionState> {
        // Every update leaves the state consistent before it can panic (the log writes its
        // files first, then moves its offsets), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current role (`None` before the first LeaderAndIsr).
    pub fn role(&self) -> Option<Role> {
        self.lock().role
    }

    /// The current leader epoch (-1 before the first LeaderAndIsr).
    pub fn leader_epoch(&self) -> i32 {
        self.lock().leader_epoch()
    }

    /// The leader the last LeaderAndIsr named (-1 before the first).
    pub fn leader_id(&self) -> i32 {
        self.lock().leader_id
    }

    /// The partition epoch (state znode version) this broker knows.
    pub fn partition_epoch(&self) -> i32 {
        self.lock().partition_epoch
    }

    /// Becomes (or stays) leader at `l.leader_epoch` (Kafka's `makeLeader`): the epoch starts
    /// at the log end in `leader-epoch-checkpoint`, the ISR is the controller's, and every
    /// follower's lag clock restarts (in-sync ones count as caught up now). Returns whether
    /// the high watermark moved.
    pub(crate) fn make_leader(
        &self,
        l: &PartitionLeadership,
        now_ms: i64,
    ) -> Result<bool, ReplicationError> {
        let mut state = self.lock();
        let was_leader = state.is_leader();
        let leo = state.log.log_end_offset();
        // No file yet (a partition created just now): the entry is written before the first
        // append, not here.
        state.epochs.assign_at_log_end(l.leader_epoch, leo)?;
        debug!(target: "state_change", tp = %self.tp, leader_epoch = l.leader_epoch,
            previous_epoch = state.leader_epoch(), start_offset = leo,
            high_watermark = state.high_watermark, isr = ?l.isr, "leader starts at a new epoch");
        state.role = Some(Role::Leader {
            leader_epoch: l.leader_epoch,
        });
        state.leader_id = self.local_id;
        state.partition_epoch = l.partition_epoch;
        state.leader_epoch_start_offset = Some(leo);
        state.isr = IsrState::Committed { isr: l.isr.clone() };
        state.set_replicas(self.local_id, &l.replicas, was_leader);
        for (id, remote) in state.remotes.iter_mut() {
            remote.reset(leo, now_ms, l.isr.contains(id));
        }
        Ok(state.update_high_watermark(self.local_id, now_ms, self.lag_time_max_ms))
    }

    /// Becomes (or stays) a follower of `l.leader` (Kafka's `makeFollower`). Nothing is
    /// truncated here: the fetcher finds the divergence point with the leader first, unless
    /// the leader is the same and no epoch was missed.
    pub(crate) fn make_follower(
        &self,
        l: &PartitionLeadership,
    ) -> Result<FollowerStart, ReplicationError> {
        let mut state = self.lock();
        let previous = state.role;
        let continuous = matches!(previous, Some(Role::Follower { leader_epoch })
            if state.leader_id == l.leader
                && (l.leader_epoch == leader_epoch || l.leader_epoch == leader_epoch + 1));
        debug!(target: "state_change", tp = %self.tp, leader = l.leader,
            leader_epoch = l.leader_epoch, previous_epoch = state.leader_epoch(),
            log_end_offset = state.log.log_end_offset(), high_watermark = state.high_watermark,
            "follower starts at a new epoch");
        state.role = Some(Role::Follower {
            leader_epoch: l.leader_epoch,
        });
        state.leader_id = l.leader;
        state.partition_epoch = l.partition_epoch;
        state.leader_epoch_start_offset = None;
        state.isr = IsrState::Committed { isr: Vec::new() };
        state.remotes.clear();
        state.replicas = l.replicas.clone();
        Ok(if continuous {
            FollowerStart::Continue
        } else {
            FollowerStart::Truncate
        })
    }

    /// A LeaderAndIsr at the current leader epoch: a leader adopts its ISR when its partition
    /// epoch is newer (the controller changed the ISR itself). Never truncates, never touches
    /// the fetcher. Returns `Some(high watermark moved)` when adopted, `None` when stale.
    pub(crate) fn adopt_same_epoch(&self, l: &PartitionLeadership, now_ms: i64) -> Option<bool> {
        let mut state = self.lock();
        if l.partition_epoch <= state.partition_epoch {
            return None;
        }
        state.partition_epoch = l.partition_epoch;
        state.replicas = l.replicas.clone();
        if !state.is_leader() {
            return Some(false);
        }
        info!(tp = %self.tp, isr = ?l.isr, partition_epoch = l.partition_epoch,
            "took the controller's ISR at the same leader epoch");
        state.isr = IsrState::Committed { isr: l.isr.clone() };
        let leo = state.log.log_end_offset();
        let (local_id, replicas) = (self.local_id, l.replicas.clone());
        state.set_replicas(local_id, &replicas, true);
        for id in &l.isr {
            if let Some(remote) = state.remotes.get_mut(id) {
                remote.last_caught_up_ms = remote.last_caught_up_ms.max(now_ms);
                remote.last_fetch_leader_log_end_offset = leo;
            }
        }
        Some(state.update_high_watermark(self.local_id, now_ms, self.lag_time_max_ms))
    }

    /// Applies changed topic settings.
    pub(crate) fn set_config(&self, config: PartitionConfig) {
        let mut state = self.lock();
        if state.config != config {
            info!(tp = %self.tp, "topic config changed");
            state.log.set_config(config.log.clone());
            state.config = config;
        }
    }

    /// Appends a produce request's record set as the leader, with Kafka's idempotent-producer
    /// checks; the whole request is refused when any batch is. With `required_acks` -1 the ISR
    /// must hold at least `min.insync.replicas` (NOT_ENOUGH_REPLICAS, nothing written).
    /// Returns the result and whether the high watermark moved.
    pub fn append(
        &self,
        records: &mut [u8],
        required_acks: i16,
        now_ms: i64,
    ) -> Result<(AppendResult, bool), ReplicationError> {
        // Every record is checked (compressed batches decoded) before the lock is taken;
        // the result is the producer's bytes or, where Kafka rebuilds a batch, a new one.
        let policy = self.lock().config.log.produce_policy(now_ms);
        let mut rebuilt;
        let (records, batches) = match records::validate_produce(records, &policy)? {
            records::Validated::InPlace(batches) => (records, batches),
            records::Validated::Rebuilt(bytes, batches) => {
                rebuilt = bytes;
                (&mut rebuilt[..], batches)
            }
        };
        let mut state = self.lock();
        let leader_epoch = state.leader_epoch_checked(&self.tp, -1)?;
        if required_acks == -1 {
            let isr = state.isr.isr().len();
            let min = state.config.min_insync_replicas;
            if (isr as i64) < i64::from(min) {
                return Err(ReplicationError::NotEnoughReplicas {
                    tp: self.tp.clone(),
                    isr,
                    min,
                });
            }
        }
        // Check every batch against the state as it will be after the batches before it.
        let mut staged = state.producers.clone();
        let has_producer = batches.iter().any(|b| b.header.has_producer_id());
        if has_producer {
            let mut next = state.log.log_end_offset();
            for batch in &batches {
                match staged.check(&batch.header)? {
                    SequenceCheck::Duplicate {
                        first_offset,
                        last_offset,
                    } => {
                        let result = AppendResult {
                            base_offset: first_offset,
                            last_offset,
                            log_append_time_ms: -1,
                            log_start_offset: state.log.log_start_offset(),
                            duplicate: true,
                        };
                        return Ok((result, false));
                    }
                    SequenceCheck::Append => {
                        let last = next + i64::from(batch.header.last_offset_delta);
                        staged.record(&batch.header, next, last);
                        next = last + 1;
                    }
                }
            }
        }
        // The epoch this leader started (kept in memory while the partition had no file) is
        // on disk before the first record of it.
        state.epochs.write_pending()?;
        let info = state
            .log
            .append_validated(records, &batches, leader_epoch, now_ms)?;
        if has_producer {
            state.producers = staged;
        }
        state.epochs.assign(leader_epoch, info.first_offset)?;
        let moved = state.update_high_watermark(self.local_id, now_ms, self.lag_time_max_ms);
        let result = AppendResult {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
            log_start_offset: state.log.log_start_offset(),
            duplicate: false,
        };
        Ok((result, moved))
    }

    /// WriteTxnMarkers on the leader: appends a COMMIT or ABORT marker for `producer_id`'s
    /// transaction (Kafka's `appendAsLeader` with origin COORDINATOR), after Kafka's checks:
    /// an older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch than the
    /// producer's last marker TRANSACTION_COORDINATOR_FENCED. The transaction leaves the open
    /// ones (the last stable offset moves), an ABORT goes to the `.txnindex`. Returns the
    /// marker's offset and whether the high watermark moved.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: records::control::EndTxnMarker,
        now_ms: i64,
    ) -> Result<(i64, bool), ReplicationError> {
        let mut batch = marker.batch(producer_id, producer_epoch, now_ms);
        let batches = records::validate_record_set(&batch).map_err(LogError::from)?;
        let mut state = self.lock();
        let leader_epoch = state.leader_epoch_checked(&self.tp, -1)?;
        // Markers are written with acks=-1 (Kafka's appendRecords for WriteTxnMarkers).
        let isr = state.isr.isr().len();
        let min = state.config.min_insync_replicas;
        if (isr as i64) < i64::from(min) {
            return Err(ReplicationError::NotEnoughReplicas {
                tp: self.tp.clone(),
                isr,
                min,
            });
        }
        state
            .producers
            .check_marker(producer_id, producer_epoch, &marker)?;
        state.epochs.write_pending()?;
        let info = state
            .log
            .append_validated(&mut batch, &batches, leader_epoch, now_ms)?;
        let mut header = batches[0].header;
        header.base_offset = info.first_offset;
        let completed = state.producers.record_marker(&header, &marker);
        state.complete(completed)?;
        state.epochs.assign(leader_epoch, info.first_offset)?;
        let moved = state.update_high_watermark(self.local_id, now_ms, self.lag_time_max_ms);
        Ok((info.first_offset, moved))
    }

    /// acks=-1: `Ok(true)` once the high watermark reached `required_offset` with enough
    /// replicas in the (maximal) ISR, `Ok(false)` while it has not, NOT_ENOUGH_REPLICAS_AFTER_
    /// APPEND when it did but the ISR shrank below `min.insync.replicas` meanwhile, and
    /// NOT_LEADER_OR_FOLLOWER when this broker no longer leads (Kafka's
    /// `checkEnoughReplicasReachOffset`).
    pub fn check_enough_replicas_reach(
        &self,
        required_offset: i64,
    ) -> Result<bool, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_checked(&self.tp, -1)?;
        if state.high_watermark < required_offset {
            return Ok(false);
        }
        let isr = state.isr.maximal().len();
        let min = state.config.min_insync_replicas;
        if (isr as i64) < i64::from(min) {
            return Err(ReplicationError::NotEnoughReplicasAfterAppend {
                tp: self.tp.clone(),
                isr,
                min,
            });
        }
        Ok(true)
    }

    /// Reads whole batches from `offset`, at most `max_bytes` (unless the first batch is
    /// larger), below the high watermark: consumers never see what is not yet replicated to
    /// every in-sync replica. Only the leader serves reads; `current_leader_epoch` (-1: none)
    /// is checked against its epoch.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
    ) -> Result<ReadResult, ReplicationError> {
        self.read_isolated(offset, max_bytes, current_leader_epoch, false)
    }

    /// [`Partition::read`] at an isolation level: READ_COMMITTED (`read_committed`) reads
    /// below the last stable offset only, and lists the aborted transactions in range.
    pub fn read_isolated(
        &self,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        read_committed: bool,
    ) -> Result<ReadResult, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        let hw = state.high_watermark;
        let limit = state.fetch_limit(read_committed);
        let records = if offset >= limit {
            check_in_range(&state, offset)?;
            Vec::new()
        } else {
            let mut records = state.log.read(offset, max_bytes)?;
            records.truncate(bytes_below(&records, limit));
            records
        };
        let aborted_transactions = read_committed.then(|| {
            if records.is_empty() {
                Vec::new()
            } else {
                state.aborted_between(offset, limit)
            }
        });
        Ok(ReadResult {
            records,
            high_watermark: hw,
            last_stable_offset: state.last_stable_offset(),
            log_start_offset: state.log.log_start_offset(),
            aborted_transactions,
        })
    }

    /// Reads whole batches from `offset` up to the log end (not only below the high
    /// watermark), at most `max_bytes` unless the first batch is larger: what a group
    /// coordinator replays when it takes over an offsets partition (Kafka's
    /// `GroupMetadataManager` reads to the log end too). Empty at or past the log end.
    pub fn read_to_log_end(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Vec<u8>, ReplicationError> {
        let state = self.lock();
        if offset >= state.log.log_end_offset() {
            return Ok(Vec::new());
        }
        Ok(state.log.read(offset, max_bytes)?)
    }

    /// [`Partition::read`] without reading the records: where they lie in a segment file
    /// (for a zero-copy send), `None` when there are none.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
    ) -> Result<RegionRead, ReplicationError> {
        self.read_region_isolated(offset, max_bytes, current_leader_epoch, false)
    }

    /// [`Partition::read_region`] at an isolation level (see [`Partition::read_isolated`]).
    pub fn read_region_isolated(
        &self,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        read_committed: bool,
    ) -> Result<RegionRead, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        let hw = state.high_watermark;
        let limit = state.fetch_limit(read_committed);
        let region = if offset >= limit {
            check_in_range(&state, offset)?;
            None
        } else {
            state
                .log
                .read_region(offset, max_bytes, limit)?
                .filter(|region| region.len > 0)
        };
        let aborted_transactions = read_committed.then(|| {
            if region.is_none() {
                Vec::new()
            } else {
                state.aborted_between(offset, limit)
            }
        });
        Ok(RegionRead {
            region,
            high_watermark: hw,
            last_stable_offset: state.last_stable_offset(),
            log_start_offset: state.log.log_start_offset(),
            aborted_transactions,
        })
    }

    /// A consumer read with no room left in the response: the offsets, no records (nothing
    /// is read from the log). Checked like [`Partition::read`].
    pub fn read_offsets(&self, current_leader_epoch: i32) -> Result<ReadResult, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        Ok(ReadResult {
            records: Vec::new(),
            high_watermark: state.high_watermark,
            last_stable_offset: state.last_stable_offset(),
            log_start_offset: state.log.log_start_offset(),
            aborted_transactions: None,
        })
    }

    /// A follower's fetch (`replica_id` >= 0) at `offset`: records the follower's log end and
    /// caught-up time, may propose adding it to the ISR, moves the high watermark, and reads
    /// up to the log end.
    pub fn read_for_follower(
        &self,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        now_ms: i64,
    ) -> Result<FollowerRead, ReplicationError> {
        self.read_for_follower_with(
            replica_id,
            offset,
            max_bytes,
            current_leader_epoch,
            now_ms,
            true,
        )
    }

    /// [`Partition::read_for_follower`]; without records when `records` is false (a
    /// throttled follower: its position still counts).
    pub fn read_for_follower_with(
        &self,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        now_ms: i64,
        records: bool,
    ) -> Result<FollowerRead, ReplicationError> {
        let mut state = self.lock();
        state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        if !state.remotes.contains_key(&replica_id) {
            return Err(ReplicationError::NotReplica {
                tp: self.tp.clone(),
                replica_id,
            });
        }
        check_in_range(&state, offset)?;
        let leo = state.log.log_end_offset();
        if let Some(remote) = state.remotes.get_mut(&replica_id) {
            remote.on_fetch(offset, now_ms, leo);
        }
        let expand = self.maybe_expand(&mut state, replica_id, offset, now_ms);
        let moved = state.update_high_watermark(self.local_id, now_ms, self.lag_time_max_ms);
        let records = if offset == leo || !records {
            Vec::new()
        } else {
            state.log.read(offset, max_bytes)?
        };
        let hw = state.high_watermark;
        let at_end = offset == leo && expand.is_none() && state.isr.isr().contains(&replica_id);
        Ok(FollowerRead {
            read: ReadResult {
                records,
                high_watermark: hw,
                last_stable_offset: state.last_stable_offset(),
                log_start_offset: state.log.log_start_offset(),
                aborted_transactions: None,
            },
            high_watermark_moved: moved,
            expand,
            at_end,
        })
    }

    fn maybe_expand(
        &self,
        state: &mut PartitionState,
        replica_id: i32,
        follower_end: i64,
        now_ms: i64,
    ) -> Option<AlterIsrItem> {
        let epoch_start = state.leader_epoch_start_offset?;
        if state
            .remotes
            .get(&replica_id)
            .is_some_and(|r| now_ms < r.expand_not_before_ms)
        {
            return None;
        }
        if !isr::can_join_isr(
            &state.isr,
            &state.replicas,
            replica_id,
            follower_end,
            state.high_watermark,
            epoch_start,
        ) {
            return None;
        }
        info!(tp = %self.tp, replica = replica_id, isr = ?state.isr.isr(), follower_end,
            high_watermark = state.high_watermark, "expanding the ISR");
        let proposal = state.next_proposal();
        let next = IsrState::PendingExpand {
            isr: state.isr.isr().to_vec(),
            adding: replica_id,
            proposal,
        };
        Some(state.propose(&self.tp, next))
    }

    /// The periodic ISR check (Kafka's `maybeShrinkIsr`): proposes removing the followers
    /// that have not caught up for `replica.lag.time.max.ms`.
    pub fn maybe_shrink_isr(&self, now_ms: i64) -> Option<AlterIsrItem> {
        let mut state = self.lock();
        if !state.is_leader() {
            return None;
        }
        let leo = state.log.log_end_offset();
        let out = isr::out_of_sync_replicas(
            &state.isr,
            self.local_id,
            &state.remotes,
            leo,
            now_ms,
            self.lag_time_max_ms,
        );
        if out.is_empty() {
            return None;
        }
        let lagging: Vec<(i32, i64)> = out
            .iter()
            .map(|r| (*r, state.remotes.get(r).map_or(-1, |x| x.log_end_offset)))
            .collect();
        info!(tp = %self.tp, isr = ?state.isr.isr(), out_of_sync = ?lagging,
            high_watermark = state.high_watermark, log_end_offset = leo,
            lag_time_max_ms = self.lag_time_max_ms, "shrinking the ISR");
        let proposal = state.next_proposal();
        let next = IsrState::PendingShrink {
            isr: state.isr.isr().to_vec(),
            removing: out,
            proposal,
        };
        Some(state.propose(&self.tp, next))
    }

    /// The controller's answer to `item` (Kafka's `handleAlterIsrResponse`).
    pub(crate) fn on_alter_partition_answer(
        &self,
        item: &AlterIsrItem,
        answer: Result<AlterIsrResult, kafka_protocol::error::ResponseError>,
        now_ms: i64,
    ) -> AnswerOutcome {
        use kafka_protocol::error::ResponseError as E;
        let mut state = self.lock();
        if state.isr.proposal() != Some(item.proposal) {
            // A LeaderAndIsr (or another answer) replaced the state meanwhile.
            return AnswerOutcome::default();
        }
        match answer {
            Err(
                E::UnknownTopicOrPartition
                | E::UnknownTopicId
                | E::FencedLeaderEpoch
                | E::InvalidUpdateVersion
                | E::InvalidRequest,
            ) => {
                // Not retriable: stays pending until the next LeaderAndIsr says what is true.
                AnswerOutcome::default()
            }
            Err(E::OperationNotAttempted) => {
                // A member was not eligible (not live, or shutting down): back to the
                // committed ISR. A refused expansion is not proposed again for a while, so a
                // follower of a broker in controlled shutdown does not cause a request per fetch.
                if let IsrState::PendingExpand { adding, .. } = state.isr {
                    let pause = (self.lag_time_max_ms / 10).clamp(100, 5_000);
                    if let Some(remote) = state.remotes.get_mut(&adding) {
                        remote.expand_not_before_ms = now_ms + pause;
                    }
                }
                let isr = state.isr.isr().to_vec();
                state.isr = IsrState::Committed { isr };
                AnswerOutcome::default()
            }
            Err(error) => {
                warn!(tp = %self.tp, ?error, "ISR change failed; sending it again");
                AnswerOutcome {
                    resubmit: Some(item.clone()),
                    ..AnswerOutcome::default()
                }
            }
            Ok(result) => {
                if result.leader_epoch != state.leader_epoch() {
                    return AnswerOutcome::default();
                }
                if result.partition_epoch < state.partition_epoch {
                    return AnswerOutcome::default();
                }
                let change = match state.isr {
                    IsrState::PendingExpand { .. } => IsrChange::Expand,
                    _ => IsrChange::Shrink,
                };
                state.isr = IsrState::Committed {
                    isr: result.isr.clone(),
                };
                state.partition_epoch = result.partition_epoch;
                info!(tp = %self.tp, isr = ?result.isr, partition_epoch = result.partition_epoch,
                    "ISR updated");
                AnswerOutcome {
                    committed: Some(change),
                    high_watermark_moved: state.update_high_watermark(
                        self.local_id,
                        now_ms,
                        self.lag_time_max_ms,
                    ),
                    resubmit: None,
                }
            }
        }
    }

    /// As a follower: appends batches fetched from the leader at `leader_epoch` (offsets
    /// kept), records their producers and epochs, then takes the leader's high watermark
    /// (bounded by the local end; never backwards).
    pub fn append_as_follower(
        &self,
        records: &[u8],
        leader_high_watermark: i64,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        match state.role {
            Some(Role::Follower { leader_epoch: e }) if e == leader_epoch => {}
            Some(Role::Follower {
                leader_epoch: current,
            }) => {
                return Err(ReplicationError::FencedLeaderEpoch {
                    tp: self.tp.clone(),
                    requested: leader_epoch,
                    current,
                })
            }
            _ => return Err(ReplicationError::NotFollower(self.tp.clone())),
        }
        if !records.is_empty() {
            state.epochs.write_pending()?;
            state.log.append_replicated(records, now_ms)?;
            let mut position = 0;
            while let Some(header) = records.get(position..).and_then(BatchHeader::read) {
                let batch =
                    &records[position..(position + header.size_in_bytes()).min(records.len())];
                let completed = state.producers.record_batch(&header, batch);
                state.complete(completed)?;
                state
                    .epochs
                    .assign(header.partition_leader_epoch, header.base_offset)?;
                position += header.size_in_bytes();
            }
        }
        let leo = state.log.log_end_offset();
        let hw = leader_high_watermark.min(leo);
        state.high_watermark = state.high_watermark.max(hw).min(leo);
        Ok(())
    }

    /// The bytes of the log's segments (DescribeLogDirs).
    pub fn size_in_bytes(&self) -> u64 {
        self.lock().log.size_in_bytes()
    }

    /// The idempotent producers with a batch in the log (DescribeProducers).
    pub fn active_producers(&self) -> Vec<crate::producer_state::ActiveProducer> {
        self.lock().producers.active()
    }

    /// As a follower: removes everything at or past `offset` (the divergence point).
    pub fn truncate_to(&self, offset: i64) -> Result<i64, ReplicationError> {
        let mut state = self.lock();
        if state.is_leader() {
            return Err(ReplicationError::NotFollower(self.tp.clone()));
        }
        let before = state.log.log_end_offset();
        if offset >= before {
            return Ok(before);
        }
        let end = state.log.truncate_to(offset)?;
        state.after_truncation(&self.tp)?;
        info!(tp = %self.tp, offset, old_end = before, new_end = end, "truncated the log");
        Ok(end)
    }

    /// As a follower whose log ends before the leader's starts: empties the log and restarts
    /// it at `offset`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        if state.is_leader() {
            return Err(ReplicationError::NotFollower(self.tp.clone()));
        }
        state.log.truncate_fully_and_start_at(offset)?;
        state.epochs.clear()?;
        state.producers = ProducerStateMap::default();
        state.aborted.clear();
        state.high_watermark = offset;
        Ok(())
    }

    /// The newest epoch in the leader-epoch cache.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.lock().epochs.latest_epoch()
    }

    /// The local answer to "where does `epoch` end" (no role check; the follower's side of
    /// truncation).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let state = self.lock();
        state
            .epochs
            .end_offset_for(epoch, state.log.log_end_offset())
    }

    /// OffsetsForLeaderEpoch on the leader: `(epoch, end offset)` for `leader_epoch` (see
    /// `LeaderEpochCache::end_offset_for`), after checking `current_leader_epoch`.
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> Result<(i32, i64), ReplicationError> {
        let state = self.lock();
        state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        Ok(state
            .epochs
            .end_offset_for(leader_epoch, state.log.log_end_offset()))
    }

    /// The `(epoch, start offset)` entries of the leader-epoch cache.
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.lock().epochs.entries().to_vec()
    }

    /// The offset the next record gets (a follower fetches from here).
    pub fn log_end_offset(&self) -> i64 {
        self.lock().log.log_end_offset()
    }

    /// Whether the in-sync replicas are at least `min.insync.replicas` (acks=-1 needs it).
    pub fn enough_replicas(&self) -> bool {
        let state = self.lock();
        state.isr.isr().len() as i64 >= i64::from(state.config.min_insync_replicas)
    }

    /// The committed ISR (a leader's; empty on a follower).
    pub fn isr(&self) -> Vec<i32> {
        self.lock().isr.isr().to_vec()
    }

    /// The ISR state, with any change in flight.
    pub fn isr_state(&self) -> IsrState {
        self.lock().isr.clone()
    }

    /// How many replicas are in sync.
    pub fn isr_size(&self) -> usize {
        self.lock().isr.isr().len()
    }

    /// The high watermark: the end of what every in-sync replica has.
    pub fn high_watermark(&self) -> i64 {
        self.lock().high_watermark
    }

    /// The log start offset.
    pub fn log_start_offset(&self) -> i64 {
        self.lock().log.log_start_offset()
    }

    /// (log start offset, log end offset), under one lock.
    pub fn log_offsets(&self) -> (i64, i64) {
        let state = self.lock();
        (state.log.log_start_offset(), state.log.log_end_offset())
    }

    /// What the leader knows of follower `replica` (tests and diagnostics).
    pub fn remote_replica(&self, replica: i32) -> Option<RemoteReplica> {
        self.lock().remotes.get(&replica).copied()
    }

    /// ListOffsets: -2 earliest, -1 latest (the high watermark; the log end for a replica,
    /// a follower resetting its fetch offset), else the first record whose timestamp is at
    /// or after `timestamp` (the exact record, on every codec: Kafka's
    /// `fetchOffsetByTimestamp`), answered only when it lies below the high watermark.
    /// Returns (timestamp, offset, leader epoch); (-1, -1, None) when no record is that late.
    /// `max_timestamp` asks for the record with the largest timestamp instead (ListOffsets
    /// v7's MAX_TIMESTAMP, -3). `current_leader_epoch` (-1: none) is checked.
    ///
    /// A leader elected just now may hold records below the start of its epoch that its
    /// high watermark has not reached yet (a follower learns the high watermark one fetch
    /// late). Until it does, a client's (`OffsetsReader::Client`) latest offset, and a
    /// lookup that finds nothing below the high watermark, are OFFSET_NOT_AVAILABLE, which
    /// clients retry, as Kafka's `Partition.fetchOffsetForTimestamp`: otherwise a consumer
    /// would see the end of the log go backwards.
    pub fn offset_for(
        &self,
        timestamp: i64,
        max_timestamp: bool,
        current_leader_epoch: i32,
        reader: OffsetsReader,
    ) -> Result<(i64, i64, Option<i32>), ReplicationError> {
        let state = self.lock();
        let epoch = state.leader_epoch_checked(&self.tp, current_leader_epoch)?;
        let client = matches!(
            reader,
            OffsetsReader::Client | OffsetsReader::CommittedClient
        );
        let limit = state.fetch_limit(reader == OffsetsReader::CommittedClient);
        let lagging = || match state.leader_epoch_start_offset {
            Some(epoch_start) if client && epoch_start > state.high_watermark => {
                Err(ReplicationError::OffsetNotAvailable {
                    tp: self.tp.clone(),
                    high_watermark: state.high_watermark,
                    epoch_start,
                })
            }
            _ => Ok(()),
        };
        let found = if max_timestamp {
            state.log.max_timestamp_record()?
        } else {
            match timestamp {
                -2 => return Ok((-1, state.log.log_start_offset(), Some(epoch))),
                -1 if reader == OffsetsReader::Replica => {
                    return Ok((-1, state.log.log_end_offset(), Some(epoch)))
                }
                -1 => {
                    lagging()?;
                    return Ok((-1, limit, Some(epoch)));
                }
                t => state.log.offset_for_timestamp(t)?,
            }
        };
        Ok(match found {
            Some((ts, offset, batch_epoch)) if offset < limit => {
                (ts, offset, (batch_epoch >= 0).then_some(batch_epoch))
            }
            _ => {
                lagging()?;
                (-1, -1, None)
            }
        })
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1 means the high watermark).
    /// Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, ReplicationError> {
        let mut state = self.lock();
        state.leader_epoch_checked(&self.tp, -1)?;
        let target = if offset == -1 {
            state.high_watermark
        } else if offset > state.high_watermark {
            return Err(ReplicationError::Log(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: state.log.log_start_offset(),
                log_end_offset: state.high_watermark,
            }));
        } else {
            offset
        };
        let start = state.log.delete_records_before(target)?;
        state.producers.truncate_head(start);
        state.aborted.retain(|t| t.last_offset >= start);
        state.epochs.truncate_from_start(start)?;
        Ok(start)
    }

    /// Retention pass; returns how many segments were removed.
    pub(crate) fn apply_retention(&self, now_ms: i64) -> Result<usize, ReplicationError> {
        let mut state = self.lock();
        let high_watermark = state.high_watermark;
        let removed = state.log.apply_retention(now_ms, high_watermark)?;
        if removed > 0 {
            let start = state.log.log_start_offset();
            state.producers.truncate_head(start);
            state.aborted.retain(|t| t.last_offset >= start);
            state.epochs.truncate_from_start(start)?;
            info!(tp = %self.tp, removed, log_start_offset = start, "retention removed segments");
        }
        Ok(removed)
    }

    /// fsyncs when `flush.ms` has passed since the last flush and data is unflushed.
    pub(crate) fn flush_if_due(&self, now_ms: i64) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        let due = state
            .config
            .flush_ms
            .is_some_and(|ms| now_ms - state.last_flush_ms >= ms);
        if due {
            if state.log.has_unflushed() {
                state.log.flush()?;
            }
            state.last_flush_ms = now_ms;
        }
        Ok(())
    }

    /// fsyncs everything (clean shutdown).
    pub(crate) fn flush(&self) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        if state.log.has_unflushed() {
            state.log.flush()?;
        }
        Ok(())
    }

    /// The partition's log settings (its topic's effective config).
    pub fn log_config(&self) -> LogConfig {
        self.lock().config.log.clone()
    }

    /// The log directory this partition's directory lives in.
    pub fn log_dir(&self) -> std::path::PathBuf {
        self.checkpoint_entry().0
    }

    /// What a cleaning of this partition's log would cover now (`None` unless the topic is
    /// compacted); nothing at or past the last stable offset is cleaned (Kafka's
    /// `firstUnstableOffset` bound: an open transaction's records may still be aborted).
    pub fn clean_plan(
        &self,
        checkpoint: Option<i64>,
        now_ms: i64,
    ) -> Option<storage::log::cleaner::CleanPlan> {
        let state = self.lock();
        let stable = state.last_stable_offset();
        state.log.clean_plan(checkpoint, stable, now_ms)
    }

    /// Runs one cleaning of `plan` (storage's log cleaner): the groups are rewritten without
    /// the partition's lock, each swapped in under it. Returns what was done; its end offset
    /// is the new cleaner checkpoint.
    pub fn clean(
        &self,
        plan: &storage::log::cleaner::CleanPlan,
        map_capacity: usize,
        throttle: &mut storage::log::cleaner::Throttle,
        now_ms: i64,
    ) -> Result<storage::log::cleaner::CleanStats, ReplicationError> {
        let stats = storage::log::cleaner::clean(plan, map_capacity, throttle, now_ms, |group| {
            self.lock().log.install_cleaned(group)
        })?;
        Ok(stats)
    }

    /// (log directory, recovery point, log start offset, high watermark) for the checkpoint
    /// files.
    pub(crate) fn checkpoint_entry(&self) -> (std::path::PathBuf, i64, i64, i64) {
        let state = self.lock();
        let parent = state
            .log
            .dir()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        (
            parent,
            state.log.recovery_point(),
            state.log.log_start_offset(),
            state.high_watermark,
        )
    }
}

/// OFFSET_OUT_OF_RANGE unless `offset` lies within the log (its end included).
fn check_in_range(state: &PartitionState, offset: i64) -> Result<(), ReplicationError> {
    let (start, end) = (state.log.log_start_offset(), state.log.log_end_offset());
    if offset < start || offset > end {
        return Err(ReplicationError::Log(LogError::OffsetOutOfRange {
            offset,
            log_start_offset: start,
            log_end_offset: end,
        }));
    }
    Ok(())
}

/// The length of the whole batches at the front of `records` that end below `limit` (as
/// Kafka bounds a consumer's read by the high watermark's position).
fn bytes_below(records: &[u8], limit: i64) -> usize {
    let mut position = 0;
    while let Some(header) = records.get(position..).and_then(BatchHeader::read) {
        if header.last_offset() >= limit || position + header.size_in_bytes() > records.len() {
            break;
        }
        position += header.size_in_bytes();
    }
    position
}

/// Rebuilds the producer state, and the aborted transactions, by scanning the batches of the
/// whole log (there are no producer-state snapshots yet): the headers, and the record of each
/// transaction marker.
fn rebuild_producer_state(
    log: &Log,
) -> Result<(ProducerStateMap, Vec<AbortedTxn>), ReplicationError> {
    let mut state = ProducerStateMap::default();
    let mut aborted = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let chunk = log.read(offset, SCAN_CHUNK_BYTES)?;
        if chunk.is_empty() {
            break;
        }
        let mut position = 0;
        let mut advanced = false;
        while position + records::HEADER_SIZE <= chunk.len() {
            let Some(header) = BatchHeader::read(&chunk[position..]) else {
                break;
            };
            let size = header.size_in_bytes();
            if position + size > chunk.len() {
                break;
            }
            if let Some(txn) = state
                .record_batch(&header, &chunk[position..position + size])
                .filter(|t| t.aborted)
            {
                aborted.push(AbortedTxn {
                    producer_id: txn.producer_id,
                    first_offset: txn.first_offset,
                    last_offset: txn.last_offset,
                    last_stable_offset: txn.last_stable_offset,
                });
            }
            offset = header.next_offset();
            position += size;
            advanced = true;
        }
        if !advanced {
            warn!(dir = %log.dir().display(), offset, "could not scan a batch header; producer state is partial");
            break;
        }
    }
    state.truncate_head(log.log_start_offset());
    Ok((state, aborted))
}
