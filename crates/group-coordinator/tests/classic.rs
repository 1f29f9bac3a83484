//! The classic protocol driven through the pure core: join/sync flows, rebalances on leave and
//! on session expiry, generation checks, static membership, group limits and admin APIs.

mod common;

use std::collections::BTreeMap;

use common::*;
use group_coordinator::{range, GroupConfig, MembershipEvent};
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, LeaveGroupRequest, ListGroupsRequest,
};

const NONE: i16 = 0;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const NON_EMPTY_GROUP: i16 = 68;
const MEMBER_ID_REQUIRED: i16 = 79;
const GROUP_MAX_SIZE_REACHED: i16 = 81;
const FENCED_INSTANCE_ID: i16 = 82;

/// Completes a rebalance the way consumers do: the leader computes the seed's range
/// assignment from the JoinGroup member list and sends it; everybody syncs. Returns
/// member id -> rendered assignment.
fn sync_all(
    h: &mut Harness,
    joined: &[(String, group_coordinator::Token)],
    partitions: i32,
) -> BTreeMap<String, String> {
    let answers: Vec<_> = joined
        .iter()
        .map(|(m, t)| {
            (
                m.clone(),
                h.join_answer(*t)
                    .unwrap_or_else(|| panic!("{m} has no JoinGroup answer")),
            )
        })
        .collect();
    let generation = answers[0].1.generation_id;
    let leader = answers[0].1.leader.as_str().to_owned();
    for (_, a) in &answers {
        assert_eq!(a.error_code, NONE);
        assert_eq!(a.generation_id, generation);
        assert_eq!(a.leader.as_str(), leader);
        assert_eq!(a.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    }
    let leader_answer = &answers
        .iter()
        .find(|(m, _)| *m == leader)
        .expect("leader among members")
        .1;
    assert_eq!(
        leader_answer.members.len(),
        joined.len(),
        "the leader sees every member"
    );
    let subscriptions = leader_answer
        .members
        .iter()
        .map(|m| (m.member_id.as_str().to_owned(), ["t".to_string()].into()))
        .collect();
    let assignment = range(&subscriptions, &[("t".to_string(), partitions)].into());
    // Followers first: they wait until the leader's assignment arrives.
    let mut tokens = Vec::new();
    for (member, _) in answers.iter().filter(|(m, _)| *m != leader) {
        let token = h.sync(member, generation, &[]);
        assert!(
            h.sync_answer(token).is_none(),
            "followers wait for the leader"
        );
        tokens.push((member.clone(), token));
    }
    let leader_assignments: Vec<(&str, BTreeMap<String, Vec<i32>>)> = assignment
        .iter()
        .map(|(m, a)| (m.as_str(), a.clone()))
        .collect();
    tokens.push((
        leader.clone(),
        h.sync(&leader, generation, &leader_assignments),
    ));
    tokens
        .into_iter()
        .map(|(m, t)| {
            let answer = h
                .sync_answer(t)
                .expect("everyone answered once the leader synced");
            assert_eq!(answer.error_code, NONE);
            (m, render_assignment(&answer.assignment))
        })
        .collect()
}

#[test]
fn single_member_join_sync_heartbeat() {
    let mut h = Harness::new(config());
    let (member, token) = h.new_member(&["t"]);
    assert!(
        member.starts_with("c-"),
        "Kafka's clientId-uuid member ids: {member}"
    );
    assert!(
        h.join_answer(token).is_none(),
        "the initial delay runs in tick"
    );
    assert_eq!(h.state(), "PreparingRebalance");
    h.advance(0);
    let got = sync_all(&mut h, &[(member.clone(), token)], 4);
    assert_eq!(got[&member], "t[0,1,2,3]");
    assert_eq!(h.state(), "Stable");
    assert_eq!(h.heartbeat(&member, 1), NONE);
    assert_eq!(h.heartbeat(&member, 2), ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("nobody", 1), UNKNOWN_MEMBER_ID);
}

#[test]
fn v3_joins_get_a_member_id_without_member_id_required() {
    let mut h = Harness::new(config());
    let token = h.join_with(Harness::join_request("", None, &["t"]), 3);
    h.advance(0);
    let answer = h.join_answer(token).unwrap();
    assert_eq!(answer.error_code, NONE);
    assert_eq!(answer.generation_id, 1);
    assert_eq!(answer.leader, answer.member_id);
}

#[test]
fn three_members_within_the_initial_delay_share_one_generation_and_get_the_seed_ranges() {
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..config()
    });
    let mut joined = Vec::new();
    for _ in 0..3 {
        joined.push(h.new_member(&["t"]));
        h.advance(100);
    }
    // The first delay ends at 3000 ms; members arrived meanwhile, so it waits once more.
    h.advance(2_800);
    assert!(joined.iter().all(|(_, t)| !h.joins.contains_key(t)));
    h.advance(3_000);
    let got = sync_all(&mut h, &joined, 4);
    let mut ids: Vec<&String> = got.keys().collect();
    ids.sort();
    let rendered: Vec<&str> = ids.iter().map(|m| got[*m].as_str()).collect();
    assert_eq!(rendered, ["t[0,1]", "t[2]", "t[3]"]);
}

#[test]
fn a_second_member_triggers_a_rebalance_and_both_get_two_partitions() {
    let mut h = Harness::new(config());
    let (a, ta) = h.new_member(&["t"]);
    h.advance(0);
    sync_all(&mut h, &[(a.clone(), ta)], 4);

    let (b, tb) = h.new_member(&["t"]);
    assert_eq!(h.state(), "PreparingRebalance");
    assert_eq!(h.heartbeat(&a, 1), REBALANCE_IN_PROGRESS);
    let ta = h.join(&a, &["t"]);
    let got = sync_all(&mut h, &[(a.clone(), ta), (b.clone(), tb)], 4);
    let mut values: Vec<&String> = got.values().collect();
    values.sort();
    assert_eq!(values, ["t[0,1]", "t[2,3]"]);
    assert_eq!(h.heartbeat(&a, 2), NONE);
    assert_eq!(h.heartbeat(&b, 2), NONE);
}

fn stable_group(h: &mut Harness, n: usize) -> Vec<String> {
    let mut joined = Vec::new();
    for _ in 0..n {
        joined.push(h.new_member(&["t"]));
    }
    // All joined before the (zero) initial delay fired: one generation.
    h.advance(0);
    sync_all(h, &joined, 4);
    let mut ids: Vec<String> = joined.into_iter().map(|(m, _)| m).collect();
    ids.sort();
    ids
}

#[test]
fn leave_rebalances_the_rest() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 3);
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_members(vec![MemberIdentity::default().with_member_id(s(&ids[2]))]);
    let response = h.core.leave_group(h.now, 3, &request);
    assert_eq!(response.error_code, NONE);
    assert_eq!(response.members[0].error_code, NONE);
    h.collect();
    assert!(h.events.contains(&MembershipEvent::MemberRemoved {
        group_id: GROUP.into(),
        member_id: ids[2].clone()
    }));
    assert_eq!(h.heartbeat(&ids[0], 1), REBALANCE_IN_PROGRESS);
    let t0 = h.join(&ids[0], &["t"]);
    assert!(
        h.join_answer(t0).is_none(),
        "waits for the other remaining member"
    );
    let t1 = h.join(&ids[1], &["t"]);
    let got = sync_all(&mut h, &[(ids[0].clone(), t0), (ids[1].clone(), t1)], 4);
    assert_eq!(got[&ids[0]], "t[0,1]");
    assert_eq!(got[&ids[1]], "t[2,3]");
    // v0-2 name one member and answer with a top-level code.
    let old = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s("nobody"));
    assert_eq!(
        h.core.leave_group(h.now, 1, &old).error_code,
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn session_expiry_removes_the_member_and_rebalances() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 2);
    // Only ids[0] keeps heartbeating.
    for _ in 0..2 {
        h.advance(4_000);
        assert_eq!(h.heartbeat(&ids[0], 1), NONE);
    }
    assert_eq!(h.state(), "Stable");
    h.advance(4_000);
    assert_eq!(h.state(), "PreparingRebalance", "ids[1] expired after 10 s");
    assert_eq!(h.heartbeat(&ids[1], 1), UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat(&ids[0], 1), REBALANCE_IN_PROGRESS);
    let t0 = h.join(&ids[0], &["t"]);
    let got = sync_all(&mut h, &[(ids[0].clone(), t0)], 4);
    assert_eq!(got[&ids[0]], "t[0,1,2,3]");
}

#[test]
fn members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 2);
    let t0 = h.join(&ids[0], &["t", "u"]); // a new subscription: rebalance
    assert_eq!(h.state(), "PreparingRebalance");
    // ids[1] keeps heartbeating but never rejoins.
    for _ in 0..7 {
        h.advance(4_000);
        h.heartbeat(&ids[1], 1);
    }
    h.advance(3_000);
    let answer = h
        .join_answer(t0)
        .expect("completed at the rebalance timeout");
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.members.len(), 1);
    assert_eq!(h.heartbeat(&ids[1], 1), UNKNOWN_MEMBER_ID);
}

#[test]
fn generation_and_state_checks_on_sync() {
    let mut h = Harness::new(config());
    let (a, ta) = h.new_member(&["t"]);
    h.advance(0);
    let answer = h.join_answer(ta).unwrap();
    assert_eq!(answer.generation_id, 1);
    let t = h.sync(&a, 2, &[]);
    assert_eq!(h.sync_answer(t).unwrap().error_code, ILLEGAL_GENERATION);
    let t = h.sync("nobody", 1, &[]);
    assert_eq!(h.sync_answer(t).unwrap().error_code, UNKNOWN_MEMBER_ID);
    // Rejoining with the same metadata during CompletingRebalance returns the same generation.
    let again = h.join(&a, &["t"]);
    let again = h.join_answer(again).unwrap();
    assert_eq!(
        (again.error_code, again.generation_id, again.members.len()),
        (NONE, 1, 1)
    );
    // A follower syncing while a rebalance is prepared is told to rejoin.
    let (_b, _tb) = h.new_member(&["t"]);
    let t = h.sync(&a, 1, &[]);
    assert_eq!(h.sync_answer(t).unwrap().error_code, REBALANCE_IN_PROGRESS);
}

#[test]
fn pending_members_that_never_rejoin_expire() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 1);
    let first = h.join("", &["t"]);
    assert_eq!(h.join_answer(first).unwrap().error_code, MEMBER_ID_REQUIRED);
    // A rebalance triggered now must not wait for the pending member forever.
    let t0 = h.join(&ids[0], &["t"]);
    assert!(h.join_answer(t0).is_none());
    h.advance(SESSION_MS as u64);
    assert_eq!(h.join_answer(t0).unwrap().generation_id, 2);
}

#[test]
fn static_member_rejoin_keeps_the_assignment_without_a_rebalance() {
    let mut h = Harness::new(config());
    let ta = h.join_with(Harness::join_request("", Some("i-a"), &["t"]), 7);
    let tb = h.join_with(Harness::join_request("", Some("i-b"), &["t"]), 7);
    h.advance(0);
    let a = h.joins[&ta].member_id.as_str().to_owned();
    let b = h.joins[&tb].member_id.as_str().to_owned();
    let got = sync_all(&mut h, &[(a.clone(), ta), (b.clone(), tb)], 4);
    let a_assignment = got[&a].clone();

    // i-a restarts: it joins with no member id and gets a new one, same generation.
    let t = h.join_with(Harness::join_request("", Some("i-a"), &["t"]), 7);
    let answer = h.join_answer(t).expect("answered at once");
    assert_eq!(answer.error_code, NONE);
    assert_eq!(answer.generation_id, 1);
    let new_a = answer.member_id.as_str().to_owned();
    assert_ne!(new_a, a);
    assert_ne!(
        answer.leader.as_str(),
        new_a,
        "the new id is never told it leads"
    );
    assert_eq!(h.state(), "Stable", "no rebalance");
    assert_eq!(h.heartbeat_static(&b, Some("i-b"), 1), NONE);
    assert_eq!(h.heartbeat_static(&a, Some("i-a"), 1), FENCED_INSTANCE_ID);
    let t = h.sync(&new_a, 1, &[]);
    assert_eq!(
        render_assignment(&h.sync_answer(t).unwrap().assignment),
        a_assignment
    );

    // With a changed subscription it rebalances.
    h.join_with(Harness::join_request("", Some("i-b"), &["t", "u"]), 7);
    assert_eq!(h.state(), "PreparingRebalance");
}

#[test]
fn session_timeout_bounds_and_group_max_size() {
    let mut h = Harness::new(GroupConfig {
        max_size: 1,
        ..config()
    });
    let mut request = Harness::join_request("", None, &["t"]);
    request.session_timeout_ms = 1_000;
    let t = h.join_with(request, 7);
    assert_eq!(
        h.join_answer(t).unwrap().error_code,
        INVALID_SESSION_TIMEOUT
    );
    stable_group(&mut h, 1);
    let t = h.join("", &["t"]);
    assert_eq!(h.join_answer(t).unwrap().error_code, GROUP_MAX_SIZE_REACHED);
}

#[test]
fn describe_list_and_delete() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 2);
    let described = h.core.describe_groups(
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP)), GroupId(s("other"))]),
    );
    let g = &described.groups[0];
    assert_eq!(
        (
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.protocol_data.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(g.members.len(), 2);
    assert!(g
        .members
        .iter()
        .all(|m| !m.member_assignment.is_empty() && m.client_host.as_str() == "/127.0.0.1"));
    assert_eq!(
        (
            described.groups[1].error_code,
            described.groups[1].group_state.as_str()
        ),
        (NONE, "Dead")
    );

    let listed = h.core.list_groups(&ListGroupsRequest::default());
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_state.as_str(), "Stable");
    let filtered = h
        .core
        .list_groups(&ListGroupsRequest::default().with_states_filter(vec![s("Empty")]));
    assert!(filtered.groups.is_empty());

    let delete = DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(s(GROUP)), GroupId(s("missing"))]);
    let plan = h.core.prepare_delete_groups(&delete);
    assert!(plan.eligible.is_empty());
    let response = h.core.complete_delete_groups(plan, &[]);
    assert_eq!(response.results[0].error_code, NON_EMPTY_GROUP);
    assert_eq!(response.results[1].error_code, 69, "GROUP_ID_NOT_FOUND");

    for id in &ids {
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s(id));
        h.core.leave_group(h.now, 0, &leave);
    }
    h.advance(0);
    assert_eq!(h.state(), "Empty");
    let plan = h.core.prepare_delete_groups(&delete);
    assert_eq!(plan.eligible, [GROUP]);
    let response = h
        .core
        .complete_delete_groups(plan, &[(GROUP.to_owned(), Ok(()))]);
    assert_eq!(response.results[0].error_code, NONE);
    assert_eq!(h.state(), "none");
}

#[test]
fn membership_events_follow_the_seed_layout() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 2);
    let registered: Vec<&String> = h
        .events
        .iter()
        .filter_map(|e| match e {
            MembershipEvent::MemberRegistered {
                member_id,
                subscription,
                ..
            } => {
                assert_eq!(subscription.iter().collect::<Vec<_>>(), ["t"]);
                Some(member_id)
            }
            _ => None,
        })
        .collect();
    assert_eq!(registered.len(), 2);
    let owners = h
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            MembershipEvent::OwnersChanged { owners, .. } => Some(owners.clone()),
            _ => None,
        })
        .expect("owners written when the group became stable");
    let rendered: Vec<String> = owners
        .iter()
        .map(|(tp, m)| format!("{tp}={}", if *m == ids[0] { "a" } else { "b" }))
        .collect();
    assert_eq!(rendered, ["t-0=a", "t-1=a", "t-2=b", "t-3=b"]);
}

#[test]
fn empty_groups_without_offsets_are_forgotten_by_the_periodic_cleanup() {
    let mut h = Harness::new(config());
    let ids = stable_group(&mut h, 1);
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(&ids[0]));
    h.core.leave_group(h.now, 0, &leave);
    h.advance(0);
    assert_eq!(h.state(), "Empty");
    h.advance(group_coordinator::GROUP_CLEANUP_INTERVAL_MS);
    assert_eq!(h.state(), "none");
}

#[test]
fn join_group_v0_uses_the_session_timeout_as_rebalance_timeout() {
    let mut h = Harness::new(config());
    let ta = h.join_with(Harness::join_request("", None, &["t"]), 0);
    h.advance(0);
    let a = h.join_answer(ta).unwrap().member_id.as_str().to_owned();
    let t = h.sync(&a, 1, &[(&a, parts("t", &[0, 1, 2, 3]))]);
    h.sync_answer(t).unwrap();
    let tb = h.join_with(Harness::join_request("", None, &["t"]), 0);
    h.advance(5_000);
    assert!(
        h.join_answer(tb).is_none(),
        "waits up to the 10 s session timeout for a"
    );
    let ta = h.join_with(Harness::join_request(&a, None, &["t"]), 0);
    let (a_answer, b_answer) = (h.join_answer(ta).unwrap(), h.join_answer(tb).unwrap());
    assert_eq!((a_answer.generation_id, b_answer.generation_id), (2, 2));
}

/// Issue 25: a classic group survives its coordinator's move. The rebalance's end stores the
/// group's metadata; a new coordinator that loads it knows the members, the generation and
/// each member's assignment, so heartbeats and SyncGroup at that generation go on.
#[test]
fn a_group_loaded_from_its_stored_metadata_keeps_members_generation_and_assignment() {
    let mut old = Harness::new(config());
    let ids = stable_group(&mut old, 2);
    let (group_id, stored) = old
        .stored
        .last()
        .cloned()
        .expect("the rebalance stored the group");
    assert_eq!(group_id, GROUP);
    assert_eq!(stored.generation, 1);
    assert_eq!(stored.protocol.as_deref(), Some("range"));
    assert_eq!(stored.members.len(), 2);
    assert!(stored.members.iter().all(|m| !m.assignment.is_empty()));
    // The bytes Kafka would write decode to the same group.
    let bytes = group_coordinator::log_records::group_value(&stored);
    let decoded = group_coordinator::log_records::decode(
        &group_coordinator::log_records::group_key(GROUP),
        Some(&bytes),
    )
    .unwrap();
    let group_coordinator::log_records::LogRecord::Group {
        value: Some(decoded),
        ..
    } = decoded
    else {
        panic!("not a group record");
    };

    let mut new = Harness::new(config());
    new.core.load_groups(
        new.now,
        Default::default(),
        [(GROUP.to_owned(), decoded)].into(),
    );
    assert_eq!(new.state(), "Stable");
    for id in &ids {
        assert_eq!(new.heartbeat(id, 1), NONE);
    }
    let sync = new.sync(&ids[0], 1, &[]);
    let answer = new
        .sync_answer(sync)
        .expect("a Stable group answers SyncGroup at once");
    assert_eq!(answer.error_code, NONE);
    assert!(!render_assignment(&answer.assignment).is_empty());
    assert_eq!(new.heartbeat("someone-else", 1), UNKNOWN_MEMBER_ID);
    // Members that died with the old coordinator leave after their session timeout.
    new.advance(SESSION_MS as u64 + 1);
    assert_eq!(new.state(), "Empty", "the dead members' sessions ran out");
    assert_eq!(new.stored.last().unwrap().1.generation, 2);
    assert!(new.stored.last().unwrap().1.members.is_empty());
}

/// Issue 25: a coordinator that stops leading a group's partition forgets the group and
/// answers its parked JoinGroup requests NOT_COORDINATOR, so members find the new one.
#[test]
fn unloading_a_group_answers_parked_joins_not_coordinator() {
    let mut h = Harness::new(config());
    stable_group(&mut h, 2);
    // A new member joins: the group rebalances and its JoinGroup parks.
    let (_, parked) = h.new_member(&["t"]);
    assert!(h.join_answer(parked).is_none());
    assert_eq!(h.core.unload_groups(|g| g == GROUP), 1);
    h.collect();
    assert_eq!(h.join_answer(parked).unwrap().error_code, 16);
    assert_eq!(h.state(), "none");
    assert_eq!(h.core.unload_groups(|g| g == GROUP), 0);
}
