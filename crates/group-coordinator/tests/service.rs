//! The async `GroupCoordinator` as broker handlers use it, on tokio's paused clock: parked
//! JoinGroup/SyncGroup, the timer task (initial delay, session expiry), offsets written through
//! the store and read back by a restarted coordinator, and membership events reaching the sink.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use group_coordinator::{
    ClientInfo, GroupConfig, GroupCoordinator, InMemoryOffsetStore, MembershipEvent,
    RecordingMembershipSink,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};

type Coordinator = GroupCoordinator<InMemoryOffsetStore, RecordingMembershipSink>;

fn client() -> ClientInfo {
    ClientInfo {
        client_id: "kafka-python".into(),
        client_host: "/127.0.0.1".into(),
    }
}

async fn join(coordinator: &Coordinator) -> (String, i32, String) {
    let first = coordinator
        .join_group(Harness::join_request("", None, &["t"]), 5, client())
        .await;
    assert_eq!(first.error_code, 79);
    let member_id = first.member_id.as_str().to_owned();
    let answer = coordinator
        .join_group(Harness::join_request(&member_id, None, &["t"]), 5, client())
        .await;
    assert_eq!(answer.error_code, 0);
    (
        member_id,
        answer.generation_id,
        answer.leader.as_str().to_owned(),
    )
}

fn commit(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset),
                OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(offset + 1),
            ])])
}

fn fetched(coordinator: &Coordinator) -> Vec<i64> {
    let response = coordinator.offset_fetch(
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(None),
        7,
    );
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn two_consumers_rebalance_commit_and_resume_after_a_restart() {
    let store = Arc::new(InMemoryOffsetStore::new());
    let sink = Arc::new(RecordingMembershipSink::new());
    let config = GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..GroupConfig::default()
    };
    let coordinator: Coordinator =
        GroupCoordinator::start(config.clone(), Arc::clone(&store), Arc::clone(&sink))
            .await
            .unwrap();

    // Both join within the initial delay: one generation, found by the timer task.
    let (a, b) = tokio::join!(join(&coordinator), join(&coordinator));
    assert_eq!(a.1, 1);
    assert_eq!(b.1, 1);
    assert_eq!(a.2, b.2, "one leader");
    let (leader, follower) = if a.0 == a.2 {
        (a.0.clone(), b.0.clone())
    } else {
        (b.0.clone(), a.0.clone())
    };

    let sync = |member: &str, assignments: Vec<SyncGroupRequestAssignment>| {
        SyncGroupRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_generation_id(1)
            .with_member_id(s(member))
            .with_assignments(assignments)
    };
    let follower_sync = coordinator.sync_group(sync(&follower, vec![]), 3);
    let leader_sync = coordinator.sync_group(
        sync(
            &leader,
            vec![
                SyncGroupRequestAssignment::default()
                    .with_member_id(s(&leader))
                    .with_assignment(group_coordinator::consumer_protocol::encode_assignment(
                        &parts("t", &[0, 1]),
                    )),
                SyncGroupRequestAssignment::default()
                    .with_member_id(s(&follower))
                    .with_assignment(group_coordinator::consumer_protocol::encode_assignment(
                        &parts("t", &[2, 3]),
                    )),
            ],
        ),
        3,
    );
    let (f, l) = tokio::join!(follower_sync, leader_sync);
    assert_eq!(render_assignment(&f.assignment), "t[2,3]");
    assert_eq!(render_assignment(&l.assignment), "t[0,1]");

    let response = coordinator.offset_commit(&commit(&leader, 1, 10), 8).await;
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0));
    assert_eq!(
        store.commit_count(),
        1,
        "one store transaction per OffsetCommit"
    );
    assert_eq!(fetched(&coordinator), [10, 11]);

    // The follower stops heartbeating; the timer task expires it after the session timeout.
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(1)
        .with_member_id(s(&leader));
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(4_000)).await;
        coordinator.heartbeat(&heartbeat);
    }
    assert_eq!(
        coordinator.heartbeat(&heartbeat).error_code,
        27,
        "REBALANCE_IN_PROGRESS after the follower expired"
    );

    tokio::task::yield_now().await;
    let events = sink.take();
    assert!(events.iter().any(
        |e| matches!(e, MembershipEvent::MemberRemoved { member_id, .. } if *member_id == follower)
    ));
    assert!(events
        .iter()
        .any(|e| matches!(e, MembershipEvent::OwnersChanged { owners, .. } if owners.len() == 4)));
    coordinator.shutdown();

    // A restarted broker reads the committed offsets back from the store.
    let restarted: Coordinator = GroupCoordinator::start(config, Arc::clone(&store), sink)
        .await
        .unwrap();
    assert_eq!(fetched(&restarted), [10, 11]);
    restarted.shutdown();
}

#[tokio::test(start_paused = true)]
async fn store_failures_leave_the_cache_alone_and_topic_deletion_reaches_the_store() {
    let store = Arc::new(InMemoryOffsetStore::new());
    let coordinator: Coordinator = GroupCoordinator::start(
        GroupConfig::default(),
        Arc::clone(&store),
        Arc::new(RecordingMembershipSink::new()),
    )
    .await
    .unwrap();
    store.fail_next_call();
    let response = coordinator.offset_commit(&commit("", -1, 5), 8).await;
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 15));
    assert!(fetched(&coordinator).is_empty());
    let response = coordinator.offset_commit(&commit("", -1, 5), 8).await;
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0));
    coordinator
        .on_topic_deleted(&"t".parse().unwrap())
        .await
        .unwrap();
    assert!(fetched(&coordinator).is_empty());
    assert!(store.snapshot().is_empty());
    coordinator.shutdown();
}

/// Offset commits per second through the coordinator alone (in-memory store, so this is the
/// coordinator's own ceiling; the broker's figure is bounded by its metadata store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: cargo test -p group-coordinator --release --test service -- --ignored --nocapture"]
async fn bench_offset_commits_per_second() {
    const TASKS: usize = 8;
    const COMMITS_PER_TASK: i64 = 20_000;
    let store = Arc::new(InMemoryOffsetStore::new());
    let coordinator: Coordinator = GroupCoordinator::start(
        GroupConfig::default(),
        Arc::clone(&store),
        Arc::new(RecordingMembershipSink::new()),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let coordinator = coordinator.clone();
            tokio::spawn(async move {
                for offset in 0..COMMITS_PER_TASK {
                    let mut request = commit("", -1, offset);
                    request.group_id = GroupId(s(&format!("bench-{task}")));
                    let response = coordinator.offset_commit(&request, 8).await;
                    assert_eq!(response.topics[0].partitions[0].error_code, 0);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let total = TASKS as f64 * COMMITS_PER_TASK as f64;
    println!(
        "offset commits: {total} requests (2 partitions each) from {TASKS} groups in {:.2?}: {:.0} commits/s",
        elapsed,
        total / elapsed.as_secs_f64()
    );
    assert_eq!(store.commit_count(), total as usize);
    coordinator.shutdown();
}

#[tokio::test(start_paused = true)]
async fn shutdown_answers_parked_joins() {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..GroupConfig::default()
    };
    let coordinator: Coordinator = GroupCoordinator::start(
        config,
        Arc::new(InMemoryOffsetStore::new()),
        Arc::new(RecordingMembershipSink::new()),
    )
    .await
    .unwrap();
    let parked = {
        let coordinator = coordinator.clone();
        tokio::spawn(async move {
            coordinator
                .join_group(Harness::join_request("", None, &["t"]), 3, client())
                .await
        })
    };
    tokio::task::yield_now().await;
    coordinator.shutdown();
    assert_eq!(
        parked.await.unwrap().error_code,
        15,
        "COORDINATOR_NOT_AVAILABLE"
    );
}

/// Broker connections run on spawned tasks: every handler future must be `Send`.
#[tokio::test]
async fn handler_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let coordinator: Coordinator = GroupCoordinator::start(
        GroupConfig::default(),
        Arc::new(InMemoryOffsetStore::new()),
        Arc::new(RecordingMembershipSink::new()),
    )
    .await
    .unwrap();
    let join = coordinator.join_group(Harness::join_request("", None, &["t"]), 5, client());
    assert_send(&join);
    let sync = coordinator.sync_group(SyncGroupRequest::default(), 3);
    assert_send(&sync);
    let request = commit("", -1, 1);
    let commit_future = coordinator.offset_commit(&request, 8);
    assert_send(&commit_future);
    let delete = kafka_protocol::messages::DeleteGroupsRequest::default();
    let delete_future = coordinator.delete_groups(&delete);
    assert_send(&delete_future);
    let topic: model::TopicName = "t".parse().unwrap();
    let deleted = coordinator.on_topic_deleted(&topic);
    assert_send(&deleted);
    coordinator.shutdown();
}

/// A store that keeps no group metadata: every `store_group` fails.
#[derive(Debug, Default)]
struct NoGroupStore(InMemoryOffsetStore);

impl group_coordinator::OffsetStore for NoGroupStore {
    async fn commit(
        &self,
        group_id: &str,
        offsets: &[(model::TopicPartition, group_coordinator::OffsetAndMetadata)],
    ) -> Result<(), group_coordinator::OffsetStoreError> {
        self.0.commit(group_id, offsets).await
    }
    async fn load_all(
        &self,
    ) -> Result<group_coordinator::GroupOffsets, group_coordinator::OffsetStoreError> {
        self.0.load_all().await
    }
    async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[model::TopicPartition],
    ) -> Result<(), group_coordinator::OffsetStoreError> {
        self.0.delete_offsets(group_id, partitions).await
    }
    async fn delete_group(
        &self,
        group_id: &str,
        offsets: &[model::TopicPartition],
    ) -> Result<(), group_coordinator::OffsetStoreError> {
        self.0.delete_group(group_id, offsets).await
    }
    async fn store_group(
        &self,
        _group_id: &str,
        _value: &group_coordinator::GroupMetadataSnapshot,
    ) -> Result<(), group_coordinator::OffsetStoreError> {
        Err(group_coordinator::OffsetStoreError(
            "not replicated".to_owned(),
        ))
    }
}

/// Issue 25: the SyncGroup answers of a rebalance wait for the group's metadata to be
/// stored, as Kafka's storeGroup; when it cannot be stored the members are told
/// COORDINATOR_NOT_AVAILABLE (and rejoin) instead of an assignment no other coordinator
/// would know.
#[tokio::test(start_paused = true)]
async fn sync_group_answers_wait_for_the_group_metadata_to_be_stored() {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    let ok: Coordinator = GroupCoordinator::start(
        config.clone(),
        Arc::new(InMemoryOffsetStore::new()),
        Arc::new(RecordingMembershipSink::default()),
    )
    .await
    .unwrap();
    let (member, generation, _) = join(&ok).await;
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(generation)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(bytes::Bytes::from_static(b"\0\0\0\0\0\0\0\0"))]);
    assert_eq!(ok.sync_group(sync.clone(), 3).await.error_code, 0);
    ok.shutdown();

    let failing: GroupCoordinator<NoGroupStore, RecordingMembershipSink> = GroupCoordinator::start(
        config,
        Arc::new(NoGroupStore::default()),
        Arc::new(RecordingMembershipSink::default()),
    )
    .await
    .unwrap();
    let first = failing
        .join_group(Harness::join_request("", None, &["t"]), 5, client())
        .await;
    let member_id = first.member_id.as_str().to_owned();
    let answer = failing
        .join_group(Harness::join_request(&member_id, None, &["t"]), 5, client())
        .await;
    let sync = sync
        .with_member_id(s(&member_id))
        .with_generation_id(answer.generation_id)
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member_id))
            .with_assignment(bytes::Bytes::from_static(b"\0\0\0\0\0\0\0\0"))]);
    assert_eq!(failing.sync_group(sync, 3).await.error_code, 15);
    failing.shutdown();
}
