//! Consumer groups through the broker with the client crate: FindCoordinator names the
//! leader of the group's `__consumer_offsets` partition (creating the topic first), a classic
//! group forms and commits, offsets survive a restart, the other brokers refuse with
//! NOT_COORDINATOR, offsets follow the partition's leadership to another broker, offsets of
//! a deleted topic are dropped, and an ignored benchmark of offset commits over the wire.

use crate::common;

use std::time::{Duration, Instant};

use broker::{Broker, MetadataStore};
use bytes::Bytes;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use metastore::SessionOptions;

const GROUP_OVERRIDES: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "auto.create.topics.enable=false",
    "offsets.topic.replication.factor=1",
    "offsets.topic.num.partitions=4",
];

/// Kafka's partition of a group in `__consumer_offsets`.
fn partition_of(g: &str, partitions: i32) -> i32 {
    group_coordinator::log_records::partition_for(g, partitions)
}

/// FindCoordinator (v3) until it names a coordinator (the first lookup creates the offsets
/// topic; COORDINATOR_NOT_AVAILABLE meanwhile).
async fn find_coordinator(conn: &mut Connection, g: &str) -> FindCoordinatorResponse {
    let mut last = None;
    for _ in 0..500 {
        let response = conn
            .send_version(FindCoordinatorRequest::default().with_key(s(g)), 3)
            .await
            .unwrap();
        if response.error_code == 0 {
            return response;
        }
        last = Some(response.error_code);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    panic!("no coordinator for {g}: last error {last:?}");
}

/// OffsetFetch until the coordinator has loaded the group's partition (NOT_COORDINATOR or
/// COORDINATOR_LOAD_IN_PROGRESS before).
async fn fetch_loaded(
    conn: &mut Connection,
    g: &str,
    t: &str,
    partitions: &[i32],
) -> (i16, Vec<i64>) {
    let mut answer = (0, Vec::new());
    for _ in 0..500 {
        answer = fetch(conn, g, t, partitions).await;
        if !matches!(answer.0, 14 | 16) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    panic!("the coordinator never loaded {g}: {answer:?}");
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

async fn connect(broker: &Broker) -> Connection {
    Connection::connect(&broker.local_addr().to_string(), "groups-test")
        .await
        .unwrap()
}

async fn create_topic(conn: &mut Connection, name: &str, partitions: i32) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let response = conn.send(request).await.unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    // Wait for the controller's UpdateMetadata: the coordinator checks partitions against it.
    for _ in 0..250 {
        let metadata = conn
            .send(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic(name))),
            ])))
            .await
            .unwrap();
        let t = &metadata.topics[0];
        if t.error_code == 0 && t.partitions.len() == partitions as usize {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("topic {name} never appeared in the metadata");
}

async fn commit(
    conn: &mut Connection,
    g: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let topics = offsets
        .iter()
        .map(|(t, p, o)| {
            OffsetCommitRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)])
        })
        .collect();
    let response = conn
        .send(
            OffsetCommitRequest::default()
                .with_group_id(group(g))
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(s(member))
                .with_topics(topics),
        )
        .await
        .unwrap();
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

async fn fetch(conn: &mut Connection, g: &str, t: &str, partitions: &[i32]) -> (i16, Vec<i64>) {
    let response = conn
        .send_version(
            OffsetFetchRequest::default()
                .with_group_id(group(g))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic(t))
                    .with_partition_indexes(partitions.to_vec())])),
            7,
        )
        .await
        .unwrap();
    let offsets = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
        .collect();
    (response.error_code, offsets)
}

/// Reads a znode through a fresh session on the broker's embedded store.
async fn znode(store: &MetadataStore, path: &str) -> Option<Vec<u8>> {
    let MetadataStore::Embedded(store) = store else {
        panic!("tests use the embedded store");
    };
    let (client, _events) = store.connect(SessionOptions::default());
    let data = client.get_data(path, false).await.ok().map(|(d, _)| d);
    client.close().await;
    data
}

/// Joins `g` as a new dynamic member (v5: MEMBER_ID_REQUIRED first), returning
/// `(member_id, generation, leader)`.
async fn join(conn: &mut Connection, g: &str) -> (String, i32, String) {
    let request = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(group(g))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"meta"))])
    };
    let first = conn.send_version(request(""), 5).await.unwrap();
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let member = first.member_id.to_string();
    let joined = conn.send_version(request(&member), 5).await.unwrap();
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    (member, joined.generation_id, joined.leader.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_forms_commits_and_its_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), GROUP_OVERRIDES).await;
    eventually("broker becomes controller", || broker.is_controller()).await;
    let mut conn = connect(&broker).await;
    create_topic(&mut conn, "orders", 4).await;

    let found = find_coordinator(&mut conn, "g1").await;
    assert_eq!(found.node_id.0, broker.broker_id());
    assert_eq!(found.port, i32::from(broker.local_addr().port()));

    // The broker may still be loading the group's offsets partition.
    fetch_loaded(&mut conn, "g1", "orders", &[0]).await;
    let (member, generation, leader) = join(&mut conn, "g1").await;
    assert_eq!(leader, member, "the only member leads");
    let synced = conn
        .send(
            SyncGroupRequest::default()
                .with_group_id(group("g1"))
                .with_generation_id(generation)
                .with_member_id(s(&member))
                .with_assignments(vec![SyncGroupRequestAssignment::default()
                    .with_member_id(s(&member))
                    .with_assignment(Bytes::from_static(b"all of it"))]),
        )
        .await
        .unwrap();
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"all of it");
    let beat = conn
        .send(
            HeartbeatRequest::default()
                .with_group_id(group("g1"))
                .with_generation_id(generation)
                .with_member_id(s(&member)),
        )
        .await
        .unwrap();
    assert_eq!(beat.error_code, 0);

    // The member's registration is an ephemeral znode with the seed's JSON.
    let mut registration = None;
    for _ in 0..100 {
        registration = znode(&store, &format!("/consumers/g1/ids/{member}")).await;
        if registration.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let registration = String::from_utf8(registration.expect("member znode")).unwrap();
    assert!(
        registration.contains("\"pattern\":\"white_list\""),
        "{registration}"
    );

    assert_eq!(
        commit(
            &mut conn,
            "g1",
            &member,
            generation,
            &[("orders", 0, 42), ("orders", 3, 7)]
        )
        .await,
        vec![0, 0]
    );
    // A stale generation is refused and changes nothing.
    assert_eq!(
        commit(
            &mut conn,
            "g1",
            &member,
            generation + 5,
            &[("orders", 0, 99)]
        )
        .await,
        vec![22],
        "ILLEGAL_GENERATION"
    );
    // An unknown partition is refused.
    assert_eq!(
        commit(&mut conn, "g1", &member, generation, &[("orders", 9, 1)]).await,
        vec![3],
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        fetch(&mut conn, "g1", "orders", &[0, 1, 3]).await,
        (0, vec![42, -1, 7])
    );

    let listed = conn.send(ListGroupsRequest::default()).await.unwrap();
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_id.as_str(), "g1");
    let described = conn
        .send(DescribeGroupsRequest::default().with_groups(vec![group("g1")]))
        .await
        .unwrap();
    assert_eq!(described.groups[0].group_state.as_str(), "Stable");
    assert_eq!(described.groups[0].members.len(), 1);
    assert_eq!(
        described.groups[0].members[0].client_host.as_str(),
        "/127.0.0.1"
    );

    let left = conn
        .send(
            LeaveGroupRequest::default()
                .with_group_id(group("g1"))
                .with_members(vec![
                    leave_group_request::MemberIdentity::default().with_member_id(s(&member))
                ]),
        )
        .await
        .unwrap();
    assert_eq!(left.error_code, 0);
    drop(conn);

    broker.shutdown().await;
    store.close().await;
    let (broker, store) = start_broker_and_store(dir.path(), GROUP_OVERRIDES).await;
    eventually("broker becomes controller again", || broker.is_controller()).await;
    let mut conn = connect(&broker).await;
    // Replayed from __consumer_offsets.
    assert_eq!(
        fetch_loaded(&mut conn, "g1", "orders", &[0, 3]).await,
        (0, vec![42, 7])
    );

    // Deleting the topic drops the group's offsets from the coordinator (tombstones in the
    // offsets topic).
    let deletion = conn
        .send_version(
            DeleteTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topic_names(vec![topic("orders")]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(deletion.responses[0].error_code, 0);
    let mut dropped = false;
    for _ in 0..250 {
        if fetch(&mut conn, "g1", "orders", &[0, 3]).await == (0, vec![-1, -1]) {
            dropped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let last = fetch(&mut conn, "g1", "orders", &[0, 3]).await;
    assert!(
        dropped,
        "offsets of the deleted topic are still there: {last:?}"
    );

    // An empty group with no offsets left can be deleted.
    let deleted = conn
        .send(DeleteGroupsRequest::default().with_groups_names(vec![group("g1")]))
        .await
        .unwrap();
    assert!(
        matches!(deleted.results[0].error_code, 0 | 69),
        "deleted or already gone: {}",
        deleted.results[0].error_code
    );
    broker.shutdown().await;
    store.close().await;
}

/// Two brokers sharing one store, each with the given extra overrides.
async fn two_brokers(dir: &std::path::Path, extra: &[&str]) -> (MetadataStore, Vec<Broker>) {
    let store = MetadataStore::from_config(&config(dir, &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1, 2] {
        let logs = dir.join(format!("broker-{id}/logs"));
        let mut overrides = vec![
            format!("broker.id={id}"),
            format!("log.dirs={}", logs.display()),
            "group.initial.rebalance.delay.ms=0".to_owned(),
            "offsets.topic.num.partitions=4".to_owned(),
        ];
        overrides.extend(extra.iter().map(|o| o.to_string()));
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        brokers.push(start_on(store.clone(), dir, &overrides).await);
    }
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    (store, brokers)
}

/// The leader of `g`'s offsets partition, as a client learns it from `conn`'s broker.
async fn leader_of_group(conn: &mut Connection, g: &str) -> i32 {
    let metadata = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(topic("__consumer_offsets"))),
        ])))
        .await
        .unwrap();
    let t = &metadata.topics[0];
    assert!(t.is_internal, "Metadata marks __consumer_offsets internal");
    let n = i32::try_from(t.partitions.len()).unwrap();
    t.partitions
        .iter()
        .find(|p| p.partition_index == partition_of(g, n))
        .unwrap()
        .leader_id
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_of_the_groups_offsets_partition_coordinates() {
    let dir = tempfile::tempdir().unwrap();
    let (store, brokers) = two_brokers(dir.path(), &["offsets.topic.replication.factor=1"]).await;
    let mut conns = Vec::new();
    for b in &brokers {
        conns.push(connect(b).await);
    }
    // Both brokers name the same coordinator for each group: the partition's leader.
    let mut coordinators = std::collections::BTreeSet::new();
    for g in ["g", "h", "i", "j", "k", "l", "m", "n"] {
        let first = find_coordinator(&mut conns[0], g).await.node_id.0;
        let second = find_coordinator(&mut conns[1], g).await.node_id.0;
        assert_eq!(first, second, "{g}");
        assert_eq!(first, leader_of_group(&mut conns[0], g).await, "{g}");
        coordinators.insert(first);
    }
    assert_eq!(coordinators.len(), 2, "groups are spread over both brokers");

    let g = "g";
    let coordinator = find_coordinator(&mut conns[0], g).await.node_id.0;
    let other = brokers
        .iter()
        .position(|b| b.broker_id() != coordinator)
        .unwrap();
    let refused = conns[other]
        .send_version(
            JoinGroupRequest::default()
                .with_group_id(group(g))
                .with_session_timeout_ms(10_000)
                .with_protocol_type(s("consumer")),
            5,
        )
        .await
        .unwrap();
    assert_eq!(refused.error_code, 16, "NOT_COORDINATOR");
    let refused = conns[other]
        .send(
            OffsetCommitRequest::default()
                .with_group_id(group(g))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(topic("t"))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()])]),
        )
        .await
        .unwrap();
    assert_eq!(refused.topics[0].partitions[0].error_code, 16);
    drop(conns);
    for broker in brokers {
        broker.shutdown().await;
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_follow_the_partition_to_its_new_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut brokers) =
        two_brokers(dir.path(), &["offsets.topic.replication.factor=2"]).await;
    let mut conn = connect(&brokers[0]).await;
    create_topic(&mut conn, "orders", 2).await;
    let coordinator = find_coordinator(&mut conn, "g").await.node_id.0;
    let index = brokers
        .iter()
        .position(|b| b.broker_id() == coordinator)
        .unwrap();
    let mut to_coordinator = connect(&brokers[index]).await;
    fetch_loaded(&mut to_coordinator, "g", "orders", &[0]).await;
    // Simple commits (no member), as a standalone consumer or a reset tool makes them;
    // answered once both replicas have them.
    let mut codes = Vec::new();
    for _ in 0..100 {
        codes = commit(
            &mut to_coordinator,
            "g",
            "",
            -1,
            &[("orders", 0, 11), ("orders", 1, 12)],
        )
        .await;
        if codes == vec![0, 0] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(codes, vec![0, 0]);
    drop(to_coordinator);
    drop(conn);
    let old = brokers.remove(index);
    let survivor = brokers.pop().unwrap();
    old.shutdown().await;

    let mut conn = connect(&survivor).await;
    let mut found = 0;
    for _ in 0..500 {
        found = find_coordinator(&mut conn, "g").await.node_id.0;
        if found == survivor.broker_id() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(found, survivor.broker_id());
    assert_eq!(
        fetch_loaded(&mut conn, "g", "orders", &[0, 1]).await,
        (0, vec![11, 12])
    );
    survivor.shutdown().await;
    store.close().await;
}

/// Offset commits per second through the coordinator and `__consumer_offsets` over the wire:
/// `cargo test --release -p broker --test black_box -- --ignored --nocapture groups::commit_throughput`
/// (`GREGOR_BENCH_CLIENTS=64` for more connections).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn commit_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), GROUP_OVERRIDES).await;
    eventually("broker becomes controller", || broker.is_controller()).await;
    let mut conn = connect(&broker).await;
    create_topic(&mut conn, "bench", 4).await;
    find_coordinator(&mut conn, "bench-0").await;
    fetch_loaded(&mut conn, "bench-0", "bench", &[0]).await;
    // GREGOR_BENCH_CLIENTS connections (8 by default), each with one commit in flight.
    let clients: i32 = std::env::var("GREGOR_BENCH_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let per_client = 16_000 / clients;
    let addr = broker.local_addr().to_string();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Connection::connect(&addr, "bench").await.unwrap();
            let g = format!("bench-{c}");
            for i in 0..per_client {
                // Simple (non-member) commits, as a standalone consumer's.
                let codes = commit(&mut conn, &g, "", -1, &[("bench", i % 4, i64::from(i))]).await;
                assert_eq!(codes, vec![0]);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let total = clients * per_client;
    println!(
        "{total} offset commits ({clients} connections, 1 partition each) in {:.2}s: {:.0} commits/s",
        elapsed.as_secs_f64(),
        f64::from(total) / elapsed.as_secs_f64()
    );
    broker.shutdown().await;
    store.close().await;
}
