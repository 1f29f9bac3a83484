//! One hosted partition: its open [`Log`], its producer state, and this broker's role.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use model::TopicPartition;
use records::BatchHeader;
use storage::checkpoint::{read_leader_epochs, write_leader_epochs, LEADER_EPOCH_CHECKPOINT};
use storage::log::{Log, LogConfig, LogError};
use tracing::{info, warn};

use crate::producer_state::{ProducerStateMap, SequenceCheck};
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
    /// The last stable offset (the high watermark: there are no transactions).
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
}

/// What [`Partition::read_region`] found: the records' place in a segment file.
#[derive(Debug, Clone)]
pub struct RegionRead {
    /// Whole record batches as stored, not read yet.
    pub region: Option<storage::log::FileRegion>,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset (the high watermark: there are no transactions).
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
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

#[derive(Debug)]
pub(crate) struct PartitionState {
    pub(crate) log: Log,
    pub(crate) config: PartitionConfig,
    pub(crate) producers: ProducerStateMap,
    pub(crate) role: Role,
    /// (epoch, start offset) pairs, as in `leader-epoch-checkpoint`.
    leader_epochs: Vec<(i32, i64)>,
    pub(crate) last_flush_ms: i64,
    /// This broker's id and the in-sync replicas the controller set (empty until known:
    /// this broker alone).
    local_id: i32,
    isr: Vec<i32>,
    /// As leader: each follower's log end offset, from its last fetch.
    replica_leos: HashMap<i32, i64>,
    high_watermark: i64,
}

impl PartitionState {
    /// Moves the leader's high watermark to the smallest log end offset of the in-sync
    /// replicas (never backwards). Returns whether it moved.
    fn update_high_watermark(&mut self) -> bool {
        let leo = self.log.log_end_offset();
        let mut hw = leo;
        for replica in self.isr.iter().filter(|r| **r != self.local_id) {
            hw = hw.min(self.replica_leos.get(replica).copied().unwrap_or(0));
        }
        let hw = hw.max(self.high_watermark).min(leo);
        let moved = hw != self.high_watermark;
        self.high_watermark = hw;
        moved
    }

    fn leader_epoch_if_leader(&self, tp: &TopicPartition) -> Result<i32, ReplicationError> {
        match self.role {
            Role::Leader { leader_epoch } => Ok(leader_epoch),
            Role::Follower { .. } => Err(ReplicationError::NotLeader(tp.clone())),
        }
    }
}

/// One hosted partition.
#[derive(Debug)]
pub struct Partition {
    tp: TopicPartition,
    state: Mutex<PartitionState>,
    /// The follower fetcher task, while this broker follows.
    pub(crate) fetcher: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Partition {
    /// Opens (or creates) the log in `dir` and rebuilds the producer state from its batches.
    /// `recovery_point` is `None` after a clean shutdown (nothing is rescanned);
    /// `high_watermark` is the checkpointed one (a follower truncates to it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        tp: TopicPartition,
        dir: &Path,
        config: PartitionConfig,
        recovery_point: Option<i64>,
        log_start_offset: i64,
        high_watermark: i64,
        role: Role,
        now_ms: i64,
    ) -> Result<Partition, ReplicationError> {
        let log = match recovery_point {
            Some(rp) => Log::open(dir, config.log.clone(), rp, log_start_offset)?,
            None => Log::open_clean(dir, config.log.clone(), log_start_offset)?,
        };
        let producers = rebuild_producer_state(&log)?;
        let leader_epochs = read_leader_epochs(&dir.join(LEADER_EPOCH_CHECKPOINT))?;
        let partition = Partition {
            tp,
            state: Mutex::new(PartitionState {
                log,
                config,
                producers,
                // Not a real role: the first set_role below always applies its role.
                role: Role::Follower {
                    leader_epoch: i32::MIN,
                },
                leader_epochs,
                last_flush_ms: now_ms,
                local_id: -1,
                isr: Vec::new(),
                replica_leos: HashMap::new(),
                high_watermark,
            }),
            fetcher: Mutex::new(None),
        };
        partition.set_role(role)?;
        Ok(partition)
    }

    /// The partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, PartitionState> {
        // Every update leaves the state consistent before it can panic (the log writes its
        // files first, then moves its offsets), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current role.
    pub fn role(&self) -> Role {
        self.lock().role
    }

    /// Records a new role; a new leader epoch is appended to `leader-epoch-checkpoint` with
    /// the log end offset as its start. A broker that becomes a follower (or follows a new
    /// leader) first truncates its log to its high watermark, as Kafka did before KIP-101:
    /// what lies above may be missing on the new leader, and the fetcher copies back what is
    /// not.
    pub(crate) fn set_role(&self, role: Role) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        let leo = state.log.log_end_offset();
        state.high_watermark = state.high_watermark.min(leo);
        if state.role != role {
            state.replica_leos.clear();
            if matches!(role, Role::Follower { .. }) && state.high_watermark < leo {
                let hw = state.high_watermark;
                let end = state.log.truncate_to(hw)?;
                info!(tp = %self.tp, high_watermark = hw, old_end = leo, new_end = end,
                    "truncated to the high watermark to follow a new leader");
                state.producers = rebuild_producer_state(&state.log)?;
                state.leader_epochs.retain(|&(_, start)| start <= end);
                state.high_watermark = state.high_watermark.min(end);
            }
        }
        state.role = role;
        if matches!(role, Role::Leader { .. }) {
            state.update_high_watermark();
        }
        let epoch = role.leader_epoch();
        if state.leader_epochs.last().is_none_or(|&(e, _)| e < epoch) {
            let start = state.log.log_end_offset();
            state.leader_epochs.push((epoch, start));
            let path = state.log.dir().join(LEADER_EPOCH_CHECKPOINT);
            write_leader_epochs(&path, &state.leader_epochs)?;
        }
        Ok(())
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
    /// checks; the whole request is refused when any batch is.
    pub fn append(
        &self,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<AppendResult, ReplicationError> {
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
        let leader_epoch = state.leader_epoch_if_leader(&self.tp)?;
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
                        return Ok(AppendResult {
                            base_offset: first_offset,
                            last_offset,
                            log_append_time_ms: -1,
                            log_start_offset: state.log.log_start_offset(),
                            duplicate: true,
                        });
                    }
                    SequenceCheck::Append => {
                        let last = next + i64::from(batch.header.last_offset_delta);
                        staged.record(&batch.header, next, last);
                        next = last + 1;
                    }
                }
            }
        }
        let info = state
            .log
            .append_validated(records, &batches, leader_epoch, now_ms)?;
        if has_producer {
            state.producers = staged;
        }
        state.update_high_watermark();
        Ok(AppendResult {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
            log_start_offset: state.log.log_start_offset(),
            duplicate: false,
        })
    }

    /// Reads whole batches from `offset`, at most `max_bytes` (unless the first batch is
    /// larger), below the high watermark: consumers never see what is not yet replicated to
    /// every in-sync replica. Only the leader serves reads.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_if_leader(&self.tp)?;
        let hw = state.high_watermark;
        let records = if offset >= hw {
            check_in_range(&state, offset)?;
            Vec::new()
        } else {
            let mut records = state.log.read(offset, max_bytes)?;
            records.truncate(bytes_below(&records, hw));
            records
        };
        Ok(ReadResult {
            records,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: state.log.log_start_offset(),
        })
    }

    /// [`Partition::read`] without reading the records: where they lie in a segment file
    /// (for a zero-copy send), `None` when there are none.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<RegionRead, ReplicationError> {
        let state = self.lock();
        state.leader_epoch_if_leader(&self.tp)?;
        let hw = state.high_watermark;
        let region = if offset >= hw {
            check_in_range(&state, offset)?;
            None
        } else {
            state
                .log
                .read_region(offset, max_bytes, hw)?
                .filter(|region| region.len > 0)
        };
        Ok(RegionRead {
            region,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: state.log.log_start_offset(),
        })
    }

    /// A follower's fetch (`replica_id` >= 0): records the follower's log end offset (its
    /// fetch offset), moves the high watermark, and reads up to the log end. Returns the read
    /// and whether the high watermark moved.
    pub fn read_for_follower(
        &self,
        replica_id: i32,
        offset: i64,
        max_bytes: usize,
    ) -> Result<(ReadResult, bool), ReplicationError> {
        let mut state = self.lock();
        state.leader_epoch_if_leader(&self.tp)?;
        check_in_range(&state, offset)?;
        state.replica_leos.insert(replica_id, offset);
        let moved = state.update_high_watermark();
        let records = if offset == state.log.log_end_offset() {
            Vec::new()
        } else {
            state.log.read(offset, max_bytes)?
        };
        let hw = state.high_watermark;
        Ok((
            ReadResult {
                records,
                high_watermark: hw,
                last_stable_offset: hw,
                log_start_offset: state.log.log_start_offset(),
            },
            moved,
        ))
    }

    /// As a follower: appends batches fetched from the leader (offsets kept) and records
    /// their producers, then takes the leader's high watermark (bounded by the local end).
    pub fn append_as_follower(
        &self,
        records: &[u8],
        leader_high_watermark: i64,
        now_ms: i64,
    ) -> Result<(), ReplicationError> {
        let mut state = self.lock();
        if matches!(state.role, Role::Leader { .. }) {
            return Err(ReplicationError::NotFollower(self.tp.clone()));
        }
        if !records.is_empty() {
            state.log.append_replicated(records, now_ms)?;
            let mut position = 0;
            while let Some(header) = records.get(position..).and_then(BatchHeader::read) {
                state
                    .producers
                    .record(&header, header.base_offset, header.last_offset());
                position += header.size_in_bytes();
            }
        }
        let leo = state.log.log_end_offset();
        state.high_watermark = leader_high_watermark.min(leo).max(0);
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

    /// The offset the next record gets (a follower fetches from here).
    pub fn log_end_offset(&self) -> i64 {
        self.lock().log.log_end_offset()
    }

    /// Records this broker's id and the in-sync replicas (LeaderAndIsr).
    pub fn set_isr(&self, local_id: i32, isr: Vec<i32>) -> bool {
        let mut state = self.lock();
        state.local_id = local_id;
        state.isr = isr;
        matches!(state.role, Role::Leader { .. }) && state.update_high_watermark()
    }

    /// Whether the in-sync replicas are at least `min.insync.replicas` (acks=-1 needs it).
    pub fn enough_replicas(&self) -> bool {
        let state = self.lock();
        state.isr.len().max(1) as i64 >= i64::from(state.config.min_insync_replicas)
    }

    /// How many replicas are in sync (1 while the controller has not said).
    pub fn isr_size(&self) -> usize {
        self.lock().isr.len().max(1)
    }

    /// The high watermark: the end of what every in-sync replica has.
    pub fn high_watermark(&self) -> i64 {
        self.lock().high_watermark
    }

    /// The log start offset.
    pub fn log_start_offset(&self) -> i64 {
        self.lock().log.log_start_offset()
    }

    /// ListOffsets: -2 earliest, -1 latest (the high watermark), else the first record whose
    /// timestamp is at or after `timestamp` (the exact record, on every codec: Kafka's
    /// `fetchOffsetByTimestamp`), answered only when it lies below the high watermark.
    /// Returns (timestamp, offset, leader epoch); (-1, -1, None) when no record is that late.
    /// `max_timestamp` asks for the record with the largest timestamp instead (ListOffsets
    /// v7's MAX_TIMESTAMP, -3).
    pub fn offset_for(
        &self,
        timestamp: i64,
        max_timestamp: bool,
    ) -> Result<(i64, i64, Option<i32>), ReplicationError> {
        let state = self.lock();
        let epoch = state.leader_epoch_if_leader(&self.tp)?;
        let found = if max_timestamp {
            state.log.max_timestamp_record()?
        } else {
            match timestamp {
                -2 => return Ok((-1, state.log.log_start_offset(), Some(epoch))),
                -1 => return Ok((-1, state.high_watermark, Some(epoch))),
                t => state.log.offset_for_timestamp(t)?,
            }
        };
        Ok(match found {
            Some((ts, offset, batch_epoch)) if offset < state.high_watermark => {
                (ts, offset, (batch_epoch >= 0).then_some(batch_epoch))
            }
            _ => (-1, -1, None),
        })
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1 means the high watermark).
    /// Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, ReplicationError> {
        let mut state = self.lock();
        state.leader_epoch_if_leader(&self.tp)?;
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
        Ok(start)
    }

    /// Retention pass; returns how many segments were removed.
    pub(crate) fn apply_retention(&self, now_ms: i64) -> Result<usize, ReplicationError> {
        let mut state = self.lock();
        let removed = state.log.apply_retention(now_ms)?;
        if removed > 0 {
            let start = state.log.log_start_offset();
            state.producers.truncate_head(start);
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
    /// compacted); the stable offset is the high watermark.
    pub fn clean_plan(
        &self,
        checkpoint: Option<i64>,
        now_ms: i64,
    ) -> Option<storage::log::cleaner::CleanPlan> {
        let state = self.lock();
        state
            .log
            .clean_plan(checkpoint, state.high_watermark, now_ms)
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

/// Rebuilds the producer state by scanning the batch headers of the whole log (there are no
/// producer-state snapshots yet).
fn rebuild_producer_state(log: &Log) -> Result<ProducerStateMap, ReplicationError> {
    let mut state = ProducerStateMap::default();
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
            state.record(&header, header.base_offset, header.last_offset());
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
    Ok(state)
}
