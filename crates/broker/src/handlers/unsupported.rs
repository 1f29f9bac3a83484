//! Error responses for requests at an API or version we do not handle (Kafka's
//! `AbstractRequest.getErrorResponse`): every per-item error field of the API's own response
//! carries UNSUPPORTED_VERSION, so the client reads a refusal instead of losing its connection.
//! APIs with no entry here close the connection, as Kafka does for requests it cannot parse.

use kafka_protocol::messages::*;

/// The API's own response with UNSUPPORTED_VERSION in every error field that `version` has,
/// or `None` for APIs without an entry.
pub(crate) fn error_response(request: &RequestKind, version: i16) -> Option<ResponseKind> {
    let code = kafka_protocol::error::ResponseError::UnsupportedVersion.code();
    let response = match request {
        RequestKind::Produce(req) => ResponseKind::Produce(produce(req, code)),
        RequestKind::Fetch(req) => ResponseKind::Fetch(fetch(req, code, version)),
        RequestKind::ListOffsets(req) => ResponseKind::ListOffsets(list_offsets(req, code)),
        RequestKind::FindCoordinator(req) => {
            ResponseKind::FindCoordinator(find_coordinator(req, code, version))
        }
        RequestKind::JoinGroup(_) => {
            ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(code))
        }
        RequestKind::SyncGroup(_) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::Heartbeat(_) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::ListGroups(_) => {
            ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(code))
        }
        RequestKind::SaslHandshake(_) => {
            ResponseKind::SaslHandshake(SaslHandshakeResponse::default().with_error_code(code))
        }
        RequestKind::InitProducerId(_) => {
            ResponseKind::InitProducerId(InitProducerIdResponse::default().with_error_code(code))
        }
        RequestKind::Metadata(req) => ResponseKind::Metadata(metadata(req, code)),
        RequestKind::CreateTopics(req) => ResponseKind::CreateTopics(create_topics(req, code)),
        RequestKind::DeleteTopics(req) => ResponseKind::DeleteTopics(delete_topics(req, code)),
        RequestKind::CreatePartitions(req) => {
            ResponseKind::CreatePartitions(create_partitions(req, code))
        }
        RequestKind::DescribeConfigs(req) => {
            ResponseKind::DescribeConfigs(describe_configs(req, code))
        }
        RequestKind::AlterConfigs(req) => ResponseKind::AlterConfigs(alter_configs(req, code)),
        RequestKind::IncrementalAlterConfigs(req) => {
            ResponseKind::IncrementalAlterConfigs(incremental_alter_configs(req, code))
        }
        RequestKind::DescribeCluster(_) => {
            ResponseKind::DescribeCluster(DescribeClusterResponse::default().with_error_code(code))
        }
        RequestKind::DescribeAcls(_) => {
            ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_error_code(code))
        }
        RequestKind::LeaderAndIsr(_) => {
            ResponseKind::LeaderAndIsr(LeaderAndIsrResponse::default().with_error_code(code))
        }
        RequestKind::StopReplica(_) => {
            ResponseKind::StopReplica(StopReplicaResponse::default().with_error_code(code))
        }
        RequestKind::UpdateMetadata(_) => {
            ResponseKind::UpdateMetadata(UpdateMetadataResponse::default().with_error_code(code))
        }
        _ => return None,
    };
    Some(response)
}

fn produce(req: &ProduceRequest, code: i16) -> ProduceResponse {
    use produce_response::{PartitionProduceResponse, TopicProduceResponse};
    ProduceResponse::default().with_responses(
        req.topic_data
            .iter()
            .map(|t| {
                TopicProduceResponse::default()
                    .with_name(t.name.clone())
                    .with_partition_responses(
                        t.partition_data
                            .iter()
                            .map(|p| {
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn fetch(req: &FetchRequest, code: i16, version: i16) -> FetchResponse {
    use fetch_response::{FetchableTopicResponse, PartitionData};
    let response = FetchResponse::default().with_responses(
        req.topics
            .iter()
            .map(|t| {
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    if version >= 7 {
        response.with_error_code(code)
    } else {
        response
    }
}

fn list_offsets(req: &ListOffsetsRequest, code: i16) -> ListOffsetsResponse {
    use list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    ListOffsetsResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn find_coordinator(
    req: &FindCoordinatorRequest,
    code: i16,
    version: i16,
) -> FindCoordinatorResponse {
    if version < 4 {
        return FindCoordinatorResponse::default().with_error_code(code);
    }
    FindCoordinatorResponse::default().with_coordinators(
        req.coordinator_keys
            .iter()
            .map(|key| {
                find_coordinator_response::Coordinator::default()
                    .with_key(key.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn metadata(req: &MetadataRequest, code: i16) -> MetadataResponse {
    MetadataResponse::default().with_topics(
        req.topics
            .iter()
            .flatten()
            .map(|t| {
                metadata_response::MetadataResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_topic_id(t.topic_id)
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn create_topics(req: &CreateTopicsRequest, code: i16) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                create_topics_response::CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn delete_topics(req: &DeleteTopicsRequest, code: i16) -> DeleteTopicsResponse {
    use delete_topics_response::DeletableTopicResult;
    let by_name = req.topic_names.iter().map(|n| {
        DeletableTopicResult::default()
            .with_name(Some(n.clone()))
            .with_error_code(code)
    });
    let by_state = req.topics.iter().map(|t| {
        DeletableTopicResult::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_error_code(code)
    });
    DeleteTopicsResponse::default().with_responses(by_name.chain(by_state).collect())
}

fn create_partitions(req: &CreatePartitionsRequest, code: i16) -> CreatePartitionsResponse {
    CreatePartitionsResponse::default().with_results(
        req.topics
            .iter()
            .map(|t| {
                create_partitions_response::CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn describe_configs(req: &DescribeConfigsRequest, code: i16) -> DescribeConfigsResponse {
    DescribeConfigsResponse::default().with_results(
        req.resources
            .iter()
            .map(|r| {
                describe_configs_response::DescribeConfigsResult::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn alter_configs(req: &AlterConfigsRequest, code: i16) -> AlterConfigsResponse {
    AlterConfigsResponse::default().with_responses(
        req.resources
            .iter()
            .map(|r| {
                alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

fn incremental_alter_configs(
    req: &IncrementalAlterConfigsRequest,
    code: i16,
) -> IncrementalAlterConfigsResponse {
    IncrementalAlterConfigsResponse::default().with_responses(
        req.resources
            .iter()
            .map(|r| {
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::StrBytes;

    fn topic() -> TopicName {
        TopicName(StrBytes::from_static_str("t"))
    }

    /// One request of each API with an entry, holding one item where it has item lists.
    fn samples() -> Vec<(ApiKey, RequestKind)> {
        vec![
            (
                ApiKey::Produce,
                RequestKind::Produce(ProduceRequest::default().with_topic_data(vec![
                        produce_request::TopicProduceData::default()
                            .with_name(topic())
                            .with_partition_data(vec![
                                produce_request::PartitionProduceData::default().with_index(1),
                            ]),
                    ])),
            ),
            (
                ApiKey::Fetch,
                RequestKind::Fetch(FetchRequest::default().with_topics(
                    vec![fetch_request::FetchTopic::default()
                        .with_topic(topic())
                        .with_partitions(vec![
                            fetch_request::FetchPartition::default().with_partition(1)
                        ])],
                )),
            ),
            (
                ApiKey::ListOffsets,
                RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                        list_offsets_request::ListOffsetsTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![
                                list_offsets_request::ListOffsetsPartition::default()
                                    .with_partition_index(1),
                            ]),
                    ])),
            ),
            (
                ApiKey::FindCoordinator,
                RequestKind::FindCoordinator(
                    FindCoordinatorRequest::default()
                        .with_key(StrBytes::from_static_str("g"))
                        .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
                ),
            ),
            (
                ApiKey::JoinGroup,
                RequestKind::JoinGroup(JoinGroupRequest::default()),
            ),
            (
                ApiKey::SyncGroup,
                RequestKind::SyncGroup(SyncGroupRequest::default()),
            ),
            (
                ApiKey::Heartbeat,
                RequestKind::Heartbeat(HeartbeatRequest::default()),
            ),
            (
                ApiKey::LeaveGroup,
                RequestKind::LeaveGroup(LeaveGroupRequest::default()),
            ),
            (
                ApiKey::ListGroups,
                RequestKind::ListGroups(ListGroupsRequest::default()),
            ),
            (
                ApiKey::SaslHandshake,
                RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
            ),
            (
                ApiKey::InitProducerId,
                RequestKind::InitProducerId(InitProducerIdRequest::default()),
            ),
            (
                ApiKey::Metadata,
                RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
                ]))),
            ),
            (
                ApiKey::CreateTopics,
                RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                    create_topics_request::CreatableTopic::default().with_name(topic()),
                ])),
            ),
            (
                ApiKey::DeleteTopics,
                RequestKind::DeleteTopics(
                    DeleteTopicsRequest::default().with_topic_names(vec![topic()]),
                ),
            ),
            (
                ApiKey::CreatePartitions,
                RequestKind::CreatePartitions(CreatePartitionsRequest::default().with_topics(
                    vec![
                    create_partitions_request::CreatePartitionsTopic::default().with_name(topic()),
                ],
                )),
            ),
            (
                ApiKey::DescribeConfigs,
                RequestKind::DescribeConfigs(DescribeConfigsRequest::default().with_resources(
                    vec![
                        describe_configs_request::DescribeConfigsResource::default()
                            .with_resource_type(2),
                    ],
                )),
            ),
            (
                ApiKey::AlterConfigs,
                RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
                    alter_configs_request::AlterConfigsResource::default().with_resource_type(2),
                ])),
            ),
            (
                ApiKey::IncrementalAlterConfigs,
                RequestKind::IncrementalAlterConfigs(
                    IncrementalAlterConfigsRequest::default().with_resources(vec![
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2),
                    ]),
                ),
            ),
            (
                ApiKey::DescribeCluster,
                RequestKind::DescribeCluster(DescribeClusterRequest::default()),
            ),
            (
                ApiKey::DescribeAcls,
                RequestKind::DescribeAcls(DescribeAclsRequest::default()),
            ),
            (
                ApiKey::LeaderAndIsr,
                RequestKind::LeaderAndIsr(LeaderAndIsrRequest::default()),
            ),
            (
                ApiKey::StopReplica,
                RequestKind::StopReplica(StopReplicaRequest::default()),
            ),
            (
                ApiKey::UpdateMetadata,
                RequestKind::UpdateMetadata(UpdateMetadataRequest::default()),
            ),
        ]
    }

    #[test]
    fn every_error_response_encodes_at_every_version_and_says_unsupported() {
        for (api_key, request) in samples() {
            let versions = api_key.valid_versions();
            for version in versions.min..=versions.max {
                let response = error_response(&request, version).unwrap();
                let mut buf = BytesMut::new();
                response
                    .encode(&mut buf, version)
                    .unwrap_or_else(|e| panic!("{api_key:?} v{version}: {e}"));
                let mut bytes = buf.freeze();
                let decoded = ResponseKind::decode(api_key, &mut bytes, version)
                    .unwrap_or_else(|e| panic!("{api_key:?} v{version}: {e}"));
                let text = format!("{decoded:?}");
                assert!(
                    text.contains("error_code: 35"),
                    "{api_key:?} v{version}: {text}"
                );
            }
        }
    }
}
