//! Issue 14: `/config/changes` notifications reach the broker through a watch, not a 1 s
//! poll: a topic config change is applied to the open log within a fraction of a second,
//! every time (with polling the median wait was about half the interval).

use crate::common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const MESSAGE_TOO_LARGE: i16 = 10;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn batch() -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(vec![b'c'; 2000])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn produce(conn: &mut Connection) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name("live"))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch())),
            ])]);
    conn.send(request).await.unwrap().responses[0].partition_responses[0].error_code
}

async fn set_max_message_bytes(conn: &mut Connection, value: &str) {
    let alter = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("live"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("max.message.bytes"))
                .with_value(Some(StrBytes::from_string(value.to_owned())))]),
    ]);
    assert_eq!(conn.send(alter).await.unwrap().responses[0].error_code, 0);
}

/// How long until produce answers `expected` (polling every 5 ms, at most 5 s).
async fn until(conn: &mut Connection, expected: i16) -> Duration {
    let started = Instant::now();
    while produce(conn).await != expected {
        assert!(started.elapsed() < Duration::from_secs(5), "never applied");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_config_changes_arrive_by_watch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "changes")
        .await
        .unwrap();
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name("live"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let mut ready = false;
    for _ in 0..500 {
        if produce(&mut conn).await == 0 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready);
    let mut waits = Vec::new();
    for _ in 0..5 {
        set_max_message_bytes(&mut conn, "100").await;
        waits.push(until(&mut conn, MESSAGE_TOO_LARGE).await);
        set_max_message_bytes(&mut conn, "1000000").await;
        waits.push(until(&mut conn, 0).await);
    }
    waits.sort();
    let median = waits[waits.len() / 2];
    eprintln!("config change applied after {waits:?}");
    assert!(
        median < Duration::from_millis(300),
        "median {median:?}: {waits:?}"
    );
    drop(conn);
    broker.shutdown().await;
}

/// Issue 11: the replication throttle rates are the broker configs that change without a
/// restart (IncrementalAlterConfigs / AlterConfigs on a BROKER resource); any other broker
/// key, another broker's id or a value that is not a byte rate is refused, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_replication_throttle_rates_are_dynamic_broker_configs() {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "throttle")
        .await
        .unwrap();
    let id = broker.broker_id().to_string();
    let alter = |name: &str, key: &'static str, value: &str| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_string(name.to_owned()))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(key))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.to_owned())))]),
        ])
    };
    let code = |r: IncrementalAlterConfigsResponse| {
        (
            r.responses[0].error_code,
            r.responses[0]
                .error_message
                .as_deref()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let ok = conn
        .send(alter(
            &id,
            "follower.replication.throttled.rate",
            "10000000",
        ))
        .await
        .unwrap();
    assert_eq!(code(ok).0, 0);
    let ok = conn
        .send(alter("", "leader.replication.throttled.rate", "5000000"))
        .await
        .unwrap();
    assert_eq!(code(ok).0, 0);
    // Kafka's refusals (INVALID_REQUEST, its messages): a config this broker cannot change
    // live, a value that is not a LONG, another broker's id.
    let (error, message) = code(
        conn.send(alter(&id, "log.retention.ms", "1"))
            .await
            .unwrap(),
    );
    assert_eq!(error, 42, "INVALID_REQUEST: {message}");
    assert!(
        message.ends_with("Cannot update these configs dynamically: Set(log.retention.ms)"),
        "{message}"
    );
    let (error, message) = code(
        conn.send(alter(&id, "leader.replication.throttled.rate", "fast"))
            .await
            .unwrap(),
    );
    assert_eq!(error, 42, "{message}");
    assert!(message.ends_with("Not a number of type LONG"), "{message}");
    let (error, message) = code(
        conn.send(alter("77", "leader.replication.throttled.rate", "1"))
            .await
            .unwrap(),
    );
    assert_eq!(error, 42, "INVALID_REQUEST: {message}");
    // DescribeConfigs shows them with Kafka's sources (2 DYNAMIC_BROKER_CONFIG this
    // broker's, 3 DYNAMIC_DEFAULT_BROKER_CONFIG the cluster default).
    let described = conn
        .send(DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_string(id.clone())),
            ]))
        .await
        .unwrap();
    let found = |key: &str| {
        described.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == key)
            .map(|c| {
                (
                    c.value.as_deref().unwrap_or_default().to_owned(),
                    c.config_source,
                    c.read_only,
                )
            })
    };
    assert_eq!(
        found("follower.replication.throttled.rate"),
        Some(("10000000".to_owned(), 2, false))
    );
    assert_eq!(
        found("leader.replication.throttled.rate"),
        Some(("5000000".to_owned(), 3, false))
    );
    // The cluster default (name "") answers only what /config/brokers/<default> sets.
    let default = conn
        .send(DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("")),
            ]))
        .await
        .unwrap();
    let entries: Vec<(String, Option<String>, i8)> = default.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()),
                c.config_source,
            )
        })
        .collect();
    assert_eq!(
        entries,
        vec![(
            "leader.replication.throttled.rate".to_owned(),
            Some("5000000".to_owned()),
            3
        )]
    );
}
