//! Every API at every version ApiVersions advertises gets a well-formed answer: the request
//! at that version, the response decoded at that version, the connection kept.

mod common;

use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol::supported_range;

fn name(s: String) -> TopicName {
    TopicName(StrBytes::from_string(s))
}

fn versions(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let range = supported_range(api_key).unwrap();
    range.min_version..=range.max_version
}

#[tokio::test]
async fn topic_admin_and_config_apis_at_every_advertised_version() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["file.delete.delay.ms=100"]).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "versions")
        .await
        .unwrap();

    for version in versions(ApiKey::CreateTopics) {
        let topic = format!("v{version}");
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(topic.clone()))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
        let response = conn.send_version(request, version).await.unwrap();
        assert_eq!(response.topics[0].error_code, 0, "CreateTopics v{version}");
    }
    for version in versions(ApiKey::Metadata) {
        let request =
            MetadataRequest::default().with_topics(if version == 0 { Some(vec![]) } else { None });
        let response = conn.send_version(request, version).await.unwrap();
        assert!(!response.brokers.is_empty(), "Metadata v{version}");
    }
    for version in versions(ApiKey::CreatePartitions) {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("v0".to_string()))
                    .with_count(2 + i32::from(version))
                    .with_assignments(None),
            ]);
        let response = conn.send_version(request, version).await.unwrap();
        assert_eq!(
            response.results[0].error_code, 0,
            "CreatePartitions v{version}"
        );
    }
    for version in versions(ApiKey::DescribeConfigs) {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("v0")),
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("0")),
        ]);
        let response = conn.send_version(request, version).await.unwrap();
        assert!(
            response
                .results
                .iter()
                .all(|r| r.error_code == 0 && !r.configs.is_empty()),
            "v{version}"
        );
    }
    for version in versions(ApiKey::AlterConfigs) {
        let request = AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("v0"))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(Some(StrBytes::from_static_str("600001")))]),
        ]);
        let response = conn.send_version(request, version).await.unwrap();
        assert_eq!(
            response.responses[0].error_code, 0,
            "AlterConfigs v{version}"
        );
    }
    for version in versions(ApiKey::IncrementalAlterConfigs) {
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("v0"))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("segment.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_static_str("600001"))),
                ]),
        ]);
        let response = conn.send_version(request, version).await.unwrap();
        assert_eq!(
            response.responses[0].error_code, 0,
            "IncrementalAlterConfigs v{version}"
        );
    }
    for version in versions(ApiKey::DescribeCluster) {
        let response = conn
            .send_version(DescribeClusterRequest::default(), version)
            .await
            .unwrap();
        assert_eq!(response.brokers.len(), 1);
    }
    for version in versions(ApiKey::DescribeAcls) {
        let response = conn
            .send_version(DescribeAclsRequest::default(), version)
            .await
            .unwrap();
        assert_eq!(response.error_code, 54, "SECURITY_DISABLED at v{version}");
    }
    for version in versions(ApiKey::DeleteTopics) {
        let topic = name(format!("v{version}"));
        let request = if version >= 6 {
            DeleteTopicsRequest::default()
                .with_topics(vec![DeleteTopicState::default().with_name(Some(topic))])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![topic])
        };
        let response = conn
            .send_version(request.with_timeout_ms(10_000), version)
            .await
            .unwrap();
        assert_eq!(
            response.responses[0].error_code, 0,
            "DeleteTopics v{version}"
        );
    }
    broker.shutdown().await;
}
