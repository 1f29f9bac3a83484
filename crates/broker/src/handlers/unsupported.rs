//! Error responses for requests at an API or version we do not handle (Kafka's
//! `AbstractRequest.getErrorResponse`): every per-item error field of the API's own response
//! carries UNSUPPORTED_VERSION, so the client reads a refusal instead of losing its connection.
//! Every API of the version table has an entry (a test generated from the table checks it, and
//! sends each API one version past its row to a real broker); of the APIs Gregor does not
//! serve, those without an entry close the connection. Kafka 3.9 closes the connection for any
//! version it does not serve (`SocketServer.parseRequestHeader`), except ApiVersions, which it
//! answers in v0: Gregor answers instead (see docs/protocol-versions.md).

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
        RequestKind::ListTransactions(_) => ResponseKind::ListTransactions(
            ListTransactionsResponse::default().with_error_code(code),
        ),
        RequestKind::AddPartitionsToTxn(req) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn(req, code, version))
        }
        RequestKind::AddOffsetsToTxn(_) => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        RequestKind::EndTxn(_) => {
            ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(code))
        }
        RequestKind::TxnOffsetCommit(req) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit(req, code))
        }
        RequestKind::WriteTxnMarkers(req) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers(req, code))
        }
        RequestKind::DescribeTransactions(req) => ResponseKind::DescribeTransactions(
            DescribeTransactionsResponse::default().with_transaction_states(
                req.transactional_ids
                    .iter()
                    .map(|id| {
                        describe_transactions_response::TransactionState::default()
                            .with_transactional_id(id.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::LeaderAndIsr(_) => {
            ResponseKind::LeaderAndIsr(LeaderAndIsrResponse::default().with_error_code(code))
        }
        RequestKind::StopReplica(_) => {
            ResponseKind::StopReplica(StopReplicaResponse::default().with_error_code(code))
        }
        RequestKind::UpdateMetadata(_) => {
            ResponseKind::UpdateMetadata(UpdateMetadataResponse::default().with_error_code(code))
        }
        RequestKind::ControlledShutdown(_) => ResponseKind::ControlledShutdown(
            ControlledShutdownResponse::default().with_error_code(code),
        ),
        RequestKind::AlterPartition(_) => {
            ResponseKind::AlterPartition(AlterPartitionResponse::default().with_error_code(code))
        }
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default().with_error_code(code),
        ),
        RequestKind::AlterPartitionReassignments(_) => ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default().with_error_code(code),
        ),
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default().with_error_code(code),
        ),
        RequestKind::OffsetDelete(_) => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code))
        }
        RequestKind::DescribeClientQuotas(_) => ResponseKind::DescribeClientQuotas(
            DescribeClientQuotasResponse::default().with_error_code(code),
        ),
        RequestKind::DescribeUserScramCredentials(_) => {
            ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default().with_error_code(code),
            )
        }
        RequestKind::ConsumerGroupHeartbeat(_) => ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default().with_error_code(code),
        ),
        // v3+ have a top-level error; below, Kafka's error response is empty too.
        RequestKind::DescribeLogDirs(_) => ResponseKind::DescribeLogDirs(if version >= 3 {
            DescribeLogDirsResponse::default().with_error_code(code)
        } else {
            DescribeLogDirsResponse::default()
        }),
        RequestKind::OffsetCommit(req) => ResponseKind::OffsetCommit(offset_commit(req, code)),
        RequestKind::OffsetFetch(req) => {
            ResponseKind::OffsetFetch(offset_fetch(req, code, version))
        }
        RequestKind::DescribeGroups(req) => ResponseKind::DescribeGroups(
            DescribeGroupsResponse::default().with_groups(
                req.groups
                    .iter()
                    .map(|g| {
                        describe_groups_response::DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteGroups(req) => ResponseKind::DeleteGroups(
            DeleteGroupsResponse::default().with_results(
                req.groups_names
                    .iter()
                    .map(|g| {
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::ConsumerGroupDescribe(req) => ResponseKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse::default().with_groups(
                req.group_ids
                    .iter()
                    .map(|g| {
                        consumer_group_describe_response::DescribedGroup::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteRecords(req) => ResponseKind::DeleteRecords(delete_records(req, code)),
        RequestKind::OffsetForLeaderEpoch(req) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch(req, code))
        }
        RequestKind::ElectLeaders(req) => {
            ResponseKind::ElectLeaders(elect_leaders(req, code, version))
        }
        RequestKind::DescribeProducers(req) => {
            ResponseKind::DescribeProducers(describe_producers(req, code))
        }
        RequestKind::AlterClientQuotas(req) => ResponseKind::AlterClientQuotas(
            AlterClientQuotasResponse::default().with_entries(
                req.entries
                    .iter()
                    .map(|e| {
                        alter_client_quotas_response::EntryData::default()
                            .with_error_code(code)
                            .with_entity(
                                e.entity
                                    .iter()
                                    .map(|d| {
                                        alter_client_quotas_response::EntityData::default()
                                            .with_entity_type(d.entity_type.clone())
                                            .with_entity_name(d.entity_name.clone())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::AlterUserScramCredentials(req) => ResponseKind::AlterUserScramCredentials(
            AlterUserScramCredentialsResponse::default().with_results(
                req.deletions
                    .iter()
                    .map(|d| d.name.clone())
                    .chain(req.upsertions.iter().map(|u| u.name.clone()))
                    .map(|user| {
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                            .with_user(user)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::CreateAcls(req) => ResponseKind::CreateAcls(
            CreateAclsResponse::default().with_results(
                req.creations
                    .iter()
                    .map(|_| create_acls_response::AclCreationResult::default().with_error_code(code))
                    .collect(),
            ),
        ),
        RequestKind::DeleteAcls(req) => ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(
                req.filters
                    .iter()
                    .map(|_| {
                        delete_acls_response::DeleteAclsFilterResult::default()
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        _ => return None,
    };
    Some(response)
}

fn offset_commit(req: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    use offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    OffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn offset_fetch(req: &OffsetFetchRequest, code: i16, version: i16) -> OffsetFetchResponse {
    use offset_fetch_response::*;
    if version >= 8 {
        return OffsetFetchResponse::default().with_groups(
            req.groups
                .iter()
                .map(|g| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code)
                })
                .collect(),
        );
    }
    let topics = req
        .topics
        .iter()
        .flatten()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|&p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    let response = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        response.with_error_code(code)
    } else {
        response
    }
}

fn delete_records(req: &DeleteRecordsRequest, code: i16) -> DeleteRecordsResponse {
    use delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
    DeleteRecordsResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                DeleteRecordsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p.partition_index)
                                    .with_low_watermark(-1)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn offset_for_leader_epoch(
    req: &OffsetForLeaderEpochRequest,
    code: i16,
) -> OffsetForLeaderEpochResponse {
    use offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    OffsetForLeaderEpochResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetForLeaderTopicResult::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                EpochEndOffset::default()
                                    .with_partition(p.partition)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn elect_leaders(req: &ElectLeadersRequest, code: i16, version: i16) -> ElectLeadersResponse {
    use elect_leaders_response::{PartitionResult, ReplicaElectionResult};
    let results = req
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            PartitionResult::default()
                                .with_partition_id(p)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    let response = ElectLeadersResponse::default().with_replica_election_results(results);
    if version >= 1 {
        response.with_error_code(code)
    } else {
        response
    }
}

fn write_txn_markers(req: &WriteTxnMarkersRequest, code: i16) -> WriteTxnMarkersResponse {
    use write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    WriteTxnMarkersResponse::default().with_markers(
        req.markers
            .iter()
            .map(|m| {
                WritableTxnMarkerResult::default()
                    .with_producer_id(m.producer_id)
                    .with_topics(
                        m.topics
                            .iter()
                            .map(|t| {
                                WritableTxnMarkerTopicResult::default()
                                    .with_name(t.name.clone())
                                    .with_partitions(
                                        t.partition_indexes
                                            .iter()
                                            .map(|&p| {
                                                WritableTxnMarkerPartitionResult::default()
                                                    .with_partition_index(p)
                                                    .with_error_code(code)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn describe_producers(req: &DescribeProducersRequest, code: i16) -> DescribeProducersResponse {
    use describe_producers_response::{PartitionResponse, TopicResponse};
    DescribeProducersResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                TopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|&p| {
                                PartitionResponse::default()
                                    .with_partition_index(p)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
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

/// Every partition of the request (v0-3) with `code`, and `code` at the top (v4+).
fn add_partitions_to_txn(
    req: &AddPartitionsToTxnRequest,
    code: i16,
    version: i16,
) -> AddPartitionsToTxnResponse {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    if version >= 4 {
        return AddPartitionsToTxnResponse::default().with_error_code(code);
    }
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(
        req.v3_and_below_topics
            .iter()
            .map(|t| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(
                        t.partitions
                            .iter()
                            .map(|&p| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_partition_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn txn_offset_commit(req: &TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    use txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    TxnOffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
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
                ApiKey::ListTransactions,
                RequestKind::ListTransactions(ListTransactionsRequest::default()),
            ),
            (
                ApiKey::AddPartitionsToTxn,
                RequestKind::AddPartitionsToTxn(
                    AddPartitionsToTxnRequest::default().with_v3_and_below_topics(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![0]),
                    ]),
                ),
            ),
            (
                ApiKey::AddOffsetsToTxn,
                RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
            ),
            (
                ApiKey::EndTxn,
                RequestKind::EndTxn(EndTxnRequest::default()),
            ),
            (
                ApiKey::WriteTxnMarkers,
                RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                    write_txn_markers_request::WritableTxnMarker::default().with_topics(
                        vec![write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(topic())
                            .with_partition_indexes(vec![0])],
                    ),
                ])),
            ),
            (
                ApiKey::TxnOffsetCommit,
                RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default().with_topics(
                    vec![txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default(),
                        ])],
                )),
            ),
            (
                ApiKey::DescribeTransactions,
                RequestKind::DescribeTransactions(
                    DescribeTransactionsRequest::default().with_transactional_ids(vec![
                        TransactionalId(StrBytes::from_static_str("t")),
                    ]),
                ),
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
            (
                ApiKey::ControlledShutdown,
                RequestKind::ControlledShutdown(ControlledShutdownRequest::default()),
            ),
            (
                ApiKey::AlterPartition,
                RequestKind::AlterPartition(AlterPartitionRequest::default()),
            ),
            (
                ApiKey::SaslAuthenticate,
                RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default()),
            ),
            (
                ApiKey::AlterPartitionReassignments,
                RequestKind::AlterPartitionReassignments(
                    AlterPartitionReassignmentsRequest::default(),
                ),
            ),
            (
                ApiKey::ListPartitionReassignments,
                RequestKind::ListPartitionReassignments(
                    ListPartitionReassignmentsRequest::default(),
                ),
            ),
            (
                ApiKey::OffsetDelete,
                RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
            ),
            (
                ApiKey::DescribeClientQuotas,
                RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default()),
            ),
            (
                ApiKey::DescribeUserScramCredentials,
                RequestKind::DescribeUserScramCredentials(
                    DescribeUserScramCredentialsRequest::default(),
                ),
            ),
            (
                ApiKey::ConsumerGroupHeartbeat,
                RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default()),
            ),
            (
                ApiKey::DescribeLogDirs,
                RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
            ),
            (
                ApiKey::OffsetCommit,
                RequestKind::OffsetCommit(OffsetCommitRequest::default().with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default(),
                        ]),
                ])),
            ),
            (
                ApiKey::OffsetFetch,
                RequestKind::OffsetFetch(
                    OffsetFetchRequest::default()
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopic::default()
                                .with_name(topic())
                                .with_partition_indexes(vec![0]),
                        ]))
                        .with_groups(vec![
                            offset_fetch_request::OffsetFetchRequestGroup::default(),
                        ]),
                ),
            ),
            (
                ApiKey::DescribeGroups,
                RequestKind::DescribeGroups(
                    DescribeGroupsRequest::default().with_groups(vec![GroupId::default()]),
                ),
            ),
            (
                ApiKey::DeleteGroups,
                RequestKind::DeleteGroups(
                    DeleteGroupsRequest::default().with_groups_names(vec![GroupId::default()]),
                ),
            ),
            (
                ApiKey::ConsumerGroupDescribe,
                RequestKind::ConsumerGroupDescribe(
                    ConsumerGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId::default()]),
                ),
            ),
            (
                ApiKey::DeleteRecords,
                RequestKind::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
                    delete_records_request::DeleteRecordsTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default(),
                        ]),
                ])),
            ),
            (
                ApiKey::OffsetForLeaderEpoch,
                RequestKind::OffsetForLeaderEpoch(
                    OffsetForLeaderEpochRequest::default().with_topics(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                            .with_topic(topic())
                            .with_partitions(vec![
                                offset_for_leader_epoch_request::OffsetForLeaderPartition::default(
                                ),
                            ]),
                    ]),
                ),
            ),
            (
                ApiKey::ElectLeaders,
                RequestKind::ElectLeaders(ElectLeadersRequest::default().with_topic_partitions(
                    Some(vec![elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic())
                        .with_partitions(vec![0])]),
                )),
            ),
            (
                ApiKey::DescribeProducers,
                RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(
                    vec![describe_producers_request::TopicRequest::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0])],
                )),
            ),
            (
                ApiKey::AlterClientQuotas,
                RequestKind::AlterClientQuotas(
                    AlterClientQuotasRequest::default()
                        .with_entries(vec![alter_client_quotas_request::EntryData::default()]),
                ),
            ),
            (
                ApiKey::AlterUserScramCredentials,
                RequestKind::AlterUserScramCredentials(
                    AlterUserScramCredentialsRequest::default().with_deletions(vec![
                        alter_user_scram_credentials_request::ScramCredentialDeletion::default(),
                    ]),
                ),
            ),
            (
                ApiKey::CreateAcls,
                RequestKind::CreateAcls(
                    CreateAclsRequest::default()
                        .with_creations(vec![create_acls_request::AclCreation::default()]),
                ),
            ),
            (
                ApiKey::DeleteAcls,
                RequestKind::DeleteAcls(
                    DeleteAclsRequest::default()
                        .with_filters(vec![delete_acls_request::DeleteAclsFilter::default()]),
                ),
            ),
        ]
    }

    /// Versions whose response has no error field at all (Kafka's error response is empty
    /// there too).
    fn without_error_field(api_key: ApiKey, version: i16) -> bool {
        api_key == ApiKey::DescribeLogDirs && version < 3
    }

    #[test]
    fn every_api_of_the_table_has_an_error_response() {
        let samples = samples();
        for row in protocol::SUPPORTED_APIS {
            if row.api_key == ApiKey::ApiVersions {
                continue; // answered in v0 by the connection
            }
            let (_, request) = samples
                .iter()
                .find(|(key, _)| *key == row.api_key)
                .unwrap_or_else(|| panic!("{:?}: no sample request", row.api_key));
            assert!(
                error_response(request, row.max_version).is_some(),
                "{:?}: no error response",
                row.api_key
            );
        }
    }

    #[test]
    fn every_error_response_encodes_at_every_version_and_says_unsupported() {
        for (api_key, request) in samples() {
            let versions = api_key.valid_versions();
            for version in versions.min..=versions.max {
                if api_key == ApiKey::ConsumerGroupHeartbeat && version > 0 {
                    continue; // the codec knows v0 only (see protocol::kip848)
                }
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
                    text.contains("error_code: 35") || without_error_field(api_key, version),
                    "{api_key:?} v{version}: {text}"
                );
            }
        }
    }

    /// Black-box, generated from the version table: every API at one version past its row
    /// (and ApiVersions) sent to a real broker over TCP. Each gets an answer under the header
    /// of the version asked, with UNSUPPORTED_VERSION in its error fields (ApiVersions: Kafka's
    /// v0 fallback), never a closed connection: the same connection answers the next request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_version_past_every_row_is_answered_unsupported_by_a_real_broker() {
        use kafka_protocol::protocol::{Decodable, Encodable};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let dir = tempfile::tempdir().unwrap();
        let config = crate::BrokerConfig::load(
            None,
            &[
                "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
                "admin.listener=none".to_string(),
            ],
            dir.path(),
        )
        .unwrap();
        let store = crate::MetadataStore::from_config(&config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let broker = crate::Broker::start(config, store.clone(), Some(listener))
            .await
            .unwrap();
        let mut stream = tokio::net::TcpStream::connect(broker.local_addr())
            .await
            .unwrap();
        let samples = samples();
        let mut correlation_id = 0;
        for row in protocol::SUPPORTED_APIS {
            let api_key = row.api_key;
            let version = row.max_version + 1;
            let body_version = protocol::request::codec_version(api_key, version);
            let request = if api_key == ApiKey::ApiVersions {
                RequestKind::ApiVersions(ApiVersionsRequest::default())
            } else {
                samples
                    .iter()
                    .find(|(key, _)| *key == api_key)
                    .unwrap_or_else(|| panic!("{api_key:?}: no sample request"))
                    .1
                    .clone()
            };
            correlation_id += 1;
            let mut frame = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(api_key as i16)
                .with_request_api_version(version)
                .with_correlation_id(correlation_id)
                .with_client_id(Some(StrBytes::from_static_str("past-the-table")))
                .encode(&mut frame, api_key.request_header_version(version))
                .unwrap();
            let request = match request {
                // v8+ batch groups; below, one group's topics.
                RequestKind::OffsetFetch(mut r) => {
                    if body_version >= 8 {
                        r.topics = Some(Vec::new());
                    } else {
                        r.groups.clear();
                    }
                    RequestKind::OffsetFetch(r)
                }
                // v4+ batch keys; below, one key.
                RequestKind::FindCoordinator(mut r) => {
                    if body_version >= 4 {
                        r.key = StrBytes::default();
                    } else {
                        r.coordinator_keys.clear();
                    }
                    RequestKind::FindCoordinator(r)
                }
                // v4+ batch transactions; below, one.
                RequestKind::AddPartitionsToTxn(mut r) if body_version >= 4 => {
                    let topics = std::mem::take(&mut r.v3_and_below_topics);
                    r.transactions = vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                            .with_topics(topics),
                    ];
                    RequestKind::AddPartitionsToTxn(r)
                }
                // v6+ name topics in `topics` (by name or id).
                RequestKind::DeleteTopics(mut r) if body_version >= 6 => {
                    r.topics = std::mem::take(&mut r.topic_names)
                        .into_iter()
                        .map(|n| {
                            delete_topics_request::DeleteTopicState::default().with_name(Some(n))
                        })
                        .collect();
                    RequestKind::DeleteTopics(r)
                }
                other => other,
            };
            if api_key != ApiKey::ApiVersions {
                request
                    .encode(&mut frame, body_version)
                    .unwrap_or_else(|e| panic!("{api_key:?} v{body_version}: {e:#}"));
            }
            let mut sized = BytesMut::new();
            bytes::BufMut::put_i32(&mut sized, frame.len() as i32);
            sized.extend_from_slice(&frame);
            stream.write_all(&sized).await.unwrap();
            let mut size = [0u8; 4];
            tokio::time::timeout(
                std::time::Duration::from_secs(30),
                stream.read_exact(&mut size),
            )
            .await
            .unwrap_or_else(|_| panic!("{api_key:?} v{version}: no answer"))
            .unwrap_or_else(|e| panic!("{api_key:?} v{version}: connection closed: {e}"));
            let mut payload = vec![0u8; i32::from_be_bytes(size) as usize];
            stream.read_exact(&mut payload).await.unwrap();
            let mut payload = bytes::Bytes::from(payload);
            let (header_version, decode_version) = if api_key == ApiKey::ApiVersions {
                (0, 0)
            } else {
                (api_key.response_header_version(version), body_version)
            };
            let header = ResponseHeader::decode(&mut payload, header_version)
                .unwrap_or_else(|e| panic!("{api_key:?} v{version}: header: {e}"));
            assert_eq!(
                header.correlation_id, correlation_id,
                "{api_key:?} v{version}"
            );
            let decoded = ResponseKind::decode(api_key, &mut payload, decode_version)
                .unwrap_or_else(|e| panic!("{api_key:?} v{version}: body: {e}"));
            assert!(
                payload.is_empty(),
                "{api_key:?} v{version}: bytes left over"
            );
            let text = format!("{decoded:?}");
            assert!(
                text.contains("error_code: 35") || without_error_field(api_key, decode_version),
                "{api_key:?} v{version}: {text}"
            );
            if let ResponseKind::ApiVersions(r) = &decoded {
                // Kafka's fallback: its own ApiVersions row, so the client retries within it.
                assert_eq!(r.api_keys.len(), 1);
                assert_eq!(r.api_keys[0].max_version, row.max_version);
            }
        }
        broker.shutdown().await;
        store.close().await;
    }
}
