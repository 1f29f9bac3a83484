//! Named listeners (issue 13): every listener's endpoint in `/brokers/ids/<id>` as Kafka
//! writes it, Metadata and FindCoordinator answering the endpoints of the listener the client
//! connected to, and control requests served only on the control-plane listener (KIP-291),
//! else the inter-broker one.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use broker::MetadataStore;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Three listeners, all PLAINTEXT: clients, brokers and the controller each get their own.
fn overrides(id: i32, log_dir: &std::path::Path) -> Vec<String> {
    vec![
        format!("broker.id={id}"),
        format!("log.dirs={}", log_dir.display()),
        "listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROL://127.0.0.1:0".into(),
        "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROL:PLAINTEXT"
            .into(),
        "inter.broker.listener.name=INTERNAL".into(),
        "control.plane.listener.name=CONTROL".into(),
    ]
}

async fn registration(store: &MetadataStore, id: i32) -> serde_json::Value {
    let MetadataStore::Embedded(embedded) = store else {
        unreachable!("the tests use the embedded store")
    };
    let (client, _events) = embedded.connect(metastore::SessionOptions::default());
    let (data, _) = client
        .get_data(&format!("/brokers/ids/{id}"), false)
        .await
        .unwrap();
    client.close().await;
    serde_json::from_slice(&data).unwrap()
}

/// The (id, port) pairs Metadata lists on `conn`'s listener.
async fn metadata_ports(conn: &mut Connection) -> Vec<(i32, i32)> {
    let response = conn.send(MetadataRequest::default()).await.unwrap();
    let mut ports: Vec<(i32, i32)> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.port))
        .collect();
    ports.sort();
    ports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_sees_its_own_endpoints_and_only_the_control_listener_takes_control() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1, 2] {
        let o = overrides(id, &dir.path().join(format!("broker-{id}")));
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let config = config(dir.path(), &o);
        brokers.push(
            broker::Broker::start(config, store.clone(), None)
                .await
                .unwrap(),
        );
    }
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let addr = |b: &broker::Broker, l: &str| b.listener_addr(l).unwrap();

    // The registration lists every endpoint and its protocol; there is no PLAINTEXT-named
    // listener, but host/port are those of the first endpoint whose protocol is PLAINTEXT.
    let json = registration(&store, 1).await;
    let b1 = &brokers[0];
    assert_eq!(json["version"], 5);
    assert_eq!(
        json["endpoints"],
        serde_json::json!([
            format!("CLIENT://127.0.0.1:{}", addr(b1, "CLIENT").port()),
            format!("INTERNAL://127.0.0.1:{}", addr(b1, "INTERNAL").port()),
            format!("CONTROL://127.0.0.1:{}", addr(b1, "CONTROL").port()),
        ])
    );
    assert_eq!(
        json["listener_security_protocol_map"],
        serde_json::json!({"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "CONTROL": "PLAINTEXT"})
    );
    assert_eq!(json["host"], "127.0.0.1");
    assert_eq!(json["port"], addr(b1, "CLIENT").port());

    // A topic with a replica on each broker: control requests travel on CONTROL, followers
    // fetch on INTERNAL, and Metadata on each listener shows that listener's ports.
    let mut client = Connection::connect(&addr(b1, "CLIENT").to_string(), "t")
        .await
        .unwrap();
    let response = client
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("multi"))
                    .with_num_partitions(2)
                    .with_replication_factor(2)]),
        )
        .await
        .unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    for (listener, broker_index) in [("CLIENT", 0), ("INTERNAL", 1), ("CONTROL", 0)] {
        let mut conn =
            Connection::connect(&addr(&brokers[broker_index], listener).to_string(), "t")
                .await
                .unwrap();
        let mut expected: Vec<(i32, i32)> = brokers
            .iter()
            .map(|b| (b.broker_id(), i32::from(addr(b, listener).port())))
            .collect();
        expected.sort();
        let mut seen = Vec::new();
        for _ in 0..250 {
            seen = metadata_ports(&mut conn).await;
            if seen == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen, expected, "Metadata on {listener}");
    }
    let mut isr_full = false;
    for _ in 0..500 {
        let response = client
            .send(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name("multi"))),
            ])))
            .await
            .unwrap();
        let t = &response.topics[0];
        if t.partitions.len() == 2 && t.partitions.iter().all(|p| p.isr_nodes.len() == 2) {
            isr_full = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(isr_full, "followers joined the ISR over INTERNAL");

    // FindCoordinator answers the coordinator's endpoint on the client's listener.
    // The first one creates the offsets topic: COORDINATOR_NOT_AVAILABLE until it has a
    // leader (clients retry it), as Kafka.
    let mut found = None;
    for _ in 0..600 {
        let answer = client
            .send_version(
                FindCoordinatorRequest::default()
                    .with_key(StrBytes::from_static_str("g"))
                    .with_key_type(0),
                3,
            )
            .await
            .unwrap();
        if answer.error_code == 0 {
            found = Some(answer);
            break;
        }
        assert_eq!(answer.error_code, 15, "{answer:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let found = found.expect("a coordinator for g within 30 s");
    // The coordinator is the leader of g's offsets partition, on the client's listener.
    let coordinator = brokers
        .iter()
        .find(|b| b.broker_id() == found.node_id.0)
        .expect("the coordinator is one of the brokers");
    assert_eq!(found.port, i32::from(addr(coordinator, "CLIENT").port()));

    // A control request with a valid proof is still refused off the control-plane listener.
    let (key, controller_id, epoch) = control_plane_key(&store).await;
    for listener in ["CLIENT", "INTERNAL"] {
        let mut raw = tokio::net::TcpStream::connect(addr(b1, listener))
            .await
            .unwrap();
        let body = RequestKind::UpdateMetadata(
            UpdateMetadataRequest::default()
                .with_controller_id(BrokerId(controller_id))
                .with_controller_epoch(epoch)
                .with_broker_epoch(b1.broker_epoch()),
        );
        let frame = tagged_request_frame(
            ApiKey::UpdateMetadata,
            7,
            1,
            &body,
            proof_tags(&key, controller_id, epoch, 1),
        );
        let response: UpdateMetadataResponse =
            roundtrip_frame(&mut raw, ApiKey::UpdateMetadata, 7, 1, frame).await;
        assert_eq!(
            response.error_code, CLUSTER_AUTHORIZATION_FAILED,
            "{listener}"
        );
    }
    // Nothing was blanked: the topic is still there on every broker.
    let mut seen: BTreeMap<i32, usize> = BTreeMap::new();
    for b in &brokers {
        let mut conn = Connection::connect(&addr(b, "CLIENT").to_string(), "t")
            .await
            .unwrap();
        let response = conn
            .send(MetadataRequest::default().with_topics(None))
            .await
            .unwrap();
        // The offsets topic the FindCoordinator above created aside.
        let topics = response.topics.iter().filter(|t| !t.is_internal).count();
        seen.insert(b.broker_id(), topics);
    }
    assert_eq!(seen, BTreeMap::from([(1, 1), (2, 1)]));

    for broker in brokers {
        broker.shutdown().await;
    }
    store.close().await;
}
