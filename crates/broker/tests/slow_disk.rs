//! Issue 14: nothing blocks an async worker. One partition's disk is made slow (every read,
//! write and fsync under its directory sleeps 100 ms, injected in storage's file layer)
//! while six producers keep appending to it; Metadata and ApiVersions, on their own
//! connections, keep answering at their usual speed. The runtime has two workers, as the
//! broker has on this machine: before the appends moved to the blocking pool, the slow
//! appends (and the workers waiting for that partition's lock) stalled every connection.
//!
//! The bound (p99 under 20 ms) is a correctness property with a wide margin: a worker
//! blocked by a slow append makes it hundreds of milliseconds.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::net::TcpStream;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn batch() -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from_static(b"slow disk")),
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

fn produce_request() -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name("slow"))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch())),
            ])])
}

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)]
}

/// Latencies of `n` requests of `key` sent one after another on a fresh connection.
async fn latencies(addr: std::net::SocketAddr, key: ApiKey, n: usize) -> Vec<Duration> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let (version, body) = match key {
        ApiKey::ApiVersions => (3, RequestKind::ApiVersions(ApiVersionsRequest::default())),
        _ => (
            9,
            RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
        ),
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        match key {
            ApiKey::ApiVersions => {
                roundtrip::<ApiVersionsResponse>(&mut stream, key, version, i as i32, &body).await;
            }
            _ => {
                let r: MetadataResponse =
                    roundtrip(&mut stream, key, version, i as i32, &body).await;
                assert!(r.topics.iter().any(|t| t.name == Some(name("slow"))));
            }
        }
        out.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_slow_disk_on_one_partition_does_not_delay_metadata_or_api_versions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let addr = broker.local_addr();
    let mut conn = Connection::connect(&addr.to_string(), "slow-disk")
        .await
        .unwrap();
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("slow"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let mut ready = false;
    for _ in 0..500 {
        let r = conn.send(produce_request()).await.unwrap();
        if r.responses[0].partition_responses[0].error_code == 0 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "slow-0 never opened");

    let slow = storage::faults::inject(
        &dir.path().join("logs").join("slow-0"),
        storage::faults::Fault::Delay(Duration::from_millis(100)),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicUsize::new(0));
    let mut producers = Vec::new();
    for p in 0..6 {
        let (stop, produced) = (Arc::clone(&stop), Arc::clone(&produced));
        producers.push(tokio::spawn(async move {
            let mut conn = Connection::connect(&addr.to_string(), &format!("producer-{p}"))
                .await
                .unwrap();
            while !stop.load(Ordering::SeqCst) {
                let r = conn.send(produce_request()).await.unwrap();
                assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
                produced.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // Let the appends pile up on the slow partition first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (metadata, api_versions) = tokio::join!(
        latencies(addr, ApiKey::Metadata, 200),
        latencies(addr, ApiKey::ApiVersions, 200),
    );
    let during = produced.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for producer in producers {
        producer.await.unwrap();
    }
    drop(slow);
    let (metadata_p99, api_versions_p99) = (p99(metadata), p99(api_versions));
    eprintln!(
        "while {during} slow produces completed: Metadata p99 {metadata_p99:?}, ApiVersions p99 {api_versions_p99:?}"
    );
    assert!(
        during >= 2,
        "the slow partition was being written ({during} produces)"
    );
    assert!(
        metadata_p99 < Duration::from_millis(20),
        "Metadata p99 {metadata_p99:?}"
    );
    assert!(
        api_versions_p99 < Duration::from_millis(20),
        "ApiVersions p99 {api_versions_p99:?}"
    );
    drop(conn);
    broker.shutdown().await;
}
