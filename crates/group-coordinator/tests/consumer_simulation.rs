//! Seeded random runs of KIP-848 members joining, heartbeating and leaving, checking the
//! protocol's safety property after every step: no partition is ever owned by two members at
//! once (revocation before assignment). Once the run stops, the group must converge to the
//! server-side range assignment of the members left.

use std::collections::{BTreeMap, BTreeSet};

use group_coordinator::{range, ClientInfo, CoordinatorCore, GroupConfig, TopicMetadata};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PARTITIONS: i32 = 7;
const MEMBERS: usize = 5;
const STEPS: usize = 400;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic_id() -> uuid::Uuid {
    uuid::Uuid::from_u128(42)
}

#[derive(Debug, Default, Clone)]
struct Client {
    joined: bool,
    epoch: i32,
    owned: BTreeSet<i32>,
}

fn send(
    core: &mut CoordinatorCore,
    now: u64,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let client = ClientInfo {
        client_id: "sim".into(),
        client_host: "/127.0.0.1".into(),
    };
    core.consumer_group_heartbeat(now, &request, &client)
}

fn base(id: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sim")))
        .with_member_id(s(id))
        .with_member_epoch(epoch)
}

/// Applies a response the way a KIP-848 client does: a new assignment replaces what it owns
/// (dropping revoked partitions at once); a fencing error drops everything.
fn apply(client: &mut Client, response: &ConsumerGroupHeartbeatResponse) {
    match response.error_code {
        0 => {
            client.epoch = response.member_epoch;
            if let Some(assignment) = &response.assignment {
                client.owned = assignment
                    .topic_partitions
                    .iter()
                    .filter(|tp| tp.topic_id == topic_id())
                    .flat_map(|tp| tp.partitions.iter().copied())
                    .collect();
            }
        }
        25 | 110 => {
            client.joined = false;
            client.epoch = 0;
            client.owned.clear();
        }
        other => panic!("unexpected error {other}: {:?}", response.error_message),
    }
}

fn step(core: &mut CoordinatorCore, now: u64, id: &str, client: &mut Client, action: u32) {
    if !client.joined {
        let response = send(
            core,
            now,
            base(id, 0)
                .with_rebalance_timeout_ms(60_000)
                .with_server_assignor(Some(s("range")))
                .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
                .with_topic_partitions(Some(vec![])),
        );
        assert_eq!(response.error_code, 0);
        client.joined = true;
        apply(client, &response);
    } else if action == 0 {
        let response = send(core, now, base(id, -1));
        assert_eq!((response.error_code, response.member_epoch), (0, -1));
        *client = Client::default();
    } else {
        let owned = TopicPartitions::default()
            .with_topic_id(topic_id())
            .with_partitions(client.owned.iter().copied().collect());
        let response = send(
            core,
            now,
            base(id, client.epoch).with_topic_partitions(Some(vec![owned])),
        );
        apply(client, &response);
    }
}

fn assert_no_double_ownership(clients: &BTreeMap<String, Client>, seed: u64, step: usize) {
    let mut seen = BTreeMap::new();
    for (id, client) in clients {
        for partition in &client.owned {
            if let Some(other) = seen.insert(*partition, id) {
                panic!("seed {seed} step {step}: partition {partition} owned by {other} and {id}: {clients:?}");
            }
        }
    }
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut core = CoordinatorCore::new(GroupConfig {
        consumer_session_timeout_ms: 1_000_000,
        ..GroupConfig::default()
    });
    core.set_topics([TopicMetadata {
        name: "t".parse().unwrap(),
        topic_id: topic_id(),
        partitions: PARTITIONS,
    }]);
    let mut clients: BTreeMap<String, Client> = (0..MEMBERS)
        .map(|i| (format!("m{i}"), Client::default()))
        .collect();
    let ids: Vec<String> = clients.keys().cloned().collect();
    let now = 1_000;
    for i in 0..STEPS {
        let id = &ids[rng.random_range(0..ids.len())];
        // Leaves are rarer than heartbeats, so groups get time to converge between them.
        let action = rng.random_range(0..12u32);
        let client = clients.get_mut(id).expect("known id");
        step(&mut core, now, id, client, action);
        assert_no_double_ownership(&clients, seed, i);
    }
    // Quiesce: everyone heartbeats until nothing changes.
    for _ in 0..20 {
        for id in &ids {
            if clients[id].joined {
                let client = clients.get_mut(id).expect("known id");
                step(&mut core, now, id, client, 1);
                assert_no_double_ownership(&clients, seed, STEPS);
            }
        }
    }
    let members: BTreeMap<String, BTreeSet<String>> = clients
        .iter()
        .filter(|(_, c)| c.joined)
        .map(|(id, _)| (id.clone(), ["t".to_string()].into()))
        .collect();
    let expected = range(&members, &[("t".to_string(), PARTITIONS)].into());
    for (id, topics) in expected {
        let want: BTreeSet<i32> = topics
            .get("t")
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .collect();
        assert_eq!(
            clients[&id].owned, want,
            "seed {seed}: {id} did not converge"
        );
    }
}

#[test]
fn random_membership_changes_never_double_assign_and_converge_to_range() {
    for seed in 0..50 {
        run(seed);
    }
}
