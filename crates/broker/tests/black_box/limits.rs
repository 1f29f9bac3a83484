//! Issue 14: what clients can make the broker hold is bounded, with Kafka's keys:
//! `max.connections`, `max.connections.per.ip` (+ overrides), `queued.max.request.bytes` (a
//! connection waits for room in the pool before reading a frame) and `queued.max.requests`
//! (requests being handled; a parked long poll does not count).

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

async fn connect_from(source: &str, broker: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(broker).await.unwrap()
}

async fn api_versions(stream: &mut TcpStream) -> ApiVersionsResponse {
    roundtrip(
        stream,
        ApiKey::ApiVersions,
        3,
        1,
        &RequestKind::ApiVersions(ApiVersionsRequest::default()),
    )
    .await
}

/// Whether the broker answers ApiVersions on `stream` within `wait` (false: it closed the
/// connection, or did not answer in time).
async fn answers_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let frame = request_frame(
        ApiKey::ApiVersions,
        3,
        7,
        &RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    if stream.write_all(&frame).await.is_err() {
        return false;
    }
    let mut size = [0u8; 4];
    matches!(
        tokio::time::timeout(wait, stream.read_exact(&mut size)).await,
        Ok(Ok(_))
    )
}

/// Whether the broker closed `stream` (EOF or reset) within `wait`.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_per_ip_and_its_overrides_close_one_connection_too_many() {
    // The broker's own connections (its controller's channel to itself) come from
    // 127.0.0.1: the test's clients use other loopback addresses.
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(
        dir.path(),
        &[
            "max.connections.per.ip=1",
            "max.connections.per.ip.overrides=127.0.0.1:100,127.0.0.2:3",
        ],
    )
    .await;
    let addr = broker.local_addr();
    // 127.0.0.2 has an override of 3.
    let mut kept = Vec::new();
    for _ in 0..3 {
        let mut stream = connect_from("127.0.0.2", addr).await;
        api_versions(&mut stream).await;
        kept.push(stream);
    }
    let mut fourth = connect_from("127.0.0.2", addr).await;
    assert!(closed_within(&mut fourth, Duration::from_secs(5)).await);
    // 127.0.0.3 has the default of 1.
    let mut other = connect_from("127.0.0.3", addr).await;
    api_versions(&mut other).await;
    let mut second = connect_from("127.0.0.3", addr).await;
    assert!(closed_within(&mut second, Duration::from_secs(5)).await);
    // Closing a connection frees its place.
    drop(kept.pop());
    let mut replaced = false;
    for _ in 0..100 {
        let mut stream = connect_from("127.0.0.2", addr).await;
        if answers_within(&mut stream, Duration::from_secs(2)).await {
            replaced = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(replaced, "a place was freed");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_max_connections_a_new_connection_waits_for_one_to_close() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["max.connections=4"]).await;
    eventually("controller", || broker.is_controller()).await;
    // The broker's own connections to itself (its controller's channel) count too: open
    // connections until one is not served, whatever the broker holds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let addr = broker.local_addr();
    let mut served = Vec::new();
    let mut waiting = loop {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if !answers_within(&mut stream, Duration::from_millis(700)).await {
            // Connected (the OS backlog took it), but not served.
            break stream;
        }
        served.push(stream);
        assert!(
            served.len() <= 4,
            "max.connections=4 never stopped accepting"
        );
    };
    assert!(!served.is_empty(), "the broker alone took every place");
    drop(served.pop());
    let mut size = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), waiting.read_exact(&mut size))
        .await
        .expect("served once a connection closed")
        .unwrap();
    // Shutting down connects to the controller (this broker) for a controlled shutdown: let
    // it in.
    drop((served, waiting));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_waits_for_room_in_the_request_pool() {
    let dir = tempfile::tempdir().unwrap();
    let pool: i32 = 1 << 20;
    let broker = start_broker(
        dir.path(),
        &[
            &format!("socket.request.max.bytes={pool}"),
            &format!("queued.max.request.bytes={pool}"),
        ],
    )
    .await;
    let addr = broker.local_addr();
    // A frame that takes all of the pool but 10 bytes, half sent.
    let mut hog = TcpStream::connect(addr).await.unwrap();
    let announced = pool - 10;
    hog.write_all(&announced.to_be_bytes()).await.unwrap();
    hog.write_all(&vec![0u8; 4096]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A second connection's request does not fit: it waits, unread.
    let mut waiting = TcpStream::connect(addr).await.unwrap();
    assert!(!answers_within(&mut waiting, Duration::from_millis(700)).await);
    // The half frame goes away with its connection; the pool has room again.
    drop(hog);
    let mut size = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), waiting.read_exact(&mut size))
        .await
        .expect("answered once the pool had room")
        .unwrap();
    // A frame larger than the pool could never be read: refused at start.
    let err = broker::BrokerConfig::load(
        None,
        &[
            "socket.request.max.bytes=2000".to_string(),
            "queued.max.request.bytes=1000".to_string(),
        ],
        dir.path(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("queued.max.request.bytes"),
        "{err}"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_long_poll_does_not_hold_a_place_among_queued_max_requests() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["queued.max.requests=1"]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = client::Connection::connect(&broker.local_addr().to_string(), "limits")
        .await
        .unwrap();
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let topic = TopicName(StrBytes::from_static_str("parked"));
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic.clone())
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(3_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(topic)
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let long_poll = tokio::spawn(async move { conn.send(fetch).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut other = TcpStream::connect(broker.local_addr()).await.unwrap();
    let started = Instant::now();
    api_versions(&mut other).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered while the only place is taken by a parked fetch"
    );
    assert!(!long_poll.is_finished(), "the fetch is still parked");
    long_poll.await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_being_handled_holds_its_place_among_queued_max_requests() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["queued.max.requests=1"]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = client::Connection::connect(&broker.local_addr().to_string(), "limits")
        .await
        .unwrap();
    let topic = TopicName(StrBytes::from_static_str("slow"));
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic.clone())
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let partition_dir = dir.path().join("logs").join("slow-0");
    eventually("slow-0 exists", || partition_dir.is_dir()).await;
    // Every write under the partition takes 400 ms: the produce holds the only place.
    let _slow = storage::faults::inject(
        &partition_dir,
        storage::faults::Fault::Delay(Duration::from_millis(400)),
    );
    let records = records_batch();
    let produce = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic)
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records)),
            ])]);
    let slow = tokio::spawn(async move { conn.send(produce).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut other = TcpStream::connect(broker.local_addr()).await.unwrap();
    let started = Instant::now();
    api_versions(&mut other).await;
    let waited = started.elapsed();
    // The produce's place is given back once its answer is written, so the ApiVersions
    // waited for most of the produce's 400 ms. (Whether the producing client has read its
    // answer by now is a race between two sockets, so it is not what this asserts.)
    assert!(
        waited >= Duration::from_millis(200),
        "ApiVersions was answered after {waited:?}, while the produce held the only place"
    );
    assert_eq!(
        slow.await.unwrap().responses[0].partition_responses[0].error_code,
        0
    );
    drop(_slow);
    broker.shutdown().await;
}

fn records_batch() -> bytes::Bytes {
    use kafka_protocol::records::*;
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
        value: Some(bytes::Bytes::from_static(b"slow")),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
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
