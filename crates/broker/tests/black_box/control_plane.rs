//! Issue 13: only the controller can drive a broker. Forged LeaderAndIsr, StopReplica
//! (delete) and UpdateMetadata requests from a client connection are refused at any epoch,
//! with or without a stolen-looking proof, and change nothing: the log stays, the partition
//! stays readable, and the real controller keeps working (topics created afterwards get a
//! leader).

use crate::common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::net::TcpStream;

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const STALE_CONTROLLER_EPOCH: i16 = 11;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Every forged request, for `topic`-0 on broker `receiver`, claiming `controller_id` at
/// `epoch`: (api, version, body).
fn forgeries(
    topic: &str,
    topic_id: uuid::Uuid,
    controller_id: i32,
    epoch: i32,
    broker_epoch: i64,
) -> Vec<(ApiKey, i16, RequestKind)> {
    let stop_v3 = StopReplicaRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_broker_epoch(broker_epoch)
        .with_topic_states(vec![StopReplicaTopicState::default()
            .with_topic_name(name(topic))
            .with_partition_states(vec![StopReplicaPartitionState::default()
                .with_partition_index(0)
                .with_leader_epoch(i32::MAX - 1)
                .with_delete_partition(true)])]);
    let stop_v0 = StopReplicaRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_delete_partitions(true)
        .with_ungrouped_partitions(vec![stop_replica_request::StopReplicaPartitionV0::default(
        )
        .with_topic_name(name(topic))
        .with_partition_index(0)]);
    // Leadership moved to a broker that does not exist, with a huge leader epoch.
    let state = LeaderAndIsrPartitionState::default()
        .with_topic_name(name(topic))
        .with_partition_index(0)
        .with_controller_epoch(epoch)
        .with_leader(BrokerId(99))
        .with_leader_epoch(i32::MAX - 1)
        .with_isr(vec![BrokerId(99)])
        .with_replicas(vec![BrokerId(0), BrokerId(99)]);
    let leader = LeaderAndIsrLiveLeader::default()
        .with_broker_id(BrokerId(99))
        .with_host_name(StrBytes::from_static_str("127.0.0.1"))
        .with_port(1);
    let lai_v5 = LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_broker_epoch(broker_epoch)
        .with_topic_states(vec![LeaderAndIsrTopicState::default()
            .with_topic_name(name(topic))
            .with_topic_id(topic_id)
            .with_partition_states(vec![state.clone().with_topic_name(name(""))])])
        .with_live_leaders(vec![leader.clone()]);
    let lai_v1 = LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_ungrouped_partition_states(vec![state])
        .with_live_leaders(vec![leader]);
    // An empty cluster: no brokers, no topics.
    let update_v0 = UpdateMetadataRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch);
    let update_v7 = update_v0.clone().with_broker_epoch(broker_epoch);
    let update_v8 = update_v7.clone();
    vec![
        (ApiKey::StopReplica, 0, RequestKind::StopReplica(stop_v0)),
        (
            ApiKey::StopReplica,
            3,
            RequestKind::StopReplica(stop_v3.clone()),
        ),
        (ApiKey::StopReplica, 4, RequestKind::StopReplica(stop_v3)),
        (ApiKey::LeaderAndIsr, 1, RequestKind::LeaderAndIsr(lai_v1)),
        (
            ApiKey::LeaderAndIsr,
            5,
            RequestKind::LeaderAndIsr(lai_v5.clone()),
        ),
        (ApiKey::LeaderAndIsr, 7, RequestKind::LeaderAndIsr(lai_v5)),
        (
            ApiKey::UpdateMetadata,
            8,
            RequestKind::UpdateMetadata(update_v8),
        ),
        (
            ApiKey::UpdateMetadata,
            0,
            RequestKind::UpdateMetadata(update_v0),
        ),
        (
            ApiKey::UpdateMetadata,
            7,
            RequestKind::UpdateMetadata(update_v7),
        ),
    ]
}

fn error_code(key: ApiKey, version: i16, payload: &mut Bytes) -> i16 {
    use kafka_protocol::protocol::Decodable;
    match key {
        ApiKey::StopReplica => {
            StopReplicaResponse::decode(payload, version)
                .unwrap()
                .error_code
        }
        ApiKey::LeaderAndIsr => {
            LeaderAndIsrResponse::decode(payload, version)
                .unwrap()
                .error_code
        }
        ApiKey::UpdateMetadata => {
            UpdateMetadataResponse::decode(payload, version)
                .unwrap()
                .error_code
        }
        other => panic!("not a control API: {other:?}"),
    }
}

async fn send_raw(
    raw: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &RequestKind,
    tags: std::collections::BTreeMap<i32, Bytes>,
) -> i16 {
    let mut payload = send_raw_body(raw, key, version, body, tags).await;
    error_code(key, version, &mut payload)
}

/// Sends `body` and returns the response body (after its header).
async fn send_raw_body(
    raw: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &RequestKind,
    tags: std::collections::BTreeMap<i32, Bytes>,
) -> Bytes {
    use kafka_protocol::protocol::Decodable;
    use tokio::io::AsyncWriteExt;
    let frame = if key.request_header_version(version) >= 2 {
        tagged_request_frame(key, version, 7, body, tags)
    } else {
        request_frame(key, version, 7, body)
    };
    raw.write_all(&frame).await.unwrap();
    let mut payload = read_frame(raw).await;
    ResponseHeader::decode(&mut payload, key.response_header_version(version)).unwrap();
    payload
}

fn one_record(value: &str) -> Bytes {
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
        value: Some(Bytes::from(value.to_owned())),
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

async fn create_topic(conn: &mut Connection, topic: &str) {
    let response = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(response.topics[0].error_code, 0, "create {topic}");
}

/// The partition's leader as Metadata shows it, once it has one.
async fn leader_of(conn: &mut Connection, topic: &str) -> Option<i32> {
    for _ in 0..250 {
        let response = conn
            .send(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
            ])))
            .await
            .unwrap();
        let leader = response.topics[0]
            .partitions
            .first()
            .map(|p| p.leader_id.0)
            .unwrap_or(-1);
        if leader >= 0 {
            return Some(leader);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn produce(conn: &mut Connection, topic: &str, value: &str) {
    let response = conn
        .send(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(name(topic))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(one_record(value))),
                    ])]),
        )
        .await
        .unwrap();
    assert_eq!(
        response.responses[0].partition_responses[0].error_code, 0,
        "produce to {topic}"
    );
}

async fn fetch_values(conn: &mut Connection, topic: &str) -> Vec<String> {
    let response = conn
        .send(
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]),
        )
        .await
        .unwrap();
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0, "fetch from {topic}");
    let mut buf = partition.records.clone().unwrap_or_default();
    let mut values = Vec::new();
    while !buf.is_empty() {
        for record in RecordBatchDecoder::decode(&mut buf).unwrap().records {
            values.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
        }
    }
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_13_forged_control_requests_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "victim")
        .await
        .unwrap();
    create_topic(&mut conn, "precious").await;
    assert_eq!(leader_of(&mut conn, "precious").await, Some(0));
    produce(&mut conn, "precious", "keep-me").await;
    let log_dir = dir.path().join("logs").join("precious-0");
    assert!(log_dir.exists());

    let (key, controller_id, epoch) = control_plane_key(&store).await;
    let wrong_key = security::control_plane::ControlPlaneKey::new([0x42; 32]);
    let broker_epoch = broker.broker_epoch();
    let mut raw = TcpStream::connect(broker.local_addr()).await.unwrap();
    // Every epoch a client could try, with no proof or a made-up one: not authorized.
    for claimed_epoch in [0, epoch - 1, epoch, epoch + 1, i32::MAX] {
        for claimed_id in [controller_id, 1, -1] {
            for (api, version, body) in forgeries(
                "precious",
                uuid::Uuid::nil(),
                claimed_id,
                claimed_epoch,
                broker_epoch,
            ) {
                let none = send_raw(&mut raw, api, version, &body, Default::default()).await;
                assert_eq!(
                    none, CLUSTER_AUTHORIZATION_FAILED,
                    "{api:?} v{version} epoch {claimed_epoch} without proof"
                );
                let garbage = std::collections::BTreeMap::from([(
                    security::control_plane::PROOF_TAG,
                    Bytes::from_static(&[0u8; 32]),
                )]);
                let code = send_raw(&mut raw, api, version, &body, garbage).await;
                assert_eq!(
                    code, CLUSTER_AUTHORIZATION_FAILED,
                    "{api:?} v{version} garbage proof"
                );
                let forged = proof_tags(&wrong_key, claimed_id, claimed_epoch, 0);
                let code = send_raw(&mut raw, api, version, &body, forged).await;
                assert_eq!(
                    code, CLUSTER_AUTHORIZATION_FAILED,
                    "{api:?} v{version} another key"
                );
            }
        }
    }
    // Even with the cluster's key (a broker that went rogue, or a deposed controller), an
    // epoch or controller the store does not record now is refused, never adopted.
    for (claimed_id, claimed_epoch) in [
        (controller_id, epoch + 1),
        (controller_id, i32::MAX),
        (controller_id, epoch - 1),
        (controller_id + 1, epoch),
    ] {
        for (api, version, body) in forgeries(
            "precious",
            uuid::Uuid::nil(),
            claimed_id,
            claimed_epoch,
            broker_epoch,
        ) {
            if api.request_header_version(version) < 2 {
                continue;
            }
            let tags = proof_tags(&key, claimed_id, claimed_epoch, 0);
            let code = send_raw(&mut raw, api, version, &body, tags).await;
            assert_eq!(
                code, STALE_CONTROLLER_EPOCH,
                "{api:?} v{version} controller {claimed_id} epoch {claimed_epoch}"
            );
        }
    }

    // Nothing changed: the log is there, the partition is led by broker 0 and readable.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(log_dir.exists(), "the forged StopReplica deleted the log");
    assert_eq!(leader_of(&mut conn, "precious").await, Some(0));
    assert_eq!(fetch_values(&mut conn, "precious").await, ["keep-me"]);
    produce(&mut conn, "precious", "still-writable").await;
    assert_eq!(
        fetch_values(&mut conn, "precious").await,
        ["keep-me", "still-writable"]
    );
    // The real controller was not fenced: a topic created afterwards gets a leader.
    create_topic(&mut conn, "afterwards").await;
    assert_eq!(leader_of(&mut conn, "afterwards").await, Some(0));
    produce(&mut conn, "afterwards", "new").await;
    assert_eq!(fetch_values(&mut conn, "afterwards").await, ["new"]);

    broker.shutdown().await;
    store.close().await;
}

/// Issue 16: the controller's requests at Kafka 3.9's versions, signed with the cluster's key.
/// A KRaft controller's (`is_kraft_controller`, KIP-866 migration) is refused and changes
/// nothing; StopReplica v3+ fences a leader epoch older than the replica's
/// (FENCED_LEADER_EPOCH, the log stays) and stops the replica at its own epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_16_control_requests_at_kafka_3_9_versions() {
    use kafka_protocol::protocol::Decodable;
    const UNKNOWN_SERVER_ERROR: i16 = -1;
    const FENCED_LEADER_EPOCH: i16 = 74;
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "ops")
        .await
        .unwrap();
    create_topic(&mut conn, "kept").await;
    assert_eq!(leader_of(&mut conn, "kept").await, Some(0));
    produce(&mut conn, "kept", "v").await;
    let log_dir = dir.path().join("logs").join("kept-0");
    let metadata = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("kept"))),
        ])))
        .await
        .unwrap();
    let topic_id = metadata.topics[0].topic_id;
    assert!(!topic_id.is_nil());

    let (key, controller_id, epoch) = control_plane_key(&store).await;
    let broker_epoch = broker.broker_epoch();
    let tags = || proof_tags(&key, controller_id, epoch, 0);
    let mut raw = TcpStream::connect(broker.local_addr()).await.unwrap();

    // From a KRaft controller: refused at every version that can say so, nothing changes.
    for (api, version, body) in forgeries("kept", topic_id, controller_id, epoch, broker_epoch) {
        let body = match body {
            RequestKind::StopReplica(r) if version >= 4 => {
                RequestKind::StopReplica(r.with_is_k_raft_controller(true))
            }
            RequestKind::LeaderAndIsr(r) if version >= 7 => {
                RequestKind::LeaderAndIsr(r.with_is_k_raft_controller(true))
            }
            RequestKind::UpdateMetadata(r) if version >= 8 => {
                RequestKind::UpdateMetadata(r.with_is_k_raft_controller(true))
            }
            _ => continue,
        };
        let code = send_raw(&mut raw, api, version, &body, tags()).await;
        assert_eq!(code, UNKNOWN_SERVER_ERROR, "{api:?} v{version} from KRaft");
    }
    assert!(log_dir.exists());
    assert_eq!(leader_of(&mut conn, "kept").await, Some(0));
    assert_eq!(fetch_values(&mut conn, "kept").await, ["v"]);

    // The controller (this key, this epoch) moves the partition to leader epoch 5 at v7.
    let lai = LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_broker_epoch(broker_epoch)
        .with_topic_states(vec![LeaderAndIsrTopicState::default()
            .with_topic_name(name("kept"))
            .with_topic_id(topic_id)
            .with_partition_states(vec![LeaderAndIsrPartitionState::default()
                .with_partition_index(0)
                .with_controller_epoch(epoch)
                .with_leader(BrokerId(0))
                .with_leader_epoch(5)
                .with_isr(vec![BrokerId(0)])
                .with_partition_epoch(1_000)
                .with_replicas(vec![BrokerId(0)])
                .with_leader_recovery_state(1)])])
        .with_live_leaders(vec![LeaderAndIsrLiveLeader::default()
            .with_broker_id(BrokerId(0))
            .with_host_name(StrBytes::from_static_str("127.0.0.1"))
            .with_port(broker.local_addr().port() as i32)]);
    let mut body = send_raw_body(
        &mut raw,
        ApiKey::LeaderAndIsr,
        7,
        &RequestKind::LeaderAndIsr(lai),
        tags(),
    )
    .await;
    let response = LeaderAndIsrResponse::decode(&mut body, 7).unwrap();
    assert_eq!(response.error_code, 0);
    assert_eq!(response.topics[0].topic_id, topic_id);
    assert_eq!(response.topics[0].partition_errors[0].error_code, 0);
    // A RECOVERING leader marks itself recovered (Kafka 3.9) and serves.
    produce(&mut conn, "kept", "w").await;

    let stop = |leader_epoch: i32, delete: bool| {
        StopReplicaRequest::default()
            .with_controller_id(BrokerId(controller_id))
            .with_controller_epoch(epoch)
            .with_broker_epoch(broker_epoch)
            .with_topic_states(vec![StopReplicaTopicState::default()
                .with_topic_name(name("kept"))
                .with_partition_states(vec![StopReplicaPartitionState::default()
                    .with_partition_index(0)
                    .with_leader_epoch(leader_epoch)
                    .with_delete_partition(delete)])])
    };
    for version in [3, 4] {
        let mut body = send_raw_body(
            &mut raw,
            ApiKey::StopReplica,
            version,
            &RequestKind::StopReplica(stop(4, true)),
            tags(),
        )
        .await;
        let response = StopReplicaResponse::decode(&mut body, version).unwrap();
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(
            response.partition_errors[0].error_code, FENCED_LEADER_EPOCH,
            "StopReplica v{version} at an older leader epoch"
        );
        assert!(
            log_dir.exists(),
            "v{version}: the fenced StopReplica deleted the log"
        );
        assert_eq!(fetch_values(&mut conn, "kept").await, ["v", "w"]);
    }
    // At the replica's own epoch it stops (no delete: the log stays on disk).
    let mut body = send_raw_body(
        &mut raw,
        ApiKey::StopReplica,
        4,
        &RequestKind::StopReplica(stop(5, false)),
        tags(),
    )
    .await;
    let response = StopReplicaResponse::decode(&mut body, 4).unwrap();
    assert_eq!(response.partition_errors[0].error_code, 0);
    assert!(log_dir.exists());

    broker.shutdown().await;
    store.close().await;
}

/// Issue 16: Fetch v13+ names topics by id. An id the metadata cache does not know is
/// UNKNOWN_TOPIC_ID; an id it knows for a name whose local log holds another topic id (here
/// the controller, with the cluster's key, announces a new id for the topic while this
/// broker's log is the old topic's) is INCONSISTENT_TOPIC_ID, as Kafka 3.9's ReplicaManager;
/// by name (v12) the log is read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_16_fetch_by_a_topic_id_the_log_does_not_have() {
    use kafka_protocol::messages::update_metadata_request::{
        UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
        UpdateMetadataTopicState,
    };
    use kafka_protocol::protocol::Decodable;
    const UNKNOWN_TOPIC_ID: i16 = 100;
    const INCONSISTENT_TOPIC_ID: i16 = 103;
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "ops")
        .await
        .unwrap();
    create_topic(&mut conn, "ids").await;
    assert_eq!(leader_of(&mut conn, "ids").await, Some(0));
    produce(&mut conn, "ids", "one").await;
    let metadata = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("ids"))),
        ])))
        .await
        .unwrap();
    let log_id = metadata.topics[0].topic_id;
    assert!(!log_id.is_nil());
    let mut raw = TcpStream::connect(broker.local_addr()).await.unwrap();

    let fetch = |id: uuid::Uuid, version: i16| {
        let topic = fetch_request::FetchTopic::default().with_partitions(vec![
            fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20),
        ]);
        let topic = if version >= 13 {
            topic.with_topic_id(id)
        } else {
            topic.with_topic(name("ids"))
        };
        RequestKind::Fetch(
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![topic]),
        )
    };
    async fn code(raw: &mut TcpStream, body: &RequestKind, version: i16) -> (i16, bool) {
        let mut payload =
            send_raw_body(raw, ApiKey::Fetch, version, body, Default::default()).await;
        let response = FetchResponse::decode(&mut payload, version).unwrap();
        let p = &response.responses[0].partitions[0];
        (
            p.error_code,
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
        )
    }
    // The log's own id reads at every by-id version.
    for version in [13, 16, 17] {
        assert_eq!(
            code(&mut raw, &fetch(log_id, version), version).await,
            (0, true),
            "v{version}"
        );
    }
    let stranger = uuid::Uuid::from_u128(0x5eed);
    assert_eq!(
        code(&mut raw, &fetch(stranger, 13), 13).await,
        (UNKNOWN_TOPIC_ID, false)
    );

    // The metadata now says the topic "ids" has another id; the log still has the old one.
    let (key, controller_id, epoch) = control_plane_key(&store).await;
    let new_id = uuid::Uuid::from_u128(0xfeed);
    let addr = broker.local_addr();
    let update = UpdateMetadataRequest::default()
        .with_controller_id(BrokerId(controller_id))
        .with_controller_epoch(epoch)
        .with_broker_epoch(broker.broker_epoch())
        .with_topic_states(vec![UpdateMetadataTopicState::default()
            .with_topic_name(name("ids"))
            .with_topic_id(new_id)
            .with_partition_states(vec![UpdateMetadataPartitionState::default()
                .with_partition_index(0)
                .with_controller_epoch(epoch)
                .with_leader(BrokerId(0))
                .with_leader_epoch(0)
                .with_isr(vec![BrokerId(0)])
                .with_replicas(vec![BrokerId(0)])])])
        .with_live_brokers(vec![UpdateMetadataBroker::default()
            .with_id(BrokerId(0))
            .with_endpoints(vec![UpdateMetadataEndpoint::default()
                .with_host(StrBytes::from_string(addr.ip().to_string()))
                .with_port(i32::from(addr.port()))
                .with_listener(StrBytes::from_static_str("PLAINTEXT"))
                .with_security_protocol(0)])]);
    let code_um = send_raw(
        &mut raw,
        ApiKey::UpdateMetadata,
        8,
        &RequestKind::UpdateMetadata(update),
        proof_tags(&key, controller_id, epoch, 0),
    )
    .await;
    assert_eq!(code_um, 0);
    for version in [13, 17] {
        assert_eq!(
            code(&mut raw, &fetch(new_id, version), version).await,
            (INCONSISTENT_TOPIC_ID, false),
            "v{version}: the cache's id is not the log's"
        );
        assert_eq!(
            code(&mut raw, &fetch(log_id, version), version).await,
            (UNKNOWN_TOPIC_ID, false),
            "v{version}: the cache no longer knows the old id"
        );
    }
    // By name there is no id to check.
    assert_eq!(code(&mut raw, &fetch(log_id, 12), 12).await, (0, true));

    broker.shutdown().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_does_not_show_the_control_plane_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    let admin = broker::admin_http::AdminServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        vec![broker.admin_view()],
    )
    .await
    .unwrap();
    let mut stream = TcpStream::connect(admin.local_addr()).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /v1/meta/gregor/control_plane_secret HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("\"data\":\"<redacted>\""), "{body}");
    admin.shutdown().await;
    broker.shutdown().await;
    store.close().await;
}
