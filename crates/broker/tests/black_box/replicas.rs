//! Replication between real brokers over the wire: ISR shrink after the lag time and
//! expansion on catch-up through AlterPartition and the real controller, OffsetsForLeaderEpoch
//! and truncation exactly at the divergence point, incremental fetch sessions, and a fetcher
//! that keeps going when one partition's appends fail.
//!
//! Where a test needs leaderships no controller would choose (two brokers that both wrote at
//! different epochs), it plays the controller itself: the topic exists in the store (so no
//! broker takes its logs for strays) but is assigned to brokers that never run, so the real
//! controller never leads it, and the test's LeaderAndIsr requests carry the current
//! controller's id, epoch and proof (read from the store), so the brokers take them.

use crate::common;

use std::time::Duration;

use broker::{Broker, MetadataStore};
use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use model::TopicPartition;
use uuid::Uuid;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const NOT_CONTROLLER: i16 = 41;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const STALE_CONTROLLER_EPOCH: i16 = 11;
const STALE_BROKER_EPOCH: i16 = 77;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const INVALID_UPDATE_VERSION: i16 = 95;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A batch of `n` records `tag-i`.
fn batch(n: usize, tag: &str) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Consecutive sequences keep the records in one batch.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
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

fn values(records: &Option<Bytes>) -> Vec<String> {
    let mut buf = records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while !buf.is_empty() {
        for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

async fn connect(broker: &Broker) -> Connection {
    Connection::connect(&broker.local_addr().to_string(), "replication-test")
        .await
        .unwrap()
}

/// Produces one batch; returns (error code, base offset).
async fn produce(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    n: usize,
    tag: &str,
    acks: i16,
) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(15_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch(n, tag))),
            ])]);
    let response = conn.send_version(request, 8).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A consumer fetch of every record from `offset` (no session).
async fn consume(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    offset: i64,
) -> (i16, Vec<String>) {
    let request = FetchRequest::default()
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
                .with_partition_max_bytes(1 << 20)])]);
    let response = conn.send_version(request, 12).await.unwrap();
    let p = &response.responses[0].partitions[0];
    (p.error_code, values(&p.records))
}

/// The ISR of `topic`-`partition` in a broker's Metadata answer.
async fn metadata_isr(conn: &mut Connection, topic: &str, partition: i32) -> Vec<i32> {
    let response = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
        ])))
        .await
        .unwrap();
    response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == partition))
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            isr
        })
        .unwrap_or_default()
}

/// Polls `check` every 50 ms for up to `secs` seconds.
async fn within<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Leadership of one partition, as the test's LeaderAndIsr states it.
struct Leadership<'a> {
    partition: i32,
    leader: &'a Broker,
    leader_epoch: i32,
    isr: Vec<i32>,
    replicas: Vec<i32>,
}

/// A session on the test's embedded store.
fn store_session(store: &MetadataStore) -> znodes::zk_client::KafkaZkClient {
    let MetadataStore::Embedded(embedded) = store else {
        unreachable!("the test store is embedded")
    };
    let (client, events) = embedded.connect(metastore::SessionOptions {
        session_timeout: Duration::from_secs(30),
    });
    znodes::zk_client::KafkaZkClient::new(client, events)
}

/// Registers `topic` in the store with `topic_id`, its `partitions` assigned to brokers 7
/// and 8 (never started): a real topic for every broker's stray-log check, which no real
/// controller can bring online.
async fn topic_in_store(store: &MetadataStore, topic: &str, topic_id: Uuid, partitions: i32) {
    let zk = store_session(store);
    let assignment = znodes::json::TopicAssignment::new(
        model::TopicId::from_bytes(*topic_id.as_bytes()),
        (0..partitions).map(|p| (p, vec![7, 8])).collect(),
    );
    zk.create_topic(
        &topic.parse().unwrap(),
        &Default::default(),
        &assignment,
        None,
    )
    .await
    .unwrap();
    zk.close().await;
}

/// A broker that is registered and answers control requests (empty success answers) but
/// never fetches: a stuck follower. Returns its port; it serves until the runtime stops.
async fn stuck_broker() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                loop {
                    let mut size = [0u8; 4];
                    if socket.read_exact(&mut size).await.is_err() {
                        return;
                    }
                    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
                    if socket.read_exact(&mut frame).await.is_err() {
                        return;
                    }
                    let Ok(request) = protocol::request::decode_request(Bytes::from(frame)) else {
                        return;
                    };
                    let body = match request.api_key {
                        ApiKey::ApiVersions => ResponseKind::ApiVersions(
                            protocol::api_versions::api_versions_response(),
                        ),
                        ApiKey::LeaderAndIsr => {
                            ResponseKind::LeaderAndIsr(LeaderAndIsrResponse::default())
                        }
                        ApiKey::UpdateMetadata => {
                            ResponseKind::UpdateMetadata(UpdateMetadataResponse::default())
                        }
                        ApiKey::StopReplica => {
                            ResponseKind::StopReplica(StopReplicaResponse::default())
                        }
                        _ => return,
                    };
                    let out = protocol::response::encode_response(
                        request.api_key,
                        request.api_version(),
                        request.correlation_id(),
                        &body,
                    )
                    .unwrap();
                    if socket.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Sends LeaderAndIsr v5 for `topic` to `to`, at the controller epoch the store has now.
async fn leader_and_isr(
    store: &MetadataStore,
    to: &Broker,
    topic: &str,
    topic_id: Uuid,
    states: &[Leadership<'_>],
) {
    let partition_states: Vec<_> = states
        .iter()
        .map(|l| {
            LeaderAndIsrPartitionState::default()
                .with_topic_name(name(topic))
                .with_partition_index(l.partition)
                .with_leader(BrokerId(l.leader.broker_id()))
                .with_leader_epoch(l.leader_epoch)
                .with_isr(l.isr.iter().map(|&b| BrokerId(b)).collect())
                .with_partition_epoch(l.leader_epoch)
                .with_replicas(l.replicas.iter().map(|&b| BrokerId(b)).collect())
                .with_is_new(true)
        })
        .collect();
    let live_leaders: Vec<_> = states
        .iter()
        .map(|l| {
            LeaderAndIsrLiveLeader::default()
                .with_broker_id(BrokerId(l.leader.broker_id()))
                .with_host_name(StrBytes::from_static_str("127.0.0.1"))
                .with_port(i32::from(l.leader.local_addr().port()))
        })
        .collect();
    // The controller may move while one is being elected: ask again.
    for _ in 0..100 {
        let (key, controller_id, controller_epoch) = control_plane_key(store).await;
        let request = LeaderAndIsrRequest::default()
            .with_controller_id(BrokerId(controller_id))
            .with_controller_epoch(controller_epoch)
            .with_broker_epoch(-1)
            .with_topic_states(vec![LeaderAndIsrTopicState::default()
                .with_topic_name(name(topic))
                .with_topic_id(topic_id)
                .with_partition_states(
                    partition_states
                        .iter()
                        .cloned()
                        .map(|p| p.with_controller_epoch(controller_epoch))
                        .collect(),
                )])
            .with_live_leaders(live_leaders.clone());
        // Signed as the controller signs its requests (the test holds the cluster's key).
        let tags = proof_tags(&key, controller_id, controller_epoch, to.broker_id());
        let response = connect(to)
            .await
            .send_version_tagged(request, 5, &tags)
            .await
            .unwrap();
        if response.error_code == STALE_CONTROLLER_EPOCH {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(response.error_code, NONE);
        for p in &response.topics[0].partition_errors {
            assert_eq!(
                p.error_code, NONE,
                "LeaderAndIsr for partition {}",
                p.partition_index
            );
        }
        return;
    }
    panic!("LeaderAndIsr kept being refused for its controller epoch");
}

/// Two brokers (ids 1 and 2) on one embedded store, each with its own log dir.
async fn two_brokers(dir: &std::path::Path, extra: &[&str]) -> (MetadataStore, Broker, Broker) {
    let store = MetadataStore::from_config(&config(dir, &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1, 2] {
        brokers.push(start_id(&store, dir, id, extra).await);
    }
    let b = brokers.pop().unwrap();
    let a = brokers.pop().unwrap();
    within(10, "one controller", || async {
        a.is_controller() != b.is_controller()
    })
    .await;
    (store, a, b)
}

async fn start_id(store: &MetadataStore, dir: &std::path::Path, id: i32, extra: &[&str]) -> Broker {
    let mut overrides = vec![
        format!("broker.id={id}"),
        format!("log.dirs={}", log_dir(dir, id).display()),
        "replica.fetch.wait.max.ms=100".to_owned(),
        "replica.fetch.backoff.ms=100".to_owned(),
    ];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    start_on(store.clone(), dir, &overrides).await
}

fn log_dir(dir: &std::path::Path, id: i32) -> std::path::PathBuf {
    dir.join(format!("broker-{id}/logs"))
}

fn segment(dir: &std::path::Path, id: i32, topic: &str, partition: i32) -> Vec<u8> {
    std::fs::read(log_dir(dir, id).join(format!("{topic}-{partition}/00000000000000000000.log")))
        .unwrap_or_default()
}

/// KIP-101's scenario: the old leader wrote past what the new leader has, at an older epoch,
/// and its checkpointed high watermark is behind (a crash lost the last checkpoint). Truncating
/// to the high watermark would throw away records the new leader has already deleted; the old
/// leader instead asks where its epoch ends on the new leader and truncates exactly there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_truncates_at_the_divergence_point_not_to_its_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (store, a, b) = two_brokers(dir.path(), &[]).await;
    let topic_id = Uuid::from_u128(0x1234);
    topic_in_store(&store, "div", topic_id, 1).await;
    let both = vec![1, 2];
    // Epoch 1: A leads, B follows; 4 records are acknowledged by both.
    let epoch1 = |leader| Leadership {
        partition: 0,
        leader,
        leader_epoch: 1,
        isr: both.clone(),
        replicas: both.clone(),
    };
    leader_and_isr(&store, &a, "div", topic_id, &[epoch1(&a)]).await;
    leader_and_isr(&store, &b, "div", topic_id, &[epoch1(&a)]).await;
    let mut to_a = connect(&a).await;
    assert_eq!(
        produce(&mut to_a, "div", 0, 4, "shared", -1).await,
        (NONE, 0)
    );
    // Epoch 2: B leads alone (A is not told yet) and writes 2 records; A, still leading at
    // epoch 1 as far as it knows, writes 3 that nobody copies.
    let epoch2 = Leadership {
        partition: 0,
        leader: &b,
        leader_epoch: 2,
        isr: vec![2],
        replicas: both.clone(),
    };
    leader_and_isr(&store, &b, "div", topic_id, &[epoch2]).await;
    let mut to_b = connect(&b).await;
    assert_eq!(produce(&mut to_b, "div", 0, 2, "new", 1).await, (NONE, 4));
    assert_eq!(produce(&mut to_a, "div", 0, 3, "lost", 1).await, (NONE, 4));
    // B's log now starts at 3: what A has below that cannot be fetched again.
    let deleted = to_b
        .send(
            DeleteRecordsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                    .with_name(name("div"))
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(3),
                    ])]),
        )
        .await
        .unwrap();
    assert_eq!(deleted.topics[0].partitions[0].low_watermark, 3);

    // OffsetsForLeaderEpoch on B, at every version: epoch 1 ends at 4, epoch 2 at its log end.
    for version in 0..=4 {
        let request =
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(if version >= 3 { 1 } else { -2 }))
                .with_topics(
                    vec![offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(name("div"))
                .with_partitions(
                    [(1, 2), (2, 2), (1, 1), (1, 3), (7, 2)]
                        .iter()
                        .map(|&(epoch, current)| {
                            offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_leader_epoch(epoch)
                                .with_current_leader_epoch(if version >= 2 { current } else { -1 })
                        })
                        .collect(),
                )],
                );
        let response = to_b.send_version(request, version).await.unwrap();
        let got: Vec<(i16, i32, i64)> = response.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
            .collect();
        let epoch = |e| if version >= 1 { e } else { -1 };
        let mut expected = vec![(NONE, epoch(1), 4), (NONE, epoch(2), 6)];
        if version >= 2 {
            expected.push((FENCED_LEADER_EPOCH, -1, -1));
            expected.push((UNKNOWN_LEADER_EPOCH, -1, -1));
        } else {
            expected.push((NONE, epoch(1), 4));
            expected.push((NONE, epoch(1), 4));
        }
        expected.push((NONE, -1, -1));
        assert_eq!(got, expected, "OffsetsForLeaderEpoch v{version}");
    }

    // A restarts with its high watermark checkpoint lost, then follows B at epoch 2.
    a.shutdown().await;
    std::fs::remove_file(log_dir(dir.path(), 1).join("replication-offset-checkpoint")).unwrap();
    let a = start_id(&store, dir.path(), 1, &[]).await;
    let epoch2 = |leader| Leadership {
        partition: 0,
        leader,
        leader_epoch: 2,
        isr: vec![2],
        replicas: vec![1, 2],
    };
    leader_and_isr(&store, &a, "div", topic_id, &[epoch2(&b)]).await;
    let mut to_a = connect(&a).await;
    assert_eq!(
        consume(&mut to_a, "div", 0, 0).await.0,
        NOT_LEADER_OR_FOLLOWER
    );
    // A truncated at 4 (not at its high watermark, 0) and copied B's records 4 and 5: its
    // segment file is byte for byte B's.
    let epochs = || {
        std::fs::read_to_string(log_dir(dir.path(), 1).join("div-0/leader-epoch-checkpoint"))
            .unwrap_or_default()
    };
    within(10, "A's log equals B's", || async {
        let (x, y) = (
            segment(dir.path(), 1, "div", 0),
            segment(dir.path(), 2, "div", 0),
        );
        // The epoch checkpoint is written just after the records.
        !x.is_empty() && x == y && epochs() == "0\n2\n1 0\n2 4\n"
    })
    .await;
    // Leading again at epoch 3, A still serves offsets 0 to 2, which B no longer has.
    let epoch3 = Leadership {
        partition: 0,
        leader: &a,
        leader_epoch: 3,
        isr: vec![1],
        replicas: vec![1, 2],
    };
    leader_and_isr(&store, &a, "div", topic_id, &[epoch3]).await;
    let (error, got) = consume(&mut to_a, "div", 0, 0).await;
    assert_eq!(error, NONE);
    assert_eq!(
        got,
        vec!["shared-0", "shared-1", "shared-2", "shared-3", "new-0", "new-1"]
    );
    drop((to_a, to_b));
    a.shutdown().await;
    b.shutdown().await;
    store.close().await;
}

/// One corrupt batch on the leader makes the follower's appends of that partition fail; the
/// fetcher carries on with the other partition (acks=all keeps working there), retries the
/// failing one with backoff, and catches up once the leader's data reads back intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_partition_does_not_stop_the_fetcher() {
    let dir = tempfile::tempdir().unwrap();
    let (store, a, b) = two_brokers(dir.path(), &[]).await;
    let topic_id = Uuid::from_u128(0x5678);
    topic_in_store(&store, "iso", topic_id, 2).await;
    let states = |leader| {
        (0..2)
            .map(|partition| Leadership {
                partition,
                leader,
                leader_epoch: 1,
                isr: vec![1, 2],
                replicas: vec![1, 2],
            })
            .collect::<Vec<_>>()
    };
    leader_and_isr(&store, &a, "iso", topic_id, &states(&a)).await;
    leader_and_isr(&store, &b, "iso", topic_id, &states(&a)).await;
    let mut to_a = connect(&a).await;
    for p in 0..2 {
        assert_eq!(produce(&mut to_a, "iso", p, 2, "ok", -1).await, (NONE, 0));
    }
    // Hold the follower back on partition 0 while the next batch is written and corrupted on
    // the leader's disk: B moves to epoch 2 first, and A answers UNKNOWN_LEADER_EPOCH until
    // it is told about epoch 2 too.
    let epoch2 = |leader| Leadership {
        partition: 0,
        leader,
        leader_epoch: 2,
        isr: vec![1, 2],
        replicas: vec![1, 2],
    };
    leader_and_isr(&store, &b, "iso", topic_id, &[epoch2(&a)]).await;
    assert_eq!(produce(&mut to_a, "iso", 0, 3, "bad", 1).await, (NONE, 2));
    // One byte of a value flips: the follower's CRC check refuses the batch.
    let path = log_dir(dir.path(), 1).join("iso-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 2;
    let original = bytes[last];
    bytes[last] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    leader_and_isr(&store, &a, "iso", topic_id, &[epoch2(&a)]).await;
    // Meanwhile partition 1 replicates: acks=all is answered, and the copies match.
    for round in 0..5 {
        let (error, _) = produce(&mut to_a, "iso", 1, 2, &format!("more{round}"), -1).await;
        assert_eq!(error, NONE);
    }
    within(10, "partition 1 replicated", || async {
        segment(dir.path(), 1, "iso", 1) == segment(dir.path(), 2, "iso", 1)
    })
    .await;
    assert_ne!(
        segment(dir.path(), 1, "iso", 0),
        segment(dir.path(), 2, "iso", 0),
        "the corrupt batch was not copied"
    );
    // The leader's data reads back intact again: the follower catches up by itself.
    bytes[last] = original;
    std::fs::write(&path, &bytes).unwrap();
    within(15, "partition 0 replicated after the retry", || async {
        segment(dir.path(), 1, "iso", 0) == segment(dir.path(), 2, "iso", 0)
    })
    .await;
    drop(to_a);
    a.shutdown().await;
    b.shutdown().await;
    store.close().await;
}

/// KIP-227 on the wire: a full fetch creates a session, an idle incremental fetch names no
/// partition and gets none back, new data comes back for its partition only, a stale epoch is
/// refused.
#[tokio::test]
async fn incremental_fetch_sessions_carry_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = connect(&broker).await;
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("sess"))
                    .with_num_partitions(3)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, NONE);
    within(10, "partitions online", || {
        let addr = broker.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            let mut ok = true;
            for p in 0..3 {
                ok &= consume(&mut c, "sess", p, 0).await.0 == NONE;
            }
            ok
        }
    })
    .await;
    let fetch = |session_id: i32, epoch: i32, partitions: &[(i32, i64)]| {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(10)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_id(session_id)
            .with_session_epoch(epoch)
            .with_topics(if partitions.is_empty() {
                vec![]
            } else {
                vec![fetch_request::FetchTopic::default()
                    .with_topic(name("sess"))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|&(p, offset)| {
                                fetch_request::FetchPartition::default()
                                    .with_partition(p)
                                    .with_fetch_offset(offset)
                                    .with_partition_max_bytes(1 << 20)
                            })
                            .collect(),
                    )]
            })
    };
    let full = conn
        .send_version(fetch(0, 0, &[(0, 0), (1, 0), (2, 0)]), 12)
        .await
        .unwrap();
    assert_eq!(full.error_code, NONE);
    let session = full.session_id;
    assert_ne!(session, 0, "a full fetch at epoch 0 creates a session");
    assert_eq!(full.responses[0].partitions.len(), 3);
    // Idle: nothing named, nothing answered; the encoded answer is a few bytes.
    let idle = conn.send_version(fetch(session, 1, &[]), 12).await.unwrap();
    assert_eq!((idle.error_code, idle.session_id), (NONE, session));
    assert!(idle.responses.is_empty());
    let mut encoded = BytesMut::new();
    kafka_protocol::protocol::Encodable::encode(&idle, &mut encoded, 12).unwrap();
    assert!(
        encoded.len() < 20,
        "an idle answer is {} bytes",
        encoded.len()
    );
    // New records in partition 1: only partition 1 comes back.
    assert_eq!(produce(&mut conn, "sess", 1, 2, "x", 1).await, (NONE, 0));
    let changed = conn.send_version(fetch(session, 2, &[]), 12).await.unwrap();
    assert_eq!(changed.responses.len(), 1);
    let parts = &changed.responses[0].partitions;
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].partition_index, 1);
    assert_eq!(parts[0].high_watermark, 2);
    assert_eq!(values(&parts[0].records), vec!["x-0", "x-1"]);
    // Moving partition 1's position on: the next answer has nothing new.
    let moved = conn
        .send_version(fetch(session, 3, &[(1, 2)]), 12)
        .await
        .unwrap();
    assert!(moved.responses.is_empty(), "{moved:?}");
    // A repeated or skipped epoch is refused; the client starts over with a full fetch.
    let stale = conn.send_version(fetch(session, 3, &[]), 12).await.unwrap();
    assert_eq!(stale.error_code, INVALID_FETCH_SESSION_EPOCH);
    drop(conn);
    broker.shutdown().await;
}

/// The leader's ISR management through the real controller. Broker 3 is registered but never
/// fetches (a stuck follower): after `replica.lag.time.max.ms` the leader asks the controller
/// to drop it (AlterPartition), the state znode and every broker's metadata follow, and an
/// acks=all produce that waited for it is answered (min.insync.replicas=2 holds). When broker
/// 3 fetches up to the log end, it joins again. AlterPartition refusals are checked on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_isr_shrinks_after_the_lag_time_and_expands_on_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let lag = ["replica.lag.time.max.ms=3000"];
    let (store, a, b) = two_brokers(dir.path(), &lag).await;
    // A stuck broker 3: registered, answering control requests, never fetching.
    let stuck_port = stuck_broker().await;
    let zk = store_session(&store);
    let registration =
        znodes::json::BrokerRegistration::plaintext("127.0.0.1", stuck_port, None, 0);
    let stuck_epoch = zk.register_broker(3, &registration).await.unwrap();
    within(10, "one controller", || async {
        a.is_controller() != b.is_controller()
    })
    .await;
    let controller = if a.is_controller() { &a } else { &b };
    let mut to_controller = connect(controller).await;
    let created = to_controller
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("isr"))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(vec![CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![BrokerId(1), BrokerId(2), BrokerId(3)])])
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str("min.insync.replicas"))
                        .with_value(Some(StrBytes::from_static_str("2")))])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, NONE, "{created:?}");
    let mut to_a = connect(&a).await;
    let to_b = connect(&b).await;
    within(10, "the leader serves", || {
        let addr = a.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            consume(&mut c, "isr", 0, 0).await.0 == NONE
        }
    })
    .await;
    within(10, "every broker knows the ISR", || {
        let addr = b.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            metadata_isr(&mut c, "isr", 0).await == vec![1, 2, 3]
        }
    })
    .await;
    let tp = TopicPartition::new("isr".parse().unwrap(), 0);
    let state = zk.get_partition_state(&tp).await.unwrap().unwrap();
    assert_eq!(
        (state.state.isr.clone(), state.zk_version),
        (vec![1, 2, 3], 0)
    );

    // AlterPartition refusals (nothing is written by any of them).
    let alter = |broker: i32,
                 broker_epoch: i64,
                 partition: i32,
                 leader_epoch: i32,
                 isr: &[i32],
                 partition_epoch: i32| {
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(broker))
            .with_broker_epoch(broker_epoch)
            .with_topics(vec![alter_partition_request::TopicData::default()
                .with_topic_name(name("isr"))
                .with_partitions(vec![
                    alter_partition_request::PartitionData::default()
                        .with_partition_index(partition)
                        .with_leader_epoch(leader_epoch)
                        .with_new_isr(isr.iter().map(|&b| BrokerId(b)).collect())
                        .with_partition_epoch(partition_epoch),
                ])])
    };
    let (key, _, _) = control_plane_key(&store).await;
    // Without the broker's proof (a client): refused before the controller sees it.
    let unsigned = to_controller
        .send_version(alter(1, a.broker_epoch(), 0, 0, &[1, 2], 0), 0)
        .await
        .unwrap();
    assert_eq!(unsigned.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let other = if a.is_controller() { &b } else { &a };
    let refused = connect(other)
        .await
        .send_version_tagged(
            alter(1, a.broker_epoch(), 0, 0, &[1, 2], 0),
            0,
            &broker_proof_tags(&key, 1, a.broker_epoch()),
        )
        .await
        .unwrap();
    assert_eq!(refused.error_code, NOT_CONTROLLER);
    let refused = to_controller
        .send_version_tagged(
            alter(1, a.broker_epoch() - 1, 0, 0, &[1, 2], 0),
            0,
            &broker_proof_tags(&key, 1, a.broker_epoch() - 1),
        )
        .await
        .unwrap();
    assert_eq!(refused.error_code, STALE_BROKER_EPOCH);
    let epoch = a.broker_epoch();
    for (partition, leader_epoch, isr, partition_epoch, expected) in [
        (5, 0, vec![1, 2], 0, UNKNOWN_TOPIC_OR_PARTITION),
        (0, -1, vec![1, 2], 0, FENCED_LEADER_EPOCH),
        (0, 0, vec![1, 4], 0, INVALID_REQUEST),
        (0, 0, vec![2, 3], 0, INVALID_REQUEST),
    ] {
        let response = to_controller
            .send_version_tagged(
                alter(1, epoch, partition, leader_epoch, &isr, partition_epoch),
                1,
                &broker_proof_tags(&key, 1, epoch),
            )
            .await
            .unwrap();
        assert_eq!(response.error_code, NONE);
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error_code, expected, "partition {partition} isr {isr:?}");
    }
    // The current state asked again is answered with it, unchanged.
    let current = to_controller
        .send_version_tagged(
            alter(1, epoch, 0, 0, &[3, 2, 1], 0),
            0,
            &broker_proof_tags(&key, 1, epoch),
        )
        .await
        .unwrap();
    let p = &current.topics[0].partitions[0];
    assert_eq!(
        (p.error_code, p.partition_epoch, p.leader_id.0),
        (NONE, 0, 1)
    );

    // An acks=all produce: broker 2 copies it, broker 3 never fetches. It is answered once the
    // leader dropped broker 3 from the ISR (after 3 s), with min.insync.replicas=2 met.
    assert_eq!(produce(&mut to_a, "isr", 0, 5, "w", -1).await, (NONE, 0));
    within(10, "the ISR without broker 3 everywhere", || {
        let addr = b.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            metadata_isr(&mut c, "isr", 0).await == vec![1, 2]
        }
    })
    .await;
    let state = zk.get_partition_state(&tp).await.unwrap().unwrap();
    assert_eq!(
        (
            state.state.isr.clone(),
            state.state.leader_epoch,
            state.zk_version
        ),
        (vec![1, 2], 0, 1),
        "the ISR changed at the same leader epoch; the partition epoch moved"
    );
    // A stale partition epoch is now refused.
    let stale = to_controller
        .send_version_tagged(
            alter(1, epoch, 0, 0, &[1], 0),
            0,
            &broker_proof_tags(&key, 1, epoch),
        )
        .await
        .unwrap();
    assert_eq!(
        stale.topics[0].partitions[0].error_code,
        INVALID_UPDATE_VERSION
    );
    // acks=all goes on with two in-sync replicas.
    assert_eq!(produce(&mut to_a, "isr", 0, 1, "v", -1).await, (NONE, 5));

    // Broker 3 fetches as a follower, up to the leader's end: it is back in the ISR.
    let mut as_3 = connect(&a).await;
    let fetch3 = |offset: i64| {
        FetchRequest::default()
            .with_replica_id(BrokerId(3))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(name("isr"))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])])
    };
    let first = as_3.send_version(fetch3(0), 12).await.unwrap();
    let records = values(&first.responses[0].partitions[0].records);
    assert_eq!(records.len(), 6);
    let _ = as_3.send_version(fetch3(6), 12).await.unwrap();
    within(10, "broker 3 back in the ISR", || {
        let addr = b.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            metadata_isr(&mut c, "isr", 0).await == vec![1, 2, 3]
        }
    })
    .await;
    let state = zk.get_partition_state(&tp).await.unwrap().unwrap();
    assert_eq!((state.state.isr.len(), state.zk_version), (3, 2));
    assert_ne!(stuck_epoch, 0);
    drop((to_a, to_b, to_controller, as_3));
    zk.close().await;
    a.shutdown().await;
    b.shutdown().await;
    store.close().await;
}
