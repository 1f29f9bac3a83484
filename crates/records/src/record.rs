//! Records inside a v2 batch: the framing Kafka's `DefaultRecord.readFrom` checks, read over
//! the (decompressed) bytes that follow the batch header without copying them.
//!
//! ```text
//! length: varint (bytes after this field)
//! attributes: int8 (unused)
//! timestampDelta: varlong   offsetDelta: varint
//! keyLength: varint (-1 = null)   key: bytes
//! valueLength: varint (-1 = null) value: bytes
//! headerCount: varint, then per header: keyLength varint, key, valueLength varint, value
//! ```

use crate::varint::{read_varint, read_varlong, VarintError};

/// Why the records of a batch are not what its header promises (Kafka's
/// `InvalidRecordException` cases, answered INVALID_RECORD).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("Incorrect declared batch size, premature EOF reached (record {index} of {count})")]
    PrematureEof { index: i32, count: i32 },
    #[error("Incorrect declared batch size, records still remaining in file ({extra} bytes after {count} records)")]
    RecordsRemaining { count: i32, extra: usize },
    #[error("Found invalid record structure in record {index}: {reason}")]
    Structure { index: i32, reason: String },
    #[error("Invalid record size in record {index}: expected to read {expected} bytes in record payload, but instead read {read}")]
    SizeMismatch {
        index: i32,
        expected: i32,
        read: usize,
    },
    #[error("Found invalid number of record headers {count} in record {index}")]
    HeaderCount { index: i32, count: i32 },
    #[error("Invalid negative header key size {size} in record {index}")]
    HeaderKeySize { index: i32, size: i32 },
    /// Refused by the leader's produce check only (ours, not Kafka's; see
    /// [`RecordRef::invalid_null_length`]).
    #[error("Invalid {field} length {length} in record {index} (offset delta {index}): the only negative length allowed is -1 (null); librdkafka consumers cannot read past such a record")]
    InvalidNullLength {
        index: i32,
        field: String,
        length: i32,
    },
}

/// One record, borrowed from the batch's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The key and value lengths as written: -1 for null, but any negative length reads as
    /// null (as Kafka reads it), so a stored record with -2 is still read.
    pub key_length: i32,
    pub value_length: i32,
    /// The encoded headers (after the count), and how many there are.
    pub headers: &'a [u8],
    pub header_count: i32,
    /// The whole encoded record, length prefix included.
    pub encoded: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// The headers as (key, value) pairs. The framing was checked when the record was read.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let buf = self.headers;
        let mut pos = 0;
        (0..self.header_count).map_while(move |_| {
            let key_len = read_varint(buf, &mut pos).ok()?;
            let key = buf.get(pos..pos + usize::try_from(key_len).ok()?)?;
            pos += key.len();
            let value_len = read_varint(buf, &mut pos).ok()?;
            let value = if value_len < 0 {
                None
            } else {
                let v = buf.get(pos..pos + value_len as usize)?;
                pos += v.len();
                Some(v)
            };
            Some((key, value))
        })
    }

    /// The first length below -1 in this record (key, value or a header's value), named, or
    /// `None`. Kafka reads any negative length as null and stores such a record; librdkafka
    /// takes it for a partial message and refetches the same offset forever, so the leader
    /// refuses it on produce (a deliberate difference from Kafka). Readers of stored batches
    /// (recovery, followers, the cleaner, fetch) never ask: a log an older version wrote with
    /// such a record stays readable. (A negative header key length is refused by everyone,
    /// as in Kafka's `DefaultRecord.readFrom`.)
    pub fn invalid_null_length(&self) -> Option<(String, i32)> {
        if self.key_length < -1 {
            return Some(("key".to_owned(), self.key_length));
        }
        if self.value_length < -1 {
            return Some(("value".to_owned(), self.value_length));
        }
        let buf = self.headers;
        let mut pos = 0;
        for h in 0..self.header_count {
            let key_len = read_varint(buf, &mut pos).ok()?;
            pos += usize::try_from(key_len).ok()?;
            let value_len = read_varint(buf, &mut pos).ok()?;
            if value_len < -1 {
                return Some((format!("header {h} value"), value_len));
            }
            pos += usize::try_from(value_len).unwrap_or(0);
        }
        None
    }
}

/// Walks `count` records in `bytes` (the records section of a batch, decompressed), checking
/// Kafka's framing: every length within the bytes, the body consumed exactly, and no bytes
/// left after the last record. Calls `visit` with each record in order.
pub fn for_each_record<'a>(
    bytes: &'a [u8],
    count: i32,
    mut visit: impl FnMut(i32, RecordRef<'a>) -> Result<(), FramingError>,
) -> Result<(), FramingError> {
    let mut pos = 0usize;
    for index in 0..count.max(0) {
        let record = read_record(bytes, &mut pos, index, count)?;
        visit(index, record)?;
    }
    if pos != bytes.len() {
        return Err(FramingError::RecordsRemaining {
            count,
            extra: bytes.len() - pos,
        });
    }
    Ok(())
}

/// Collects the records of a batch's (decompressed) records section.
pub fn records(bytes: &[u8], count: i32) -> Result<Vec<RecordRef<'_>>, FramingError> {
    let mut out = Vec::with_capacity(count.clamp(0, 1 << 16) as usize);
    for_each_record(bytes, count, |_, r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

fn read_record<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
    index: i32,
    count: i32,
) -> Result<RecordRef<'a>, FramingError> {
    let start = *pos;
    let eof = || FramingError::PrematureEof { index, count };
    let structure = |reason: &str| FramingError::Structure {
        index,
        reason: reason.to_owned(),
    };
    let varint_err = |e: VarintError, field: &str| match e {
        VarintError::Eof => structure(&format!("the {field} runs past the record")),
        VarintError::TooLong => structure(&format!("the {field} varint is too long")),
    };
    let length = read_varint(bytes, pos).map_err(|e| match e {
        VarintError::Eof => eof(),
        VarintError::TooLong => structure("the record length varint is too long"),
    })?;
    if length < 0 {
        return Err(structure(&format!("negative record length {length}")));
    }
    let body_start = *pos;
    let Some(body) = bytes.get(body_start..body_start + length as usize) else {
        return Err(eof());
    };
    let mut p = 0usize;
    let Some(&attributes) = body.first() else {
        return Err(structure("an empty record body"));
    };
    p += 1;
    let timestamp_delta =
        read_varlong(body, &mut p).map_err(|e| varint_err(e, "timestamp delta"))?;
    let offset_delta = read_varint(body, &mut p).map_err(|e| varint_err(e, "offset delta"))?;
    let (key_length, key) = read_bytes(body, &mut p).map_err(|e| varint_err(e, "key"))?;
    let (value_length, value) = read_bytes(body, &mut p).map_err(|e| varint_err(e, "value"))?;
    let header_count = read_varint(body, &mut p).map_err(|e| varint_err(e, "header count"))?;
    if header_count < 0 || header_count as usize > body.len() - p {
        return Err(FramingError::HeaderCount {
            index,
            count: header_count,
        });
    }
    let headers_start = p;
    for _ in 0..header_count {
        let key_len = read_varint(body, &mut p).map_err(|e| varint_err(e, "header key"))?;
        if key_len < 0 {
            return Err(FramingError::HeaderKeySize {
                index,
                size: key_len,
            });
        }
        skip(body, &mut p, key_len as usize).map_err(|e| varint_err(e, "header key"))?;
        let value_len = read_varint(body, &mut p).map_err(|e| varint_err(e, "header value"))?;
        if value_len >= 0 {
            skip(body, &mut p, value_len as usize).map_err(|e| varint_err(e, "header value"))?;
        }
    }
    if p != body.len() {
        return Err(FramingError::SizeMismatch {
            index,
            expected: length,
            read: p,
        });
    }
    *pos = body_start + length as usize;
    Ok(RecordRef {
        attributes: attributes as i8,
        timestamp_delta,
        offset_delta,
        key,
        value,
        key_length,
        value_length,
        headers: &body[headers_start..],
        header_count,
        encoded: &bytes[start..*pos],
    })
}

/// A length-prefixed field and its length as written; a negative length is null (as Kafka
/// reads it).
fn read_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Result<(i32, Option<&'a [u8]>), VarintError> {
    let len = read_varint(buf, pos)?;
    if len < 0 {
        return Ok((len, None));
    }
    let start = *pos;
    skip(buf, pos, len as usize)?;
    Ok((len, Some(&buf[start..*pos])))
}

fn skip(buf: &[u8], pos: &mut usize, n: usize) -> Result<(), VarintError> {
    if buf.len() - *pos < n {
        return Err(VarintError::Eof);
    }
    *pos += n;
    Ok(())
}
