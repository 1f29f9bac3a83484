//! KIP-951 leader hints (issue 16): a Produce v10+ or Fetch v16+ that reaches a broker which
//! does not lead the partition is answered NOT_LEADER_OR_FOLLOWER with the partition's current
//! leader (id and leader epoch) and that leader's endpoint in `node_endpoints`, so the client
//! can go there without a Metadata round trip. Older versions carry no hint. Two real brokers
//! on one store, the topic placed by the real controller.

use crate::common;

use std::time::Duration;

use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use tokio::net::TcpStream;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Polls `check` every 50 ms for up to 60 s (the cluster may share a loaded machine).
async fn within<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// (leader, leader epoch, replicas, topic id) of `topic`-0 as `broker`'s metadata shows it.
async fn leadership(addr: &str, topic: &str) -> Option<(i32, i32, Vec<i32>, uuid::Uuid)> {
    let mut conn = Connection::connect(addr, "hints").await.ok()?;
    let response = conn
        .send_version(
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
            ])),
            12,
        )
        .await
        .ok()?;
    let t = response.topics.first()?;
    let p = t.partitions.first()?;
    (p.error_code == 0 && p.leader_id.0 >= 0).then(|| {
        (
            p.leader_id.0,
            p.leader_epoch,
            p.replica_nodes.iter().map(|b| b.0).collect(),
            t.topic_id,
        )
    })
}

fn produce_request() -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name("hint"))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(one_record_batch(8, b'h'))),
            ])])
}

fn fetch_request(topic_id: uuid::Uuid, version: i16) -> FetchRequest {
    let topic = fetch_request::FetchTopic::default().with_partitions(vec![
        fetch_request::FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(0)
            .with_partition_max_bytes(1 << 20),
    ]);
    let topic = if version >= 13 {
        topic.with_topic_id(topic_id)
    } else {
        topic.with_topic(name("hint"))
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![topic])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_does_not_lead_names_the_leader_and_its_endpoint() {
    hints(false).await;
}

/// With a client listener and an inter-broker one, the hint is the leader's endpoint on the
/// listener the request came in on (as Kafka's `getAliveBrokerNode(leader, listenerName)`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hinted_endpoint_is_on_the_listener_the_request_used() {
    hints(true).await;
}

async fn hints(two_listeners: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store = broker::MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1000, 1001] {
        let logs = dir.path().join(format!("broker-{id}/logs"));
        let mut overrides = vec![
            format!("broker.id={id}"),
            format!("log.dirs={}", logs.display()),
        ];
        if two_listeners {
            overrides.extend([
                "listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0".to_string(),
                "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT".to_string(),
                "inter.broker.listener.name=INTERNAL".to_string(),
            ]);
        }
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        brokers.push(if two_listeners {
            broker::Broker::start(config(dir.path(), &overrides), store.clone(), None)
                .await
                .unwrap()
        } else {
            start_on(store.clone(), dir.path(), &overrides).await
        });
    }
    let client_addr = |b: &broker::Broker| {
        if two_listeners {
            // The second listener: the first one is also what UpdateMetadata's default
            // endpoint is, so only this one tells the listeners apart.
            b.listener_addr("INTERNAL").unwrap()
        } else {
            b.local_addr()
        }
    };
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let controller = brokers.iter().find(|b| b.is_controller()).unwrap();
    let mut admin = Connection::connect(&client_addr(controller).to_string(), "hints")
        .await
        .unwrap();
    let created = admin
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("hint"))
                    .with_num_partitions(1)
                    .with_replication_factor(2)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);

    // Both brokers' metadata agree on the leader; the other one is the follower.
    let addrs: Vec<String> = brokers.iter().map(|b| client_addr(b).to_string()).collect();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    within("both brokers know the leader", || {
        let (addrs, seen) = (addrs.clone(), seen.clone());
        async move {
            let a = leadership(&addrs[0], "hint").await;
            let b = leadership(&addrs[1], "hint").await;
            match (a, b) {
                (Some(a), Some(b)) if a == b && a.2.len() == 2 => {
                    *seen.lock().unwrap() = Some(a);
                    true
                }
                _ => false,
            }
        }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    let (leader_id, leader_epoch, _, topic_id) = seen.unwrap();
    let leader = brokers.iter().find(|b| b.broker_id() == leader_id).unwrap();
    let follower = brokers.iter().find(|b| b.broker_id() != leader_id).unwrap();
    let leader_addr = client_addr(leader);
    if two_listeners {
        assert_ne!(leader_addr, leader.listener_addr("CLIENT").unwrap());
    }

    let mut to_follower = Connection::connect(&client_addr(follower).to_string(), "hints")
        .await
        .unwrap();
    for version in 10..=11 {
        let response = to_follower
            .send_version(produce_request(), version)
            .await
            .unwrap();
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "Produce v{version}");
        assert_eq!(
            (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
            (leader_id, leader_epoch),
            "Produce v{version}: the hint names the leader"
        );
        let endpoints: Vec<(i32, String, i32)> = response
            .node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.host.to_string(), e.port))
            .collect();
        assert_eq!(
            endpoints,
            vec![(
                leader_id,
                leader_addr.ip().to_string(),
                i32::from(leader_addr.port())
            )],
            "Produce v{version}: the leader's endpoint"
        );
    }
    // Before KIP-951 the refusal carries no hint.
    let response = to_follower
        .send_version(produce_request(), 9)
        .await
        .unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(p.current_leader.leader_id.0, -1, "no hint at v9");
    assert!(response.node_endpoints.is_empty());

    // A consumer fetching from the follower: the same hint from Fetch v16 on.
    let mut raw = TcpStream::connect(client_addr(follower)).await.unwrap();
    for (i, version) in (15..=17).enumerate() {
        let response: FetchResponse = roundtrip(
            &mut raw,
            ApiKey::Fetch,
            version,
            i as i32 + 1,
            &RequestKind::Fetch(fetch_request(topic_id, version)),
        )
        .await;
        let t = &response.responses[0];
        assert_eq!(t.topic_id, topic_id, "Fetch v{version}");
        let p = &t.partitions[0];
        assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "Fetch v{version}");
        if version >= 16 {
            assert_eq!(
                (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
                (leader_id, leader_epoch),
                "Fetch v{version}: the hint names the leader"
            );
            let endpoints: Vec<(i32, String, i32)> = response
                .node_endpoints
                .iter()
                .map(|e| (e.node_id.0, e.host.to_string(), e.port))
                .collect();
            assert_eq!(
                endpoints,
                vec![(
                    leader_id,
                    leader_addr.ip().to_string(),
                    i32::from(leader_addr.port())
                )],
                "Fetch v{version}: the leader's endpoint"
            );
        } else {
            assert_eq!(p.current_leader.leader_id.0, -1, "no hint at v{version}");
            assert!(response.node_endpoints.is_empty());
        }
    }

    // The leader itself takes the produce at v11.
    let mut to_leader = Connection::connect(&leader_addr.to_string(), "hints")
        .await
        .unwrap();
    let response = to_leader.send_version(produce_request(), 11).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert!(response.node_endpoints.is_empty());

    for b in brokers {
        b.shutdown().await;
    }
    store.close().await;
}
