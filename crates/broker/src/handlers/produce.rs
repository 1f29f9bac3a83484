//! Produce (v0–v11): append each partition's record set to the local log this broker leads.
//! v9 is the flexible encoding; v10 adds, for NOT_LEADER_OR_FOLLOWER, the partition's current
//! leader and its endpoint from the metadata cache (KIP-951); v11 only allows the
//! TRANSACTION_ABORTABLE error (KIP-890), which a broker without transactions never sends.
//! A request carrying transactional batches needs a `transactional_id` the principal may
//! WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, as Kafka); the
//! batches open (or extend) their producer's transaction in each partition, which holds the
//! last stable offset until the coordinator's marker (WriteTxnMarkers) ends it.
//!
//! Kafka 2.8's behaviour: every record is checked by the leader before it is acknowledged
//! (`records::validate_produce`: framing, compressed batches decoded, keys on compacted topics,
//! timestamps), refused with CORRUPT_MESSAGE, INVALID_RECORD or INVALID_TIMESTAMP and, from v8,
//! an `error_message` and the refused records' `record_errors`; message sets of format v0/v1
//! are converted up to v2; a batch over `max.message.bytes` gets MESSAGE_TOO_LARGE; acks other than -1, 0, 1 answer
//! INVALID_REQUIRED_ACKS for every partition. acks=0 requests get no response at all (the
//! connection skips it). acks=-1 needs `min.insync.replicas` in-sync replicas
//! (NOT_ENOUGH_REPLICAS before appending, nothing written) and is answered once the high
//! watermark passes the appended records (Kafka's `DelayedProduce`): with
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below `min.insync.replicas`
//! meanwhile, NOT_LEADER_OR_FOLLOWER when this broker stopped leading, REQUEST_TIMED_OUT after
//! the request's `timeout_ms`.

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use tracing::debug;

use crate::context::BrokerContext;
use crate::data_plane::now_ms;

/// A partition's refusal: the error, its message (v8+), and the records at fault (v8+).
struct Refused {
    error: ResponseError,
    message: Option<String>,
    record_errors: Vec<records::validate::RecordError>,
}

impl From<(ResponseError, Option<String>)> for Refused {
    fn from((error, message): (ResponseError, Option<String>)) -> Self {
        Refused {
            error,
            message,
            record_errors: Vec::new(),
        }
    }
}

/// The client id that may append to internal topics (Kafka's `AdminUtils.ADMIN_CLIENT_ID`).
pub(super) const ADMIN_CLIENT_ID: &str = "__admin_client";

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: ProduceRequest,
    version: i16,
    internal_allowed: bool,
) -> ProduceResponse {
    let now = now_ms();
    let acks = request.acks;
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(request.timeout_ms.max(0) as u64);
    let acks_valid = matches!(request.acks, -1..=1);
    // Kafka's handleProduceRequest: transactional batches need a transactional id the
    // principal may WRITE; without one the whole request is refused.
    let transactional_refused = has_transactional_records(&request)
        && !request.transactional_id.as_ref().is_some_and(|id| {
            super::authorized(
                ctx,
                rctx,
                security::acl::Operation::Write,
                security::acl::ResourceType::TransactionalId,
                id,
            )
        });
    let mut response = ProduceResponse::default();
    // (topic index, partition index, partition, records): the appends, done off the async
    // workers in one go once every partition was checked.
    let mut appends: Vec<(usize, usize, TopicPartition, Option<bytes::Bytes>)> = Vec::new();
    for (topic_index, mut topic) in request.topic_data.into_iter().enumerate() {
        // Own the topic name: decoded in place, its bytes would share the request buffer and
        // keep `append` from taking a batch over without copying it.
        topic.name.0 = StrBytes::from_string(topic.name.0.to_string());
        let name: Option<model::TopicName> = topic.name.0.parse().ok();
        // WRITE on the topic, as Kafka's handleProduceRequest.
        let writable = super::authorized(
            ctx,
            rctx,
            security::acl::Operation::Write,
            security::acl::ResourceType::Topic,
            &topic.name.0,
        );
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        for (partition_index, data) in topic.partition_data.into_iter().enumerate() {
            let mut out = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let refused: Option<Refused> = if !acks_valid {
                Some((ResponseError::InvalidRequiredAcks, None).into())
            } else if transactional_refused {
                Some(
                    (
                        ResponseError::TransactionalIdAuthorizationFailed,
                        Some(match &request.transactional_id {
                            None => "transactional batches need the request's transactional_id"
                                .to_owned(),
                            Some(id) => {
                                format!("not authorized to WRITE transactional id {}", &**id)
                            }
                        }),
                    )
                        .into(),
                )
            } else if !writable {
                Some((ResponseError::TopicAuthorizationFailed, None).into())
            } else if !internal_allowed && name.as_ref().is_some_and(|n| n.is_internal()) {
                // Kafka's ReplicaManager.appendToLocalLog: only the coordinators write there.
                Some(
                    (
                        ResponseError::InvalidTopicException,
                        Some(format!("Cannot append to internal topic {}", topic.name.0)),
                    )
                        .into(),
                )
            } else if let Err(refused) = validate_records(version, data.records.as_deref()) {
                Some(refused.into())
            } else if let Some(name) = &name {
                let tp = TopicPartition::new(name.clone(), data.index);
                appends.push((topic_index, partition_index, tp, data.records));
                None
            } else {
                Some((ResponseError::UnknownTopicOrPartition, None).into())
            };
            if let Some(refused) = refused {
                set_refused(&mut out, refused);
            }
            partition_responses.push(out);
        }
        response.responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partition_responses),
        );
    }
    let rm = ctx.replica_manager.clone();
    let results = crate::blocking::run(move || {
        appends
            .into_iter()
            .map(|(topic_index, partition_index, tp, records)| {
                let result = append(&rm, &tp, acks, records, now);
                (topic_index, partition_index, tp, result)
            })
            .collect::<Vec<_>>()
    })
    .await;
    // (topic index, partition index, partition, offset the high watermark must reach)
    let mut waits: Vec<(usize, usize, TopicPartition, i64)> = Vec::new();
    for (topic_index, partition_index, tp, result) in results {
        let out = &mut response.responses[topic_index].partition_responses[partition_index];
        match result {
            Ok(r) => {
                out.base_offset = r.base_offset;
                out.log_append_time_ms = r.log_append_time_ms;
                out.log_start_offset = r.log_start_offset;
                if acks == -1 {
                    waits.push((topic_index, partition_index, tp, r.last_offset + 1));
                }
            }
            Err(refused) => set_refused(out, refused),
        }
    }
    if !waits.is_empty() {
        // acks=-1 waits for the in-sync replicas: parked, as in Kafka's DelayedProduce.
        crate::limits::release_held();
    }
    for (topic_index, partition_index, tp, offset) in waits {
        if let Err(err) = ctx
            .replica_manager
            .wait_for_acks(&tp, offset, deadline)
            .await
        {
            debug!(%tp, offset, error = %err, "acks=-1 produce not confirmed by the in-sync replicas");
            let out = &mut response.responses[topic_index].partition_responses[partition_index];
            out.error_code = err.code();
            if matches!(
                err,
                replication::ReplicationError::NotEnoughReplicasAfterAppend { .. }
            ) {
                out.error_message = Some(StrBytes::from_string(err.to_string()));
            }
        }
    }
    if version >= 10 {
        add_leader_hints(ctx, &mut response);
    }
    response
}

/// KIP-951 (v10+): each NOT_LEADER_OR_FOLLOWER partition names its current leader, and the
/// response lists those leaders' endpoints once each.
fn add_leader_hints(ctx: &BrokerContext, response: &mut ProduceResponse) {
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let mut snapshot = None;
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for topic in &mut response.responses {
        for out in &mut topic.partition_responses {
            if out.error_code != not_leader {
                continue;
            }
            let snapshot = snapshot.get_or_insert_with(|| ctx.metadata_cache.snapshot());
            let (leader, epoch, broker) =
                super::current_leader(snapshot, topic.name.0.as_str(), out.index);
            out.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(epoch);
            if let Some(b) = broker {
                if !endpoints.iter().any(|e| e.node_id.0 == b.id) {
                    endpoints.push(
                        NodeEndpoint::default()
                            .with_node_id(BrokerId(b.id))
                            .with_host(StrBytes::from_string(b.host.clone()))
                            .with_port(b.port)
                            .with_rack(b.rack.clone().map(StrBytes::from_string)),
                    );
                }
            }
        }
    }
    response.node_endpoints = endpoints;
}

fn set_refused(out: &mut PartitionProduceResponse, refused: Refused) {
    out.error_code = refused.error.code();
    out.error_message = refused.message.map(StrBytes::from_string);
    out.record_errors = refused
        .record_errors
        .into_iter()
        .map(|e| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(e.batch_index)
                .with_batch_index_error_message(Some(StrBytes::from_string(e.message)))
        })
        .collect();
}

/// Whether any batch of the request is transactional (Kafka's
/// `ProduceRequest.hasTransactionalRecords`).
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|p| p.records.as_deref())
        .any(|bytes| {
            let mut position = 0;
            while let Some(header) = bytes.get(position..).and_then(records::BatchHeader::read) {
                if header.magic == records::MAGIC_V2 && header.is_transactional() {
                    return true;
                }
                if header.batch_length <= 0 {
                    break;
                }
                position += header.size_in_bytes();
            }
            false
        })
}

/// Kafka's `ProduceRequest.validateRecords`: from v3 a partition carries exactly one batch
/// of magic 2, and zstd needs v7. (Older versions are not checked here, as in Kafka; their
/// old-format batches are refused by the log with UNSUPPORTED_FOR_MESSAGE_FORMAT.)
fn validate_records(
    version: i16,
    records: Option<&[u8]>,
) -> Result<(), (ResponseError, Option<String>)> {
    if version < 3 {
        return Ok(());
    }
    let invalid = |msg: String| Err((ResponseError::InvalidRecord, Some(msg)));
    let bytes = records.unwrap_or_default();
    let Some(header) = records::BatchHeader::read(bytes) else {
        return invalid(format!(
            "Produce requests with version {version} must have at least one record batch"
        ));
    };
    if header.magic != 2 {
        return invalid(format!(
            "Produce requests with version {version} are only allowed to contain record batches with magic version 2"
        ));
    }
    if version < 7 && header.compression() == Some(records::Compression::Zstd) {
        return Err((
            ResponseError::UnsupportedCompressionType,
            Some(format!(
                "Produce requests with version {version} are not allowed to use ZStandard compression"
            )),
        ));
    }
    let size = header.size_in_bytes();
    if size < bytes.len() && header.batch_length > 0 {
        return invalid(format!(
            "Produce requests with version {version} are only allowed to contain exactly one record batch"
        ));
    }
    Ok(())
}

/// Checks and appends one partition's records (disk I/O: call off the async workers).
fn append(
    rm: &replication::ReplicaManager,
    tp: &TopicPartition,
    acks: i16,
    records: Option<bytes::Bytes>,
    now: i64,
) -> Result<replication::AppendResult, Refused> {
    let records = records.unwrap_or_default();
    // The request buffer is shared with the decoder; take it over when we hold the only
    // reference, else copy once (offsets are written into the batches in place).
    let mut buf = records
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    rm.append(tp, &mut buf, acks, now).map_err(|err| {
        debug!(%tp, error = %err, "produce refused");
        let error = err.response_error();
        let message = matches!(
            error,
            ResponseError::UnsupportedForMessageFormat
                | ResponseError::CorruptMessage
                | ResponseError::InvalidRecord
                | ResponseError::InvalidTimestamp
                | ResponseError::UnsupportedCompressionType
                | ResponseError::MessageTooLarge
                | ResponseError::OutOfOrderSequenceNumber
                | ResponseError::InvalidProducerEpoch
                | ResponseError::NotEnoughReplicas
        )
        .then(|| err.to_string());
        Refused {
            error,
            message,
            record_errors: err.record_errors().to_vec(),
        }
    })
}
