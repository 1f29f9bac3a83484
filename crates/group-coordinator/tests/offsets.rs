//! OffsetCommit / OffsetFetch / OffsetDelete through the pure core, with the store's answer
//! supplied by the test (the in-memory store is exercised in `service.rs`).

mod common;

use common::*;
use group_coordinator::{CoordinatorCore, OffsetStoreError};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetFetchRequest,
    TopicName,
};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const GROUP_ID_NOT_FOUND: i16 = 69;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

fn commit_request(
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(s("m")));
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == *topic => t.partitions.push(p),
            _ => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(topics)
}

/// Commits with the store saying yes; returns the codes in request order.
fn commit(core: &mut CoordinatorCore, request: &OffsetCommitRequest) -> Vec<i16> {
    let plan = core.prepare_offset_commit(0, 8, request);
    codes(&core.complete_offset_commit(plan, Ok(())))
}

fn codes(response: &OffsetCommitResponse) -> Vec<i16> {
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// Fetches (v7) and renders `topic-p=offset` for each partition.
fn fetch(core: &CoordinatorCore, topics: Option<&[(&str, &[i32])]>) -> String {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(topics.map(|ts| {
            ts.iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.to_vec())
                })
                .collect()
        }));
    let response = core.fetch_offsets(7, &request);
    assert_eq!(response.error_code, NONE);
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                format!(
                    "{}-{}={}",
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset
                )
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn simple_commits_create_an_empty_group_and_fetch_reads_them() {
    let mut core = CoordinatorCore::new(config());
    assert_eq!(
        fetch(&core, Some(&[("t", &[0, 1])])),
        "t-0=-1 t-1=-1",
        "nothing committed yet"
    );
    assert_eq!(
        commit(
            &mut core,
            &commit_request(-1, "", &[("t", 0, 5), ("t", 1, 7), ("u", 0, 1)])
        ),
        [NONE; 3]
    );
    assert_eq!(core.group_states()[GROUP].1, "Empty");
    assert_eq!(
        fetch(&core, Some(&[("t", &[0, 1, 2])])),
        "t-0=5 t-1=7 t-2=-1"
    );
    assert_eq!(
        fetch(&core, None),
        "t-0=5 t-1=7 u-0=1",
        "a null topic list fetches everything"
    );
    // v8+: several groups in one request.
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![1])])),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("other")))
            .with_topics(None),
    ]);
    let response = core.fetch_offsets(8, &request);
    assert_eq!(
        response.groups[0].topics[0].partitions[0].committed_offset,
        7
    );
    assert!(response.groups[1].topics.is_empty());
}

#[test]
fn commits_from_a_group_with_members_check_member_and_generation() {
    let mut h = Harness::new(config());
    let (member, token) = h.new_member(&["t"]);
    h.advance(0);
    assert_eq!(h.join_answer(token).unwrap().generation_id, 1);
    // CompletingRebalance: the member knows the generation but has no assignment yet.
    assert_eq!(
        commit(&mut h.core, &commit_request(1, &member, &[("t", 0, 1)])),
        [REBALANCE_IN_PROGRESS]
    );
    let t = h.sync(&member, 1, &[(&member, parts("t", &[0]))]);
    assert_eq!(h.sync_answer(t).unwrap().error_code, NONE);
    assert_eq!(
        commit(&mut h.core, &commit_request(1, &member, &[("t", 0, 1)])),
        [NONE]
    );
    assert_eq!(
        commit(&mut h.core, &commit_request(0, &member, &[("t", 0, 2)])),
        [ILLEGAL_GENERATION]
    );
    assert_eq!(
        commit(&mut h.core, &commit_request(1, "stranger", &[("t", 0, 2)])),
        [UNKNOWN_MEMBER_ID]
    );
    assert_eq!(
        commit(&mut h.core, &commit_request(-1, "", &[("t", 0, 2)])),
        [UNKNOWN_MEMBER_ID],
        "simple commits need an empty group"
    );
    assert_eq!(fetch(&h.core, Some(&[("t", &[0])])), "t-0=1");
    // A group that does not exist rejects generations >= 0.
    let mut other = commit_request(3, "x", &[("t", 0, 2)]);
    other.group_id = GroupId(s("nobody"));
    assert_eq!(commit(&mut h.core, &other), [ILLEGAL_GENERATION]);
}

#[test]
fn partition_checks_and_store_failures() {
    let mut core = CoordinatorCore::new(GroupConfig {
        offset_metadata_max_bytes: 4,
        ..config()
    });
    core.set_topics([topic("t", 1, 2)]);
    let mut request = commit_request(
        -1,
        "",
        &[("t", 0, 1), ("t", 5, 1), ("gone", 0, 1), ("t", 1, 1)],
    );
    request.topics[0].partitions[0].committed_metadata = Some(s("too long"));
    let plan = core.prepare_offset_commit(0, 8, &request);
    assert_eq!(plan.to_store.len(), 1, "only t-1 is valid");
    let response = core.complete_offset_commit(plan, Err(OffsetStoreError("down".into())));
    assert_eq!(
        codes(&response),
        [
            OFFSET_METADATA_TOO_LARGE,
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION,
            COORDINATOR_NOT_AVAILABLE
        ]
    );
    assert_eq!(
        fetch(&core, Some(&[("t", &[1])])),
        "t-1=-1",
        "a refused write never reaches the cache"
    );
}

use group_coordinator::GroupConfig;

#[test]
fn offset_delete_respects_subscriptions() {
    let mut h = Harness::new(config());
    let (member, token) = h.new_member(&["t"]);
    h.advance(0);
    h.join_answer(token).unwrap();
    let t = h.sync(&member, 1, &[(&member, parts("t", &[0]))]);
    h.sync_answer(t).unwrap();
    assert_eq!(
        commit(
            &mut h.core,
            &commit_request(1, &member, &[("t", 0, 3), ("u", 0, 4)])
        ),
        [NONE, NONE]
    );

    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(
            ["t", "u"]
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])
                })
                .collect(),
        );
    let plan = h.core.prepare_offset_delete(&request);
    assert_eq!(plan.to_delete.len(), 1);
    let response = h.core.complete_offset_delete(plan, Ok(()));
    assert_eq!(response.error_code, NONE);
    let got: Vec<i16> = response
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect();
    assert_eq!(got, [GROUP_SUBSCRIBED_TO_TOPIC, NONE]);
    assert_eq!(fetch(&h.core, None), "t-0=3");

    let mut missing = request.clone();
    missing.group_id = GroupId(s("nobody"));
    let plan = h.core.prepare_offset_delete(&missing);
    assert_eq!(
        h.core.complete_offset_delete(plan, Ok(())).error_code,
        GROUP_ID_NOT_FOUND
    );
}

#[test]
fn empty_groups_lose_offsets_and_vanish_once_none_are_left() {
    let mut core = CoordinatorCore::new(config());
    commit(&mut core, &commit_request(-1, "", &[("t", 0, 3)]));
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0)
            ])]);
    let plan = core.prepare_offset_delete(&request);
    assert_eq!(
        core.complete_offset_delete(plan, Ok(())).topics[0].partitions[0].error_code,
        NONE
    );
    assert!(!core.group_states().contains_key(GROUP));
}

#[test]
fn deleted_topics_lose_their_offsets_and_offsets_survive_a_reload() {
    let mut core = CoordinatorCore::new(config());
    commit(
        &mut core,
        &commit_request(-1, "", &[("t", 0, 3), ("u", 0, 4)]),
    );
    let dropped = core.on_topic_deleted(&"t".parse().unwrap());
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].0, GROUP);
    assert_eq!(dropped[0].1.len(), 1);
    assert_eq!(fetch(&core, None), "u-0=4");

    // A restarted coordinator loads what the store holds and shows the group as Empty.
    let mut stored = group_coordinator::GroupOffsets::new();
    stored.entry(GROUP.to_owned()).or_default().insert(
        model::TopicPartition::new("u".parse().unwrap(), 0),
        group_coordinator::OffsetAndMetadata {
            offset: 4,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
            expire_timestamp_ms: None,
        },
    );
    let mut restarted = CoordinatorCore::new(config());
    restarted.load_offsets(stored);
    assert_eq!(fetch(&restarted, None), "u-0=4");
    assert_eq!(restarted.group_states()[GROUP].1, "Empty");
}

#[test]
fn offsets_expire_after_the_retention_period() {
    const RETENTION: u64 = 60_000;
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: RETENTION,
        ..config()
    });
    h.advance(0); // arms the periodic check
                  // A simple-consumer group (always empty) and a live group subscribed to t only.
    let mut simple = commit_request(-1, "", &[("t", 0, 1)]);
    simple.group_id = GroupId(s("simple"));
    let plan = h.core.prepare_offset_commit(h.now, 8, &simple);
    h.core.complete_offset_commit(plan, Ok(()));
    let (member, token) = h.new_member(&["t"]);
    h.advance(0);
    h.join_answer(token).unwrap();
    let t = h.sync(&member, 1, &[(&member, parts("t", &[0]))]);
    h.sync_answer(t).unwrap();
    let plan = h.core.prepare_offset_commit(
        h.now,
        8,
        &commit_request(1, &member, &[("t", 0, 5), ("old", 0, 6)]),
    );
    h.core.complete_offset_commit(plan, Ok(()));
    // The check runs every 10 minutes; heartbeats keep the member alive meanwhile.
    for _ in 0..125 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&member, 1), NONE);
    }
    assert!(
        !h.core.group_states().contains_key("simple"),
        "expired and forgotten"
    );
    assert_eq!(
        fetch(&h.core, None),
        "t-0=5",
        "the subscribed topic's offset stays"
    );
    h.expired.sort();
    assert_eq!(h.expired, ["g/old-0", "simple/t-0"]);
    assert_eq!(
        h.expired_groups,
        ["simple"],
        "the forgotten group gets a tombstone"
    );
}

/// `offsets.retention.check.interval.ms` sets how often the check runs, and an offset
/// committed with OffsetCommit v2-v4's `retention_time_ms` expires at its own expire
/// timestamp (Kafka's old rule, kept for such offsets) once the group is empty, however long
/// `offsets.retention.minutes` is; a v8 commit of the same group waits for the retention.
#[test]
fn explicit_retention_of_v2_commits_expires_at_its_timestamp_on_the_configured_interval() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 7 * 24 * 3_600_000,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    h.advance(0);
    let mut v2 = commit_request(-1, "", &[("t", 0, 1)]);
    v2.group_id = GroupId(s("old-client"));
    v2.retention_time_ms = 3_000;
    let plan = h.core.prepare_offset_commit(h.now, 2, &v2);
    assert_eq!(
        plan.to_store[0].1.expire_timestamp_ms,
        Some(h.now as i64 + 3_000)
    );
    h.core.complete_offset_commit(plan, Ok(()));
    // v5+ carries no retention: the field is ignored even if set.
    let mut v8 = commit_request(-1, "", &[("t", 0, 2)]);
    v8.retention_time_ms = 3_000;
    let plan = h.core.prepare_offset_commit(h.now, 8, &v8);
    assert_eq!(plan.to_store[0].1.expire_timestamp_ms, None);
    h.core.complete_offset_commit(plan, Ok(()));
    h.advance(2_000);
    assert!(h.expired.is_empty(), "not yet: {:?}", h.expired);
    h.advance(1_000);
    assert_eq!(h.expired, ["old-client/t-0"]);
    assert_eq!(h.expired_groups, ["old-client"]);
    assert_eq!(fetch(&h.core, None), "t-0=2", "the v8 commit stays");
}

/// OffsetCommit v1's per-partition commit timestamp is the commit's time, as Kafka 2.x.
#[test]
fn a_v1_commit_timestamp_is_kept() {
    let mut core = CoordinatorCore::new(config());
    let mut v1 = commit_request(-1, "", &[("t", 0, 1)]);
    v1.topics[0].partitions[0].commit_timestamp = 12_345;
    let plan = core.prepare_offset_commit(99_999, 1, &v1);
    assert_eq!(plan.to_store[0].1.commit_timestamp_ms, 12_345);
    let plan = core.prepare_offset_commit(99_999, 2, &commit_request(-1, "", &[("t", 0, 1)]));
    assert_eq!(plan.to_store[0].1.commit_timestamp_ms, 99_999);
}

#[test]
fn transactional_commits_check_member_and_generation_when_given_and_apply_on_commit() {
    let mut h = Harness::new(config());
    let (member, token) = h.new_member(&["t"]);
    h.advance(0);
    assert_eq!(h.join_answer(token).unwrap().generation_id, 1);
    // KIP-447: a producer without group metadata (generation -1, no member) may commit.
    assert_eq!(h.core.check_txn_offset_commit(GROUP, -1, "", None), Ok(()));
    assert_eq!(
        h.core.check_txn_offset_commit(GROUP, 1, &member, None),
        Ok(())
    );
    assert_eq!(
        h.core.check_txn_offset_commit(GROUP, 2, &member, None),
        Err(ILLEGAL_GENERATION)
    );
    assert_eq!(
        h.core.check_txn_offset_commit(GROUP, 1, "stranger", None),
        Err(UNKNOWN_MEMBER_ID)
    );
    // An unknown group is created for its offsets.
    assert_eq!(
        h.core.check_txn_offset_commit("fresh", -1, "", None),
        Ok(())
    );
    assert!(h.core.group_states().contains_key("fresh"));
    // The COMMIT marker makes them the group's offsets, over what it had.
    let tp = model::TopicPartition::new("t".parse().unwrap(), 0);
    h.core.apply_txn_offsets(
        GROUP,
        [(
            tp,
            group_coordinator::OffsetAndMetadata {
                offset: 42,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
                expire_timestamp_ms: None,
            },
        )],
    );
    assert_eq!(fetch(&h.core, Some(&[("t", &[0])])), "t-0=42");
}
