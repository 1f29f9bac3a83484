//! The transaction coordinator (KIP-98, KIP-360, KIP-447): transactional ids of the
//! `__transaction_state` partitions this broker leads, their state machine (`state`), their
//! records in that topic (`log`), and the COMMIT/ABORT markers it sends to the partitions of
//! a transaction (`markers`).
//!
//! # Which broker coordinates
//!
//! The coordinator of transactional id T is the leader of partition
//! `abs(T.hashCode) % partitions` of `__transaction_state`; its coordinator epoch is that
//! partition's leader epoch, carried in every marker so a partition refuses a deposed
//! coordinator's. The topic is created on the first FindCoordinator(TRANSACTION), and
//! partitions are loaded and unloaded as leadership moves, as for consumer groups
//! (`crate::groups`): COORDINATOR_LOAD_IN_PROGRESS while the log is replayed, NOT_COORDINATOR
//! once led elsewhere.
//!
//! # Invariants
//!
//! - Every transition is written to the log (acks=all) before memory changes and before the
//!   client is answered: PrepareCommit/PrepareAbort is durable before any marker is sent, so a
//!   coordinator that dies in between is replaced by one that finishes the same decision.
//! - Complete{Commit,Abort} is written only after every partition acknowledged its marker.
//! - A transaction that outlives its timeout, or whose id is re-initialised while it is open,
//!   is aborted with the producer epoch bumped first (`TxnMetadata::fenced_abort`): the old
//!   producer's late requests carry a stale epoch and are refused (PRODUCER_FENCED), so its
//!   delayed EndTxn can never end a later transaction (KAFKA-17754).
//! - One request of an id at a time: each id's metadata sits behind its own async lock.

pub(crate) mod log;
mod markers;
pub(crate) mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use model::TopicPartition;
use tracing::{info, warn};

use crate::context::BrokerContext;
use crate::data_plane::now_ms;
use crate::led_partitions::{Changes, CreationAsked, LedPartitions, Load};
use state::{TxnMetadata, TxnState};

/// The transaction log topic.
pub(crate) const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// How often the broker compares the transaction log partitions it leads with those loaded.
const RECONCILE_INTERVAL: Duration = Duration::from_millis(500);

/// How many bytes one read of a load takes (Kafka's `transaction.state.log.load.buffer.size`).
const LOAD_READ_BYTES: usize = 5 * 1024 * 1024;

/// One id's metadata behind its lock.
pub(crate) type Entry = Arc<tokio::sync::Mutex<TxnMetadata>>;

/// The broker's transaction coordinator.
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    /// Led partitions of the log: (leader epoch = coordinator epoch, load state).
    partitions: LedPartitions,
    /// The ids of the loaded partitions.
    txns: Mutex<HashMap<String, Entry>>,
    /// When this broker last asked the controller to create the topic.
    topic_asked: CreationAsked,
    ctx: OnceLock<Weak<BrokerContext>>,
    markers: markers::MarkerChannels,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A coordinator error code with the reason for the log.
pub(crate) type TxnResult<T> = Result<T, ResponseError>;

impl Transactions {
    /// Starts following this broker's transaction log partitions, and the timeout sweep.
    pub(crate) fn start(ctx: &Arc<BrokerContext>) {
        let _ = ctx.transactions.ctx.set(Arc::downgrade(ctx));
        let weak = Arc::downgrade(ctx);
        tokio::spawn(async move {
            loop {
                let Some(ctx) = weak.upgrade() else { return };
                ctx.transactions.reconcile(&ctx);
                drop(ctx);
                tokio::time::sleep(RECONCILE_INTERVAL).await;
            }
        });
        let weak = Arc::downgrade(ctx);
        let every = Duration::from_millis(ctx.config.transactions.abort_timed_out_interval_ms);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(ctx) = weak.upgrade() else { return };
                abort_timed_out(&ctx).await;
                expire_ids(&ctx).await;
            }
        });
    }

    /// Forgets everything (broker shutdown).
    pub(crate) fn stop(&self) {
        self.partitions.clear();
        lock(&self.txns).clear();
    }

    /// Whether to ask the controller to create the topic now (at most once per `every`).
    pub(crate) fn should_create_topic(&self, every: Duration) -> bool {
        self.topic_asked.ask_now(every)
    }

    /// The partition of `id` and its coordinator epoch, if this broker serves it now.
    pub(crate) fn check(&self, ctx: &BrokerContext, id: &str) -> TxnResult<(i32, i32)> {
        let partition = partition_for(ctx, id);
        match self.partitions.get(partition) {
            Some((epoch, Load::Loaded)) => Ok((partition, epoch)),
            Some((_, Load::Loading)) => Err(ResponseError::CoordinatorLoadInProgress),
            None => Err(ResponseError::NotCoordinator),
        }
    }

    /// Whether `partition` is still loaded at coordinator epoch `epoch`.
    fn still_coordinating(&self, partition: i32, epoch: i32) -> bool {
        self.partitions.get(partition) == Some((epoch, Load::Loaded))
    }

    fn entry(&self, id: &str) -> Option<Entry> {
        lock(&self.txns).get(id).cloned()
    }

    /// Every loaded id with its entry (DescribeTransactions, ListTransactions, sweeps).
    pub(crate) fn entries(&self) -> Vec<(String, Entry)> {
        lock(&self.txns)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Starts loading newly led partitions and unloads the others.
    pub(crate) fn reconcile(&self, ctx: &Arc<BrokerContext>) {
        let n = state_partitions(ctx);
        let Changes { to_load, to_unload } =
            self.partitions.reconcile(&ctx.replica_manager, n, state_tp);
        if !to_unload.is_empty() {
            let mut txns = lock(&self.txns);
            let before = txns.len();
            txns.retain(|id, _| !to_unload.contains(&java_partition(id, n)));
            info!(partitions = ?to_unload, ids = before - txns.len(),
                "unloaded transactional ids of transaction log partitions led elsewhere now");
        }
        for (partition, epoch) in to_load {
            let ctx = Arc::clone(ctx);
            tokio::spawn(async move { load_partition(ctx, partition, epoch).await });
        }
    }
}

/// The partition count of `__transaction_state`.
pub(crate) fn state_partitions(ctx: &BrokerContext) -> i32 {
    ctx.metadata_cache
        .snapshot()
        .topics
        .get(TRANSACTION_STATE_TOPIC)
        .and_then(|t| i32::try_from(t.partitions.len()).ok())
        .filter(|&n| n > 0)
        .unwrap_or(ctx.config.transactions.state_log_num_partitions)
}

fn java_partition(id: &str, n: i32) -> i32 {
    group_coordinator::log_records::partition_for(id, n)
}

/// The log partition of transactional id `id`.
pub(crate) fn partition_for(ctx: &BrokerContext, id: &str) -> i32 {
    java_partition(id, state_partitions(ctx))
}

fn state_tp(partition: i32) -> TopicPartition {
    TopicPartition::new(
        TRANSACTION_STATE_TOPIC
            .parse()
            .expect("__transaction_state is a valid topic name"),
        partition,
    )
}

/// Replays one partition: the last record of every id wins, a tombstone forgets it. Then
/// finishes the transactions it finds between Prepare and Complete (their markers).
async fn load_partition(ctx: Arc<BrokerContext>, partition: i32, epoch: i32) {
    let started = std::time::Instant::now();
    let tp = state_tp(partition);
    let rm = ctx.replica_manager.clone();
    let read_tp = tp.clone();
    let replayed = crate::blocking::run(move || replay(&rm, &read_tp)).await;
    let replayed = match replayed {
        Ok(replayed) => replayed,
        Err(err) => {
            warn!(%tp, %err, "cannot load transaction log partition; retrying");
            ctx.transactions.partitions.load_failed(partition, epoch);
            return;
        }
    };
    let count = replayed.len();
    let loaded = ctx
        .transactions
        .partitions
        .finish_load(partition, epoch, || {
            let mut txns = lock(&ctx.transactions.txns);
            let mut unfinished = Vec::new();
            for (id, meta) in replayed {
                if meta.state.is_preparing() {
                    unfinished.push(meta.clone());
                }
                txns.insert(id, Arc::new(tokio::sync::Mutex::new(meta)));
            }
            unfinished
        });
    // None: leadership moved while the log was read, the newer state wins.
    let Some(unfinished) = loaded else {
        return;
    };
    info!(%tp, coordinator_epoch = epoch, ids = count,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded transactional ids of transaction log partition");
    for meta in unfinished {
        info!(transactional_id = %meta.transactional_id, state = meta.state.name(),
            "completing a transaction found prepared in the log");
        markers::complete(Arc::clone(&ctx), partition, epoch, meta);
    }
}

fn replay(
    rm: &replication::ReplicaManager,
    tp: &TopicPartition,
) -> Result<HashMap<String, TxnMetadata>, String> {
    let partition = rm.partition(tp).map_err(|e| e.to_string())?;
    let end = partition.log_end_offset();
    let mut offset = partition.log_start_offset();
    let mut txns: HashMap<String, TxnMetadata> = HashMap::new();
    let mut skipped = 0usize;
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
                continue;
            }
            let section =
                records::records_section(&bytes[batch.range()]).map_err(|e| e.to_string())?;
            let records = records::record::records(&section, header.records_count)
                .map_err(|e| e.to_string())?;
            for record in records {
                let Some(key) = record.key else {
                    skipped += 1;
                    continue;
                };
                match log::decode(key, record.value) {
                    Ok((id, Some(meta))) => {
                        txns.insert(id, meta);
                    }
                    Ok((id, None)) => {
                        txns.remove(&id);
                    }
                    Err(_) => skipped += 1,
                }
            }
        }
    }
    if skipped > 0 {
        warn!(%tp, skipped, "records of the transaction log that this broker does not read");
    }
    Ok(txns)
}

/// Writes `meta` (or a tombstone for `id`) to log partition `partition` and waits for the
/// in-sync replicas (Kafka's `appendTransactionToLog`, acks=all). Errors are the codes Kafka
/// answers: NOT_COORDINATOR when leadership moved, COORDINATOR_NOT_AVAILABLE otherwise.
pub(crate) async fn write(
    ctx: &BrokerContext,
    partition: i32,
    coordinator_epoch: i32,
    id: &str,
    meta: Option<&TxnMetadata>,
) -> TxnResult<()> {
    if !ctx
        .transactions
        .still_coordinating(partition, coordinator_epoch)
    {
        return Err(ResponseError::NotCoordinator);
    }
    let tp = state_tp(partition);
    let key = log::key(id);
    let value = meta.map(log::value);
    let mut builder = records::builder::BatchBuilder::new(records::builder::BatchSpec::new(0));
    let now = now_ms();
    builder.push(&records::builder::NewRecord {
        offset: 0,
        timestamp: now,
        key: Some(&key),
        value: value.as_deref(),
        headers: &[],
    });
    let mut batch = builder.build();
    let rm = ctx.replica_manager.clone();
    let append_tp = tp.clone();
    let appended = crate::blocking::run(move || rm.append(&append_tp, &mut batch, -1, now)).await;
    let appended = match appended {
        Ok(a) => a,
        Err(replication::ReplicationError::NotLeader(_))
        | Err(replication::ReplicationError::UnknownTopicOrPartition(_)) => {
            return Err(ResponseError::NotCoordinator)
        }
        Err(err) => {
            warn!(%tp, transactional_id = id, %err, "cannot write to the transaction log");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
    };
    let deadline = tokio::time::Instant::now() + ctx.config.request_timeout;
    if let Err(err) = crate::limits::parked(ctx.replica_manager.wait_for_acks(
        &tp,
        appended.last_offset + 1,
        deadline,
    ))
    .await
    {
        warn!(%tp, transactional_id = id, %err, "the transaction log write did not replicate");
        return Err(match err {
            replication::ReplicationError::NotLeader(_) => ResponseError::NotCoordinator,
            _ => ResponseError::CoordinatorNotAvailable,
        });
    }
    if !ctx
        .transactions
        .still_coordinating(partition, coordinator_epoch)
    {
        return Err(ResponseError::NotCoordinator);
    }
    Ok(())
}

/// What InitProducerId answers.
pub(crate) struct InitResult {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// InitProducerId with a transactional id (Kafka's `handleInitProducerId`).
pub(crate) async fn init_producer_id(
    ctx: &Arc<BrokerContext>,
    id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> TxnResult<InitResult> {
    if timeout_ms <= 0 || timeout_ms > ctx.config.transactions.max_timeout_ms {
        return Err(ResponseError::InvalidTransactionTimeout);
    }
    let (partition, coordinator_epoch) = ctx.transactions.check(ctx, id)?;
    let entry = match ctx.transactions.entry(id) {
        Some(entry) => entry,
        None => {
            let producer_id = crate::handlers::init_producer_id::next_producer_id(ctx)
                .await
                .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
            let fresh = Arc::new(tokio::sync::Mutex::new(TxnMetadata::new(
                id,
                producer_id,
                timeout_ms,
                now_ms(),
            )));
            lock(&ctx.transactions.txns)
                .entry(id.to_owned())
                .or_insert(fresh)
                .clone()
        }
    };
    let mut meta = entry.lock().await;
    // Kafka's isValidProducerId: a new id's metadata, the current producer id, or the
    // previous one with an exhausted epoch (a retry after a new id was handed out). The epoch
    // is checked where it is bumped.
    let valid_expected = |m: &TxnMetadata, (pid, epoch): (i64, i16)| {
        m.producer_epoch == -1
            || pid == m.producer_id
            || (pid == m.last_producer_id && epoch >= i16::MAX - 1)
    };
    if let Some(expected) = expected {
        if !valid_expected(&meta, expected) {
            return Err(ResponseError::ProducerFenced);
        }
    }
    match meta.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Dead => Err(ResponseError::ConcurrentTransactions),
        TxnState::Ongoing => {
            // The previous producer of this id left a transaction open: fence it and abort.
            let aborting = meta
                .fenced_abort(now_ms())
                .map_err(|_| ResponseError::ConcurrentTransactions)?;
            write(ctx, partition, coordinator_epoch, id, Some(&aborting)).await?;
            info!(
                transactional_id = id,
                producer_id = aborting.producer_id,
                epoch = aborting.producer_epoch,
                "fenced the previous producer and aborting its open transaction"
            );
            *meta = aborting.clone();
            markers::complete(Arc::clone(ctx), partition, coordinator_epoch, aborting);
            Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            // A retry of the InitProducerId that bumped the epoch: answer the same. Any other
            // epoch but the current one is a fenced producer (Kafka's
            // prepareIncrementProducerEpoch).
            if let Some((pid, epoch)) = expected {
                if meta.producer_epoch != -1 && pid == meta.producer_id {
                    if epoch == meta.last_producer_epoch && meta.last_producer_epoch >= 0 {
                        return Ok(InitResult {
                            producer_id: meta.producer_id,
                            producer_epoch: meta.producer_epoch,
                        });
                    }
                    if epoch != meta.producer_epoch {
                        return Err(ResponseError::ProducerFenced);
                    }
                }
            }
            let mut new_id = None;
            if meta.producer_epoch >= i16::MAX - 1 {
                new_id = Some(
                    crate::handlers::init_producer_id::next_producer_id(ctx)
                        .await
                        .map_err(|_| ResponseError::CoordinatorNotAvailable)?,
                );
            }
            let next = meta
                .bumped(timeout_ms, now_ms(), || new_id.unwrap_or(-1))
                .map_err(|_| ResponseError::ConcurrentTransactions)?;
            write(ctx, partition, coordinator_epoch, id, Some(&next)).await?;
            *meta = next;
            Ok(InitResult {
                producer_id: meta.producer_id,
                producer_epoch: meta.producer_epoch,
            })
        }
    }
}

/// The checks every request of an open producer passes (Kafka's producer id/epoch checks).
fn check_producer(meta: &TxnMetadata, producer_id: i64, producer_epoch: i16) -> TxnResult<()> {
    if meta.producer_id != producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if meta.producer_epoch != producer_epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(())
}

/// AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the id's transaction (written
/// as Ongoing before the answer).
pub(crate) async fn add_partitions(
    ctx: &Arc<BrokerContext>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<(String, i32)>,
) -> TxnResult<()> {
    let (partition, coordinator_epoch) = ctx.transactions.check(ctx, id)?;
    let entry = ctx
        .transactions
        .entry(id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    let mut meta = entry.lock().await;
    check_producer(&meta, producer_id, producer_epoch)?;
    match meta.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            return Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Dead => return Err(ResponseError::InvalidTxnState),
        TxnState::Ongoing if partitions.is_subset(&meta.partitions) => return Ok(()),
        _ => {}
    }
    let mut next = meta
        .moved(TxnState::Ongoing, now_ms())
        .map_err(|_| ResponseError::InvalidTxnState)?;
    next.partitions.extend(partitions.iter().cloned());
    write(ctx, partition, coordinator_epoch, id, Some(&next)).await?;
    *meta = next;
    Ok(())
}

/// AddPartitionsToTxn v4+ VerifyOnly (KIP-890): per partition, whether it is in the id's
/// ongoing transaction (INVALID_TXN_STATE when not); an error for the whole id otherwise.
pub(crate) async fn verify_partitions(
    ctx: &Arc<BrokerContext>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
) -> TxnResult<Vec<((String, i32), ResponseError)>> {
    ctx.transactions.check(ctx, id)?;
    let entry = ctx
        .transactions
        .entry(id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    let meta = entry.lock().await;
    check_producer(&meta, producer_id, producer_epoch)?;
    if meta.state.is_preparing() {
        return Err(ResponseError::ConcurrentTransactions);
    }
    Ok(partitions
        .iter()
        .filter(|p| meta.state != TxnState::Ongoing || !meta.partitions.contains(*p))
        .map(|p| (p.clone(), ResponseError::InvalidTxnState))
        .collect())
}

/// EndTxn (Kafka's `handleEndTransaction`): Prepare written, answered, markers sent in the
/// background, Complete written after them.
pub(crate) async fn end_txn(
    ctx: &Arc<BrokerContext>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
) -> TxnResult<()> {
    let (partition, coordinator_epoch) = ctx.transactions.check(ctx, id)?;
    let entry = ctx
        .transactions
        .entry(id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    let mut meta = entry.lock().await;
    if meta.producer_id != producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    // A stale epoch is a fenced producer (a paused one whose transaction timed out, or one
    // replaced by InitProducerId): it can never end a later transaction (KAFKA-17754).
    if meta.producer_epoch != producer_epoch {
        return Err(ResponseError::ProducerFenced);
    }
    let result = match (meta.state, commit) {
        (TxnState::Ongoing, _) => {
            let to = if commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            };
            let next = meta
                .moved(to, now_ms())
                .map_err(|_| ResponseError::InvalidTxnState)?;
            write(ctx, partition, coordinator_epoch, id, Some(&next)).await?;
            *meta = next.clone();
            markers::complete(Arc::clone(ctx), partition, coordinator_epoch, next);
            Ok(())
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(ResponseError::ConcurrentTransactions)
        }
        (TxnState::PrepareEpochFence, _) => Err(ResponseError::ConcurrentTransactions),
        _ => Err(ResponseError::InvalidTxnState),
    };
    if let Err(err) = &result {
        if *err == ResponseError::InvalidTxnState {
            warn!(
                transactional_id = id,
                state = meta.state.name(),
                commit,
                "EndTxn refused: no transaction in a state that can end this way"
            );
        }
    }
    result
}

/// Aborts every ongoing transaction past its timeout, fencing its producer's epoch first
/// (Kafka's `abortTimedOutTransactions`).
async fn abort_timed_out(ctx: &Arc<BrokerContext>) {
    let now = now_ms();
    for (id, entry) in ctx.transactions.entries() {
        let Ok((partition, epoch)) = ctx.transactions.check(ctx, &id) else {
            continue;
        };
        let mut meta = entry.lock().await;
        if meta.state != TxnState::Ongoing || meta.start_ms + i64::from(meta.timeout_ms) >= now {
            continue;
        }
        let Ok(aborting) = meta.fenced_abort(now) else {
            continue;
        };
        match write(ctx, partition, epoch, &id, Some(&aborting)).await {
            Ok(()) => {
                info!(transactional_id = %id, producer_id = aborting.producer_id,
                    fenced_epoch = meta.producer_epoch, timeout_ms = meta.timeout_ms,
                    "aborting a transaction past its timeout; its producer is fenced");
                *meta = aborting.clone();
                markers::complete(Arc::clone(ctx), partition, epoch, aborting);
            }
            Err(err) => warn!(transactional_id = %id, %err, "cannot abort a timed-out transaction"),
        }
    }
}

/// Forgets ids idle (no open transaction) longer than `transactional.id.expiration.ms`: a
/// tombstone in the log, then gone from memory (Kafka's `removeExpiredTransactionalIds`).
async fn expire_ids(ctx: &Arc<BrokerContext>) {
    let now = now_ms();
    let expiration = ctx.config.transactions.id_expiration_ms;
    for (id, entry) in ctx.transactions.entries() {
        let Ok((partition, epoch)) = ctx.transactions.check(ctx, &id) else {
            continue;
        };
        let mut meta = entry.lock().await;
        let idle = matches!(
            meta.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        );
        if !idle || meta.last_update_ms + expiration > now {
            continue;
        }
        let Ok(dead) = meta.moved(TxnState::Dead, now) else {
            continue;
        };
        let before = std::mem::replace(&mut *meta, dead);
        match write(ctx, partition, epoch, &id, None).await {
            Ok(()) => {
                info!(transactional_id = %id, "transactional id expired");
                lock(&ctx.transactions.txns).remove(&id);
            }
            Err(err) => {
                warn!(transactional_id = %id, %err, "cannot expire a transactional id");
                *meta = before;
            }
        }
    }
}
