//! KIP-848 ConsumerGroupHeartbeat flows through the pure core: join, server-side range and
//! uniform assignment, revocation before assignment, leave with epoch -1, session expiry,
//! epoch fencing and request validation.

mod common;

use std::collections::BTreeMap;

use common::*;
use group_coordinator::{ClientInfo, CoordinatorCore};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, TopicName,
};

const NONE: i16 = 0;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const FENCED_INSTANCE_ID: i16 = 82;
const UNRELEASED_INSTANCE_ID: i16 = 111;
const UNSUPPORTED_ASSIGNOR: i16 = 112;
const STALE_MEMBER_EPOCH: i16 = 113;

const T_ID: u128 = 0x7;

/// One simulated KIP-848 consumer: it remembers its epoch and what it owns, and reports it.
struct Consumer {
    id: String,
    epoch: i32,
    owned: Vec<i32>,
}

struct Group {
    core: CoordinatorCore,
    now: u64,
}

impl Group {
    fn new(assignor: Option<&str>) -> (Self, Option<String>) {
        let mut core = CoordinatorCore::new(config());
        core.set_topics([topic("t", T_ID, 4)]);
        (Group { core, now: 1_000 }, assignor.map(str::to_owned))
    }

    fn send(&mut self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
        let client = ClientInfo {
            client_id: "rdkafka".into(),
            client_host: "/127.0.0.1".into(),
        };
        self.core
            .consumer_group_heartbeat(self.now, &request, &client)
    }

    fn join(
        &mut self,
        id: &str,
        assignor: Option<&str>,
    ) -> (Consumer, ConsumerGroupHeartbeatResponse) {
        let response = self.send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(id))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
                .with_server_assignor(assignor.map(s))
                .with_topic_partitions(Some(vec![])),
        );
        assert_eq!(response.error_code, NONE, "{:?}", response.error_message);
        let mut consumer = Consumer {
            id: id.to_owned(),
            epoch: 0,
            owned: Vec::new(),
        };
        consumer.apply(&response);
        (consumer, response)
    }

    /// A regular heartbeat reporting what the consumer owns; the consumer then takes the
    /// answer's assignment (revoking first, as clients do).
    fn heartbeat(&mut self, c: &mut Consumer) -> ConsumerGroupHeartbeatResponse {
        let response = self.send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(&c.id))
                .with_member_epoch(c.epoch)
                .with_topic_partitions(Some(vec![TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_u128(T_ID))
                    .with_partitions(c.owned.clone())])),
        );
        c.apply(&response);
        response
    }

    fn leave(&mut self, c: &Consumer) -> ConsumerGroupHeartbeatResponse {
        self.send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(&c.id))
                .with_member_epoch(-1),
        )
    }
}

impl Consumer {
    fn apply(&mut self, response: &ConsumerGroupHeartbeatResponse) {
        if response.error_code != NONE {
            return;
        }
        self.epoch = response.member_epoch;
        if let Some(assignment) = &response.assignment {
            self.owned = assignment
                .topic_partitions
                .iter()
                .filter(|tp| tp.topic_id == uuid::Uuid::from_u128(T_ID))
                .flat_map(|tp| tp.partitions.clone())
                .collect();
            self.owned.sort();
        }
    }
}

/// Heartbeats every consumer until nothing changes; returns id -> (epoch, owned).
fn settle(g: &mut Group, consumers: &mut [&mut Consumer]) -> BTreeMap<String, (i32, Vec<i32>)> {
    for _ in 0..10 {
        let before: Vec<(i32, Vec<i32>)> = consumers
            .iter()
            .map(|c| (c.epoch, c.owned.clone()))
            .collect();
        for c in consumers.iter_mut() {
            let response = g.heartbeat(c);
            assert_eq!(response.error_code, NONE, "{:?}", response.error_message);
        }
        let after: Vec<(i32, Vec<i32>)> = consumers
            .iter()
            .map(|c| (c.epoch, c.owned.clone()))
            .collect();
        if before == after {
            break;
        }
    }
    consumers
        .iter()
        .map(|c| (c.id.clone(), (c.epoch, c.owned.clone())))
        .collect()
}

fn owned(result: &BTreeMap<String, (i32, Vec<i32>)>) -> Vec<(&str, Vec<i32>)> {
    result
        .iter()
        .map(|(id, (_, o))| (id.as_str(), o.clone()))
        .collect()
}

#[test]
fn a_single_member_gets_every_partition() {
    let (mut g, _) = Group::new(None);
    let (c, response) = g.join("a", Some("range"));
    assert_eq!(response.member_epoch, 1);
    assert_eq!(response.heartbeat_interval_ms, 5_000);
    assert_eq!(response.member_id.as_ref().map(|m| m.as_str()), Some("a"));
    assert_eq!(c.owned, [0, 1, 2, 3]);
}

#[test]
fn three_members_with_range_get_the_seed_assignment_after_revocations() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let (mut b, response) = g.join("b", Some("range"));
    assert_eq!(response.member_epoch, 2);
    assert_eq!(
        b.owned,
        Vec::<i32>::new(),
        "p2 and p3 are still a's: b waits for them"
    );

    // a must revoke p2, p3 first: it stays in epoch 1 and is told to keep p0, p1.
    let response = g.heartbeat(&mut a);
    assert_eq!((response.member_epoch, a.owned.clone()), (1, vec![0, 1]));
    let result = settle(&mut g, &mut [&mut a, &mut b]);
    assert_eq!(owned(&result), [("a", vec![0, 1]), ("b", vec![2, 3])]);
    assert!(result.values().all(|(epoch, _)| *epoch == 2));

    let (mut c, _) = g.join("c", Some("range"));
    let result = settle(&mut g, &mut [&mut a, &mut b, &mut c]);
    assert_eq!(
        owned(&result),
        [("a", vec![0, 1]), ("b", vec![2]), ("c", vec![3])]
    );
    assert!(result.values().all(|(epoch, _)| *epoch == 3));
    let listed = g.core.list_groups(&ListGroupsRequest::default());
    assert_eq!(
        (
            listed.groups[0].group_state.as_str(),
            listed.groups[0].group_type.as_str()
        ),
        ("Stable", "consumer")
    );

    // c leaves with epoch -1; b takes p3 back.
    let response = g.leave(&c);
    assert_eq!((response.error_code, response.member_epoch), (NONE, -1));
    let result = settle(&mut g, &mut [&mut a, &mut b]);
    assert_eq!(owned(&result), [("a", vec![0, 1]), ("b", vec![2, 3])]);
}

#[test]
fn uniform_is_the_default_assignor() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", None);
    let (mut b, _) = g.join("b", None);
    let result = settle(&mut g, &mut [&mut a, &mut b]);
    assert_eq!(owned(&result), [("a", vec![0, 2]), ("b", vec![1, 3])]);
    let described = g.core.consumer_group_describe(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
    );
    let group = &described.groups[0];
    assert_eq!(
        (group.assignor_name.as_str(), group.group_state.as_str()),
        ("uniform", "Stable")
    );
    assert_eq!(
        group.members[0].assignment.topic_partitions[0]
            .topic_name
            .0
            .as_str(),
        "t"
    );
    // Classic tools see the group through DescribeGroups too.
    let classic = g
        .core
        .describe_groups(&DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP))]));
    let member = &classic.groups[0].members[0];
    assert_eq!(render_assignment(&member.member_assignment), "t[0,2]");
}

#[test]
fn a_member_that_stops_heartbeating_is_fenced_and_its_partitions_move() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let (mut b, _) = g.join("b", Some("range"));
    settle(&mut g, &mut [&mut a, &mut b]);
    for _ in 0..10 {
        g.now += 5_000;
        g.core.tick(g.now);
        assert_eq!(g.heartbeat(&mut a).error_code, NONE);
    }
    assert_eq!(a.owned, [0, 1, 2, 3]);
    assert_eq!(g.heartbeat(&mut b).error_code, UNKNOWN_MEMBER_ID);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_fenced() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let (mut b, _) = g.join("b", Some("range"));
    // a hears it must revoke but keeps reporting all four partitions.
    g.heartbeat(&mut a);
    for _ in 0..7 {
        g.now += 5_000;
        g.core.tick(g.now);
        let stubborn = g.send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s("a"))
                .with_member_epoch(1)
                .with_topic_partitions(Some(vec![TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_u128(T_ID))
                    .with_partitions(vec![0, 1, 2, 3])])),
        );
        if stubborn.error_code != NONE {
            assert_eq!(stubborn.error_code, UNKNOWN_MEMBER_ID);
            let result = settle(&mut g, &mut [&mut b]);
            assert_eq!(owned(&result), [("b", vec![0, 1, 2, 3])]);
            return;
        }
        g.heartbeat(&mut b);
    }
    panic!("a was never fenced");
}

#[test]
fn epochs_are_checked() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let mut ahead = Consumer {
        id: "a".into(),
        epoch: 5,
        owned: vec![],
    };
    assert_eq!(g.heartbeat(&mut ahead).error_code, FENCED_MEMBER_EPOCH);
    let (mut b, _) = g.join("b", Some("range"));
    settle(&mut g, &mut [&mut a, &mut b]);
    // The previous epoch with a subset of the assignment is accepted (a lost answer)...
    let mut lagging = Consumer {
        id: "a".into(),
        epoch: 1,
        owned: vec![0],
    };
    assert_eq!(g.heartbeat(&mut lagging).error_code, NONE);
    // ...but not with partitions it no longer has.
    let mut lagging = Consumer {
        id: "a".into(),
        epoch: 1,
        owned: vec![3],
    };
    assert_eq!(g.heartbeat(&mut lagging).error_code, FENCED_MEMBER_EPOCH);
    // A fenced member rejoins with epoch 0 under the same id and starts over.
    let (a2, _) = g.join("a", Some("range"));
    assert!(a2.epoch > 0);
    let mut unknown = Consumer {
        id: "zz".into(),
        epoch: 3,
        owned: vec![],
    };
    assert_eq!(g.heartbeat(&mut unknown).error_code, UNKNOWN_MEMBER_ID);
}

#[test]
fn invalid_requests_are_refused() {
    let (mut g, _) = Group::new(None);
    let first = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s("a"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]));
    let cases = [
        (first.clone().with_rebalance_timeout_ms(-1), INVALID_REQUEST),
        (first.clone().with_topic_partitions(None), INVALID_REQUEST),
        (
            first.clone().with_subscribed_topic_names(Some(vec![])),
            INVALID_REQUEST,
        ),
        (first.clone().with_group_id(GroupId(s(""))), INVALID_REQUEST),
        (
            first.clone().with_server_assignor(Some(s("sticky"))),
            UNSUPPORTED_ASSIGNOR,
        ),
        (
            first.clone().with_member_epoch(3).with_member_id(s("")),
            INVALID_REQUEST,
        ),
        (first.clone().with_member_epoch(-2), INVALID_REQUEST),
        (first.clone().with_member_epoch(-3), INVALID_REQUEST),
        (
            first
                .clone()
                .with_member_epoch(-1)
                .with_group_id(GroupId(s("nobody"))),
            GROUP_ID_NOT_FOUND,
        ),
    ];
    for (request, code) in cases {
        let response = g.send(request.clone());
        assert_eq!(response.error_code, code, "{request:?}");
        assert!(response.error_message.is_some());
    }
}

#[test]
fn static_members_come_back_without_moving_partitions() {
    let (mut g, _) = Group::new(None);
    let join_static = |g: &mut Group, id: &str| {
        g.send(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(id))
                .with_instance_id(Some(s("i-1")))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
                .with_topic_partitions(Some(vec![])),
        )
    };
    let first = join_static(&mut g, "a");
    assert_eq!(first.member_epoch, 1);
    assert_eq!(join_static(&mut g, "b").error_code, UNRELEASED_INSTANCE_ID);
    let leave = g.send(
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s("a"))
            .with_instance_id(Some(s("i-1")))
            .with_member_epoch(-2),
    );
    assert_eq!(leave.member_epoch, -2);
    let back = join_static(&mut g, "b");
    assert_eq!(back.error_code, NONE);
    let zombie = g.send(
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s("a"))
            .with_instance_id(Some(s("i-1")))
            .with_member_epoch(1),
    );
    assert_eq!(
        zombie.error_code, FENCED_INSTANCE_ID,
        "the instance now belongs to a new member id"
    );
    assert_eq!(back.member_epoch, 1, "same epoch: nothing was reassigned");
    let partitions: Vec<i32> = back.assignment.unwrap().topic_partitions[0]
        .partitions
        .clone();
    assert_eq!(partitions, [0, 1, 2, 3]);
}

#[test]
fn offset_commits_carry_the_member_epoch() {
    let (mut g, _) = Group::new(None);
    let (a, _) = g.join("a", Some("range"));
    let commit = |epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s("a"))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(9)])])
    };
    let plan = g.core.prepare_offset_commit(g.now, 9, &commit(a.epoch));
    assert_eq!(
        g.core.complete_offset_commit(plan, Ok(())).topics[0].partitions[0].error_code,
        NONE
    );
    let plan = g.core.prepare_offset_commit(g.now, 9, &commit(a.epoch + 1));
    assert_eq!(
        g.core.complete_offset_commit(plan, Ok(())).topics[0].partitions[0].error_code,
        STALE_MEMBER_EPOCH
    );
    let plan = g.core.prepare_offset_commit(g.now, 8, &commit(a.epoch + 1));
    assert_eq!(
        g.core.complete_offset_commit(plan, Ok(())).topics[0].partitions[0].error_code,
        22,
        "ILLEGAL_GENERATION before v9"
    );
}

#[test]
fn classic_and_consumer_groups_do_not_mix() {
    let mut h = Harness::new(config());
    h.core.set_topics([topic("t", T_ID, 4)]);
    let (_member, token) = h.new_member(&["t"]);
    h.advance(0);
    h.join_answer(token).unwrap();
    let response = h.core.consumer_group_heartbeat(
        h.now,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s("x"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![])),
        &h.client(),
    );
    assert_eq!(response.error_code, GROUP_ID_NOT_FOUND);
}

#[test]
fn server_side_range_orders_static_members_first_like_java_and_librdkafka() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let response = g.send(
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s("z"))
            .with_instance_id(Some(s("i-0")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_server_assignor(Some(s("range")))
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![])),
    );
    let mut z = Consumer {
        id: "z".into(),
        epoch: 0,
        owned: vec![],
    };
    z.apply(&response);
    let result = settle(&mut g, &mut [&mut a, &mut z]);
    assert_eq!(owned(&result), [("a", vec![2, 3]), ("z", vec![0, 1])]);
}

/// Applies the records a core wrote (key -> value, tombstones remove) to a replayed log.
fn replay_into(log: &mut BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>, core: &mut CoordinatorCore) {
    core.persist_consumer_groups();
    for output in core.take_outputs() {
        if let group_coordinator::Output::ConsumerGroupRecords { group_id, records } = output {
            let live = log.entry(group_id).or_default();
            for (key, value) in records {
                match value {
                    Some(value) => live.insert(key, value),
                    None => live.remove(&key),
                };
            }
        }
    }
    log.retain(|_, records| !records.is_empty());
}

/// A KIP-848 group survives its coordinator: the records it wrote, replayed into another
/// coordinator, give the same members, epochs and assignment, and the members go on
/// heartbeating with their epochs (no fencing, no rebalance). Members leaving write tombstones
/// for their records; deleting the group leaves no record behind.
#[test]
fn a_consumer_group_resumes_on_another_coordinator_from_its_records() {
    let (mut g, _) = Group::new(Some("range"));
    let (mut a, _) = g.join("a", Some("range"));
    let (mut b, _) = g.join("b", Some("range"));
    let settled = settle(&mut g, &mut [&mut a, &mut b]);
    let mut log = BTreeMap::new();
    replay_into(&mut log, &mut g.core);
    assert_eq!(
        log[GROUP].len(),
        3 + 3 * 2,
        "group, partitions, target meta + 3 per member"
    );
    let before = g.core.consumer_group_describe(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
    );

    let mut moved = Group {
        core: CoordinatorCore::new(config()),
        now: g.now + 60_000,
    };
    moved.core.set_topics([topic("t", T_ID, 4)]);
    moved.core.load_consumer_groups(moved.now, log.clone());
    let after = moved.core.consumer_group_describe(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
    );
    assert_eq!(before, after, "same members, epochs and assignment");
    for c in [&mut a, &mut b] {
        let (epoch, owned) = (c.epoch, c.owned.clone());
        let response = moved.heartbeat(c);
        assert_eq!(response.error_code, NONE, "{:?}", response.error_message);
        assert_eq!((c.epoch, c.owned.clone()), (epoch, owned));
    }
    assert_eq!(settle(&mut moved, &mut [&mut a, &mut b]), settled);
    // Nothing changed: nothing to write.
    let mut unchanged = log.clone();
    replay_into(&mut unchanged, &mut moved.core);
    assert_eq!(unchanged, log);

    // b leaves: its three records get tombstones; a takes every partition.
    assert_eq!(moved.leave(&b).error_code, NONE);
    settle(&mut moved, &mut [&mut a]);
    replay_into(&mut log, &mut moved.core);
    assert_eq!(log[GROUP].len(), 3 + 3, "b's records are gone");
    assert_eq!(a.owned, vec![0, 1, 2, 3]);
    assert_eq!(moved.leave(&a).error_code, NONE);
    let request = kafka_protocol::messages::DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(s(GROUP))]);
    let plan = moved.core.prepare_delete_groups(&request);
    let deleted: Vec<_> = plan.eligible.iter().map(|g| (g.clone(), Ok(()))).collect();
    moved.core.complete_delete_groups(plan, &deleted);
    replay_into(&mut log, &mut moved.core);
    assert!(log.is_empty(), "{log:?}");
}

/// A member fenced by its session timer loses its records in the same tick (tombstones for
/// its member metadata, target and current assignment); a tick with no timer due writes
/// nothing.
#[test]
fn a_fenced_member_s_records_get_tombstones_from_the_timer() {
    let (mut g, _) = Group::new(None);
    let (mut a, _) = g.join("a", Some("range"));
    let (mut b, _) = g.join("b", Some("range"));
    settle(&mut g, &mut [&mut a, &mut b]);
    let mut log = BTreeMap::new();
    replay_into(&mut log, &mut g.core);
    g.core.tick(g.now);
    assert!(
        g.core.take_outputs().is_empty(),
        "nothing due, nothing written"
    );
    let mut tombstones = Vec::new();
    for _ in 0..10 {
        g.now += 5_000;
        g.core.tick(g.now);
        for output in g.core.take_outputs() {
            if let group_coordinator::Output::ConsumerGroupRecords { records, .. } = output {
                tombstones.extend(
                    records
                        .into_iter()
                        .filter(|(_, v)| v.is_none())
                        .map(|(k, _)| (i16::from_be_bytes([k[0], k[1]]), k.ends_with(b"b"))),
                );
            }
        }
        assert_eq!(g.heartbeat(&mut a).error_code, NONE);
    }
    assert_eq!(tombstones, [(8, true), (7, true), (5, true)]);
}
