//! Partition reassignment between real in-process brokers over the wire
//! (AlterPartitionReassignments / ListPartitionReassignments, KIP-455): a move that copies the
//! data to the new replica and deletes the old one, Kafka's refusals (nothing changes), a
//! target on a broker that is down (it waits, CreatePartitions is refused meanwhile) and a
//! cancellation, and `/admin/reassign_partitions` run and deleted when done.

use crate::common;

use std::time::Duration;

use broker::{Broker, MetadataStore};
use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const REASSIGNMENT_IN_PROGRESS: i16 = 60;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn batch(n: usize, tag: &str) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Consecutive sequences keep the records in one batch.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn within<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

async fn connect(broker: &Broker) -> Connection {
    Connection::connect(&broker.local_addr().to_string(), "reassignment-test")
        .await
        .unwrap()
}

fn log_dir(dir: &std::path::Path, id: i32) -> std::path::PathBuf {
    dir.join(format!("broker-{id}/logs"))
}

async fn start_id(store: &MetadataStore, dir: &std::path::Path, id: i32) -> Broker {
    let overrides = [
        format!("broker.id={id}"),
        format!("log.dirs={}", log_dir(dir, id).display()),
        "replica.fetch.wait.max.ms=100".to_owned(),
        "replica.fetch.backoff.ms=100".to_owned(),
    ];
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    start_on(store.clone(), dir, &overrides).await
}

fn alter(
    topic: &str,
    partition: i32,
    replicas: Option<&[i32]>,
) -> AlterPartitionReassignmentsRequest {
    AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            alter_partition_reassignments_request::ReassignableTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    alter_partition_reassignments_request::ReassignablePartition::default()
                        .with_partition_index(partition)
                        .with_replicas(replicas.map(|r| r.iter().map(|&b| BrokerId(b)).collect())),
                ]),
        ])
}

/// (error code, message) of the one partition of an AlterPartitionReassignments answer.
async fn reassign(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    replicas: Option<&[i32]>,
) -> (i16, String) {
    let response = conn.send(alter(topic, partition, replicas)).await.unwrap();
    assert_eq!(response.error_code, NONE, "{response:?}");
    let p = &response.responses[0].partitions[0];
    (
        p.error_code,
        p.error_message.as_deref().unwrap_or("").to_owned(),
    )
}

/// (replicas, adding, removing) of every partition being moved.
async fn listed(conn: &mut Connection) -> Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)> {
    let response = conn
        .send(ListPartitionReassignmentsRequest::default().with_timeout_ms(10_000))
        .await
        .unwrap();
    assert_eq!(response.error_code, NONE);
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

/// (leader, replicas, isr) of a partition in a broker's Metadata answer.
async fn metadata(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    let response = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
        ])))
        .await
        .ok()?;
    let p = response
        .topics
        .first()?
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Some((
        p.leader_id.0,
        p.replica_nodes.iter().map(|b| b.0).collect(),
        isr,
    ))
}

async fn produce(conn: &mut Connection, topic: &str, n: usize, tag: &str) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(15_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(n, tag))),
            ])]);
    let response = conn.send_version(request, 8).await.unwrap();
    response.responses[0].partition_responses[0].error_code
}

async fn consume(conn: &mut Connection, topic: &str) -> (i16, Vec<String>) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response = conn.send_version(request, 12).await.unwrap();
    let p = &response.responses[0].partitions[0];
    let mut values = Vec::new();
    let mut buf = p.records.clone().unwrap_or_default();
    while !buf.is_empty() {
        for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
            values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    (p.error_code, values)
}

async fn create(conn: &mut Connection, topic: &str, replicas: &[i32]) {
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_assignments(vec![CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(
                            replicas.iter().map(|&b| BrokerId(b)).collect(),
                        )])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, NONE, "{created:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moves_to_new_brokers_and_kafkas_refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = MetadataStore::from_config(&config(dir.path(), &[])).unwrap();
    let b1 = start_id(&store, dir.path(), 1).await;
    let b2 = start_id(&store, dir.path(), 2).await;
    let b3 = start_id(&store, dir.path(), 3).await;
    let brokers = [&b1, &b2, &b3];
    within(10, "a controller", || async {
        brokers.iter().filter(|b| b.is_controller()).count() == 1
    })
    .await;
    let controller = *brokers.iter().find(|b| b.is_controller()).unwrap();
    let mut admin = connect(controller).await;
    create(&mut admin, "mv", &[1, 2]).await;
    let mut to_1 = connect(&b1).await;
    within(10, "the leader serves", || {
        let addr = b1.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            consume(&mut c, "mv").await.0 == NONE
        }
    })
    .await;
    assert_eq!(produce(&mut to_1, "mv", 50, "before").await, NONE);

    // Refusals, each with Kafka's code, none changing anything.
    for (replicas, code, needle) in [
        (vec![], INVALID_REPLICA_ASSIGNMENT, "Empty replica list"),
        (
            vec![2, 2],
            INVALID_REPLICA_ASSIGNMENT,
            "Duplicate replica ids",
        ),
        (vec![2, 99], INVALID_REPLICA_ASSIGNMENT, "[99]"),
    ] {
        let (error, message) = reassign(&mut admin, "mv", 0, Some(&replicas)).await;
        assert_eq!(error, code, "{replicas:?}: {message}");
        assert!(message.contains(needle), "{message}");
    }
    assert_eq!(
        reassign(&mut admin, "mv", 5, Some(&[1])).await.0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        reassign(&mut admin, "nope", 0, Some(&[1])).await.0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        reassign(&mut admin, "mv", 0, None).await.0,
        NO_REASSIGNMENT_IN_PROGRESS
    );
    assert!(listed(&mut admin).await.is_empty());
    assert_eq!(metadata(&mut admin, "mv", 0).await.unwrap().1, vec![1, 2]);

    // {1,2} -> {2,3}: 3 copies the data, 1 leaves (and its log goes).
    assert_eq!(
        reassign(&mut admin, "mv", 0, Some(&[2, 3])).await,
        (NONE, String::new())
    );
    within(30, "the move completes", || {
        let addr = controller.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            listed(&mut c).await.is_empty()
                && metadata(&mut c, "mv", 0)
                    .await
                    .is_some_and(|(_, r, isr)| r == vec![2, 3] && isr == vec![2, 3])
        }
    })
    .await;
    let (leader, _, _) = metadata(&mut admin, "mv", 0).await.unwrap();
    assert_eq!(leader, 2, "the leader moved into the target");
    let mut to_2 = connect(&b2).await;
    assert_eq!(produce(&mut to_2, "mv", 10, "after").await, NONE);
    let (code, values) = consume(&mut to_2, "mv").await;
    assert_eq!(code, NONE);
    assert_eq!(values.len(), 60, "nothing acknowledged is lost");
    assert_eq!(values[0], "before-0");
    within(10, "the old replica's log is deleted", || async {
        !log_dir(dir.path(), 1).join("mv-0").exists()
    })
    .await;
    assert!(log_dir(dir.path(), 3).join("mv-0").exists());

    // A target on a broker that is down (known: it ran): the move waits, says so, and the
    // topic refuses new partitions until it ends; cancelling puts the replicas back.
    // Broker 1 holds nothing now; it stops (a controller there moves to another broker).
    let stopped_id = 1;
    let stay = b3;
    b1.shutdown().await;
    within(10, "the broker is gone", || {
        let addr = b2.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            let r = c
                .send(MetadataRequest::default().with_topics(Some(vec![])))
                .await
                .unwrap();
            r.brokers.iter().all(|b| b.node_id.0 != stopped_id) && r.controller_id.0 != stopped_id
        }
    })
    .await;
    within(10, "a controller", || async {
        b2.is_controller() || stay.is_controller()
    })
    .await;
    let controller = [&b2, &stay]
        .into_iter()
        .find(|b| b.is_controller())
        .expect("a controller");
    let mut admin = connect(controller).await;
    let target = [2, stopped_id];
    assert_eq!(reassign(&mut admin, "mv", 0, Some(&target)).await.0, NONE);
    let moving = listed(&mut admin).await;
    let origin_other = 3; // mv is on {2,3} now
    assert_eq!(moving.len(), 1, "{moving:?}");
    assert_eq!(moving[0].3, vec![stopped_id], "adding: {moving:?}");
    let growing = admin
        .send(
            CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(name("mv"))
                        .with_count(2)
                        .with_assignments(None),
                ]),
        )
        .await
        .unwrap();
    assert_eq!(growing.results[0].error_code, REASSIGNMENT_IN_PROGRESS);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        listed(&mut admin).await.len(),
        1,
        "still waiting for broker {stopped_id}"
    );
    assert_eq!(reassign(&mut admin, "mv", 0, None).await.0, NONE);
    assert!(listed(&mut admin).await.is_empty());
    // The cancel is answered once the controller wrote it (as Kafka's); the brokers' metadata
    // follows a moment later.
    within(10, "back to the original replicas", || {
        let addr = controller.local_addr().to_string();
        async move {
            let mut c = Connection::connect(&addr, "t").await.unwrap();
            metadata(&mut c, "mv", 0)
                .await
                .is_some_and(|(_, replicas, _)| {
                    let mut sorted = replicas.clone();
                    sorted.sort_unstable();
                    sorted == vec![2, origin_other]
                })
        }
    })
    .await;

    // /admin/reassign_partitions, written by hand: run, then deleted.
    let (client, events) = match &store {
        MetadataStore::Embedded(e) => e.connect(metastore::SessionOptions {
            session_timeout: Duration::from_secs(30),
        }),
        _ => unreachable!(),
    };
    let zk = znodes::zk_client::KafkaZkClient::new(client, events);
    zk.client()
        .create(
            znodes::paths::reassign_partitions(),
            br#"{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[3,2]}]}"#,
            metastore::CreateMode::Persistent,
        )
        .await
        .unwrap();
    within(
        30,
        "the znode's reassignment runs and the znode goes",
        || {
            let addr = controller.local_addr().to_string();
            let zk = zk.clone();
            async move {
                let mut c = Connection::connect(&addr, "t").await.unwrap();
                metadata(&mut c, "mv", 0)
                    .await
                    .is_some_and(|(_, r, _)| r == vec![3, 2])
                    && zk
                        .get_partition_reassignment(false)
                        .await
                        .unwrap()
                        .is_none()
            }
        },
    )
    .await;

    // A hand edit of an existing partition's replicas is put back (Kafka 2.4+ moves
    // replicas only through the API or /admin/reassign_partitions).
    let mv: model::TopicName = "mv".parse().unwrap();
    let mut edited = zk
        .get_topic_assignment(&mv, false)
        .await
        .unwrap()
        .unwrap()
        .assignment;
    edited.partitions.insert(0, vec![2]);
    zk.set_topic_assignment(&mv, &edited, None, None)
        .await
        .unwrap();
    within(10, "the hand edit is reverted", || {
        let zk = zk.clone();
        let mv = mv.clone();
        async move {
            zk.get_topic_assignment(&mv, false)
                .await
                .unwrap()
                .unwrap()
                .assignment
                .partitions[&0]
                == vec![3, 2]
        }
    })
    .await;
    assert_eq!(metadata(&mut admin, "mv", 0).await.unwrap().1, vec![3, 2]);
    stay.shutdown().await;
    b2.shutdown().await;
}
