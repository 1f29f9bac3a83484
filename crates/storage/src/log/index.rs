//! The sparse offset index (`.index`) and time index (`.timeindex`) of one segment.
//!
//! Both are Kafka's on-disk layouts, big-endian, append-only here (Kafka preallocates and
//! trims; a reader of either sees the same entries):
//! - offset index entry, 8 bytes: relative offset (u32, offset - segment base) + byte position (u32);
//! - time index entry, 12 bytes: timestamp (i64) + relative offset (u32).
//!
//! Entries are mirrored in memory; the files are what recovery rebuilds when a segment is
//! scanned after a crash.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::LogError;
use crate::file;
use crate::open_files::CachedFile;

pub(crate) const OFFSET_ENTRY_SIZE: usize = 8;
pub(crate) const TIME_ENTRY_SIZE: usize = 12;

/// Maps offsets to byte positions in the segment's `.log` file.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    path: PathBuf,
    file: CachedFile,
    base_offset: i64,
    /// (relative offset, position), strictly increasing in both.
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    /// The index of a segment created just now, known to have no file yet: nothing is read
    /// or created until its first entry.
    pub(crate) fn new_empty(path: &Path, base_offset: i64) -> OffsetIndex {
        OffsetIndex {
            path: path.to_owned(),
            file: CachedFile::lazy(path),
            base_offset,
            entries: Vec::new(),
        }
    }

    pub(crate) fn open(path: &Path, base_offset: i64) -> Result<OffsetIndex, LogError> {
        let (file, bytes) = open_and_read(path, OFFSET_ENTRY_SIZE)?;
        let entries = bytes
            .chunks_exact(OFFSET_ENTRY_SIZE)
            .map(|e| {
                (
                    u32::from_be_bytes(e[0..4].try_into().unwrap()),
                    u32::from_be_bytes(e[4..8].try_into().unwrap()),
                )
            })
            .collect::<Vec<_>>();
        Ok(OffsetIndex {
            path: path.to_owned(),
            file,
            base_offset,
            entries,
        })
    }

    /// Adds an entry for `offset` at byte `position`; ignored unless both move forward.
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> Result<(), LogError> {
        let relative = self.relative(offset)?;
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            if relative <= last_rel || position <= last_pos {
                return Ok(());
            }
        }
        let mut entry = [0u8; OFFSET_ENTRY_SIZE];
        entry[0..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..8].copy_from_slice(&position.to_be_bytes());
        file::append(&self.file, &self.path, &entry)
            .map_err(LogError::io("append to", &self.path))?;
        self.entries.push((relative, position));
        Ok(())
    }

    fn relative(&self, offset: i64) -> Result<u32, LogError> {
        relative(offset, self.base_offset).ok_or_else(|| LogError::OffsetOutsideSegment {
            path: self.path.clone(),
            offset,
        })
    }

    /// The relative offset of the last entry (0 when there is none).
    pub(crate) fn last_relative(&self) -> u32 {
        self.entries.last().map_or(0, |&(rel, _)| rel)
    }

    /// The byte position of the last indexed offset <= `offset` (0 when none is).
    pub(crate) fn lookup(&self, offset: i64) -> u32 {
        if offset < self.base_offset {
            return 0;
        }
        let relative = (offset - self.base_offset).min(i64::from(u32::MAX)) as u32;
        match self.entries.partition_point(|&(rel, _)| rel <= relative) {
            0 => 0,
            i => self.entries[i - 1].1,
        }
    }

    pub(crate) fn truncate_all(&mut self) -> Result<(), LogError> {
        self.truncate_entries(0)
    }

    /// Keeps the first `len` entries.
    pub(crate) fn truncate_entries(&mut self, len: usize) -> Result<(), LogError> {
        file::set_len(&self.file, &self.path, (len * OFFSET_ENTRY_SIZE) as u64)
            .map_err(LogError::io("truncate", &self.path))?;
        self.entries.truncate(len);
        Ok(())
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        file::sync_data(&self.file, &self.path).map_err(LogError::io("fsync", &self.path))
    }

    /// Creates the file if the index has not yet (an empty index is only in memory).
    pub(crate) fn create_file(&self) -> Result<(), LogError> {
        self.file
            .get()
            .map(drop)
            .map_err(LogError::io("create", &self.path))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the entries read back from disk still keep what `append` kept: both fields
    /// strictly increasing, positions inside a `.log` file of `log_size` bytes.
    pub(crate) fn is_consistent(&self, log_size: u64) -> bool {
        self.entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            && self
                .entries
                .last()
                .is_none_or(|&(_, position)| u64::from(position) < log_size)
    }
}

/// Maps timestamps to offsets: each entry is the largest timestamp seen so far in the
/// segment and the offset of the batch that carried it.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    path: PathBuf,
    file: CachedFile,
    base_offset: i64,
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    /// See [`OffsetIndex::new_empty`].
    pub(crate) fn new_empty(path: &Path, base_offset: i64) -> TimeIndex {
        TimeIndex {
            path: path.to_owned(),
            file: CachedFile::lazy(path),
            base_offset,
            entries: Vec::new(),
        }
    }

    pub(crate) fn open(path: &Path, base_offset: i64) -> Result<TimeIndex, LogError> {
        let (file, bytes) = open_and_read(path, TIME_ENTRY_SIZE)?;
        let entries = bytes
            .chunks_exact(TIME_ENTRY_SIZE)
            .map(|e| {
                (
                    i64::from_be_bytes(e[0..8].try_into().unwrap()),
                    u32::from_be_bytes(e[8..12].try_into().unwrap()),
                )
            })
            .collect();
        Ok(TimeIndex {
            path: path.to_owned(),
            file,
            base_offset,
            entries,
        })
    }

    /// Adds (timestamp, offset) when the timestamp is larger than the last entry's.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) -> Result<(), LogError> {
        if self.entries.last().is_some_and(|&(ts, _)| timestamp <= ts) {
            return Ok(());
        }
        let relative =
            relative(offset, self.base_offset).ok_or_else(|| LogError::OffsetOutsideSegment {
                path: self.path.clone(),
                offset,
            })?;
        let mut entry = [0u8; TIME_ENTRY_SIZE];
        entry[0..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..12].copy_from_slice(&relative.to_be_bytes());
        file::append(&self.file, &self.path, &entry)
            .map_err(LogError::io("append to", &self.path))?;
        self.entries.push((timestamp, relative));
        Ok(())
    }

    /// The offset from which to scan for the first record with timestamp >= `timestamp`:
    /// the offset of the last entry whose timestamp is < `timestamp`, or the segment base.
    pub(crate) fn lookup(&self, timestamp: i64) -> i64 {
        match self.entries.partition_point(|&(ts, _)| ts < timestamp) {
            0 => self.base_offset,
            i => self.base_offset + i64::from(self.entries[i - 1].1),
        }
    }

    /// The last entry: the largest timestamp indexed and the offset of its batch.
    pub(crate) fn last_entry(&self) -> Option<(i64, i64)> {
        self.entries
            .last()
            .map(|&(ts, relative)| (ts, self.base_offset + i64::from(relative)))
    }

    pub(crate) fn truncate_all(&mut self) -> Result<(), LogError> {
        self.truncate_entries(0)
    }

    /// Keeps the first `len` entries.
    pub(crate) fn truncate_entries(&mut self, len: usize) -> Result<(), LogError> {
        file::set_len(&self.file, &self.path, (len * TIME_ENTRY_SIZE) as u64)
            .map_err(LogError::io("truncate", &self.path))?;
        self.entries.truncate(len);
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether timestamps strictly increase and offsets never go back.
    pub(crate) fn is_consistent(&self) -> bool {
        self.entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        file::sync_data(&self.file, &self.path).map_err(LogError::io("fsync", &self.path))
    }

    /// Creates the file if the index has not yet (an empty index is only in memory).
    pub(crate) fn create_file(&self) -> Result<(), LogError> {
        self.file
            .get()
            .map(drop)
            .map_err(LogError::io("create", &self.path))
    }
}

/// `offset - base_offset` as an index stores it, or `None` outside the 32-bit range.
fn relative(offset: i64, base_offset: i64) -> Option<u32> {
    u32::try_from(offset.checked_sub(base_offset)?).ok()
}

/// Opens an index file and reads its entries. A torn final entry (a crash or a full disk
/// mid-append) is cut off, so that the next entry is appended at an entry boundary. A
/// missing file is an empty index, created by its first entry (an empty segment's indexes
/// cost no inode and no descriptor).
fn open_and_read(path: &Path, entry_size: usize) -> Result<(CachedFile, Vec<u8>), LogError> {
    if !path.exists() {
        return Ok((CachedFile::lazy(path), Vec::new()));
    }
    let (cached, file) = CachedFile::create(path).map_err(LogError::io("open", path))?;
    let mut bytes = Vec::new();
    (&*file)
        .read_to_end(&mut bytes)
        .map_err(LogError::io("read", path))?;
    let whole = bytes.len() - bytes.len() % entry_size;
    if whole < bytes.len() {
        file::set_len(&*file, path, whole as u64).map_err(LogError::io("truncate", path))?;
        bytes.truncate(whole);
    }
    Ok((cached, bytes))
}
