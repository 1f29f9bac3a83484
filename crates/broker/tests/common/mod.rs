//! Shared helpers of the broker's black-box tests: a broker on port 0 over a temporary data
//! directory, and raw request/response frames.

#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use broker::{Broker, BrokerConfig, MetadataStore};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts a broker on 127.0.0.1:0 with its data in `data_dir` and the given overrides.
pub async fn start_broker(data_dir: &Path, overrides: &[&str]) -> Broker {
    start_broker_and_store(data_dir, overrides).await.0
}

/// Like [`start_broker`], also returning the store (to close it before a restart).
pub async fn start_broker_and_store(
    data_dir: &Path,
    overrides: &[&str],
) -> (Broker, MetadataStore) {
    let store = MetadataStore::from_config(&config(data_dir, overrides)).unwrap();
    (start_on(store.clone(), data_dir, overrides).await, store)
}

/// Starts a broker on an existing store.
pub async fn start_on(store: MetadataStore, data_dir: &Path, overrides: &[&str]) -> Broker {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    Broker::start(config(data_dir, overrides), store, Some(listener))
        .await
        .unwrap()
}

pub fn config(data_dir: &Path, overrides: &[&str]) -> BrokerConfig {
    let mut all = vec![
        "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
        "admin.listener=none".to_string(),
        // As `gregor server` without --config (the shipped file's setting): a test's brokers
        // are fewer than Kafka's default of 3 offsets-topic replicas. A test's own wins.
        "offsets.topic.replication.factor=1".to_string(),
    ];
    all.extend(overrides.iter().map(|s| s.to_string()));
    BrokerConfig::load(None, &all, data_dir).unwrap()
}

/// Encodes a request frame (size prefix included).
pub fn request_frame(key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Bytes {
    tagged_request_frame(key, version, correlation_id, body, Default::default())
}

/// Like [`request_frame`], with tagged fields in the request header (header v2 only).
pub fn tagged_request_frame(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &RequestKind,
    header_tags: std::collections::BTreeMap<i32, Bytes>,
) -> Bytes {
    let mut payload = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("broker-test")))
        .with_unknown_tagged_fields(header_tags)
        .encode(&mut payload, key.request_header_version(version))
        .unwrap();
    body.encode(&mut payload, version).unwrap();
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame.freeze()
}

/// Reads one response frame's payload (without the size prefix).
pub async fn read_frame(stream: &mut TcpStream) -> Bytes {
    let mut size = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut size))
        .await
        .unwrap()
        .unwrap();
    let mut payload = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut payload).await.unwrap();
    Bytes::from(payload)
}

/// Sends one request and decodes the response body of type `R` at `version` (the response
/// header version is taken from the API, as a client would).
pub async fn roundtrip<R: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &RequestKind,
) -> R {
    stream
        .write_all(&request_frame(key, version, correlation_id, body))
        .await
        .unwrap();
    let mut payload = read_frame(stream).await;
    let header = kafka_protocol::messages::ResponseHeader::decode(
        &mut payload,
        key.response_header_version(version),
    )
    .unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    R::decode(&mut payload, version).unwrap()
}

/// Sends one raw frame and decodes the response body of type `R` at `version`.
pub async fn roundtrip_frame<R: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> R {
    stream.write_all(&frame).await.unwrap();
    let mut payload = read_frame(stream).await;
    let header = kafka_protocol::messages::ResponseHeader::decode(
        &mut payload,
        key.response_header_version(version),
    )
    .unwrap();
    assert_eq!(header.correlation_id, correlation_id);
    R::decode(&mut payload, version).unwrap()
}

/// What a broker of the cluster knows and a client does not: the control-plane key, and the
/// current controller (id, epoch) as the store records it.
pub async fn control_plane_key(
    store: &MetadataStore,
) -> (security::control_plane::ControlPlaneKey, i32, i32) {
    use base64::Engine as _;
    let MetadataStore::Embedded(embedded) = store else {
        panic!("the tests use the embedded store")
    };
    let (client, events) = embedded.connect(metastore::SessionOptions::default());
    let zk = znodes::KafkaZkClient::new(client, events);
    let secret = zk
        .get_or_create_control_plane_secret("unused")
        .await
        .unwrap();
    let (id, epoch) = zk.get_controller_identity().await.unwrap().unwrap();
    zk.close().await;
    let secret = base64::engine::general_purpose::STANDARD
        .decode(secret)
        .unwrap();
    let key = security::control_plane::ControlPlaneKey::new(secret.try_into().unwrap());
    (key, id, epoch)
}

/// The header tags a controller sends: its proof for (`controller_id`, `epoch`, `receiver`).
pub fn proof_tags(
    key: &security::control_plane::ControlPlaneKey,
    controller_id: i32,
    epoch: i32,
    receiver: i32,
) -> std::collections::BTreeMap<i32, Bytes> {
    let proof = key.proof(controller_id, epoch, receiver);
    std::collections::BTreeMap::from([(
        security::control_plane::PROOF_TAG,
        Bytes::copy_from_slice(&proof),
    )])
}

/// The header tags a broker sends with ControlledShutdown: its proof for its id and epoch.
pub fn broker_proof_tags(
    key: &security::control_plane::ControlPlaneKey,
    broker_id: i32,
    broker_epoch: i64,
) -> std::collections::BTreeMap<i32, Bytes> {
    let proof = key.broker_proof(broker_id, broker_epoch);
    std::collections::BTreeMap::from([(
        security::control_plane::PROOF_TAG,
        Bytes::copy_from_slice(&proof),
    )])
}

/// Polls `check` every 20 ms for up to 10 s.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A topic name on the wire.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// One uncompressed v2 batch of one record: no key, a value of `value_bytes` bytes `fill`.
pub fn one_record_batch(value_bytes: usize, fill: u8) -> Bytes {
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
        value: Some(Bytes::from(vec![fill; value_bytes])),
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
