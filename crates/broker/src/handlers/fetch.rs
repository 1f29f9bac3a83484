//! Fetch (v0–v17): whole record batches straight from the segment files, with long polling.
//! From v13 topics are named by id (an id the metadata cache does not know is
//! UNKNOWN_TOPIC_ID); v15 moves the follower's id into `replica_state`; v16 adds, for
//! NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, the current leader and its endpoint
//! (KIP-951); v17 adds the follower's directory id (ignored: one directory per partition).
//! Fetch v0–v3 consumers get message format v0/v1, down-converted per partition (bounded by
//! what was read for it: at most `partition_max_bytes` plus one batch).
//!
//! The answer goes out as soon as `min_bytes` are there, any partition has an error, or
//! `max_wait_ms` has passed; until then the request waits for the next append (a
//! notification, not polling) and reads again. `max_bytes` (v3+) bounds the response and
//! `partition_max_bytes` each partition; as in Kafka, the first batch of the first partition
//! with data is returned whole even when larger. Incremental fetch sessions (v7+) are never
//! created: every answer is a full response with session id 0, and a request naming a
//! session gets FETCH_SESSION_ID_NOT_FOUND, which makes clients fall back to full fetches.
//! Consumers read below the high watermark; followers (`replica_id` >= 0) read up to the log
//! end, and their fetch offset tells the leader how far they are.
//!
//! The request's `max_bytes` is capped by the broker's `fetch.max.bytes` for consumers and
//! `replica.fetch.response.max.bytes` for followers (Kafka's defaults 55 MiB and 10 MiB), and
//! `min_bytes` by that cap, as Kafka does: a Fetch asking for 2 GiB never makes the broker
//! read more than the cap (plus, as KIP-74 allows, one first batch that is larger).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use tokio::time::Instant;

use crate::context::BrokerContext;
use crate::metadata_cache::Snapshot;

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    if request.session_id != 0 {
        return FetchResponse::default()
            .with_error_code(ResponseError::FetchSessionIdNotFound.code())
            .with_session_id(0);
    }
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let deadline = Instant::now() + max_wait;
    let max_bytes = response_max_bytes(ctx, &request, version);
    let min_bytes = i64::from(request.min_bytes.max(0)).min(max_bytes);
    let mut appends = ctx.replica_manager.subscribe_appends();
    let request = Arc::new(request);
    // A consumer on a connection that can `sendfile` gets its records from the page cache
    // (Fetch v4+: older versions are down-converted in memory).
    let zero_copy =
        crate::zero_copy::enabled() && replica_id(&request, version) < 0 && version >= 4;
    // The reads touch the segment files: off the async workers.
    let read = || {
        let rm = ctx.replica_manager.clone();
        let request = Arc::clone(&request);
        // v13+ name topics by id (resolved in the metadata cache), v16+ hint at the leader.
        let snapshot = (version >= 13).then(|| ctx.metadata_cache.snapshot());
        crate::blocking::run(move || {
            read_all(
                &rm,
                snapshot.as_deref(),
                &request,
                max_bytes,
                version,
                zero_copy,
            )
        })
    };
    loop {
        appends.borrow_and_update();
        let pass = read().await;
        let enough = pass.bytes >= min_bytes || pass.errors;
        if enough || max_wait.is_zero() || Instant::now() >= deadline {
            return pass.into_response();
        }
        // Long polling: parked, so a waiting fetch keeps no other request from being read.
        match crate::limits::parked(tokio::time::timeout_at(deadline, appends.changed())).await {
            Ok(Ok(())) => continue,
            // Timed out, or the broker is shutting down: answer with what is there.
            _ => return read().await.into_response(),
        }
    }
}

/// One pass over the requested partitions.
struct Read {
    response: FetchResponse,
    /// Record bytes in the response.
    bytes: i64,
    /// Whether a partition has an error.
    errors: bool,
    /// (topic index, partition index, records) to send from the files.
    regions: Vec<(usize, usize, storage::log::FileRegion)>,
}

impl Read {
    /// The response to send: the file regions attached for a zero-copy send.
    fn into_response(mut self) -> FetchResponse {
        for (t, p, region) in self.regions {
            self.response.responses[t].partitions[p].records =
                Some(crate::zero_copy::attach(region));
        }
        self.response
    }
}

/// The fetching replica's id (-1 for a consumer): in `replica_state` from v15.
fn replica_id(request: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    }
}

/// The most record bytes the response may carry: the request's `max_bytes` (from v3; older
/// versions have none) capped by the broker's limit for consumers or followers.
fn response_max_bytes(ctx: &BrokerContext, request: &FetchRequest, version: i16) -> i64 {
    let requested = if version >= 3 {
        i64::from(request.max_bytes.max(0))
    } else {
        i64::from(i32::MAX)
    };
    let limits = &ctx.config.limits;
    let cap = if replica_id(request, version) >= 0 {
        limits.replica_fetch_response_max_bytes
    } else {
        limits.fetch_max_bytes
    };
    requested.min(i64::try_from(cap).unwrap_or(i64::MAX))
}

/// Reads every requested partition once, at most `max_bytes` of records in all (with
/// `zero_copy`, only where they lie, for consumers that need no conversion).
fn read_all(
    rm: &replication::ReplicaManager,
    snapshot: Option<&Snapshot>,
    request: &FetchRequest,
    max_bytes: i64,
    version: i16,
    zero_copy: bool,
) -> Read {
    let mut remaining = max_bytes;
    let mut total = 0i64;
    let mut errors = false;
    let mut first_with_data = true;
    let replica = replica_id(request, version);
    let mut node_endpoints: Vec<NodeEndpoint> = Vec::new();
    let mut responses = Vec::with_capacity(request.topics.len());
    let mut regions = Vec::new();
    for (topic_index, topic) in request.topics.iter().enumerate() {
        // v13+ name topics by id; an id nobody knows is UNKNOWN_TOPIC_ID.
        let (name, unknown): (Option<model::TopicName>, ResponseError) = match snapshot {
            Some(snapshot) => (
                snapshot
                    .topics
                    .iter()
                    .find(|(_, info)| !info.topic_id.is_nil() && info.topic_id == topic.topic_id)
                    .and_then(|(name, _)| name.parse().ok()),
                ResponseError::UnknownTopicId,
            ),
            None => (
                topic.topic.0.parse().ok(),
                ResponseError::UnknownTopicOrPartition,
            ),
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (partition_index, p) in topic.partitions.iter().enumerate() {
            let mut out = PartitionData::default()
                .with_partition_index(p.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_preferred_read_replica(BrokerId(-1))
                .with_records(Some(Bytes::new()));
            let partition = name
                .as_ref()
                .map(|n| TopicPartition::new(n.clone(), p.partition))
                .ok_or(unknown)
                .and_then(|tp| rm.partition(&tp).map_err(|e| e.response_error()));
            let limit = i64::from(p.partition_max_bytes.max(0)).min(remaining);
            let result = partition.and_then(|partition| {
                let max = limit.max(0) as usize;
                if replica >= 0 {
                    // A follower: reads up to the log end and reports its own log end.
                    rm.read_for_follower(partition.topic_partition(), replica, p.fetch_offset, max)
                        .map(Got::Bytes)
                } else if limit <= 0 && !first_with_data {
                    // No room left in the response: answer the partition's offsets without
                    // reading a batch that would be dropped.
                    no_room(&partition).map(Got::Bytes)
                } else if zero_copy && !needs_conversion(&partition, version) {
                    partition.read_region(p.fetch_offset, max).map(Got::Region)
                } else {
                    partition.read(p.fetch_offset, max).map(Got::Bytes)
                }
                .map_err(|e| e.response_error())
                .and_then(|got| match got {
                    Got::Bytes(read) if replica < 0 => {
                        convert_for_version(&partition, read, version, p.fetch_offset)
                            .map(Got::Bytes)
                    }
                    got => Ok(got),
                })
            });
            match result {
                Ok(got) => {
                    let (hw, lso, log_start, len) = match &got {
                        Got::Bytes(r) => (
                            r.high_watermark,
                            r.last_stable_offset,
                            r.log_start_offset,
                            r.records.len(),
                        ),
                        Got::Region(r) => (
                            r.high_watermark,
                            r.last_stable_offset,
                            r.log_start_offset,
                            r.region.as_ref().map_or(0, |region| region.len),
                        ),
                    };
                    out.high_watermark = hw;
                    out.last_stable_offset = lso;
                    out.log_start_offset = log_start;
                    let len = len as i64;
                    // Only the first partition with data may exceed the limits.
                    if len > 0 && (first_with_data || len <= limit) {
                        first_with_data = false;
                        remaining -= len;
                        total += len;
                        match got {
                            Got::Bytes(read) => out.records = Some(Bytes::from(read.records)),
                            Got::Region(read) => {
                                if let Some(region) = read.region {
                                    regions.push((topic_index, partition_index, region));
                                }
                            }
                        }
                    }
                }
                Err(error) => {
                    errors = true;
                    out.error_code = error.code();
                    let moved = matches!(
                        error,
                        ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch
                    );
                    if let (true, true, Some(snapshot), Some(name)) =
                        (version >= 16, moved, snapshot, &name)
                    {
                        out.current_leader =
                            current_leader(snapshot, name, p.partition, &mut node_endpoints);
                    }
                }
            }
            partitions.push(out);
        }
        let response = FetchableTopicResponse::default()
            .with_topic_id(topic.topic_id)
            .with_partitions(partitions);
        responses.push(if version < 13 {
            response.with_topic(topic.topic.clone())
        } else {
            response
        });
    }
    let response = FetchResponse::default()
        .with_session_id(0)
        .with_responses(responses)
        .with_node_endpoints(node_endpoints);
    Read {
        response,
        bytes: total,
        errors,
        regions,
    }
}

/// A partition's read: its records in memory, or where they lie.
enum Got {
    Bytes(replication::ReadResult),
    Region(replication::RegionRead),
}

/// Whether a consumer at `version` needs the records changed ([`convert_for_version`]):
/// then they are read into memory.
fn needs_conversion(partition: &replication::Partition, version: i16) -> bool {
    version < 10
        && (version <= 3 || partition.log_config().compression == Some(records::Compression::Zstd))
}

/// KIP-951: where a partition's leadership is now (metadata cache), adding the leader's
/// endpoint to `endpoints` once.
fn current_leader(
    snapshot: &Snapshot,
    topic: &model::TopicName,
    partition: i32,
    endpoints: &mut Vec<NodeEndpoint>,
) -> LeaderIdAndEpoch {
    let (leader, epoch, broker) = super::current_leader(snapshot, topic.as_str(), partition);
    if let Some(broker) = broker {
        if !endpoints.iter().any(|e| e.node_id.0 == broker.id) {
            endpoints.push(
                NodeEndpoint::default()
                    .with_node_id(BrokerId(broker.id))
                    .with_host(StrBytes::from_string(broker.host.clone()))
                    .with_port(broker.port)
                    .with_rack(broker.rack.clone().map(StrBytes::from_string)),
            );
        }
    }
    LeaderIdAndEpoch::default()
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(epoch)
}

/// A consumer's partition read when the response has no room left: offsets, no records.
fn no_room(
    partition: &replication::Partition,
) -> Result<replication::ReadResult, replication::ReplicationError> {
    if !matches!(partition.role(), replication::Role::Leader { .. }) {
        return Err(replication::ReplicationError::NotLeader(
            partition.topic_partition().clone(),
        ));
    }
    let high_watermark = partition.high_watermark();
    Ok(replication::ReadResult {
        records: Vec::new(),
        high_watermark,
        last_stable_offset: high_watermark,
        log_start_offset: partition.log_start_offset(),
    })
}

/// Kafka's `maybeConvertFetchedData` for a consumer: a zstd topic needs Fetch v10; Fetch
/// v0–v3 consumers get their records down-converted to message format v0 (Fetch v0–v1) or
/// v1 (v2–v3) when the topic allows it (`message.downconversion.enable`), else
/// UNSUPPORTED_VERSION. Nothing to convert (no records) is never an error, as in Kafka.
fn convert_for_version(
    partition: &replication::Partition,
    mut read: replication::ReadResult,
    version: i16,
    fetch_offset: i64,
) -> Result<replication::ReadResult, ResponseError> {
    if version >= 10 {
        return Ok(read);
    }
    let config = partition.log_config();
    if config.compression == Some(records::Compression::Zstd) {
        return Err(ResponseError::UnsupportedCompressionType);
    }
    if version > 3 || read.records.is_empty() {
        return Ok(read);
    }
    if !config.downconversion_enable {
        return Err(ResponseError::UnsupportedVersion);
    }
    let magic = if version <= 1 { 0 } else { 1 };
    let size = read.records.len();
    let converted = records::legacy::down_convert(&read.records, magic, fetch_offset, size)
        .map_err(|e| match e {
            records::legacy::DownConvertError::Zstd => ResponseError::UnsupportedCompressionType,
            records::legacy::DownConvertError::Corrupt(_) => ResponseError::CorruptMessage,
        })?;
    // As Kafka's lazy down-conversion: at most the size read (a message cut at the end is
    // fine for these clients), but at least the first converted batch.
    let mut bytes = converted.bytes;
    bytes.truncate(size.max(converted.first_size));
    read.records = bytes;
    Ok(read)
}
