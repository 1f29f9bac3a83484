//! The log cleaner: compaction of `cleanup.policy=compact` logs with Kafka's semantics
//! (`LogCleaner`, `LogCleanerManager`), and the crash-safe swap of cleaned segments.
//!
//! # What a cleaning does
//!
//! A log's *dirty* part runs from its cleaner checkpoint (`cleaner-offset-checkpoint`; the
//! log start when there is none) to the first *uncleanable* offset: the smallest of the
//! active segment's base (the active segment is never cleaned), the high watermark, and the
//! base of the first dirty segment holding a record younger than `min.compaction.lag.ms`.
//! A log is cleaned when its dirty bytes are at least `min.cleanable.dirty.ratio` of its
//! cleanable bytes, or when its oldest dirty record is older than `max.compaction.lag.ms`.
//!
//! 1. The dirty part is read into the offset map: key (a 128-bit hash) → latest offset. The
//!    map holds at most `log.cleaner.dedupe.buffer.size / log.cleaner.threads / 24 * 0.9`
//!    keys (Kafka's 24 bytes per entry at load factor 0.9); when it is full, this cleaning
//!    stops at the record that did not fit and the next one goes on from there.
//! 2. Every non-active segment below that end is rewritten, in groups of at most
//!    `segment.bytes`: a record is kept when no later offset of its key is in the map; a
//!    record without a key is dropped; a tombstone (null value) is kept only while its
//!    segment was modified after the *delete horizon* (the last cleaned segment's
//!    modification time minus `delete.retention.ms`), so tombstones survive one cleaning
//!    and at least `delete.retention.ms` after it. Offsets never change: a batch that keeps
//!    all its records is copied byte for byte, one that keeps some is re-encoded with its
//!    own codec, base offset, base timestamp, producer id/epoch/sequence, flags and last
//!    offset (so the producer's sequence numbers stay consistent); one that keeps none is
//!    dropped, unless it is the last batch of its producer, which stays as an empty batch
//!    (count 0) so the producer's state survives, as Kafka does. Transaction markers
//!    (control batches) are always kept whole; nothing at or past the partition's last
//!    stable offset is cleaned. (Not yet Kafka's: aborted transactions' records are not
//!    removed, and markers are kept forever rather than until the delete horizon.)
//! 3. Each group is swapped in (see below), and the checkpoint moves to the end.
//!
//! Reads go on against the old segments while a group is rewritten (segments below the
//! active one never change); the swap itself happens under the log's lock. I/O is throttled
//! to `log.cleaner.io.max.bytes.per.second` (bytes read plus written).
//!
//! # The swap protocol (crash safety)
//!
//! ```text
//! <partition>/.cleaned/<base>.log|.index|.timeindex   the rewritten group, fsync'd
//! rename .cleaned/<base>.log -> <partition>/<base>.<end>.swap; fsync dir   <- commit point
//! remove the group's old segments (every base in [base, end)); move the new indexes in
//! rename <base>.<end>.swap -> <base>.log; fsync dir; remove .cleaned/
//! ```
//!
//! Opening a log first completes what a crash interrupted: a `.swap` file is the whole new
//! group, so the old segments in its range are removed, its indexes are rebuilt and it
//! becomes `<base>.log`; a leftover `.cleaned/` (no swap yet) is deleted, keeping the old
//! segments. A kill at any point therefore leaves either every old segment of a group or
//! the new one, never a mix. The swap name carries the group's end offset, so a group whose
//! last batches were all removed still replaces exactly its old segments.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use records::builder::{BatchBuilder, BatchSpec};
use records::{BatchHeader, BatchRef, HEADER_SIZE};
use tracing::{info, warn};

use super::segment::Segment;
use super::{Log, LogConfig, LogError};
use crate::file;

/// Kafka's name for the per-log-dir file of cleaner checkpoints (first dirty offsets).
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// The scratch directory inside a partition directory where a group is rewritten.
pub const CLEANED_DIR: &str = ".cleaned";
const SWAP_SUFFIX: &str = ".swap";
/// Bytes Kafka's offset map spends per key (16-byte hash + 8-byte offset).
const BYTES_PER_ENTRY: usize = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor`.
const LOAD_FACTOR: f64 = 0.9;

/// The broker-wide cleaner settings (Kafka's `log.cleaner.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.io.max.bytes.per.second`.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.dedupe.buffer.size` (shared by all threads).
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.backoff.ms`: the pause when no log needs cleaning.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            io_max_bytes_per_second: f64::MAX,
            dedupe_buffer_size: 128 * 1024 * 1024,
            backoff_ms: 15_000,
        }
    }
}

impl CleanerConfig {
    /// Keys one thread's offset map may hold.
    pub fn map_capacity(&self) -> usize {
        let per_thread = self.dedupe_buffer_size / self.threads.max(1);
        ((per_thread / BYTES_PER_ENTRY) as f64 * LOAD_FACTOR).max(1.0) as usize
    }
}

/// One segment as the cleaner sees it (a snapshot taken under the log's lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    pub path: PathBuf,
    /// The `.log` file's modification time (ms since the epoch).
    pub last_modified_ms: i64,
    pub max_timestamp: i64,
}

/// What one cleaning of a log will cover, and why it is due.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanPlan {
    pub dir: PathBuf,
    /// Every segment, the active one last (its size as of the snapshot).
    pub segments: Vec<SegmentFile>,
    pub log_start_offset: i64,
    pub first_dirty_offset: i64,
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments below the first dirty offset, and from there to the first
    /// uncleanable one.
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// The dirty part is older than `max.compaction.lag.ms`: clean whatever the ratio.
    pub forced: bool,
    pub config: LogConfig,
}

impl CleanPlan {
    /// Dirty bytes over cleanable bytes.
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Whether the log should be cleaned now (Kafka's selection of a log to clean).
    pub fn is_due(&self) -> bool {
        self.dirty_bytes > 0
            && (self.forced || self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio)
    }
}

/// A rewritten group, ready to be swapped in by [`Log::install_cleaned`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanedGroup {
    /// Base offset of the new segment (the first old segment's).
    pub base_offset: i64,
    /// The group covers offsets `[base_offset, end_offset)`: every old segment with a base in
    /// that range is replaced.
    pub end_offset: i64,
    pub old_bases: Vec<i64>,
    pub old_bytes: u64,
    pub new_bytes: u64,
}

/// What one cleaning did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanStats {
    /// The new first dirty offset (the cleaner checkpoint).
    pub end_offset: i64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub groups: usize,
    pub elapsed: Duration,
}

/// Throttles the cleaner's I/O to a byte rate (Kafka's `Throttler`): bytes are counted over
/// periods of [`THROTTLE_PERIOD`]; a period that went faster than the rate sleeps the
/// difference. An idle cleaner builds up no credit: each period starts afresh.
#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: f64,
    period_start: Instant,
    bytes: f64,
}

/// Kafka's `Throttler` check interval.
const THROTTLE_PERIOD: Duration = Duration::from_millis(300);

impl Throttle {
    pub fn new(bytes_per_second: f64) -> Throttle {
        Throttle {
            bytes_per_second,
            period_start: Instant::now(),
            bytes: 0.0,
        }
    }

    fn unlimited(&self) -> bool {
        !self.bytes_per_second.is_finite() || self.bytes_per_second >= f64::MAX / 2.0
    }

    /// Records `n` bytes of I/O, sleeping as needed to stay under the rate.
    pub fn consume(&mut self, n: u64) {
        if self.unlimited() {
            return;
        }
        self.bytes += n as f64;
        let elapsed = self.period_start.elapsed();
        if elapsed < THROTTLE_PERIOD {
            return;
        }
        let due = Duration::from_secs_f64(self.bytes / self.bytes_per_second);
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        self.period_start = Instant::now();
        self.bytes = 0.0;
    }

    /// Starts a new period (at the start of a cleaning, after idling).
    pub fn reset(&mut self) {
        self.period_start = Instant::now();
        self.bytes = 0.0;
    }
}

fn modified_ms(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

impl Log {
    /// What a cleaning of this log would cover (Kafka's `LogCleanerManager.cleanableOffsets`),
    /// or `None` when the log is not compacted. `checkpoint` is its first dirty offset from
    /// `cleaner-offset-checkpoint`; `stable_offset` bounds it (the high watermark).
    pub fn clean_plan(
        &self,
        checkpoint: Option<i64>,
        stable_offset: i64,
        now_ms: i64,
    ) -> Option<CleanPlan> {
        if !self.config.compact {
            return None;
        }
        let segments: Vec<SegmentFile> = self
            .segments
            .values()
            .map(|s| SegmentFile {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
                size: s.size(),
                path: s.log_path().to_owned(),
                last_modified_ms: modified_ms(s.log_path()),
                max_timestamp: s.max_timestamp,
            })
            .collect();
        let active_base = segments.last().map_or(0, |s| s.base_offset);
        let start = self.log_start_offset;
        let first_dirty = checkpoint
            .filter(|&c| c >= start && c <= self.log_end_offset())
            .unwrap_or(start);
        let mut uncleanable = active_base.min(stable_offset.max(first_dirty));
        let lag = self.config.min_compaction_lag_ms;
        if lag > 0 {
            if let Some(young) = segments.iter().find(|s| {
                s.next_offset > first_dirty
                    && s.base_offset < uncleanable
                    && s.max_timestamp > now_ms.saturating_sub(lag)
            }) {
                uncleanable = uncleanable.min(young.base_offset.max(first_dirty));
            }
        }
        let uncleanable = uncleanable.max(first_dirty);
        let (mut clean_bytes, mut dirty_bytes) = (0, 0);
        for s in &segments[..segments.len().saturating_sub(1)] {
            if s.next_offset <= first_dirty {
                clean_bytes += s.size;
            } else if s.base_offset < uncleanable {
                dirty_bytes += s.size;
            }
        }
        let max_lag = self.config.max_compaction_lag_ms;
        let forced = max_lag < i64::MAX
            && dirty_bytes > 0
            && segments
                .iter()
                .find(|s| s.next_offset > first_dirty && s.base_offset < uncleanable)
                .is_some_and(|s| s.last_modified_ms.min(s.max_timestamp.max(0)) < now_ms - max_lag);
        Some(CleanPlan {
            dir: self.dir.clone(),
            segments,
            log_start_offset: start,
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: uncleanable,
            clean_bytes,
            dirty_bytes,
            forced,
            config: self.config.clone(),
        })
    }

    /// Swaps a rewritten group in (the commit and apply steps of the swap protocol, module
    /// docs). Returns false, and discards the rewrite, when the log changed meanwhile
    /// (retention, DeleteRecords or truncation removed one of the group's segments).
    pub fn install_cleaned(&mut self, group: &CleanedGroup) -> Result<bool, LogError> {
        self.check_online()?;
        let scratch = self.dir.join(CLEANED_DIR);
        let active = *self.segments.keys().next_back().expect("an active segment");
        let unchanged = group
            .old_bases
            .iter()
            .all(|b| self.segments.contains_key(b))
            && self
                .segments
                .range(group.base_offset..group.end_offset)
                .count()
                == group.old_bases.len()
            && group.end_offset <= active;
        if !unchanged {
            info!(dir = %self.dir.display(), base = group.base_offset, "the log changed during cleaning; discarding the cleaned group");
            remove_dir(&scratch)?;
            return Ok(false);
        }
        let [new_log, new_index, new_time] = Segment::paths(&scratch, group.base_offset);
        let swap = self
            .dir
            .join(swap_name(group.base_offset, group.end_offset));
        rename(&new_log, &swap)?;
        fsync_dir(&self.dir)?;
        // The markers stay (control batches are kept whole), so their aborted transactions
        // move to the merged segment's `.txnindex`. (A crash before it is written makes the
        // next open an unclean one, which rewrites every `.txnindex` from the log.)
        let mut aborted = Vec::new();
        for base in &group.old_bases {
            aborted.extend(super::txn_index::read_entries(&super::txn_index::path(
                &self.dir, *base,
            ))?);
        }
        for base in &group.old_bases {
            if let Some(old) = self.segments.remove(base) {
                old.delete_files(&self.dir)?;
            }
        }
        super::txn_index::write_exactly(
            &super::txn_index::path(&self.dir, group.base_offset),
            &aborted,
        )?;
        let [log_path, index_path, time_path] = Segment::paths(&self.dir, group.base_offset);
        rename(&new_index, &index_path)?;
        rename(&new_time, &time_path)?;
        rename(&swap, &log_path)?;
        fsync_dir(&self.dir)?;
        remove_dir(&scratch)?;
        let segment = Segment::open(&self.dir, group.base_offset)?;
        self.segments.insert(group.base_offset, Box::new(segment));
        Ok(true)
    }
}

fn swap_name(base: i64, end: i64) -> String {
    format!(
        "{}.{}{SWAP_SUFFIX}",
        super::segment::file_stem(base),
        super::segment::file_stem(end)
    )
}

fn parse_swap(name: &str) -> Option<(i64, i64)> {
    let stem = name.strip_suffix(SWAP_SUFFIX)?;
    let (base, end) = stem.split_once('.')?;
    Some((base.parse().ok()?, end.parse().ok()?))
}

fn rename(from: &Path, to: &Path) -> Result<(), LogError> {
    std::fs::rename(from, to).map_err(|source| LogError::Io {
        op: "rename",
        path: from.to_owned(),
        source,
    })
}

fn fsync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(LogError::io("fsync", dir))
}

fn remove_dir(dir: &Path) -> Result<(), LogError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(LogError::Io {
            op: "remove",
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Completes or discards what a crash left of a cleaning in `dir`, before the log's segments
/// are read: every `.swap` replaces the old segments of its range and becomes a `.log`;
/// `.cleaned/` is removed. Returns the base offsets of the segments swapped in (their
/// indexes must be rebuilt).
pub(crate) fn complete_interrupted_swaps(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut swaps = Vec::new();
    let mut bases = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    for entry in entries {
        let entry = entry.map_err(LogError::io("list", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(range) = parse_swap(&name) {
            swaps.push(range);
        } else if let Some(base) = name
            .strip_suffix(".log")
            .and_then(|s| s.parse::<i64>().ok())
        {
            bases.push(base);
        }
    }
    swaps.sort_unstable();
    for &(base, end) in &swaps {
        warn!(dir = %dir.display(), base, end, "completing a cleaned segment swap interrupted by a crash");
        for &old in bases.iter().filter(|&&b| b >= base && b < end) {
            Segment::delete_files_of(dir, old)?;
        }
        // The indexes are rebuilt from the swapped-in log.
        Segment::delete_files_of(dir, base)?;
        rename(
            &dir.join(swap_name(base, end)),
            &Segment::paths(dir, base)[0],
        )?;
    }
    if !swaps.is_empty() {
        fsync_dir(dir)?;
    }
    remove_dir(&dir.join(CLEANED_DIR))?;
    Ok(swaps.into_iter().map(|(base, _)| base).collect())
}

/// Reads the batches of one segment file in order: (position, header, whole batch bytes).
struct BatchReader {
    file: File,
    path: PathBuf,
    position: u64,
    size: u64,
}

impl BatchReader {
    fn open(segment: &SegmentFile) -> Result<BatchReader, LogError> {
        let file = File::open(&segment.path).map_err(LogError::io("open", &segment.path))?;
        Ok(BatchReader {
            file,
            path: segment.path.clone(),
            position: 0,
            size: segment.size,
        })
    }

    fn header(&mut self) -> Result<Option<BatchHeader>, LogError> {
        if self.position + HEADER_SIZE as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; HEADER_SIZE];
        file::read_exact_at(&self.file, &self.path, &mut buf, self.position)
            .map_err(LogError::io("read", &self.path))?;
        let header = BatchHeader::read(&buf).expect("HEADER_SIZE bytes");
        if header.batch_length < (HEADER_SIZE - records::LOG_OVERHEAD) as i32
            || self.position + header.size_in_bytes() as u64 > self.size
        {
            return Err(LogError::CorruptSegment {
                path: self.path.clone(),
                position: self.position,
            });
        }
        Ok(Some(header))
    }

    fn skip(&mut self, header: &BatchHeader) {
        self.position += header.size_in_bytes() as u64;
    }

    fn batch(&mut self, header: &BatchHeader) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0u8; header.size_in_bytes()];
        file::read_exact_at(&self.file, &self.path, &mut buf, self.position)
            .map_err(LogError::io("read", &self.path))?;
        self.position += buf.len() as u64;
        Ok(buf)
    }
}

/// The offset map: key hash → latest offset, bounded in keys.
struct OffsetMap {
    map: HashMap<u128, i64>,
    capacity: usize,
}

impl OffsetMap {
    fn key(key: &[u8]) -> u128 {
        twox_hash::XxHash3_128::oneshot(key)
    }
}

fn corrupt(segment: &SegmentFile, position: u64) -> LogError {
    LogError::CorruptSegment {
        path: segment.path.clone(),
        position,
    }
}

/// Runs one cleaning of the log `plan` describes: builds the offset map, rewrites the groups
/// one by one in `<dir>/.cleaned/` and hands each to `install` (which takes the log's lock
/// and calls [`Log::install_cleaned`]). Stops early (returning what was done) if `install`
/// reports the log changed.
pub fn clean(
    plan: &CleanPlan,
    map_capacity: usize,
    throttle: &mut Throttle,
    now_ms: i64,
    mut install: impl FnMut(&CleanedGroup) -> Result<bool, LogError>,
) -> Result<CleanStats, LogError> {
    let started = Instant::now();
    throttle.reset();
    let mut stats = CleanStats::default();
    let cleanable: Vec<&SegmentFile> = plan.segments[..plan.segments.len().saturating_sub(1)]
        .iter()
        .filter(|s| s.next_offset > plan.log_start_offset)
        .collect();
    // 1. The last batch of every producer, anywhere in the log (those stay even if empty).
    let mut last_of_producer: HashMap<i64, i64> = HashMap::new();
    for segment in &plan.segments {
        let mut reader = BatchReader::open(segment)?;
        while let Some(h) = reader.header()? {
            if h.has_producer_id() {
                let e = last_of_producer.entry(h.producer_id).or_insert(i64::MIN);
                *e = (*e).max(h.last_offset());
            }
            reader.skip(&h);
        }
    }
    // 2. The offset map over the dirty part.
    let mut map = OffsetMap {
        map: HashMap::new(),
        capacity: map_capacity.max(1),
    };
    let mut end = plan.first_uncleanable_offset;
    'segments: for segment in cleanable.iter().filter(|s| {
        s.next_offset > plan.first_dirty_offset && s.base_offset < plan.first_uncleanable_offset
    }) {
        let mut reader = BatchReader::open(segment)?;
        while let Some(h) = reader.header()? {
            if h.last_offset() < plan.first_dirty_offset || h.records_count == 0 || h.is_control() {
                reader.skip(&h);
                continue;
            }
            if h.base_offset >= plan.first_uncleanable_offset {
                break 'segments;
            }
            let position = reader.position;
            let batch = reader.batch(&h)?;
            throttle.consume(batch.len() as u64);
            stats.bytes_read += batch.len() as u64;
            let section =
                records::records_section(&batch).map_err(|_| corrupt(segment, position))?;
            let mut full_at = None;
            records::record::for_each_record(&section, h.records_count, |_, r| {
                let offset = h.base_offset + i64::from(r.offset_delta);
                if offset < plan.first_dirty_offset || offset >= plan.first_uncleanable_offset {
                    return Ok(());
                }
                if let Some(key) = r.key {
                    let k = OffsetMap::key(key);
                    if !map.map.contains_key(&k) && map.map.len() >= map.capacity {
                        full_at.get_or_insert(offset);
                    } else if full_at.is_none() {
                        map.map.insert(k, offset);
                    }
                }
                Ok(())
            })
            .map_err(|_| corrupt(segment, position))?;
            if let Some(at) = full_at {
                info!(dir = %plan.dir.display(), at, keys = map.map.len(), "the cleaner's offset map is full; cleaning up to there");
                end = at;
                break 'segments;
            }
        }
    }
    if end <= plan.first_dirty_offset {
        stats.end_offset = plan.first_dirty_offset;
        return Ok(stats);
    }
    // 3. The delete horizon: tombstones in segments modified before it go.
    let delete_horizon_ms = cleanable
        .iter()
        .rfind(|s| s.base_offset < plan.first_dirty_offset)
        .map_or(0, |s| s.last_modified_ms - plan.config.delete_retention_ms);
    // 4. Groups of segments below `end`, each at most segment.bytes and 2^32 offsets wide.
    let to_clean: Vec<&SegmentFile> = cleanable
        .iter()
        .copied()
        .filter(|s| s.base_offset < end)
        .collect();
    let mut groups: Vec<Vec<&SegmentFile>> = Vec::new();
    for s in to_clean {
        match groups.last_mut() {
            Some(g)
                if g.iter().map(|x| x.size).sum::<u64>() + s.size <= plan.config.segment_bytes
                    && s.next_offset - g[0].base_offset <= i64::from(u32::MAX) =>
            {
                g.push(s)
            }
            _ => groups.push(vec![s]),
        }
    }
    let next_base = |last: &SegmentFile| {
        plan.segments
            .iter()
            .find(|s| s.base_offset > last.base_offset)
            .map_or(last.next_offset, |s| s.base_offset)
    };
    for group in groups {
        let base = group[0].base_offset;
        let scratch = plan.dir.join(CLEANED_DIR);
        remove_dir(&scratch)?;
        std::fs::create_dir_all(&scratch).map_err(LogError::io("create", &scratch))?;
        let mut out = Segment::open(&scratch, base)?;
        let mut old_bytes = 0;
        for segment in &group {
            old_bytes += segment.size;
            let keep_tombstones = segment.last_modified_ms > delete_horizon_ms;
            let mut reader = BatchReader::open(segment)?;
            while let Some(h) = reader.header()? {
                let position = reader.position;
                let batch = reader.batch(&h)?;
                throttle.consume(batch.len() as u64);
                stats.bytes_read += batch.len() as u64;
                let kept = filter_batch(&h, &batch, &map, keep_tombstones, &last_of_producer)
                    .map_err(|_| corrupt(segment, position))?;
                stats.records_read += h.records_count.max(0) as u64;
                let bytes = match kept {
                    Kept::All => {
                        stats.records_kept += h.records_count.max(0) as u64;
                        batch
                    }
                    Kept::Some(bytes, n) => {
                        stats.records_kept += n;
                        bytes
                    }
                    Kept::None => continue,
                };
                let header = BatchHeader::read(&bytes).expect("a whole batch");
                out.append(
                    &bytes,
                    &[BatchRef {
                        header,
                        position: 0,
                    }],
                    plan.config.index_interval_bytes,
                    now_ms,
                )?;
                throttle.consume(bytes.len() as u64);
                stats.bytes_written += bytes.len() as u64;
            }
        }
        // An empty index is not on disk yet; the swap below moves all three files.
        out.create_missing_files()?;
        out.flush()?;
        let new_bytes = out.size();
        drop(out);
        // The new segment keeps the group's modification time (the delete horizon of the
        // next cleaning is measured from it, as in Kafka).
        let mtime = group.iter().map(|s| s.last_modified_ms).max().unwrap_or(0);
        let new_log = Segment::paths(&scratch, base)[0].clone();
        if let Ok(f) = std::fs::OpenOptions::new().append(true).open(&new_log) {
            let when = std::time::UNIX_EPOCH + Duration::from_millis(mtime.max(0) as u64);
            let _ = f.set_modified(when);
        }
        let cleaned = CleanedGroup {
            base_offset: base,
            end_offset: next_base(group.last().expect("a group is not empty")),
            old_bases: group.iter().map(|s| s.base_offset).collect(),
            old_bytes,
            new_bytes,
        };
        if !install(&cleaned)? {
            stats.end_offset = plan.first_dirty_offset;
            stats.elapsed = started.elapsed();
            return Ok(stats);
        }
        stats.groups += 1;
    }
    stats.end_offset = end;
    stats.elapsed = started.elapsed();
    Ok(stats)
}

enum Kept {
    All,
    Some(Vec<u8>, u64),
    None,
}

/// Kafka's `shouldRetainRecord` over one batch, and the batch that carries what is kept.
fn filter_batch(
    h: &BatchHeader,
    batch: &[u8],
    map: &OffsetMap,
    keep_tombstones: bool,
    last_of_producer: &HashMap<i64, i64>,
) -> Result<Kept, records::DecodeError> {
    if h.is_control() || h.records_count == 0 {
        return Ok(Kept::All);
    }
    let section = records::records_section(batch)?;
    let recs = records::record::records(&section, h.records_count)?;
    let keep: Vec<bool> = recs
        .iter()
        .map(|r| {
            let offset = h.base_offset + i64::from(r.offset_delta);
            let Some(key) = r.key else {
                return false;
            };
            let latest = map
                .map
                .get(&OffsetMap::key(key))
                .is_none_or(|&latest| offset >= latest);
            latest && (r.value.is_some() || keep_tombstones)
        })
        .collect();
    let n = keep.iter().filter(|k| **k).count();
    if n == recs.len() {
        return Ok(Kept::All);
    }
    let last_of_its_producer =
        h.has_producer_id() && last_of_producer.get(&h.producer_id) == Some(&h.last_offset());
    if n == 0 && !last_of_its_producer {
        return Ok(Kept::None);
    }
    let mut builder = BatchBuilder::new(BatchSpec::like(h));
    builder.set_first_timestamp(h.base_timestamp);
    for (r, _) in recs.iter().zip(&keep).filter(|(_, k)| **k) {
        let timestamp = match h.timestamp_type() {
            records::TimestampType::LogAppendTime => h.max_timestamp,
            records::TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
        };
        builder.push_encoded(
            r.encoded,
            h.base_offset + i64::from(r.offset_delta),
            timestamp,
        );
    }
    Ok(Kept::Some(builder.build(), n as u64))
}

#[cfg(test)]
#[path = "cleaner_tests.rs"]
mod tests;
