//! Test support for other crates (feature `testing`): record batches encoded the way a client
//! encodes them (kafka-protocol's encoder), and decoding them back to (offset, value) pairs.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// The values `"{tag}-0"`, `"{tag}-1"`, … as a producer would send them.
pub fn tagged_values(tag: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}-{i}").into_bytes()).collect()
}

/// One uncompressed v2 batch holding `values` (record i stamped `first_timestamp + i`); with
/// `producer` = (id, epoch, base sequence) an idempotent one.
pub fn encode_batch(
    values: &[Vec<u8>],
    first_timestamp: i64,
    producer: Option<(i64, i16, i32)>,
) -> Vec<u8> {
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Consecutive sequences keep the records in one batch: the encoder starts a new
            // batch whenever offset - sequence changes (base sequence -1 when not idempotent).
            sequence: base_sequence + i as i32,
            timestamp: first_timestamp + i as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).expect("encoding test records");
    buf.to_vec()
}

/// One uncompressed v2 batch like [`encode_batch`] (not idempotent), except that record `bad`
/// has its value length written as `value_length` and no value bytes: a negative length other
/// than -1, which the leader refuses on produce now but older versions stored (readers take
/// it for null, as Kafka does).
pub fn encode_batch_with_value_length(
    values: &[Vec<u8>],
    first_timestamp: i64,
    bad: usize,
    value_length: i32,
) -> Vec<u8> {
    use crate::builder::{BatchBuilder, BatchSpec, NewRecord};
    use crate::varint::{write_varint, write_varlong};
    let mut builder = BatchBuilder::new(BatchSpec::new(0));
    builder.set_first_timestamp(first_timestamp);
    for (i, value) in values.iter().enumerate() {
        let timestamp = first_timestamp + i as i64;
        if i == bad {
            let mut body = vec![0u8];
            write_varlong(&mut body, i as i64);
            write_varint(&mut body, i as i32);
            write_varint(&mut body, -1);
            write_varint(&mut body, value_length);
            write_varint(&mut body, 0);
            let mut encoded = Vec::new();
            write_varint(&mut encoded, body.len() as i32);
            encoded.extend(body);
            builder.push_encoded(&encoded, i as i64, timestamp);
        } else {
            builder.push(&NewRecord {
                offset: i as i64,
                timestamp,
                key: None,
                value: Some(value),
                headers: &[],
            });
        }
    }
    builder.build()
}

/// (offset, value as text) of every record in a record set.
pub fn decode_values(bytes: &[u8]) -> Vec<(i64, String)> {
    let mut buf = Bytes::copy_from_slice(bytes);
    let mut out = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("decoding a stored record set");
        for r in set.records {
            let value = r
                .value
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default();
            out.push((r.offset, value));
        }
    }
    out
}
