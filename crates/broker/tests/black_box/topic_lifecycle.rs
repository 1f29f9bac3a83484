//! Topics end to end on one broker: create (logs with partition.metadata), configs, delete
//! (rename to -delete, then removal), restart keeps everything.

use crate::common;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// The partition directories (and `-delete` directories) in `dir`; the per-dir checkpoint
/// files beside them are left out.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.map(|e| e.unwrap())
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

async fn connect(broker: &broker::Broker) -> Connection {
    eventually("broker becomes controller", || broker.is_controller()).await;
    Connection::connect(&broker.local_addr().to_string(), "lifecycle-test")
        .await
        .unwrap()
}

async fn create(
    conn: &mut Connection,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )]);
    conn.send(request).await.unwrap().topics[0].error_code
}

async fn metadata(conn: &mut Connection, topic: &str) -> metadata_response::MetadataResponseTopic {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    conn.send(request).await.unwrap().topics.remove(0)
}

#[tokio::test]
async fn create_then_delete_renames_and_removes_logs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(
        dir.path(),
        &[
            "file.delete.delay.ms=300",
            "auto.create.topics.enable=false",
        ],
    )
    .await;
    let mut conn = connect(&broker).await;
    assert_eq!(create(&mut conn, "orders", 3, &[]).await, 0);
    let logs = dir.path().join("logs");
    eventually("three partition logs", || {
        entries(&logs) == ["orders-0", "orders-1", "orders-2"]
    })
    .await;

    let mut topic = metadata(&mut conn, "orders").await;
    for _ in 0..100 {
        if topic.partitions.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        topic = metadata(&mut conn, "orders").await;
    }
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), 3);
    assert!(topic
        .partitions
        .iter()
        .all(|p| p.leader_id.0 == 0 && p.isr_nodes.len() == 1));
    let topic_id =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(topic.topic_id.as_bytes());
    let partition_metadata =
        std::fs::read_to_string(logs.join("orders-1").join("partition.metadata")).unwrap();
    assert_eq!(
        partition_metadata,
        format!("version: 0\ntopic_id: {topic_id}\n")
    );

    let response = conn
        .send_version(
            DeleteTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topic_names(vec![name("orders")]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(response.responses[0].error_code, 0);
    eventually("logs renamed to -delete", || {
        let names = entries(&logs);
        names.len() == 3
            && names
                .iter()
                .all(|n| n.starts_with("orders-") && n.ends_with("-delete"))
    })
    .await;
    eventually("renamed logs removed after file.delete.delay.ms", || {
        entries(&logs).is_empty()
    })
    .await;
    assert_eq!(metadata(&mut conn, "orders").await.error_code, 3);

    // The same name can be created again.
    assert_eq!(create(&mut conn, "orders", 1, &[]).await, 0);
    eventually("re-created log", || entries(&logs) == ["orders-0"]).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn topic_configs_describe_alter_and_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["log.retention.ms=1234"]).await;
    let mut conn = connect(&broker).await;
    assert_eq!(
        create(&mut conn, "cfg", 1, &[("segment.ms", "600001")]).await,
        0
    );

    let describe = |keys: Option<Vec<&'static str>>| {
        DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("cfg"))
                    .with_configuration_keys(
                        keys.map(|k| k.into_iter().map(StrBytes::from_static_str).collect()),
                    ),
            ])
    };
    let response = conn
        .send(describe(Some(vec![
            "segment.ms",
            "retention.ms",
            "cleanup.policy",
        ])))
        .await
        .unwrap();
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    let get = |n: &str| {
        result
            .configs
            .iter()
            .find(|c| c.name.as_str() == n)
            .unwrap()
            .clone()
    };
    assert_eq!(get("segment.ms").value.as_deref(), Some("600001"));
    assert_eq!(get("segment.ms").config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    assert_eq!(get("retention.ms").value.as_deref(), Some("1234"));
    assert_eq!(get("retention.ms").config_source, 4, "STATIC_BROKER_CONFIG");
    assert_eq!(
        get("retention.ms").synonyms[0].name.as_str(),
        "log.retention.ms"
    );
    assert_eq!(get("cleanup.policy").config_source, 5, "DEFAULT_CONFIG");

    let incremental = |ops: Vec<(&'static str, i8, Option<&'static str>)>| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("cfg"))
                .with_configs(
                    ops.into_iter()
                        .map(|(k, op, v)| {
                            incremental_alter_configs_request::AlterableConfig::default()
                                .with_name(StrBytes::from_static_str(k))
                                .with_config_operation(op)
                                .with_value(v.map(StrBytes::from_static_str))
                        })
                        .collect(),
                ),
        ])
    };
    let response = conn
        .send(incremental(vec![("retention.ms", 0, Some("abc"))]))
        .await
        .unwrap();
    assert_eq!(response.responses[0].error_code, 40, "INVALID_CONFIG");
    assert!(response.responses[0]
        .error_message
        .as_deref()
        .unwrap()
        .contains("retention.ms"));
    let response = conn
        .send(incremental(vec![
            ("retention.ms", 0, Some("600001")),
            ("segment.ms", 1, None),
        ]))
        .await
        .unwrap();
    assert_eq!(response.responses[0].error_code, 0);
    let response = conn
        .send(describe(Some(vec!["segment.ms", "retention.ms"])))
        .await
        .unwrap();
    let configs = &response.results[0].configs;
    assert_eq!(
        configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .unwrap()
            .value
            .as_deref(),
        Some("600001")
    );
    assert_eq!(
        configs
            .iter()
            .find(|c| c.name.as_str() == "segment.ms")
            .unwrap()
            .config_source,
        5
    );

    // Legacy AlterConfigs replaces the whole set.
    let response = conn
        .send(AlterConfigsRequest::default().with_resources(
            vec![alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("cfg"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("max.message.bytes"))
                .with_value(Some(StrBytes::from_static_str("2000")))])],
        ))
        .await
        .unwrap();
    assert_eq!(response.responses[0].error_code, 0);
    let response = conn.send(describe(None)).await.unwrap();
    let overridden: Vec<&str> = response.results[0]
        .configs
        .iter()
        .filter(|c| c.config_source == 1)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(overridden, ["max.message.bytes"]);

    let missing = conn
        .send(DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("nope")),
        ]))
        .await
        .unwrap();
    assert_eq!(missing.results[0].error_code, 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn restart_keeps_topics_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store) = start_broker_and_store(dir.path(), &[]).await;
    let cluster_id = broker.cluster_id().to_string();
    let mut conn = connect(&broker).await;
    assert_eq!(create(&mut conn, "kept", 2, &[]).await, 0);
    let logs = dir.path().join("logs");
    eventually("logs", || entries(&logs) == ["kept-0", "kept-1"]).await;
    drop(conn);
    broker.shutdown().await;
    store.close().await;

    let broker = start_broker(dir.path(), &[]).await;
    assert_eq!(broker.cluster_id(), cluster_id);
    let mut conn = connect(&broker).await;
    let mut topic = metadata(&mut conn, "kept").await;
    for _ in 0..100 {
        if topic.partitions.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        topic = metadata(&mut conn, "kept").await;
    }
    assert_eq!(topic.partitions.len(), 2);
    assert_eq!(
        create(&mut conn, "kept", 1, &[]).await,
        36,
        "TOPIC_ALREADY_EXISTS"
    );
    assert_eq!(entries(&logs), ["kept-0", "kept-1"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn metadata_auto_creates_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["num.partitions=2"]).await;
    let mut conn = connect(&broker).await;
    let first = metadata(&mut conn, "auto").await;
    assert_eq!(
        first.error_code, 5,
        "LEADER_NOT_AVAILABLE while it is created"
    );
    let mut topic = first;
    for _ in 0..200 {
        if topic.error_code == 0 && topic.partitions.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        topic = metadata(&mut conn, "auto").await;
    }
    assert_eq!(topic.partitions.len(), 2);
    broker.shutdown().await;
}
