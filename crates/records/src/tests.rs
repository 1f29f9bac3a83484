use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as KpCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use proptest::prelude::*;

use super::*;

/// A real v2 batch as a client encodes it (kafka-protocol's encoder), `n` records.
fn batch(n: usize, first_timestamp: i64) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: KpTimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1, // keeps one batch: the encoder splits when offset - sequence changes
            timestamp: first_timestamp + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'v'; i % 7 + 1])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: KpCompression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).expect("encode");
    buf.to_vec()
}

fn decode_offsets(bytes: &[u8]) -> Vec<i64> {
    let mut buf = Bytes::copy_from_slice(bytes);
    let mut offsets = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("decodes after our rewrite");
        offsets.extend(set.records.iter().map(|r| r.offset));
    }
    offsets
}

#[test]
fn a_client_batch_validates_and_reports_its_header() {
    let bytes = batch(3, 1_000);
    let batches = validate_record_set(&bytes).expect("valid");
    assert_eq!(batches.len(), 1);
    let h = batches[0].header;
    assert_eq!(
        (h.base_offset, h.records_count, h.last_offset_delta),
        (0, 3, 2)
    );
    assert_eq!(h.size_in_bytes(), bytes.len());
    assert_eq!(h.compression(), Some(Compression::None));
    assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(h.max_timestamp, 1_002);
    assert!(!h.has_producer_id());
}

#[test]
fn offsets_are_assigned_across_batches_without_touching_the_crc() {
    let mut bytes = batch(3, 0);
    bytes.extend(batch(2, 0));
    let batches = validate_record_set(&bytes).expect("valid");
    let next = assign_offsets(&mut bytes, &batches, 100, 7, None);
    assert_eq!(next, 105);
    // Still valid (CRC untouched), and a real decoder sees the new offsets.
    let again = validate_record_set(&bytes).expect("still valid");
    assert_eq!(again[0].header.partition_leader_epoch, 7);
    assert_eq!(decode_offsets(&bytes), vec![100, 101, 102, 103, 104]);
}

#[test]
fn log_append_time_rewrites_the_timestamp_and_the_crc() {
    let mut bytes = batch(2, 5);
    let batches = validate_record_set(&bytes).unwrap();
    assign_offsets(&mut bytes, &batches, 0, 0, Some(1_700_000_000_000));
    let h = validate_record_set(&bytes)
        .expect("CRC recomputed")
        .remove(0)
        .header;
    assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(h.max_timestamp, 1_700_000_000_000);
}

#[test]
fn a_flipped_bit_is_a_crc_mismatch() {
    let mut bytes = batch(2, 0);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    assert!(matches!(
        validate_record_set(&bytes),
        Err(RecordsError::CrcMismatch { position: 0, .. })
    ));
}

#[test]
fn old_magic_empty_sets_and_torn_batches_are_refused() {
    assert_eq!(validate_record_set(&[]), Err(RecordsError::Empty));
    let mut v1 = batch(1, 0);
    v1[MAGIC] = 1;
    assert_eq!(
        validate_record_set(&v1),
        Err(RecordsError::UnsupportedMagic { magic: 1 })
    );
    let whole = batch(2, 0);
    let torn = &whole[..whole.len() - 3];
    assert!(matches!(
        validate_record_set(torn),
        Err(RecordsError::Truncated { .. })
    ));
    let mut two = batch(1, 0);
    two.extend_from_slice(&whole[..HEADER_SIZE - 1]);
    let first_len = batch(1, 0).len();
    assert!(
        matches!(validate_record_set(&two), Err(RecordsError::Truncated { position, .. }) if position == first_len)
    );
}

#[test]
fn an_inconsistent_record_count_is_refused() {
    let mut bytes = batch(3, 0);
    bytes[RECORDS_COUNT + 3] = 5;
    assert!(matches!(
        validate_record_set(&bytes),
        Err(RecordsError::InconsistentCount { count: 5, .. })
    ));
}

#[test]
fn an_unknown_codec_is_refused() {
    let mut bytes = batch(1, 0);
    bytes[ATTRIBUTES + 1] |= 0x07;
    assert!(matches!(
        validate_record_set(&bytes),
        Err(RecordsError::UnknownCompression { codec: 7, .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    // Whatever bytes arrive, validation answers (no panic).
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = validate_record_set(&bytes);
    }

    // A prefix of a valid record set is itself valid exactly when it ends on a batch boundary
    // (then it holds the batches before that boundary); a prefix that ends inside a batch is refused.
    #[test]
    fn a_prefix_validates_only_on_a_batch_boundary(counts in proptest::collection::vec(1usize..5, 1..4), cut in 1usize..100) {
        let mut bytes = Vec::new();
        let mut boundaries = Vec::new();
        for c in &counts {
            bytes.extend(batch(*c, 0));
            boundaries.push(bytes.len());
        }
        let cut = cut.min(bytes.len() - 1);
        let prefix_len = bytes.len() - cut;
        match boundaries.iter().position(|&b| b == prefix_len) {
            Some(i) => {
                let batches = validate_record_set(&bytes[..prefix_len]);
                prop_assert!(batches.is_ok(), "prefix of {} bytes ends on batch {} boundary: {:?}", prefix_len, i, batches);
                prop_assert_eq!(batches.unwrap().len(), i + 1);
            }
            None => prop_assert!(validate_record_set(&bytes[..prefix_len]).is_err(), "prefix of {} bytes ends inside a batch", prefix_len),
        }
        let batches = validate_record_set(&bytes).unwrap();
        let next = assign_offsets(&mut bytes, &batches, 42, 0, None);
        prop_assert_eq!(next, 42 + counts.iter().sum::<usize>() as i64);
    }

    // The boundary case itself, every time (the random cut above only sometimes lands on it).
    #[test]
    fn a_prefix_of_whole_batches_is_the_batches_before_it(counts in proptest::collection::vec(1usize..5, 2..4)) {
        let mut bytes = Vec::new();
        for c in &counts { bytes.extend(batch(*c, 0)); }
        let last = batch(*counts.last().unwrap(), 0).len();
        let batches = validate_record_set(&bytes[..bytes.len() - last]).unwrap();
        prop_assert_eq!(batches.len(), counts.len() - 1);
    }
}
