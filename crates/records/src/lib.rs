//! Record batches on our side of the wire, and every place the broker looks inside them.
//!
//! - This file: the 61-byte v2 batch header, the shallow checks every stored or replicated
//!   batch passes (length, magic 2, codec id, CRC-32C), offset assignment and LogAppendTime
//!   stamping in place.
//! - [`validate`]: what the leader checks before it acknowledges a produce (Kafka's
//!   `LogValidator`): every record's framing, compressed batches decoded, keys on compacted
//!   topics, timestamps; batches rebuilt where Kafka rebuilds them.
//! - [`record`]: the records inside a batch, read without copying.
//! - [`codec`]: gzip, snappy, lz4, zstd in Kafka's framings (pure Rust).
//! - [`builder`]: writing a v2 batch (conversion, recompression, the cleaner).
//! - [`legacy`]: message formats v0/v1: reading produced sets, down-converting for old
//!   consumers.
//!
//! Batches of an ordinary topic are stored exactly as the producer sent them (offsets and
//! the leader epoch written in place); they are decoded to check them, not re-encoded.
//! No I/O here: this crate is deterministic and can be fuzzed.

use std::fmt;

/// Size of the v2 batch header, up to and including the record count.
pub const HEADER_SIZE: usize = 61;
/// Bytes before `batch_length`'s count starts (base offset + batch length).
pub const LOG_OVERHEAD: usize = 12;
/// The only message format this broker stores.
pub const MAGIC_V2: i8 = 2;
/// The CRC-32C of a batch covers its bytes from here (the attributes) to its end.
pub const CRC_COVERED_FROM: usize = ATTRIBUTES;

pub mod builder;
pub mod codec;
pub mod control;
#[doc(hidden)]
pub mod fuzzing;
pub mod legacy;
pub mod record;
pub mod validate;
mod varint;

pub use validate::{validate_produce, ProduceError, ProduceErrorKind, ProducePolicy, Validated};

// Byte offsets of the header fields (Kafka's DefaultRecordBatch layout).
pub(crate) const BASE_OFFSET: usize = 0;
pub(crate) const BATCH_LENGTH: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
pub(crate) const MAGIC: usize = 16;
pub(crate) const CRC: usize = 17;
pub(crate) const ATTRIBUTES: usize = 21;
pub(crate) const LAST_OFFSET_DELTA: usize = 23;
pub(crate) const BASE_TIMESTAMP: usize = 27;
pub(crate) const MAX_TIMESTAMP: usize = 35;
pub(crate) const PRODUCER_ID: usize = 43;
pub(crate) const PRODUCER_EPOCH: usize = 51;
pub(crate) const BASE_SEQUENCE: usize = 53;
pub(crate) const RECORDS_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub const TRANSACTIONAL_BIT: i16 = 0x10;
pub const CONTROL_BIT: i16 = 0x20;

/// Why a batch was refused. The broker maps these to Kafka error codes at its boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("record batch at byte {position} is truncated: {available} bytes left, batch needs {needed}")]
    Truncated {
        position: usize,
        available: usize,
        needed: usize,
    },
    #[error("record batch at byte {position} has an invalid length {length}")]
    InvalidLength { position: usize, length: i32 },
    #[error("message format v{magic} is not supported; this broker stores only record batch v2 (magic 2)")]
    UnsupportedMagic { magic: i8 },
    #[error("record batch at offset position {position} is corrupt: stored CRC {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        position: usize,
        stored: u32,
        computed: u32,
    },
    #[error("record batch at byte {position} has {count} records but a last offset delta of {last_offset_delta}")]
    InconsistentCount {
        position: usize,
        count: i32,
        last_offset_delta: i32,
    },
    #[error("record batch at byte {position} has an unknown compression codec id {codec}")]
    UnknownCompression { position: usize, codec: i16 },
    #[error("the record set is empty")]
    Empty,
}

/// Compression codec from the batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// The codec named by a `compression.type` value (`uncompressed` is `None`); `None` for
    /// `producer` or an unknown name.
    pub fn from_config(name: &str) -> Option<Compression> {
        match name {
            "uncompressed" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub(crate) fn from_attributes(attributes: i16) -> Option<Compression> {
        Compression::from_id(attributes & COMPRESSION_MASK)
    }

    /// The codec of Kafka's id: a batch's attribute bits, and `offsets.topic.compression.codec`.
    pub fn from_id(id: i16) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// Which timestamp a batch carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The decoded header of one v2 record batch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Length of the batch after the `batch_length` field itself.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl fmt::Debug for BatchHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchHeader")
            .field("base_offset", &self.base_offset)
            .field("last_offset_delta", &self.last_offset_delta)
            .field("records_count", &self.records_count)
            .field("batch_length", &self.batch_length)
            .field("compression", &self.compression())
            .field("max_timestamp", &self.max_timestamp)
            .field("producer_id", &self.producer_id)
            .field("base_sequence", &self.base_sequence)
            .finish()
    }
}

impl BatchHeader {
    /// Total size of the batch in bytes, header included.
    pub fn size_in_bytes(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    /// Saturating: a corrupt header (a base offset near `i64::MAX`, which the CRC does not
    /// cover) must not overflow; the callers refuse offsets outside their segment.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(self.attributes)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
    /// True when the producer asked for idempotence (a producer id is set).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// Sequence number of the last record (wrapping as Kafka's does at i32::MAX).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }

    /// Reads a header from the first [`HEADER_SIZE`] bytes of `bytes`, without validation.
    pub fn read(bytes: &[u8]) -> Option<BatchHeader> {
        if bytes.len() < HEADER_SIZE {
            return None;
        }
        Some(BatchHeader {
            base_offset: read_i64(bytes, BASE_OFFSET),
            batch_length: read_i32(bytes, BATCH_LENGTH),
            partition_leader_epoch: read_i32(bytes, PARTITION_LEADER_EPOCH),
            magic: bytes[MAGIC] as i8,
            crc: read_i32(bytes, CRC) as u32,
            attributes: read_i16(bytes, ATTRIBUTES),
            last_offset_delta: read_i32(bytes, LAST_OFFSET_DELTA),
            base_timestamp: read_i64(bytes, BASE_TIMESTAMP),
            max_timestamp: read_i64(bytes, MAX_TIMESTAMP),
            producer_id: read_i64(bytes, PRODUCER_ID),
            producer_epoch: read_i16(bytes, PRODUCER_EPOCH),
            base_sequence: read_i32(bytes, BASE_SEQUENCE),
            records_count: read_i32(bytes, RECORDS_COUNT),
        })
    }
}

/// A validated batch inside a record set: its header and its byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRef {
    pub header: BatchHeader,
    /// Byte position of the batch within the record set.
    pub position: usize,
}

impl BatchRef {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.position..self.position + self.header.size_in_bytes()
    }
}

/// Validates every batch of a stored or replicated record set (a follower's fetch, recovery):
/// complete batches only, magic 2, a known codec, a record count the offset range can hold
/// and a correct CRC-32C. Returns the batches in order. The records are not decoded: the
/// leader did that when it accepted them ([`validate::validate_produce`]).
pub fn validate_record_set(bytes: &[u8]) -> Result<Vec<BatchRef>, RecordsError> {
    if bytes.is_empty() {
        return Err(RecordsError::Empty);
    }
    let mut batches = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let batch = validate_batch_at(bytes, position)?;
        position += batch.header.size_in_bytes();
        batches.push(batch);
    }
    Ok(batches)
}

/// Validates the one batch that starts at `position`.
pub fn validate_batch_at(bytes: &[u8], position: usize) -> Result<BatchRef, RecordsError> {
    let header = read_batch_header_at(bytes, position)?;
    let batch = &bytes[position..position + header.size_in_bytes()];
    if header.compression().is_none() {
        return Err(RecordsError::UnknownCompression {
            position,
            codec: header.attributes & COMPRESSION_MASK,
        });
    }
    // A producer's batch has count = lastOffsetDelta + 1 (checked on produce); a cleaned one
    // keeps its offset range with fewer records, down to none (Kafka keeps empty batches that
    // carry a producer's last sequence).
    if header.records_count < 0
        || header.last_offset_delta < 0
        || i64::from(header.records_count) > i64::from(header.last_offset_delta) + 1
    {
        return Err(RecordsError::InconsistentCount {
            position,
            count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let computed = crc32c::crc32c(&batch[ATTRIBUTES..]);
    if computed != header.crc {
        return Err(RecordsError::CrcMismatch {
            position,
            stored: header.crc,
            computed,
        });
    }
    Ok(BatchRef { header, position })
}

/// Reads the header of the batch at `position`, checking only that the whole batch is present
/// and is magic 2. Used by log recovery too, where a short batch marks a torn tail.
pub fn read_batch_header_at(bytes: &[u8], position: usize) -> Result<BatchHeader, RecordsError> {
    let available = bytes.len().saturating_sub(position);
    if available < LOG_OVERHEAD + 5 {
        return Err(RecordsError::Truncated {
            position,
            available,
            needed: HEADER_SIZE,
        });
    }
    let rest = &bytes[position..];
    let length = read_i32(rest, BATCH_LENGTH);
    let magic = rest[MAGIC] as i8;
    if magic != MAGIC_V2 {
        return Err(RecordsError::UnsupportedMagic { magic });
    }
    if length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(RecordsError::InvalidLength { position, length });
    }
    let needed = LOG_OVERHEAD + length as usize;
    if available < needed {
        return Err(RecordsError::Truncated {
            position,
            available,
            needed,
        });
    }
    Ok(BatchHeader::read(rest).expect("length checked above"))
}

/// Why the records of a stored batch could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Header(#[from] RecordsError),
    #[error(transparent)]
    Codec(#[from] codec::CodecError),
    #[error(transparent)]
    Framing(#[from] record::FramingError),
}

/// The records section of one whole batch, decompressed when the batch is compressed.
pub fn records_section(batch: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, DecodeError> {
    let header = read_batch_header_at(batch, 0)?;
    let payload = &batch[HEADER_SIZE..header.size_in_bytes()];
    match header.compression() {
        Some(Compression::None) => Ok(std::borrow::Cow::Borrowed(payload)),
        Some(codec) => Ok(std::borrow::Cow::Owned(codec::decompress(
            codec,
            payload,
            MAGIC_V2,
            codec::MAX_DECOMPRESSED_BYTES,
        )?)),
        None => Err(RecordsError::UnknownCompression {
            position: 0,
            codec: header.attributes & COMPRESSION_MASK,
        }
        .into()),
    }
}

/// The (timestamp, offset) of each record of one whole batch, in order; under
/// LogAppendTime every record has the batch's max timestamp, as clients read it.
pub fn record_timestamps(batch: &[u8]) -> Result<Vec<(i64, i64)>, DecodeError> {
    let header = read_batch_header_at(batch, 0)?;
    let section = records_section(batch)?;
    let mut out = Vec::with_capacity(header.records_count.clamp(0, 1 << 16) as usize);
    record::for_each_record(&section, header.records_count, |_, r| {
        let ts = match header.timestamp_type() {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => header.base_timestamp.wrapping_add(r.timestamp_delta),
        };
        out.push((ts, header.base_offset + i64::from(r.offset_delta)));
        Ok(())
    })?;
    Ok(out)
}

/// Assigns offsets to validated batches in place: batch `i` gets the next offset after batch
/// `i-1`, starting at `first_offset`, and every batch gets `partition_leader_epoch`. Both fields
/// lie outside the CRC, so no checksum changes. With `log_append_time_ms` set (the topic's
/// `message.timestamp.type=LogAppendTime`), the batch is marked LogAppendTime with that max
/// timestamp and its CRC is recomputed, as Kafka does. Returns the next offset to assign.
pub fn assign_offsets(
    bytes: &mut [u8],
    batches: &[BatchRef],
    first_offset: i64,
    partition_leader_epoch: i32,
    log_append_time_ms: Option<i64>,
) -> i64 {
    let mut next = first_offset;
    for batch in batches {
        let range = batch.range();
        let b = &mut bytes[range];
        write_i64(b, BASE_OFFSET, next);
        write_i32(b, PARTITION_LEADER_EPOCH, partition_leader_epoch);
        if let Some(now) = log_append_time_ms {
            let attributes = read_i16(b, ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
            write_i16(b, ATTRIBUTES, attributes);
            write_i64(b, MAX_TIMESTAMP, now);
            let crc = crc32c::crc32c(&b[ATTRIBUTES..]);
            write_i32(b, CRC, crc as i32);
        }
        next += i64::from(batch.header.last_offset_delta) + 1;
    }
    next
}

pub(crate) fn read_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn read_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn read_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
pub(crate) fn write_i16(b: &mut [u8], at: usize, v: i16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
pub(crate) fn write_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
pub(crate) fn write_i64(b: &mut [u8], at: usize, v: i64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(test)]
mod tests;
