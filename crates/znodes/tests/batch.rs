//! The batched partition-state operations of `KafkaZkClient` at the size of a
//! 10,000-partition topic, on the embedded store and on a real ZooKeeper (which refuses any
//! request over its 1 MiB `jute.maxbuffer`: deleting such a topic in one multi fails there).
//!
//! The ZooKeeper half needs `GREGOR_TEST_ZOOKEEPER=host:port` (the test script starts a
//! throwaway server); `GREGOR_SKIP_ZOOKEEPER=1` skips it in a quick local run.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use metastore::{connect_zookeeper, CreateMode, EmbeddedStore, SessionOptions};
use model::{TopicId, TopicName, TopicPartition};
use znodes::json::{PartitionStateZNode, TopicAssignment};
use znodes::paths;
use znodes::zk_client::{KafkaZkClient, ZkClientError};

const PARTITIONS: i32 = 10_000;

async fn embedded() -> KafkaZkClient {
    let store = EmbeddedStore::open_in_memory();
    let (client, events) = store.connect(SessionOptions::default());
    // The store lives as long as a client of it does.
    KafkaZkClient::new(client, events)
}

async fn zookeeper(case: &str) -> Option<KafkaZkClient> {
    let Ok(hosts) = std::env::var("GREGOR_TEST_ZOOKEEPER") else {
        if std::env::var("GREGOR_SKIP_ZOOKEEPER").as_deref() == Ok("1") {
            eprintln!("skipping the ZooKeeper case {case}: GREGOR_SKIP_ZOOKEEPER=1");
            return None;
        }
        panic!(
            "GREGOR_TEST_ZOOKEEPER is not set. Run the ZooKeeper tests through the project's \
             test script (it starts a throwaway server with scripts/zk.sh), or set \
             GREGOR_SKIP_ZOOKEEPER=1 to skip them in a quick local run."
        );
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let connect = format!("{hosts}/gregor-batch/{case}-{}-{nanos}", std::process::id());
    let (client, events) = connect_zookeeper(&connect, SessionOptions::default())
        .await
        .expect("connect to ZooKeeper");
    Some(KafkaZkClient::new(client, events))
}

fn tp(topic: &TopicName, partition: i32) -> TopicPartition {
    TopicPartition::new(topic.clone(), partition)
}

fn state(leader: i32, leader_epoch: i32) -> PartitionStateZNode {
    PartitionStateZNode::new(1, leader, leader_epoch, vec![leader])
}

/// Elects broker 0 and creates a 10,000-partition topic; returns the epoch znode version.
async fn controller_with_big_topic(zk: &KafkaZkClient, topic: &TopicName) -> i32 {
    zk.ensure_persistent_paths().await.unwrap();
    let (_, epoch_zk_version) = zk
        .register_controller_and_increment_epoch(0, 1)
        .await
        .unwrap();
    let assignment = TopicAssignment::new(
        TopicId::random(),
        (0..PARTITIONS).map(|p| (p, vec![0])).collect(),
    );
    zk.create_topic(topic, &BTreeMap::new(), &assignment, Some(epoch_zk_version))
        .await
        .unwrap();
    epoch_zk_version
}

async fn create_update_read_delete(zk: KafkaZkClient) {
    let topic: TopicName = "big".parse().unwrap();
    let epoch_zk_version = controller_with_big_topic(&zk, &topic).await;
    // Partition 5 has a state already (written by hand); partition 7 has its parent only.
    let client = zk.client();
    client
        .create_recursive(
            &paths::partition_state(&topic, 5),
            br#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":4,"isr":[0]}"#,
            CreateMode::Persistent,
        )
        .await
        .unwrap();
    client
        .create(
            &paths::topic_partition(&topic, 7),
            &[],
            CreateMode::Persistent,
        )
        .await
        .unwrap();

    let all: Vec<TopicPartition> = (0..PARTITIONS).map(|p| tp(&topic, p)).collect();
    let states = all.iter().map(|tp| (tp.clone(), state(0, 0))).collect();
    // A deposed controller's batch writes nothing.
    assert!(matches!(
        zk.create_partition_states(states, epoch_zk_version + 1)
            .await,
        Err(ZkClientError::ControllerMoved { .. })
    ));
    assert!(client
        .exists(&paths::partition_state(&topic, 0), false)
        .await
        .unwrap()
        .is_none());

    let states = all.iter().map(|tp| (tp.clone(), state(0, 0))).collect();
    let created = zk
        .create_partition_states(states, epoch_zk_version)
        .await
        .unwrap();
    assert_eq!(created.len(), PARTITIONS as usize);
    for (tp, result) in &created {
        match (tp.partition, result) {
            (5, Err(ZkClientError::NodeExists(path))) => {
                assert_eq!(path, &paths::partition_state(&topic, 5))
            }
            (_, Ok(())) => {}
            (p, other) => panic!("partition {p}: {other:?}"),
        }
    }
    let read = zk.get_partition_states(&all).await;
    assert_eq!(read.len(), PARTITIONS as usize);
    for (tp, result) in &read {
        let versioned = result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(versioned.zk_version, 0);
        let expected_epoch = if tp.partition == 5 { 4 } else { 0 };
        assert_eq!(versioned.state.leader_epoch, expected_epoch, "{tp}");
    }
    let missing = zk.get_partition_states(&[tp(&topic, PARTITIONS)]).await;
    assert!(matches!(missing[0].1, Ok(None)));

    // Updates at their versions; partition 9 is expected at a version it does not have.
    let updates = all
        .iter()
        .map(|tp| {
            let expected = if tp.partition == 9 { 3 } else { 0 };
            (tp.clone(), state(0, 1), expected)
        })
        .collect();
    let updated = zk
        .set_partition_states(updates, epoch_zk_version)
        .await
        .unwrap();
    for (tp, result) in &updated {
        match (tp.partition, result) {
            (9, Err(ZkClientError::Store(metastore::Error::BadVersion { .. }))) => {}
            (_, Ok(1)) => {}
            (p, other) => panic!("partition {p}: {other:?}"),
        }
    }
    let read = zk.get_partition_states(&all).await;
    for (tp, result) in &read {
        let versioned = result.as_ref().unwrap().as_ref().unwrap();
        let expected = if tp.partition == 9 { (0, 0) } else { (1, 1) };
        assert_eq!(
            (versioned.zk_version, versioned.state.leader_epoch),
            expected,
            "{tp}"
        );
    }

    // The topic goes, 20,000 znodes and more: far more than one multi may carry.
    zk.create_delete_topic_path(&topic, None).await.unwrap();
    assert!(matches!(
        zk.delete_topic_znodes(&topic, epoch_zk_version + 1).await,
        Err(ZkClientError::ControllerMoved { .. })
    ));
    zk.delete_topic_znodes(&topic, epoch_zk_version)
        .await
        .unwrap();
    for path in [
        paths::topic(&topic),
        paths::config_topic(&topic),
        paths::delete_topic(&topic),
    ] {
        assert!(
            client.exists(&path, false).await.unwrap().is_none(),
            "{path}"
        );
    }
    // Running it again (a failover in the middle) is fine.
    zk.delete_topic_znodes(&topic, epoch_zk_version)
        .await
        .unwrap();
    zk.close().await;
}

#[tokio::test]
async fn ten_thousand_partitions_on_the_embedded_store() {
    create_update_read_delete(embedded().await).await;
}

#[tokio::test]
async fn ten_thousand_partitions_on_zookeeper() {
    if let Some(zk) = zookeeper("ten-thousand").await {
        create_update_read_delete(zk).await;
    }
}

/// A deletion cut short (some partitions already gone) finishes when run again.
#[tokio::test]
async fn a_partly_deleted_topic_is_finished() {
    let zk = embedded().await;
    let topic: TopicName = "half".parse().unwrap();
    zk.ensure_persistent_paths().await.unwrap();
    let (_, epoch_zk_version) = zk
        .register_controller_and_increment_epoch(0, 1)
        .await
        .unwrap();
    let assignment =
        TopicAssignment::new(TopicId::random(), (0..10).map(|p| (p, vec![0])).collect());
    zk.create_topic(
        &topic,
        &BTreeMap::new(),
        &assignment,
        Some(epoch_zk_version),
    )
    .await
    .unwrap();
    let states = (0..10).map(|p| (tp(&topic, p), state(0, 0))).collect();
    zk.create_partition_states(states, epoch_zk_version)
        .await
        .unwrap();
    zk.client()
        .delete_recursive(&paths::topic_partition(&topic, 3))
        .await
        .unwrap();
    zk.delete_topic_znodes(&topic, epoch_zk_version)
        .await
        .unwrap();
    assert!(zk
        .client()
        .exists(&paths::topic(&topic), false)
        .await
        .unwrap()
        .is_none());
}
