//! What the leader checks before it acknowledges a produced record set: Kafka 2.8's
//! `Log.analyzeAndValidateRecords` and `LogValidator`, on our side.
//!
//! Every batch: magic, length, CRC, base offset 0, a record count that matches its offset
//! range, no control batch, a sequence when a producer id is set. Every record, compressed
//! or not (compressed batches are decoded): its framing (lengths within the batch, the body
//! read exactly, no bytes after the last record), offset deltas 0..n-1, a key on a compacted
//! topic, a timestamp within `message.timestamp.difference.max.ms`. The batch's max timestamp
//! is set to its records' largest, as Kafka does.
//!
//! What comes out is either the producer's bytes (checked, fixed in place) or, when Kafka
//! would rebuild the batch, a new batch: the topic's `compression.type` differs from the
//! producer's codec, or the set is in message format v0/v1 (converted up to v2).
//!
//! Where we differ from Kafka 2.8, on purpose:
//! - a compressed payload that cannot be decoded is CORRUPT_MESSAGE (Kafka lets the codec's
//!   exception escape as UNKNOWN_SERVER_ERROR, which clients cannot act on);
//! - a v2 batch whose offset deltas are not 0..n-1 is INVALID_RECORD (Kafka rewrites a
//!   compressed one and stores an uncompressed one as it is, so consumers then compute wrong
//!   offsets from it; no client writes such batches);
//! - one payload may decompress to at most [`codec::MAX_DECOMPRESSED_BYTES`];
//! - a key, value or header value length below -1 is INVALID_RECORD, naming the record and
//!   the length (Kafka's `Utils.readBytes` reads any negative length as null and stores the
//!   record; librdkafka then takes the batch for a partial message, refetches the same offset
//!   with ever larger sizes and delivers nothing, so one such record stalls the partition for
//!   every librdkafka consumer). Only produce checks this: a batch an older version stored
//!   stays readable (recovery and followers check batch headers and CRCs only, the cleaner
//!   and fetch read any negative length as null).

use crate::builder::{BatchBuilder, BatchSpec, NewRecord};
use crate::codec::{self, MAX_DECOMPRESSED_BYTES};
use crate::legacy::{self, LegacyError};
use crate::record::{for_each_record, FramingError};
use crate::{
    read_batch_header_at, validate_record_set, write_i32, write_i64, BatchHeader, BatchRef,
    Compression, RecordsError, TimestampType, CRC, MAGIC, MAX_TIMESTAMP,
};

/// The topic settings a produced record set is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducePolicy {
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub compacted: bool,
    /// `message.timestamp.type=LogAppendTime` (CreateTime otherwise).
    pub log_append_time: bool,
    /// `message.timestamp.difference.max.ms` (checked under CreateTime only).
    pub timestamp_difference_max_ms: i64,
    /// `compression.type`: `None` for `producer` (keep the producer's codec).
    pub target_compression: Option<Compression>,
    /// The broker's clock.
    pub now_ms: i64,
}

impl Default for ProducePolicy {
    fn default() -> Self {
        ProducePolicy {
            compacted: false,
            log_append_time: false,
            timestamp_difference_max_ms: i64::MAX,
            target_compression: None,
            now_ms: 0,
        }
    }
}

/// The Kafka error a refused record set is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceErrorKind {
    /// CORRUPT_MESSAGE (2).
    CorruptMessage,
    /// INVALID_RECORD (87).
    InvalidRecord,
    /// INVALID_TIMESTAMP (32).
    InvalidTimestamp,
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT (43).
    UnsupportedForMessageFormat,
    /// UNSUPPORTED_COMPRESSION_TYPE (76).
    UnsupportedCompressionType,
}

/// One refused record: its index in its batch and why (Produce v8 `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Why a produced record set was refused. Nothing of it may be appended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProduceError {
    pub kind: ProduceErrorKind,
    pub message: String,
    /// The records at fault, when the refusal is per record.
    pub record_errors: Vec<RecordError>,
}

impl ProduceError {
    fn new(kind: ProduceErrorKind, message: impl Into<String>) -> ProduceError {
        ProduceError {
            kind,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }
    fn invalid(message: impl Into<String>) -> ProduceError {
        ProduceError::new(ProduceErrorKind::InvalidRecord, message)
    }
}

impl From<RecordsError> for ProduceError {
    fn from(e: RecordsError) -> Self {
        ProduceError::new(ProduceErrorKind::CorruptMessage, e.to_string())
    }
}

impl From<FramingError> for ProduceError {
    fn from(e: FramingError) -> Self {
        ProduceError::invalid(e.to_string())
    }
}

/// A validated record set, ready for offset assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validated {
    /// The producer's bytes, checked and fixed in place; their batches.
    InPlace(Vec<BatchRef>),
    /// A new record set (one v2 batch, base offset 0) to append instead, and its batches.
    Rebuilt(Vec<u8>, Vec<BatchRef>),
}

/// Validates a produced record set (Kafka's `LogValidator`), fixing batch max timestamps in
/// place, or rebuilding it when Kafka would (see the module docs).
pub fn validate_produce(
    bytes: &mut [u8],
    policy: &ProducePolicy,
) -> Result<Validated, ProduceError> {
    if bytes.is_empty() {
        return Err(ProduceError::invalid("Record batch has no batches at all"));
    }
    let magic = match bytes.get(MAGIC) {
        Some(&m) => m as i8,
        None => {
            return Err(ProduceError::new(
                ProduceErrorKind::CorruptMessage,
                format!(
                    "the record set is {} bytes, shorter than a batch header",
                    bytes.len()
                ),
            ))
        }
    };
    match magic {
        0 | 1 => validate_legacy(bytes, policy),
        2 => validate_v2(bytes, policy),
        other => Err(ProduceError::new(
            ProduceErrorKind::CorruptMessage,
            format!("Invalid magic found in record: {other}"),
        )),
    }
}

fn validate_v2(bytes: &mut [u8], policy: &ProducePolicy) -> Result<Validated, ProduceError> {
    // Batch level (Log.analyzeAndValidateRecords): whole batches, base offset 0, CRC.
    let mut position = 0;
    let mut batches = Vec::new();
    while position < bytes.len() {
        let header = match read_batch_header_at(bytes, position) {
            Err(RecordsError::UnsupportedMagic { magic }) if magic == 0 || magic == 1 => {
                return Err(ProduceError::invalid(format!(
                    "Batch magic {magic} is not the same as the first batch'es magic byte 2"
                )))
            }
            other => other?,
        };
        if header.base_offset != 0 {
            return Err(ProduceError::invalid(format!(
                "The baseOffset of the record batch in the append should be 0, but it is {}",
                header.base_offset
            )));
        }
        let range = position..position + header.size_in_bytes();
        let computed = crc32c::crc32c(&bytes[range.start + crate::ATTRIBUTES..range.end]);
        if computed != header.crc {
            return Err(RecordsError::CrcMismatch {
                position,
                stored: header.crc,
                computed,
            }
            .into());
        }
        if header.compression().is_none() {
            return Err(RecordsError::UnknownCompression {
                position,
                codec: header.attributes & 0x07,
            }
            .into());
        }
        let batch = BatchRef { header, position };
        position += header.size_in_bytes();
        batches.push(batch);
    }
    let source = batches
        .iter()
        .filter_map(|b| b.header.compression())
        .rfind(|c| *c != Compression::None)
        .unwrap_or(Compression::None);
    let target = policy.target_compression.unwrap_or(source);
    if batches.len() > 1 {
        return Err(ProduceError::invalid(
            "Compressed outer record has more than one batch",
        ));
    }
    let batch = batches[0];
    check_batch_header(&batch.header)?;
    let payload = &bytes[batch.position + crate::HEADER_SIZE..batch.range().end];
    let decompressed;
    let records_bytes: &[u8] = if source == Compression::None {
        payload
    } else {
        decompressed = codec::decompress(source, payload, 2, MAX_DECOMPRESSED_BYTES)
            .map_err(|e| ProduceError::new(ProduceErrorKind::CorruptMessage, e.to_string()))?;
        &decompressed
    };
    let header = batch.header;
    let mut max_timestamp = -1i64;
    let mut errors = Vec::new();
    let mut rebuilt = (target != source).then(|| {
        let mut spec = BatchSpec::like(&header);
        spec.compression = target;
        spec.timestamp_type = topic_timestamp_type(policy);
        spec.log_append_time = policy.log_append_time.then_some(policy.now_ms);
        spec.last_offset = None;
        BatchBuilder::new(spec)
    });
    let mut headers_buf = Vec::new();
    for_each_record(records_bytes, header.records_count, |index, record| {
        if record.offset_delta != index {
            return Err(FramingError::Structure {
                index,
                reason: format!(
                    "offset delta {} where {index} was expected (deltas must be 0..{})",
                    record.offset_delta, header.records_count
                ),
            });
        }
        if let Some((field, length)) = record.invalid_null_length() {
            return Err(FramingError::InvalidNullLength {
                index,
                field,
                length,
            });
        }
        let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
        let offset = header.base_offset + i64::from(record.offset_delta);
        if let Some(e) = check_record(
            policy,
            header.timestamp_type(),
            index,
            record.key.is_some(),
            timestamp,
            offset,
        ) {
            errors.push(e);
        }
        max_timestamp = max_timestamp.max(timestamp);
        if let Some(b) = rebuilt.as_mut() {
            headers_buf.clear();
            headers_buf.extend(record.headers());
            b.push(&NewRecord {
                offset,
                timestamp,
                key: record.key,
                value: record.value,
                headers: &headers_buf,
            });
        }
        Ok(())
    })?;
    record_errors(errors)?;
    if let Some(builder) = rebuilt {
        let out = builder.build();
        let refs = validate_record_set(&out).expect("a batch we just built is valid");
        return Ok(Validated::Rebuilt(out, refs));
    }
    // In place: the batch's max timestamp becomes its records' largest (Kafka's
    // setMaxTimestamp; LogAppendTime is stamped later, with the offsets).
    if !policy.log_append_time && header.max_timestamp != max_timestamp {
        let b = &mut bytes[batch.range()];
        write_i64(b, MAX_TIMESTAMP, max_timestamp);
        let crc = crc32c::crc32c(&b[crate::ATTRIBUTES..]);
        write_i32(b, CRC, crc as i32);
    }
    // Checked above (one batch, CRC included); read its header again for the new max timestamp.
    let header = BatchHeader::read(&bytes[batch.position..]).expect("a whole batch");
    Ok(Validated::InPlace(vec![BatchRef {
        header,
        position: batch.position,
    }]))
}

/// Kafka's `LogValidator.validateBatch` for a client's v2 batch.
fn check_batch_header(h: &BatchHeader) -> Result<(), ProduceError> {
    let count_from_offsets = i64::from(h.last_offset_delta) + 1;
    if count_from_offsets <= 0 {
        return Err(ProduceError::invalid(format!(
            "Batch has an invalid offset range: [{}, {}]",
            h.base_offset,
            h.last_offset()
        )));
    }
    if h.records_count <= 0 {
        return Err(ProduceError::invalid(format!(
            "Invalid reported count for record batch: {}",
            h.records_count
        )));
    }
    if count_from_offsets != i64::from(h.records_count) {
        return Err(ProduceError::invalid(format!(
            "Inconsistent batch offset range [{}, {}] and count of records {}",
            h.base_offset,
            h.last_offset(),
            h.records_count
        )));
    }
    if h.is_control() {
        return Err(ProduceError::invalid(
            "Clients are not allowed to write control records",
        ));
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(ProduceError::invalid(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            h.base_sequence, h.producer_id
        )));
    }
    Ok(())
}

fn topic_timestamp_type(policy: &ProducePolicy) -> TimestampType {
    if policy.log_append_time {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    }
}

/// Kafka's `validateKey` and `validateTimestamp` for one record.
fn check_record(
    policy: &ProducePolicy,
    batch_timestamp_type: TimestampType,
    index: i32,
    has_key: bool,
    timestamp: i64,
    offset: i64,
) -> Option<(ProduceErrorKind, RecordError)> {
    if policy.compacted && !has_key {
        return Some((
            ProduceErrorKind::InvalidRecord,
            RecordError {
                batch_index: index,
                message: "Compacted topic cannot accept message without key.".to_owned(),
            },
        ));
    }
    let diff = policy.timestamp_difference_max_ms;
    let now = policy.now_ms;
    if !policy.log_append_time
        && timestamp != -1
        && diff < i64::MAX
        && timestamp.abs_diff(now) > diff as u64
    {
        return Some((
            ProduceErrorKind::InvalidTimestamp,
            RecordError {
                batch_index: index,
                message: format!(
                    "Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{}, {}]",
                    now.saturating_sub(diff),
                    now.saturating_add(diff)
                ),
            },
        ));
    }
    if batch_timestamp_type == TimestampType::LogAppendTime {
        return Some((
            ProduceErrorKind::InvalidTimestamp,
            RecordError {
                batch_index: index,
                message: "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.".to_owned(),
            },
        ));
    }
    None
}

/// Kafka's `processRecordErrors`: any refused record refuses the batch.
fn record_errors(errors: Vec<(ProduceErrorKind, RecordError)>) -> Result<(), ProduceError> {
    if errors.is_empty() {
        return Ok(());
    }
    let timestamp = errors
        .iter()
        .any(|(k, _)| *k == ProduceErrorKind::InvalidTimestamp);
    let (kind, message) = if timestamp {
        (
            ProduceErrorKind::InvalidTimestamp,
            "One or more records have been rejected due to invalid timestamp",
        )
    } else {
        (
            ProduceErrorKind::InvalidRecord,
            "One or more records have been rejected",
        )
    };
    Err(ProduceError {
        kind,
        message: message.to_owned(),
        record_errors: errors.into_iter().map(|(_, e)| e).collect(),
    })
}

/// Magic 0/1: checked as Kafka does and converted up to one v2 batch.
fn validate_legacy(bytes: &[u8], policy: &ProducePolicy) -> Result<Validated, ProduceError> {
    let set = legacy::read_produced_set(bytes).map_err(|e| match e {
        LegacyError::Corrupt(m) => ProduceError::new(ProduceErrorKind::CorruptMessage, m),
        LegacyError::Invalid(m) => ProduceError::invalid(m),
        LegacyError::UnsupportedCompression(m) => {
            ProduceError::new(ProduceErrorKind::UnsupportedCompressionType, m)
        }
    })?;
    let batch_type = if set.log_append_time {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    };
    let mut errors = Vec::new();
    for (i, r) in set.records.iter().enumerate() {
        // Uncompressed, every message is a batch of its own (index 0); compressed, the index
        // is the position in the wrapper.
        let index = if set.compression == Compression::None {
            0
        } else {
            i as i32
        };
        if let Some(e) = check_record(
            policy,
            batch_type,
            index,
            r.key.is_some(),
            r.timestamp,
            i as i64,
        ) {
            errors.push(e);
            if set.compression == Compression::None {
                break; // Kafka stops at the first refused uncompressed message
            }
        }
    }
    record_errors(errors)?;
    let mut spec = BatchSpec::new(0);
    spec.compression = policy.target_compression.unwrap_or(set.compression);
    spec.timestamp_type = topic_timestamp_type(policy);
    spec.log_append_time = policy.log_append_time.then_some(policy.now_ms);
    let mut builder = BatchBuilder::new(spec);
    for (i, r) in set.records.iter().enumerate() {
        builder.push(&NewRecord {
            offset: i as i64,
            timestamp: r.timestamp,
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: &[],
        });
    }
    let out = builder.build();
    let refs = validate_record_set(&out).expect("a batch we just built is valid");
    Ok(Validated::Rebuilt(out, refs))
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
