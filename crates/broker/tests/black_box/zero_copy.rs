//! Issue 14: zero-copy Fetch. A consumer on a PLAINTEXT connection gets its records from the
//! segment files with `sendfile` (`fetch.zero.copy.enable`, default true). The bytes on the
//! wire must be exactly those of the copying path: two brokers, one with zero-copy and one
//! without, hold the same batches, and every Fetch (each version from 4, several partitions,
//! empty and out-of-range ones, a response cut by `max_bytes`, fetch offsets inside a batch,
//! a zstd topic that old versions refuse) gets byte-identical response frames from both.

use crate::common;

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const PLAIN: &str = "plain";
const ZSTD: &str = "zstd";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A batch of `records` records of `value_bytes` each, deterministic in content.
fn batch(records: usize, value_bytes: usize, seed: u8, compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // (Records of one batch: offset - sequence is the same for all.)
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{seed}-{i}"))),
            value: Some(Bytes::from(
                (0..value_bytes)
                    .map(|j| seed.wrapping_add((i * 31 + j) as u8))
                    .collect::<Vec<u8>>(),
            )),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn create(conn: &mut Connection, topic: &str, compression: &'static str) {
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(3)
                    .with_replication_factor(1)
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str("compression.type"))
                        .with_value(Some(StrBytes::from_static_str(compression)))])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{topic}");
    for partition in 0..3 {
        wait_open(conn, topic, partition).await;
    }
}

async fn produce(conn: &mut Connection, topic: &str, partition: i32, records: Bytes) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])]);
    let response = conn.send(request).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(
        p.error_code, 0,
        "{topic}-{partition}: {:?}",
        p.error_message
    );
}

async fn wait_open(conn: &mut Connection, topic: &str, partition: i32) {
    for _ in 0..500 {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(-1),
                ])]);
        let r = conn.send(request).await.unwrap();
        if r.topics[0].partitions[0].error_code == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{topic}-{partition} never opened");
}

/// Starts a broker, creates both topics and produces the same batches as every other call.
async fn broker_with_data(dir: &std::path::Path, zero_copy: bool) -> broker::Broker {
    let setting = format!("fetch.zero.copy.enable={zero_copy}");
    let broker = start_broker(dir, &[setting.as_str()]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "zero-copy")
        .await
        .unwrap();
    create(&mut conn, PLAIN, "producer").await;
    create(&mut conn, ZSTD, "zstd").await;
    // Partition 0: many small batches; 1: a few large ones; 2: empty. The zstd topic
    // compresses what it is sent.
    for seed in 0..40u8 {
        produce(&mut conn, PLAIN, 0, batch(5, 100, seed, Compression::None)).await;
    }
    for seed in 0..4u8 {
        produce(
            &mut conn,
            PLAIN,
            1,
            batch(3, 50_000, seed, Compression::None),
        )
        .await;
    }
    for seed in 0..10u8 {
        produce(&mut conn, ZSTD, 0, batch(4, 200, seed, Compression::None)).await;
    }
    drop(conn);
    broker
}

/// (topic, partition, fetch offset, partition_max_bytes), in request order.
type Wanted<'a> = (&'a str, i32, i64, i32);

fn fetch_request(max_bytes: i32, partitions: &[Wanted<'_>]) -> FetchRequest {
    let mut topics: Vec<fetch_request::FetchTopic> = Vec::new();
    for &(topic, partition, offset, partition_max) in partitions {
        let p = fetch_request::FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(partition_max);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == topic => t.partitions.push(p),
            _ => topics.push(
                fetch_request::FetchTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(topics)
}

async fn raw_fetch(
    stream: &mut TcpStream,
    version: i16,
    correlation_id: i32,
    request: &FetchRequest,
) -> Bytes {
    let frame = request_frame(
        ApiKey::Fetch,
        version,
        correlation_id,
        &RequestKind::Fetch(request.clone()),
    );
    stream.write_all(&frame).await.unwrap();
    read_frame(stream).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_zero_copy_fetch_sends_the_same_bytes_as_the_copy() {
    let with_dir = tempfile::tempdir().unwrap();
    let without_dir = tempfile::tempdir().unwrap();
    let with = broker_with_data(with_dir.path(), true).await;
    let without = broker_with_data(without_dir.path(), false).await;
    let mut a = TcpStream::connect(with.local_addr()).await.unwrap();
    let mut b = TcpStream::connect(without.local_addr()).await.unwrap();

    let big = 1 << 30;
    let cases: Vec<(&str, i32, Vec<Wanted<'_>>)> = vec![
        (
            "everything",
            big,
            vec![(PLAIN, 0, 0, big), (PLAIN, 1, 0, big), (PLAIN, 2, 0, big)],
        ),
        // An offset inside a batch: the whole batch holding it comes back.
        (
            "mid-batch",
            big,
            vec![(PLAIN, 0, 7, big), (PLAIN, 1, 4, big)],
        ),
        // partition_max_bytes cuts after whole batches; max_bytes leaves later partitions
        // without records.
        (
            "partition cap",
            big,
            vec![(PLAIN, 0, 0, 1000), (PLAIN, 1, 0, 10)],
        ),
        (
            "response cap",
            60_000,
            vec![(PLAIN, 1, 0, big), (PLAIN, 0, 0, big)],
        ),
        // At the log end, past it (OFFSET_OUT_OF_RANGE), an unknown partition.
        (
            "edges",
            big,
            vec![
                (PLAIN, 0, 200, big),
                (PLAIN, 0, 201, big),
                (PLAIN, 9, 0, big),
                (PLAIN, 1, 0, big),
            ],
        ),
        // zstd: refused below v10 (UNSUPPORTED_COMPRESSION_TYPE), sent as stored after.
        (
            "zstd",
            big,
            vec![(PLAIN, 0, 190, big), (ZSTD, 0, 0, big), (ZSTD, 1, 0, big)],
        ),
    ];
    let mut correlation_id = 0;
    let mut zero_copied = 0usize;
    for version in 4..=12i16 {
        for (what, max_bytes, partitions) in &cases {
            correlation_id += 1;
            let request = fetch_request(*max_bytes, partitions);
            let got = raw_fetch(&mut a, version, correlation_id, &request).await;
            let expected = raw_fetch(&mut b, version, correlation_id, &request).await;
            assert!(
                got == expected,
                "v{version} {what}: {} bytes with zero-copy, {} without",
                got.len(),
                expected.len()
            );
            // And the frames hold records (so the test is not comparing empty answers).
            let mut payload = got.clone();
            ResponseHeader::decode(&mut payload, ApiKey::Fetch.response_header_version(version))
                .unwrap();
            let response = FetchResponse::decode(&mut payload, version).unwrap();
            let bytes: usize = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.records.as_ref().map_or(0, Bytes::len))
                .sum();
            assert!(bytes > 0, "v{version} {what}: no records");
            zero_copied += bytes;
        }
    }
    assert!(zero_copied > 1_000_000, "{zero_copied}");
    drop((a, b));
    with.shutdown().await;
    without.shutdown().await;
}
