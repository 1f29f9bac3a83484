//! Issue 11: ElectLeaders (API 43) on two in-process brokers sharing a store: the answers
//! per partition with Kafka's codes, from the controller and from a broker that is not.

use crate::common;

use std::time::Duration;

use broker::MetadataStore;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NOT_CONTROLLER: i16 = 41;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
const ELECTION_NOT_NEEDED: i16 = 84;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn elect(election_type: i8, partitions: Option<&[i32]>) -> ElectLeadersRequest {
    ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(10_000)
        .with_topic_partitions(partitions.map(|ps| {
            vec![TopicPartitions::default()
                .with_topic(name("el"))
                .with_partitions(ps.to_vec())]
        }))
}

/// (partition, error code) of topic `el` in a response.
fn codes(response: &ElectLeadersResponse) -> Vec<(i32, i16)> {
    let mut codes: Vec<(i32, i16)> = response
        .replica_election_results
        .iter()
        .filter(|t| t.topic.0.as_str() == "el")
        .flat_map(|t| {
            t.partition_result
                .iter()
                .map(|r| (r.partition_id, r.error_code))
        })
        .collect();
    codes.sort();
    codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leaders_answers_per_partition_with_kafkas_codes() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let mut brokers = Vec::new();
    for id in [1000, 1001] {
        let logs = dir.path().join(format!("broker-{id}/logs"));
        let overrides = [
            format!("broker.id={id}"),
            format!("log.dirs={}", logs.display()),
            "auto.leader.rebalance.enable=false".to_owned(),
        ];
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        brokers.push(start_on(store.clone(), dir.path(), &overrides).await);
    }
    eventually("one controller", || {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let controller = brokers.iter().find(|b| b.is_controller()).unwrap();
    let other = brokers.iter().find(|b| !b.is_controller()).unwrap();
    let (c, o) = (controller.broker_id(), other.broker_id());
    let mut to_controller = Connection::connect(&controller.local_addr().to_string(), "t")
        .await
        .unwrap();
    let mut to_other = Connection::connect(&other.local_addr().to_string(), "t")
        .await
        .unwrap();
    // Partition 0 prefers the other broker, partition 1 the controller.
    let assignment = |p: i32, replicas: [i32; 2]| {
        CreatableReplicaAssignment::default()
            .with_partition_index(p)
            .with_broker_ids(replicas.iter().map(|&b| BrokerId(b)).collect())
    };
    let created = to_controller
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("el"))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(vec![
                        assignment(0, [o, c]),
                        assignment(1, [c, o]),
                    ])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);

    // Not the controller: every named partition is NOT_CONTROLLER, nothing changes.
    let refused = to_other.send(elect(0, Some(&[0, 1]))).await.unwrap();
    assert_eq!(
        codes(&refused),
        vec![(0, NOT_CONTROLLER), (1, NOT_CONTROLLER)]
    );

    // Preferred leaders lead already; an unknown partition is named as such.
    let mut answer = to_controller
        .send(elect(0, Some(&[0, 1, 5])))
        .await
        .unwrap();
    for _ in 0..200 {
        if codes(&answer)[..2] == [(0, ELECTION_NOT_NEEDED), (1, ELECTION_NOT_NEEDED)] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        answer = to_controller
            .send(elect(0, Some(&[0, 1, 5])))
            .await
            .unwrap();
    }
    assert_eq!(
        codes(&answer),
        vec![
            (0, ELECTION_NOT_NEEDED),
            (1, ELECTION_NOT_NEEDED),
            (5, UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    // Null partitions: every partition of the cluster.
    let all = to_controller.send(elect(0, None)).await.unwrap();
    assert_eq!(
        codes(&all),
        vec![(0, ELECTION_NOT_NEEDED), (1, ELECTION_NOT_NEEDED)]
    );
    // UNCLEAN with a live leader: not needed either.
    let unclean = to_controller.send(elect(1, Some(&[0]))).await.unwrap();
    assert_eq!(codes(&unclean), vec![(0, ELECTION_NOT_NEEDED)]);
    // An election type Kafka does not have: INVALID_REQUEST.
    let bad = to_controller.send(elect(7, Some(&[0]))).await.unwrap();
    assert_eq!(codes(&bad), vec![(0, INVALID_REQUEST)]);

    // The other broker moves its leadership away (controlled shutdown, still serving): its
    // partition is led by the controller's broker, and a preferred election cannot give it
    // back while the preferred replica is shutting down.
    assert!(other.controlled_shutdown().await);
    let answer = to_controller.send(elect(0, Some(&[0]))).await.unwrap();
    assert_eq!(codes(&answer), vec![(0, PREFERRED_LEADER_NOT_AVAILABLE)]);
    let message = answer.replica_election_results[0].partition_result[0]
        .error_message
        .as_deref()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains(&format!("preferred replica {o} is shutting down")),
        "{message}"
    );
}
