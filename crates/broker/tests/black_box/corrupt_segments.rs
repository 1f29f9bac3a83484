//! Issue 14: damaged segments found at start. A broker restarted without a clean shutdown
//! over three topics: `bad-0`'s last batch has a base offset 2^33 past its segment (outside
//! the CRC, on a batch big enough to get an index entry: this used to panic in the index),
//! `broken-0` cannot be opened at all (its offset index is a directory), `good-0` is fine.
//! `bad-0` opens truncated before the bad batch, `good-0` opens whole, `broken-0` alone
//! fails, and Metadata keeps answering every topic.

use crate::common;

use std::path::Path;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPICS: [&str; 3] = ["bad", "broken", "good"];
const BATCHES: i64 = 6;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// One 5 KiB record: every batch is past `index.interval.bytes` and gets an index entry.
fn batch(i: i64) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000 + i,
        key: None,
        value: Some(Bytes::from(vec![b'a' + i as u8; 5 * 1024])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn produce(conn: &mut Connection, topic: &str, i: i64) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(i))),
            ])]);
    let response = conn.send(request).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, i), "{topic}");
}

/// ListOffsets latest: Ok(log end) or the error code.
async fn log_end(conn: &mut Connection, topic: &str) -> Result<i64, i16> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1),
            ])]);
    let r = conn.send(request).await.unwrap();
    let p = &r.topics[0].partitions[0];
    if p.error_code == 0 {
        Ok(p.offset)
    } else {
        Err(p.error_code)
    }
}

async fn wait_open(conn: &mut Connection, topic: &str) -> i64 {
    for _ in 0..500 {
        if let Ok(end) = log_end(conn, topic).await {
            return end;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{topic}-0 never opened");
}

fn segment(logs: &Path, topic: &str, ext: &str) -> std::path::PathBuf {
    logs.join(format!("{topic}-0"))
        .join(format!("00000000000000000000.{ext}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_corrupt_segment_never_stops_other_partitions_or_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "corrupt")
        .await
        .unwrap();
    let topics = TOPICS
        .iter()
        .map(|t| {
            CreatableTopic::default()
                .with_name(name(t))
                .with_num_partitions(1)
                .with_replication_factor(1)
        })
        .collect();
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(topics),
        )
        .await
        .unwrap();
    assert!(created.topics.iter().all(|t| t.error_code == 0));
    for topic in TOPICS {
        wait_open(&mut conn, topic).await;
        for i in 0..BATCHES {
            produce(&mut conn, topic, i).await;
        }
    }
    drop(conn);
    broker.shutdown().await;
    store.close().await;

    // The damage, done while the broker is down; no clean-shutdown marker, so every active
    // segment is recovered at start.
    std::fs::remove_file(logs.join(".kafka_cleanshutdown")).unwrap();
    let bad = segment(&logs, "bad", "log");
    let mut bytes = std::fs::read(&bad).unwrap();
    let last = (BATCHES as usize - 1) * batch(0).len();
    bytes[last..last + 8].copy_from_slice(&(1i64 << 33).to_be_bytes());
    std::fs::write(&bad, bytes).unwrap();
    let index = segment(&logs, "broken", "index");
    std::fs::remove_file(&index).unwrap();
    std::fs::create_dir(&index).unwrap();

    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "corrupt")
        .await
        .unwrap();
    assert_eq!(
        wait_open(&mut conn, "good").await,
        BATCHES,
        "good-0 opens whole"
    );
    assert_eq!(
        wait_open(&mut conn, "bad").await,
        BATCHES - 1,
        "bad-0 is truncated before the batch with the bad offset"
    );
    assert_eq!(
        std::fs::metadata(&bad).unwrap().len(),
        last as u64,
        "the bad batch was cut off"
    );
    // broken-0 does not open, and keeps failing alone.
    for _ in 0..3 {
        assert!(log_end(&mut conn, "broken").await.is_err());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let metadata = conn
        .send_version(
            MetadataRequest::default().with_topics(Some(
                TOPICS
                    .iter()
                    .map(|t| {
                        metadata_request::MetadataRequestTopic::default().with_name(Some(name(t)))
                    })
                    .collect(),
            )),
            9,
        )
        .await
        .unwrap();
    for topic in &metadata.topics {
        assert_eq!(topic.error_code, 0, "{:?}", topic.name);
        assert_eq!(topic.partitions.len(), 1);
        assert_eq!(topic.partitions[0].leader_id.0, broker.broker_id());
    }
    // The good partitions still take writes.
    produce(&mut conn, "good", BATCHES).await;
    produce(&mut conn, "bad", BATCHES - 1).await;
    drop(conn);
    broker.shutdown().await;
    store.close().await;
}
