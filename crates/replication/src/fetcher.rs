//! The follower's fetchers (Kafka's `ReplicaFetcherManager`, `ReplicaFetcherThread` and
//! `AbstractFetcherThread`): one task per source broker and fetcher id
//! (`num.replica.fetchers` per broker; a partition goes to fetcher
//! `|31 * hash(topic) + partition| % num.replica.fetchers`), carrying every partition it
//! follows from that broker in one Fetch, in an incremental fetch session.
//!
//! Each partition is *truncating* or *fetching*. A truncating partition asks the leader
//! (OffsetsForLeaderEpoch, v3, with this broker's id) where its latest epoch ends, truncates
//! at the divergence point ([`crate::truncation`]) and starts fetching from its new log end. A
//! fetching partition appends what the leader returns, offsets and epochs kept, and takes the
//! leader's high watermark. Errors are per partition: a failed append, a corrupt batch or a
//! leader that does not lead any more delays only that partition (`replica.fetch.backoff.ms`,
//! doubling up to 32 times for repeated append failures); a leader that names a newer epoch
//! (FENCED_LEADER_EPOCH) stops the partition until the next LeaderAndIsr; a fetch offset the
//! leader does not hold (OFFSET_OUT_OF_RANGE) is reset with ListOffsets (truncate to the
//! leader's end, or start over at its log start). A lost connection delays every partition
//! of the fetcher and resets the session. The log work of each round (appends, truncations)
//! runs on the blocking pool, never on an async worker.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use client::{ClientError, Connection, ConnectionOptions};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use crate::fetch_session::{session_key, FetchPosition, FetchSessionHandler};
use crate::truncation::truncation_offset;
use crate::{now_ms, FollowerStart, Partition, ReplicaManager, ReplicationConfig};

/// The Fetch version followers use (Kafka 2.8's highest).
const FETCH_VERSION: i16 = 12;
/// The OffsetsForLeaderEpoch version followers use (v3 carries the replica id).
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 3;
/// The ListOffsets version followers use to reset an out-of-range offset.
const LIST_OFFSETS_VERSION: i16 = 5;
/// Repeated append failures back off up to this many times `replica.fetch.backoff.ms`.
const MAX_BACKOFF_FACTOR: u32 = 32;
/// How often a fetcher reads every followed log's offsets again (between, only those it
/// touched).
const FULL_WALK_INTERVAL: Duration = Duration::from_secs(1);
/// How long a fetcher whose every partition is held by the follower throttle waits before
/// looking at the quota again.
const THROTTLE_PAUSE: Duration = Duration::from_millis(20);

/// Where the leader of a followed partition listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEndpoint {
    /// The leader's broker id.
    pub broker_id: i32,
    /// `host:port` of its listener.
    pub addr: String,
}

/// The phase of a followed partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchPhase {
    /// Finding the divergence point with the leader.
    Truncating,
    /// Appending what the leader returns.
    Fetching,
}

/// A copy of one partition's fetch state (tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchStateView {
    /// The source broker.
    pub leader: i32,
    /// Truncating or fetching.
    pub phase: FetchPhase,
    /// The leader epoch fetched at.
    pub leader_epoch: i32,
    /// Consecutive failures (0 when healthy).
    pub failures: u32,
    /// Whether it waits for the next LeaderAndIsr (fenced by a newer leader epoch).
    pub fenced: bool,
    /// Whether it is delayed by an error.
    pub delayed: bool,
}

#[derive(Debug, Clone)]
struct PartitionFetchState {
    partition: Arc<Partition>,
    leader_epoch: i32,
    phase: FetchPhase,
    delayed_until: Option<Instant>,
    failures: u32,
    fenced: bool,
    /// Whether the last answer left this replica at the leader's high watermark (Kafka's
    /// `isReplicaInSync` of the fetch state): only a replica that is not is throttled.
    caught_up: bool,
    /// The position the fetch session was last told (None: not in the session).
    wanted: Option<FetchPosition>,
    /// An answer (or a reset) may have moved the log since `wanted` was read: read it again.
    touched: bool,
}

impl PartitionFetchState {
    fn ready(&self, now: Instant) -> bool {
        !self.fenced && self.delayed_until.is_none_or(|t| t <= now)
    }
}

#[derive(Debug, Default)]
struct FetcherShared {
    partitions: Mutex<BTreeMap<TopicPartition, PartitionFetchState>>,
    changed: Notify,
}

impl FetcherShared {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<TopicPartition, PartitionFetchState>> {
        self.partitions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FetcherKey {
    broker_id: i32,
    fetcher_id: usize,
}

#[derive(Debug)]
struct Fetcher {
    addr: String,
    shared: Arc<FetcherShared>,
    task: tokio::task::AbortHandle,
}

/// Every fetcher of this broker.
#[derive(Debug)]
pub(crate) struct FetcherManager {
    config: ReplicationConfig,
    fetchers: Mutex<HashMap<FetcherKey, Fetcher>>,
}

impl FetcherManager {
    pub(crate) fn new(config: ReplicationConfig) -> FetcherManager {
        FetcherManager {
            config,
            fetchers: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<FetcherKey, Fetcher>> {
        self.fetchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fetches `partition` from `leader` at `leader_epoch`, moving it from any fetcher of
    /// another broker. Must run inside a Tokio runtime.
    pub(crate) fn add(
        &self,
        rm: &ReplicaManager,
        partition: &Arc<Partition>,
        leader: LeaderEndpoint,
        leader_epoch: i32,
        start: FollowerStart,
    ) {
        let tp = partition.topic_partition().clone();
        let key = FetcherKey {
            broker_id: leader.broker_id,
            fetcher_id: fetcher_id(&tp, self.config.num_replica_fetchers),
        };
        let mut fetchers = self.lock();
        // Keep the fetch state of a partition that stays with the same leader.
        let mut kept = None;
        for (k, fetcher) in fetchers.iter() {
            let mut partitions = fetcher.shared.lock();
            if let Some(state) = partitions.remove(&tp) {
                if *k == key && fetcher.addr == leader.addr {
                    kept = Some(state);
                }
            }
        }
        let phase = match (start, &kept) {
            (FollowerStart::Continue, Some(state)) => state.phase,
            (FollowerStart::Continue, None) => FetchPhase::Fetching,
            (FollowerStart::Truncate, _) => FetchPhase::Truncating,
        };
        let state = PartitionFetchState {
            partition: Arc::clone(partition),
            leader_epoch,
            phase,
            delayed_until: None,
            failures: 0,
            fenced: false,
            caught_up: false,
            wanted: None,
            touched: false,
        };
        // A broker that moved to another address gets a new fetcher; its partitions go along.
        let moved = match fetchers.get(&key) {
            Some(f) if f.addr != leader.addr => fetchers.remove(&key).map(|f| {
                f.task.abort();
                std::mem::take(&mut *f.shared.lock())
            }),
            _ => None,
        };
        let fetcher = fetchers.entry(key).or_insert_with(|| {
            let shared = Arc::new(FetcherShared::default());
            info!(leader = leader.broker_id, addr = %leader.addr, fetcher_id = key.fetcher_id,
                "starting a replica fetcher");
            let task = tokio::spawn(run(
                rm.clone(),
                Arc::clone(&shared),
                leader.clone(),
                key.fetcher_id,
            ));
            Fetcher {
                addr: leader.addr.clone(),
                shared,
                task: task.abort_handle(),
            }
        });
        {
            let mut partitions = fetcher.shared.lock();
            if let Some(moved) = moved {
                // The new fetcher's session has none of them yet.
                partitions.extend(moved.into_iter().map(|(tp, mut state)| {
                    state.wanted = None;
                    (tp, state)
                }));
            }
            partitions.insert(tp, state);
        }
        fetcher.shared.changed.notify_one();
        Self::drop_empty(&mut fetchers);
    }

    /// Stops fetching `tp`.
    pub(crate) fn remove(&self, tp: &TopicPartition) {
        let mut fetchers = self.lock();
        for fetcher in fetchers.values() {
            fetcher.shared.lock().remove(tp);
        }
        Self::drop_empty(&mut fetchers);
    }

    fn drop_empty(fetchers: &mut HashMap<FetcherKey, Fetcher>) {
        fetchers.retain(|key, fetcher| {
            let empty = fetcher.shared.lock().is_empty();
            if empty {
                info!(
                    leader = key.broker_id,
                    fetcher_id = key.fetcher_id,
                    "stopping an idle replica fetcher"
                );
                fetcher.task.abort();
            }
            !empty
        });
    }

    /// Stops every fetcher.
    pub(crate) fn shutdown(&self) {
        for (_, fetcher) in self.lock().drain() {
            fetcher.task.abort();
        }
    }

    /// (fetchers, partitions, failed partitions).
    pub(crate) fn stats(&self) -> (usize, usize, usize) {
        let fetchers = self.lock();
        let mut partitions = 0;
        let mut failed = 0;
        for fetcher in fetchers.values() {
            let states = fetcher.shared.lock();
            partitions += states.len();
            failed += states
                .values()
                .filter(|s| s.fenced || s.failures > 0)
                .count();
        }
        (fetchers.len(), partitions, failed)
    }

    pub(crate) fn state_of(&self, tp: &TopicPartition) -> Option<FetchStateView> {
        let fetchers = self.lock();
        let now = Instant::now();
        fetchers.iter().find_map(|(key, fetcher)| {
            fetcher.shared.lock().get(tp).map(|s| FetchStateView {
                leader: key.broker_id,
                phase: s.phase,
                leader_epoch: s.leader_epoch,
                failures: s.failures,
                fenced: s.fenced,
                delayed: !s.ready(now) && !s.fenced,
            })
        })
    }
}

/// Kafka's `AbstractFetcherManager.getFetcherId`.
fn fetcher_id(tp: &TopicPartition, fetchers: usize) -> usize {
    let fetchers = fetchers.max(1);
    let hash = java_string_hash(tp.topic.as_str())
        .wrapping_mul(31)
        .wrapping_add(tp.partition);
    (hash.unsigned_abs() as usize) % fetchers
}

fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// What one round found out about the connection.
enum Round {
    Ok,
    ConnectionLost(ClientError),
}

/// One fetcher's loop; runs until aborted.
async fn run(rm: ReplicaManager, shared: Arc<FetcherShared>, leader: LeaderEndpoint, id: usize) {
    let config = rm.config().clone();
    let backoff = Duration::from_millis(config.replica_fetch_backoff_ms.max(1));
    let options = ConnectionOptions {
        client_id: format!("replica-fetcher-{}-{id}", config.broker_id),
        request_timeout: Duration::from_millis(config.replica_socket_timeout_ms)
            + Duration::from_millis(config.replica_fetch_wait_max_ms.max(0) as u64),
        ..ConnectionOptions::default()
    }
    .secured(&config.inter_broker_security);
    let mut connection: Option<Connection> = None;
    let mut session = FetchSessionHandler::default();
    let mut next_full = Instant::now();
    loop {
        let now = Instant::now();
        let (truncating, fetching, next_ready) = ready_partitions(&shared, now);
        if truncating.is_empty() && fetching == 0 {
            let wake = next_ready.unwrap_or(now + Duration::from_secs(1));
            tokio::select! {
                () = shared.changed.notified() => {}
                () = tokio::time::sleep_until(wake) => {}
            }
            continue;
        }
        if connection.is_none() {
            match Connection::connect_with(&leader.addr, options.clone()).await {
                Ok(c) => connection = Some(c),
                Err(err) if err.is_authentication() => {
                    // Wrong credentials or an untrusted certificate: this follower cannot
                    // fetch until someone fixes them; say so loudly, and keep retrying at
                    // the fetch back-off (never faster).
                    error!(leader = leader.broker_id, addr = %leader.addr,
                        listener = %config.inter_broker_listener,
                        protocol = config.inter_broker_security.protocol_name(), error = %err,
                        retry_in_ms = backoff.as_millis() as u64,
                        "connection to the leader, broker {} ({}), on listener {} failed authentication; retrying",
                        leader.broker_id, leader.addr, config.inter_broker_listener);
                    delay_all(&shared, backoff);
                    session.reset();
                    continue;
                }
                Err(err) => {
                    debug!(leader = leader.broker_id, addr = %leader.addr, error = %err,
                        "cannot reach the leader; retrying");
                    delay_all(&shared, backoff);
                    session.reset();
                    continue;
                }
            }
        }
        let Some(conn) = connection.as_mut() else {
            continue;
        };
        let mut round = Round::Ok;
        if !truncating.is_empty() {
            round = truncate(&rm, &shared, conn, &truncating, backoff).await;
        }
        if let Round::Ok = round {
            if fetching > 0 {
                // Every partition's log is read again once a second (a log start moved by
                // retention); otherwise only the ones this fetcher touched.
                let full = Instant::now() >= next_full;
                if full {
                    next_full = Instant::now() + FULL_WALK_INTERVAL;
                }
                round = fetch(&rm, &shared, conn, &mut session, backoff, full).await;
            }
        }
        if let Round::ConnectionLost(err) = round {
            debug!(leader = leader.broker_id, error = %err, "replica fetch failed; reconnecting");
            connection = None;
            session.reset();
            delay_all(&shared, backoff);
        }
    }
}

/// The partitions ready to truncate (with the epochs they are at), how many are ready to
/// fetch, and when the next delayed one becomes ready.
#[allow(clippy::type_complexity)]
fn ready_partitions(
    shared: &FetcherShared,
    now: Instant,
) -> (
    Vec<(TopicPartition, Arc<Partition>, i32)>,
    usize,
    Option<Instant>,
) {
    let states = shared.lock();
    let mut truncating = Vec::new();
    let mut fetching = 0;
    let mut next = None;
    for (tp, s) in states.iter() {
        if s.ready(now) {
            match s.phase {
                FetchPhase::Truncating => {
                    truncating.push((tp.clone(), Arc::clone(&s.partition), s.leader_epoch))
                }
                FetchPhase::Fetching => fetching += 1,
            }
        } else if let (Some(at), false) = (s.delayed_until, s.fenced) {
            next = Some(next.map_or(at, |n: Instant| n.min(at)));
        }
    }
    (truncating, fetching, next)
}

fn delay_all(shared: &FetcherShared, backoff: Duration) {
    let until = Instant::now() + backoff;
    for state in shared.lock().values_mut() {
        state.delayed_until = Some(until);
    }
}

/// Applies `f` to `tp`'s fetch state if it is still at `epoch` (a LeaderAndIsr may have
/// moved it meanwhile).
fn with_state<R>(
    shared: &FetcherShared,
    tp: &TopicPartition,
    epoch: i32,
    f: impl FnOnce(&mut PartitionFetchState) -> R,
) -> Option<R> {
    let mut states = shared.lock();
    let state = states.get_mut(tp)?;
    if state.leader_epoch != epoch {
        return None;
    }
    Some(f(state))
}

fn delay(state: &mut PartitionFetchState, backoff: Duration) {
    state.delayed_until = Some(Instant::now() + backoff);
}

fn fail(rm: &ReplicaManager, state: &mut PartitionFetchState, backoff: Duration) {
    rm.count_failed_append();
    state.failures = state.failures.saturating_add(1);
    let factor = 1u32 << state.failures.saturating_sub(1).min(5);
    delay(state, backoff * factor.min(MAX_BACKOFF_FACTOR));
}

fn wire_topic(tp: &TopicPartition) -> TopicName {
    TopicName(StrBytes::from_string(tp.topic.as_str().to_owned()))
}

/// One OffsetsForLeaderEpoch round for the truncating partitions.
async fn truncate(
    rm: &ReplicaManager,
    shared: &Arc<FetcherShared>,
    conn: &mut Connection,
    partitions: &[(TopicPartition, Arc<Partition>, i32)],
    backoff: Duration,
) -> Round {
    let mut asked: BTreeMap<TopicPartition, (Arc<Partition>, i32)> = BTreeMap::new();
    let mut without_epochs = Vec::new();
    for (tp, partition, epoch) in partitions {
        match partition.latest_epoch() {
            Some(_) => {
                asked.insert(tp.clone(), (Arc::clone(partition), *epoch));
            }
            None => without_epochs.push((tp.clone(), *epoch)),
        }
    }
    if !without_epochs.is_empty() {
        // No epochs to compare (an empty or pre-epoch log): the high watermark. Truncating
        // writes the log: off the async workers.
        let (rm, shared) = (rm.clone(), Arc::clone(shared));
        off_the_workers(move || {
            for (tp, epoch) in without_epochs {
                with_state(&shared, &tp, epoch, |state| {
                    let hw = state.partition.high_watermark();
                    match state.partition.truncate_to(hw) {
                        Ok(_) => state.phase = FetchPhase::Fetching,
                        Err(err) => {
                            warn!(%tp, error = %err, "cannot truncate to the high watermark");
                            fail(&rm, state, backoff);
                        }
                    }
                });
            }
        })
        .await;
    }
    if asked.is_empty() {
        return Round::Ok;
    }
    let mut topics: BTreeMap<String, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
    for (tp, (partition, epoch)) in &asked {
        topics
            .entry(tp.topic.as_str().to_owned())
            .or_default()
            .push(
                OffsetForLeaderPartition::default()
                    .with_partition(tp.partition)
                    .with_current_leader_epoch(*epoch)
                    .with_leader_epoch(partition.latest_epoch().unwrap_or(-1)),
            );
    }
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(rm.config().broker_id))
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetForLeaderTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = match conn
        .send_version(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        .await
    {
        Ok(r) => r,
        Err(err) => return Round::ConnectionLost(err),
    };
    let (rm, shared) = (rm.clone(), Arc::clone(shared));
    off_the_workers(move || {
        for topic in &response.topics {
            let Ok(name) = topic.topic.0.parse::<model::TopicName>() else {
                continue;
            };
            for answer in &topic.partitions {
                let tp = TopicPartition::new(name.clone(), answer.partition);
                let Some((_, epoch)) = asked.get(&tp) else {
                    continue;
                };
                with_state(&shared, &tp, *epoch, |state| {
                    if state.phase != FetchPhase::Truncating {
                        return;
                    }
                    on_epoch_answer(&rm, &tp, state, answer, backoff);
                });
            }
        }
    })
    .await;
    Round::Ok
}

/// Runs the log work of a round (appends, truncations) on the blocking pool, so that a slow
/// disk never stalls an async worker. A panic there is logged; the partitions involved are
/// retried by the next round.
async fn off_the_workers(work: impl FnOnce() + Send + 'static) {
    if let Err(err) = tokio::task::spawn_blocking(work).await {
        warn!(error = %err, "a replica fetcher's log work failed");
    }
}

fn on_epoch_answer(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    state: &mut PartitionFetchState,
    answer: &kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset,
    backoff: Duration,
) {
    match ResponseError::try_from_code(answer.error_code) {
        None => {
            let partition = &state.partition;
            let t = truncation_offset(
                answer.leader_epoch,
                answer.end_offset,
                |e| partition.end_offset_for_epoch(e),
                partition.log_end_offset(),
                partition.high_watermark(),
            );
            let before = partition.log_end_offset();
            match partition.truncate_to(t.offset) {
                Ok(end) => {
                    if end < before {
                        info!(%tp, leader_epoch = answer.leader_epoch, leader_end_offset = answer.end_offset,
                            old_end = before, new_end = end, "truncated at the divergence point");
                    }
                    state.failures = 0;
                    if t.complete {
                        state.phase = FetchPhase::Fetching;
                    }
                }
                Err(err) => {
                    warn!(%tp, error = %err, "cannot truncate");
                    fail(rm, state, backoff);
                }
            }
        }
        Some(ResponseError::FencedLeaderEpoch) => {
            info!(%tp, epoch = state.leader_epoch,
                "the leader has a newer epoch; waiting for the next LeaderAndIsr");
            state.fenced = true;
        }
        Some(error) => {
            debug!(%tp, ?error, "OffsetsForLeaderEpoch answered with an error; retrying");
            delay(state, backoff);
        }
    }
}

/// One Fetch round for the fetching partitions.
async fn fetch(
    rm: &ReplicaManager,
    shared: &Arc<FetcherShared>,
    conn: &mut Connection,
    session: &mut FetchSessionHandler,
    backoff: Duration,
    full: bool,
) -> Round {
    let config = rm.config();
    // The follower throttle (KIP-73): while the quota is used up, throttled partitions that
    // are not caught up wait.
    let throttles = rm.throttles();
    let exceeded = throttles.follower.rate().is_some() && throttles.follower.is_exceeded();
    // The session is told only what moved since the last round: a partition's wanted
    // position is kept in its state, so an unchanged one costs a comparison.
    let (ready, held) = {
        let now = Instant::now();
        let mut states = shared.lock();
        let (mut ready, mut held, mut in_session) = (0usize, 0usize, 0usize);
        for (tp, state) in states.iter_mut() {
            let wanted = if state.phase == FetchPhase::Fetching && state.ready(now) {
                ready += 1;
                if exceeded && throttles.is_follower_throttled(tp) && !state.caught_up {
                    held += 1;
                    None
                } else if state.wanted.is_some() && !state.touched && !full {
                    // Nothing but this fetcher moves a follower's log end.
                    state.wanted
                } else {
                    state.touched = false;
                    let (log_start_offset, fetch_offset) = state.partition.log_offsets();
                    Some(FetchPosition {
                        fetch_offset,
                        max_bytes: config.replica_fetch_max_bytes,
                        current_leader_epoch: state.leader_epoch,
                        log_start_offset,
                    })
                }
            } else {
                None
            };
            if wanted != state.wanted {
                let key = session_key(tp);
                match wanted {
                    Some(position) => session.want(key, position),
                    None => session.unwant(&key),
                }
                state.wanted = wanted;
            }
            in_session += usize::from(state.wanted.is_some());
        }
        // Every wanted state is in the session; more there means some states are gone
        // (stopped, or moved to another fetcher).
        if session.wanted_len() != in_session {
            session.retain(|(topic, partition)| {
                topic
                    .parse::<model::TopicName>()
                    .ok()
                    .and_then(|name| states.get(&TopicPartition::new(name, *partition)))
                    .is_some_and(|s| s.wanted.is_some())
            });
        }
        (ready, held)
    };
    if held > 0 && held == ready {
        tokio::time::sleep(THROTTLE_PAUSE).await;
        return Round::Ok;
    }
    let built = session.next_request();
    let request = fetch_request(config, &built);
    let response = match conn.send_version(request, FETCH_VERSION).await {
        Ok(r) => r,
        Err(err) => return Round::ConnectionLost(err),
    };
    if !session.handle_response(response.error_code, response.session_id) {
        let error = ResponseError::try_from_code(response.error_code);
        if !matches!(
            error,
            Some(ResponseError::FetchSessionIdNotFound | ResponseError::InvalidFetchSessionEpoch)
        ) {
            debug!(?error, "fetch refused as a whole; backing off");
            delay_all(shared, backoff);
        }
        return Round::Ok;
    }
    // The appends write the logs: all of this answer's in one call on the blocking pool.
    let out_of_range = {
        let (rm, shared) = (rm.clone(), Arc::clone(shared));
        let (result_tx, result_rx) = tokio::sync::oneshot::channel();
        off_the_workers(move || {
            let now = now_ms();
            let mut out_of_range = Vec::new();
            for topic in response.responses {
                let Ok(name) = topic.topic.0.parse::<model::TopicName>() else {
                    continue;
                };
                for data in topic.partitions {
                    let tp = TopicPartition::new(name.clone(), data.partition_index);
                    if rm.throttles().is_follower_throttled(&tp) {
                        let bytes = data.records.as_ref().map_or(0, |r| r.len());
                        rm.throttles().follower.record(bytes);
                    }
                    let mut states = shared.lock();
                    let Some(state) = states.get_mut(&tp) else {
                        continue;
                    };
                    // Only an answer to what this request asked, for the state it asked
                    // for (a LeaderAndIsr may have moved it meanwhile).
                    let Some(asked) = state.wanted else {
                        continue;
                    };
                    state.touched = true;
                    let epoch = asked.current_leader_epoch;
                    if state.leader_epoch != epoch
                        || state.phase != FetchPhase::Fetching
                        || state.partition.log_end_offset() != asked.fetch_offset
                    {
                        continue;
                    }
                    if on_fetched(&rm, &tp, state, &data, epoch, now, backoff) {
                        out_of_range.push((tp.clone(), epoch));
                    }
                    state.caught_up = data.error_code == 0
                        && state.partition.log_end_offset() >= data.high_watermark;
                }
            }
            let _ = result_tx.send(out_of_range);
        })
        .await;
        result_rx.await.unwrap_or_default()
    };
    for (tp, epoch) in out_of_range {
        if let Err(err) = reset_out_of_range(rm, shared, conn, &tp, epoch, backoff).await {
            return Round::ConnectionLost(err);
        }
    }
    Round::Ok
}

/// Handles one partition of a fetch answer; returns whether its offset is out of range.
fn on_fetched(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    state: &mut PartitionFetchState,
    data: &kafka_protocol::messages::fetch_response::PartitionData,
    epoch: i32,
    now: i64,
    backoff: Duration,
) -> bool {
    match ResponseError::try_from_code(data.error_code) {
        None => {
            let records: Bytes = data.records.clone().unwrap_or_default();
            match state
                .partition
                .append_as_follower(&records, data.high_watermark, epoch, now)
            {
                Ok(()) => {
                    if state.failures > 0 {
                        info!(%tp, "fetched partition recovered");
                    }
                    state.failures = 0;
                    if !records.is_empty() {
                        rm.notify_changed(tp);
                    }
                }
                Err(err) => {
                    warn!(%tp, error = %err, failures = state.failures + 1,
                        "cannot append fetched batches; this partition backs off, the others go on");
                    fail(rm, state, backoff);
                }
            }
            false
        }
        Some(ResponseError::OffsetOutOfRange) => true,
        Some(ResponseError::FencedLeaderEpoch) => {
            info!(%tp, epoch, "the leader has a newer epoch; waiting for the next LeaderAndIsr");
            state.fenced = true;
            false
        }
        Some(error) => {
            debug!(%tp, ?error, "fetch answered with an error for this partition; retrying");
            delay(state, backoff);
            false
        }
    }
}

/// Kafka's `fetchOffsetAndTruncate`: the leader does not hold this follower's log end.
/// If the leader's log ends earlier, truncate to it; if it starts later, start over there.
async fn reset_out_of_range(
    rm: &ReplicaManager,
    shared: &Arc<FetcherShared>,
    conn: &mut Connection,
    tp: &TopicPartition,
    epoch: i32,
    backoff: Duration,
) -> Result<(), ClientError> {
    let leader_end = list_offset(rm, conn, tp, epoch, -1).await?;
    let leader_start = list_offset(rm, conn, tp, epoch, -2).await?;
    let (rm, shared, tp) = (rm.clone(), Arc::clone(shared), tp.clone());
    off_the_workers(move || reset_to(&rm, &shared, &tp, epoch, leader_end, leader_start, backoff))
        .await;
    Ok(())
}

/// The truncation half of [`reset_out_of_range`], on the blocking pool.
fn reset_to(
    rm: &ReplicaManager,
    shared: &FetcherShared,
    tp: &TopicPartition,
    epoch: i32,
    leader_end: Option<i64>,
    leader_start: Option<i64>,
    backoff: Duration,
) {
    with_state(shared, tp, epoch, |state| {
        let (Some(end), Some(start)) = (leader_end, leader_start) else {
            delay(state, backoff);
            return;
        };
        let local_end = state.partition.log_end_offset();
        let result = if end < local_end {
            warn!(%tp, local_end, leader_end = end, "fetch offset out of range: truncating to the leader's end");
            state.partition.truncate_to(end).map(drop)
        } else if start > local_end {
            warn!(%tp, local_end, leader_start = start,
                "fetch offset out of range: the leader's log starts later; starting over there");
            state.partition.truncate_fully_and_start_at(start)
        } else {
            Ok(())
        };
        if let Err(err) = result {
            warn!(%tp, error = %err, "cannot reset the fetch offset");
            fail(rm, state, backoff);
        }
    });
}

/// The leader's earliest (-2) or latest (-1) offset, as a replica sees it (the log end for
/// latest); `None` when the leader answered with an error.
async fn list_offset(
    rm: &ReplicaManager,
    conn: &mut Connection,
    tp: &TopicPartition,
    epoch: i32,
    timestamp: i64,
) -> Result<Option<i64>, ClientError> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(rm.config().broker_id))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(wire_topic(tp))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(epoch)
                .with_timestamp(timestamp)])]);
    let response = conn.send_version(request, LIST_OFFSETS_VERSION).await?;
    Ok(response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .filter(|p| p.error_code == 0)
        .map(|p| p.offset))
}

fn fetch_request(
    config: &ReplicationConfig,
    built: &crate::fetch_session::SessionRequest,
) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for ((topic, partition), position) in &built.partitions {
        let data = FetchPartition::default()
            .with_partition(*partition)
            .with_current_leader_epoch(position.current_leader_epoch)
            .with_fetch_offset(position.fetch_offset)
            .with_log_start_offset(position.log_start_offset)
            .with_partition_max_bytes(position.max_bytes);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == topic => t.partitions.push(data),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![data]),
            ),
        }
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    for (topic, partition) in &built.forgotten {
        match forgotten.last_mut() {
            Some(t) if t.topic.0.as_str() == topic => t.partitions.push(*partition),
            _ => forgotten.push(
                ForgottenTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(config.broker_id))
        .with_max_wait_ms(config.replica_fetch_wait_max_ms)
        .with_min_bytes(config.replica_fetch_min_bytes)
        .with_max_bytes(config.replica_fetch_response_max_bytes)
        .with_session_id(built.session_id)
        .with_session_epoch(built.epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetcher_ids_follow_kafkas_hash() {
        let tp = |t: &str, p| TopicPartition::new(t.parse().unwrap(), p);
        // Java: "orders".hashCode() == -1008770331.
        assert_eq!(java_string_hash("orders"), -1_008_770_331);
        assert_eq!(fetcher_id(&tp("orders", 0), 1), 0);
        let ids: Vec<usize> = (0..8).map(|p| fetcher_id(&tp("orders", p), 3)).collect();
        assert!(ids.iter().all(|&i| i < 3));
        assert!(
            ids.windows(2).all(|w| w[0] != w[1]),
            "consecutive partitions spread: {ids:?}"
        );
    }
}
