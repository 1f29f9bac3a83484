//! The `/config/changes` listener (Kafka's `ZkNodeChangeNotificationListener` for configs):
//! a child watch on `/config/changes` wakes it, it handles every notification newer than
//! the last one it saw, and it purges notifications older than 15 minutes, as Kafka does.
//! A notification names an entity (`topics/<t>`, `users/<u>`, `clients/<c>`,
//! `users/<u>/clients/<c>`); each kind has its handler below.
//!
//! Watches are one-shot and per session: the listener sets its watch again with every read,
//! and when the broker's store session is replaced (after an expiry) it subscribes to the
//! new one. A rescan every [`RESCAN_INTERVAL`] is only a safety net (a watch event lost with
//! a session); it is not how changes arrive.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metastore::WatchedEvent;
use model::TopicName;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};
use znodes::zk_client::{KafkaWatch, KafkaZkClient};

use crate::context::BrokerContext;
use crate::data_plane::now_ms;

/// Kafka's `changeExpirationMs`: notifications older than this are deleted.
pub(crate) const CHANGE_EXPIRATION_MS: i64 = 15 * 60 * 1000;
/// The safety-net rescan.
const RESCAN_INTERVAL: Duration = Duration::from_secs(60);

/// Runs until shutdown.
pub(crate) async fn listen(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    // Notifications present at start are already reflected in the configs logs open with.
    let mut seen: Option<u64> = None;
    let mut first = true;
    loop {
        let zk = ctx.zk();
        let session = zk.session_id();
        // Subscribe before the read that sets the watch, so its event cannot be missed. The
        // subscription is drained at once by its own task: a subscriber that stops reading
        // would hold up every other one of the session (the controller's included).
        let fired = Arc::new(Fired::default());
        let forwarder = tokio::spawn(forward_config_watches(
            zk.subscribe_watches(),
            Arc::clone(&fired),
        ));
        loop {
            match zk.get_config_changes(true).await {
                Ok(changes) => {
                    if first {
                        seen = changes.last().map(|(seq, _)| *seq);
                        first = false;
                    } else {
                        seen = apply(&ctx, &zk, &changes, seen).await;
                    }
                    purge(&zk).await;
                }
                Err(err) => debug!(error = %err, "cannot list config change notifications"),
            }
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => {
                    forwarder.abort();
                    return;
                }
                _ = tokio::time::sleep(RESCAN_INTERVAL) => {}
                _ = fired.notify.notified() => {}
            }
            if fired.session_ended.load(Ordering::SeqCst) {
                break;
            }
        }
        // The session ended: wait for its replacement.
        while ctx.zk().session_id() == session {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }
}

/// What the forwarder tells the listener.
#[derive(Debug, Default)]
struct Fired {
    notify: Notify,
    session_ended: AtomicBool,
}

/// Wakes the listener on each `/config/changes` watch event, and once more when the
/// session's events end.
async fn forward_config_watches(mut watches: mpsc::Receiver<WatchedEvent>, fired: Arc<Fired>) {
    while let Some(event) = watches.recv().await {
        if KafkaWatch::classify(&event) == KafkaWatch::ConfigChanges {
            fired.notify.notify_one();
        }
    }
    fired.session_ended.store(true, Ordering::SeqCst);
    fired.notify.notify_one();
}

/// Handles every notification newer than `seen`; returns the newest sequence handled.
async fn apply(
    ctx: &BrokerContext,
    zk: &KafkaZkClient,
    changes: &[(u64, String)],
    seen: Option<u64>,
) -> Option<u64> {
    let mut newest = seen;
    let mut topics = BTreeSet::new();
    let mut broker_config = false;
    for (seq, child) in changes.iter().filter(|(seq, _)| Some(*seq) > seen) {
        newest = Some(*seq);
        let entity = match zk.get_config_change(child).await {
            Ok(Some((Some(entity), _))) => entity,
            Ok(Some((None, _))) => {
                warn!(notification = %child, "ignoring an unreadable config change notification");
                continue;
            }
            Ok(None) => continue,
            Err(err) => {
                debug!(notification = %child, error = %err, "cannot read a config change notification");
                continue;
            }
        };
        if let Some(topic) = entity
            .strip_prefix("topics/")
            .and_then(|t| t.parse::<TopicName>().ok())
        {
            topics.insert(topic);
        } else if entity.starts_with("users/") || entity.starts_with("clients/") {
            ctx.quotas.reload(zk, &entity).await;
        } else if entity == "brokers/<default>" || entity == format!("brokers/{}", ctx.broker_id) {
            broker_config = true;
        } else {
            debug!(%entity, "a config change for an entity this broker keeps no state for");
        }
    }
    if broker_config {
        crate::data_plane::load_replication_rates(ctx).await;
    }
    let hosted: BTreeSet<TopicName> = ctx
        .replica_manager
        .partitions()
        .iter()
        .map(|p| p.topic_partition().topic.clone())
        .collect();
    for topic in topics.intersection(&hosted) {
        let config = crate::data_plane::topic_partition_config(ctx, topic).await;
        ctx.replica_manager.set_topic_config(topic, &config);
    }
    newest
}

async fn purge(zk: &KafkaZkClient) {
    match zk
        .purge_config_changes_before(now_ms() - CHANGE_EXPIRATION_MS)
        .await
    {
        Ok(0) => {}
        Ok(purged) => info!(
            purged,
            "deleted config change notifications older than 15 minutes"
        ),
        Err(err) => debug!(error = %err, "cannot purge config change notifications"),
    }
}
