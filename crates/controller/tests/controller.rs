//! The controller end to end on an in-memory embedded store, with fake brokers: real TCP
//! peers that decode the control requests with kafka-protocol and answer success.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    LeaderAndIsrRequest, LeaderAndIsrResponse, RequestHeader, ResponseHeader, StopReplicaRequest,
    StopReplicaResponse, TopicName as WireTopicName, UpdateMetadataRequest, UpdateMetadataResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use controller::{ControllerConfig, ControllerHandle};
use metastore::{EmbeddedStore, SessionOptions};
use model::{TopicId, TopicName};
use znodes::json::{BrokerRegistration, TopicAssignment, ZnodeJson};
use znodes::paths;
use znodes::zk_client::{KafkaZkClient, ZkClientError};

const WAIT: Duration = Duration::from_secs(10);

/// What a fake broker received.
#[derive(Debug, Clone)]
enum Received {
    LeaderAndIsr(LeaderAndIsrRequest),
    UpdateMetadata(UpdateMetadataRequest),
    StopReplica(StopReplicaRequest),
}

#[derive(Debug, Clone)]
struct FakeBroker {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    /// Milliseconds the broker takes before it applies and answers an UpdateMetadata.
    update_metadata_delay_ms: Arc<AtomicU64>,
}

impl FakeBroker {
    async fn start() -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let delay = Arc::new(AtomicU64::new(0));
        let sink = Arc::clone(&received);
        let delay_ms = Arc::clone(&delay);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&sink), Arc::clone(&delay_ms)));
            }
        });
        FakeBroker {
            port,
            received,
            update_metadata_delay_ms: delay,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    fn stop_replicas(&self) -> Vec<(String, i32, bool)> {
        self.received()
            .into_iter()
            .filter_map(|r| match r {
                Received::StopReplica(req) => Some(req),
                _ => None,
            })
            .flat_map(|req| {
                req.topic_states.into_iter().flat_map(|t| {
                    let topic = t.topic_name.0.as_str().to_owned();
                    t.partition_states
                        .into_iter()
                        .map(move |p| (topic.clone(), p.partition_index, p.delete_partition))
                })
            })
            .collect()
    }

    fn update_metadata_leaders(&self, topic: &str) -> Vec<(i32, i32)> {
        self.received()
            .into_iter()
            .filter_map(|r| match r {
                Received::UpdateMetadata(req) => Some(req),
                _ => None,
            })
            .flat_map(|req| req.topic_states)
            .filter(|t| t.topic_name.0.as_str() == topic)
            .flat_map(|t| {
                t.partition_states
                    .into_iter()
                    .map(|p| (p.partition_index, p.leader.0))
            })
            .collect()
    }

    fn leader_and_isr_partitions(&self, topic: &str) -> Vec<(i32, i32, bool)> {
        self.received()
            .into_iter()
            .filter_map(|r| match r {
                Received::LeaderAndIsr(req) => Some(req),
                _ => None,
            })
            .flat_map(|req| req.topic_states)
            .filter(|t| t.topic_name.0.as_str() == topic)
            .flat_map(|t| {
                t.partition_states
                    .into_iter()
                    .map(|p| (p.partition_index, p.leader.0, p.is_new))
            })
            .collect()
    }
}

async fn serve(
    mut stream: TcpStream,
    sink: Arc<Mutex<Vec<Received>>>,
    update_metadata_delay_ms: Arc<AtomicU64>,
) {
    loop {
        let Ok(size) = stream.read_i32().await else {
            return;
        };
        let mut frame = vec![0; size as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut buf = Bytes::from(frame);
        let api_key = ApiKey::try_from(i16::from_be_bytes([buf[0], buf[1]])).unwrap();
        let version = i16::from_be_bytes([buf[2], buf[3]]);
        let header =
            RequestHeader::decode(&mut buf, api_key.request_header_version(version)).unwrap();
        let mut body = BytesMut::new();
        match api_key {
            ApiKey::ApiVersions => {
                let keys = [
                    (ApiKey::ApiVersions, 3),
                    (ApiKey::LeaderAndIsr, 5),
                    (ApiKey::UpdateMetadata, 7),
                    (ApiKey::StopReplica, 3),
                ];
                let api_keys = keys
                    .iter()
                    .map(|(k, max)| {
                        ApiVersion::default()
                            .with_api_key(*k as i16)
                            .with_min_version(0)
                            .with_max_version(*max)
                    })
                    .collect();
                ApiVersionsResponse::default()
                    .with_api_keys(api_keys)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::LeaderAndIsr => {
                let request = LeaderAndIsrRequest::decode(&mut buf, version).unwrap();
                let topics = request
                    .topic_states
                    .iter()
                    .map(|t| {
                        LeaderAndIsrTopicError::default()
                            .with_topic_id(t.topic_id)
                            .with_partition_errors(
                                t.partition_states
                                    .iter()
                                    .map(|p| {
                                        LeaderAndIsrPartitionError::default()
                                            .with_partition_index(p.partition_index)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                sink.lock().unwrap().push(Received::LeaderAndIsr(request));
                LeaderAndIsrResponse::default()
                    .with_topics(topics)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::UpdateMetadata => {
                let request = UpdateMetadataRequest::decode(&mut buf, version).unwrap();
                let delay = update_metadata_delay_ms.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                sink.lock().unwrap().push(Received::UpdateMetadata(request));
                UpdateMetadataResponse::default()
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::StopReplica => {
                let request = StopReplicaRequest::decode(&mut buf, version).unwrap();
                let errors = request
                    .topic_states
                    .iter()
                    .flat_map(|t| {
                        t.partition_states.iter().map(|p| {
                            StopReplicaPartitionError::default()
                                .with_topic_name(t.topic_name.clone())
                                .with_partition_index(p.partition_index)
                        })
                    })
                    .collect();
                sink.lock().unwrap().push(Received::StopReplica(request));
                StopReplicaResponse::default()
                    .with_partition_errors(errors)
                    .encode(&mut body, version)
                    .unwrap();
            }
            other => panic!("fake broker got an unexpected {other:?}"),
        }
        assert!(
            !buf.has_remaining() || api_key == ApiKey::ApiVersions,
            "request not fully decoded"
        );
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut frame, api_key.response_header_version(version))
            .unwrap();
        frame.extend_from_slice(&body);
        let mut out = BytesMut::new();
        out.put_i32(frame.len() as i32);
        out.extend_from_slice(&frame);
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// One broker: a session on the store, a registration pointing at a fake broker, and its
/// controller.
struct Node {
    zk: KafkaZkClient,
    controller: ControllerHandle,
    fake: FakeBroker,
}

async fn node(store: &EmbeddedStore, broker_id: i32, config: ControllerConfig) -> Node {
    let (client, events) = store.connect(SessionOptions::default());
    let zk = KafkaZkClient::new(client, events);
    zk.ensure_persistent_paths().await.unwrap();
    let fake = FakeBroker::start().await;
    zk.register_broker(
        broker_id,
        &BrokerRegistration::plaintext("127.0.0.1", fake.port, None, 1_633_072_800_000),
    )
    .await
    .unwrap();
    let controller = controller::start(
        zk.clone(),
        ControllerConfig {
            broker_id,
            ..config
        },
    )
    .await;
    Node {
        zk,
        controller,
        fake,
    }
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

fn name(topic: &str) -> TopicName {
    topic.parse().unwrap()
}

fn wire(topic: &str) -> WireTopicName {
    WireTopicName(StrBytes::from_string(topic.to_owned()))
}

async fn data(zk: &KafkaZkClient, path: &str) -> Option<String> {
    match zk.client().get_data(path, false).await {
        Ok((bytes, _)) => Some(String::from_utf8(bytes).unwrap()),
        Err(metastore::Error::NoNode(_)) => None,
        Err(err) => panic!("{path}: {err}"),
    }
}

fn create_request(
    topic: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
) -> CreateTopicsRequest {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string((*k).to_owned()))
                .with_value(Some(StrBytes::from_string((*v).to_owned())))
        })
        .collect();
    CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(wire(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
            .with_configs(configs)])
        .with_timeout_ms(10_000)
}

fn delete_request(topic: &str) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_topic_names(vec![wire(topic)])
        .with_timeout_ms(10_000)
}

async fn active_single_node(config: ControllerConfig) -> (EmbeddedStore, Node) {
    let store = EmbeddedStore::open_in_memory();
    let n = node(&store, 0, config).await;
    let handle = n.controller.clone();
    eventually("the controller is active", async || handle.is_active()).await;
    (store, n)
}

#[tokio::test]
async fn create_add_partitions_delete_with_kafkas_znodes() {
    let (_store, n) = active_single_node(ControllerConfig::default()).await;
    assert_eq!(
        data(&n.zk, paths::controller_epoch()).await.as_deref(),
        Some("1")
    );
    let controller_json = data(&n.zk, paths::controller()).await.unwrap();
    assert!(
        controller_json.starts_with(r#"{"version":1,"brokerid":0,"timestamp":""#),
        "{controller_json}"
    );

    // Create.
    let response = n
        .controller
        .create_topics(create_request("t", 3, 1, &[("retention.ms", "600001")]), 5)
        .await;
    let result = &response.topics[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    assert_eq!((result.num_partitions, result.replication_factor), (3, 1));
    let topic_id = TopicId::from_bytes(*result.topic_id.as_bytes());
    let t = name("t");
    assert_eq!(
        data(&n.zk, &paths::topic(&t)).await.unwrap(),
        format!(
            r#"{{"version":3,"topic_id":"{topic_id}","partitions":{{"0":[0],"1":[0],"2":[0]}},"adding_replicas":{{}},"removing_replicas":{{}}}}"#
        )
    );
    assert_eq!(
        data(&n.zk, &paths::config_topic(&t)).await.unwrap(),
        r#"{"version":1,"config":{"retention.ms":"600001"}}"#
    );
    for p in 0..3 {
        assert_eq!(
            data(&n.zk, &paths::partition_state(&t, p)).await.unwrap(),
            r#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}"#
        );
    }
    let fake = n.fake.clone();
    eventually("the broker got LeaderAndIsr for t", async || {
        fake.leader_and_isr_partitions("t").len() == 3
    })
    .await;
    assert_eq!(
        n.fake.leader_and_isr_partitions("t"),
        vec![(0, 0, true), (1, 0, true), (2, 0, true)]
    );

    // Creating it again fails; so does a colliding name.
    let again = n
        .controller
        .create_topics(create_request("t", 1, 1, &[]), 5)
        .await;
    assert_eq!(again.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");
    n.controller
        .create_topics(create_request("a.b", 1, 1, &[]), 5)
        .await;
    let collide = n
        .controller
        .create_topics(create_request("a_b", 1, 1, &[]), 5)
        .await;
    assert_eq!(collide.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    assert_eq!(
        collide.topics[0].error_message.as_ref().unwrap().as_str(),
        "Topic 'a_b' collides with existing topics: a.b"
    );

    // Add partitions: existing ones never move.
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(wire("t"))
            .with_count(5)
            .with_assignments(None)])
        .with_timeout_ms(10_000);
    let response = n.controller.create_partitions(request, 2).await;
    assert_eq!(
        response.results[0].error_code, 0,
        "{:?}",
        response.results[0].error_message
    );
    let assignment =
        TopicAssignment::from_json_bytes(data(&n.zk, &paths::topic(&t)).await.unwrap().as_bytes())
            .unwrap();
    assert_eq!(
        assignment.partitions,
        BTreeMap::from([
            (0, vec![0]),
            (1, vec![0]),
            (2, vec![0]),
            (3, vec![0]),
            (4, vec![0])
        ])
    );
    assert_eq!(assignment.topic_id, Some(topic_id));
    assert!(data(&n.zk, &paths::partition_state(&t, 4)).await.is_some());

    // Delete: the response waits for the deletion; every znode is gone.
    let response = n.controller.delete_topics(delete_request("t"), 4).await;
    assert_eq!(
        response.responses[0].error_code, 0,
        "{:?}",
        response.responses[0].error_message
    );
    assert_eq!(data(&n.zk, &paths::topic(&t)).await, None);
    assert_eq!(data(&n.zk, &paths::config_topic(&t)).await, None);
    assert_eq!(data(&n.zk, &paths::delete_topic(&t)).await, None);
    let leaders = n.fake.update_metadata_leaders("t");
    assert!(
        leaders.contains(&(0, 0)),
        "UpdateMetadata announced the leader: {leaders:?}"
    );
    assert!(
        leaders.contains(&(0, -2)),
        "UpdateMetadata announced the deletion (leader -2): {leaders:?}"
    );
    let stops = n.fake.stop_replicas();
    for p in 0..5 {
        assert!(
            stops.contains(&("t".to_owned(), p, true)),
            "StopReplica(delete) for t-{p}: {stops:?}"
        );
    }

    // Re-creating the same name works.
    let response = n
        .controller
        .create_topics(create_request("t", 1, 1, &[]), 5)
        .await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
}

#[tokio::test]
async fn topic_written_straight_into_the_store_comes_online() {
    let (_store, n) = active_single_node(ControllerConfig::default()).await;
    let t = name("direct");
    // Written as an older writer would: no topic id (version 2).
    let mut assignment = TopicAssignment::new(
        TopicId::random(),
        BTreeMap::from([(0, vec![0]), (1, vec![0])]),
    );
    assignment.topic_id = None;
    assignment.version = 2;
    n.zk.client()
        .create(
            &paths::topic(&t),
            &assignment.to_json_bytes(),
            metastore::CreateMode::Persistent,
        )
        .await
        .unwrap();
    let zk = n.zk.clone();
    eventually("the direct topic has partition states", async || {
        data(&zk, &paths::partition_state(&name("direct"), 1))
            .await
            .is_some()
    })
    .await;
    assert_eq!(
        data(&n.zk, &paths::partition_state(&t, 0)).await.unwrap(),
        r#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}"#
    );
    // The controller gave the topic an id, and the broker heard it.
    let stored =
        n.zk.get_topic_assignment(&t, false)
            .await
            .unwrap()
            .unwrap()
            .assignment;
    assert_eq!(stored.version, 3);
    assert_eq!(stored.partitions, assignment.partitions);
    let id = stored.topic_id.expect("a topic id");
    let fake = n.fake.clone();
    eventually("LeaderAndIsr carries the id", async || {
        fake.received().iter().any(|r| {
            matches!(r, Received::LeaderAndIsr(req)
            if req.topic_states.iter().any(|t| t.topic_id.as_bytes() == id.as_bytes()))
        })
    })
    .await;
}

/// A 10,000-partition topic costs a handful of store commits, not one per partition: the
/// partition states go in chunked multis that the embedded store commits together. A state
/// written beforehand is adopted; brokers get one LeaderAndIsr each.
#[tokio::test]
async fn ten_thousand_partitions_in_a_few_store_commits() {
    // A durable store: each commit is an fsync, so writes queued meanwhile commit together
    // (an in-memory store commits each write the moment it arrives).
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let n = node(&store, 0, ControllerConfig::default()).await;
    let handle = n.controller.clone();
    eventually("the controller is active", async || handle.is_active()).await;
    let t = name("wide");
    // Written straight into the store, with the state of partition 17 already there.
    let assignment = TopicAssignment::new(
        TopicId::random(),
        (0..10_000).map(|p| (p, vec![0])).collect(),
    );
    let create = |path: String, data: &[u8]| metastore::Op::Create {
        path,
        data: data.to_vec(),
        mode: metastore::CreateMode::Persistent,
    };
    let before = store.commit_stats().commits;
    n.zk.client()
        .multi(vec![
            create(paths::topic(&t), &assignment.to_json_bytes()),
            create(paths::topic_partitions(&t), b""),
            create(paths::topic_partition(&t, 17), b""),
            create(
                paths::partition_state(&t, 17),
                br#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":4,"isr":[0]}"#,
            ),
        ])
        .await
        .unwrap();
    let fake = n.fake.clone();
    eventually("the broker heard every partition", async || {
        fake.update_metadata_leaders("wide").len() >= 10_000
    })
    .await;
    let commits = store.commit_stats().commits - before;
    assert!(
        commits < 50,
        "{commits} store commits for one 10,000-partition topic"
    );
    let leader_and_isr: Vec<_> = n
        .fake
        .received()
        .into_iter()
        .filter_map(|r| match r {
            Received::LeaderAndIsr(req) => Some(req),
            _ => None,
        })
        .filter(|req| {
            req.topic_states
                .iter()
                .any(|t| t.topic_name.0.as_str() == "wide")
        })
        .collect();
    assert_eq!(
        leader_and_isr.len(),
        1,
        "one LeaderAndIsr for the whole topic"
    );
    let states = &leader_and_isr[0].topic_states[0].partition_states;
    assert_eq!(states.len(), 10_000);
    for p in states {
        let expected_epoch = if p.partition_index == 17 { 4 } else { 0 };
        assert_eq!(
            p.leader_epoch, expected_epoch,
            "partition {}",
            p.partition_index
        );
    }
    let read =
        n.zk.get_partition_states(&[model::TopicPartition::new(t.clone(), 9_999)])
            .await;
    assert_eq!(read[0].1.as_ref().unwrap().as_ref().unwrap().zk_version, 0);
}

/// One request cannot add more than max.partitions.per.request partitions: CreateTopics is
/// refused whole (nothing written), CreatePartitions per topic once the budget is spent.
#[tokio::test]
async fn partitions_per_request_are_bounded() {
    let config = ControllerConfig {
        max_partitions_per_request: 100,
        ..ControllerConfig::default()
    };
    let (_store, n) = active_single_node(config).await;
    let mut request = create_request("big-a", 60, 1, &[]);
    request
        .topics
        .push(create_request("big-b", 41, 1, &[]).topics.remove(0));
    let response = n.controller.create_topics(request, 5).await;
    for result in &response.topics {
        assert_eq!(result.error_code, 37, "{:?}", result.error_message);
        let message = result.error_message.as_deref().unwrap();
        assert!(message.contains("101 partitions in total"), "{message}");
    }
    for topic in ["big-a", "big-b"] {
        assert!(data(&n.zk, &paths::topic(&name(topic))).await.is_none());
    }
    let response = n
        .controller
        .create_topics(create_request("grows", 50, 1, &[]), 5)
        .await;
    assert_eq!(response.topics[0].error_code, 0);
    let grow = |count: i32| {
        CreatePartitionsTopic::default()
            .with_name(wire("grows"))
            .with_count(count)
            .with_assignments(None)
    };
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![grow(151)])
        .with_timeout_ms(10_000);
    let response = n.controller.create_partitions(request, 3).await;
    assert_eq!(response.results[0].error_code, 37);
    assert!(response.results[0]
        .error_message
        .as_deref()
        .unwrap()
        .contains("max.partitions.per.request (100)"));
    let stored =
        n.zk.get_topic_assignment(&name("grows"), false)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(stored.assignment.partitions.len(), 50);
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![grow(150)])
        .with_timeout_ms(10_000);
    let response = n.controller.create_partitions(request, 3).await;
    assert_eq!(
        response.results[0].error_code, 0,
        "{:?}",
        response.results[0].error_message
    );
}

#[tokio::test]
async fn deletion_disabled_refuses_and_removes_marks() {
    let config = ControllerConfig {
        delete_topic_enable: false,
        ..ControllerConfig::default()
    };
    let (_store, n) = active_single_node(config).await;
    let response = n
        .controller
        .create_topics(create_request("keep", 1, 1, &[]), 5)
        .await;
    assert_eq!(response.topics[0].error_code, 0);
    let response = n.controller.delete_topics(delete_request("keep"), 4).await;
    assert_eq!(
        response.responses[0].error_code, 73,
        "TOPIC_DELETION_DISABLED"
    );
    // A mark written by hand is removed and the topic stays.
    let t = name("keep");
    n.zk.create_delete_topic_path(&t, None).await.unwrap();
    let zk = n.zk.clone();
    eventually("the mark is removed", async || {
        data(&zk, &paths::delete_topic(&name("keep")))
            .await
            .is_none()
    })
    .await;
    assert!(data(&n.zk, &paths::topic(&t)).await.is_some());
}

#[tokio::test]
async fn validation_errors_carry_codes_and_messages() {
    let (_store, n) = active_single_node(ControllerConfig::default()).await;
    let cases: [(CreateTopicsRequest, i16, &str); 5] = [
        (create_request("bad/name", 1, 1, &[]), 17, "illegal"),
        (
            create_request("p0", 0, 1, &[]),
            37,
            "Number of partitions must be larger than 0",
        ),
        (
            create_request("rf2", 1, 2, &[]),
            38,
            "larger than available brokers: 1",
        ),
        (
            create_request("cfg", 1, 1, &[("retention.ms", "abc")]),
            40,
            "retention.ms",
        ),
        (
            create_request("cfg2", 1, 1, &[("no.such.key", "1")]),
            40,
            "no.such.key",
        ),
    ];
    for (request, code, message) in cases {
        let response = n.controller.create_topics(request, 5).await;
        let result = &response.topics[0];
        assert_eq!(result.error_code, code, "{:?}", result.error_message);
        let text = result.error_message.as_ref().unwrap().as_str();
        assert!(
            text.contains(message),
            "{text:?} should mention {message:?}"
        );
    }
    // validateOnly changes nothing but reports the computed shape.
    let mut request = create_request("dry", -1, -1, &[]);
    request.validate_only = true;
    let response = n.controller.create_topics(request, 5).await;
    assert_eq!(
        (
            response.topics[0].error_code,
            response.topics[0].num_partitions,
            response.topics[0].replication_factor
        ),
        (0, 1, 1)
    );
    assert!(data(&n.zk, &paths::topic(&name("dry"))).await.is_none());
}

#[tokio::test]
async fn failover_to_second_controller_with_next_epoch_and_fencing() {
    let store = EmbeddedStore::open_in_memory();
    let first = node(&store, 0, ControllerConfig::default()).await;
    let handle = first.controller.clone();
    eventually("broker 0 is controller", async || handle.is_active()).await;
    let second = node(&store, 1, ControllerConfig::default()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!second.controller.is_active());
    let (epoch, old_version) = first.zk.get_controller_epoch().await.unwrap().unwrap();
    assert_eq!(epoch, 1);

    // A topic created by the first controller survives the failover.
    let response = first
        .controller
        .create_topics(create_request("survivor", 2, 2, &[]), 5)
        .await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );

    store.expire_session(first.zk.session_id());
    let handle = second.controller.clone();
    eventually("broker 1 takes over", async || handle.is_active()).await;
    let (epoch, _) = second.zk.get_controller_epoch().await.unwrap().unwrap();
    assert_eq!(epoch, 2);
    let handle = first.controller.clone();
    eventually("broker 0 resigned", async || !handle.is_active()).await;

    // A write fenced on the first controller's epoch version fails.
    let t = name("survivor");
    let current = second
        .zk
        .get_topic_assignment(&t, false)
        .await
        .unwrap()
        .unwrap();
    let fenced = second
        .zk
        .set_topic_assignment(&t, &current.assignment, None, Some(old_version))
        .await;
    assert!(
        matches!(fenced, Err(ZkClientError::ControllerMoved { .. })),
        "{fenced:?}"
    );

    // The new controller tells broker 1 about the topic's leadership (broker 0 is gone).
    let fake = second.fake.clone();
    eventually("broker 1 learns the leadership", async || {
        fake.leader_and_isr_partitions("survivor").len() >= 2
    })
    .await;
    let zk = second.zk.clone();
    eventually("partition 0 gets a live leader", async || {
        let state = zk
            .get_partition_state(&model::TopicPartition::new(name("survivor"), 0))
            .await
            .unwrap()
            .unwrap();
        state.state.leader == 1
    })
    .await;
}

/// Registers a broker (no controller) pointing at `fake`; returns its session.
async fn register(store: &EmbeddedStore, broker_id: i32, fake: &FakeBroker) -> KafkaZkClient {
    let (client, events) = store.connect(SessionOptions::default());
    let zk = KafkaZkClient::new(client, events);
    zk.register_broker(
        broker_id,
        &BrokerRegistration::plaintext("127.0.0.1", fake.port, None, 1_633_072_800_000),
    )
    .await
    .unwrap();
    zk
}

fn last_live_brokers(fake: &FakeBroker) -> Vec<i32> {
    fake.received()
        .into_iter()
        .filter_map(|r| match r {
            Received::UpdateMetadata(req) => {
                Some(req.live_brokers.iter().map(|b| b.id.0).collect())
            }
            _ => None,
        })
        .next_back()
        .unwrap_or_default()
}

#[tokio::test]
async fn issue_9_deletion_does_not_wait_for_an_offline_broker() {
    let (store, n) = active_single_node(ControllerConfig::default()).await;
    let fake1 = FakeBroker::start().await;
    let session1 = register(&store, 1, &fake1).await;
    let fake0 = n.fake.clone();
    eventually("the controller sees broker 1", async || {
        last_live_brokers(&fake0) == vec![0, 1]
    })
    .await;
    let response = n
        .controller
        .create_topics(create_request("two", 1, 2, &[]), 5)
        .await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );

    // Broker 1 goes away; the deletion completes without it (better than Kafka, SPEC
    // section 9): its replica counts as deleted and it is sent nothing.
    store.expire_session(session1.session_id());
    eventually("the controller sees broker 1 leave", async || {
        last_live_brokers(&fake0) == vec![0]
    })
    .await;
    let response = n.controller.delete_topics(delete_request("two"), 4).await;
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
    let t = name("two");
    assert_eq!(data(&n.zk, &paths::topic(&t)).await, None);
    assert_eq!(data(&n.zk, &paths::delete_topic(&t)).await, None);
    assert!(n
        .fake
        .stop_replicas()
        .contains(&("two".to_owned(), 0, true)));

    // A mark naming no topic is simply removed.
    let ghost = name("ghost");
    n.zk.create_delete_topic_path(&ghost, None).await.unwrap();
    let zk = n.zk.clone();
    eventually("the ghost mark is removed", async || {
        data(&zk, &paths::delete_topic(&name("ghost")))
            .await
            .is_none()
    })
    .await;

    // When it comes back it is told the metadata, in which the topic no longer exists (it
    // removes its log on its own), and no StopReplica.
    let _session1 = register(&store, 1, &fake1).await;
    eventually("broker 1 is told the metadata again", async || {
        last_live_brokers(&fake1) == vec![0, 1]
    })
    .await;
    assert!(!fake1
        .stop_replicas()
        .iter()
        .any(|(topic, _, _)| topic == "two"));
}

/// Kafka answers CreateTopics once the receiving broker's metadata cache has a leader for
/// every new partition; Gregor waits until every live broker has applied the UpdateMetadata,
/// so a describe right after the answer works on any broker. Past the request timeout the
/// answer is REQUEST_TIMED_OUT (the topic stays created).
#[tokio::test]
async fn answers_once_every_broker_applied_the_metadata() {
    let (store, n) = active_single_node(ControllerConfig::default()).await;
    let fake1 = FakeBroker::start().await;
    let _session1 = register(&store, 1, &fake1).await;
    let fake0 = n.fake.clone();
    eventually("the controller sees broker 1", async || {
        last_live_brokers(&fake0) == vec![0, 1]
    })
    .await;
    fake1.update_metadata_delay_ms.store(500, Ordering::SeqCst);
    for (topic, partitions) in [("slow-a", 4), ("slow-b", 1)] {
        let started = tokio::time::Instant::now();
        let response = n
            .controller
            .create_topics(create_request(topic, partitions, 1, &[]), 5)
            .await;
        assert_eq!(
            response.topics[0].error_code, 0,
            "{:?}",
            response.topics[0].error_message
        );
        assert!(started.elapsed() >= Duration::from_millis(500));
        for fake in [&n.fake, &fake1] {
            let mut led: Vec<_> = fake
                .update_metadata_leaders(topic)
                .into_iter()
                .filter(|(_, leader)| *leader >= 0)
                .map(|(p, _)| p)
                .collect();
            led.sort_unstable();
            led.dedup();
            assert_eq!(led, (0..partitions).collect::<Vec<_>>(), "{topic}");
        }
    }

    // A broker slower than the request's timeout: REQUEST_TIMED_OUT, and the topic exists.
    fake1
        .update_metadata_delay_ms
        .store(2_000, Ordering::SeqCst);
    let mut request = create_request("late", 2, 1, &[]);
    request.timeout_ms = 300;
    let response = n.controller.create_topics(request, 5).await;
    assert_eq!(response.topics[0].error_code, 7, "REQUEST_TIMED_OUT");
    assert!(data(&n.zk, &paths::topic(&name("late"))).await.is_some());
}

#[tokio::test]
async fn balanced_placement_spreads_topics_of_one_request_and_of_back_to_back_requests() {
    let store = EmbeddedStore::open_in_memory();
    let n = node(&store, 0, ControllerConfig::default()).await;
    let mut others = Vec::new();
    for id in 1..5 {
        let fake = FakeBroker::start().await;
        others.push((register(&store, id, &fake).await, fake));
    }
    let fake0 = n.fake.clone();
    eventually("the controller sees 5 brokers", async || {
        last_live_brokers(&fake0).len() == 5
    })
    .await;
    let mut request = CreateTopicsRequest::default().with_timeout_ms(0);
    for i in 0..5 {
        request.topics.push(
            create_request(&format!("one-{i}"), 1, 1, &[])
                .topics
                .remove(0),
        );
    }
    n.controller.create_topics(request.clone(), 5).await;
    for topic in &mut request.topics {
        topic.name = wire(&topic.name.0.as_str().replace("one", "two"));
    }
    n.controller.create_topics(request, 5).await;
    let mut leaders = Vec::new();
    for prefix in ["one", "two"] {
        for i in 0..5 {
            let t = name(&format!("{prefix}-{i}"));
            let stored =
                n.zk.get_topic_assignment(&t, false)
                    .await
                    .unwrap()
                    .unwrap()
                    .assignment;
            leaders.push(stored.partitions[&0][0]);
        }
    }
    let counts: Vec<_> = (0..5)
        .map(|b| leaders.iter().filter(|&&l| l == b).count())
        .collect();
    assert_eq!(counts, vec![2, 2, 2, 2, 2], "leaders {leaders:?}");
}

#[tokio::test]
async fn standby_answers_not_controller() {
    let store = EmbeddedStore::open_in_memory();
    let first = node(&store, 0, ControllerConfig::default()).await;
    let handle = first.controller.clone();
    eventually("broker 0 is controller", async || handle.is_active()).await;
    let second = node(&store, 1, ControllerConfig::default()).await;
    let response = second
        .controller
        .create_topics(create_request("t", 1, 1, &[]), 5)
        .await;
    assert_eq!(response.topics[0].error_code, 41, "NOT_CONTROLLER");
    let response = second
        .controller
        .delete_topics(delete_request("t"), 4)
        .await;
    assert_eq!(response.responses[0].error_code, 41, "NOT_CONTROLLER");
    assert!(data(&second.zk, &paths::topic(&name("t"))).await.is_none());
}

/// The same flow over a real ZooKeeper (scripts/test.sh sets GREGOR_TEST_ZOOKEEPER): the
/// controller code path is the one of the embedded store.
#[tokio::test]
async fn zookeeper_backend_create_add_delete_and_failover() {
    let Ok(connect) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
        eprintln!("GREGOR_TEST_ZOOKEEPER is not set; skipping the ZooKeeper variant");
        return;
    };
    let chroot = format!("{connect}/controller-test-{}", TopicId::random());
    let zk_node = async |broker_id: i32| {
        let (client, events) = metastore::connect_zookeeper(&chroot, SessionOptions::default())
            .await
            .unwrap();
        let zk = KafkaZkClient::new(client, events);
        zk.ensure_persistent_paths().await.unwrap();
        let fake = FakeBroker::start().await;
        zk.register_broker(
            broker_id,
            &BrokerRegistration::plaintext("127.0.0.1", fake.port, None, 1),
        )
        .await
        .unwrap();
        let controller = controller::start(
            zk.clone(),
            ControllerConfig {
                broker_id,
                ..ControllerConfig::default()
            },
        )
        .await;
        Node {
            zk,
            controller,
            fake,
        }
    };
    let first = zk_node(0).await;
    let handle = first.controller.clone();
    eventually("broker 0 is controller", async || handle.is_active()).await;
    let second = zk_node(1).await;
    // Broker 1's registration reaches the controller by a ZooKeeper watch: a create sent
    // before that sees one live broker (CI once got "Replication factor: 2 larger than
    // available brokers: 1.").
    let fake0 = first.fake.clone();
    eventually("the controller sees broker 1", async || {
        last_live_brokers(&fake0) == vec![0, 1]
    })
    .await;

    let response = first
        .controller
        .create_topics(create_request("zk", 2, 2, &[]), 5)
        .await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
    let t = name("zk");
    for p in 0..2 {
        assert!(data(&first.zk, &paths::partition_state(&t, p))
            .await
            .is_some());
    }
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(wire("zk"))
            .with_count(3)
            .with_assignments(None)])
        .with_timeout_ms(10_000);
    let response = first.controller.create_partitions(request, 2).await;
    assert_eq!(
        response.results[0].error_code, 0,
        "{:?}",
        response.results[0].error_message
    );
    assert!(data(&first.zk, &paths::partition_state(&t, 2))
        .await
        .is_some());

    let (_, old_version) = first.zk.get_controller_epoch().await.unwrap().unwrap();
    first.zk.close().await;
    let handle = second.controller.clone();
    eventually("broker 1 takes over", async || handle.is_active()).await;
    assert_eq!(
        second.zk.get_controller_epoch().await.unwrap().unwrap().0,
        2
    );
    let current = second
        .zk
        .get_topic_assignment(&t, false)
        .await
        .unwrap()
        .unwrap();
    let fenced = second
        .zk
        .set_topic_assignment(&t, &current.assignment, None, Some(old_version))
        .await;
    assert!(
        matches!(fenced, Err(ZkClientError::ControllerMoved { .. })),
        "{fenced:?}"
    );

    // Broker 0 is gone and never returns here: the deletion does not wait for it.
    let response = second
        .controller
        .delete_topics(delete_request("zk"), 4)
        .await;
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
    assert_eq!(data(&second.zk, &paths::delete_topic(&t)).await, None);
    assert_eq!(data(&second.zk, &paths::topic(&t)).await, None);
    second.controller.shutdown().await;
    second.zk.close().await;
}

/// A figure, not a check: how long a 1000-partition topic takes to come online on a durable
/// (on-disk) store. Run with `cargo test -p controller --release -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn measure_1000_partition_topic_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let n = node(&store, 0, ControllerConfig::default()).await;
    let handle = n.controller.clone();
    eventually("the controller is active", async || handle.is_active()).await;
    let started = std::time::Instant::now();
    let response = n
        .controller
        .create_topics(create_request("big", 1000, 1, &[]), 5)
        .await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
    eprintln!("1000 partitions online in {:?}", started.elapsed());
    let started = std::time::Instant::now();
    let response = n.controller.delete_topics(delete_request("big"), 4).await;
    assert_eq!(
        response.responses[0].error_code, 0,
        "{:?}",
        response.responses[0].error_message
    );
    eprintln!("1000 partitions deleted in {:?}", started.elapsed());
}

#[tokio::test]
async fn an_election_that_loses_a_write_race_is_run_again_from_the_stored_state() {
    let (store, n) = active_single_node(ControllerConfig::default()).await;
    let fake1 = FakeBroker::start().await;
    let session1 = register(&store, 1, &fake1).await;
    let fake0 = n.fake.clone();
    eventually("the controller sees broker 1", async || {
        last_live_brokers(&fake0) == vec![0, 1]
    })
    .await;
    let response = n
        .controller
        .create_topics(create_request("race", 2, 2, &[]), 5)
        .await;
    assert_eq!(response.topics[0].error_code, 0);
    let t = name("race");
    let mut led_by_1 = None;
    for p in 0..2 {
        let state =
            n.zk.get_partition_state(&model::TopicPartition::new(t.clone(), p))
                .await
                .unwrap()
                .unwrap();
        if state.state.leader == 1 {
            led_by_1 = Some((p, state));
        }
    }
    let (p, before) = led_by_1.expect("balanced placement gives broker 1 a leader");
    // Someone else rewrites the state znode: the controller's version is now stale.
    let path = paths::partition_state(&t, p);
    let (bytes, _) = n.zk.client().get_data(&path, false).await.unwrap();
    n.zk.client().set_data(&path, &bytes, None).await.unwrap();

    store.expire_session(session1.session_id());
    let zk = n.zk.clone();
    let tp = model::TopicPartition::new(t.clone(), p);
    eventually("broker 0 leads after the retried election", async || {
        let state = zk.get_partition_state(&tp).await.unwrap().unwrap();
        state.state.leader == 0
    })
    .await;
    let after = n.zk.get_partition_state(&tp).await.unwrap().unwrap();
    assert_eq!(
        after.zk_version,
        before.zk_version + 2,
        "one foreign write, one election"
    );
    assert_eq!(after.state.leader_epoch, before.state.leader_epoch + 1);
    assert_eq!(after.state.isr, vec![0]);
}
