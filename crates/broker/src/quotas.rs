//! Client quotas (Kafka's `ClientQuotaManager` for produce and fetch, KIP-13 and KIP-55, and
//! its `ClientRequestQuotaManager`, KIP-124): `producer_byte_rate`, `consumer_byte_rate` and
//! `request_percentage` from `/config/users/<u>`,
//! `/config/clients/<c>` and `/config/users/<u>/clients/<c>`, each with `<default>`
//! entities, measured per broker.
//!
//! - Which quota applies: the first entity that has one, in Kafka's order (user+client,
//!   user+default client, user, default user+client, default user+default client, default
//!   user, client, default client). The matched entity is also the bucket the bytes are
//!   counted in: a quota from `/config/users/<u>` is shared by all of that user's clients; one
//!   from `/config/clients/<default>` gives every client id its own.
//! - The rate is Kafka's sampled `Rate`: `quota.window.num` samples of
//!   `quota.window.size.seconds`, divided by the elapsed window, at least `num - 1` whole
//!   samples. A request that takes the rate over its quota is throttled by
//!   `(rate - quota) / quota * window` ms: its response carries `throttle_time_ms`, and the
//!   connection reads nothing for that long ([`THROTTLE`]): from Produce v6 / Fetch v8 after
//!   sending the response (KIP-219), before sending it for older versions, as Kafka does.
//! - A throttled Fetch gets no records (Kafka's `getThrottledResponse`), and its bytes are
//!   not counted.
//! - Changes arrive through `/config/changes` (`config_changes.rs` calls [`Quotas::reload`]).
//!
//! - `request_percentage` (Kafka's `ClientRequestQuotaManager`, KIP-124): the share of one
//!   request thread's time a user/client may use, in percent (200 = two threads' worth),
//!   with the same entities, precedence, buckets and sampled rate. A request's time is what
//!   its handler spent running: the time inside the polls of its future plus the work it ran
//!   on the blocking pool ([`crate::blocking::run`]), not the time it waited (a long-polling
//!   Fetch or a Produce waiting for acks costs nothing while parked, as in Kafka's
//!   purgatory). Its throttle is capped at one window (`quota.window.size.seconds`), as
//!   Kafka's. Every answer then carries `throttle_time_ms` (the larger of a byte-rate and the
//!   request throttle) and mutes the connection; a consumer Fetch over it gets no records.
//!   Exempt, as in Kafka: the controller's requests (LeaderAndIsr, UpdateMetadata,
//!   StopReplica, ControlledShutdown, AlterPartition) and followers' fetches.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use tracing::{debug, info};
use znodes::zk_client::KafkaZkClient;

/// Kafka's name for the default entity.
pub(crate) const DEFAULT: &str = "<default>";
pub(crate) const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub(crate) const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub(crate) const REQUEST_PERCENTAGE: &str = "request_percentage";

tokio::task_local! {
    /// Milliseconds the connection handling this request stays muted after (or before) it
    /// answers; set by the handlers, read by `connection.rs`.
    pub(crate) static THROTTLE: Cell<u32>;
}

/// The time a request's handler has spent running so far (see the module docs).
#[derive(Debug, Default)]
struct RequestClock {
    /// Polls finished and blocking-pool work done.
    spent: Cell<Duration>,
    /// When the poll running now started.
    polling_since: Cell<Option<std::time::Instant>>,
    /// Whether the handler already counted its time against the request quota (Fetch does,
    /// to send a throttled consumer no records).
    recorded: Cell<bool>,
}

tokio::task_local! {
    static CLOCK: RequestClock;
}

/// Runs a request's handler, measuring the time it spends running ([`RequestClock`]).
pub(crate) async fn timed<F: std::future::Future>(handler: F) -> F::Output {
    let mut handler = std::pin::pin!(handler);
    CLOCK
        .scope(
            RequestClock::default(),
            std::future::poll_fn(|cx| {
                let start = std::time::Instant::now();
                CLOCK.with(|c| c.polling_since.set(Some(start)));
                let polled = handler.as_mut().poll(cx);
                CLOCK.with(|c| {
                    c.polling_since.set(None);
                    c.spent.set(c.spent.get() + start.elapsed());
                });
                polled
            }),
        )
        .await
}

/// Counts work done for the request being handled elsewhere (on the blocking pool).
pub(crate) fn add_request_time(spent: Duration) {
    let _ = CLOCK.try_with(|c| c.spent.set(c.spent.get() + spent));
}

/// The request's running time so far; `None` outside [`timed`].
fn request_time_so_far() -> Option<Duration> {
    CLOCK
        .try_with(|c| {
            let running = c
                .polling_since
                .get()
                .map_or(Duration::ZERO, |since| since.elapsed());
            c.spent.get() + running
        })
        .ok()
}

/// Counts the request's time so far against the client's `request_percentage` (once per
/// request); the throttle (ms), also set for the connection's mute. 0 when no request quota
/// applies or the client is within it.
pub(crate) fn throttle_request(
    ctx: &crate::context::BrokerContext,
    rctx: &crate::auth::RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
) -> i32 {
    if !ctx.quotas.any(QuotaType::Request) {
        return 0;
    }
    let Some(spent) = request_time_so_far() else {
        return 0;
    };
    if CLOCK.with(|c| c.recorded.replace(true)) {
        return 0;
    }
    let (user, client_id) = who(rctx, header);
    // Kafka's NanosToPercentagePerSecond: a second of thread time is 100 (percent).
    let percent = spent.as_secs_f64() * 100.0;
    let ms = ctx
        .quotas
        .record_value(QuotaType::Request, user, client_id, percent);
    set_throttle(ms);
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Records the throttle of the request being handled (the longest one wins).
pub(crate) fn set_throttle(ms: u32) {
    let _ = THROTTLE.try_with(|t| t.set(t.get().max(ms)));
}

/// Runs a request's handler with a throttle slot; returns its output and the ms to mute.
pub(crate) async fn scope<F: std::future::Future>(handler: F) -> (F::Output, u32) {
    THROTTLE
        .scope(Cell::new(0), async {
            let output = handler.await;
            (output, THROTTLE.with(Cell::get))
        })
        .await
}

/// Whether a response at `version` is sent before the mute (KIP-219: Produce v6+, Fetch v8+,
/// where the client waits `throttle_time_ms` itself) or after it (older clients).
pub(crate) fn answer_then_mute(api_key: kafka_protocol::messages::ApiKey, version: i16) -> bool {
    use kafka_protocol::messages::ApiKey;
    match api_key {
        ApiKey::Produce => version >= 6,
        ApiKey::Fetch => version >= 8,
        _ => true,
    }
}

/// The record bytes of a Produce request (what `producer_byte_rate` counts).
pub(crate) fn produce_bytes(request: &kafka_protocol::messages::ProduceRequest) -> usize {
    request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .map(|p| p.records.as_ref().map_or(0, bytes::Bytes::len))
        .sum()
}

fn who<'a>(
    rctx: &'a crate::auth::RequestContext,
    header: &'a kafka_protocol::messages::RequestHeader,
) -> (&'a str, &'a str) {
    (
        rctx.principal.as_ref(),
        header.client_id.as_deref().unwrap_or(""),
    )
}

/// Counts a Produce's bytes against the client's quota; the throttle (ms) for its response,
/// also set for the connection's mute.
pub(crate) fn throttle_produce(
    ctx: &crate::context::BrokerContext,
    rctx: &crate::auth::RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
    bytes: usize,
) -> i32 {
    if !ctx.quotas.any(QuotaType::Produce) {
        return 0;
    }
    let (user, client_id) = who(rctx, header);
    let ms = ctx
        .quotas
        .record(QuotaType::Produce, user, client_id, bytes);
    set_throttle(ms);
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Counts a consumer Fetch's record bytes against its quota. When that throttles it (ms
/// returned, set for the mute), or the request quota already did (`throttled`), the bytes
/// are taken back: the response goes without records.
pub(crate) fn throttle_fetch(
    ctx: &crate::context::BrokerContext,
    rctx: &crate::auth::RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
    bytes: i64,
    throttled: bool,
) -> i32 {
    if !ctx.quotas.any(QuotaType::Fetch) {
        return 0;
    }
    let (user, client_id) = who(rctx, header);
    let bytes = usize::try_from(bytes).unwrap_or(0);
    let ms = ctx.quotas.record(QuotaType::Fetch, user, client_id, bytes);
    if ms > 0 || throttled {
        ctx.quotas
            .unrecord(QuotaType::Fetch, user, client_id, bytes);
        set_throttle(ms);
    }
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Puts a throttle into an answer that has `throttle_time_ms` (the larger one stays; the
/// versions without the field do not encode it).
pub(crate) fn set_response_throttle(
    response: &mut kafka_protocol::messages::ResponseKind,
    ms: i32,
) {
    macro_rules! with_throttle {
        ($($variant:ident),* $(,)?) => {
            match response {
                $(kafka_protocol::messages::ResponseKind::$variant(r) => {
                    r.throttle_time_ms = r.throttle_time_ms.max(ms);
                })*
                _ => {}
            }
        };
    }
    with_throttle!(
        AddOffsetsToTxn,
        AddPartitionsToTxn,
        AddRaftVoter,
        AllocateProducerIds,
        AlterClientQuotas,
        AlterConfigs,
        AlterPartition,
        AlterPartitionReassignments,
        AlterReplicaLogDirs,
        AlterUserScramCredentials,
        ApiVersions,
        AssignReplicasToDirs,
        BrokerHeartbeat,
        BrokerRegistration,
        ConsumerGroupDescribe,
        ConsumerGroupHeartbeat,
        ControllerRegistration,
        CreateAcls,
        CreateDelegationToken,
        CreatePartitions,
        CreateTopics,
        DeleteAcls,
        DeleteGroups,
        DeleteRecords,
        DeleteTopics,
        DescribeAcls,
        DescribeClientQuotas,
        DescribeCluster,
        DescribeConfigs,
        DescribeDelegationToken,
        DescribeGroups,
        DescribeLogDirs,
        DescribeProducers,
        DescribeTopicPartitions,
        DescribeTransactions,
        DescribeUserScramCredentials,
        ElectLeaders,
        EndTxn,
        ExpireDelegationToken,
        Fetch,
        FetchSnapshot,
        FindCoordinator,
        GetTelemetrySubscriptions,
        Heartbeat,
        IncrementalAlterConfigs,
        InitProducerId,
        JoinGroup,
        LeaveGroup,
        ListClientMetricsResources,
        ListGroups,
        ListOffsets,
        ListPartitionReassignments,
        ListTransactions,
        Metadata,
        OffsetCommit,
        OffsetDelete,
        OffsetFetch,
        OffsetForLeaderEpoch,
        Produce,
        PushTelemetry,
        RemoveRaftVoter,
        RenewDelegationToken,
        SyncGroup,
        TxnOffsetCommit,
        UnregisterBroker,
        UpdateFeatures,
        UpdateRaftVoter,
    );
}

/// Produce or Fetch bytes, or request time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum QuotaType {
    Produce,
    Fetch,
    Request,
}

/// One side of an entity: a name, the `<default>`, or absent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Part {
    Named(String),
    Default,
}

impl Part {
    fn parse(sanitized: &str) -> Part {
        if sanitized == DEFAULT {
            Part::Default
        } else {
            Part::Named(desanitize(sanitized))
        }
    }
}

/// An entity with config: (user, client id).
type Entity = (Option<Part>, Option<Part>);

/// One configured entity's quotas: bytes per second, and percent of a request thread.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Limits {
    producer: Option<f64>,
    consumer: Option<f64>,
    request: Option<f64>,
}

impl Limits {
    fn get(&self, kind: QuotaType) -> Option<f64> {
        match kind {
            QuotaType::Produce => self.producer,
            QuotaType::Fetch => self.consumer,
            QuotaType::Request => self.request,
        }
    }
}

/// Where a client's bytes are counted: the matched entity, defaults replaced by the client's
/// names.
type Bucket = (QuotaType, Option<String>, Option<String>);

/// Kafka's sampled rate: `samples` windows of `window`.
#[derive(Debug)]
struct Rate {
    /// (start, bytes) of each sample, oldest first.
    samples: VecDeque<(tokio::time::Instant, f64)>,
}

impl Rate {
    fn new() -> Rate {
        Rate {
            samples: VecDeque::new(),
        }
    }

    fn record(&mut self, value: f64, now: tokio::time::Instant, window: Duration, num: usize) {
        match self.samples.back_mut() {
            Some((start, total)) if now.duration_since(*start) < window => *total += value,
            _ => self.samples.push_back((now, value)),
        }
        while self.samples.len() > num {
            self.samples.pop_front();
        }
    }

    /// Bytes per second and the window it was measured over.
    fn measure(&mut self, now: tokio::time::Instant, window: Duration, num: usize) -> (f64, f64) {
        let span = window * num as u32;
        while self
            .samples
            .front()
            .is_some_and(|(start, _)| now.duration_since(*start) >= span)
        {
            self.samples.pop_front();
        }
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        let elapsed = self
            .samples
            .front()
            .map_or(Duration::ZERO, |(start, _)| now.duration_since(*start));
        // At least num - 1 whole windows (Kafka's Rate.windowSize).
        let full = (elapsed.as_nanos() / window.as_nanos().max(1)) as u32;
        let min_full = num.saturating_sub(1) as u32;
        let elapsed = if full < min_full {
            elapsed + window * (min_full - full)
        } else {
            elapsed
        };
        let seconds = elapsed.as_secs_f64().max(1e-3);
        (total / seconds, seconds)
    }
}

/// The broker's quota configs and the rates measured against them.
#[derive(Debug)]
pub(crate) struct Quotas {
    window: Duration,
    num: usize,
    configs: RwLock<HashMap<Entity, Limits>>,
    rates: Mutex<HashMap<Bucket, Rate>>,
}

impl Quotas {
    pub(crate) fn new(window: Duration, num: usize) -> Quotas {
        Quotas {
            window,
            num: num.max(1),
            configs: RwLock::new(HashMap::new()),
            rates: Mutex::new(HashMap::new()),
        }
    }

    /// Counts `bytes` for the client and returns how long it is throttled (ms), 0 when no
    /// quota applies or it is within it.
    pub(crate) fn record(&self, kind: QuotaType, user: &str, client_id: &str, bytes: usize) -> u32 {
        self.record_value(kind, user, client_id, bytes as f64)
    }

    /// Counts `value` (bytes, or percent-seconds of request time) for the client; the
    /// throttle (ms) as [`Quotas::record`].
    pub(crate) fn record_value(
        &self,
        kind: QuotaType,
        user: &str,
        client_id: &str,
        value: f64,
    ) -> u32 {
        let Some((quota, bucket)) = self.quota_for(kind, user, client_id) else {
            return 0;
        };
        let now = tokio::time::Instant::now();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        let rate = rates.entry(bucket).or_insert_with(Rate::new);
        rate.record(value, now, self.window, self.num);
        let (observed, seconds) = rate.measure(now, self.window, self.num);
        if observed <= quota {
            return 0;
        }
        // Kafka's QuotaUtils.throttleTime; the request quota's is bounded by one window
        // (ClientRequestQuotaManager's maxThrottleTimeMs).
        let mut ms = (observed - quota) / quota * seconds * 1000.0;
        if kind == QuotaType::Request {
            ms = ms.min(self.window.as_secs_f64() * 1000.0);
        }
        ms.round().clamp(0.0, f64::from(i32::MAX as u32)) as u32
    }

    /// Takes `bytes` back out of the client's rate (a throttled Fetch sends none).
    pub(crate) fn unrecord(&self, kind: QuotaType, user: &str, client_id: &str, bytes: usize) {
        let Some((_, bucket)) = self.quota_for(kind, user, client_id) else {
            return;
        };
        let now = tokio::time::Instant::now();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rate) = rates.get_mut(&bucket) {
            rate.record(-(bytes as f64), now, self.window, self.num);
        }
    }

    /// Whether any quota of `kind` is configured (the handlers skip the bookkeeping if not).
    pub(crate) fn any(&self, kind: QuotaType) -> bool {
        self.configs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .any(|l| l.get(kind).is_some())
    }

    /// The quota of `kind` for the client and the bucket its bytes go to (Kafka's order of
    /// precedence, see the module docs).
    fn quota_for(&self, kind: QuotaType, user: &str, client_id: &str) -> Option<(f64, Bucket)> {
        let configs = self.configs.read().unwrap_or_else(|p| p.into_inner());
        if configs.is_empty() {
            return None;
        }
        let u = || Some(Part::Named(user.to_owned()));
        let c = || Some(Part::Named(client_id.to_owned()));
        let d = || Some(Part::Default);
        let order: [Entity; 8] = [
            (u(), c()),
            (u(), d()),
            (u(), None),
            (d(), c()),
            (d(), d()),
            (d(), None),
            (None, c()),
            (None, d()),
        ];
        order.into_iter().find_map(|entity| {
            let quota = configs.get(&entity)?.get(kind)?;
            let name = |part: &Option<Part>, actual: &str| part.as_ref().map(|_| actual.to_owned());
            let bucket = (kind, name(&entity.0, user), name(&entity.1, client_id));
            Some((quota, bucket))
        })
    }

    /// Reads every user and client quota from the store (at start).
    pub(crate) async fn load(&self, zk: &KafkaZkClient) {
        let mut entities = Vec::new();
        match zk.get_config_entity_children("clients").await {
            Ok(children) => entities.extend(children.into_iter().map(|c| format!("clients/{c}"))),
            Err(err) => debug!(error = %err, "cannot list client configs"),
        }
        match zk.get_config_entity_children("users").await {
            Ok(users) => {
                for user in users {
                    entities.push(format!("users/{user}"));
                    match zk
                        .get_config_entity_children(&format!("users/{user}/clients"))
                        .await
                    {
                        Ok(clients) => entities.extend(
                            clients
                                .into_iter()
                                .map(|c| format!("users/{user}/clients/{c}")),
                        ),
                        Err(err) => debug!(error = %err, "cannot list a user's client configs"),
                    }
                }
            }
            Err(err) => debug!(error = %err, "cannot list user configs"),
        }
        for entity in entities {
            self.reload(zk, &entity).await;
        }
    }

    /// Reads one entity's config again (`users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`,
    /// sanitized names): after a `/config/changes` notification.
    pub(crate) async fn reload(&self, zk: &KafkaZkClient, entity_path: &str) {
        let Some(entity) = parse_entity(entity_path) else {
            debug!(entity = entity_path, "not a quota entity");
            return;
        };
        let config = match zk.get_entity_config(entity_path).await {
            Ok(config) => config,
            Err(err) => {
                debug!(entity = entity_path, error = %err, "cannot read a quota config");
                return;
            }
        };
        let rate = |key: &str| {
            config
                .get(key)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| *v > 0.0)
        };
        let limits = Limits {
            producer: rate(PRODUCER_BYTE_RATE),
            consumer: rate(CONSUMER_BYTE_RATE),
            request: rate(REQUEST_PERCENTAGE),
        };
        let mut configs = self.configs.write().unwrap_or_else(|p| p.into_inner());
        let before = configs.get(&entity).copied();
        if limits == Limits::default() {
            configs.remove(&entity);
        } else {
            configs.insert(entity, limits);
        }
        if before != Some(limits) {
            info!(entity = entity_path, producer_byte_rate = ?limits.producer,
                consumer_byte_rate = ?limits.consumer, request_percentage = ?limits.request,
                "client quota changed");
        }
    }
}

/// `users/<u>`, `clients/<c>`, `users/<u>/clients/<c>` as an entity.
fn parse_entity(path: &str) -> Option<Entity> {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["users", u] => Some((Some(Part::parse(u)), None)),
        ["clients", c] => Some((None, Some(Part::parse(c)))),
        ["users", u, "clients", c] => Some((Some(Part::parse(u)), Some(Part::parse(c)))),
        _ => None,
    }
}

/// Kafka's `Sanitizer.sanitize`: how a user or client id is named in the store.
pub(crate) fn sanitize(name: &str) -> String {
    znodes::paths::sanitize_entity_name(name)
}

/// The inverse of [`sanitize`] (text that is not URL encoded is kept as it is).
pub(crate) fn desanitize(name: &str) -> String {
    znodes::paths::desanitize_entity_name(name).unwrap_or_else(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(entries: &[(&str, Limits)]) -> Quotas {
        let q = Quotas::new(Duration::from_secs(1), 11);
        let mut configs = q.configs.write().unwrap();
        for (path, limits) in entries {
            configs.insert(parse_entity(path).unwrap(), *limits);
        }
        drop(configs);
        q
    }

    fn produce(rate: f64) -> Limits {
        Limits {
            producer: Some(rate),
            ..Limits::default()
        }
    }

    #[test]
    fn kafkas_order_of_precedence_and_buckets() {
        let q = quotas(&[
            ("users/alice/clients/app", produce(1.0)),
            ("users/alice/clients/<default>", produce(2.0)),
            ("users/alice", produce(3.0)),
            ("users/<default>/clients/app", produce(4.0)),
            ("users/<default>/clients/<default>", produce(5.0)),
            ("users/<default>", produce(6.0)),
            ("clients/app", produce(7.0)),
            ("clients/<default>", produce(8.0)),
        ]);
        let got = |u: &str, c: &str| q.quota_for(QuotaType::Produce, u, c).unwrap();
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            got("alice", "app"),
            (1.0, (QuotaType::Produce, s("alice"), s("app")))
        );
        assert_eq!(
            got("alice", "x"),
            (2.0, (QuotaType::Produce, s("alice"), s("x")))
        );
        assert_eq!(
            got("bob", "app"),
            (4.0, (QuotaType::Produce, s("bob"), s("app")))
        );
        assert_eq!(
            got("bob", "x"),
            (5.0, (QuotaType::Produce, s("bob"), s("x")))
        );
        assert!(q.quota_for(QuotaType::Fetch, "alice", "app").is_none());
        // Without user quotas: the client ones, shared by every user of that client id.
        let q = quotas(&[("users/alice", produce(3.0)), ("clients/app", produce(7.0))]);
        let got = |u: &str, c: &str| q.quota_for(QuotaType::Produce, u, c).unwrap();
        assert_eq!(
            got("alice", "app"),
            (3.0, (QuotaType::Produce, s("alice"), None))
        );
        assert_eq!(
            got("bob", "app"),
            (7.0, (QuotaType::Produce, None, s("app")))
        );
        assert!(q.quota_for(QuotaType::Produce, "bob", "other").is_none());
    }

    #[test]
    fn names_are_sanitized_as_kafka_does() {
        assert_eq!(sanitize("app-1_x.y"), "app-1_x.y");
        assert_eq!(sanitize("a b*c/d"), "a%20b%2Ac%2Fd");
        assert_eq!(sanitize("é"), "%C3%A9");
        for name in ["a b*c/d", "é", "plain", "%"] {
            assert_eq!(desanitize(&sanitize(name)), name);
        }
        assert_eq!(
            parse_entity("users/a%2Fb/clients/<default>"),
            Some((Some(Part::Named("a/b".into())), Some(Part::Default)))
        );
        assert_eq!(parse_entity("topics/t"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn throttle_brings_the_rate_back_to_the_quota() {
        let q = quotas(&[("clients/c", produce(1000.0))]);
        // Under the quota: 10 windows' worth counts as at least 10 s.
        assert_eq!(q.record(QuotaType::Produce, "u", "c", 9_000), 0);
        // Over it: (rate - quota) / quota * window. 20,000 bytes over 10 s = 2,000/s.
        let ms = q.record(QuotaType::Produce, "u", "c", 11_000);
        assert_eq!(ms, 10_000);
        // Another client id has no quota.
        assert_eq!(q.record(QuotaType::Produce, "u", "other", 1_000_000), 0);
        // Once the samples have expired nothing is held against the client.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(q.record(QuotaType::Produce, "u", "c", 1), 0);
        // A throttled Fetch's bytes are taken back.
        let q = quotas(&[(
            "clients/c",
            Limits {
                consumer: Some(1000.0),
                ..Limits::default()
            },
        )]);
        assert!(q.record(QuotaType::Fetch, "u", "c", 50_000) > 0);
        q.unrecord(QuotaType::Fetch, "u", "c", 50_000);
        assert_eq!(q.record(QuotaType::Fetch, "u", "c", 100), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn request_time_is_throttled_like_bytes_but_at_most_one_window() {
        let request = |percent: f64| Limits {
            request: Some(percent),
            ..Limits::default()
        };
        let q = quotas(&[
            ("users/u", request(10.0)),
            ("clients/<default>", request(50.0)),
        ]);
        // The user's quota wins over the default client's (Kafka's precedence), shared by
        // every client id of that user.
        assert_eq!(
            q.quota_for(QuotaType::Request, "u", "a").unwrap(),
            (10.0, (QuotaType::Request, Some("u".to_owned()), None))
        );
        // 50 percent-seconds over at least 10 s: 5 %, within 10 %.
        assert_eq!(q.record_value(QuotaType::Request, "u", "a", 50.0), 0);
        // 150 over 10 s: 15 %, (15 - 10) / 10 * 10 s = 5 s, capped at one 1 s window.
        assert_eq!(q.record_value(QuotaType::Request, "u", "b", 100.0), 1_000);
        // Just over: 10.5 % gives 0.05 * 10 s = 500 ms.
        let q = quotas(&[("clients/c", request(10.0))]);
        assert_eq!(q.record_value(QuotaType::Request, "x", "c", 105.0), 500);
        // Byte quotas do not count request time and the other way round.
        assert_eq!(q.record(QuotaType::Produce, "x", "c", 1 << 30), 0);
        // Another user with no quota of its own gets the default client's, per client id.
        let q = quotas(&[
            ("users/u", request(10.0)),
            ("clients/<default>", request(50.0)),
        ]);
        assert_eq!(
            q.quota_for(QuotaType::Request, "v", "a").unwrap(),
            (50.0, (QuotaType::Request, None, Some("a".to_owned())))
        );
    }

    /// The clock counts time spent running (polls and blocking-pool work), not waiting.
    #[tokio::test]
    async fn the_request_clock_counts_running_not_waiting() {
        // Waits a second for a signal: two short polls around it. (Only polls that took a
        // whole second between them could fail this, not a slow machine's scheduling.)
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let signal = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = tx.send(());
        });
        let spent = timed(async {
            let _ = rx.await;
            add_request_time(Duration::from_millis(7));
            request_time_so_far().unwrap()
        })
        .await;
        signal.await.unwrap();
        assert!(spent >= Duration::from_millis(7), "{spent:?}");
        assert!(
            spent < Duration::from_secs(1),
            "the wait was counted: {spent:?}"
        );
        assert_eq!(request_time_so_far(), None);
    }

    /// A client that sends as fast as it is let (waiting out each throttle, as a muted
    /// connection does) gets its quota over time, whatever its request size.
    #[tokio::test(start_paused = true)]
    async fn a_greedy_client_gets_its_quota() {
        for request_bytes in [1_000usize, 50_000, 400_000] {
            let q = quotas(&[("clients/c", produce(100_000.0))]);
            let start = tokio::time::Instant::now();
            let mut sent = 0usize;
            // Past the first windows (whose burst Kafka allows too), measure 120 s.
            let mut measured_from = None;
            loop {
                let elapsed = start.elapsed();
                if elapsed >= Duration::from_secs(150) {
                    break;
                }
                if measured_from.is_none() && elapsed >= Duration::from_secs(30) {
                    measured_from = Some((tokio::time::Instant::now(), sent));
                }
                let ms = q.record(QuotaType::Produce, "u", "c", request_bytes);
                sent += request_bytes;
                tokio::time::advance(Duration::from_millis(u64::from(ms).max(1))).await;
            }
            let (from, sent_before) = measured_from.unwrap();
            let rate = (sent - sent_before) as f64 / from.elapsed().as_secs_f64();
            assert!(
                (90_000.0..=110_000.0).contains(&rate),
                "{request_bytes}-byte requests: {rate:.0} B/s for a quota of 100,000"
            );
        }
    }
}
