//! `AdminClient` against in-process peers: bootstrap, controller routing, NOT_CONTROLLER
//! retries, per-topic results, metadata and config parsing.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{AdminClient, AdminOptions, ConfigResourceKind, NewPartitions, NewTopic};
use common::{kafka_2_8_versions, Handler, Reply, TestBroker};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
    DescribeConfigsResponse, MetadataResponse, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// A two-broker cluster of test peers sharing one view of who the controller is. A broker
/// that is not the controller (or every broker, with `refuse_all`) answers admin requests
/// with NOT_CONTROLLER.
struct Cluster {
    brokers: Vec<TestBroker>,
    controller: Arc<AtomicI32>,
    refuse_all: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    addrs: Vec<(i32, String)>,
    topics: Vec<MetadataResponseTopic>,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn tn(text: &str) -> TopicName {
    TopicName(s(text))
}

async fn cluster(initial_controller: i32, versions: Vec<(ApiKey, i16, i16)>) -> Cluster {
    let controller = Arc::new(AtomicI32::new(initial_controller));
    let refuse_all = Arc::new(AtomicBool::new(false));
    let state = Arc::new(Mutex::new(State::default()));
    let mut brokers = Vec::new();
    for id in [1, 2] {
        let handler = broker_handler(
            id,
            Arc::clone(&controller),
            Arc::clone(&refuse_all),
            Arc::clone(&state),
        );
        let broker = TestBroker::start(versions.clone(), handler).await;
        state.lock().unwrap().addrs.push((id, broker.addr.clone()));
        brokers.push(broker);
    }
    Cluster {
        brokers,
        controller,
        refuse_all,
        state,
    }
}

fn broker_handler(
    id: i32,
    controller: Arc<AtomicI32>,
    refuse_all: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
) -> Handler {
    Arc::new(move |_, request| {
        let is_controller =
            controller.load(Ordering::SeqCst) == id && !refuse_all.load(Ordering::SeqCst);
        match request {
            RequestKind::Metadata(req) => {
                let state = state.lock().unwrap();
                let brokers = state
                    .addrs
                    .iter()
                    .map(|(id, addr)| {
                        let (host, port) = addr.rsplit_once(':').unwrap();
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(*id))
                            .with_host(s(host))
                            .with_port(port.parse().unwrap())
                    })
                    .collect();
                let topics = match &req.topics {
                    None => state.topics.clone(),
                    Some(wanted) => wanted
                        .iter()
                        .map(|w| {
                            let name = w.name.clone().unwrap();
                            state
                                .topics
                                .iter()
                                .find(|t| t.name.as_ref() == Some(&name))
                                .cloned()
                                .unwrap_or_else(|| {
                                    MetadataResponseTopic::default()
                                        .with_name(Some(name))
                                        .with_error_code(3)
                                })
                        })
                        .collect(),
                };
                Reply::Respond(ResponseKind::Metadata(
                    MetadataResponse::default()
                        .with_brokers(brokers)
                        .with_controller_id(BrokerId(controller.load(Ordering::SeqCst)))
                        .with_topics(topics),
                ))
            }
            RequestKind::CreateTopics(req) => {
                let code = if is_controller { 0 } else { 41 };
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let (code, message) = match t.name.0.as_str() {
                            _ if code != 0 => (code, None),
                            "exists" => (36, Some(s("Topic 'exists' already exists."))),
                            "bad" => (17, None),
                            _ => (0, None),
                        };
                        CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message)
                    })
                    .collect();
                Reply::Respond(ResponseKind::CreateTopics(
                    CreateTopicsResponse::default().with_topics(topics),
                ))
            }
            RequestKind::CreatePartitions(req) => {
                let code = if is_controller { 0 } else { 41 };
                let results = req
                    .topics
                    .iter()
                    .map(|t| {
                        // Echo the assignment size as an error so tests can see it arrived.
                        let code =
                            if code == 0 && t.assignments.as_ref().is_some_and(|a| a.len() != 2) {
                                39
                            } else {
                                code
                            };
                        CreatePartitionsTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                    })
                    .collect();
                Reply::Respond(ResponseKind::CreatePartitions(
                    CreatePartitionsResponse::default().with_results(results),
                ))
            }
            RequestKind::DeleteTopics(req) => {
                let code = if is_controller { 0 } else { 41 };
                let names: Vec<TopicName> = if req.topics.is_empty() {
                    req.topic_names.clone()
                } else {
                    req.topics.iter().filter_map(|t| t.name.clone()).collect()
                };
                let responses = names
                    .into_iter()
                    .map(|name| {
                        DeletableTopicResult::default()
                            .with_name(Some(name))
                            .with_error_code(code)
                    })
                    .collect();
                Reply::Respond(ResponseKind::DeleteTopics(
                    DeleteTopicsResponse::default().with_responses(responses),
                ))
            }
            RequestKind::DescribeConfigs(req) => {
                let results = req
                    .resources
                    .iter()
                    .map(|r| {
                        DescribeConfigsResult::default()
                            .with_resource_type(r.resource_type)
                            .with_resource_name(r.resource_name.clone())
                            .with_configs(vec![
                                DescribeConfigsResourceResult::default()
                                    .with_name(s("retention.ms"))
                                    .with_value(Some(s("600001")))
                                    .with_config_source(1),
                                DescribeConfigsResourceResult::default()
                                    .with_name(s("cleanup.policy"))
                                    .with_value(Some(s("delete")))
                                    .with_config_source(5),
                            ])
                    })
                    .collect();
                Reply::Respond(ResponseKind::DescribeConfigs(
                    DescribeConfigsResponse::default().with_results(results),
                ))
            }
            _ => Reply::Close,
        }
    })
}

fn options(cluster: &Cluster) -> AdminOptions {
    let mut options = AdminOptions::new(&cluster.brokers[0].addr);
    options.retry_backoff = Duration::from_millis(10);
    options.connection.request_timeout = Duration::from_secs(5);
    options
}

fn new_topic(name: &str) -> NewTopic {
    NewTopic {
        name: name.to_string(),
        partitions: Some(3),
        replication_factor: Some(1),
        ..NewTopic::default()
    }
}

#[tokio::test]
async fn create_goes_to_the_controller_and_follows_it_after_not_controller() {
    let cluster = cluster(1, kafka_2_8_versions()).await;
    let mut admin = AdminClient::connect(options(&cluster)).await.unwrap();
    assert_eq!(admin.controller_id(), Some(1));
    // The controller moves to broker 2 behind the client's back: broker 1 refuses, the client
    // refreshes its metadata and sends the request again to broker 2.
    cluster.controller.store(2, Ordering::SeqCst);
    let results = admin.create_topics(&[new_topic("t")], false).await.unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(cluster.brokers[0].seen_versions(ApiKey::CreateTopics), [7]);
    assert_eq!(cluster.brokers[1].seen_versions(ApiKey::CreateTopics), [7]);
    assert_eq!(admin.controller_id(), Some(2));

    // Deletion goes to the controller too, at v6 (names in `topics`).
    let results = admin.delete_topics(&["t".to_string()]).await.unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(cluster.brokers[1].seen_versions(ApiKey::DeleteTopics), [6]);
    assert!(cluster.brokers[0]
        .seen_versions(ApiKey::DeleteTopics)
        .is_empty());
}

#[tokio::test]
async fn not_controller_retries_are_bounded() {
    let cluster = cluster(1, kafka_2_8_versions()).await;
    cluster.refuse_all.store(true, Ordering::SeqCst);
    let mut options = options(&cluster);
    options.controller_retries = 2;
    let mut admin = AdminClient::connect(options).await.unwrap();
    let results = admin.create_topics(&[new_topic("t")], false).await.unwrap();
    let err = results[0].1.as_ref().unwrap_err();
    assert_eq!(err.code(), Some(41), "{err}");
    assert_eq!(
        cluster.brokers[0].seen_versions(ApiKey::CreateTopics).len(),
        3,
        "one try and two retries"
    );
}

#[tokio::test]
async fn an_unknown_controller_is_retried_then_reported() {
    let cluster = cluster(1, kafka_2_8_versions()).await;
    let mut options = options(&cluster);
    options.controller_retries = 2;
    let mut admin = AdminClient::connect(options).await.unwrap();
    cluster.controller.store(-1, Ordering::SeqCst);
    admin.refresh().await.unwrap();
    let err = admin
        .create_topics(&[new_topic("t")], false)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(41), "{err}");
    assert!(err.to_string().contains("No controller"), "{err}");
}

#[tokio::test]
async fn per_topic_errors_carry_the_broker_message_or_the_standard_one() {
    let cluster = cluster(1, kafka_2_8_versions()).await;
    let mut admin = AdminClient::connect(options(&cluster)).await.unwrap();
    let results = admin
        .create_topics(
            &[new_topic("ok"), new_topic("exists"), new_topic("bad")],
            false,
        )
        .await
        .unwrap();
    let rendered: Vec<(String, String)> = results
        .iter()
        .map(|(name, r)| {
            (
                name.clone(),
                r.as_ref().err().map(|e| e.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        rendered,
        [
            ("ok".to_string(), String::new()),
            (
                "exists".to_string(),
                "Topic 'exists' already exists.".to_string()
            ),
            (
                "bad".to_string(),
                "The request attempted to perform an operation on an invalid topic.".to_string()
            ),
        ]
    );
}

#[tokio::test]
async fn old_brokers_get_delete_topics_by_name_list_and_no_default_counts() {
    let mut versions = kafka_2_8_versions();
    versions.retain(|(api, _, _)| *api != ApiKey::DeleteTopics && *api != ApiKey::CreateTopics);
    versions.push((ApiKey::DeleteTopics, 0, 3));
    versions.push((ApiKey::CreateTopics, 0, 3));
    let cluster = cluster(1, versions).await;
    let mut admin = AdminClient::connect(options(&cluster)).await.unwrap();
    let results = admin.delete_topics(&["x".to_string()]).await.unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(cluster.brokers[0].seen_versions(ApiKey::DeleteTopics), [3]);

    let defaults = NewTopic {
        name: "d".to_string(),
        ..NewTopic::default()
    };
    let err = admin.create_topics(&[defaults], false).await.unwrap_err();
    assert!(err.to_string().contains("--partitions"), "{err}");
}

#[tokio::test]
async fn create_partitions_sends_the_assignment_for_new_partitions() {
    let cluster = cluster(1, kafka_2_8_versions()).await;
    let mut admin = AdminClient::connect(options(&cluster)).await.unwrap();
    let increases = [
        NewPartitions {
            topic: "two-new".to_string(),
            total_count: 5,
            assignment: Some(vec![vec![1], vec![2]]),
        },
        NewPartitions {
            topic: "three-new".to_string(),
            total_count: 6,
            assignment: Some(vec![vec![1], vec![2], vec![1]]),
        },
        NewPartitions {
            topic: "placed".to_string(),
            total_count: 6,
            assignment: None,
        },
    ];
    let results = admin.create_partitions(&increases, false).await.unwrap();
    let codes: Vec<Option<i16>> = results
        .iter()
        .map(|(_, r)| r.as_ref().err().and_then(|e| e.code()))
        .collect();
    assert_eq!(codes, [None, Some(39), None]);
}

#[tokio::test]
async fn bootstrap_skips_unreachable_servers_and_lists_and_describes() {
    let cluster = cluster(2, kafka_2_8_versions()).await;
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let mut options = options(&cluster);
    options.bootstrap_servers = format!("{dead_addr}, {}", cluster.brokers[1].addr);
    let mut admin = AdminClient::connect(options).await.unwrap();
    assert_eq!(admin.brokers().len(), 2);
    assert_eq!(admin.controller_id(), Some(2));

    let topics = admin.list_topics().await.unwrap();
    assert!(topics.is_empty());
    let err = admin
        .describe_topics(&["missing".to_string()])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(3));

    let configs = admin
        .describe_configs(ConfigResourceKind::Topic, &["t".to_string()])
        .await
        .unwrap();
    let entries = configs[0].1.as_ref().unwrap();
    let flags: Vec<(&str, bool)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.is_default))
        .collect();
    assert_eq!(flags, [("retention.ms", false), ("cleanup.policy", true)]);
}

#[tokio::test]
async fn describe_topics_parses_partitions_in_order() {
    let controller = Arc::new(AtomicI32::new(1));
    let state = Arc::new(Mutex::new(State::default()));
    state.lock().unwrap().topics = vec![MetadataResponseTopic::default()
        .with_name(Some(tn("t")))
        .with_partitions(vec![
            MetadataResponsePartition::default()
                .with_partition_index(1)
                .with_leader_id(BrokerId(-1))
                .with_replica_nodes(vec![BrokerId(2), BrokerId(1)])
                .with_isr_nodes(vec![]),
            MetadataResponsePartition::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                .with_isr_nodes(vec![BrokerId(1)]),
        ])];
    let broker = TestBroker::start(
        kafka_2_8_versions(),
        broker_handler(
            1,
            controller,
            Arc::new(AtomicBool::new(false)),
            Arc::clone(&state),
        ),
    )
    .await;
    state.lock().unwrap().addrs.push((1, broker.addr.clone()));
    let mut admin = AdminClient::connect(AdminOptions::new(&broker.addr))
        .await
        .unwrap();
    let topics = admin.describe_topics(&["t".to_string()]).await.unwrap();
    let partitions = &topics[0].partitions;
    assert_eq!(partitions[0].partition, 0);
    assert_eq!(partitions[0].leader, Some(1));
    assert_eq!(partitions[0].isr, [1]);
    assert_eq!(partitions[1].leader, None);
    assert_eq!(partitions[1].replicas, [2, 1]);
    assert_eq!(admin.list_topics().await.unwrap()[0].name, "t");
}

#[tokio::test]
async fn an_unreachable_controller_is_looked_up_again() {
    let cluster = cluster(3, kafka_2_8_versions()).await;
    // Broker 3 is in the metadata but its port is closed.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    cluster.state.lock().unwrap().addrs.push((3, dead_addr));
    let mut admin = AdminClient::connect(options(&cluster)).await.unwrap();
    assert_eq!(admin.controller_id(), Some(3));
    cluster.controller.store(2, Ordering::SeqCst);
    let results = admin.create_topics(&[new_topic("t")], false).await.unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(cluster.brokers[1].seen_versions(ApiKey::CreateTopics), [7]);
}
