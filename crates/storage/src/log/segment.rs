//! One segment of a partition log: `<base offset, 20 digits>.log` holding record batches exactly
//! as producers sent them (offsets assigned), plus its `.index` and `.timeindex`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use records::{BatchHeader, BatchRef, HEADER_SIZE};
use tracing::warn;

use super::index::{OffsetIndex, TimeIndex};
use super::recovery::{self, OffsetRange};
use super::{FileRegion, LogError};
use crate::file;
use crate::open_files::CachedFile;

/// File name stem of a segment: its base offset, zero-padded to 20 digits as Kafka does.
pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    log_path: PathBuf,
    /// The same path, shared with the [`FileRegion`]s handed out.
    log_path_shared: Arc<Path>,
    /// Opened on use within the process's bound on open log files; a [`FileRegion`] handed
    /// out holds the open file (`Arc<File>`) until sent, even if the set evicts it meanwhile.
    file: CachedFile,
    /// Bytes in the `.log` file.
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_index_entry: usize,
    /// The offset after this segment's last batch (= base offset when empty).
    pub(crate) next_offset: i64,
    /// Largest batch max-timestamp in the segment (-1 when empty).
    pub(crate) max_timestamp: i64,
    /// The base offset of the batch that carries `max_timestamp` (the base offset when empty):
    /// what the next time-index entry points at (Kafka's `offsetOfMaxTimestampSoFar`).
    offset_of_max_timestamp: i64,
    /// When the segment got its first batch (ms), for `segment.ms` rolls.
    pub(crate) first_append_ms: Option<i64>,
}

/// What a scan of a segment found: where the valid data ends.
#[derive(Debug)]
pub(crate) struct RecoveryResult {
    pub(crate) valid_bytes: u64,
    pub(crate) truncated_bytes: u64,
    /// Why the data ended before the end of the file.
    pub(crate) reason: Option<String>,
}

/// A segment's state before an append, to put back when the append fails.
#[derive(Debug, Clone, Copy)]
struct Mark {
    size: u64,
    offset_entries: usize,
    time_entries: usize,
    bytes_since_index_entry: usize,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    first_append_ms: Option<i64>,
}

impl Segment {
    pub(crate) fn paths(dir: &Path, base_offset: i64) -> [PathBuf; 3] {
        let stem = file_stem(base_offset);
        [
            dir.join(format!("{stem}.log")),
            dir.join(format!("{stem}.index")),
            dir.join(format!("{stem}.timeindex")),
        ]
    }

    /// Opens (creating if missing) the segment with this base offset and finds its end from
    /// the indexes. Use for a new segment, or one written before a clean shutdown; see
    /// [`Segment::load`] for one that may be damaged.
    pub(crate) fn open(dir: &Path, base_offset: i64) -> Result<Segment, LogError> {
        let mut segment = Segment::open_files(dir, base_offset)?;
        if !segment.indexes_consistent() {
            return Err(LogError::CorruptIndex {
                path: dir.join(format!("{}.index", file_stem(base_offset))),
            });
        }
        segment.load_tail()?;
        Ok(segment)
    }

    /// A new, empty segment whose files do not exist yet (the partition's directory was
    /// created just now, or holds no segment): no file is created until the first append
    /// (or read, or fsync), so an empty partition costs no inode and no descriptor for its
    /// segment. A restart that finds no `.log` file starts the log at its log start offset
    /// again, which is where this segment starts.
    pub(crate) fn new_empty(dir: &Path, base_offset: i64) -> Segment {
        let [log_path, index_path, time_path] = Segment::paths(dir, base_offset);
        Segment {
            base_offset,
            offset_index: OffsetIndex::new_empty(&index_path, base_offset),
            time_index: TimeIndex::new_empty(&time_path, base_offset),
            log_path_shared: Arc::from(log_path.as_path()),
            file: CachedFile::lazy(&log_path),
            log_path,
            size: 0,
            bytes_since_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_append_ms: None,
        }
    }

    /// Opens an existing segment that may hold offsets in `range`. With `recover` (data past
    /// the recovery point, or no clean shutdown) every batch is re-validated and a torn or
    /// corrupt tail is cut off; otherwise the indexes are trusted, unless they are damaged or
    /// do not lead to a valid end, in which case the segment is recovered after all.
    pub(crate) fn load(
        dir: &Path,
        base_offset: i64,
        range: OffsetRange,
        index_interval_bytes: usize,
        recover: bool,
    ) -> Result<(Segment, Option<RecoveryResult>), LogError> {
        let mut segment = Segment::open_files(dir, base_offset)?;
        if !recover {
            if !segment.indexes_consistent() {
                warn!(segment = %segment.log_path.display(), "index entries are not increasing; rebuilding them");
            } else {
                match segment.load_tail() {
                    Ok(()) if segment.next_offset <= range.end_offset => {
                        return Ok((segment, None))
                    }
                    Ok(()) => {
                        warn!(segment = %segment.log_path.display(), next_offset = segment.next_offset,
                        end = range.end_offset, "segment runs into the next one; recovering it")
                    }
                    Err(err) => warn!(segment = %segment.log_path.display(), error = %err,
                        "cannot find the segment's end from its index; recovering it"),
                }
            }
        }
        let result = segment.recover(range, index_interval_bytes)?;
        Ok((segment, Some(result)))
    }

    fn open_files(dir: &Path, base_offset: i64) -> Result<Segment, LogError> {
        let [log_path, index_path, time_path] = Segment::paths(dir, base_offset);
        let (cached, file) =
            CachedFile::create(&log_path).map_err(LogError::io("open", &log_path))?;
        let size = file
            .metadata()
            .map_err(LogError::io("stat", &log_path))?
            .len();
        Ok(Segment {
            base_offset,
            offset_index: OffsetIndex::open(&index_path, base_offset)?,
            time_index: TimeIndex::open(&time_path, base_offset)?,
            log_path_shared: Arc::from(log_path.as_path()),
            log_path,
            file: cached,
            size,
            bytes_since_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_append_ms: None,
        })
    }

    fn indexes_consistent(&self) -> bool {
        self.offset_index.is_consistent(self.size) && self.time_index.is_consistent()
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Appends validated batches (offsets already assigned) that sit contiguously in `bytes`.
    /// All or nothing: when a write fails (a full disk) the segment and its indexes are cut
    /// back to where they were, so nothing is ever appended after torn bytes. When even that
    /// fails the error is [`LogError::Offline`]: the caller must stop writing to this log.
    pub(crate) fn append(
        &mut self,
        bytes: &[u8],
        batches: &[BatchRef],
        index_interval_bytes: usize,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let mark = self.mark();
        match self.append_unguarded(bytes, batches, index_interval_bytes) {
            Ok(()) => {
                self.first_append_ms.get_or_insert(now_ms);
                Ok(())
            }
            Err(error) => match self.reset_to(mark) {
                Ok(()) => Err(error),
                Err(undo) => Err(LogError::Offline {
                    path: self.log_path.clone(),
                    reason: format!("{error}; undoing it failed: {undo}"),
                }),
            },
        }
    }

    fn append_unguarded(
        &mut self,
        bytes: &[u8],
        batches: &[BatchRef],
        index_interval_bytes: usize,
    ) -> Result<(), LogError> {
        let start_position = self.size;
        file::append(&self.file, &self.log_path, bytes)
            .map_err(LogError::io("append to", &self.log_path))?;
        for batch in batches {
            let header = BatchHeader::read(&bytes[batch.position..]).expect("validated batch");
            let position = start_position + batch.position as u64;
            self.index_batch(&header, position, index_interval_bytes)?;
        }
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn mark(&self) -> Mark {
        Mark {
            size: self.size,
            offset_entries: self.offset_index.len(),
            time_entries: self.time_index.len(),
            bytes_since_index_entry: self.bytes_since_index_entry,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            first_append_ms: self.first_append_ms,
        }
    }

    /// Cuts the files back to `mark` and restores the state that went with it.
    fn reset_to(&mut self, mark: Mark) -> Result<(), LogError> {
        file::set_len(&self.file, &self.log_path, mark.size)
            .map_err(LogError::io("truncate", &self.log_path))?;
        self.offset_index.truncate_entries(mark.offset_entries)?;
        self.time_index.truncate_entries(mark.time_entries)?;
        self.size = mark.size;
        self.bytes_since_index_entry = mark.bytes_since_index_entry;
        self.next_offset = mark.next_offset;
        self.max_timestamp = mark.max_timestamp;
        self.offset_of_max_timestamp = mark.offset_of_max_timestamp;
        self.first_append_ms = mark.first_append_ms;
        Ok(())
    }

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes`
    /// (always at least one batch, as Kafka does, so a large batch never blocks a consumer).
    pub(crate) fn read(&self, offset: i64, max_bytes: usize) -> Result<Option<Vec<u8>>, LogError> {
        self.region(offset, max_bytes, i64::MAX)?
            .map(|region| region.read())
            .transpose()
    }

    /// Where [`Segment::read`]'s batches lie in the `.log` file, without reading them: only
    /// batch headers are read. Batches from the first one reaching `upper` (an exclusive
    /// offset bound: a consumer's high watermark) are left out, the first one included.
    pub(crate) fn region(
        &self,
        offset: i64,
        max_bytes: usize,
        upper: i64,
    ) -> Result<Option<FileRegion>, LogError> {
        let Some(start) = self.position_of(offset)? else {
            return Ok(None);
        };
        let mut end = start;
        while end < self.size {
            let header = self.header_at(end)?;
            let next = end + header.size_in_bytes() as u64;
            if header.last_offset() >= upper || (end > start && (next - start) as usize > max_bytes)
            {
                break;
            }
            end = next;
        }
        let file = self
            .file
            .get()
            .map_err(LogError::io("open", &self.log_path))?;
        Ok(Some(FileRegion {
            file,
            path: Arc::clone(&self.log_path_shared),
            position: start,
            len: (end - start) as usize,
        }))
    }

    /// Kafka's `LogSegment.findOffsetByTimestamp`: from the time index's hint, the first
    /// record at or after `starting_offset` whose timestamp is >= `timestamp`, found by
    /// decoding the batches whose max timestamp reaches it (any codec). Returns (timestamp,
    /// offset, the batch's leader epoch).
    pub(crate) fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
    ) -> Result<Option<(i64, i64, i32)>, LogError> {
        if self.max_timestamp < timestamp {
            return Ok(None);
        }
        let from = self.time_index.lookup(timestamp).max(starting_offset);
        let Some(mut position) = self.position_of(from)? else {
            return Ok(None);
        };
        while position < self.size {
            let header = self.header_at(position)?;
            if header.max_timestamp >= timestamp && header.last_offset() >= starting_offset {
                let batch = self.read_batch(position, &header)?;
                let records =
                    records::record_timestamps(&batch).map_err(|_| LogError::CorruptSegment {
                        path: self.log_path.clone(),
                        position,
                    })?;
                if let Some(&(ts, offset)) = records
                    .iter()
                    .find(|&&(ts, offset)| ts >= timestamp && offset >= starting_offset)
                {
                    return Ok(Some((ts, offset, header.partition_leader_epoch)));
                }
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// The first record carrying the segment's largest timestamp: (timestamp, offset, the
    /// batch's leader epoch), as Kafka 3.x answers ListOffsets MAX_TIMESTAMP.
    pub(crate) fn max_timestamp_record(
        &self,
        starting_offset: i64,
    ) -> Result<Option<(i64, i64, i32)>, LogError> {
        if self.max_timestamp < 0 {
            return Ok(None);
        }
        self.find_offset_by_timestamp(self.max_timestamp, starting_offset)
    }

    /// The bytes of the whole batch at `position`.
    pub(crate) fn read_batch(
        &self,
        position: u64,
        header: &BatchHeader,
    ) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0u8; header.size_in_bytes()];
        file::read_exact_at(&self.file, &self.log_path, &mut buf, position)
            .map_err(LogError::io("read", &self.log_path))?;
        Ok(buf)
    }

    /// Re-validates every batch (CRC included, offsets within `range`), truncates a torn or
    /// corrupt tail, and rebuilds both indexes from what remains. Streams the file.
    pub(crate) fn recover(
        &mut self,
        range: OffsetRange,
        index_interval_bytes: usize,
    ) -> Result<RecoveryResult, LogError> {
        self.offset_index.truncate_all()?;
        self.time_index.truncate_all()?;
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.bytes_since_index_entry = 0;
        // The scan reads through a second handle so that indexing can borrow the segment.
        let file = self
            .file
            .get()
            .map_err(LogError::io("open", &self.log_path))?;
        let path = self.log_path.clone();
        let end = recovery::scan(&file, &path, self.size, range, |header, position| {
            self.index_batch(header, position, index_interval_bytes)
        })?;
        let truncated = self.size - end.valid_bytes;
        if truncated > 0 {
            file::set_len(&self.file, &self.log_path, end.valid_bytes)
                .map_err(LogError::io("truncate", &self.log_path))?;
            self.size = end.valid_bytes;
        }
        Ok(RecoveryResult {
            valid_bytes: end.valid_bytes,
            truncated_bytes: truncated,
            reason: end.reason,
        })
    }

    /// Removes every batch whose last offset is at or past `offset` (a whole batch goes when
    /// `offset` falls inside it, as in Kafka) and rebuilds the indexes.
    pub(crate) fn truncate_to(
        &mut self,
        offset: i64,
        index_interval_bytes: usize,
    ) -> Result<(), LogError> {
        let Some(position) = self.position_of(offset)? else {
            return Ok(());
        };
        file::set_len(&self.file, &self.log_path, position)
            .map_err(LogError::io("truncate", &self.log_path))?;
        self.size = position;
        self.recover(
            OffsetRange::new(self.base_offset, None),
            index_interval_bytes,
        )?;
        Ok(())
    }

    /// Creates the index files an empty index has not created yet, so that all three files
    /// exist (a segment written to replace others is moved file by file).
    pub(crate) fn create_missing_files(&self) -> Result<(), LogError> {
        self.file
            .get()
            .map(drop)
            .map_err(LogError::io("create", &self.log_path))?;
        self.offset_index.create_file()?;
        self.time_index.create_file()
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        file::sync_data(&self.file, &self.log_path)
            .map_err(LogError::io("fsync", &self.log_path))?;
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    pub(crate) fn delete_files(self, dir: &Path) -> Result<(), LogError> {
        Segment::delete_files_of(dir, self.base_offset)
    }

    /// Removes the files of the segment with this base offset (those that exist).
    pub(crate) fn delete_files_of(dir: &Path, base_offset: i64) -> Result<(), LogError> {
        super::txn_index::remove(&super::txn_index::path(dir, base_offset))?;
        for path in Segment::paths(dir, base_offset) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(LogError::Io {
                        op: "remove",
                        path,
                        source: e,
                    })
                }
            }
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn index_entries(&self) -> usize {
        self.offset_index.len()
    }

    fn index_batch(
        &mut self,
        header: &BatchHeader,
        position: u64,
        index_interval_bytes: usize,
    ) -> Result<(), LogError> {
        debug_assert!(
            header.base_offset >= self.next_offset,
            "offsets must increase within a segment"
        );
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        // Both indexes are sparse and move together, as Kafka's `LogSegment.append`: an entry
        // every `index.interval.bytes`, the time index's being the largest timestamp so far.
        // (One time-index entry per batch whose timestamp grew would be a write per produce
        // and memory that grows with every batch.)
        if self.bytes_since_index_entry >= index_interval_bytes
            || self.offset_index.len() == 0 && position > 0
        {
            self.offset_index
                .append(header.base_offset, position as u32)?;
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += header.size_in_bytes();
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Finds the segment's end state (next offset, max timestamp) from the last indexed
    /// position, reading only batch headers. The batches must end exactly at the end of the
    /// file with increasing offsets; anything else is corruption (the caller recovers).
    fn load_tail(&mut self) -> Result<(), LogError> {
        let mut position = u64::from(self.offset_index.lookup(i64::MAX));
        (self.max_timestamp, self.offset_of_max_timestamp) = self
            .time_index
            .last_entry()
            .unwrap_or((-1, self.base_offset));
        self.next_offset = self.base_offset + i64::from(self.offset_index.last_relative());
        while position < self.size {
            let header = self.header_at(position)?;
            // Offsets must increase and stay within the segment (relative offsets are i32s;
            // a base offset is not covered by the CRC).
            let beyond = header.next_offset() - self.base_offset > i64::from(i32::MAX);
            if header.base_offset < self.next_offset || header.last_offset_delta < 0 || beyond {
                return Err(self.corrupt(position));
            }
            self.next_offset = header.next_offset();
            if header.max_timestamp > self.max_timestamp {
                self.max_timestamp = header.max_timestamp;
                self.offset_of_max_timestamp = header.base_offset;
            }
            position += header.size_in_bytes() as u64;
        }
        if position != self.size {
            return Err(self.corrupt(position));
        }
        Ok(())
    }

    fn corrupt(&self, position: u64) -> LogError {
        LogError::CorruptSegment {
            path: self.log_path.clone(),
            position,
        }
    }

    /// Byte position of the batch that contains `offset`, or None past the end.
    pub(crate) fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        let mut position = u64::from(self.offset_index.lookup(offset));
        while position < self.size {
            let header = self.header_at(position)?;
            if header.last_offset() >= offset {
                return Ok(Some(position));
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    fn header_at(&self, position: u64) -> Result<BatchHeader, LogError> {
        if position + HEADER_SIZE as u64 > self.size {
            return Err(self.corrupt(position));
        }
        let mut buf = [0u8; HEADER_SIZE];
        file::read_exact_at(&self.file, &self.log_path, &mut buf, position)
            .map_err(LogError::io("read", &self.log_path))?;
        let header = BatchHeader::read(&buf).expect("HEADER_SIZE bytes");
        if header.batch_length < (HEADER_SIZE - records::LOG_OVERHEAD) as i32
            || position + header.size_in_bytes() as u64 > self.size
        {
            return Err(self.corrupt(position));
        }
        Ok(header)
    }
}
