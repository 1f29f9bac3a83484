//! One file per API and one `match` to route (Kafka's `KafkaApis.handle`).

mod acls;
mod alter_configs;
mod alter_partition;
mod alter_partition_reassignments;
pub(crate) mod api_versions;
mod client_quotas;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod controlled_shutdown;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod elect_leaders;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod join_group;
mod leader_and_isr;
mod leave_group;
mod list_groups;
mod list_partition_reassignments;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod sasl;
mod stop_replica;
mod sync_group;
mod transactions;
pub(crate) mod unsupported;
mod update_metadata;
mod user_scram_credentials;
mod write_txn_markers;

mod delete_records;
mod fetch;
pub(crate) mod init_producer_id;
mod list_offsets;
mod produce;

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use crate::auth::RequestContext;
use std::sync::Arc;

use crate::context::BrokerContext;
use crate::metadata_cache::{LiveBroker, Snapshot};

/// KIP-951's hint for a client that reached a broker which does not lead a partition
/// (Produce v10+, Fetch v16+): the leader and leader epoch the metadata cache has now, and the
/// leader's endpoint when it is a live broker. (-1, -1, None) for an unknown partition.
pub(crate) fn current_leader<'a>(
    snapshot: &'a Snapshot,
    topic: &str,
    partition: i32,
) -> (i32, i32, Option<&'a LiveBroker>) {
    match snapshot
        .topics
        .get(topic)
        .and_then(|t| t.partitions.get(&partition))
    {
        Some(info) => (
            info.leader,
            info.leader_epoch,
            snapshot.brokers.get(&info.leader),
        ),
        None => (-1, -1, None),
    }
}

/// KIP-951's `node_endpoints` as clients of `listener` reach those brokers (Kafka answers with
/// the endpoints of the listener the request came in on): each leader's host and port there,
/// or left out when it has no such listener (its id and epoch stay in `current_leader`).
/// Produce and Fetch have their own `NodeEndpoint` types with the same fields.
macro_rules! endpoints_on_listener {
    ($ctx:expr, $listener:expr, $endpoints:expr) => {
        if !$endpoints.is_empty() {
            let snapshot = $ctx.metadata_cache.snapshot();
            $endpoints.retain_mut(|e| {
                match snapshot
                    .brokers
                    .get(&e.node_id.0)
                    .and_then(|b| b.on_listener($listener))
                {
                    Some(b) => {
                        e.host = kafka_protocol::protocol::StrBytes::from_string(b.host);
                        e.port = b.port;
                        true
                    }
                    None => false,
                }
            });
        }
    };
}

/// Refuses a control request from a KRaft controller (`isKRaftController`, LeaderAndIsr v7+,
/// StopReplica v4+, UpdateMetadata v8+; KIP-866). Only a broker migrating from ZooKeeper to
/// KRaft accepts one; Gregor has no migration, and Kafka 3.9's ZooKeeper broker without it
/// fails such a request (an IllegalStateException, UNKNOWN_SERVER_ERROR), as here.
pub(crate) fn refuse_kraft_controller(
    api: &str,
    is_kraft_controller: bool,
) -> Result<(), kafka_protocol::error::ResponseError> {
    if !is_kraft_controller {
        return Ok(());
    }
    tracing::warn!(
        api,
        "refusing a control request from a KRaft controller: this broker runs in ZooKeeper mode \
         and has no KRaft migration (KIP-866)"
    );
    Err(kafka_protocol::error::ResponseError::UnknownServerError)
}

/// Whether the request's principal may do `operation` on a resource (always, without an
/// authorizer).
pub(crate) fn authorized(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
    resource_type: security::acl::ResourceType,
    name: &str,
) -> bool {
    ctx.authorizer
        .as_ref()
        .is_none_or(|a| a.authorize(rctx, operation, resource_type, name))
}

/// [`authorized`] on the cluster resource.
pub(crate) fn authorized_cluster(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
) -> bool {
    authorized(
        ctx,
        rctx,
        operation,
        security::acl::ResourceType::Cluster,
        security::acl::CLUSTER_NAME,
    )
}

/// Splits `items` into those whose topic (`topic_of`) the principal may do `operation` on
/// and those it may not (Kafka's `partitionSeqByAuthorized`). Each distinct topic is asked
/// once.
pub(crate) fn split_authorized_topics<T>(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
    items: Vec<T>,
    topic_of: impl Fn(&T) -> &str,
) -> (Vec<T>, Vec<T>) {
    if ctx.authorizer.is_none() {
        return (items, Vec::new());
    }
    let mut decided: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    let mut allowed = Vec::new();
    let mut denied = Vec::new();
    for item in items {
        let topic = topic_of(&item);
        let ok = match decided.get(topic) {
            Some(ok) => *ok,
            None => {
                let ok = authorized(
                    ctx,
                    rctx,
                    operation,
                    security::acl::ResourceType::Topic,
                    topic,
                );
                decided.insert(topic.to_string(), ok);
                ok
            }
        };
        if ok {
            allowed.push(item);
        } else {
            denied.push(item);
        }
    }
    (allowed, denied)
}

/// The topics among `topics` the principal may not do `operation` on (empty without an
/// authorizer).
pub(crate) fn denied_topics<'a>(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
    topics: impl Iterator<Item = &'a str>,
) -> std::collections::HashSet<String> {
    if ctx.authorizer.is_none() {
        return Default::default();
    }
    topics
        .filter(|t| !authorized(ctx, rctx, operation, security::acl::ResourceType::Topic, t))
        .map(str::to_string)
        .collect()
}

/// [`authorized`] on a consumer group.
pub(crate) fn authorized_group(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
    group: &str,
) -> bool {
    authorized(
        ctx,
        rctx,
        operation,
        security::acl::ResourceType::Group,
        group,
    )
}

/// The refusal of a DescribeConfigs/AlterConfigs resource the principal may not touch:
/// `operation` on the topic (TOPIC_AUTHORIZATION_FAILED) or, for brokers and broker loggers,
/// on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's config handlers.
pub(crate) fn config_refusal(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    operation: security::acl::Operation,
    resource_type: i8,
    name: &str,
) -> Option<(kafka_protocol::error::ResponseError, String)> {
    use kafka_protocol::error::ResponseError;
    ctx.authorizer.as_ref()?;
    let error = match resource_type {
        2 if !authorized(
            ctx,
            rctx,
            operation,
            security::acl::ResourceType::Topic,
            name,
        ) =>
        {
            ResponseError::TopicAuthorizationFailed
        }
        4 | 8 if !authorized_cluster(ctx, rctx, operation) => {
            ResponseError::ClusterAuthorizationFailed
        }
        _ => return None,
    };
    Some((error, error.to_string()))
}

/// KIP-430's authorized operations of a resource: a bit (1 << code) for each operation of
/// its type the principal may do (all of them without an authorizer), as Kafka's
/// `authorizedOperations`.
pub(crate) fn authorized_operations(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    resource_type: security::acl::ResourceType,
    name: &str,
) -> i32 {
    resource_type
        .supported_operations()
        .unwrap_or(&[])
        .iter()
        .filter(|op| authorized(ctx, rctx, **op, resource_type, name))
        .fold(0, |bits, op| bits | (1 << op.code()))
}

/// Kafka's GROUP_AUTHORIZATION_FAILED.
pub(crate) const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// Kafka's TOPIC_AUTHORIZATION_FAILED.
pub(crate) const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// Kafka's CLUSTER_AUTHORIZATION_FAILED.
pub(crate) const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// Handles one decoded request of a supported API and version; the time its handler runs
/// counts against the client's `request_percentage` quota (except for the requests Kafka
/// exempts), whose throttle goes into the answer.
pub(crate) async fn handle(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: RequestKind,
) -> ResponseKind {
    let exempt = request_quota_exempt(&request, header.request_api_version);
    crate::quotas::timed(async {
        let mut response = dispatch(ctx, rctx, header, request).await;
        if !exempt {
            let throttle = crate::quotas::throttle_request(ctx, rctx, header);
            if throttle > 0 {
                crate::quotas::set_response_throttle(&mut response, throttle);
            }
        }
        response
    })
    .await
}

/// The requests Kafka answers with `sendResponseExemptThrottle`: the controller's and
/// other brokers' (a follower's Fetch).
fn request_quota_exempt(request: &RequestKind, version: i16) -> bool {
    match request {
        RequestKind::LeaderAndIsr(_)
        | RequestKind::UpdateMetadata(_)
        | RequestKind::StopReplica(_)
        | RequestKind::ControlledShutdown(_)
        | RequestKind::AlterPartition(_)
        | RequestKind::WriteTxnMarkers(_) => true,
        RequestKind::Fetch(fetch) => fetch::replica_id(fetch, version) >= 0,
        _ => false,
    }
}

async fn dispatch(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    header: &RequestHeader,
    request: RequestKind,
) -> ResponseKind {
    let version = header.request_api_version;
    match request {
        RequestKind::ApiVersions(req) => {
            ResponseKind::ApiVersions(api_versions::handle(&req, version))
        }
        RequestKind::Metadata(req) => {
            ResponseKind::Metadata(metadata::handle(ctx, rctx, req, version).await)
        }
        RequestKind::CreateTopics(req) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, rctx, req, version).await)
        }
        RequestKind::CreatePartitions(req) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, rctx, req, version).await)
        }
        RequestKind::AlterPartitionReassignments(req) => ResponseKind::AlterPartitionReassignments(
            alter_partition_reassignments::handle(ctx, rctx, req).await,
        ),
        RequestKind::ListPartitionReassignments(req) => ResponseKind::ListPartitionReassignments(
            list_partition_reassignments::handle(ctx, rctx, req).await,
        ),
        RequestKind::DeleteTopics(req) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, rctx, req, version).await)
        }
        RequestKind::ElectLeaders(req) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(ctx, rctx, req, version).await)
        }
        RequestKind::DescribeConfigs(req) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, rctx, req, version).await)
        }
        RequestKind::AlterConfigs(req) => {
            ResponseKind::AlterConfigs(alter_configs::handle(ctx, rctx, req).await)
        }
        RequestKind::DescribeClientQuotas(req) => {
            ResponseKind::DescribeClientQuotas(client_quotas::describe(ctx, rctx, req).await)
        }
        RequestKind::AlterClientQuotas(req) => {
            ResponseKind::AlterClientQuotas(client_quotas::alter(ctx, rctx, req).await)
        }
        RequestKind::IncrementalAlterConfigs(req) => ResponseKind::IncrementalAlterConfigs(
            incremental_alter_configs::handle(ctx, rctx, req).await,
        ),
        RequestKind::DescribeCluster(req) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(ctx, rctx, req, version))
        }
        RequestKind::DescribeLogDirs(req) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(ctx, rctx, req, version).await)
        }
        RequestKind::DescribeProducers(req) => {
            ResponseKind::DescribeProducers(describe_producers::handle(ctx, rctx, &req))
        }
        RequestKind::DescribeAcls(req) => {
            ResponseKind::DescribeAcls(acls::describe(ctx, rctx, req))
        }
        RequestKind::CreateAcls(req) => {
            ResponseKind::CreateAcls(acls::create(ctx, rctx, req).await)
        }
        RequestKind::DeleteAcls(req) => {
            ResponseKind::DeleteAcls(acls::delete(ctx, rctx, req).await)
        }
        RequestKind::DescribeUserScramCredentials(req) => {
            ResponseKind::DescribeUserScramCredentials(
                user_scram_credentials::describe(ctx, rctx, &req).await,
            )
        }
        RequestKind::AlterUserScramCredentials(req) => ResponseKind::AlterUserScramCredentials(
            user_scram_credentials::alter(ctx, rctx, &req).await,
        ),
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(sasl::handshake()),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(sasl::authenticate()),
        RequestKind::LeaderAndIsr(req) => {
            let response = leader_and_isr::handle(ctx, rctx, header, req).await;
            // A group coordinator moves with the leadership of its offsets partition.
            crate::groups::on_leadership_change(ctx);
            ctx.transactions.reconcile(ctx);
            ResponseKind::LeaderAndIsr(response)
        }
        RequestKind::AlterPartition(req) => ResponseKind::AlterPartition(
            alter_partition::handle(ctx, rctx, header, req, version).await,
        ),
        RequestKind::UpdateMetadata(req) => {
            ResponseKind::UpdateMetadata(update_metadata::handle(ctx, rctx, header, req).await)
        }
        RequestKind::StopReplica(req) => {
            let response = stop_replica::handle(ctx, rctx, header, req).await;
            crate::groups::on_leadership_change(ctx);
            ctx.transactions.reconcile(ctx);
            ResponseKind::StopReplica(response)
        }
        RequestKind::ControlledShutdown(req) => ResponseKind::ControlledShutdown(
            controlled_shutdown::handle(ctx, rctx, header, req).await,
        ),
        RequestKind::Produce(req) => {
            let bytes = crate::quotas::produce_bytes(&req);
            // Kafka's AdminUtils.ADMIN_CLIENT_ID may append to internal topics; no one else.
            let internal_allowed = header.client_id.as_deref() == Some(produce::ADMIN_CLIENT_ID);
            let mut response = produce::handle(ctx, rctx, req, version, internal_allowed).await;
            endpoints_on_listener!(ctx, &rctx.listener, response.node_endpoints);
            response.throttle_time_ms = crate::quotas::throttle_produce(ctx, rctx, header, bytes);
            ResponseKind::Produce(response)
        }
        RequestKind::Fetch(req) => {
            let mut response = fetch::handle(ctx, rctx, header, req, version).await;
            endpoints_on_listener!(ctx, &rctx.listener, response.node_endpoints);
            ResponseKind::Fetch(response)
        }
        RequestKind::ListOffsets(req) => {
            ResponseKind::ListOffsets(list_offsets::handle(ctx, rctx, req, version).await)
        }
        RequestKind::OffsetForLeaderEpoch(req) => ResponseKind::OffsetForLeaderEpoch(
            offset_for_leader_epoch::handle(ctx, rctx, req, version),
        ),
        RequestKind::DeleteRecords(req) => {
            ResponseKind::DeleteRecords(delete_records::handle(ctx, rctx, req).await)
        }
        RequestKind::InitProducerId(req) => {
            ResponseKind::InitProducerId(init_producer_id::handle(ctx, rctx, req, version).await)
        }
        RequestKind::FindCoordinator(req) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(ctx, rctx, &req, version))
        }
        RequestKind::JoinGroup(req) => ResponseKind::JoinGroup(
            join_group::handle(ctx, rctx, req, version, header.client_id.as_deref()).await,
        ),
        RequestKind::SyncGroup(req) => {
            ResponseKind::SyncGroup(sync_group::handle(ctx, rctx, req, version).await)
        }
        RequestKind::Heartbeat(req) => {
            ResponseKind::Heartbeat(heartbeat::handle(ctx, rctx, &req).await)
        }
        RequestKind::LeaveGroup(req) => {
            ResponseKind::LeaveGroup(leave_group::handle(ctx, rctx, &req, version).await)
        }
        RequestKind::OffsetCommit(req) => {
            ResponseKind::OffsetCommit(offset_commit::handle(ctx, rctx, &req, version).await)
        }
        RequestKind::OffsetFetch(req) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(ctx, rctx, &req, version).await)
        }
        RequestKind::OffsetDelete(req) => {
            ResponseKind::OffsetDelete(offset_delete::handle(ctx, rctx, &req).await)
        }
        RequestKind::DescribeGroups(req) => {
            ResponseKind::DescribeGroups(describe_groups::handle(ctx, rctx, &req).await)
        }
        RequestKind::ListGroups(req) => {
            ResponseKind::ListGroups(list_groups::handle(ctx, rctx, &req).await)
        }
        RequestKind::DeleteGroups(req) => {
            ResponseKind::DeleteGroups(delete_groups::handle(ctx, rctx, &req).await)
        }
        RequestKind::ConsumerGroupHeartbeat(req) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_group_heartbeat::handle(ctx, rctx, &req, header.client_id.as_deref()).await,
        ),
        RequestKind::WriteTxnMarkers(req) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(ctx, rctx, req).await)
        }
        RequestKind::ConsumerGroupDescribe(req) => ResponseKind::ConsumerGroupDescribe(
            consumer_group_describe::handle(ctx, rctx, &req).await,
        ),
        RequestKind::AddPartitionsToTxn(req) => ResponseKind::AddPartitionsToTxn(
            transactions::add_partitions(ctx, rctx, req, version).await,
        ),
        RequestKind::AddOffsetsToTxn(req) => {
            ResponseKind::AddOffsetsToTxn(transactions::add_offsets(ctx, rctx, req, version).await)
        }
        RequestKind::EndTxn(req) => {
            ResponseKind::EndTxn(transactions::end_txn(ctx, rctx, req, version).await)
        }
        RequestKind::TxnOffsetCommit(req) => ResponseKind::TxnOffsetCommit(
            crate::groups::txn_offset_commit(ctx, rctx, &req, version).await,
        ),
        RequestKind::DescribeTransactions(req) => {
            ResponseKind::DescribeTransactions(transactions::describe(ctx, rctx, &req).await)
        }
        RequestKind::ListTransactions(req) => {
            ResponseKind::ListTransactions(transactions::list(ctx, rctx, &req).await)
        }
        // SUPPORTED_APIS and this match list the same APIs; a request reaching here is one
        // whose row was added without a handler, so answer it as unsupported.
        other => unsupported::error_response(&other, version).unwrap_or_else(|| {
            ResponseKind::ApiVersions(protocol::api_versions::api_versions_response())
        }),
    }
}
