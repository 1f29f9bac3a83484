//! The sparse offset index (`.index`) and time index (`.timeindex`) of one segment.
//!
//! Both are Kafka's on-disk layouts, big-endian, append-only here (Kafka preallocates and
//! trims; a reader of either sees the same entries):
//! - offset index entry, 8 bytes: relative offset (u32, offset - segment base) + byte position (u32);
//! - time index entry, 12 bytes: timestamp (i64) + relative offset (u32).
//!
//! Entries are mirrored in memory; the files are what recovery rebuilds when a segment is
//! scanned after a crash.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::LogError;

pub(crate) const OFFSET_ENTRY_SIZE: usize = 8;
pub(crate) const TIME_ENTRY_SIZE: usize = 12;

/// Maps offsets to byte positions in the segment's `.log` file.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    path: PathBuf,
    file: File,
    base_offset: i64,
    /// (relative offset, position), strictly increasing in both.
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    pub(crate) fn open(path: &Path, base_offset: i64) -> Result<OffsetIndex, LogError> {
        let (file, bytes) = open_and_read(path)?;
        let entries = bytes
            .chunks_exact(OFFSET_ENTRY_SIZE)
            .map(|e| {
                (
                    u32::from_be_bytes(e[0..4].try_into().unwrap()),
                    u32::from_be_bytes(e[4..8].try_into().unwrap()),
                )
            })
            .collect::<Vec<_>>();
        let index = OffsetIndex {
            path: path.to_owned(),
            file,
            base_offset,
            entries,
        };
        index.check_sorted()?;
        Ok(index)
    }

    /// Adds an entry for `offset` at byte `position`; ignored unless both move forward.
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> Result<(), LogError> {
        let relative = relative(offset, self.base_offset);
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            if relative <= last_rel || position <= last_pos {
                return Ok(());
            }
        }
        let mut entry = [0u8; OFFSET_ENTRY_SIZE];
        entry[0..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..8].copy_from_slice(&position.to_be_bytes());
        self.file
            .write_all(&entry)
            .map_err(LogError::io("append to", &self.path))?;
        self.entries.push((relative, position));
        Ok(())
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
        self.entries.clear();
        self.file
            .set_len(0)
            .map_err(LogError::io("truncate", &self.path))
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(LogError::io("fsync", &self.path))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn check_sorted(&self) -> Result<(), LogError> {
        // Read back from disk: the invariant append() kept must still hold.
        let sorted = self
            .entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
        if sorted {
            Ok(())
        } else {
            Err(LogError::CorruptIndex {
                path: self.path.clone(),
            })
        }
    }
}

/// Maps timestamps to offsets: each entry is the largest timestamp seen so far in the
/// segment and the offset of the batch that carried it.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    path: PathBuf,
    file: File,
    base_offset: i64,
    entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    pub(crate) fn open(path: &Path, base_offset: i64) -> Result<TimeIndex, LogError> {
        let (file, bytes) = open_and_read(path)?;
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
        let relative = relative(offset, self.base_offset);
        let mut entry = [0u8; TIME_ENTRY_SIZE];
        entry[0..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..12].copy_from_slice(&relative.to_be_bytes());
        self.file
            .write_all(&entry)
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

    pub(crate) fn max_timestamp(&self) -> Option<i64> {
        self.entries.last().map(|&(ts, _)| ts)
    }

    pub(crate) fn truncate_all(&mut self) -> Result<(), LogError> {
        self.entries.clear();
        self.file
            .set_len(0)
            .map_err(LogError::io("truncate", &self.path))
    }

    pub(crate) fn flush(&self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(LogError::io("fsync", &self.path))
    }
}

fn relative(offset: i64, base_offset: i64) -> u32 {
    let relative = offset - base_offset;
    assert!(
        (0..=i64::from(u32::MAX)).contains(&relative),
        "offset {offset} outside segment {base_offset}"
    );
    relative as u32
}

fn open_and_read(path: &Path) -> Result<(File, Vec<u8>), LogError> {
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(LogError::io("open", path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(LogError::io("read", path))?;
    // A torn final entry (crash mid-append) is dropped; recovery rebuilds from the log anyway.
    Ok((file, bytes))
}
