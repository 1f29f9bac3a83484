//! Several brokers on one embedded store (as `gregor dev-cluster` runs them), the admin
//! listener, and re-registration after a session expiry.

use crate::common;

use std::time::Duration;

use broker::admin_http::AdminServer;
use broker::MetadataStore;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_share_a_store_and_replicate_topic_creation() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for (id, rack) in [(1000, "a"), (1001, "a"), (1002, "b")] {
        let logs = dir.path().join(format!("broker-{id}/logs"));
        let overrides = [
            format!("broker.id={id}"),
            format!("broker.rack={rack}"),
            format!("log.dirs={}", logs.display()),
        ];
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        brokers.push(start_on(store.clone(), dir.path(), &overrides).await);
    }
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let controller = brokers.iter().find(|b| b.is_controller()).unwrap();
    let other = brokers.iter().find(|b| !b.is_controller()).unwrap();

    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name("spread"))
            .with_num_partitions(3)
            .with_replication_factor(3)]);
    let mut to_other = Connection::connect(&other.local_addr().to_string(), "t")
        .await
        .unwrap();
    let refused = to_other.send(request.clone()).await.unwrap();
    assert_eq!(refused.topics[0].error_code, 41, "NOT_CONTROLLER");
    let mut to_controller = Connection::connect(&controller.local_addr().to_string(), "t")
        .await
        .unwrap();
    assert_eq!(
        to_controller.send(request).await.unwrap().topics[0].error_code,
        0
    );

    for id in [1000, 1001, 1002] {
        let logs = dir.path().join(format!("broker-{id}/logs"));
        eventually("every broker holds every partition", || {
            (0..3).all(|p| {
                logs.join(format!("spread-{p}"))
                    .join("partition.metadata")
                    .exists()
            })
        })
        .await;
    }
    // Every broker's metadata cache learns the topic, the live brokers and their racks.
    let metadata = MetadataRequest::default().with_topics(None);
    let mut response = to_other.send(metadata.clone()).await.unwrap();
    for _ in 0..200 {
        if response.topics.len() == 1 && response.brokers.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        response = to_other.send(metadata.clone()).await.unwrap();
    }
    assert_eq!(response.brokers.len(), 3);
    assert_eq!(response.controller_id.0, controller.broker_id());
    let racks: Vec<Option<String>> = response
        .brokers
        .iter()
        .map(|b| b.rack.as_ref().map(|r| r.to_string()))
        .collect();
    assert!(racks.contains(&Some("b".to_string())));
    assert_eq!(response.topics[0].partitions.len(), 3);
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.replica_nodes.len() == 3 && p.error_code == 0));

    let cluster = to_other
        .send(DescribeClusterRequest::default())
        .await
        .unwrap();
    assert_eq!(cluster.brokers.len(), 3);
    assert_eq!(cluster.controller_id.0, controller.broker_id());

    // The admin listener over the whole cluster.
    let admin = AdminServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        brokers.iter().map(|b| b.admin_view()).collect(),
    )
    .await
    .unwrap();
    let (status, body) = http_get(admin.local_addr(), "/v1/health").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, body) = http_get(admin.local_addr(), "/v1/meta/brokers/topics/spread").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["path"], "/brokers/topics/spread");
    assert_eq!(json["data"]["version"], 3);
    assert_eq!(json["data"]["partitions"]["0"].as_array().unwrap().len(), 3);
    assert_eq!(json["children"], serde_json::json!(["partitions"]));
    assert_eq!(json["stat"]["version"], 0);
    let (status, body) = http_get(admin.local_addr(), "/v1/meta/brokers/ids/1002").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["data"]["rack"], "b");
    assert_ne!(json["stat"]["ephemeral_owner"], 0);
    let (status, _) = http_get(admin.local_addr(), "/v1/meta/no/such/node").await;
    assert_eq!(status, 404);
    let (status, body) = http_get(admin.local_addr(), "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("gregor_partitions{broker=\"1001\"} 3"),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "gregor_is_controller{{broker=\"{}\"}} 1",
            controller.broker_id()
        )),
        "{body}"
    );
    assert!(body.contains("api=\"CreateTopics\""), "{body}");
    admin.shutdown().await;

    for broker in brokers {
        broker.shutdown().await;
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_registers_again_after_session_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &["broker.id=3"]).await;
    eventually("controller", || broker.is_controller()).await;
    let MetadataStore::Embedded(embedded) = &store else {
        unreachable!("the tests use the embedded store")
    };
    let first_session = broker.session_id();
    let first_epoch = broker.broker_epoch();
    embedded.expire_session(first_session);
    eventually("a new session", || broker.session_id() != first_session).await;
    eventually("controller again", || broker.is_controller()).await;
    eventually("a new broker epoch", || broker.broker_epoch() > first_epoch).await;

    // A control request from the current controller addressed to the old registration is
    // refused.
    let mut raw = tokio::net::TcpStream::connect(broker.local_addr())
        .await
        .unwrap();
    let (key, controller_id, epoch) = control_plane_key(&store).await;
    let stale = RequestKind::UpdateMetadata(
        UpdateMetadataRequest::default()
            .with_controller_id(BrokerId(controller_id))
            .with_controller_epoch(epoch)
            .with_broker_epoch(first_epoch),
    );
    let frame = tagged_request_frame(
        ApiKey::UpdateMetadata,
        7,
        1,
        &stale,
        proof_tags(&key, controller_id, epoch, 3),
    );
    let response: UpdateMetadataResponse =
        roundtrip_frame(&mut raw, ApiKey::UpdateMetadata, 7, 1, frame).await;
    assert_eq!(response.error_code, 77, "STALE_BROKER_EPOCH");
    let admin = AdminServer::bind("127.0.0.1:0".parse().unwrap(), vec![broker.admin_view()])
        .await
        .unwrap();
    let (status, body) = http_get(admin.local_addr(), "/v1/meta/brokers/ids/3").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["stat"]["ephemeral_owner"], broker.session_id());
    assert_eq!(json["data"]["port"], broker.local_addr().port());
    admin.shutdown().await;

    let mut conn = Connection::connect(&broker.local_addr().to_string(), "t")
        .await
        .unwrap();
    let response = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("after-expiry"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    let logs = dir.path().join("logs");
    eventually("log created", || logs.join("after-expiry-0").exists()).await;
    broker.shutdown().await;
    store.close().await;
}

#[tokio::test]
async fn a_second_broker_with_the_same_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (first, store) = start_broker_and_store(dir.path(), &["broker.id=5"]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = broker::Broker::start(
        config(dir.path(), &["broker.id=5"]),
        store.clone(),
        Some(listener),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, broker::BrokerError::DuplicateBrokerId(5)),
        "{err}"
    );
    assert!(err.to_string().contains("broker.id 5"));
    first.shutdown().await;
    store.close().await;
}

/// Leaders and ISRs of `topic` as `conn`'s broker sees them, by partition.
async fn leadership(conn: &mut Connection, topic: &str) -> Vec<(i32, i32, Vec<i32>)> {
    let response = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
        ])))
        .await
        .unwrap();
    let mut out: Vec<_> = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.leader_id.0,
                p.isr_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

/// A ControlledShutdown signed the way a broker signs it.
async fn send_signed(
    key: &security::control_plane::ControlPlaneKey,
    conn: &mut Connection,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<ControlledShutdownResponse, client::ClientError> {
    let request = ControlledShutdownRequest::default()
        .with_broker_id(BrokerId(broker_id))
        .with_broker_epoch(broker_epoch);
    let tags = broker_proof_tags(key, broker_id, broker_epoch);
    let version = conn.negotiated_version::<ControlledShutdownRequest>()?;
    conn.send_version_tagged(request, version, &tags).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_moves_leaderships_and_refuses_stale_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1, 2, 3] {
        let logs = dir.path().join(format!("broker-{id}/logs"));
        let overrides = [
            format!("broker.id={id}"),
            format!("log.dirs={}", logs.display()),
            "controlled.shutdown.retry.backoff.ms=100".to_string(),
        ];
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        brokers.push(start_on(store.clone(), dir.path(), &overrides).await);
    }
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let controller = brokers.iter().find(|b| b.is_controller()).unwrap();
    let mut to_controller = Connection::connect(&controller.local_addr().to_string(), "t")
        .await
        .unwrap();
    let created = to_controller
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("cs"))
                    .with_num_partitions(6)
                    .with_replication_factor(3)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let leaving_index = brokers.iter().position(|b| !b.is_controller()).unwrap();
    let leaving = brokers[leaving_index].broker_id();
    let epoch = brokers[leaving_index].broker_epoch();
    let mut before = Vec::new();
    for _ in 0..500 {
        before = leadership(&mut to_controller, "cs").await;
        if before.len() == 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        before.iter().any(|(_, leader, _)| *leader == leaving),
        "{before:?}"
    );

    // Signed with the cluster's key as a broker signs it, so the controller's own checks are
    // what refuse these (unsigned ones are refused earlier, control_plane.rs).
    let (key, _, _) = control_plane_key(&store).await;
    // A stale broker epoch, an unknown broker, and a broker that is not the controller: each
    // refused, and nothing moves.
    let stale = send_signed(&key, &mut to_controller, leaving, epoch - 1)
        .await
        .unwrap();
    assert_eq!(stale.error_code, 77, "STALE_BROKER_EPOCH");
    let newer = send_signed(&key, &mut to_controller, leaving, epoch + 1)
        .await
        .unwrap();
    assert_eq!(newer.error_code, 77, "an epoch the controller has not seen");
    let unknown = send_signed(&key, &mut to_controller, 42, 1).await.unwrap();
    assert_eq!(unknown.error_code, 8, "BROKER_NOT_AVAILABLE");
    let mut to_leaving = Connection::connect(&brokers[leaving_index].local_addr().to_string(), "t")
        .await
        .unwrap();
    let not_controller = send_signed(&key, &mut to_leaving, leaving, epoch)
        .await
        .unwrap();
    assert_eq!(not_controller.error_code, 41, "NOT_CONTROLLER");
    // Unsigned, even with the right epoch: not authorized, nothing moves.
    let unsigned = to_controller
        .send(
            ControlledShutdownRequest::default()
                .with_broker_id(BrokerId(leaving))
                .with_broker_epoch(epoch),
        )
        .await
        .unwrap();
    assert_eq!(unsigned.error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    assert_eq!(leadership(&mut to_controller, "cs").await, before);

    // The broker's own controlled shutdown: it keeps its registration and serves, but leads
    // nothing and is in no ISR.
    assert!(brokers[leaving_index].controlled_shutdown().await);
    let mut after = Vec::new();
    for _ in 0..500 {
        after = leadership(&mut to_leaving, "cs").await;
        if after
            .iter()
            .all(|(_, leader, isr)| *leader != leaving && !isr.contains(&leaving))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (partition, leader, isr) in &after {
        assert_ne!(
            *leader, leaving,
            "p{partition} still led by {leaving}: {after:?}"
        );
        assert!(!isr.contains(&leaving), "p{partition}: {after:?}");
        assert_eq!(isr.len(), 2, "p{partition}: {after:?}");
    }
    // Asked again, the controller has nothing left to move.
    let again = send_signed(&key, &mut to_controller, leaving, epoch)
        .await
        .unwrap();
    assert_eq!((again.error_code, again.remaining_partitions.len()), (0, 0));

    for broker in brokers {
        broker.shutdown().await;
    }
    store.close().await;
}

/// The topic id in a partition directory's `partition.metadata`, if any.
fn local_topic_id(dir: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("partition.metadata")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id: "))
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_9_deleting_a_topic_never_waits_for_an_offline_broker() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let overrides = |id: i32| {
        vec![
            format!("broker.id={id}"),
            format!(
                "log.dirs={}",
                dir.path().join(format!("broker-{id}/logs")).display()
            ),
            "file.delete.delay.ms=60000".to_string(),
        ]
    };
    let start = |id: i32| {
        let store = store.clone();
        let overrides = overrides(id);
        let path = dir.path().to_path_buf();
        async move {
            let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
            start_on(store, &path, &overrides).await
        }
    };
    let first = start(1).await;
    eventually("controller", || first.is_controller()).await;
    let away = start(2).await;
    let mut conn = Connection::connect(&first.local_addr().to_string(), "t")
        .await
        .unwrap();
    let create = |topic: &str| {
        CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![
                    create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![BrokerId(1), BrokerId(2)]),
                ])])
    };
    for topic in ["again", "gone"] {
        assert_eq!(
            conn.send(create(topic)).await.unwrap().topics[0].error_code,
            0
        );
    }
    let away_logs = dir.path().join("broker-2/logs");
    eventually("broker 2 holds both logs", || {
        away_logs.join("again-0/partition.metadata").exists()
            && away_logs.join("gone-0/partition.metadata").exists()
    })
    .await;
    let old_id = local_topic_id(&away_logs.join("again-0")).unwrap();
    away.shutdown().await;

    // Both deletions complete while broker 2 is down.
    let deleted = conn
        .send(
            DeleteTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(name("again"))),
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(name("gone"))),
                ]),
        )
        .await
        .unwrap();
    assert_eq!(deleted.responses.len(), 2);
    assert!(
        deleted.responses.iter().all(|r| r.error_code == 0),
        "{deleted:?}"
    );
    // "again" comes back with another topic id, on the same brokers.
    let recreated = conn.send(create("again")).await.unwrap();
    assert_eq!(recreated.topics[0].error_code, 0, "{recreated:?}");
    assert!(away_logs.join("gone-0").exists() && away_logs.join("again-0").exists());

    // When broker 2 returns it removes the log of "gone" on its own and replaces the old
    // "again" with the new topic's replica.
    let back = start(2).await;
    eventually("the stray log of a deleted topic is removed", || {
        !away_logs.join("gone-0").exists()
    })
    .await;
    eventually("the old incarnation's log is replaced", || {
        local_topic_id(&away_logs.join("again-0")).is_some_and(|id| id != old_id)
    })
    .await;
    let first_logs = dir.path().join("broker-1/logs");
    assert_eq!(
        local_topic_id(&away_logs.join("again-0")),
        local_topic_id(&first_logs.join("again-0"))
    );
    back.shutdown().await;
    first.shutdown().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_controller_epoch_beyond_the_store_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &["broker.id=4"]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut raw = tokio::net::TcpStream::connect(broker.local_addr())
        .await
        .unwrap();
    let forged = RequestKind::LeaderAndIsr(
        LeaderAndIsrRequest::default()
            .with_controller_id(BrokerId(99))
            .with_controller_epoch(i32::MAX)
            .with_broker_epoch(broker.broker_epoch())
            .with_topic_states(vec![
                leader_and_isr_request::LeaderAndIsrTopicState::default()
                    .with_topic_name(name("forged"))
                    .with_partition_states(vec![
                        leader_and_isr_request::LeaderAndIsrPartitionState::default()
                            .with_topic_name(name("forged"))
                            .with_partition_index(0)
                            .with_leader(BrokerId(4))
                            .with_isr(vec![BrokerId(4)])
                            .with_replicas(vec![BrokerId(4)]),
                    ]),
            ]),
    );
    // Signed with the cluster's key (as a broker could), so the epoch check is what refuses it;
    // without the proof it is refused earlier (control_plane.rs).
    let (key, _, _) = control_plane_key(&store).await;
    let frame = tagged_request_frame(
        ApiKey::LeaderAndIsr,
        5,
        1,
        &forged,
        proof_tags(&key, 99, i32::MAX, 4),
    );
    let response: LeaderAndIsrResponse =
        roundtrip_frame(&mut raw, ApiKey::LeaderAndIsr, 5, 1, frame).await;
    assert_eq!(response.error_code, 11, "STALE_CONTROLLER_EPOCH");
    assert!(!dir.path().join("logs/forged-0").exists());
    // The real controller (epoch 1) is still obeyed: a new topic comes online.
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "t")
        .await
        .unwrap();
    let response = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("real"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    eventually("the real topic's log", || {
        dir.path().join("logs/real-0").exists()
    })
    .await;
    broker.shutdown().await;
    store.close().await;
}
