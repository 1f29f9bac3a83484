//! Segment recovery's scan: walks the batches of a `.log` file from the start, checking each
//! as Kafka's `LogSegment.recover` does, and says where the valid data ends.
//!
//! The file is streamed through one fixed window ([`WINDOW_BYTES`]); a batch larger than the
//! window has its CRC computed piece by piece, so recovering a 1 GiB segment costs the
//! window, not the segment. Nothing in a file can make the scan panic or allocate by a
//! length read from it: a bad header, a batch that runs past the end of the file, a wrong
//! CRC, or offsets that go backwards or leave the segment's range all end the valid data
//! there (the caller truncates and logs the reason).

use std::fs::File;
use std::path::Path;

use records::{BatchHeader, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2};

use super::LogError;
use crate::file;

/// Bytes read from the file at a time.
pub(crate) const WINDOW_BYTES: usize = 1024 * 1024;

/// Where the valid data of a segment ends, and why.
#[derive(Debug)]
pub(crate) struct ScanEnd {
    pub(crate) valid_bytes: u64,
    /// Why the scan stopped before the end of the file (`None`: the whole file is valid).
    pub(crate) reason: Option<String>,
}

/// The offsets a segment may hold: from `base_offset` (its file name) up to, not including,
/// `end_offset` (the next segment's base, or the 32-bit relative-offset limit of the index).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OffsetRange {
    pub(crate) base_offset: i64,
    pub(crate) end_offset: i64,
}

impl OffsetRange {
    pub(crate) fn new(base_offset: i64, next_segment_base: Option<i64>) -> OffsetRange {
        let index_limit = base_offset.saturating_add(i64::from(u32::MAX) + 1);
        OffsetRange {
            base_offset,
            end_offset: next_segment_base.map_or(index_limit, |next| next.min(index_limit)),
        }
    }
}

/// Scans the first `size` bytes of `file`, calling `on_batch(header, position)` for every
/// valid batch in order.
pub(crate) fn scan(
    file: &File,
    path: &Path,
    size: u64,
    range: OffsetRange,
    mut on_batch: impl FnMut(&BatchHeader, u64) -> Result<(), LogError>,
) -> Result<ScanEnd, LogError> {
    let mut window = Window::new(file, path, size);
    let mut position = 0u64;
    let mut next_offset = range.base_offset;
    while position < size {
        let header = match window.header_at(position)? {
            Ok(header) => header,
            Err(reason) => return Ok(stop(position, reason)),
        };
        if let Err(reason) = check_header(&header, position, size, next_offset, range) {
            return Ok(stop(position, reason));
        }
        let computed = window.crc_of(position, header.size_in_bytes() as u64)?;
        if computed != header.crc {
            return Ok(stop(
                position,
                format!(
                    "batch at offset {} has CRC {computed:#010x}, stored {:#010x}",
                    header.base_offset, header.crc
                ),
            ));
        }
        on_batch(&header, position)?;
        next_offset = header.next_offset();
        position += header.size_in_bytes() as u64;
    }
    Ok(ScanEnd {
        valid_bytes: position,
        reason: None,
    })
}

fn stop(position: u64, reason: String) -> ScanEnd {
    ScanEnd {
        valid_bytes: position,
        reason: Some(reason),
    }
}

/// Everything about a batch that can be checked from its header.
fn check_header(
    header: &BatchHeader,
    position: u64,
    size: u64,
    next_offset: i64,
    range: OffsetRange,
) -> Result<(), String> {
    if header.magic != MAGIC_V2 {
        return Err(format!("magic {} (only 2 is stored)", header.magic));
    }
    if header.batch_length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(format!("batch length {}", header.batch_length));
    }
    let end = position + header.size_in_bytes() as u64;
    if end > size {
        return Err(format!(
            "a batch of {} bytes runs past the end of the file ({size} bytes)",
            header.size_in_bytes()
        ));
    }
    if header.compression().is_none() {
        return Err(format!(
            "unknown compression in attributes {}",
            header.attributes
        ));
    }
    if header.last_offset_delta < 0 || header.records_count < 0 {
        return Err(format!(
            "last offset delta {} and record count {}",
            header.last_offset_delta, header.records_count
        ));
    }
    // The base offset is outside the CRC: it must be checked against the segment's range.
    if header.base_offset < next_offset {
        return Err(format!(
            "base offset {} is below the previous batch's end {next_offset}",
            header.base_offset
        ));
    }
    let last = header
        .base_offset
        .checked_add(i64::from(header.last_offset_delta));
    if last.is_none_or(|last| last >= range.end_offset) {
        return Err(format!(
            "offsets {}..+{} are outside the segment's range {}..{}",
            header.base_offset, header.last_offset_delta, range.base_offset, range.end_offset
        ));
    }
    Ok(())
}

/// A read-ahead window over the file.
struct Window<'a> {
    file: &'a File,
    path: &'a Path,
    size: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`; `buf` holds `len` valid bytes.
    start: u64,
    len: usize,
}

impl<'a> Window<'a> {
    fn new(file: &'a File, path: &'a Path, size: u64) -> Window<'a> {
        let capacity = (size as usize).min(WINDOW_BYTES);
        Window {
            file,
            path,
            size,
            buf: vec![0; capacity],
            start: 0,
            len: 0,
        }
    }

    /// The `len` (<= the window) bytes at `position`, reading the file when needed.
    fn bytes(&mut self, position: u64, len: usize) -> Result<&[u8], LogError> {
        debug_assert!(len <= self.buf.len() && position + len as u64 <= self.size);
        let inside =
            position >= self.start && position + len as u64 <= self.start + self.len as u64;
        if !inside {
            let fill = ((self.size - position) as usize).min(self.buf.len());
            file::read_exact_at(self.file, self.path, &mut self.buf[..fill], position)
                .map_err(LogError::io("read", self.path))?;
            self.start = position;
            self.len = fill;
        }
        let from = (position - self.start) as usize;
        Ok(&self.buf[from..from + len])
    }

    /// The header at `position`, or why there is none.
    fn header_at(&mut self, position: u64) -> Result<Result<BatchHeader, String>, LogError> {
        let left = self.size - position;
        if left < HEADER_SIZE as u64 {
            return Ok(Err(format!(
                "{left} bytes at the end are shorter than a batch header"
            )));
        }
        let bytes = self.bytes(position, HEADER_SIZE)?;
        Ok(BatchHeader::read(bytes).ok_or_else(|| "short header".to_owned()))
    }

    /// CRC-32C of the batch's bytes covered by its checksum (attributes to the end).
    fn crc_of(&mut self, position: u64, batch_size: u64) -> Result<u32, LogError> {
        let mut crc = 0u32;
        let mut at = position + records::CRC_COVERED_FROM as u64;
        let end = position + batch_size;
        while at < end {
            let piece = ((end - at) as usize).min(self.buf.len());
            crc = crc32c::crc32c_append(crc, self.bytes(at, piece)?);
            at += piece as u64;
        }
        Ok(crc)
    }
}
