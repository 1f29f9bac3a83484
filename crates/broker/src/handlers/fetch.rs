//! Fetch (v0–v17): whole record batches straight from the segment files, with long polling
//! and incremental fetch sessions (KIP-227, v7+). From v13 topics are named by id (an id the
//! metadata cache does not know is UNKNOWN_TOPIC_ID, one the local log's `partition.metadata`
//! does not have INCONSISTENT_TOPIC_ID, as Kafka 3.9); v15 moves the follower's id into
//! `replica_state`; v16 adds, for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, the current
//! leader and its endpoint (KIP-951); v17 adds the follower's directory id (ignored: one
//! directory per partition). Fetch v0–v3 consumers get message format v0/v1, down-converted
//! per partition (bounded by what was read for it: at most `partition_max_bytes` plus one
//! batch).
//!
//! The answer goes out as soon as `min_bytes` are there, any partition has an error, or
//! `max_wait_ms` has passed; until then the request waits for the next append (a
//! notification, not polling) and reads again. `max_bytes` (v3+) bounds the response and
//! `partition_max_bytes` each partition; as in Kafka, the first batch of the first partition
//! with data is returned whole even when larger. Sessions live in the replica manager's
//! `FetchSessionCache`: epoch 0 creates one (its id is in the answer), later epochs name only
//! changed partitions and get only partitions with news, epoch -1 fetches without one;
//! FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH make the client start over.
//! Consumers read below the high watermark (READ_COMMITTED ones, `isolation_level` 1 from
//! v4, below the last stable offset, with the aborted transactions their range overlaps, as
//! Kafka's `collectAbortedTransactions`; `last_stable_offset` is set at both levels); followers (`replica_id` >= 0) read up to the log
//! end, and their fetch offset tells the leader how far they are (the ISR and the high
//! watermark follow). `current_leader_epoch` (v9+) is checked: FENCED_LEADER_EPOCH when older
//! than the leader's, UNKNOWN_LEADER_EPOCH when newer.
//!
//! The request's `max_bytes` is capped by the broker's `fetch.max.bytes` for consumers and
//! `replica.fetch.response.max.bytes` for followers (Kafka's defaults 55 MiB and 10 MiB), and
//! `min_bytes` by that cap, as Kafka does: a Fetch asking for 2 GiB never makes the broker
//! read more than the cap (plus, as KIP-74 allows, one first batch that is larger).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::HashMap;

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use replication::fetch_session::{
    FetchContext, FetchPosition, OpenedFetch, PartitionOutcome, SessionKey,
};
use tokio::time::Instant;
use uuid::Uuid;

use crate::context::BrokerContext;
use crate::data_plane::now_ms;
use crate::metadata_cache::Snapshot;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    let replica = replica_id(&request, version);
    let privileged = replica >= 0;
    // v13+ name topics by id (resolved in the metadata cache), v16+ hint at the leader.
    let snapshot = (version >= 13).then(|| ctx.metadata_cache.snapshot());
    // Sessions are keyed by topic name; an id nobody knows gets a key no topic name can have
    // (read as UNKNOWN_TOPIC_ID). The ids go back into the v13+ response.
    let mut ids: HashMap<String, Uuid> = HashMap::new();
    let mut key_of = |name: &TopicName, id: Uuid| -> String {
        match &snapshot {
            None => name.0.to_string(),
            Some(snapshot) => {
                let key = snapshot
                    .topic_name(id)
                    .map_or_else(|| format!("{UNKNOWN_ID_PREFIX}{id}"), str::to_owned);
                ids.insert(key.clone(), id);
                key
            }
        }
    };
    let requested: Vec<(SessionKey, FetchPosition)> = request
        .topics
        .iter()
        .flat_map(|t| {
            let topic = key_of(&t.topic, t.topic_id);
            t.partitions.iter().map(move |p| {
                (
                    (topic.clone(), p.partition),
                    FetchPosition {
                        fetch_offset: p.fetch_offset,
                        max_bytes: p.partition_max_bytes,
                        current_leader_epoch: p.current_leader_epoch,
                        log_start_offset: p.log_start_offset,
                    },
                )
            })
        })
        .collect();
    let forgotten: Vec<SessionKey> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let topic = key_of(&t.topic, t.topic_id);
            t.partitions.iter().map(move |&p| (topic.clone(), p))
        })
        .collect();
    let sessions = ctx.replica_manager.fetch_sessions();
    let mut opened = match sessions.open(
        request.session_id,
        request.session_epoch,
        requested,
        &forgotten,
        now_ms(),
    ) {
        Ok(opened) => opened,
        Err(error) => {
            return FetchResponse::default()
                .with_error_code(error.code())
                .with_session_id(0);
        }
    };
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let deadline = Instant::now() + max_wait;
    let max_bytes = response_max_bytes(ctx, &request, version);
    let min_bytes = i64::from(request.min_bytes.max(0)).min(max_bytes);
    let mut appends = ctx.replica_manager.subscribe_appends();
    // A consumer on a connection that can `sendfile` gets its records from the page cache
    // (Fetch v4+: older versions are down-converted in memory).
    let zero_copy = crate::zero_copy::enabled() && !privileged && version >= 4;
    // Followers need CLUSTER_ACTION on the cluster, consumers READ on each topic (Kafka's
    // handleFetchRequest).
    let deny_all = privileged
        && !super::authorized_cluster(ctx, rctx, security::acl::Operation::ClusterAction);
    let denied = Arc::new(if privileged {
        Default::default()
    } else {
        super::denied_topics(
            ctx,
            rctx,
            security::acl::Operation::Read,
            opened
                .partitions
                .iter()
                .map(|((topic, _), _)| topic.as_str()),
        )
    });
    // The reads touch the segment files: off the async workers. Each takes the partitions
    // to read and gives them back.
    // READ_COMMITTED (v4+, consumers): up to the last stable offset, with the aborted
    // transactions in range.
    let read_committed = !privileged && version >= 4 && request.isolation_level == 1;
    let read = |opened: OpenedFetch| {
        let rm = ctx.replica_manager.clone();
        let snapshot = snapshot.clone();
        let denied = Arc::clone(&denied);
        crate::blocking::run(move || {
            let fetch = Fetch {
                replica,
                max_bytes,
                version,
                zero_copy,
                denied,
                deny_all,
                read_committed,
            };
            let reads = read_all(&rm, snapshot.as_deref(), &opened, &fetch);
            (opened, reads)
        })
    };
    let mut reads = loop {
        appends.borrow_and_update();
        // A follower's session reads again what it read, plus what changed since it opened.
        sessions.extend(&mut opened);
        let (back, reads) = read(opened).await;
        opened = back;
        let enough = reads.bytes >= min_bytes || reads.errors;
        if enough || max_wait.is_zero() || Instant::now() >= deadline {
            break reads;
        }
        // Long polling: parked, so a waiting fetch keeps no other request from being read.
        // A follower held by the leader throttle looks again as soon as the quota may have
        // room (it would otherwise wait for the next append or the whole max wait).
        let wake = if privileged && ctx.replica_manager.throttles().leader.rate().is_some() {
            deadline.min(Instant::now() + LEADER_THROTTLE_RECHECK)
        } else {
            deadline
        };
        match crate::limits::parked(tokio::time::timeout_at(wake, appends.changed())).await {
            Err(_) if wake < deadline => continue,
            Ok(Ok(())) => continue,
            // Timed out, or the broker is shutting down: answer with what is there.
            _ => {
                sessions.extend(&mut opened);
                let (back, reads) = read(opened).await;
                opened = back;
                break reads;
            }
        }
    };
    // A consumer over its `consumer_byte_rate` or its `request_percentage` gets Kafka's
    // throttled answer: no records (their bytes are not counted), `throttle_time_ms` (the
    // larger of the two), the session left as the request found it (an incremental one keeps
    // its id; a full fetch creates none).
    if !privileged {
        let request_throttle = crate::quotas::throttle_request(ctx, rctx, header);
        let throttle =
            crate::quotas::throttle_fetch(ctx, rctx, header, reads.bytes, request_throttle > 0)
                .max(request_throttle);
        if throttle > 0 {
            let session_id = match opened.context {
                FetchContext::Incremental { session_id } => session_id,
                _ => 0,
            };
            return FetchResponse::default()
                .with_throttle_time_ms(throttle)
                .with_session_id(session_id);
        }
    }
    let (session_id, include) = sessions.close(
        &opened.context,
        &opened.partitions,
        &reads.outcomes,
        privileged,
        now_ms(),
    );
    // The file regions attached for a zero-copy send (only of partitions that go out).
    for (index, region) in std::mem::take(&mut reads.regions) {
        if include.get(index).copied().unwrap_or(false) {
            reads.data[index].records = Some(crate::zero_copy::attach(region));
        }
    }
    let mut responses: Vec<(String, FetchableTopicResponse)> = Vec::new();
    for (((topic, _), data), included) in opened
        .partitions
        .iter()
        .map(|(key, _)| key)
        .zip(reads.data)
        .zip(include)
    {
        if !included {
            continue;
        }
        match responses.last_mut() {
            Some((key, t)) if key == topic => t.partitions.push(data),
            _ => {
                let response = FetchableTopicResponse::default().with_partitions(vec![data]);
                let response = match &snapshot {
                    // v13+: the topic by id only. An incremental session answers partitions
                    // this request did not name: their id comes from the metadata cache.
                    Some(snapshot) => {
                        response.with_topic_id(ids.get(topic).copied().unwrap_or_else(|| {
                            snapshot
                                .topics
                                .get(topic)
                                .map_or(Uuid::nil(), |info| info.topic_id)
                        }))
                    }
                    None => response.with_topic(TopicName(StrBytes::from_string(topic.clone()))),
                };
                responses.push((topic.clone(), response));
            }
        }
    }
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(responses.into_iter().map(|(_, t)| t).collect())
        .with_node_endpoints(std::mem::take(&mut reads.node_endpoints))
}

/// How often a follower fetch held by the leader throttle reads again while it waits.
const LEADER_THROTTLE_RECHECK: Duration = Duration::from_millis(20);

/// Where a session key of a topic id nobody knows starts (a character no topic name has).
const UNKNOWN_ID_PREFIX: char = '\u{0}';

/// The fetching replica's id (-1 for a consumer): in `replica_state` from v15.
pub(super) fn replica_id(request: &FetchRequest, version: i16) -> i32 {
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

/// One read of every partition of a fetch.
struct Reads {
    /// Per partition, in the opened order.
    data: Vec<PartitionData>,
    outcomes: Vec<PartitionOutcome>,
    /// (index in `data`, records) to send from the files (zero copy).
    regions: Vec<(usize, storage::log::FileRegion)>,
    /// Record bytes read.
    bytes: i64,
    /// Whether any partition has an error.
    errors: bool,
    /// v16+: the endpoints of the leaders named in `current_leader`s.
    node_endpoints: Vec<NodeEndpoint>,
}

/// What one fetch asks of every read.
struct Fetch {
    /// The fetching replica (-1 for a consumer).
    replica: i32,
    max_bytes: i64,
    version: i16,
    zero_copy: bool,
    /// Topics the principal may not read (TOPIC_AUTHORIZATION_FAILED).
    denied: Arc<std::collections::HashSet<String>>,
    /// A follower without CLUSTER_ACTION: every partition is refused.
    deny_all: bool,
    /// A consumer at READ_COMMITTED.
    read_committed: bool,
}

/// A partition's read: its records in memory, or where they lie.
enum Got {
    Bytes(replication::ReadResult),
    Region(replication::RegionRead),
}

/// Reads every partition of `opened` once, at most `max_bytes` of records in all (with
/// `zero_copy`, only where they lie, for consumers that need no conversion).
fn read_all(
    rm: &replication::ReplicaManager,
    snapshot: Option<&Snapshot>,
    opened: &OpenedFetch,
    fetch: &Fetch,
) -> Reads {
    let &Fetch {
        replica,
        max_bytes,
        version,
        zero_copy,
        read_committed,
        ..
    } = fetch;
    let mut remaining = max_bytes;
    let mut reads = Reads {
        data: Vec::with_capacity(opened.partitions.len()),
        outcomes: Vec::with_capacity(opened.partitions.len()),
        regions: Vec::new(),
        bytes: 0,
        errors: false,
        node_endpoints: Vec::new(),
    };
    let mut first_with_data = true;
    let now = now_ms();
    for ((topic, partition_index), position) in &opened.partitions {
        let mut out = PartitionData::default()
            .with_partition_index(*partition_index)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(BrokerId(-1))
            .with_records(Some(Bytes::new()));
        let unknown = if topic.starts_with(UNKNOWN_ID_PREFIX) {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let name = topic.parse::<model::TopicName>().ok();
        let refused = fetch.deny_all || fetch.denied.contains(topic.as_str());
        let partition = name
            .clone()
            .filter(|_| !refused)
            .map(|n| TopicPartition::new(n, *partition_index))
            .ok_or(if refused {
                ResponseError::TopicAuthorizationFailed
            } else {
                unknown
            })
            .and_then(|tp| rm.partition(&tp).map_err(|e| e.response_error()))
            .and_then(|partition| {
                // v13+: the id the request named (the metadata cache's for this name) must be
                // the log's, as Kafka's `ReplicaManager.readFromLog` checks.
                let requested = snapshot
                    .and_then(|s| s.topics.get(topic.as_str()))
                    .map_or(Uuid::nil(), |info| info.topic_id);
                if partition.has_consistent_topic_id(requested) {
                    Ok(partition)
                } else {
                    Err(ResponseError::InconsistentTopicId)
                }
            });
        let limit = i64::from(position.max_bytes.max(0)).min(remaining);
        let epoch = position.current_leader_epoch;
        let mut follower_at_end = false;
        let result = partition.and_then(|partition| {
            let max = limit.max(0) as usize;
            if replica >= 0 {
                // A follower: reads up to the log end and reports its own log end.
                rm.fetch_for_follower(
                    partition.topic_partition(),
                    replica,
                    position.fetch_offset,
                    max,
                    epoch,
                    now,
                )
                .map(|(read, at_end)| {
                    follower_at_end = at_end;
                    Got::Bytes(read)
                })
            } else if limit <= 0 && !first_with_data {
                // No room left in the response: answer the partition's offsets without
                // reading a batch that would be dropped.
                partition.read_offsets(epoch).map(Got::Bytes)
            } else if zero_copy && !needs_conversion(&partition, version) {
                partition
                    .read_region_isolated(position.fetch_offset, max, epoch, read_committed)
                    .map(Got::Region)
            } else {
                partition
                    .read_isolated(position.fetch_offset, max, epoch, read_committed)
                    .map(Got::Bytes)
            }
            .map_err(|e| e.response_error())
            .and_then(|got| match got {
                Got::Bytes(read) if replica < 0 => {
                    convert_for_version(&partition, read, version, position.fetch_offset)
                        .map(Got::Bytes)
                }
                got => Ok(got),
            })
        });
        let mut has_records = false;
        match result {
            Ok(got) => {
                let (hw, lso, log_start, len, aborted) = match &got {
                    Got::Bytes(r) => (
                        r.high_watermark,
                        r.last_stable_offset,
                        r.log_start_offset,
                        r.records.len(),
                        r.aborted_transactions.as_deref(),
                    ),
                    Got::Region(r) => (
                        r.high_watermark,
                        r.last_stable_offset,
                        r.log_start_offset,
                        r.region.as_ref().map_or(0, |region| region.len),
                        r.aborted_transactions.as_deref(),
                    ),
                };
                out.aborted_transactions = aborted.map(|txns| {
                    txns.iter()
                        .map(|t| {
                            AbortedTransaction::default()
                                .with_producer_id(ProducerId(t.producer_id))
                                .with_first_offset(t.first_offset)
                        })
                        .collect()
                });
                out.high_watermark = hw;
                out.last_stable_offset = lso;
                out.log_start_offset = log_start;
                let len = len as i64;
                // Only the first partition with data may exceed the limits.
                if len > 0 && (first_with_data || len <= limit) {
                    first_with_data = false;
                    remaining -= len;
                    reads.bytes += len;
                    has_records = true;
                    match got {
                        Got::Bytes(read) => out.records = Some(Bytes::from(read.records)),
                        Got::Region(read) => {
                            if let Some(region) = read.region {
                                reads.regions.push((reads.data.len(), region));
                            }
                        }
                    }
                }
            }
            Err(error) => {
                reads.errors = true;
                out.error_code = error.code();
                let moved = matches!(
                    error,
                    ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch
                );
                if let (true, true, Some(snapshot), Some(name)) =
                    (version >= 16, moved, snapshot, &name)
                {
                    out.current_leader =
                        current_leader(snapshot, name, *partition_index, &mut reads.node_endpoints);
                }
            }
        }
        reads.outcomes.push(PartitionOutcome {
            error_code: out.error_code,
            has_records,
            high_watermark: out.high_watermark,
            log_start_offset: out.log_start_offset,
            at_end: follower_at_end,
        });
        reads.data.push(out);
    }
    reads
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

/// Whether a consumer at `version` needs the records changed ([`convert_for_version`]):
/// then they are read into memory.
fn needs_conversion(partition: &replication::Partition, version: i16) -> bool {
    version < 10
        && (version <= 3 || partition.log_config().compression == Some(records::Compression::Zstd))
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
