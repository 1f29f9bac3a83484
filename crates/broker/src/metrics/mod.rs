//! The broker's counters and latency histograms, kept on atomics so the request path never
//! takes a lock to count, and rendered in Prometheus' text format by the admin listener
//! ([`prometheus`]) under the names the Prometheus JMX exporter's usual Kafka rules give
//! Kafka's MBeans, so existing dashboards and alerts work unchanged.
//!
//! What is counted where:
//! - per request (`connection.rs`): requests by API and version, and Kafka's split of a
//!   request's time (`RequestMetrics`: request queue, local, remote, response queue, response
//!   send, total). "Remote" starts when the handler parks (acks=-1 Produce waiting for the
//!   ISR, a long-polling Fetch, a rebalance; see [`parked`]), as a request waits in Kafka's
//!   purgatory; the number parked is the purgatory size.
//! - per topic (`BrokerTopicMetrics`): bytes in and messages in from the Produce request and
//!   its response, bytes out from Fetch responses, failed produce and fetch requests. A
//!   connection keeps its own map of topic counters, so the shared registry's lock is taken
//!   only the first time a connection meets a topic (see [`TopicCache`]).
//! - everything else (partition counts, ISR state, controller gauges, consumer lag) is read
//!   from the live state when `/metrics` is scraped.

pub(crate) mod prometheus;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use telemetry::{Counter, Histogram};
use uuid::Uuid;

/// Slots of the per-API table: every API key (the largest is 82) plus FetchFollower.
const API_SLOTS: usize = 84;
/// Kafka splits Fetch into `FetchConsumer` (the API key's slot) and `FetchFollower` (this).
const FETCH_FOLLOWER_SLOT: usize = 83;
/// Versions counted apart; higher ones count as the last.
const VERSIONS: usize = 20;
/// Topics one connection remembers counters for before it starts over.
const TOPIC_CACHE_CAPACITY: usize = 256;

/// Counters of one broker.
#[derive(Debug)]
pub struct Metrics {
    apis: Box<[ApiMetrics]>,
    request_errors: AtomicU64,
    connections_open: AtomicI64,
    connections_total: AtomicU64,
    /// Open connections by the client software they named in ApiVersions v3+ (KIP-511);
    /// an entry goes when its count drops to zero, so the map is never larger than the
    /// number of open connections.
    client_software: Mutex<BTreeMap<ClientSoftware, u64>>,
    /// Per-topic counters (`BrokerTopicMetrics,topic=...`).
    topics: TopicRegistry,
    /// The same counters over all topics (`BrokerTopicMetrics` without a topic).
    pub(crate) all_topics: TopicMetrics,
    /// Bytes read by followers (`ReplicationBytesOutPerSec`, all topics only, as in Kafka).
    pub(crate) replication_bytes_out: Counter,
    /// Requests parked now, by purgatory.
    purgatory: [AtomicI64; Purgatory::ALL.len()],
    /// Time of each controller event by kind (`ControllerStats`), from the controller's hook.
    pub(crate) controller_events: ControllerEventMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            apis: (0..API_SLOTS).map(|_| ApiMetrics::default()).collect(),
            request_errors: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_total: AtomicU64::new(0),
            client_software: Mutex::new(BTreeMap::new()),
            topics: TopicRegistry::default(),
            all_topics: TopicMetrics::default(),
            replication_bytes_out: Counter::new(),
            purgatory: Default::default(),
            controller_events: ControllerEventMetrics::default(),
        }
    }
}

/// One API's request counts and time split (Kafka's `RequestMetrics`).
#[derive(Debug, Default)]
pub(crate) struct ApiMetrics {
    /// Requests by version (`RequestsPerSec,request=...,version=...`).
    pub requests: [Counter; VERSIONS],
    /// From the complete frame until a handler takes it (`RequestQueueTimeMs`).
    pub request_queue: Histogram,
    /// The handler's own work (`LocalTimeMs`).
    pub local: Histogram,
    /// Parked, waiting for others (`RemoteTimeMs`).
    pub remote: Histogram,
    /// From the handler's answer to the first byte written (`ResponseQueueTimeMs`).
    pub response_queue: Histogram,
    /// Writing the response (`ResponseSendTimeMs`).
    pub response_send: Histogram,
    /// All of it (`TotalTimeMs`).
    pub total: Histogram,
}

/// Kafka's `BrokerTopicMetrics` of one topic (or of all of them).
#[derive(Debug, Default)]
pub(crate) struct TopicMetrics {
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub messages_in: Counter,
    pub bytes_rejected: Counter,
    pub failed_produce_requests: Counter,
    pub failed_fetch_requests: Counter,
    pub total_produce_requests: Counter,
    pub total_fetch_requests: Counter,
}

/// Kafka's purgatories, by its `delayedOperation` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purgatory {
    Produce,
    Fetch,
    DeleteRecords,
    Rebalance,
    Topic,
}

impl Purgatory {
    pub(crate) const ALL: [Purgatory; 5] = [
        Purgatory::Produce,
        Purgatory::Fetch,
        Purgatory::DeleteRecords,
        Purgatory::Rebalance,
        Purgatory::Topic,
    ];

    /// Kafka's `delayedOperation` tag value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Purgatory::Produce => "Produce",
            Purgatory::Fetch => "Fetch",
            Purgatory::DeleteRecords => "DeleteRecords",
            Purgatory::Rebalance => "Rebalance",
            Purgatory::Topic => "topic",
        }
    }

    fn of(api: ApiKey) -> Option<Purgatory> {
        match api {
            ApiKey::Produce => Some(Purgatory::Produce),
            ApiKey::Fetch => Some(Purgatory::Fetch),
            ApiKey::DeleteRecords => Some(Purgatory::DeleteRecords),
            ApiKey::JoinGroup | ApiKey::SyncGroup => Some(Purgatory::Rebalance),
            ApiKey::CreateTopics | ApiKey::CreatePartitions | ApiKey::DeleteTopics => {
                Some(Purgatory::Topic)
            }
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The controller's events, by the `ControllerState` name Kafka times them under; every
/// state has its (empty) histogram from the start, as Kafka registers its timers.
#[derive(Debug)]
pub(crate) struct ControllerEventMetrics {
    events: Mutex<BTreeMap<&'static str, Arc<Histogram>>>,
}

impl Default for ControllerEventMetrics {
    fn default() -> Self {
        ControllerEventMetrics {
            events: Mutex::new(
                controller::event::ControllerEvent::STATE_NAMES
                    .iter()
                    .map(|&state| (state, Arc::default()))
                    .collect(),
            ),
        }
    }
}

impl ControllerEventMetrics {
    /// Records one event of `state` that took `elapsed`. Called once per controller event
    /// (not per request); the map has one entry per event kind.
    pub(crate) fn observe(&self, state: &'static str, elapsed: Duration) {
        let histogram = Arc::clone(
            self.events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(state)
                .or_default(),
        );
        histogram.observe(elapsed);
    }

    /// Every event kind seen, with its histogram.
    pub(crate) fn snapshot(&self) -> Vec<(&'static str, telemetry::HistogramSnapshot)> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(state, h)| (*state, h.snapshot()))
            .collect()
    }
}

/// What a connection's client said it is in ApiVersions v3+ (KIP-511): Kafka's
/// `ClientInformation`. Both parts match `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`, so
/// they need no escaping as Prometheus label values.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientSoftware {
    /// `client_software_name`, or `unknown` before (or without) ApiVersions v3+.
    pub name: String,
    /// `client_software_version`, or `unknown`.
    pub version: String,
}

impl ClientSoftware {
    /// Kafka's `ClientInformation.EMPTY`: what a connection is until it says otherwise.
    pub fn unknown() -> ClientSoftware {
        ClientSoftware {
            name: "unknown".to_owned(),
            version: "unknown".to_owned(),
        }
    }
}

/// When a request's phases ended, for its `RequestMetrics`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestTimes {
    /// The frame was complete.
    pub received: Instant,
    /// A handler took it (after waiting for a place among `queued.max.requests`).
    pub dequeued: Instant,
    /// The handler parked, if it did.
    pub parked: Option<Instant>,
    /// The handler answered.
    pub handled: Instant,
    /// The response started going out.
    pub send_started: Instant,
    /// The response was written.
    pub sent: Instant,
}

impl Metrics {
    /// Counts one request of `api` at `version` and its time split. `follower_fetch` puts a
    /// Fetch under `FetchFollower` instead of `FetchConsumer`.
    pub(crate) fn request_done(
        &self,
        api: ApiKey,
        version: i16,
        follower_fetch: bool,
        times: &RequestTimes,
    ) {
        let metrics = &self.apis[api_slot(api, follower_fetch)];
        let version = usize::try_from(version).unwrap_or(0).min(VERSIONS - 1);
        metrics.requests[version].inc();
        let between = |from: Instant, to: Instant| to.saturating_duration_since(from);
        let local_end = times.parked.unwrap_or(times.handled);
        metrics
            .request_queue
            .observe(between(times.received, times.dequeued));
        metrics.local.observe(between(times.dequeued, local_end));
        metrics.remote.observe(between(local_end, times.handled));
        metrics
            .response_queue
            .observe(between(times.handled, times.send_started));
        metrics
            .response_send
            .observe(between(times.send_started, times.sent));
        metrics.total.observe(between(times.received, times.sent));
    }

    /// Counts one request that closed its connection (malformed, unknown API).
    pub fn request_error(&self) {
        self.request_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection opened.
    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed.
    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection now counts as `software` (at open: [`ClientSoftware::unknown`]); it no
    /// longer counts as `previous`, if given.
    pub fn client_software_set(
        &self,
        previous: Option<&ClientSoftware>,
        software: &ClientSoftware,
    ) {
        let mut map = self
            .client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(previous) = previous {
            Self::release(&mut map, previous);
        }
        *map.entry(software.clone()).or_default() += 1;
    }

    /// A connection that counted as `software` closed.
    pub fn client_software_closed(&self, software: &ClientSoftware) {
        let mut map = self
            .client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Self::release(&mut map, software);
    }

    fn release(map: &mut BTreeMap<ClientSoftware, u64>, software: &ClientSoftware) {
        if let Some(count) = map.get_mut(software) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                map.remove(software);
            }
        }
    }

    /// Open connections by client software.
    pub fn client_software(&self) -> BTreeMap<ClientSoftware, u64> {
        self.client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Requests that closed their connection.
    pub fn request_errors(&self) -> u64 {
        self.request_errors.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn connections_open(&self) -> i64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections_total(&self) -> u64 {
        self.connections_total.load(Ordering::Relaxed)
    }

    /// Requests parked in `purgatory` now.
    pub(crate) fn purgatory_size(&self, purgatory: Purgatory) -> i64 {
        self.purgatory[purgatory.index()]
            .load(Ordering::Relaxed)
            .max(0)
    }

    /// Every API (and FetchConsumer/FetchFollower) that has served a request: its Kafka
    /// request name and metrics.
    pub(crate) fn apis(&self) -> impl Iterator<Item = (&'static str, &ApiMetrics)> + '_ {
        self.apis
            .iter()
            .enumerate()
            .filter(|(_, m)| m.requests.iter().any(|c| c.get() > 0))
            .map(|(slot, m)| (slot_name(slot), m))
    }

    /// The per-topic counters of the topics still in `known`, by name; forgets the others
    /// (deleted topics lose their series, as Kafka removes their metrics).
    pub(crate) fn topics(
        &self,
        known: impl Fn(&str) -> bool,
    ) -> Vec<(Arc<str>, Arc<TopicMetrics>)> {
        self.topics.retain_and_list(known)
    }

    /// The counters of one topic, if it has any.
    pub(crate) fn topic(&self, topic: &str) -> Option<Arc<TopicMetrics>> {
        self.topics.get(topic)
    }
}

/// Kafka's request name of a slot (`ApiKeys.name`, with Fetch split as `RequestMetrics`
/// splits it).
fn slot_name(slot: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..API_SLOTS)
            .map(|slot| match slot {
                FETCH_FOLLOWER_SLOT => "FetchFollower".to_owned(),
                1 => "FetchConsumer".to_owned(),
                _ => i16::try_from(slot)
                    .ok()
                    .and_then(|key| ApiKey::try_from(key).ok())
                    .map(|key| format!("{key:?}"))
                    .unwrap_or_else(|| format!("Api{slot}")),
            })
            .collect()
    });
    names[slot].as_str()
}

fn api_slot(api: ApiKey, follower_fetch: bool) -> usize {
    if api == ApiKey::Fetch && follower_fetch {
        FETCH_FOLLOWER_SLOT
    } else {
        usize::try_from(api as i16)
            .unwrap_or(0)
            .min(FETCH_FOLLOWER_SLOT - 1)
    }
}

/// The per-topic counters, shared by the connections of one broker.
#[derive(Debug, Default)]
struct TopicRegistry {
    topics: Mutex<HashMap<Arc<str>, Arc<TopicMetrics>>>,
    /// Moves on whenever a topic is forgotten, so connections drop counters they cached.
    generation: AtomicU64,
}

impl TopicRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<TopicMetrics>>> {
        // Every update is one insert or a retain: a poisoned map is still consistent.
        self.topics.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, topic: &str) -> Option<Arc<TopicMetrics>> {
        self.lock().get(topic).cloned()
    }

    fn get_or_insert(&self, topic: &str) -> Arc<TopicMetrics> {
        let mut topics = self.lock();
        if let Some(found) = topics.get(topic) {
            return Arc::clone(found);
        }
        let metrics = Arc::new(TopicMetrics::default());
        topics.insert(Arc::from(topic), Arc::clone(&metrics));
        metrics
    }

    fn retain_and_list(&self, known: impl Fn(&str) -> bool) -> Vec<(Arc<str>, Arc<TopicMetrics>)> {
        let mut topics = self.lock();
        let before = topics.len();
        topics.retain(|name, _| known(name));
        if topics.len() != before {
            self.generation.fetch_add(1, Ordering::Relaxed);
        }
        let mut listed: Vec<_> = topics
            .iter()
            .map(|(name, m)| (Arc::clone(name), Arc::clone(m)))
            .collect();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        listed
    }
}

/// One connection's own map from topic to counters, valid for one registry generation.
#[derive(Debug, Default)]
struct TopicCache {
    generation: u64,
    by_name: HashMap<StrBytes, Arc<TopicMetrics>>,
    by_id: HashMap<Uuid, Arc<TopicMetrics>>,
}

/// How a connection resolves the topics of a request: whether a name is a topic the broker
/// knows (only those get counters, so a client cannot grow the registry with made-up names),
/// and the name of a topic id (Fetch v13+).
pub(crate) trait TopicLookup {
    fn is_known(&self, topic: &str) -> bool;
    fn name_of(&self, topic_id: Uuid) -> Option<String>;
}

impl TopicLookup for crate::metadata_cache::MetadataCache {
    fn is_known(&self, topic: &str) -> bool {
        self.contains_topic(topic)
    }

    fn name_of(&self, topic_id: Uuid) -> Option<String> {
        self.snapshot().topic_name(topic_id).map(str::to_owned)
    }
}

impl TopicCache {
    fn resolve(
        &mut self,
        registry: &TopicRegistry,
        lookup: &dyn TopicLookup,
        name: &StrBytes,
        topic_id: Uuid,
    ) -> Option<Arc<TopicMetrics>> {
        let generation = registry.generation.load(Ordering::Relaxed);
        if generation != self.generation
            || self.by_name.len() + self.by_id.len() >= TOPIC_CACHE_CAPACITY
        {
            self.by_name.clear();
            self.by_id.clear();
            self.generation = generation;
        }
        if !name.is_empty() {
            if let Some(found) = self.by_name.get(name) {
                return Some(Arc::clone(found));
            }
            if !lookup.is_known(name) {
                return None;
            }
            let metrics = registry.get_or_insert(name);
            self.by_name.insert(name.clone(), Arc::clone(&metrics));
            return Some(metrics);
        }
        if topic_id.is_nil() {
            return None;
        }
        if let Some(found) = self.by_id.get(&topic_id) {
            return Some(Arc::clone(found));
        }
        let name = lookup.name_of(topic_id)?;
        let metrics = registry.get_or_insert(&name);
        self.by_id.insert(topic_id, Arc::clone(&metrics));
        Some(metrics)
    }
}

/// What a connection's task knows while it serves requests: the broker's counters, the
/// request in flight (for [`parked`]) and its topic cache.
#[derive(Debug)]
struct ConnectionScope {
    metrics: Arc<Metrics>,
    purgatory: Cell<Option<Purgatory>>,
    parked_at: Cell<Option<Instant>>,
    topics: RefCell<TopicCache>,
}

tokio::task_local! {
    static CONNECTION: ConnectionScope;
}

/// Runs a connection's task with its metrics scope.
pub(crate) async fn connection_scope<F: Future>(metrics: Arc<Metrics>, connection: F) -> F::Output {
    let scope = ConnectionScope {
        metrics,
        purgatory: Cell::new(None),
        parked_at: Cell::new(None),
        topics: RefCell::new(TopicCache::default()),
    };
    CONNECTION.scope(scope, connection).await
}

/// A handler of `api` starts on this connection.
pub(crate) fn request_started(api: ApiKey) {
    let _ = CONNECTION.try_with(|scope| {
        scope.purgatory.set(Purgatory::of(api));
        scope.parked_at.set(None);
    });
}

/// The handler of the request in flight parks (waits for others): its remote time starts,
/// and it counts in its purgatory until [`request_finished`]. Only the first call of a
/// request counts. Called where the request gives back its place in the request queue.
pub(crate) fn parked() {
    let _ = CONNECTION.try_with(|scope| {
        if scope.parked_at.get().is_some() {
            return;
        }
        scope.parked_at.set(Some(Instant::now()));
        if let Some(purgatory) = scope.purgatory.get() {
            scope.metrics.purgatory[purgatory.index()].fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// The handler of the request in flight answered; returns when it parked, if it did.
pub(crate) fn request_finished() -> Option<Instant> {
    CONNECTION
        .try_with(|scope| {
            let parked = scope.parked_at.take();
            if let (Some(_), Some(purgatory)) = (parked, scope.purgatory.take()) {
                scope.metrics.purgatory[purgatory.index()].fetch_sub(1, Ordering::Relaxed);
            }
            parked
        })
        .ok()
        .flatten()
}

/// The topic side of one request, taken before the handler consumes it and completed from
/// its response ([`TopicScan::account`]).
#[derive(Debug)]
pub(crate) enum TopicScan {
    /// Nothing counted per topic.
    None,
    /// A Produce: per topic, per partition (in request order) its bytes and records.
    Produce(Vec<(StrBytes, Vec<PartitionSize>)>),
    /// A Fetch, from a follower or a consumer.
    Fetch { follower: bool },
}

/// One partition's record set in a Produce request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartitionSize {
    index: i32,
    bytes: u64,
    records: u64,
}

/// Produce errors Kafka does not count as failed produce requests: the expected ones
/// (`ReplicaManager.appendToLocalLog`), plus those answered after the append or before it
/// is tried (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, INVALID_REQUIRED_ACKS).
const EXPECTED_PRODUCE_ERRORS: &[i16] = &[2, 3, 6, 7, 10, 18, 20, 21, 56];
/// Fetch errors Kafka does not count as failed fetch requests (`readFromLocalLog`).
const EXPECTED_FETCH_ERRORS: &[i16] = &[1, 3, 6, 9, 56, 74, 75, 100];
/// MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE: the bytes count as rejected.
const REJECTED_PRODUCE_ERRORS: &[i16] = &[10, 18];

impl TopicScan {
    /// What `request` will need counted once answered.
    pub(crate) fn of(request: &RequestKind) -> TopicScan {
        match request {
            RequestKind::Produce(produce) => TopicScan::Produce(
                produce
                    .topic_data
                    .iter()
                    .map(|topic| {
                        let sizes = topic
                            .partition_data
                            .iter()
                            .map(|p| {
                                let records = p.records.as_deref().unwrap_or_default();
                                PartitionSize {
                                    index: p.index,
                                    bytes: records.len() as u64,
                                    records: record_count(records),
                                }
                            })
                            .collect();
                        (topic.name.0.clone(), sizes)
                    })
                    .collect(),
            ),
            RequestKind::Fetch(fetch) => TopicScan::Fetch {
                follower: fetch.replica_id.0 >= 0 || fetch.replica_state.replica_id.0 >= 0,
            },
            _ => TopicScan::None,
        }
    }

    /// Whether the request is a follower's Fetch.
    pub(crate) fn is_follower_fetch(&self) -> bool {
        matches!(self, TopicScan::Fetch { follower: true })
    }

    /// Counts the answered request per topic and over all topics, on the connection's task.
    pub(crate) fn account(&self, response: &ResponseKind, lookup: &dyn TopicLookup) {
        if matches!(self, TopicScan::None) {
            return;
        }
        let _ = CONNECTION.try_with(|scope| {
            let mut cache = scope.topics.borrow_mut();
            let metrics = &scope.metrics;
            match (self, response) {
                (TopicScan::Produce(topics), ResponseKind::Produce(response)) => {
                    for (topic, (name, sizes)) in response.responses.iter().zip(topics) {
                        let per_topic = cache.resolve(&metrics.topics, lookup, name, Uuid::nil());
                        for partition in &topic.partition_responses {
                            let Some(size) = sizes.iter().find(|s| s.index == partition.index)
                            else {
                                continue;
                            };
                            count_produce(&metrics.all_topics, partition, size);
                            if let Some(per_topic) = &per_topic {
                                count_produce(per_topic, partition, size);
                            }
                        }
                    }
                }
                (TopicScan::Fetch { follower }, ResponseKind::Fetch(response)) => {
                    for topic in &response.responses {
                        let per_topic =
                            cache.resolve(&metrics.topics, lookup, &topic.topic.0, topic.topic_id);
                        for partition in &topic.partitions {
                            let bytes = partition
                                .records
                                .as_ref()
                                .map_or(0, |r| crate::zero_copy::records_len(r))
                                as u64;
                            let failed = partition.error_code != 0
                                && !EXPECTED_FETCH_ERRORS.contains(&partition.error_code);
                            for m in
                                std::iter::once(&metrics.all_topics).chain(per_topic.as_deref())
                            {
                                m.total_fetch_requests.inc();
                                if failed {
                                    m.failed_fetch_requests.inc();
                                }
                                if !follower {
                                    m.bytes_out.add(bytes);
                                }
                            }
                            if *follower {
                                metrics.replication_bytes_out.add(bytes);
                            }
                        }
                    }
                }
                _ => {}
            }
        });
    }
}

fn count_produce(
    metrics: &TopicMetrics,
    partition: &kafka_protocol::messages::produce_response::PartitionProduceResponse,
    size: &PartitionSize,
) {
    metrics.total_produce_requests.inc();
    // Appended (also when acks=-1 then timed out waiting for the ISR: the records are in).
    if partition.base_offset >= 0 {
        metrics.bytes_in.add(size.bytes);
        metrics.messages_in.add(size.records);
    }
    let code = partition.error_code;
    if code != 0 && !EXPECTED_PRODUCE_ERRORS.contains(&code) {
        metrics.failed_produce_requests.inc();
    }
    if REJECTED_PRODUCE_ERRORS.contains(&code) {
        metrics.bytes_rejected.add(size.bytes);
    }
}

/// Records in a record set, from the batch headers: a v2 batch's record count; a message
/// of format v0/v1 counts one (a compressed wrapper counts as one message). Stops at the
/// first incomplete entry; the validation of the append itself happens elsewhere.
fn record_count(records: &[u8]) -> u64 {
    // Both formats start with offset (8 bytes) and length (4 bytes); the magic byte is at
    // 16 (after a v2 batch's partition leader epoch, or a legacy message's CRC).
    const LENGTH_AT: usize = 8;
    const MAGIC_AT: usize = 16;
    const V2_RECORD_COUNT_AT: usize = 57;
    let mut count = 0u64;
    let mut position = 0usize;
    while let Some(length) = records
        .get(position + LENGTH_AT..position + LENGTH_AT + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    {
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        let end = position + LENGTH_AT + 4 + length;
        if end > records.len() {
            break;
        }
        let magic = records.get(position + MAGIC_AT).copied().unwrap_or(0);
        count += match records.get(position + V2_RECORD_COUNT_AT..position + V2_RECORD_COUNT_AT + 4)
        {
            Some(b) if magic >= 2 && position + V2_RECORD_COUNT_AT + 4 <= end => {
                u64::try_from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0)
            }
            _ => 1,
        };
        position = end;
    }
    count
}

#[cfg(test)]
mod tests;
