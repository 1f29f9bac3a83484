//! Consumer groups on this broker: one [`GroupCoordinator`] holding the groups of the
//! `__consumer_offsets` partitions this broker leads, their committed offsets and metadata
//! kept in that topic.
//!
//! # Which broker coordinates
//!
//! The coordinator of group G is the leader of partition `abs(G.hashCode) % partitions` of
//! `__consumer_offsets` (`group_coordinator::log_records::partition_for`), as in Kafka.
//! FindCoordinator answers that leader (creating the topic through the controller the first
//! time). This broker follows its own leadership: after every LeaderAndIsr and StopReplica,
//! and every half second as a safety net, [`Groups::reconcile`] compares the offsets
//! partitions it leads with those it has loaded. A partition it newly leads is *loading*
//! (its groups answer COORDINATOR_LOAD_IN_PROGRESS) while its log is replayed on the
//! blocking pool: offsets, group metadata and tombstones, up to the log end. A partition it
//! no longer leads is unloaded: its groups are forgotten and answer NOT_COORDINATOR, parked
//! JoinGroup and SyncGroup requests too, so clients find the new coordinator.
//!
//! # What is stored
//!
//! Kafka's records, byte for byte (`group_coordinator::log_records`): an OffsetCommit is one
//! batch of offset records appended to the group's partition, answered once the high
//! watermark covers it (acks=all, `offsets.commit.timeout.ms`); a completed rebalance or a
//! group that became empty appends its group metadata the same way before the SyncGroup
//! answers leave; a KIP-848 group appends the `ConsumerGroup*` records that changed
//! (`group_coordinator::consumer_records`) before the ConsumerGroupHeartbeat answer leaves,
//! and a coordinator loading the partition resumes it from them (members, epochs,
//! assignments); DeleteGroups, OffsetDelete, expired offsets and deleted topics append
//! tombstones. Nothing is fsynced per commit: durability comes from the in-sync replicas.
//! Member registrations (`/consumers/<group>/ids/<member>`) and owners
//! (`/consumers/<group>/owners/<t>/<p>`) are still written to the metadata store, for tools.
//!
//! # Upgrade
//!
//! Gregor used to keep committed offsets at `/consumers/<group>/offsets/<t>/<p>`. A broker
//! that loads an offsets partition whose log is empty imports the offsets of that partition's
//! groups from there once (appending them as commit records), so an upgraded cluster keeps
//! every group's position.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use group_coordinator::log_records::{self, LogRecord, OffsetValue, OFFSETS_TOPIC};
use group_coordinator::{
    ClientInfo, GroupConfig, GroupCoordinator, GroupMetadataSnapshot, GroupOffsets,
    MembershipEvent, MembershipSink, OffsetAndMetadata, OffsetStore, OffsetStoreError,
    TopicMetadata,
};
use model::{TopicName, TopicPartition};
use tracing::{info, warn};
use znodes::json::ConsumerMemberZNode;

use crate::config::BrokerConfig;
use crate::context::BrokerContext;
use crate::data_plane::now_ms;
use crate::led_partitions::{Changes, CreationAsked, LedPartitions, Load};

/// Pending transactional offsets: group -> producer id -> offsets.
type PendingOffsets = BTreeMap<String, BTreeMap<i64, BTreeMap<TopicPartition, OffsetAndMetadata>>>;

/// The coordinator type this broker runs.
pub(crate) type Coordinator = GroupCoordinator<TopicOffsetStore, ZkMembershipSink>;

/// Kafka's NOT_COORDINATOR error code.
pub(crate) const NOT_COORDINATOR: i16 = 16;
/// Kafka's COORDINATOR_NOT_AVAILABLE error code.
pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// Kafka's COORDINATOR_LOAD_IN_PROGRESS error code.
pub(crate) const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

tokio::task_local! {
    /// The peer of the connection whose request is being handled (JoinGroup and KIP-848
    /// heartbeats record it as the member's host).
    pub(crate) static PEER: SocketAddr;
}

/// How often the broker compares the offsets partitions it leads with those it has loaded
/// (a safety net: LeaderAndIsr and StopReplica trigger the comparison at once).
const RECONCILE_INTERVAL: Duration = Duration::from_millis(500);

/// How many bytes one read of a load takes (Kafka's `offsets.load.buffer.size` default).
const LOAD_READ_BYTES: usize = 5 * 1024 * 1024;

/// The broker's groups: the coordinator (started with the broker) and the offsets partitions
/// whose groups it holds, by partition: (leader epoch, load state).
#[derive(Debug, Default)]
pub(crate) struct Groups {
    coordinator: Mutex<Option<Coordinator>>,
    partitions: LedPartitions,
    /// The topics of the last metadata update (a topic gone from it was deleted).
    known_topics: Mutex<Option<BTreeSet<String>>>,
    /// When this broker last asked the controller to create `__consumer_offsets`.
    offsets_topic_asked: CreationAsked,
    /// Transactional offsets written but not yet committed (TxnOffsetCommit before the
    /// COMMIT marker): group -> producer id -> offsets. A COMMIT marker makes them the
    /// group's offsets, an ABORT drops them.
    pending: Mutex<PendingOffsets>,
    ctx: OnceLock<Weak<BrokerContext>>,
    /// Committed offsets on their way to `/consumers/<group>/offsets` (the seed's view).
    pub(crate) mirror: crate::offsets_mirror::OffsetsMirror,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is a single assignment or map edit, so a poisoned value is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Groups {
    /// Starts the coordinator and the task that follows this broker's offsets partitions.
    pub(crate) fn start(ctx: &Arc<BrokerContext>) {
        let _ = ctx.groups.ctx.set(Arc::downgrade(ctx));
        let weak = Arc::downgrade(ctx);
        let config = group_config(&ctx.config);
        crate::offsets_mirror::start(ctx);
        tokio::spawn(async move {
            let store = Arc::new(TopicOffsetStore { ctx: weak.clone() });
            let sink = Arc::new(ZkMembershipSink { ctx: weak.clone() });
            match Coordinator::start(config, store, sink).await {
                Ok(coordinator) => {
                    let Some(ctx) = weak.upgrade() else { return };
                    coordinator.set_topics(topics(&ctx));
                    *lock(&ctx.groups.coordinator) = Some(coordinator);
                }
                Err(err) => {
                    warn!(%err, "cannot start the group coordinator");
                    return;
                }
            }
            loop {
                let Some(ctx) = weak.upgrade() else { return };
                ctx.groups.reconcile();
                drop(ctx);
                tokio::time::sleep(RECONCILE_INTERVAL).await;
            }
        });
    }

    /// Stops the coordinator (broker shutdown); parked JoinGroup/SyncGroup requests are
    /// answered COORDINATOR_NOT_AVAILABLE.
    pub(crate) fn stop(&self, why: &str) {
        self.partitions.clear();
        let stopped = lock(&self.coordinator).take();
        if let Some(coordinator) = stopped {
            info!(why, "no longer coordinating consumer groups");
            coordinator.shutdown();
        }
    }

    /// Whether to ask the controller to create `__consumer_offsets` now: at most once per
    /// `every` (FindCoordinator is retried by every client until the topic exists).
    pub(crate) fn should_create_offsets_topic(&self, every: Duration) -> bool {
        self.offsets_topic_asked.ask_now(every)
    }

    fn coordinator(&self) -> Option<Coordinator> {
        lock(&self.coordinator).clone()
    }

    fn ctx(&self) -> Option<Arc<BrokerContext>> {
        self.ctx.get().and_then(Weak::upgrade)
    }

    /// Whether this broker serves `group_id` now: `Ok` when it leads the group's offsets
    /// partition and has loaded it, else the code to answer (`NOT_COORDINATOR`,
    /// `COORDINATOR_LOAD_IN_PROGRESS`).
    pub(crate) fn check(&self, ctx: &BrokerContext, group_id: &str) -> Result<(), i16> {
        let partition = log_records::partition_for(group_id, offsets_partitions(ctx));
        match self.partitions.get(partition) {
            Some((_, Load::Loaded)) => Ok(()),
            Some((_, Load::Loading)) => Err(COORDINATOR_LOAD_IN_PROGRESS),
            None => Err(NOT_COORDINATOR),
        }
    }

    /// The coordinator, if this broker coordinates `group_id` now (see [`Groups::check`]).
    pub(crate) async fn serving(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
    ) -> Result<Coordinator, i16> {
        self.check(ctx, group_id)?;
        self.coordinator().ok_or(NOT_COORDINATOR)
    }

    /// The coordinator with every group this broker holds (ListGroups): while an offsets
    /// partition is loading the list would be incomplete, so Kafka's
    /// COORDINATOR_LOAD_IN_PROGRESS (clients retry).
    pub(crate) fn serving_all(&self) -> Result<Coordinator, i16> {
        if self.partitions.any_loading() {
            return Err(COORDINATOR_LOAD_IN_PROGRESS);
        }
        self.coordinator().ok_or(NOT_COORDINATOR)
    }

    /// Splits the groups of a multi-group request into those this broker serves (first) and
    /// those refused with their code (second), and the coordinator for the first.
    pub(crate) fn split<T>(
        &self,
        ctx: &BrokerContext,
        items: Vec<T>,
        group_of: impl Fn(&T) -> &str,
    ) -> (Option<Coordinator>, Vec<T>, Vec<(T, i16)>) {
        let coordinator = self.coordinator();
        let mut served = Vec::new();
        let mut refused = Vec::new();
        for item in items {
            match self.check(ctx, group_of(&item)) {
                Ok(()) if coordinator.is_some() => served.push(item),
                Ok(()) => refused.push((item, NOT_COORDINATOR)),
                Err(code) => refused.push((item, code)),
            }
        }
        (coordinator, served, refused)
    }

    /// Compares the offsets partitions this broker leads with those it holds: starts loading
    /// the newly led ones and unloads the others (their groups answer NOT_COORDINATOR).
    pub(crate) fn reconcile(&self) {
        let (Some(ctx), Some(coordinator)) = (self.ctx(), self.coordinator()) else {
            return;
        };
        let Changes { to_load, to_unload } =
            self.partitions
                .reconcile(&ctx.replica_manager, offsets_partitions(&ctx), offsets_tp);
        if !to_unload.is_empty() {
            let n = offsets_partitions(&ctx);
            let dropped = coordinator
                .unload_groups(|group| to_unload.contains(&log_records::partition_for(group, n)));
            lock(&self.pending)
                .retain(|group, _| !to_unload.contains(&log_records::partition_for(group, n)));
            info!(partitions = ?to_unload, groups = dropped, "unloaded groups of offsets partitions led elsewhere now");
        }
        for (partition, epoch) in to_load {
            let ctx = Arc::clone(&ctx);
            let coordinator = coordinator.clone();
            tokio::spawn(async move {
                load_partition(ctx, coordinator, partition, epoch).await;
            });
        }
    }
}

/// Replays one offsets partition into the coordinator (importing the old store's offsets of
/// its groups first when its log is empty), unless leadership moved meanwhile.
async fn load_partition(
    ctx: Arc<BrokerContext>,
    coordinator: Coordinator,
    partition: i32,
    epoch: i32,
) {
    let started = std::time::Instant::now();
    let tp = offsets_tp(partition);
    let rm = ctx.replica_manager.clone();
    let read_tp = tp.clone();
    let replayed = crate::blocking::run(move || replay(&rm, &read_tp)).await;
    let mut replayed = match replayed {
        Ok(replayed) => replayed,
        Err(err) => {
            warn!(%tp, %err, "cannot load offsets partition; retrying");
            ctx.groups.partitions.load_failed(partition, epoch);
            return;
        }
    };
    if replayed.log_end_offset == 0 {
        match import_from_store(&ctx, partition).await {
            Ok(imported) => {
                for (group, offsets) in imported {
                    replayed.offsets.entry(group).or_default().extend(offsets);
                }
            }
            Err(err) => warn!(%tp, %err, "cannot import committed offsets from /consumers"),
        }
    }
    let groups = replayed.groups.len();
    let offsets: usize = replayed.offsets.values().map(BTreeMap::len).sum();
    let consumer_groups = replayed.consumer_groups.len();
    let installed = ctx.groups.partitions.finish_load(partition, epoch, || {
        coordinator.load_groups(replayed.offsets, replayed.groups);
        coordinator.load_consumer_groups(replayed.consumer_groups);
        lock(&ctx.groups.pending).extend(replayed.pending);
    });
    if installed.is_none() {
        // Leadership moved while the log was read: the newer state wins.
        return;
    }
    info!(%tp, leader_epoch = epoch, groups, consumer_groups, offsets, elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded consumer groups of offsets partition");
}

/// What a partition's log says.
#[derive(Debug, Default)]
struct Replayed {
    offsets: GroupOffsets,
    /// Transactional offsets whose transaction has no marker yet.
    pending: PendingOffsets,
    groups: BTreeMap<String, GroupMetadataSnapshot>,
    /// KIP-848 groups' live records (group -> key -> value).
    consumer_groups: BTreeMap<String, group_coordinator::consumer_records::GroupRecords>,
    log_end_offset: i64,
}

/// Reads a partition's log from its start to its end and applies every record in order
/// (disk I/O: run on the blocking pool).
fn replay(rm: &replication::ReplicaManager, tp: &TopicPartition) -> Result<Replayed, String> {
    let partition = rm.partition(tp).map_err(|e| e.to_string())?;
    let end = partition.log_end_offset();
    let mut offset = partition.log_start_offset();
    let mut offsets = GroupOffsets::new();
    let mut groups: BTreeMap<String, Option<GroupMetadataSnapshot>> = BTreeMap::new();
    let mut consumer_groups: BTreeMap<String, group_coordinator::consumer_records::GroupRecords> =
        BTreeMap::new();
    let mut skipped = 0usize;
    // Transactional offsets by producer until their marker: group -> offsets.
    let mut open: BTreeMap<i64, GroupOffsets> = BTreeMap::new();
    while offset < end {
        let bytes = partition
            .read_to_log_end(offset, LOAD_READ_BYTES)
            .map_err(|e| e.to_string())?;
        if bytes.is_empty() {
            break;
        }
        let batches = records::validate_record_set(&bytes).map_err(|e| e.to_string())?;
        for batch in batches {
            let header = batch.header;
            offset = header.next_offset();
            if header.is_control() {
                let section =
                    records::records_section(&bytes[batch.range()]).map_err(|e| e.to_string())?;
                let commit = records::record::records(&section, header.records_count)
                    .ok()
                    .and_then(|r| r.into_iter().next())
                    .and_then(|r| r.key.map(marker_is_commit))
                    .unwrap_or(None);
                if let Some(txn) = open.remove(&header.producer_id) {
                    if commit == Some(true) {
                        for (group, committed) in txn {
                            offsets.entry(group).or_default().extend(committed);
                        }
                    }
                }
                continue;
            }
            let transactional = header.is_transactional();
            let section =
                records::records_section(&bytes[batch.range()]).map_err(|e| e.to_string())?;
            let records = records::record::records(&section, header.records_count)
                .map_err(|e| e.to_string())?;
            for record in records {
                let Some(key) = record.key else {
                    skipped += 1;
                    continue;
                };
                if let Some(group) = group_coordinator::consumer_records::group_of_key(key) {
                    let live = consumer_groups.entry(group).or_default();
                    match record.value {
                        Some(value) => live.insert(key.to_vec(), value.to_vec()),
                        None => live.remove(key),
                    };
                    continue;
                }
                match log_records::decode(key, record.value) {
                    Ok(LogRecord::Offset {
                        group,
                        topic,
                        partition,
                        value,
                    }) => {
                        let Ok(topic) = topic.parse::<TopicName>() else {
                            skipped += 1;
                            continue;
                        };
                        let tp = TopicPartition::new(topic, partition);
                        if transactional {
                            if let Some(v) = value {
                                open.entry(header.producer_id)
                                    .or_default()
                                    .entry(group)
                                    .or_default()
                                    .insert(
                                        tp,
                                        OffsetAndMetadata {
                                            offset: v.offset,
                                            leader_epoch: v.leader_epoch,
                                            metadata: v.metadata,
                                            commit_timestamp_ms: v.commit_timestamp_ms,
                                            expire_timestamp_ms: v.expire_timestamp_ms,
                                        },
                                    );
                            }
                            continue;
                        }
                        match value {
                            Some(v) => {
                                offsets.entry(group).or_default().insert(
                                    tp,
                                    OffsetAndMetadata {
                                        offset: v.offset,
                                        leader_epoch: v.leader_epoch,
                                        metadata: v.metadata,
                                        commit_timestamp_ms: v.commit_timestamp_ms,
                                        expire_timestamp_ms: v.expire_timestamp_ms,
                                    },
                                );
                            }
                            None => {
                                if let Some(group_offsets) = offsets.get_mut(&group) {
                                    group_offsets.remove(&tp);
                                    if group_offsets.is_empty() {
                                        offsets.remove(&group);
                                    }
                                }
                            }
                        }
                    }
                    Ok(LogRecord::Group { group, value }) => {
                        groups.insert(group, value);
                    }
                    Ok(LogRecord::Unsupported { .. }) | Err(_) => skipped += 1,
                }
            }
        }
    }
    if skipped > 0 {
        warn!(%tp, skipped, "records of the offsets partition that this broker does not read");
    }
    let mut pending = PendingOffsets::new();
    for (producer_id, txn) in open {
        for (group, group_offsets) in txn {
            pending
                .entry(group)
                .or_default()
                .insert(producer_id, group_offsets.into_iter().collect());
        }
    }
    Ok(Replayed {
        offsets,
        pending,
        groups: groups
            .into_iter()
            .filter_map(|(group, value)| Some((group, value?)))
            .collect(),
        consumer_groups: consumer_groups
            .into_iter()
            .filter(|(_, records)| !records.is_empty())
            .collect(),
        log_end_offset: end,
    })
}

/// The offsets the old store (`/consumers/<group>/offsets`) holds for the groups of
/// `partition`, appended to the partition as commit records.
async fn import_from_store(
    ctx: &Arc<BrokerContext>,
    partition: i32,
) -> Result<GroupOffsets, OffsetStoreError> {
    let n = offsets_partitions(ctx);
    let all = ctx
        .zk()
        .get_all_consumer_offsets()
        .await
        .map_err(|e| OffsetStoreError(e.to_string()))?;
    let mut imported = GroupOffsets::new();
    for (group, offsets) in all {
        if log_records::partition_for(&group, n) != partition {
            continue;
        }
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = offsets
            .into_iter()
            .map(|(tp, stored)| {
                (
                    tp,
                    OffsetAndMetadata {
                        offset: stored.offset,
                        leader_epoch: -1,
                        metadata: String::new(),
                        commit_timestamp_ms: stored.mtime_ms,
                        expire_timestamp_ms: None,
                    },
                )
            })
            .collect();
        if offsets.is_empty() {
            continue;
        }
        let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = offsets
            .iter()
            .map(|(tp, o)| offset_record(&group, tp, o))
            .collect();
        // Acks=1: the followers may still be starting; the next commits wait for them.
        append(ctx, partition, records, now_ms(), false).await?;
        info!(
            group,
            partition,
            offsets = offsets.len(),
            "imported committed offsets from /consumers"
        );
        imported.insert(group, offsets.into_iter().collect());
    }
    Ok(imported)
}

/// The partition count of `__consumer_offsets`: the topic's, else `offsets.topic.num.partitions`.
pub(crate) fn offsets_partitions(ctx: &BrokerContext) -> i32 {
    ctx.metadata_cache
        .snapshot()
        .topics
        .get(OFFSETS_TOPIC)
        .and_then(|t| i32::try_from(t.partitions.len()).ok())
        .filter(|&n| n > 0)
        .unwrap_or(ctx.config.offsets_topic_num_partitions)
}

fn offsets_tp(partition: i32) -> TopicPartition {
    TopicPartition::new(
        OFFSETS_TOPIC
            .parse()
            .expect("__consumer_offsets is a valid topic name"),
        partition,
    )
}

/// One offset commit record: Kafka's key v1 and value v3 (v1 when the commit carried an
/// explicit retention).
fn offset_record(
    group: &str,
    tp: &TopicPartition,
    offset: &OffsetAndMetadata,
) -> (Vec<u8>, Option<Vec<u8>>) {
    (
        log_records::offset_key(group, tp.topic.as_str(), tp.partition),
        Some(log_records::offset_value(&OffsetValue {
            offset: offset.offset,
            leader_epoch: offset.leader_epoch,
            metadata: offset.metadata.clone(),
            commit_timestamp_ms: offset.commit_timestamp_ms,
            expire_timestamp_ms: offset.expire_timestamp_ms,
        })),
    )
}

/// Appends `records` (key, value or tombstone) to offsets partition `partition` as one batch
/// (compressed with `offsets.topic.compression.codec`, CreateTime `timestamp`), and with
/// `wait_for_isr` answers only once the high watermark covers them.
async fn append(
    ctx: &BrokerContext,
    partition: i32,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    timestamp: i64,
    wait_for_isr: bool,
) -> Result<(), OffsetStoreError> {
    append_as(ctx, partition, records, timestamp, wait_for_isr, None).await
}

/// [`append`], as a transactional batch of producer (id, epoch) when given (TxnOffsetCommit).
async fn append_as(
    ctx: &BrokerContext,
    partition: i32,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    timestamp: i64,
    wait_for_isr: bool,
    producer: Option<(i64, i16)>,
) -> Result<(), OffsetStoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let tp = offsets_tp(partition);
    let compression =
        crate::config::offsets_compression(ctx.config.offsets_topic_compression_codec)
            .unwrap_or(records::Compression::None);
    let mut spec = records::builder::BatchSpec::new(0);
    spec.compression = compression;
    if let Some((producer_id, producer_epoch)) = producer {
        spec.transactional = true;
        spec.producer_id = producer_id;
        spec.producer_epoch = producer_epoch;
        // The next sequence of this producer on the partition (the coordinator's batches
        // follow the same sequence rules as a client's here).
        spec.base_sequence = ctx
            .replica_manager
            .get(&tp)
            .and_then(|p| {
                p.active_producers()
                    .into_iter()
                    .find(|a| a.producer_id == producer_id && a.producer_epoch == producer_epoch)
                    .map(|a| a.last_sequence.wrapping_add(1).max(0))
            })
            .unwrap_or(0);
    }
    let mut builder = records::builder::BatchBuilder::new(spec);
    for (i, (key, value)) in records.iter().enumerate() {
        builder.push(&records::builder::NewRecord {
            offset: i as i64,
            timestamp,
            key: Some(key.as_slice()),
            value: value.as_deref(),
            headers: &[],
        });
    }
    let mut batch = builder.build();
    let rm = ctx.replica_manager.clone();
    let acks = if wait_for_isr { -1 } else { 1 };
    let append_tp = tp.clone();
    let appended = crate::blocking::run(move || rm.append(&append_tp, &mut batch, acks, now_ms()))
        .await
        .map_err(|e| OffsetStoreError(format!("append to {tp}: {e}")))?;
    if wait_for_isr {
        let deadline = tokio::time::Instant::now() + ctx.config.offsets_commit_timeout;
        crate::limits::parked(ctx.replica_manager.wait_for_acks(
            &tp,
            appended.last_offset + 1,
            deadline,
        ))
        .await
        .map_err(|e| OffsetStoreError(format!("replicate {tp}: {e}")))?;
    }
    Ok(())
}

/// The client of the request being handled, as the coordinator records it.
pub(crate) fn client_info(client_id: Option<&str>) -> ClientInfo {
    let host = PEER
        .try_with(|peer| format!("/{}", peer.ip()))
        .unwrap_or_else(|_| "/unknown".to_owned());
    ClientInfo {
        client_id: client_id.unwrap_or("").to_owned(),
        client_host: host,
    }
}

/// The group settings from the broker config (`group.initial.rebalance.delay.ms`,
/// `group.min.session.timeout.ms`, `group.max.session.timeout.ms`; Kafka's defaults otherwise).
fn group_config(config: &BrokerConfig) -> GroupConfig {
    let defaults = GroupConfig::default();
    let get = |key: &str, default: i32| match config.originals.get(key) {
        None => default,
        Some(value) => value.trim().parse::<i32>().unwrap_or_else(|_| {
            warn!(
                key,
                value, default, "not a number of milliseconds; using the default"
            );
            default
        }),
    };
    GroupConfig {
        initial_rebalance_delay_ms: get(
            "group.initial.rebalance.delay.ms",
            defaults.initial_rebalance_delay_ms,
        ),
        min_session_timeout_ms: get(
            "group.min.session.timeout.ms",
            defaults.min_session_timeout_ms,
        ),
        max_session_timeout_ms: get(
            "group.max.session.timeout.ms",
            defaults.max_session_timeout_ms,
        ),
        offsets_retention_ms: u64::try_from(config.offsets_retention.as_millis())
            .unwrap_or(u64::MAX),
        offsets_retention_check_interval_ms: u64::try_from(
            config.offsets_retention_check_interval.as_millis(),
        )
        .unwrap_or(u64::MAX),
        ..defaults
    }
}

/// After every UpdateMetadata: pushes the metadata cache's topics into the coordinator, drops
/// the offsets of topics that disappeared (deleted; tombstones in the offsets topic), and
/// follows this broker's offsets partitions.
pub(crate) fn on_metadata_update(ctx: &BrokerContext) {
    let Some(coordinator) = ctx.groups.coordinator() else {
        return;
    };
    let topics = topics(ctx);
    let now: BTreeSet<String> = topics.iter().map(|t| t.name.as_str().to_owned()).collect();
    let before = lock(&ctx.groups.known_topics).replace(now.clone());
    coordinator.set_topics(topics);
    for gone in before.unwrap_or_default().difference(&now) {
        let Ok(topic) = gone.parse::<TopicName>() else {
            continue;
        };
        let coordinator = coordinator.clone();
        tokio::spawn(async move {
            if let Err(err) = coordinator.on_topic_deleted(&topic).await {
                warn!(%topic, %err, "cannot drop group offsets of deleted topic");
            }
        });
    }
    ctx.groups.reconcile();
}

/// After LeaderAndIsr or StopReplica: follows this broker's offsets partitions at once.
pub(crate) fn on_leadership_change(ctx: &BrokerContext) {
    ctx.groups.reconcile();
}

/// The metadata cache's topics, as the coordinator needs them.
fn topics(ctx: &BrokerContext) -> Vec<TopicMetadata> {
    let snapshot = ctx.metadata_cache.snapshot();
    snapshot
        .topics
        .iter()
        .filter_map(|(name, info)| {
            Some(TopicMetadata {
                name: name.parse().ok()?,
                topic_id: info.topic_id,
                partitions: i32::try_from(info.partitions.len()).ok()?,
            })
        })
        .collect()
}

/// The controller config of this broker.
pub(crate) fn controller_config(config: &BrokerConfig) -> controller::ControllerConfig {
    config.controller_config()
}

/// [`OffsetStore`] over `__consumer_offsets`: every write is a batch of Kafka's records
/// appended to the group's partition on this broker (its leader), answered once the in-sync
/// replicas have it.
#[derive(Debug)]
pub(crate) struct TopicOffsetStore {
    ctx: Weak<BrokerContext>,
}

impl TopicOffsetStore {
    /// Queues written offsets for the metadata store's view (never waits).
    fn mirror(
        &self,
        group_id: &str,
        changes: impl IntoIterator<Item = (TopicPartition, Option<i64>)>,
    ) {
        if let Some(ctx) = self.ctx.upgrade() {
            ctx.groups.mirror.queue(group_id, changes);
        }
    }

    async fn write(
        &self,
        group_id: &str,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<(), OffsetStoreError> {
        let ctx = self
            .ctx
            .upgrade()
            .ok_or_else(|| OffsetStoreError("broker is shutting down".to_owned()))?;
        let partition = log_records::partition_for(group_id, offsets_partitions(&ctx));
        append(&ctx, partition, records, now_ms(), true).await
    }
}

impl OffsetStore for TopicOffsetStore {
    async fn commit(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<(), OffsetStoreError> {
        let records = offsets
            .iter()
            .map(|(tp, o)| offset_record(group_id, tp, o))
            .collect();
        self.write(group_id, records).await?;
        self.mirror(
            group_id,
            offsets.iter().map(|(tp, o)| (tp.clone(), Some(o.offset))),
        );
        Ok(())
    }

    async fn load_all(&self) -> Result<GroupOffsets, OffsetStoreError> {
        // Groups arrive partition by partition as this broker becomes their leader.
        Ok(GroupOffsets::new())
    }

    async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<(), OffsetStoreError> {
        let records = partitions
            .iter()
            .map(|tp| {
                (
                    log_records::offset_key(group_id, tp.topic.as_str(), tp.partition),
                    None,
                )
            })
            .collect();
        self.write(group_id, records).await?;
        self.mirror(group_id, partitions.iter().map(|tp| (tp.clone(), None)));
        Ok(())
    }

    async fn delete_group(
        &self,
        group_id: &str,
        offsets: &[TopicPartition],
    ) -> Result<(), OffsetStoreError> {
        let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = offsets
            .iter()
            .map(|tp| {
                (
                    log_records::offset_key(group_id, tp.topic.as_str(), tp.partition),
                    None,
                )
            })
            .collect();
        records.push((log_records::group_key(group_id), None));
        self.write(group_id, records).await?;
        self.mirror(group_id, offsets.iter().map(|tp| (tp.clone(), None)));
        Ok(())
    }

    async fn store_records(
        &self,
        group_id: &str,
        records: &[group_coordinator::consumer_records::RecordWrite],
    ) -> Result<(), OffsetStoreError> {
        self.write(group_id, records.to_vec()).await
    }

    async fn store_group(
        &self,
        group_id: &str,
        value: &GroupMetadataSnapshot,
    ) -> Result<(), OffsetStoreError> {
        let record = (
            log_records::group_key(group_id),
            Some(log_records::group_value(value)),
        );
        self.write(group_id, vec![record]).await
    }
}

/// [`MembershipSink`] writing the seed's member and owner znodes (informational; failures
/// are logged).
#[derive(Debug)]
pub(crate) struct ZkMembershipSink {
    ctx: Weak<BrokerContext>,
}

impl MembershipSink for ZkMembershipSink {
    async fn apply(&self, event: MembershipEvent) {
        let Some(ctx) = self.ctx.upgrade() else {
            return;
        };
        let zk = ctx.zk();
        let result = match &event {
            MembershipEvent::MemberRegistered {
                group_id,
                member_id,
                subscription,
                timestamp_ms,
            } => {
                let registration = member_registration(subscription, *timestamp_ms);
                zk.register_consumer_member(group_id, member_id, &registration)
                    .await
            }
            MembershipEvent::MemberRemoved {
                group_id,
                member_id,
            } => zk.delete_consumer_member(group_id, member_id).await,
            MembershipEvent::OwnersChanged { group_id, owners } => {
                zk.set_consumer_owners(group_id, owners).await
            }
            MembershipEvent::GroupDeleted { group_id } => zk.delete_consumer_group(group_id).await,
        };
        if let Err(err) = result {
            warn!(?event, %err, "cannot write consumer group znodes");
        }
    }
}

/// The seed's `/consumers/<group>/ids/<member>` JSON (SPEC section 6).
fn member_registration(subscription: &BTreeSet<String>, timestamp_ms: u64) -> ConsumerMemberZNode {
    ConsumerMemberZNode {
        version: 1,
        subscription: subscription
            .iter()
            .map(|t| (t.clone(), 1))
            .collect::<BTreeMap<_, _>>(),
        pattern: "white_list".to_owned(),
        timestamp: i64::try_from(timestamp_ms).unwrap_or(i64::MAX),
    }
}

/// Whether a control record's key is a COMMIT marker (`Some(true)`), an ABORT (`Some(false)`),
/// or something else (Kafka's `ControlRecordType`: version INT16, type INT16, 0 abort, 1 commit).
fn marker_is_commit(key: &[u8]) -> Option<bool> {
    match key.get(2..4)? {
        [0, 0] => Some(false),
        [0, 1] => Some(true),
        _ => None,
    }
}

impl Groups {
    /// Whether some transaction has written an offset of `group` for `tp` that its marker has
    /// not settled yet (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT).
    pub(crate) fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        lock(&self.pending).get(group).is_some_and(|by_producer| {
            by_producer.values().any(|offsets| {
                offsets
                    .keys()
                    .any(|tp| tp.topic.as_str() == topic && tp.partition == partition)
            })
        })
    }

    /// A COMMIT or ABORT marker reached offsets partition `partition` for `producer_id`: its
    /// pending offsets become the groups' (commit) or are dropped (abort).
    pub(crate) fn on_txn_marker(&self, partition: i32, producer_id: i64, commit: bool) {
        let Some(ctx) = self.ctx() else { return };
        let n = offsets_partitions(&ctx);
        let mut settled: Vec<(String, BTreeMap<TopicPartition, OffsetAndMetadata>)> = Vec::new();
        {
            let mut pending = lock(&self.pending);
            for (group, by_producer) in pending.iter_mut() {
                if log_records::partition_for(group, n) != partition {
                    continue;
                }
                if let Some(offsets) = by_producer.remove(&producer_id) {
                    settled.push((group.clone(), offsets));
                }
            }
            pending.retain(|_, by_producer| !by_producer.is_empty());
        }
        if !commit || settled.is_empty() {
            return;
        }
        let Some(coordinator) = self.coordinator() else {
            return;
        };
        for (group, offsets) in settled {
            coordinator.apply_txn_offsets(&group, offsets.into_iter().collect());
        }
    }
}

/// After WriteTxnMarkers appended a marker to a partition: if it is an offsets partition,
/// settles the pending transactional offsets of that producer there.
pub(crate) fn on_txn_marker(
    ctx: &BrokerContext,
    tp: &TopicPartition,
    producer_id: i64,
    commit: bool,
) {
    if tp.topic.as_str() == OFFSETS_TOPIC {
        ctx.groups.on_txn_marker(tp.partition, producer_id, commit);
    }
}

/// TxnOffsetCommit (v0-4, Kafka's `handleTxnOffsetCommitRequest`): READ on the group, WRITE
/// on the transactional id (v? all), READ on each topic; the group's coordinator checks the
/// generation and member (KIP-447, v3+), then the offsets are appended to the group's
/// partition as a transactional batch of the producer (acks=all) and held pending until the
/// transaction's marker.
pub(crate) async fn txn_offset_commit(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &kafka_protocol::messages::TxnOffsetCommitRequest,
    _version: i16,
) -> kafka_protocol::messages::TxnOffsetCommitResponse {
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    use security::acl::{Operation, ResourceType};
    let group = request.group_id.0.as_str();
    let answer = |code_of: &dyn Fn(&str, i32) -> i16| {
        kafka_protocol::messages::TxnOffsetCommitResponse::default().with_topics(
            request
                .topics
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
                                        .with_error_code(code_of(
                                            t.name.0.as_str(),
                                            p.partition_index,
                                        ))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let all = |code: i16| answer(&|_, _| code);
    if !crate::handlers::authorized(
        ctx,
        rctx,
        Operation::Write,
        ResourceType::TransactionalId,
        request.transactional_id.0.as_str(),
    ) {
        return all(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !crate::handlers::authorized_group(ctx, rctx, Operation::Read, group) {
        return all(ResponseError::GroupAuthorizationFailed.code());
    }
    let denied = crate::handlers::denied_topics(
        ctx,
        rctx,
        Operation::Read,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let snapshot = ctx.metadata_cache.snapshot();
    let unknown = |t: &str, p: i32| {
        snapshot
            .topics
            .get(t)
            .is_none_or(|info| !info.partitions.contains_key(&p))
    };
    let coordinator = match ctx.groups.serving(ctx, group).await {
        Ok(c) => c,
        Err(code) => return all(code),
    };
    if let Err(code) = coordinator.check_txn_offset_commit(
        group,
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(|s| s.as_str()),
    ) {
        return all(code);
    }
    let now = now_ms();
    let mut to_write: Vec<(TopicPartition, OffsetAndMetadata)> = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        if denied.contains(name) {
            continue;
        }
        let Ok(parsed) = name.parse::<TopicName>() else {
            continue;
        };
        for p in &topic.partitions {
            if unknown(name, p.partition_index) {
                continue;
            }
            to_write.push((
                TopicPartition::new(parsed.clone(), p.partition_index),
                OffsetAndMetadata {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p
                        .committed_metadata
                        .as_ref()
                        .map_or(String::new(), |m| m.as_str().to_owned()),
                    commit_timestamp_ms: now,
                    // TxnOffsetCommit carries no retention (Kafka writes no expire timestamp).
                    expire_timestamp_ms: None,
                },
            ));
        }
    }
    let stored = if to_write.is_empty() {
        Ok(())
    } else {
        let records = to_write
            .iter()
            .map(|(tp, o)| offset_record(group, tp, o))
            .collect();
        let partition = log_records::partition_for(group, offsets_partitions(ctx));
        append_as(
            ctx,
            partition,
            records,
            now,
            true,
            Some((request.producer_id.0, request.producer_epoch)),
        )
        .await
    };
    let store_code = match &stored {
        Ok(()) => {
            let mut pending = lock(&ctx.groups.pending);
            pending
                .entry(group.to_owned())
                .or_default()
                .entry(request.producer_id.0)
                .or_default()
                .extend(to_write);
            0
        }
        Err(err) => {
            warn!(group, %err, "transactional offset commit failed");
            // A stale producer epoch is refused by the partition: the producer is fenced.
            if err.0.contains("epoch") {
                ResponseError::ProducerFenced.code()
            } else {
                COORDINATOR_NOT_AVAILABLE
            }
        }
    };
    answer(&|t, p| {
        if denied.contains(t) {
            ResponseError::TopicAuthorizationFailed.code()
        } else if unknown(t, p) {
            ResponseError::UnknownTopicOrPartition.code()
        } else {
            store_code
        }
    })
}
