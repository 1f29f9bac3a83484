//! The data plane over the wire: Produce, Fetch, ListOffsets, DeleteRecords and
//! InitProducerId at every advertised version, their error codes, acks=0, long polling and
//! idempotent producers.

use crate::common;

use std::time::{Duration, Instant};

use broker::MetadataStore;
use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use protocol::supported_range;

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_TIMESTAMP: i16 = 32;
const UNSUPPORTED_VERSION: i16 = 35;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const INVALID_RECORD: i16 = 87;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn versions(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let range = supported_range(api_key).unwrap();
    range.min_version..=range.max_version
}

/// A batch of `n` records `tag-i`; with `producer` = (id, epoch, base sequence) idempotent.
fn batch(n: usize, tag: &str, producer: Option<(i64, i16, i32)>) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Consecutive sequences keep the records in one batch (base sequence -1 when
            // the producer is not idempotent).
            sequence: seq + i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn values(records: &Option<Bytes>) -> Vec<(i64, String)> {
    let mut buf = records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while !buf.is_empty() {
        for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
            out.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])])
}

async fn produce(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    records: Bytes,
    version: i16,
) -> produce_response::PartitionProduceResponse {
    let response = conn
        .send_version(produce_request(topic, partition, records, -1), version)
        .await
        .unwrap();
    response.responses[0].partition_responses[0].clone()
}

fn fetch_request(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)
                    .with_max_num_offsets(1),
            ])])
}

async fn create_topic(
    conn: &mut Connection,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )]);
    let response = conn.send(request).await.unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    // Wait until every partition's log is open here (ListOffsets answers without error).
    for partition in 0..partitions {
        let mut ready = false;
        for _ in 0..500 {
            let r = conn
                .send(list_offsets_request(topic, partition, -1))
                .await
                .unwrap();
            if r.topics[0].partitions[0].error_code == 0 {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ready, "{topic}-{partition} never got a leader");
    }
}

async fn setup(overrides: &[&str]) -> (tempfile::TempDir, broker::Broker, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), overrides).await;
    eventually("controller", || broker.is_controller()).await;
    let conn = Connection::connect(&broker.local_addr().to_string(), "data-plane")
        .await
        .unwrap();
    (dir, broker, conn)
}

#[tokio::test]
async fn every_version_of_produce_fetch_list_offsets_and_delete_records() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "dp", 1, &[]).await;
    let mut next = 0;
    for version in versions(ApiKey::Produce) {
        let r = produce(
            &mut conn,
            "dp",
            0,
            batch(2, &format!("v{version}"), None),
            version,
        )
        .await;
        assert_eq!(
            r.error_code, NONE,
            "Produce v{version}: {:?}",
            r.error_message
        );
        assert_eq!(r.base_offset, next, "Produce v{version}");
        if version >= 5 {
            assert_eq!(r.log_start_offset, 0);
        }
        next += 2;
    }
    let dp_id = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("dp"))),
        ])))
        .await
        .unwrap()
        .topics[0]
        .topic_id;
    for version in versions(ApiKey::Fetch) {
        let mut request = fetch_request("dp", 0, 0);
        if version >= 13 {
            // v13+ name the topic by id.
            request.topics[0].topic = TopicName::default();
            request.topics[0].topic_id = dp_id;
        }
        let response = conn.send_version(request, version).await.unwrap();
        assert_eq!(response.error_code, NONE);
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, NONE, "Fetch v{version}");
        assert_eq!(p.high_watermark, next, "Fetch v{version}");
        let got = values(&p.records);
        assert_eq!(got.len() as i64, next, "Fetch v{version}");
        assert_eq!(got[0], (0, "v0-0".to_owned()));
        assert!(got.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
    }
    // Fetch v0-v1 read message format v0, v2-v3 format v1 (Kafka's down-conversion).
    for (version, magic) in [(0, 0u8), (1, 0), (2, 1), (3, 1), (4, 2)] {
        let response = conn
            .send_version(fetch_request("dp", 0, 0), version)
            .await
            .unwrap();
        let records = response.responses[0].partitions[0].records.clone().unwrap();
        assert_eq!(records[16], magic, "Fetch v{version} reads magic {magic}");
    }
    // A topic's compression.type other than `producer` recompresses on the way in.
    create_topic(&mut conn, "gz", 1, &[("compression.type", "gzip")]).await;
    produce(&mut conn, "gz", 0, batch(3, "plain", None), 8).await;
    let stored = conn
        .send_version(fetch_request("gz", 0, 0), 11)
        .await
        .unwrap();
    let records = stored.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(records[22] & 0x07, 1, "stored as gzip");
    let count = records::BatchHeader::read(&records).unwrap().records_count;
    let section = records::records_section(&records).unwrap();
    assert_eq!(records::record::records(&section, count).unwrap().len(), 3);
    create_topic(
        &mut conn,
        "no-conversion",
        1,
        &[("message.downconversion.enable", "false")],
    )
    .await;
    let fetch_v = |_version: i16| fetch_request("no-conversion", 0, 0);
    let empty = conn.send_version(fetch_v(3), 3).await.unwrap();
    assert_eq!(
        empty.responses[0].partitions[0].error_code, NONE,
        "nothing to convert is no error"
    );
    produce(&mut conn, "no-conversion", 0, batch(1, "x", None), 8).await;
    for (version, code) in [
        (0, UNSUPPORTED_VERSION),
        (3, UNSUPPORTED_VERSION),
        (4, NONE),
    ] {
        let r = conn.send_version(fetch_v(version), version).await.unwrap();
        assert_eq!(
            r.responses[0].partitions[0].error_code, code,
            "Fetch v{version}"
        );
    }
    for version in versions(ApiKey::ListOffsets) {
        let latest = conn
            .send_version(list_offsets_request("dp", 0, -1), version)
            .await
            .unwrap();
        let p = &latest.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE, "ListOffsets v{version}");
        if version == 0 {
            assert_eq!(p.old_style_offsets, vec![next]);
        } else {
            assert_eq!(p.offset, next, "ListOffsets v{version}");
            let by_time = conn
                .send_version(list_offsets_request("dp", 0, 1_700_000_000_001), version)
                .await
                .unwrap();
            assert_eq!(by_time.topics[0].partitions[0].offset, 1);
        }
    }
    for (i, version) in versions(ApiKey::DeleteRecords).enumerate() {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(name("dp"))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(i as i64 + 1),
                ])]);
        let response = conn.send_version(request, version).await.unwrap();
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE, "DeleteRecords v{version}");
        assert_eq!(p.low_watermark, i as i64 + 1);
    }
    let earliest = conn.send(list_offsets_request("dp", 0, -2)).await.unwrap();
    assert_eq!(earliest.topics[0].partitions[0].offset, 3);
    let below = conn.send(fetch_request("dp", 0, 0)).await.unwrap();
    assert_eq!(
        below.responses[0].partitions[0].error_code,
        OFFSET_OUT_OF_RANGE
    );
    let past = conn.send(fetch_request("dp", 0, next + 1)).await.unwrap();
    assert_eq!(
        past.responses[0].partitions[0].error_code,
        OFFSET_OUT_OF_RANGE
    );
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn produce_errors_have_kafkas_codes() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "small", 1, &[("max.message.bytes", "200")]).await;
    let good = batch(1, "x", None);
    assert_eq!(
        produce(&mut conn, "nope", 0, good.clone(), 8)
            .await
            .error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        produce(&mut conn, "small", 9, good.clone(), 8)
            .await
            .error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut conn, "small", 0, corrupt.into(), 8)
            .await
            .error_code,
        CORRUPT_MESSAGE
    );
    let mut old = good.to_vec();
    old[16] = 1; // magic 1
                 // Under Produce v2 the set reads as magic 1 messages (converted up when intact); this
                 // one's CRC-32 does not match, as Kafka finds.
    let r = produce(&mut conn, "small", 0, Bytes::from(old.clone()), 2).await;
    assert_eq!(r.error_code, CORRUPT_MESSAGE);
    let r = produce(&mut conn, "small", 0, old.into(), 8).await;
    assert_eq!(r.error_code, INVALID_RECORD);
    assert!(r.error_message.is_some());
    // Kafka's LogValidator: keyless records on a compacted topic are refused one by one.
    create_topic(&mut conn, "compacted", 1, &[("cleanup.policy", "compact")]).await;
    let keyless = records::testing::encode_batch(
        &records::testing::tagged_values("nokey", 2),
        1_700_000_000_000,
        None,
    );
    let r = produce(&mut conn, "compacted", 0, keyless.into(), 8).await;
    assert_eq!(r.error_code, INVALID_RECORD);
    assert_eq!(
        r.error_message.as_deref(),
        Some("One or more records have been rejected")
    );
    let indexes: Vec<i32> = r.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, vec![0, 1]);
    assert_eq!(
        r.record_errors[0].batch_index_error_message.as_deref(),
        Some("Compacted topic cannot accept message without key.")
    );
    create_topic(
        &mut conn,
        "strict-time",
        1,
        &[("message.timestamp.difference.max.ms", "60000")],
    )
    .await;
    // The helper stamps records in 2023, far outside a minute of now.
    let r = produce(&mut conn, "strict-time", 0, batch(1, "old", None), 8).await;
    assert_eq!(r.error_code, INVALID_TIMESTAMP);
    assert_eq!(r.record_errors.len(), 1);
    let mut zstd = good.to_vec();
    zstd[22] |= 4; // attributes: zstd
    assert_eq!(
        produce(&mut conn, "small", 0, zstd.into(), 6)
            .await
            .error_code,
        UNSUPPORTED_COMPRESSION_TYPE
    );
    let mut two = good.to_vec();
    two.extend_from_slice(&good);
    assert_eq!(
        produce(&mut conn, "small", 0, two.clone().into(), 3)
            .await
            .error_code,
        INVALID_RECORD
    );
    assert_eq!(
        produce(&mut conn, "small", 0, batch(20, "big", None), 8)
            .await
            .error_code,
        MESSAGE_TOO_LARGE
    );
    let bad_acks = conn
        .send_version(produce_request("small", 0, good.clone(), 5), 8)
        .await
        .unwrap();
    assert_eq!(
        bad_acks.responses[0].partition_responses[0].error_code,
        INVALID_REQUIRED_ACKS
    );
    // Nothing above was appended.
    let r = produce(&mut conn, "small", 0, good.clone(), 8).await;
    assert_eq!((r.error_code, r.base_offset), (NONE, 0));
    // acks=-1 needs min.insync.replicas in-sync replicas; acks=1 does not.
    create_topic(&mut conn, "misr", 1, &[("min.insync.replicas", "2")]).await;
    assert_eq!(
        produce(&mut conn, "misr", 0, good.clone(), 8)
            .await
            .error_code,
        NOT_ENOUGH_REPLICAS
    );
    let acks1 = conn
        .send_version(produce_request("misr", 0, good.clone(), 1), 8)
        .await
        .unwrap();
    assert_eq!(acks1.responses[0].partition_responses[0].error_code, NONE);
    // An incremental fetch of a session the broker does not have.
    let session = conn
        .send_version(
            fetch_request("small", 0, 0)
                .with_session_id(5)
                .with_session_epoch(1),
            12,
        )
        .await
        .unwrap();
    assert_eq!(session.error_code, FETCH_SESSION_ID_NOT_FOUND);
    assert!(session.responses.is_empty());
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn acks_zero_gets_no_response() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "a0", 1, &[]).await;
    let mut stream = tokio::net::TcpStream::connect(broker.local_addr())
        .await
        .unwrap();
    use tokio::io::AsyncWriteExt;
    let produce = RequestKind::Produce(produce_request("a0", 0, batch(3, "z", None), 0));
    stream
        .write_all(&request_frame(ApiKey::Produce, 8, 1, &produce))
        .await
        .unwrap();
    // The next response on the connection is the ListOffsets one: the produce had none.
    let list = RequestKind::ListOffsets(list_offsets_request("a0", 0, -1));
    let response: ListOffsetsResponse =
        roundtrip(&mut stream, ApiKey::ListOffsets, 6, 2, &list).await;
    assert_eq!(response.topics[0].partitions[0].offset, 3);
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn fetch_long_polls_until_data_or_max_wait() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "lp", 1, &[]).await;
    // Nothing there: the fetch waits max_wait_ms and answers empty.
    let start = Instant::now();
    let empty = conn
        .send(fetch_request("lp", 0, 0).with_max_wait_ms(300))
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(290));
    assert!(values(&empty.responses[0].partitions[0].records).is_empty());
    // A parked fetch is answered as soon as an append lands.
    let addr = broker.local_addr().to_string();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut conn = Connection::connect(&addr, "writer").await.unwrap();
        produce(&mut conn, "lp", 0, batch(1, "wake", None), 8).await
    });
    let start = Instant::now();
    let woken = conn
        .send(fetch_request("lp", 0, 0).with_max_wait_ms(10_000))
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(writer.await.unwrap().error_code, NONE);
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(
        values(&woken.responses[0].partitions[0].records),
        vec![(0, "wake-0".to_owned())]
    );
    // min_bytes larger than what is there: waits for max_wait, then answers what it has.
    let start = Instant::now();
    let partial = conn
        .send(
            fetch_request("lp", 0, 0)
                .with_max_wait_ms(300)
                .with_min_bytes(1 << 20),
        )
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(290));
    assert_eq!(values(&partial.responses[0].partitions[0].records).len(), 1);
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn idempotent_producers_are_deduplicated_and_sequence_checked() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "idem", 1, &[]).await;
    let mut ids = Vec::new();
    for version in versions(ApiKey::InitProducerId) {
        let r = conn
            .send_version(
                InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
                version,
            )
            .await
            .unwrap();
        assert_eq!(r.error_code, NONE);
        assert_eq!(r.producer_epoch, 0);
        ids.push(r.producer_id.0);
    }
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    let pid = ids[0];
    let first = batch(3, "a", Some((pid, 0, 0)));
    assert_eq!(
        produce(&mut conn, "idem", 0, first.clone(), 8)
            .await
            .base_offset,
        0
    );
    let again = produce(&mut conn, "idem", 0, first, 8).await;
    assert_eq!((again.error_code, again.base_offset), (NONE, 0));
    let gap = produce(&mut conn, "idem", 0, batch(1, "g", Some((pid, 0, 7))), 8).await;
    assert_eq!(gap.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    let next = produce(&mut conn, "idem", 0, batch(1, "b", Some((pid, 1, 0))), 8).await;
    assert_eq!((next.error_code, next.base_offset), (NONE, 3));
    let stale = produce(&mut conn, "idem", 0, batch(1, "s", Some((pid, 0, 3))), 8).await;
    assert_eq!(stale.error_code, INVALID_PRODUCER_EPOCH);
    let fetched = conn.send(fetch_request("idem", 0, 0)).await.unwrap();
    assert_eq!(values(&fetched.responses[0].partitions[0].records).len(), 4);
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn topic_config_changes_apply_to_open_logs() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "live", 1, &[]).await;
    let big = batch(30, "big", None);
    assert_eq!(
        produce(&mut conn, "live", 0, big.clone(), 8)
            .await
            .error_code,
        NONE
    );
    let alter = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("live"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("max.message.bytes"))
                .with_value(Some(StrBytes::from_static_str("100")))]),
    ]);
    let altered = conn.send(alter).await.unwrap();
    assert_eq!(altered.responses[0].error_code, NONE);
    // The broker applies /config/changes notifications within a few seconds.
    let mut refused = false;
    for _ in 0..100 {
        let r = produce(&mut conn, "live", 0, big.clone(), 8).await;
        if r.error_code == MESSAGE_TOO_LARGE {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refused,
        "max.message.bytes=100 never applied to the open log"
    );
    drop(conn);
    broker.shutdown().await;
}

/// Ours (docs/differences-from-kafka.md): a value length of -2, which Kafka stores and
/// librdkafka then stalls on, is INVALID_RECORD with a message, and nothing is appended.
#[tokio::test]
async fn a_length_below_minus_one_is_invalid_record_and_appends_nothing() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "lengths", 1, &[]).await;
    assert_eq!(
        produce(&mut conn, "lengths", 0, batch(2, "ok", None), 8)
            .await
            .error_code,
        NONE
    );
    let poison = records::testing::encode_batch_with_value_length(
        &records::testing::tagged_values("p", 3),
        1_700_000_000_000,
        1,
        -2,
    );
    let r = produce(&mut conn, "lengths", 0, poison.into(), 8).await;
    assert_eq!(r.error_code, INVALID_RECORD);
    let message = r.error_message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("Invalid value length -2 in record 1 (offset delta 1)"),
        "{message}"
    );
    let latest = conn
        .send(list_offsets_request("lengths", 0, -1))
        .await
        .unwrap();
    assert_eq!(latest.topics[0].partitions[0].offset, 2, "nothing appended");
    let r = produce(&mut conn, "lengths", 0, batch(1, "next", None), 8).await;
    assert_eq!((r.error_code, r.base_offset), (NONE, 2));
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn retention_runs_on_its_schedule() {
    let (_dir, broker, mut conn) = setup(&["log.retention.check.interval.ms=100"]).await;
    create_topic(
        &mut conn,
        "ret",
        1,
        &[("retention.bytes", "1"), ("segment.bytes", "200")],
    )
    .await;
    for i in 0..10 {
        let r = produce(&mut conn, "ret", 0, batch(2, &format!("r{i}"), None), 8).await;
        assert_eq!(r.error_code, NONE);
    }
    let mut earliest = 0;
    for _ in 0..100 {
        let r = conn.send(list_offsets_request("ret", 0, -2)).await.unwrap();
        earliest = r.topics[0].partitions[0].offset;
        if earliest > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(earliest > 0, "retention never removed a segment");
    let latest = conn.send(list_offsets_request("ret", 0, -1)).await.unwrap();
    assert_eq!(latest.topics[0].partitions[0].offset, 20);
    drop(conn);
    broker.shutdown().await;
}

#[tokio::test]
async fn an_incremental_session_names_topics_by_id_from_v13() {
    let (_dir, broker, mut conn) = setup(&[]).await;
    create_topic(&mut conn, "ids", 2, &[]).await;
    let metadata = conn
        .send_version(
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name("ids"))),
            ])),
            12,
        )
        .await
        .unwrap();
    let id = metadata.topics[0].topic_id;
    assert!(!id.is_nil());
    // A full fetch (epoch 0) of both partitions, by id, opens a session.
    let partitions = (0..2)
        .map(|p| {
            fetch_request::FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let full = conn
        .send_version(
            fetch_request("ids", 0, 0)
                .with_session_epoch(0)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(partitions)]),
            13,
        )
        .await
        .unwrap();
    assert_eq!(full.error_code, NONE);
    assert_ne!(full.session_id, 0);
    assert!(full.responses.iter().all(|t| t.topic_id == id));
    // Records arrive on partition 1; the next incremental fetch names no partition at all,
    // and the answer carries partition 1 under its topic id.
    assert_eq!(
        produce(&mut conn, "ids", 1, batch(2, "i", None), 8)
            .await
            .error_code,
        NONE
    );
    let incremental = conn
        .send_version(
            fetch_request("ids", 0, 0)
                .with_session_id(full.session_id)
                .with_session_epoch(1)
                .with_topics(vec![]),
            13,
        )
        .await
        .unwrap();
    assert_eq!(incremental.error_code, NONE);
    assert_eq!(incremental.responses.len(), 1, "{incremental:?}");
    let topic = &incremental.responses[0];
    assert_eq!(topic.topic_id, id);
    assert_eq!(topic.partitions.len(), 1);
    assert_eq!(topic.partitions[0].partition_index, 1);
    assert_eq!(values(&topic.partitions[0].records).len(), 2);
    drop(conn);
    broker.shutdown().await;
}

/// The producer id block is Kafka's `ProducerIdBlockZNode`, and a broker that finds one
/// (written by any broker, numbers or strings) claims the block after it.
#[tokio::test]
async fn producer_id_blocks_are_kafkas_znode() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let MetadataStore::Embedded(embedded) = &store else {
        panic!("the tests use the embedded store")
    };
    let (client, _events) = embedded.connect(metastore::SessionOptions::default());
    // The broker made the (empty) node at start, as Kafka's persistent paths.
    client
        .set_data(
            "/latest_producer_id_block",
            br#"{"version":1,"broker":7,"block_start":0,"block_end":4999}"#,
            None,
        )
        .await
        .unwrap();
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "pid")
        .await
        .unwrap();
    let r = conn
        .send(
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
        .unwrap();
    assert_eq!((r.error_code, r.producer_id.0), (NONE, 5000));
    let (data, _) = client
        .get_data("/latest_producer_id_block", false)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(data).unwrap(),
        r#"{"version":1,"broker":0,"block_start":"5000","block_end":"5999"}"#
    );
    client.close().await;
    drop(conn);
    broker.shutdown().await;
}
