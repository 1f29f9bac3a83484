//! Client byte-rate quotas (Kafka's `ClientQuotaManager` for produce and fetch, KIP-13 and
//! KIP-55): `producer_byte_rate` and `consumer_byte_rate` from `/config/users/<u>`,
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
//! Not here yet: `request_percentage` (the request-time quota), DescribeClientQuotas /
//! AlterClientQuotas and `gregor configs`.

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

tokio::task_local! {
    /// Milliseconds the connection handling this request stays muted after (or before) it
    /// answers; set by the handlers, read by `connection.rs`.
    pub(crate) static THROTTLE: Cell<u32>;
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
/// returned, set for the mute) the bytes are taken back: the response goes without records.
pub(crate) fn throttle_fetch(
    ctx: &crate::context::BrokerContext,
    rctx: &crate::auth::RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
    bytes: i64,
) -> i32 {
    if !ctx.quotas.any(QuotaType::Fetch) {
        return 0;
    }
    let (user, client_id) = who(rctx, header);
    let bytes = usize::try_from(bytes).unwrap_or(0);
    let ms = ctx.quotas.record(QuotaType::Fetch, user, client_id, bytes);
    if ms > 0 {
        ctx.quotas
            .unrecord(QuotaType::Fetch, user, client_id, bytes);
        set_throttle(ms);
    }
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Produce or Fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum QuotaType {
    Produce,
    Fetch,
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

/// One configured entity's quotas in bytes per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Limits {
    producer: Option<f64>,
    consumer: Option<f64>,
}

impl Limits {
    fn get(&self, kind: QuotaType) -> Option<f64> {
        match kind {
            QuotaType::Produce => self.producer,
            QuotaType::Fetch => self.consumer,
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
        let Some((quota, bucket)) = self.quota_for(kind, user, client_id) else {
            return 0;
        };
        let now = tokio::time::Instant::now();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        let rate = rates.entry(bucket).or_insert_with(Rate::new);
        rate.record(bytes as f64, now, self.window, self.num);
        let (observed, seconds) = rate.measure(now, self.window, self.num);
        if observed <= quota {
            return 0;
        }
        // Kafka's QuotaUtils.throttleTime.
        let ms = (observed - quota) / quota * seconds * 1000.0;
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
                consumer_byte_rate = ?limits.consumer, "client quota changed");
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
            consumer: None,
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
                producer: None,
                consumer: Some(1000.0),
            },
        )]);
        assert!(q.record(QuotaType::Fetch, "u", "c", 50_000) > 0);
        q.unrecord(QuotaType::Fetch, "u", "c", 50_000);
        assert_eq!(q.record(QuotaType::Fetch, "u", "c", 100), 0);
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
