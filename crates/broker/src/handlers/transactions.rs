//! The transaction coordinator's APIs (`crate::txn`): AddPartitionsToTxn (v0-3 one
//! transaction; v4-5 batched from brokers, with VerifyOnly, KIP-890), AddOffsetsToTxn (v0-4),
//! EndTxn (v0-4), TxnOffsetCommit (v0-4, through the group coordinator),
//! DescribeTransactions (v0) and ListTransactions (v0-1). ACLs as Kafka: WRITE on the
//! transactional id (DESCRIBE to describe or list it), WRITE on the topics added, READ on
//! the group whose offsets join, CLUSTER_ACTION for the batched broker-to-broker form.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use security::acl::{Operation, ResourceType};

use crate::auth::RequestContext;
use crate::context::BrokerContext;

fn txn_authorized(ctx: &BrokerContext, rctx: &RequestContext, op: Operation, id: &str) -> bool {
    super::authorized(ctx, rctx, op, ResourceType::TransactionalId, id)
}

/// PRODUCER_FENCED arrived in these APIs' v2; older clients know INVALID_PRODUCER_EPOCH.
fn for_version(err: ResponseError, version: i16) -> ResponseError {
    if err == ResponseError::ProducerFenced && version < 2 {
        ResponseError::InvalidProducerEpoch
    } else {
        err
    }
}

type Partitions = Vec<(String, Vec<i32>)>;

fn results(
    topics: &Partitions,
    code_of: impl Fn(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|(topic, partitions)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_results_by_partition(
                    partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code_of(topic, *p))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// One transaction of an AddPartitionsToTxn request.
struct Txn<'a> {
    id: &'a str,
    producer_id: i64,
    producer_epoch: i16,
    /// KIP-890's VerifyOnly (v4+): only check, add nothing.
    verify_only: bool,
}

/// One transaction of AddPartitionsToTxn: authorization and topic checks, then the
/// coordinator; per-partition codes.
async fn add_one(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    txn: Txn<'_>,
    topics: &Partitions,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let Txn {
        id,
        producer_id,
        producer_epoch,
        verify_only,
    } = txn;
    let all = |err: ResponseError| {
        let code = for_version(err, version).code();
        results(topics, |_, _| code)
    };
    if !txn_authorized(ctx, rctx, Operation::Write, id) {
        return all(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let denied = super::denied_topics(
        ctx,
        rctx,
        Operation::Write,
        topics.iter().map(|(t, _)| t.as_str()),
    );
    let snapshot = ctx.metadata_cache.snapshot();
    let unknown = |t: &str, p: i32| {
        snapshot
            .topics
            .get(t)
            .is_none_or(|info| !info.partitions.contains_key(&p))
    };
    let any_denied = !denied.is_empty();
    let any_unknown = topics
        .iter()
        .any(|(t, ps)| !denied.contains(t) && ps.iter().any(|p| unknown(t, *p)));
    if any_denied || any_unknown {
        // Kafka: the bad partitions get their error, the others OPERATION_NOT_ATTEMPTED.
        return results(topics, |t, p| {
            if denied.contains(t) {
                ResponseError::TopicAuthorizationFailed.code()
            } else if unknown(t, p) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        });
    }
    let wanted: BTreeSet<(String, i32)> = topics
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect();
    if verify_only {
        let listed: Vec<(String, i32)> = wanted.into_iter().collect();
        return match crate::txn::verify_partitions(ctx, id, producer_id, producer_epoch, &listed)
            .await
        {
            Ok(bad) => {
                let bad: std::collections::BTreeMap<(String, i32), ResponseError> =
                    bad.into_iter().collect();
                results(topics, |t, p| {
                    bad.get(&(t.to_owned(), p)).map_or(0, |e| e.code())
                })
            }
            Err(err) => all(err),
        };
    }
    match crate::txn::add_partitions(ctx, id, producer_id, producer_epoch, &wanted).await {
        Ok(()) => results(topics, |_, _| 0),
        Err(err) => all(err),
    }
}

pub(super) async fn add_partitions(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let topics_of = |topics: &[kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic]| -> Partitions {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.clone()))
            .collect()
    };
    if version < 4 {
        let topics = topics_of(&request.v3_and_below_topics);
        let txn = Txn {
            id: request.v3_and_below_transactional_id.0.as_str(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
        };
        let results = add_one(ctx, rctx, txn, &topics, version).await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    // v4+ is sent by brokers (KIP-890): CLUSTER_ACTION, as Kafka.
    if !super::authorized_cluster(ctx, rctx, Operation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut out = Vec::with_capacity(request.transactions.len());
    for txn in &request.transactions {
        let topics = topics_of(&txn.topics);
        let one = Txn {
            id: txn.transactional_id.0.as_str(),
            producer_id: txn.producer_id.0,
            producer_epoch: txn.producer_epoch,
            verify_only: txn.verify_only,
        };
        let topic_results = add_one(ctx, rctx, one, &topics, version).await;
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

pub(super) async fn add_offsets(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = request.transactional_id.0.as_str();
    let answer = |err: ResponseError| {
        AddOffsetsToTxnResponse::default().with_error_code(for_version(err, version).code())
    };
    if !txn_authorized(ctx, rctx, Operation::Write, id) {
        return answer(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let group = request.group_id.0.as_str();
    if !super::authorized_group(ctx, rctx, Operation::Read, group) {
        return answer(ResponseError::GroupAuthorizationFailed);
    }
    let partition = group_coordinator::log_records::partition_for(
        group,
        crate::groups::offsets_partitions(ctx),
    );
    let wanted = BTreeSet::from([(
        group_coordinator::log_records::OFFSETS_TOPIC.to_owned(),
        partition,
    )]);
    match crate::txn::add_partitions(
        ctx,
        id,
        request.producer_id.0,
        request.producer_epoch,
        &wanted,
    )
    .await
    {
        Ok(()) => AddOffsetsToTxnResponse::default(),
        Err(err) => answer(err),
    }
}

pub(super) async fn end_txn(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    request: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = request.transactional_id.0.as_str();
    if !txn_authorized(ctx, rctx, Operation::Write, id) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    match crate::txn::end_txn(
        ctx,
        id,
        request.producer_id.0,
        request.producer_epoch,
        request.committed,
    )
    .await
    {
        Ok(()) => EndTxnResponse::default(),
        Err(err) => EndTxnResponse::default().with_error_code(for_version(err, version).code()),
    }
}

pub(super) async fn describe(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    request: &DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut states = Vec::new();
    for id in &request.transactional_ids {
        let name = id.0.as_str();
        let base = TransactionState::default()
            .with_transactional_id(id.clone())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_transaction_state(StrBytes::from_static_str(""))
            .with_transaction_start_time_ms(-1);
        if !txn_authorized(ctx, rctx, Operation::Describe, name) {
            states.push(
                base.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()),
            );
            continue;
        }
        if let Err(err) = ctx.transactions.check(ctx, name) {
            states.push(base.with_error_code(err.code()));
            continue;
        }
        let Some(entry) = ctx
            .transactions
            .entries()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, e)| e)
        else {
            states.push(base.with_error_code(ResponseError::TransactionalIdNotFound.code()));
            continue;
        };
        let meta = entry.lock().await;
        let mut topics: Vec<TopicData> = Vec::new();
        for (topic, p) in &meta.partitions {
            match topics.last_mut() {
                Some(last) if last.topic.0.as_str() == topic => last.partitions.push(*p),
                _ => topics.push(
                    TopicData::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![*p]),
                ),
            }
        }
        // Only topics the principal may describe (Kafka's filter).
        topics.retain(|t| {
            super::authorized(
                ctx,
                rctx,
                Operation::Describe,
                ResourceType::Topic,
                t.topic.0.as_str(),
            )
        });
        states.push(
            base.with_producer_id(ProducerId(meta.producer_id))
                .with_producer_epoch(meta.producer_epoch)
                .with_transaction_state(StrBytes::from_static_str(meta.state.name()))
                .with_transaction_timeout_ms(meta.timeout_ms)
                .with_transaction_start_time_ms(meta.start_ms)
                .with_topics(topics),
        );
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

const STATE_NAMES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

pub(super) async fn list(
    ctx: &Arc<BrokerContext>,
    rctx: &RequestContext,
    request: &ListTransactionsRequest,
) -> ListTransactionsResponse {
    let unknown: Vec<StrBytes> = request
        .state_filters
        .iter()
        .filter(|s| !STATE_NAMES.contains(&s.as_str()))
        .cloned()
        .collect();
    let states: BTreeSet<&str> = request.state_filters.iter().map(|s| s.as_str()).collect();
    let pids: BTreeSet<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    let now = crate::data_plane::now_ms();
    let mut out = Vec::new();
    for (id, entry) in ctx.transactions.entries() {
        if ctx.transactions.check(ctx, &id).is_err() {
            continue;
        }
        if !txn_authorized(ctx, rctx, Operation::Describe, &id) {
            continue;
        }
        let meta = entry.lock().await;
        if !states.is_empty() && !states.contains(meta.state.name()) {
            continue;
        }
        if !pids.is_empty() && !pids.contains(&meta.producer_id) {
            continue;
        }
        // v1's DurationFilter (KIP-994): running longer than this many ms.
        if request.duration_filter >= 0
            && (meta.state != crate::txn::state::TxnState::Ongoing
                || now - meta.start_ms < request.duration_filter)
        {
            continue;
        }
        out.push(
            ListedState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id.clone())))
                .with_producer_id(ProducerId(meta.producer_id))
                .with_transaction_state(StrBytes::from_static_str(meta.state.name())),
        );
    }
    out.sort_by(|a, b| a.transactional_id.0.cmp(&b.transactional_id.0));
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(out)
}
