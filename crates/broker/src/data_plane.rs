//! Broker glue of the data plane: the effective log settings of a topic (broker `log.*`
//! defaults under `/config/topics/<t>` overrides), and the background passes over the open
//! logs: `flush.ms`, the recovery-point / log-start-offset checkpoints
//! (`log.flush.offset.checkpoint.interval.ms`) and retention
//! (`log.retention.check.interval.ms`). Live topic-config changes arrive through
//! [`crate::config_changes`].

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use model::topic_config::TopicConfig;
use model::TopicName;
use replication::PartitionConfig;
use storage::log::LogConfig;
use tokio::sync::watch;
use tracing::warn;

use crate::context::BrokerContext;

/// Kafka's `log.flush.offset.checkpoint.interval.ms` default.
const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 60_000;
/// Kafka's `log.retention.check.interval.ms` default.
const DEFAULT_RETENTION_CHECK_INTERVAL_MS: u64 = 300_000;
/// How often `flush.ms` deadlines are checked (Kafka's `log.flush.scheduler.interval.ms`
/// defaults to never; topics with `flush.ms` set need a tick).
const DEFAULT_FLUSH_CHECK_INTERVAL_MS: u64 = 1_000;

/// How the AlterPartition sender finds the controller: the metadata cache's controller and
/// this broker's current epoch. Holds the context weakly (the context owns the sender).
#[derive(Debug)]
pub(crate) struct ControllerFromMetadata(pub Weak<BrokerContext>);

impl replication::ControllerChannel for ControllerFromMetadata {
    /// The controller's endpoint on the inter-broker listener (where broker requests are
    /// accepted), else the one clients use.
    fn controller_addr(&self) -> Option<String> {
        let ctx = self.0.upgrade()?;
        ctx.metadata_cache
            .controller_endpoint(ctx.config.inter_broker_listener_name())
    }

    fn broker_epoch(&self) -> i64 {
        self.0.upgrade().map_or(-1, |ctx| {
            ctx.broker_epoch.load(std::sync::atomic::Ordering::SeqCst)
        })
    }

    fn proof_tags(&self, broker_epoch: i64) -> BTreeMap<i32, bytes::Bytes> {
        let Some(ctx) = self.0.upgrade() else {
            return BTreeMap::new();
        };
        let proof = ctx
            .control_plane
            .key()
            .broker_proof(ctx.broker_id, broker_epoch);
        BTreeMap::from([(
            security::control_plane::PROOF_TAG,
            bytes::Bytes::copy_from_slice(&proof),
        )])
    }
    fn topic_id(&self, topic: &model::TopicName) -> Option<uuid::Uuid> {
        let ctx = self.0.upgrade()?;
        let snapshot = ctx.metadata_cache.snapshot();
        snapshot.topics.get(topic.as_str()).map(|t| t.topic_id)
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The settings a topic's partitions follow: its overrides, else the broker's `log.*`
/// default, else Kafka's default.
pub(crate) fn partition_config(
    ctx: &BrokerContext,
    overrides: &BTreeMap<String, String>,
) -> PartitionConfig {
    let mut config = TopicConfig::new();
    for def in model::topic_config::TOPIC_CONFIGS {
        let value = overrides
            .get(def.name)
            .map(String::as_str)
            .or_else(|| ctx.config.topic_default(def.name).map(|(_, v)| v));
        if let Some(value) = value {
            if let Err(err) = config.set(def.name, value) {
                warn!(key = def.name, value, error = %err, "ignoring an invalid topic config value");
            }
        }
    }
    let flush_messages = config.flush_messages();
    let flush_ms = config.flush_ms();
    PartitionConfig {
        log: LogConfig {
            segment_bytes: config.segment_bytes().max(1) as u64,
            segment_ms: config.segment_ms(),
            index_interval_bytes: config.index_interval_bytes().max(0) as usize,
            max_message_bytes: config.max_message_bytes().max(0) as usize,
            // Kafka's default (Long.MaxValue) means "leave it to the OS".
            flush_messages: (flush_messages > 0 && flush_messages < i64::MAX)
                .then_some(flush_messages as u64),
            retention_ms: config.retention_ms(),
            retention_bytes: config.retention_bytes(),
            log_append_time: config.message_timestamp_type() == "LogAppendTime",
            compact: config.compact(),
            delete: config.delete(),
            timestamp_difference_max_ms: config.message_timestamp_difference_max_ms(),
            compression: records::Compression::from_config(config.compression_type()),
            min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio(),
            min_compaction_lag_ms: config.min_compaction_lag_ms(),
            max_compaction_lag_ms: config.max_compaction_lag_ms(),
            delete_retention_ms: config.delete_retention_ms(),
            downconversion_enable: config.message_downconversion_enable(),
        },
        flush_ms: (0..i64::MAX).contains(&flush_ms).then_some(flush_ms),
        min_insync_replicas: config.min_insync_replicas(),
    }
}

/// Reads `/config/topics/<topic>` and resolves the topic's settings.
pub(crate) async fn topic_partition_config(
    ctx: &BrokerContext,
    topic: &TopicName,
) -> PartitionConfig {
    let overrides = match ctx.zk().get_topic_config(topic).await {
        Ok(overrides) => overrides,
        Err(err) => {
            warn!(%topic, error = %err, "cannot read topic config; using broker defaults");
            BTreeMap::new()
        }
    };
    set_throttled_replicas(ctx, topic, &overrides);
    partition_config(ctx, &overrides)
}

/// The topic's `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
/// as they apply to this broker (a malformed value throttles nothing and is logged).
pub(crate) fn set_throttled_replicas(
    ctx: &BrokerContext,
    topic: &TopicName,
    overrides: &BTreeMap<String, String>,
) {
    let parse = |key: &str| {
        let value = overrides.get(key)?;
        match replication::quota::parse_throttled_replicas(value, ctx.broker_id) {
            Ok(parsed) => parsed,
            Err(reason) => {
                warn!(%topic, key, %value, %reason, "ignoring a malformed throttled replica list");
                None
            }
        }
    };
    let leader = parse("leader.replication.throttled.replicas");
    let follower = parse("follower.replication.throttled.replicas");
    ctx.replica_manager
        .throttles()
        .set_topic(topic.as_str(), leader, follower);
}

/// The broker dynamic configs `leader.replication.throttled.rate` and
/// `follower.replication.throttled.rate` (bytes/s) from `/config/brokers/<id>`, else
/// `/config/brokers/<default>` (Kafka's precedence); unset means unlimited. Read at start and
/// on every `brokers/...` config change notification.
pub(crate) async fn load_replication_rates(ctx: &BrokerContext) {
    let zk = ctx.zk();
    let mut merged = BTreeMap::new();
    for entity in [
        "brokers/<default>".to_owned(),
        format!("brokers/{}", ctx.broker_id),
    ] {
        match zk.get_entity_config(&entity).await {
            Ok(config) => merged.extend(config),
            Err(err) => warn!(%entity, error = %err, "cannot read the broker's dynamic config"),
        }
    }
    let throttles = ctx.replica_manager.throttles();
    for (key, quota) in [
        ("leader.replication.throttled.rate", &throttles.leader),
        ("follower.replication.throttled.rate", &throttles.follower),
    ] {
        let rate = match merged.get(key).map(|v| v.trim().parse::<f64>()) {
            None => None,
            Some(Ok(rate)) if rate > 0.0 && rate < 9.2e18 => Some(rate),
            Some(Ok(_)) => None,
            Some(Err(_)) => {
                warn!(key, value = %merged[key], "ignoring a replication throttle that is not a number of bytes per second");
                None
            }
        };
        if quota.rate() != rate {
            tracing::info!(key, rate = ?rate, "replication throttle changed");
        }
        quota.set_rate(rate);
    }
}

fn interval(ctx: &BrokerContext, key: &str, default_ms: u64) -> Duration {
    let ms = ctx
        .config
        .originals
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .unwrap_or(default_ms);
    Duration::from_millis(ms)
}

/// Runs the scheduled passes until shutdown.
pub(crate) async fn background(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    let mut checkpoint = tokio::time::interval(interval(
        &ctx,
        "log.flush.offset.checkpoint.interval.ms",
        DEFAULT_CHECKPOINT_INTERVAL_MS,
    ));
    let mut retention = tokio::time::interval(interval(
        &ctx,
        "log.retention.check.interval.ms",
        DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    ));
    let mut flush = tokio::time::interval(interval(
        &ctx,
        "log.flush.scheduler.interval.ms",
        DEFAULT_FLUSH_CHECK_INTERVAL_MS,
    ));
    for timer in [&mut checkpoint, &mut retention, &mut flush] {
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    // The first tick of an interval fires at once; skip it for the checkpoint and retention.
    checkpoint.tick().await;
    retention.tick().await;
    loop {
        tokio::select! {
            _ = async { drop(shutdown.wait_for(|stop| *stop).await) } => return,
            _ = checkpoint.tick() => {
                let rm = ctx.replica_manager.clone();
                let dirs = ctx.config.log_dirs.clone();
                let result = tokio::task::spawn_blocking(move || rm.checkpoint(&dirs)).await;
                if let Ok(Err(err)) = result {
                    warn!(error = %err, "cannot write log checkpoints");
                }
            }
            _ = retention.tick() => {
                let rm = ctx.replica_manager.clone();
                let _ = tokio::task::spawn_blocking(move || rm.apply_retention(now_ms())).await;
            }
            _ = flush.tick() => {
                let rm = ctx.replica_manager.clone();
                let _ = tokio::task::spawn_blocking(move || rm.flush_due(now_ms())).await;
            }
        }
    }
}
