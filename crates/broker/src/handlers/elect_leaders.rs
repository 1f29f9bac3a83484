//! ElectLeaders (API 43): handled by the controller (NOT_CONTROLLER in every result when
//! this broker is not the active controller). Like Kafka's `DelayedElectLeader`, the answer
//! waits until this broker's metadata cache shows every elected leader; a partition still
//! not showing its new leader when the request's timeout ends is `REQUEST_TIMED_OUT` (the
//! election itself is done).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;
use model::BrokerId;

use crate::context::BrokerContext;

/// How often the metadata cache is looked at while waiting for the elected leaders.
const CACHE_POLL: Duration = Duration::from_millis(10);

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Alter) {
        return refused(&request);
    }
    let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut request = request;
    if version == 0 {
        // v0 has no election type: always PREFERRED.
        request.election_type = 0;
    }
    let started = tokio::time::Instant::now();
    let answer = crate::limits::parked(ctx.controller().elect_leaders(request)).await;
    let mut response = answer.response;
    let mut waiting: BTreeMap<(String, i32), BrokerId> = answer.elected;
    let deadline = started + timeout;
    loop {
        let snapshot = ctx.metadata_cache.snapshot();
        waiting.retain(|(topic, partition), leader| {
            snapshot
                .topics
                .get(topic)
                .and_then(|t| t.partitions.get(partition))
                .is_none_or(|p| p.leader != *leader)
        });
        if waiting.is_empty() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(CACHE_POLL).await;
    }
    for topic in &mut response.replica_election_results {
        for result in &mut topic.partition_result {
            if waiting.contains_key(&(topic.topic.0.to_string(), result.partition_id)) {
                result.error_code = ResponseError::RequestTimedOut.code();
                result.error_message = Some(StrBytes::from_static_str(
                    "The leader was elected, but this broker's metadata did not show it within the request timeout.",
                ));
            }
        }
    }
    response
}

/// ALTER on the cluster is needed: every partition (and, v1+, the request) answers
/// CLUSTER_AUTHORIZATION_FAILED.
fn refused(request: &ElectLeadersRequest) -> ElectLeadersResponse {
    use kafka_protocol::messages::elect_leaders_response::{
        PartitionResult, ReplicaElectionResult,
    };
    let code = ResponseError::ClusterAuthorizationFailed;
    ElectLeadersResponse::default()
        .with_error_code(code.code())
        .with_replica_election_results(
            request
                .topic_partitions
                .iter()
                .flatten()
                .map(|t| {
                    ReplicaElectionResult::default()
                        .with_topic(t.topic.clone())
                        .with_partition_result(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    PartitionResult::default()
                                        .with_partition_id(*p)
                                        .with_error_code(code.code())
                                        .with_error_message(Some(StrBytes::from_string(
                                            code.to_string(),
                                        )))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}
