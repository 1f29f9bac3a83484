//! One segment of a partition log: `<base offset, 20 digits>.log` holding record batches exactly
//! as producers sent them (offsets assigned), plus its `.index` and `.timeindex`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use records::{BatchHeader, BatchRef, HEADER_SIZE};

use super::index::{OffsetIndex, TimeIndex};
use super::LogError;

/// File name stem of a segment: its base offset, zero-padded to 20 digits as Kafka does.
pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    log_path: PathBuf,
    file: File,
    /// Bytes in the `.log` file.
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_index_entry: usize,
    /// The offset after this segment's last batch (= base offset when empty).
    pub(crate) next_offset: i64,
    /// Largest batch max-timestamp in the segment (-1 when empty).
    pub(crate) max_timestamp: i64,
    /// When the segment got its first batch (ms), for `segment.ms` rolls.
    pub(crate) first_append_ms: Option<i64>,
}

/// What a scan of a segment found: where the valid data ends.
#[derive(Debug)]
pub(crate) struct RecoveryResult {
    pub(crate) valid_bytes: u64,
    pub(crate) truncated_bytes: u64,
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

    /// Opens (creating if missing) the segment with this base offset. Trusts the indexes; call
    /// [`Segment::recover`] for a segment that may hold unflushed data from before a crash.
    pub(crate) fn open(dir: &Path, base_offset: i64) -> Result<Segment, LogError> {
        let [log_path, index_path, time_path] = Segment::paths(dir, base_offset);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&log_path)
            .map_err(LogError::io("open", &log_path))?;
        let size = file
            .metadata()
            .map_err(LogError::io("stat", &log_path))?
            .len();
        let mut segment = Segment {
            base_offset,
            offset_index: OffsetIndex::open(&index_path, base_offset)?,
            time_index: TimeIndex::open(&time_path, base_offset)?,
            log_path,
            file,
            size,
            bytes_since_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            first_append_ms: None,
        };
        segment.load_tail()?;
        Ok(segment)
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Appends validated batches (offsets already assigned) that sit contiguously in `bytes`.
    pub(crate) fn append(
        &mut self,
        bytes: &[u8],
        batches: &[BatchRef],
        index_interval_bytes: usize,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let start_position = self.size;
        self.file
            .write_all(bytes)
            .map_err(LogError::io("append to", &self.log_path))?;
        for batch in batches {
            let header = BatchHeader::read(&bytes[batch.position..]).expect("validated batch");
            let position = start_position + batch.position as u64;
            self.index_batch(&header, position, index_interval_bytes)?;
        }
        self.size += bytes.len() as u64;
        self.first_append_ms.get_or_insert(now_ms);
        Ok(())
    }

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes`
    /// (always at least one batch, as Kafka does, so a large batch never blocks a consumer).
    pub(crate) fn read(&self, offset: i64, max_bytes: usize) -> Result<Option<Vec<u8>>, LogError> {
        let Some(start) = self.position_of(offset)? else {
            return Ok(None);
        };
        let mut end = start;
        while end < self.size {
            let header = self.header_at(end)?;
            let next = end + header.size_in_bytes() as u64;
            if end > start && (next - start) as usize > max_bytes {
                break;
            }
            end = next;
        }
        let mut buf = vec![0u8; (end - start) as usize];
        self.file
            .read_exact_at(&mut buf, start)
            .map_err(LogError::io("read", &self.log_path))?;
        Ok(Some(buf))
    }

    /// The first offset >= `offset` whose batch has max timestamp >= `timestamp`.
    pub(crate) fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        if self.max_timestamp < timestamp {
            return Ok(None);
        }
        let from = self.time_index.lookup(timestamp);
        let Some(mut position) = self.position_of(from)? else {
            return Ok(None);
        };
        while position < self.size {
            let header = self.header_at(position)?;
            if header.max_timestamp >= timestamp {
                return Ok(Some((header.base_offset, header.max_timestamp)));
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// Re-validates every batch (CRC included), truncates a torn or corrupt tail, and rebuilds
    /// both indexes from what remains.
    pub(crate) fn recover(
        &mut self,
        index_interval_bytes: usize,
    ) -> Result<RecoveryResult, LogError> {
        let mut all = vec![0u8; self.size as usize];
        self.file
            .read_exact_at(&mut all, 0)
            .map_err(LogError::io("read", &self.log_path))?;
        self.offset_index.truncate_all()?;
        self.time_index.truncate_all()?;
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.bytes_since_index_entry = 0;
        let mut position = 0usize;
        while position < all.len() {
            match records::validate_batch_at(&all, position) {
                Ok(batch) if batch.header.base_offset >= self.next_offset => {
                    self.index_batch(&batch.header, position as u64, index_interval_bytes)?;
                    position += batch.header.size_in_bytes();
                }
                Ok(_) | Err(_) => break,
            }
        }
        let truncated = all.len() - position;
        if truncated > 0 {
            self.file
                .set_len(position as u64)
                .map_err(LogError::io("truncate", &self.log_path))?;
            self.size = position as u64;
        }
        Ok(RecoveryResult {
            valid_bytes: position as u64,
            truncated_bytes: truncated as u64,
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
        self.file
            .set_len(position)
            .map_err(LogError::io("truncate", &self.log_path))?;
        self.size = position;
        self.recover(index_interval_bytes)?;
        Ok(())
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(LogError::io("fsync", &self.log_path))?;
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    pub(crate) fn delete_files(self, dir: &Path) -> Result<(), LogError> {
        for path in Segment::paths(dir, self.base_offset) {
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
        if self.bytes_since_index_entry >= index_interval_bytes
            || self.offset_index.len() == 0 && position > 0
        {
            self.offset_index
                .append(header.base_offset, position as u32)?;
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += header.size_in_bytes();
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.time_index
                .maybe_append(header.max_timestamp, header.base_offset)?;
        }
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Finds the segment's end state (next offset, max timestamp) from the last indexed
    /// position, reading only batch headers.
    fn load_tail(&mut self) -> Result<(), LogError> {
        let mut position = u64::from(self.offset_index.lookup(i64::MAX));
        self.max_timestamp = self.time_index.max_timestamp().unwrap_or(-1);
        while position + HEADER_SIZE as u64 <= self.size {
            let header = self.header_at(position)?;
            self.next_offset = header.next_offset();
            self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
            position += header.size_in_bytes() as u64;
        }
        Ok(())
    }

    /// Byte position of the batch that contains `offset`, or None past the end.
    fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
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
        let mut buf = [0u8; HEADER_SIZE];
        self.file
            .read_exact_at(&mut buf, position)
            .map_err(LogError::io("read", &self.log_path))?;
        let header = BatchHeader::read(&buf).expect("HEADER_SIZE bytes");
        if header.batch_length < (HEADER_SIZE - records::LOG_OVERHEAD) as i32
            || position + header.size_in_bytes() as u64 > self.size
        {
            return Err(LogError::CorruptSegment {
                path: self.log_path.clone(),
                position,
            });
        }
        Ok(header)
    }
}
