//! Writing v2 batches: the broker builds one when it converts a magic 0/1 message set up,
//! recompresses for a topic's `compression.type`, or keeps the surviving records of a batch
//! in the cleaner. Offsets may have gaps (the cleaner's output); the batch keeps the offset
//! range it is given.

use crate::codec;
use crate::varint::{varint_size, write_varint, write_varlong};
use crate::{
    write_i16, write_i32, write_i64, Compression, TimestampType, ATTRIBUTES, BASE_OFFSET,
    BASE_SEQUENCE, BASE_TIMESTAMP, BATCH_LENGTH, CONTROL_BIT, CRC, HEADER_SIZE, LAST_OFFSET_DELTA,
    LOG_OVERHEAD, MAGIC, MAX_TIMESTAMP, PARTITION_LEADER_EPOCH, PRODUCER_EPOCH, PRODUCER_ID,
    RECORDS_COUNT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};

/// The header fields of a batch to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpec {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub compression: Compression,
    pub timestamp_type: TimestampType,
    pub transactional: bool,
    pub control: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Under LogAppendTime: the time to stamp as the batch's max timestamp.
    pub log_append_time: Option<i64>,
    /// Keep this last offset even when the last record is below it (the cleaner keeps a
    /// batch's offset range, so the producer's sequence numbers stay consistent).
    pub last_offset: Option<i64>,
}

impl BatchSpec {
    /// A plain batch: no producer, CreateTime, uncompressed.
    pub fn new(base_offset: i64) -> BatchSpec {
        BatchSpec {
            base_offset,
            partition_leader_epoch: -1,
            compression: Compression::None,
            timestamp_type: TimestampType::CreateTime,
            transactional: false,
            control: false,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            log_append_time: None,
            last_offset: None,
        }
    }

    /// The header fields of an existing batch (its codec, producer and flags).
    pub fn like(header: &crate::BatchHeader) -> BatchSpec {
        BatchSpec {
            base_offset: header.base_offset,
            partition_leader_epoch: header.partition_leader_epoch,
            compression: header.compression().unwrap_or(Compression::None),
            timestamp_type: header.timestamp_type(),
            transactional: header.is_transactional(),
            control: header.is_control(),
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            log_append_time: (header.timestamp_type() == TimestampType::LogAppendTime)
                .then_some(header.max_timestamp),
            last_offset: Some(header.last_offset()),
        }
    }
}

/// A record to write: absolute offset and timestamp, key, value and headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRecord<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// Builds one v2 batch from records given in offset order.
#[derive(Debug)]
pub struct BatchBuilder {
    spec: BatchSpec,
    records: Vec<u8>,
    count: i32,
    first_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset: i64,
}

impl BatchBuilder {
    pub fn new(spec: BatchSpec) -> BatchBuilder {
        BatchBuilder {
            spec,
            records: Vec::new(),
            count: 0,
            first_timestamp: None,
            max_timestamp: -1,
            last_offset: spec.base_offset - 1,
        }
    }

    pub fn len(&self) -> i32 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Bytes of records so far (before compression).
    pub fn records_size(&self) -> usize {
        self.records.len()
    }

    /// Appends a record; offsets must increase.
    pub fn push(&mut self, record: &NewRecord<'_>) {
        debug_assert!(record.offset > self.last_offset, "offsets must increase");
        let first = *self.first_timestamp.get_or_insert(record.timestamp);
        self.max_timestamp = self.max_timestamp.max(record.timestamp);
        self.last_offset = record.offset;
        let offset_delta = (record.offset - self.spec.base_offset) as i32;
        let timestamp_delta = record.timestamp - first;
        let mut body = Vec::with_capacity(
            16 + record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len),
        );
        body.push(0); // attributes
        write_varlong(&mut body, timestamp_delta);
        write_varint(&mut body, offset_delta);
        write_field(&mut body, record.key);
        write_field(&mut body, record.value);
        write_varint(&mut body, record.headers.len() as i32);
        for (k, v) in record.headers {
            write_field(&mut body, Some(k));
            write_field(&mut body, *v);
        }
        self.records
            .reserve(varint_size(body.len() as i32) + body.len());
        write_varint(&mut self.records, body.len() as i32);
        self.records.extend_from_slice(&body);
        self.count += 1;
    }

    /// Appends an already encoded record (from [`crate::record::RecordRef::encoded`]) whose
    /// timestamp delta is relative to `first_timestamp` and offset delta to `base_offset`,
    /// both the same as this builder's (the cleaner keeps records of one batch together).
    pub fn push_encoded(&mut self, encoded: &[u8], offset: i64, timestamp: i64) {
        debug_assert!(offset > self.last_offset, "offsets must increase");
        self.first_timestamp.get_or_insert(timestamp);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.last_offset = offset;
        self.records.extend_from_slice(encoded);
        self.count += 1;
    }

    /// Sets the first timestamp explicitly (records pushed with [`Self::push_encoded`] keep
    /// their deltas against it).
    pub fn set_first_timestamp(&mut self, timestamp: i64) {
        self.first_timestamp = Some(timestamp);
    }

    /// Encodes the batch: header, compressed records, CRC-32C.
    pub fn build(self) -> Vec<u8> {
        let spec = self.spec;
        let payload = if spec.compression == Compression::None {
            self.records
        } else {
            codec::compress(spec.compression, &self.records, 2)
        };
        let mut out = vec![0u8; HEADER_SIZE];
        out.extend_from_slice(&payload);
        let last_offset = spec
            .last_offset
            .unwrap_or(self.last_offset)
            .max(self.last_offset);
        let first_timestamp = self.first_timestamp.unwrap_or(-1);
        let max_timestamp = match spec.log_append_time {
            Some(t) if spec.timestamp_type == TimestampType::LogAppendTime => t,
            _ => self.max_timestamp,
        };
        let mut attributes = spec.compression as i16;
        if spec.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if spec.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if spec.control {
            attributes |= CONTROL_BIT;
        }
        write_i64(&mut out, BASE_OFFSET, spec.base_offset);
        let batch_length = (out.len() - LOG_OVERHEAD) as i32;
        write_i32(&mut out, BATCH_LENGTH, batch_length);
        write_i32(
            &mut out,
            PARTITION_LEADER_EPOCH,
            spec.partition_leader_epoch,
        );
        out[MAGIC] = 2;
        write_i16(&mut out, ATTRIBUTES, attributes);
        write_i32(
            &mut out,
            LAST_OFFSET_DELTA,
            (last_offset - spec.base_offset).max(0) as i32,
        );
        write_i64(&mut out, BASE_TIMESTAMP, first_timestamp);
        write_i64(&mut out, MAX_TIMESTAMP, max_timestamp);
        write_i64(&mut out, PRODUCER_ID, spec.producer_id);
        write_i16(&mut out, PRODUCER_EPOCH, spec.producer_epoch);
        write_i32(&mut out, BASE_SEQUENCE, spec.base_sequence);
        write_i32(&mut out, RECORDS_COUNT, self.count);
        let crc = crc32c::crc32c(&out[ATTRIBUTES..]);
        write_i32(&mut out, CRC, crc as i32);
        out
    }
}

fn write_field(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}
