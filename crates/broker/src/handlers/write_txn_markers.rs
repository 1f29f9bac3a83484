//! WriteTxnMarkers (v0–v1, v1 flexible): the transaction coordinator's request to end a
//! transaction in the partitions this broker leads, as Kafka's
//! `handleWriteTxnMarkersRequest`. Broker to broker: the principal needs ALTER or
//! CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition).
//! Each marker becomes one control batch per partition (a COMMIT or ABORT control record
//! with the coordinator epoch; the producer's id and epoch in the header), appended through
//! the leader's normal path and answered once the in-sync replicas have it (acks=-1, bounded
//! by `request.timeout.ms`). Per partition: UNKNOWN_TOPIC_OR_PARTITION when this broker does
//! not host it, NOT_LEADER_OR_FOLLOWER when it does not lead it, INVALID_PRODUCER_EPOCH for
//! an older producer epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch
//! than the producer's last marker, NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and
//! REQUEST_TIMED_OUT as for a produce.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use model::TopicPartition;
use records::control::EndTxnMarker;
use tracing::debug;

use crate::context::BrokerContext;
use crate::data_plane::now_ms;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = super::authorized_cluster(ctx, rctx, security::acl::Operation::Alter)
        || super::authorized_cluster(ctx, rctx, security::acl::Operation::ClusterAction);
    if !allowed {
        return every_partition(&request, ResponseError::ClusterAuthorizationFailed);
    }
    let deadline = tokio::time::Instant::now() + ctx.config.request_timeout;
    // (marker, topic, partition) -> error, and the appends to wait for.
    let mut response = every_partition(&request, ResponseError::UnknownTopicOrPartition);
    // Each marker's producer and result, for the group coordinator's pending offsets.
    let outcomes: Vec<(i64, bool)> = request
        .markers
        .iter()
        .map(|m| (m.producer_id.0, m.transaction_result))
        .collect();
    let rm = ctx.replica_manager.clone();
    let now = now_ms();
    let appended = crate::blocking::run(move || {
        let mut results = Vec::new();
        for (m, marker) in request.markers.iter().enumerate() {
            let end = EndTxnMarker {
                commit: marker.transaction_result,
                coordinator_epoch: marker.coordinator_epoch,
            };
            for (t, topic) in marker.topics.iter().enumerate() {
                for (p, &index) in topic.partition_indexes.iter().enumerate() {
                    let Ok(name) = topic.name.0.parse::<model::TopicName>() else {
                        continue;
                    };
                    let tp = TopicPartition::new(name, index);
                    if rm.get(&tp).is_none() {
                        continue;
                    }
                    let result = rm.append_marker(
                        &tp,
                        marker.producer_id.0,
                        marker.producer_epoch,
                        end,
                        now,
                    );
                    results.push(((m, t, p), tp, result));
                }
            }
        }
        results
    })
    .await;
    let mut waits = Vec::new();
    for ((m, t, p), tp, result) in appended {
        let out = &mut response.markers[m].topics[t].partitions[p];
        match result {
            Ok(offset) => {
                out.error_code = 0;
                waits.push(((m, t, p), tp, offset + 1));
            }
            Err(err) => {
                debug!(%tp, error = %err, "transaction marker refused");
                out.error_code = err.response_error().code();
            }
        }
    }
    if !waits.is_empty() {
        crate::limits::release_held();
    }
    for ((m, t, p), tp, offset) in waits {
        if let Err(err) = ctx
            .replica_manager
            .wait_for_acks(&tp, offset, deadline)
            .await
        {
            debug!(%tp, offset, error = %err, "transaction marker not confirmed by the in-sync replicas");
            response.markers[m].topics[t].partitions[p].error_code = err.code();
        } else {
            // A marker in __consumer_offsets settles the producer's transactional offsets.
            let (producer_id, commit) = outcomes[m];
            crate::groups::on_txn_marker(ctx, &tp, producer_id, commit);
        }
    }
    response
}

/// The response naming every partition of the request with `error`.
fn every_partition(
    request: &WriteTxnMarkersRequest,
    error: ResponseError,
) -> WriteTxnMarkersResponse {
    WriteTxnMarkersResponse::default().with_markers(
        request
            .markers
            .iter()
            .map(|marker| {
                WritableTxnMarkerResult::default()
                    .with_producer_id(marker.producer_id)
                    .with_topics(
                        marker
                            .topics
                            .iter()
                            .map(|topic| {
                                WritableTxnMarkerTopicResult::default()
                                    .with_name(topic.name.clone())
                                    .with_partitions(
                                        topic
                                            .partition_indexes
                                            .iter()
                                            .map(|&index| {
                                                WritableTxnMarkerPartitionResult::default()
                                                    .with_partition_index(index)
                                                    .with_error_code(error.code())
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
