//! Message formats v0 and v1 (magic 0 and 1), which old clients still speak: reading the
//! message sets a Produce v0–v2 request may carry, and writing them for a Fetch v0–v3
//! consumer (down-conversion).
//!
//! ```text
//! offset: int64   size: int32 (bytes after this field)
//! crc: uint32 (CRC-32 IEEE of magic..end)   magic: int8   attributes: int8 (bits 0-2 codec,
//! bit 3 timestamp type, v1 only)   [timestamp: int64, v1 only]
//! key: int32 length (-1 null) + bytes   value: int32 length (-1 null) + bytes
//! ```
//!
//! Uncompressed, each message stands alone. Compressed, one *wrapper* message's value is the
//! compressed message set of its *inner* messages; under magic 1 the inner offsets are
//! relative (0..n-1) and the wrapper carries the absolute offset of the last one, under
//! magic 0 every offset is absolute.

use crate::codec::{self, MAX_DECOMPRESSED_BYTES};
use crate::{Compression, TimestampType, LOG_OVERHEAD};

/// Bytes of a v0 message after the size field, without key and value.
pub const OVERHEAD_V0: usize = 14;
/// Bytes of a v1 message after the size field, without key and value.
pub const OVERHEAD_V1: usize = 22;

const COMPRESSION_MASK: i8 = 0x07;
const TIMESTAMP_TYPE_BIT: i8 = 0x08;

/// Why a legacy message set was refused, with the Kafka error it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LegacyError {
    /// CORRUPT_MESSAGE: a CRC mismatch or a size below the minimum.
    #[error("{0}")]
    Corrupt(String),
    /// INVALID_RECORD: the structure is wrong (bad lengths, mixed magic, nested compression).
    #[error("{0}")]
    Invalid(String),
    /// UNSUPPORTED_COMPRESSION_TYPE.
    #[error("{0}")]
    UnsupportedCompression(String),
}

/// One message of a legacy set, borrowed from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub offset: i64,
    pub magic: i8,
    pub attributes: i8,
    /// -1 under magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The whole entry, offset and size included.
    pub entry: &'a [u8],
}

impl Message<'_> {
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(i16::from(self.attributes & COMPRESSION_MASK))
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.magic >= 1 && self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
}

/// Reads the message at `*pos` (checking its size and CRC) and moves past it.
pub fn read_message<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<Message<'a>, LegacyError> {
    let start = *pos;
    let rest = &bytes[start..];
    if rest.len() < LOG_OVERHEAD + OVERHEAD_V0 {
        return Err(LegacyError::Corrupt(format!(
            "message set is truncated at byte {start}: {} bytes left",
            rest.len()
        )));
    }
    let offset = i64::from_be_bytes(rest[0..8].try_into().expect("8 bytes"));
    let size = i32::from_be_bytes(rest[8..12].try_into().expect("4 bytes"));
    if size < OVERHEAD_V0 as i32 {
        return Err(LegacyError::Corrupt(format!(
            "Record size {size} is less than the minimum record overhead ({OVERHEAD_V0})"
        )));
    }
    let end = LOG_OVERHEAD + size as usize;
    if rest.len() < end {
        return Err(LegacyError::Corrupt(format!(
            "message at byte {start} is truncated: {} bytes left, it needs {end}",
            rest.len()
        )));
    }
    let body = &rest[LOG_OVERHEAD..end];
    let stored = u32::from_be_bytes(body[0..4].try_into().expect("4 bytes"));
    let magic = body[4] as i8;
    if !(0..=1).contains(&magic) {
        return Err(LegacyError::Invalid(format!(
            "message at byte {start} has magic {magic} inside a magic 0/1 message set"
        )));
    }
    if magic == 1 && body.len() < OVERHEAD_V1 {
        return Err(LegacyError::Corrupt(format!(
            "Record size {size} is less than the minimum record overhead ({OVERHEAD_V1})"
        )));
    }
    let computed = crc32fast::hash(&body[4..]);
    if computed != stored {
        return Err(LegacyError::Corrupt(format!(
            "Record is corrupt (stored crc = {stored}, computed crc = {computed})"
        )));
    }
    let attributes = body[5] as i8;
    let mut p = 6;
    let timestamp = if magic == 1 {
        p += 8;
        i64::from_be_bytes(body[6..14].try_into().expect("8 bytes"))
    } else {
        -1
    };
    let invalid = |what: &str| LegacyError::Invalid(format!("message at byte {start}: {what}"));
    let key = read_bytes(body, &mut p).ok_or_else(|| invalid("the key runs past the message"))?;
    let value =
        read_bytes(body, &mut p).ok_or_else(|| invalid("the value runs past the message"))?;
    if p != body.len() {
        return Err(invalid(&format!(
            "{} bytes follow the value",
            body.len() - p
        )));
    }
    *pos = start + end;
    Ok(Message {
        offset,
        magic,
        attributes,
        timestamp,
        key,
        value,
        entry: &rest[..end],
    })
}

fn read_bytes<'a>(body: &'a [u8], p: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = i32::from_be_bytes(body.get(*p..*p + 4)?.try_into().ok()?);
    *p += 4;
    if len < 0 {
        return Some(None);
    }
    let b = body.get(*p..*p + len as usize)?;
    *p += b.len();
    Some(Some(b))
}

/// A record read out of a legacy set, ready to be written into a v2 batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord<'a> {
    /// -1 under magic 0.
    pub timestamp: i64,
    pub key: Option<std::borrow::Cow<'a, [u8]>>,
    pub value: Option<std::borrow::Cow<'a, [u8]>>,
}

/// What a produced legacy message set holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacySet<'a> {
    pub magic: i8,
    /// The wrapper's codec (`None` for an uncompressed set).
    pub compression: Compression,
    /// Whether any message (or wrapper) claims LogAppendTime, which a producer may not set.
    pub log_append_time: bool,
    pub records: Vec<LegacyRecord<'a>>,
}

/// Reads a produced magic 0/1 message set: every message's CRC, a single magic throughout,
/// and for a compressed set exactly one wrapper whose inner messages are uncompressed, of the
/// wrapper's magic, each with a valid CRC (Kafka's `LogValidator` on the compressed path).
pub fn read_produced_set(bytes: &[u8]) -> Result<LegacySet<'_>, LegacyError> {
    let mut pos = 0;
    let mut messages = Vec::new();
    while pos < bytes.len() {
        messages.push(read_message(bytes, &mut pos)?);
    }
    let Some(first) = messages.first().copied() else {
        return Err(LegacyError::Invalid(
            "Record batch has no batches at all".into(),
        ));
    };
    let mut set = LegacySet {
        magic: first.magic,
        compression: Compression::None,
        log_append_time: false,
        records: Vec::with_capacity(messages.len()),
    };
    for m in &messages {
        if m.magic != first.magic {
            return Err(LegacyError::Invalid(format!(
                "Batch magic {} is not the same as the first batch'es magic byte {}",
                m.magic, first.magic
            )));
        }
    }
    if let Some(m) = messages.iter().find(|m| m.compression().is_none()) {
        return Err(LegacyError::Invalid(format!(
            "message at offset {} has an unknown compression codec id {}",
            m.offset,
            m.attributes & COMPRESSION_MASK
        )));
    }
    // Kafka takes the set's codec from its compressed messages (the last one that is).
    let codec = messages
        .iter()
        .filter_map(Message::compression)
        .rfind(|c| *c != Compression::None)
        .unwrap_or(Compression::None);
    if codec == Compression::None {
        for m in &messages {
            set.log_append_time |= m.timestamp_type() == TimestampType::LogAppendTime;
            set.records.push(LegacyRecord {
                timestamp: m.timestamp,
                key: m.key.map(Into::into),
                value: m.value.map(Into::into),
            });
        }
        return Ok(set);
    }
    if codec == Compression::Zstd {
        return Err(LegacyError::UnsupportedCompression(format!(
            "ZStandard compression is not supported for message format v{}",
            first.magic
        )));
    }
    if messages.len() > 1 {
        return Err(LegacyError::Invalid(
            "Compressed outer record has more than one batch".into(),
        ));
    }
    set.compression = codec;
    set.log_append_time = first.timestamp_type() == TimestampType::LogAppendTime;
    let Some(payload) = first.value else {
        return Err(LegacyError::Invalid(
            "Found invalid compressed record set with null value".into(),
        ));
    };
    let inner = codec::decompress(codec, payload, first.magic, MAX_DECOMPRESSED_BYTES)
        .map_err(|e| LegacyError::Corrupt(e.to_string()))?;
    let mut p = 0;
    let mut index = 0;
    while p < inner.len() {
        let m = read_message(&inner, &mut p).map_err(|e| match e {
            LegacyError::Corrupt(msg) => {
                LegacyError::Corrupt(format!("inner message {index}: {msg}"))
            }
            other => other,
        })?;
        if m.magic != first.magic {
            return Err(LegacyError::Invalid(format!(
                "Record {index}'s magic {} does not match outer magic {}",
                m.magic, first.magic
            )));
        }
        if m.compression() != Some(Compression::None) {
            return Err(LegacyError::Invalid(format!(
                "Compressed outer record should not have an inner record with a compression attribute set (record {index})"
            )));
        }
        // Under a LogAppendTime wrapper the inner records take the wrapper's timestamp.
        let timestamp = if set.log_append_time {
            first.timestamp
        } else {
            m.timestamp
        };
        set.records.push(LegacyRecord {
            timestamp,
            key: m.key.map(|k| k.to_vec().into()),
            value: m.value.map(|v| v.to_vec().into()),
        });
        index += 1;
    }
    if set.records.is_empty() {
        return Err(LegacyError::Invalid(
            "Found invalid compressed record set with no inner records".into(),
        ));
    }
    Ok(set)
}

/// Appends one message in format `magic` (0 or 1).
pub fn write_message(
    out: &mut Vec<u8>,
    offset: i64,
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let size = if magic == 0 { OVERHEAD_V0 } else { OVERHEAD_V1 }
        + key.map_or(0, <[u8]>::len)
        + value.map_or(0, <[u8]>::len);
    out.reserve(LOG_OVERHEAD + size);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(size as i32).to_be_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic as u8);
    out.push(attributes as u8);
    if magic >= 1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    let crc = crc32fast::hash(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Message attributes for `codec` and `timestamp_type` in format `magic`.
pub fn attributes(magic: i8, codec: Compression, timestamp_type: TimestampType) -> i8 {
    let mut a = codec as i8;
    if magic >= 1 && timestamp_type == TimestampType::LogAppendTime {
        a |= TIMESTAMP_TYPE_BIT;
    }
    a
}

/// A message read out of a legacy set, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedMessage {
    /// The absolute offset (inner messages of a magic 1 wrapper resolved).
    pub offset: i64,
    pub magic: i8,
    pub attributes: i8,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

impl OwnedMessage {
    fn from_message(offset: i64, m: &Message<'_>) -> OwnedMessage {
        OwnedMessage {
            offset,
            magic: m.magic,
            attributes: m.attributes,
            timestamp: m.timestamp,
            key: m.key.map(<[u8]>::to_vec),
            value: m.value.map(<[u8]>::to_vec),
        }
    }
}

/// The messages of a legacy set as a client reads them: uncompressed messages as they are,
/// compressed wrappers expanded into their inner messages with absolute offsets (Kafka's
/// `AbstractLegacyRecordBatch` deep iterator). A message cut off at the end of the set (a
/// fetch response may end inside one) ends the iteration, as clients treat it.
pub fn deep_messages(bytes: &[u8]) -> Result<Vec<OwnedMessage>, LegacyError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let size = bytes
            .get(pos + 8..pos + 12)
            .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")));
        match size {
            Some(size) if size >= 0 && pos + LOG_OVERHEAD + size as usize <= bytes.len() => {}
            _ => break,
        }
        let m = read_message(bytes, &mut pos)?;
        match m.compression() {
            Some(Compression::None) => out.push(OwnedMessage::from_message(m.offset, &m)),
            Some(codec) => {
                let inner = codec::decompress(
                    codec,
                    m.value.unwrap_or_default(),
                    m.magic,
                    MAX_DECOMPRESSED_BYTES,
                )
                .map_err(|e| LegacyError::Corrupt(e.to_string()))?;
                let mut p = 0;
                let mut inner_messages = Vec::new();
                while p < inner.len() {
                    let i = read_message(&inner, &mut p)?;
                    inner_messages.push(OwnedMessage::from_message(i.offset, &i));
                }
                let last_relative = inner_messages.last().map_or(0, |i| i.offset);
                for mut i in inner_messages {
                    if m.magic == 1 {
                        i.offset += m.offset - last_relative;
                    }
                    if m.timestamp_type() == TimestampType::LogAppendTime {
                        i.timestamp = m.timestamp;
                    }
                    out.push(i);
                }
            }
            None => {
                return Err(LegacyError::Invalid(format!(
                    "unknown codec in message at offset {}",
                    m.offset
                )))
            }
        }
    }
    Ok(out)
}

/// What down-conversion produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownConverted {
    /// The converted message set.
    pub bytes: Vec<u8>,
    /// Bytes of the first converted batch (a response carries at least that much).
    pub first_size: usize,
    /// Records converted.
    pub records: usize,
}

/// Why stored batches could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownConvertError {
    /// UNSUPPORTED_COMPRESSION_TYPE: zstd has no magic 0/1 form.
    #[error("Down-conversion of zstandard-compressed batches is not supported")]
    Zstd,
    /// A stored batch could not be read (corrupt on disk).
    #[error("{0}")]
    Corrupt(String),
}

/// Converts stored v2 batches to message format `to_magic` (0 or 1) for an old consumer,
/// as Kafka's `RecordsUtil.downConvert`: control batches are dropped, an uncompressed batch
/// becomes one message per record (only records at or after `first_offset`), a compressed
/// one becomes one wrapper message of the same codec holding all its records; headers are
/// dropped. Converts batch by batch and stops once `size_hint` bytes are out (at least one
/// batch), so memory stays within one fetch's worth plus one batch. A zstd batch ends the
/// conversion, and is an error when it is the first.
pub fn down_convert(
    stored: &[u8],
    to_magic: i8,
    first_offset: i64,
    size_hint: usize,
) -> Result<DownConverted, DownConvertError> {
    let mut out = DownConverted {
        bytes: Vec::new(),
        first_size: 0,
        records: 0,
    };
    let mut pos = 0;
    while let Some(header) = stored.get(pos..).and_then(crate::BatchHeader::read) {
        let size = header.size_in_bytes();
        let Some(batch) = stored.get(pos..pos + size) else {
            break;
        };
        pos += size;
        if header.is_control() {
            continue;
        }
        let codec = header.compression().ok_or_else(|| {
            DownConvertError::Corrupt(format!(
                "stored batch at offset {} has an unknown codec",
                header.base_offset
            ))
        })?;
        if codec == Compression::Zstd {
            if out.bytes.is_empty() {
                return Err(DownConvertError::Zstd);
            }
            break;
        }
        let payload = &batch[crate::HEADER_SIZE..];
        let decompressed;
        let records_bytes: &[u8] = if codec == Compression::None {
            payload
        } else {
            decompressed = codec::decompress(codec, payload, 2, MAX_DECOMPRESSED_BYTES)
                .map_err(|e| DownConvertError::Corrupt(e.to_string()))?;
            &decompressed
        };
        let records = crate::record::records(records_bytes, header.records_count)
            .map_err(|e| DownConvertError::Corrupt(e.to_string()))?;
        let ts_type = header.timestamp_type();
        let timestamp_of = |delta: i64| {
            if ts_type == TimestampType::LogAppendTime {
                header.max_timestamp
            } else {
                header.base_timestamp + delta
            }
        };
        let selected: Vec<_> = records
            .iter()
            .map(|r| (header.base_offset + i64::from(r.offset_delta), r))
            .filter(|(offset, _)| codec != Compression::None || *offset >= first_offset)
            .collect();
        let Some(&(first, _)) = selected.first() else {
            continue;
        };
        let before = out.bytes.len();
        if codec == Compression::None {
            for (offset, r) in &selected {
                write_message(
                    &mut out.bytes,
                    *offset,
                    to_magic,
                    attributes(to_magic, Compression::None, ts_type),
                    timestamp_of(r.timestamp_delta),
                    r.key,
                    r.value,
                );
            }
        } else {
            let mut inner = Vec::with_capacity(records_bytes.len() + 32 * selected.len());
            let mut max_ts = -1;
            for (offset, r) in &selected {
                let ts = timestamp_of(r.timestamp_delta);
                max_ts = max_ts.max(ts);
                let inner_offset = if to_magic == 0 {
                    *offset
                } else {
                    offset - first
                };
                write_message(
                    &mut inner,
                    inner_offset,
                    to_magic,
                    attributes(to_magic, Compression::None, ts_type),
                    ts,
                    r.key,
                    r.value,
                );
            }
            let last = selected.last().expect("not empty").0;
            let wrapped = codec::compress(codec, &inner, to_magic);
            write_message(
                &mut out.bytes,
                last,
                to_magic,
                attributes(to_magic, codec, ts_type),
                max_ts,
                None,
                Some(&wrapped),
            );
        }
        out.records += selected.len();
        if before == 0 {
            out.first_size = out.bytes.len();
        }
        if out.bytes.len() >= size_hint {
            break;
        }
    }
    Ok(out)
}
