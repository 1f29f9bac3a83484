//! `KafkaZkClient` on an in-memory embedded store: event dispatch, session state, election
//! writes and the epoch fence.

use std::collections::BTreeMap;
use std::time::Duration;

use metastore::{EmbeddedStore, SessionOptions, SessionState};
use model::{TopicId, TopicName, TopicPartition};
use znodes::json::{BrokerRegistration, PartitionStateZNode, TopicAssignment};
use znodes::paths;
use znodes::zk_client::{KafkaWatch, KafkaZkClient, ZkClientError};

fn session(store: &EmbeddedStore) -> KafkaZkClient {
    let (client, events) = store.connect(SessionOptions::default());
    KafkaZkClient::new(client, events)
}

fn topic(name: &str) -> TopicName {
    name.parse().unwrap()
}

#[tokio::test]
async fn every_subscriber_gets_every_watch_in_order() {
    let store = EmbeddedStore::open_in_memory();
    let zk = session(&store);
    zk.ensure_persistent_paths().await.unwrap();
    let mut first = zk.subscribe_watches();
    let mut second = zk.subscribe_watches();
    zk.get_all_topics(true).await.unwrap();
    zk.get_broker_ids(true).await.unwrap();
    let other = session(&store);
    let assignment = TopicAssignment::new(TopicId::random(), BTreeMap::from([(0, vec![0])]));
    other
        .create_topic(&topic("t"), &BTreeMap::new(), &assignment, None)
        .await
        .unwrap();
    other
        .register_broker(3, &BrokerRegistration::plaintext("h", 9092, None, 1))
        .await
        .unwrap();
    for rx in [&mut first, &mut second] {
        let a = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let b = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(KafkaWatch::classify(&a), KafkaWatch::Topics);
        assert_eq!(KafkaWatch::classify(&b), KafkaWatch::BrokerIds);
    }
}

#[tokio::test]
async fn classify_names_kafkas_paths() {
    let event = |path: &str| metastore::WatchedEvent {
        kind: metastore::WatchedEventKind::NodeDataChanged,
        path: path.to_owned(),
    };
    let t = topic("orders");
    assert_eq!(
        KafkaWatch::classify(&event(paths::controller())),
        KafkaWatch::Controller
    );
    assert_eq!(
        KafkaWatch::classify(&event(&paths::topic(&t))),
        KafkaWatch::Topic("orders".to_owned())
    );
    assert_eq!(
        KafkaWatch::classify(&event(paths::delete_topics())),
        KafkaWatch::DeleteTopics
    );
    let state = paths::partition_state(&t, 0);
    assert_eq!(
        KafkaWatch::classify(&event(&state)),
        KafkaWatch::Other(state.clone())
    );
}

#[tokio::test]
async fn session_state_reports_expiry() {
    let store = EmbeddedStore::open_in_memory();
    let zk = session(&store);
    let mut state = zk.subscribe_session_state();
    store.expire_session(zk.session_id());
    tokio::time::timeout(Duration::from_secs(5), async {
        while *state.borrow_and_update() != SessionState::Expired {
            state.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn election_increments_the_epoch_and_fences_the_old_one() {
    let store = EmbeddedStore::open_in_memory();
    let first = session(&store);
    first.ensure_persistent_paths().await.unwrap();
    let (epoch, version) = first
        .register_controller_and_increment_epoch(0, 1)
        .await
        .unwrap();
    assert_eq!(epoch, 1);
    assert_eq!(first.get_controller_id(false).await.unwrap(), Some(0));

    let second = session(&store);
    let lost = second.register_controller_and_increment_epoch(1, 2).await;
    assert!(
        matches!(lost, Err(ZkClientError::NodeExists(_))),
        "{lost:?}"
    );

    store.expire_session(first.session_id());
    let mut tries = 0;
    let (epoch2, version2) = loop {
        match second.register_controller_and_increment_epoch(1, 3).await {
            Ok(won) => break won,
            Err(_) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(err) => panic!("{err}"),
        }
    };
    assert_eq!(epoch2, 2);
    assert!(version2 > version);

    // Writes fenced on the old epoch's version fail; on the new one they succeed.
    let t = topic("t");
    let tp = TopicPartition::new(t.clone(), 0);
    let assignment = TopicAssignment::new(TopicId::random(), BTreeMap::from([(0, vec![1])]));
    let stale = second
        .create_topic(&t, &BTreeMap::new(), &assignment, Some(version))
        .await;
    assert!(
        matches!(stale, Err(ZkClientError::ControllerMoved { .. })),
        "{stale:?}"
    );
    second
        .create_topic(&t, &BTreeMap::new(), &assignment, Some(version2))
        .await
        .unwrap();
    let state = PartitionStateZNode::new(2, 1, 0, vec![1]);
    let stale = second.create_partition_state(&tp, &state, version).await;
    assert!(
        matches!(stale, Err(ZkClientError::ControllerMoved { .. })),
        "{stale:?}"
    );
    second
        .create_partition_state(&tp, &state, version2)
        .await
        .unwrap();
    let read = second.get_partition_state(&tp).await.unwrap().unwrap();
    assert_eq!((read.state, read.zk_version), (state, 0));

    // The controller's deletion mark is fenced too (DeleteTopics writes it); a second mark
    // finds the first.
    let stale = second.create_delete_topic_path(&t, Some(version)).await;
    assert!(
        matches!(stale, Err(ZkClientError::ControllerMoved { .. })),
        "{stale:?}"
    );
    assert!(!second.is_topic_marked_for_deletion(&t).await.unwrap());
    second
        .create_delete_topic_path(&t, Some(version2))
        .await
        .unwrap();
    let again = second.create_delete_topic_path(&t, Some(version2)).await;
    assert!(
        matches!(again, Err(ZkClientError::NodeExists(_))),
        "{again:?}"
    );

    // The last step of a deletion removes the whole subtree, the config and the mark.
    second.delete_topic_znodes(&t, version2).await.unwrap();
    assert!(!second.topic_exists(&t).await.unwrap());
    assert!(!second.is_topic_marked_for_deletion(&t).await.unwrap());
    assert!(second.get_topic_config(&t).await.unwrap().is_empty());
}

#[tokio::test]
async fn cluster_id_is_created_once() {
    let store = EmbeddedStore::open_in_memory();
    let zk = session(&store);
    assert_eq!(zk.get_or_create_cluster_id("first").await.unwrap(), "first");
    assert_eq!(
        zk.get_or_create_cluster_id("second").await.unwrap(),
        "first"
    );
}

#[tokio::test]
async fn config_change_notifications_are_listed_in_order_and_purged_by_age() {
    let store = EmbeddedStore::open_in_memory();
    let zk = session(&store);
    zk.ensure_persistent_paths().await.unwrap();
    zk.create_config_change_notification(&topic("a"))
        .await
        .unwrap();
    zk.create_entity_config_change_notification("clients/app".into())
        .await
        .unwrap();
    let changes = zk.get_config_changes(false).await.unwrap();
    assert_eq!(changes.len(), 2);
    assert!(changes[0].0 < changes[1].0);
    let (entity, ctime) = zk.get_config_change(&changes[1].1).await.unwrap().unwrap();
    assert_eq!(entity.as_deref(), Some("clients/app"));
    // Nothing is older than its own creation.
    assert_eq!(
        zk.purge_config_changes_before(ctime - 60_000)
            .await
            .unwrap(),
        0
    );
    // Everything created before a cutoff in the future goes (Kafka: older than 15 minutes).
    assert_eq!(zk.purge_config_changes_before(ctime + 1).await.unwrap(), 2);
    assert!(zk.get_config_changes(false).await.unwrap().is_empty());
    assert!(zk.get_config_change(&changes[0].1).await.unwrap().is_none());
}

/// Issue 32: a watch subscription ends with its session, even while something still holds
/// the client (the broker's config and ACL change listeners hold theirs while they wait for
/// the stream to end, and kept waiting on a silent stream after an expiry: topic config
/// changes and ACLs stopped reaching a broker whose session had expired); one made after the
/// end ends at once.
#[tokio::test]
async fn watch_subscriptions_end_with_the_session() {
    let store = EmbeddedStore::open_in_memory();
    let zk = session(&store);
    let mut watches = zk.subscribe_watches();
    let mut state = zk.subscribe_session_state();
    store.expire_session(zk.session_id());
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while watches.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the subscription outlived its session");
    tokio::time::timeout(
        Duration::from_secs(5),
        state.wait_for(|s| *s == SessionState::Expired),
    )
    .await
    .unwrap()
    .unwrap();
    let mut late = zk.subscribe_watches();
    assert!(
        tokio::time::timeout(Duration::from_secs(1), late.recv())
            .await
            .unwrap()
            .is_none(),
        "a subscription made after the session ended stays open"
    );
}
