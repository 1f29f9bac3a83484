//! A partition log: an ordered set of segments in one `<topic>-<partition>` directory.
//!
//! Appends validate the producer's batches (`records`), assign offsets in place and write the
//! bytes unchanged otherwise; reads return whole batches straight from the segment files.
//! Segments roll on `segment.bytes` and `segment.ms`; retention (`cleanup.policy` with
//! `delete`, alone or with `compact`) removes whole segments below the high watermark, the
//! active one too once it is past retention (rolled first, as Kafka does); fsync
//! follows `flush.messages` (default: never, the page cache, like Kafka). Recovery re-validates
//! every segment past the recovery point, streaming it, and truncates a torn or corrupt tail
//! (a bad header, a wrong CRC, offsets that go backwards or leave the segment's range); a
//! segment whose indexes are damaged or do not lead to a valid end is recovered even after a
//! clean shutdown. A failed write is undone; a log that cannot be trusted goes offline.

pub mod cleaner;
mod index;
mod recovery;
mod segment;
pub mod txn_index;

pub use txn_index::AbortedTxn;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use records::RecordsError;
use tracing::{debug, error, info, warn};

use recovery::OffsetRange;
use segment::Segment;

/// How long each [`Log::flush`] took (Kafka's `LogFlushStats.LogFlushRateAndTimeMs`): one
/// histogram for the process, as Kafka's is one per broker process.
pub static LOG_FLUSH_TIME: telemetry::Histogram = telemetry::Histogram::new();

/// The topic-level settings a log obeys (Kafka's names, units last).
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: usize,
    pub max_message_bytes: usize,
    /// fsync after this many messages; `None` leaves flushing to the OS (Kafka's default).
    pub flush_messages: Option<u64>,
    /// -1 keeps segments forever.
    pub retention_ms: i64,
    /// -1 means no size limit.
    pub retention_bytes: i64,
    /// `message.timestamp.type=LogAppendTime`.
    pub log_append_time: bool,
    /// `cleanup.policy` includes `compact`: the cleaner keeps the latest record per key, and
    /// produced records need keys.
    pub compact: bool,
    /// `cleanup.policy` includes `delete`: retention removes old segments. A `compact`-only
    /// log is never shortened by `retention.ms` / `retention.bytes`.
    pub delete: bool,
    /// `message.timestamp.difference.max.ms`.
    pub timestamp_difference_max_ms: i64,
    /// `compression.type`: `None` keeps the producer's codec (`producer`).
    pub compression: Option<records::Compression>,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log whose dirty part is older than this is cleaned whatever
    /// its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long tombstones survive once cleaned.
    pub delete_retention_ms: i64,
    /// `message.downconversion.enable`.
    pub downconversion_enable: bool,
}

impl Eq for LogConfig {}

impl LogConfig {
    /// What a produced record set is checked against (Kafka's `LogValidator` inputs).
    pub fn produce_policy(&self, now_ms: i64) -> records::ProducePolicy {
        records::ProducePolicy {
            compacted: self.compact,
            log_append_time: self.log_append_time,
            timestamp_difference_max_ms: self.timestamp_difference_max_ms,
            target_compression: self.compression,
            now_ms,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        // Kafka 2.8's defaults.
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            flush_messages: None,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            log_append_time: false,
            compact: false,
            delete: true,
            timestamp_difference_max_ms: i64::MAX,
            compression: None,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            downconversion_enable: true,
        }
    }
}

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    InvalidRecords(#[from] RecordsError),
    #[error("the record batch is {size} bytes, larger than max.message.bytes ({max})")]
    RecordTooLarge { size: usize, max: usize },
    #[error("offset {offset} is out of range: the log holds offsets {log_start_offset}..{log_end_offset}")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("replicated batches start at offset {found}, below the log end {expected}")]
    NotContiguous { expected: i64, found: i64 },
    #[error("replicated batch at byte {position} starts at offset {found}, not after the previous batch's last offset {previous_last}")]
    OffsetsNotIncreasing {
        position: usize,
        previous_last: i64,
        found: i64,
    },
    #[error(
        "offset {offset} does not fit in the index {path} (32-bit offsets relative to the segment)"
    )]
    OffsetOutsideSegment { path: PathBuf, offset: i64 },
    #[error("{path} is offline and takes no more writes until the broker restarts: {reason}")]
    Offline { path: PathBuf, reason: String },
    #[error("corrupt index {path}: entries are not increasing")]
    CorruptIndex { path: PathBuf },
    #[error("corrupt segment {path}: bad batch header at byte {position}")]
    CorruptSegment { path: PathBuf, position: u64 },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.to_owned();
        move |source| LogError::Io { op, path, source }
    }
}

/// Whole batches of a segment file, by position, not read yet: what a Fetch hands to the
/// socket with `sendfile` (zero-copy) or reads with [`FileRegion::read`]. Holds the file
/// open, so the bytes stay readable after the log rolls, truncates (then fewer bytes may be
/// left: a reader must check what it got) or deletes the segment.
#[derive(Debug, Clone)]
pub struct FileRegion {
    pub file: std::sync::Arc<std::fs::File>,
    pub path: std::sync::Arc<Path>,
    pub position: u64,
    pub len: usize,
}

impl FileRegion {
    /// The region's bytes, read into memory.
    pub fn read(&self) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0u8; self.len];
        crate::file::read_exact_at(&*self.file, &self.path, &mut buf, self.position)
            .map_err(LogError::io("read", &self.path))?;
        Ok(buf)
    }
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The LogAppendTime stamped on the batches, when the topic uses it.
    pub log_append_time_ms: Option<i64>,
    pub batches: usize,
}

/// One partition's log.
///
/// A failed write leaves the log as it was before it (the segment is cut back; see
/// [`LogError::Offline`] for when that is impossible). A log whose data may no longer be
/// what it acknowledged (a write that could not be undone, a failed fsync, a truncation cut
/// short) goes offline: it still serves reads of what it holds, and refuses every write
/// until it is opened again, when recovery finds the valid end. This is Kafka's taking a
/// log directory offline on an `IOException`, per log.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Boxed: a map node holds eleven values, so one unboxed segment (~340 bytes) cost a
    /// 3.8 KiB node per log; 380 MiB of heap for 100,000 single-segment partitions.
    segments: BTreeMap<i64, Box<Segment>>,
    log_start_offset: i64,
    recovery_point: i64,
    unflushed_messages: u64,
    /// Why the log takes no more writes.
    offline: Option<String>,
}

impl Log {
    /// Opens the log in `dir`, recovering every segment that holds data past `recovery_point`
    /// (offsets below it were flushed before a clean shutdown or checkpoint).
    pub fn open(
        dir: &Path,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
    ) -> Result<Log, LogError> {
        Log::open_with(dir, config, Some(recovery_point), log_start_offset)
    }

    /// Opens a log that was flushed and closed by a clean shutdown (Kafka's
    /// `.kafka_cleanshutdown`): no segment is rescanned, and the recovery point is the log end.
    pub fn open_clean(
        dir: &Path,
        config: LogConfig,
        log_start_offset: i64,
    ) -> Result<Log, LogError> {
        Log::open_with(dir, config, None, log_start_offset)
    }

    /// A new, empty log in `dir`, a directory the caller created just now (so it holds
    /// nothing to list or recover): nothing is read, and no segment file is created until
    /// the first append. The same log as [`Log::open`] of an empty directory.
    pub fn create_new(dir: &Path, config: LogConfig) -> Log {
        let mut segments = BTreeMap::new();
        segments.insert(0, Box::new(Segment::new_empty(dir, 0)));
        debug!(dir = %dir.display(), "created an empty log");
        Log {
            dir: dir.to_owned(),
            config,
            segments,
            log_start_offset: 0,
            recovery_point: 0,
            unflushed_messages: 0,
            offline: None,
        }
    }

    fn open_with(
        dir: &Path,
        config: LogConfig,
        recovery_point: Option<i64>,
        log_start_offset: i64,
    ) -> Result<Log, LogError> {
        std::fs::create_dir_all(dir).map_err(LogError::io("create", dir))?;
        // A cleaning interrupted by a crash is completed (or discarded) first; segments it
        // swapped in get their indexes rebuilt.
        let swapped = cleaner::complete_interrupted_swaps(dir)?;
        let mut bases = Vec::new();
        // Any segment file at all (an index left without its `.log`), so that a log with no
        // `.log` starts lazily only when nothing of the segment is there.
        let mut segment_files = false;
        for entry in std::fs::read_dir(dir).map_err(LogError::io("list", dir))? {
            let entry = entry.map_err(LogError::io("list", dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(base) = name
                .strip_suffix(".log")
                .and_then(|s| s.parse::<i64>().ok())
            {
                bases.push(base);
            }
            segment_files |= name.ends_with(".index") || name.ends_with(".timeindex");
        }
        bases.sort_unstable();
        let mut segments = BTreeMap::new();
        let mut corrupt_from = None;
        for (i, &base) in bases.iter().enumerate() {
            let next_base = bases.get(i + 1).copied();
            let needs_recovery = swapped.contains(&base)
                || recovery_point.is_some_and(|rp| next_base.is_none_or(|next| next > rp));
            let range = OffsetRange::new(base, next_base);
            let (segment, recovered) = Segment::load(
                dir,
                base,
                range,
                config.index_interval_bytes,
                needs_recovery,
            )?;
            if let Some(result) = recovered {
                if result.truncated_bytes > 0 {
                    warn!(dir = %dir.display(), segment = base, valid = result.valid_bytes,
                        truncated = result.truncated_bytes, reason = result.reason.as_deref().unwrap_or(""),
                        "truncated a torn or corrupt tail during recovery");
                    corrupt_from = next_base;
                }
            }
            segments.insert(base, Box::new(segment));
            if corrupt_from.is_some() {
                break;
            }
        }
        // Anything after a truncated segment is unreachable: offsets must stay contiguous.
        if let Some(first_dropped) = corrupt_from {
            for &base in bases.iter().filter(|&&b| b >= first_dropped) {
                warn!(dir = %dir.display(), segment = base, "removing a segment after a corrupt one");
                Segment::delete_files_of(dir, base)?;
            }
        }
        if segments.is_empty() {
            let base = log_start_offset.max(0);
            let segment = if segment_files {
                Segment::open(dir, base)?
            } else {
                Segment::new_empty(dir, base)
            };
            segments.insert(base, Box::new(segment));
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let mut log = Log {
            dir: dir.to_owned(),
            config,
            log_start_offset: log_start_offset.max(first_base),
            recovery_point: recovery_point.unwrap_or(0),
            segments,
            unflushed_messages: 0,
            offline: None,
        };
        if recovery_point.is_none() {
            log.recovery_point = log.log_end_offset();
        }
        debug!(dir = %dir.display(), log_start_offset = log.log_start_offset, log_end_offset = log.log_end_offset(),
            segments = log.segments.len(), "loaded log");
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Applies changed topic configs; they take effect from the next append or retention pass.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    /// Whether appended data has not been fsynced yet (the recovery point is behind the end).
    pub fn has_unflushed(&self) -> bool {
        self.recovery_point < self.log_end_offset()
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Validates `records` (a produce request's record set), assigns offsets in place, and
    /// appends them. Nothing is written when any batch is invalid.
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let batches = records::validate_record_set(records)?;
        self.append_validated(records, &batches, leader_epoch, now_ms)
    }

    /// [`Log::append`] for a record set the caller already validated with
    /// `records::validate_record_set` (`batches` is its result), so the CRCs are not checked
    /// twice when the caller needs the batch headers first (producer-state checks).
    pub fn append_validated(
        &mut self,
        records: &mut [u8],
        batches: &[records::BatchRef],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        if let Some(big) = batches
            .iter()
            .find(|b| b.header.size_in_bytes() > self.config.max_message_bytes)
        {
            return Err(LogError::RecordTooLarge {
                size: big.header.size_in_bytes(),
                max: self.config.max_message_bytes,
            });
        }
        let first_offset = self.log_end_offset();
        let append_time = self.config.log_append_time.then_some(now_ms);
        let next =
            records::assign_offsets(records, batches, first_offset, leader_epoch, append_time);
        self.append_batches(records, batches, next - first_offset, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset: next - 1,
            log_append_time_ms: append_time,
            batches: batches.len(),
        })
    }

    /// Appends batches copied from the partition's leader (a follower's fetch), keeping their
    /// offsets and leader epochs: the CRCs are checked, the first batch must start at the log
    /// end offset and every later one after the previous one's last offset (a leader's bug or
    /// a crafted response must never move offsets backwards). Nothing is written when any
    /// batch is refused.
    pub fn append_replicated(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.check_online()?;
        let batches = records::validate_record_set(records)?;
        let first_offset = batches[0].header.base_offset;
        let end = self.log_end_offset();
        // A gap is fine: the leader's cleaner may have removed whole batches (Kafka's
        // follower requires only that offsets move forward).
        if first_offset < end {
            return Err(LogError::NotContiguous {
                expected: end,
                found: first_offset,
            });
        }
        for pair in batches.windows(2) {
            let (previous, batch) = (&pair[0].header, &pair[1].header);
            if batch.base_offset <= previous.last_offset() {
                return Err(LogError::OffsetsNotIncreasing {
                    position: pair[1].position,
                    previous_last: previous.last_offset(),
                    found: batch.base_offset,
                });
            }
        }
        let next = batches.last().map_or(end, |b| b.header.next_offset());
        self.append_batches(records, &batches, next - first_offset, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset: next - 1,
            log_append_time_ms: None,
            batches: batches.len(),
        })
    }

    /// Writes batches whose offsets are assigned and checked, rolling first when needed, and
    /// fsyncs when `flush.messages` says so.
    fn append_batches(
        &mut self,
        records: &[u8],
        batches: &[records::BatchRef],
        offsets: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        self.maybe_roll(records.len(), offsets, now_ms)?;
        let index_interval_bytes = self.config.index_interval_bytes;
        let appended = self
            .active_mut()
            .append(records, batches, index_interval_bytes, now_ms);
        self.offline_on_error(appended)?;
        self.unflushed_messages += offsets as u64;
        if self
            .config
            .flush_messages
            .is_some_and(|n| self.unflushed_messages >= n)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Whether the log refuses writes, and why.
    pub fn offline_reason(&self) -> Option<&str> {
        self.offline.as_deref()
    }

    fn check_online(&self) -> Result<(), LogError> {
        match &self.offline {
            Some(reason) => Err(LogError::Offline {
                path: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Takes the log offline when `result` is an error that may have left the files other
    /// than the log believes them to be: one the segment could not undo, a failed fsync
    /// (after which the kernel may have dropped the unflushed pages) or a failed truncation.
    fn offline_on_error<T>(&mut self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(err) = &result {
            let fatal = match err {
                LogError::Offline { .. } => true,
                LogError::Io { op, .. } => matches!(*op, "fsync" | "truncate"),
                _ => false,
            };
            if fatal && self.offline.is_none() {
                error!(dir = %self.dir.display(), error = %err,
                    "taking the log offline: it refuses writes until the broker restarts and recovers it");
                self.offline = Some(err.to_string());
            }
        }
        result
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes` unless the first batch
    /// alone is larger. Empty at the log end.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<Vec<u8>, LogError> {
        let end = self.log_end_offset();
        if offset < self.log_start_offset || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        for (_, segment) in self
            .segments
            .range(..=offset)
            .next_back()
            .into_iter()
            .chain(self.segments.range(offset + 1..))
        {
            if let Some(bytes) = segment.read(offset, max_bytes)? {
                return Ok(bytes);
            }
        }
        Ok(Vec::new())
    }

    /// Where [`Log::read`]'s batches lie, without reading them, leaving out batches from the
    /// first one that reaches `upper` (exclusive; a consumer's high watermark). `None` at the
    /// log end.
    pub fn read_region(
        &self,
        offset: i64,
        max_bytes: usize,
        upper: i64,
    ) -> Result<Option<FileRegion>, LogError> {
        let end = self.log_end_offset();
        if offset < self.log_start_offset || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        for (_, segment) in self
            .segments
            .range(..=offset)
            .next_back()
            .into_iter()
            .chain(self.segments.range(offset + 1..))
        {
            if let Some(region) = segment.region(offset, max_bytes, upper)? {
                return Ok(Some(region));
            }
        }
        Ok(None)
    }

    /// ListOffsets by time (Kafka's `Log.fetchOffsetByTimestamp`): the first record at or
    /// after the log start whose timestamp is >= `timestamp`, as (timestamp, offset, leader
    /// epoch of its batch). The time index finds the batch; the batch is decoded (any codec)
    /// to find the record.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64, i32)>, LogError> {
        for segment in self.segments.values() {
            if segment.max_timestamp < timestamp || segment.next_offset <= self.log_start_offset {
                continue;
            }
            if let Some(found) =
                segment.find_offset_by_timestamp(timestamp, self.log_start_offset)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The first record with the log's largest timestamp, as (timestamp, offset, leader epoch
    /// of its batch): ListOffsets MAX_TIMESTAMP (-3, ListOffsets v7+, Kafka 3.0's KIP-734).
    pub fn max_timestamp_record(&self) -> Result<Option<(i64, i64, i32)>, LogError> {
        let Some(segment) = self
            .segments
            .values()
            .filter(|s| s.max_timestamp >= 0 && s.next_offset > self.log_start_offset)
            .max_by_key(|s| (s.max_timestamp, std::cmp::Reverse(s.base_offset)))
        else {
            return Ok(None);
        };
        segment.max_timestamp_record(self.log_start_offset)
    }

    /// The largest timestamp in the log.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.segments
            .values()
            .map(|s| s.max_timestamp)
            .filter(|&t| t >= 0)
            .max()
    }

    /// fsyncs every segment with unflushed data and moves the recovery point to the log end.
    /// Timed into [`LOG_FLUSH_TIME`].
    pub fn flush(&mut self) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        let flushed: Result<(), LogError> = self
            .segments
            .range(self.recovery_point_segment()..)
            .try_for_each(|(_, segment)| segment.flush());
        LOG_FLUSH_TIME.observe(started.elapsed());
        self.offline_on_error(flushed)?;
        self.recovery_point = self.log_end_offset();
        self.unflushed_messages = 0;
        Ok(())
    }

    /// Removes whole segments older than `retention.ms` or beyond `retention.bytes`, and moves
    /// the log start offset, when `cleanup.policy` includes `delete` (`delete` alone or with
    /// `compact`: then the cleaner compacts and retention deletes). Returns how many were
    /// removed.
    ///
    /// Kafka's `deleteOldSegments`: the oldest segments go while the predicate holds and each
    /// lies wholly below `high_watermark` (the next segment's base, or the log end for the
    /// active segment). The active segment goes too once it is past retention and not empty: a
    /// new empty segment is rolled at the log end first, as Kafka does, so the log keeps its
    /// offsets and starts (and ends) there.
    pub fn apply_retention(&mut self, now_ms: i64, high_watermark: i64) -> Result<usize, LogError> {
        if !self.config.delete || self.offline.is_some() {
            return Ok(0);
        }
        let end = self.log_end_offset();
        let mut total = self.size_in_bytes() as i64;
        let mut doomed = Vec::new();
        let mut segments = self.segments.iter().peekable();
        while let Some((&base, segment)) = segments.next() {
            let upper = segments.peek().map_or(end, |(&next, _)| next);
            let last_and_empty = upper == end && segment.size() == 0;
            if high_watermark < upper || last_and_empty {
                break;
            }
            let expired = self.config.retention_ms >= 0
                && segment.max_timestamp >= 0
                && now_ms - segment.max_timestamp > self.config.retention_ms;
            let oversize = self.config.retention_bytes >= 0
                && total - segment.size() as i64 >= self.config.retention_bytes;
            if !expired && !oversize {
                break;
            }
            total -= segment.size() as i64;
            doomed.push(base);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == self.segments.len() {
            // A log always has a segment: roll an empty one at the end before deleting.
            info!(dir = %self.dir.display(), base_offset = end, "rolling segment to delete the active one past retention");
            let rolled = Segment::open(&self.dir, end);
            let rolled = self.offline_on_error(rolled)?;
            self.segments.insert(end, Box::new(rolled));
        }
        for base in &doomed {
            let segment = self.segments.remove(base).expect("present");
            segment.delete_files(&self.dir)?;
        }
        let first_base = *self.segments.keys().next().expect("a segment");
        self.log_start_offset = self.log_start_offset.max(first_base);
        // Nothing below the log start is left to recover.
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        Ok(doomed.len())
    }

    /// DeleteRecords: moves the log start offset to `offset` (at most the log end) and removes
    /// segments wholly below it.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        let end = self.log_end_offset();
        if offset > end || offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        self.log_start_offset = self.log_start_offset.max(offset);
        while self.segments.len() > 1 {
            let (&base, oldest) = self.segments.iter().next().expect("len > 1");
            if oldest.next_offset > self.log_start_offset {
                break;
            }
            let segment = self.segments.remove(&base).expect("present");
            segment.delete_files(&self.dir)?;
        }
        Ok(self.log_start_offset)
    }

    /// Adds an aborted transaction to the `.txnindex` of the segment holding its marker.
    pub fn append_aborted_txn(&mut self, txn: &AbortedTxn) -> Result<(), LogError> {
        self.check_online()?;
        let base = self
            .segments
            .range(..=txn.last_offset)
            .next_back()
            .map_or(self.active().base_offset, |(&base, _)| base);
        txn_index::append(&txn_index::path(&self.dir, base), txn)
    }

    /// Makes every segment's `.txnindex` hold exactly the aborted transactions whose marker
    /// it holds (after recovery found the log's end: an index written before a crash may
    /// miss the last entries or name markers the recovery cut).
    pub fn sync_txn_indexes(&self, aborted: &[AbortedTxn]) -> Result<(), LogError> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, &base) in bases.iter().enumerate() {
            let upper = bases.get(i + 1).copied().unwrap_or(i64::MAX);
            let entries: Vec<AbortedTxn> = aborted
                .iter()
                .filter(|t| t.last_offset >= base && t.last_offset < upper)
                .copied()
                .collect();
            txn_index::write_exactly(&txn_index::path(&self.dir, base), &entries)?;
        }
        Ok(())
    }

    /// The aborted transactions of every segment's `.txnindex`, in offset order.
    pub fn read_txn_indexes(&self) -> Result<Vec<AbortedTxn>, LogError> {
        let mut all = Vec::new();
        for &base in self.segments.keys() {
            all.extend(txn_index::read_entries(&txn_index::path(&self.dir, base))?);
        }
        Ok(all)
    }

    /// Removes everything at or past `offset` (a follower truncating to its high watermark
    /// before fetching from a new leader). A batch that holds `offset` goes whole, so the new
    /// log end may be below `offset`. Returns the new log end offset.
    pub fn truncate_to(&mut self, offset: i64) -> Result<i64, LogError> {
        self.check_online()?;
        let truncated = self.truncate_unguarded(offset);
        self.offline_on_error(truncated)
    }

    fn truncate_unguarded(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset >= self.log_end_offset() {
            return Ok(self.log_end_offset());
        }
        let offset = offset.max(0);
        let doomed: Vec<i64> = self
            .segments
            .range(offset..)
            .map(|(&base, _)| base)
            .filter(|&base| base > *self.segments.keys().next().expect("a segment"))
            .collect();
        for base in doomed {
            let segment = self.segments.remove(&base).expect("present");
            segment.delete_files(&self.dir)?;
        }
        let index_interval_bytes = self.config.index_interval_bytes;
        self.active_mut()
            .truncate_to(offset, index_interval_bytes)?;
        // Aborted transactions whose marker went go from the index too.
        let txn_path = txn_index::path(&self.dir, self.active().base_offset);
        let kept: Vec<AbortedTxn> = txn_index::read_entries(&txn_path)?
            .into_iter()
            .filter(|t| t.last_offset < offset)
            .collect();
        txn_index::write_exactly(&txn_path, &kept)?;
        let end = self.log_end_offset();
        if end < self.log_start_offset {
            // Everything readable went: the log restarts empty at its old start.
            let (&base, _) = self.segments.iter().next().expect("a segment");
            let segment = self.segments.remove(&base).expect("present");
            segment.delete_files(&self.dir)?;
            let start = self.log_start_offset;
            self.segments
                .insert(start, Box::new(Segment::open(&self.dir, start)?));
        }
        self.recovery_point = self.recovery_point.min(self.log_end_offset());
        info!(dir = %self.dir.display(), offset, log_end_offset = self.log_end_offset(), "truncated log");
        Ok(self.log_end_offset())
    }

    /// Removes every segment and restarts the log, empty, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): a follower whose log ends below the leader's log start
    /// offset cannot catch up by appending, so it starts over where the leader's log starts.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        let offset = offset.max(0);
        for (_, segment) in std::mem::take(&mut self.segments) {
            segment.delete_files(&self.dir)?;
        }
        self.segments
            .insert(offset, Box::new(Segment::open(&self.dir, offset)?));
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.unflushed_messages = 0;
        info!(dir = %self.dir.display(), offset, "truncated the whole log and restarted it");
        Ok(())
    }

    fn maybe_roll(
        &mut self,
        incoming_bytes: usize,
        incoming_records: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let active = self.active();
        let full =
            active.size() > 0 && active.size() + incoming_bytes as u64 > self.config.segment_bytes;
        let old = active
            .first_append_ms
            .is_some_and(|t| now_ms - t >= self.config.segment_ms);
        let overflow =
            active.next_offset + incoming_records - active.base_offset > i64::from(u32::MAX);
        if full || old || overflow {
            let base = active.next_offset;
            info!(dir = %self.dir.display(), base_offset = base, full, old, "rolling segment");
            let flushed = active.flush();
            self.offline_on_error(flushed)?;
            self.segments
                .insert(base, Box::new(Segment::open(&self.dir, base)?));
        }
        Ok(())
    }

    fn recovery_point_segment(&self) -> i64 {
        self.segments
            .range(..=self.recovery_point)
            .next_back()
            .map(|(&b, _)| b)
            .unwrap_or(0)
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }
    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;
