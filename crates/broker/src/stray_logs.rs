//! Logs of topics that no longer exist (better than Kafka, SPEC section 9).
//!
//! A topic deletion never waits for an offline broker: the controller counts that broker's
//! replicas as deleted. So a broker that comes back may hold logs of topics deleted while it
//! was away, or of a name that now belongs to another topic (created again, with another
//! topic id). It cleans them up itself:
//!
//! - After the first UpdateMetadata of each registration (the controller then sends every
//!   partition), a background scan compares each local log's `partition.metadata` with the
//!   metadata cache. A log whose topic is unknown there, or known with another topic id, is
//!   a candidate.
//! - A LeaderAndIsr whose topic id differs from the local log's makes that log a candidate
//!   too (the new topic's replica must be created in its place).
//!
//! A candidate is removed only when the store confirms it: `/brokers/topics/<t>` is gone,
//! the topic is marked for deletion, or it carries another topic id. The removal is the usual
//! rename-then-delete, and only if the log still has the topic id that was judged.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use model::{TopicId, TopicPartition};
use tokio::sync::watch;
use tracing::{info, warn};
use uuid::Uuid;

use crate::context::BrokerContext;

/// Called after every applied UpdateMetadata: starts the scan once per registration.
pub(crate) fn on_update_metadata(ctx: &BrokerContext) {
    let epoch = ctx.broker_epoch.load(Ordering::SeqCst);
    if ctx.stray_scan_epoch.swap(epoch, Ordering::SeqCst) != epoch {
        ctx.stray_scan.notify_one();
    }
}

/// Runs the scans until shutdown.
pub(crate) async fn run(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            () = ctx.stray_scan.notified() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let removed = scan(&ctx).await;
        if removed > 0 {
            info!(
                broker_id = ctx.broker_id,
                removed, "removed logs of topics deleted while this broker was away"
            );
        }
    }
}

/// One pass over the local logs; returns how many were removed.
async fn scan(ctx: &BrokerContext) -> usize {
    let snapshot = ctx.metadata_cache.snapshot();
    let mut removed = 0;
    for tp in ctx.log_manager.partitions() {
        let Some(dir) = ctx.log_manager.partition_dir(&tp) else {
            continue;
        };
        let local = match storage::read_partition_metadata(&dir) {
            Ok(id) => id,
            Err(err) => {
                warn!(%tp, error = %err, "cannot read partition.metadata; leaving the log alone");
                continue;
            }
        };
        let candidate = match snapshot.topics.get(tp.topic.as_str()) {
            None => true,
            Some(info) => {
                !info.topic_id.is_nil() && local.is_some_and(|id| id != uuid_to_id(info.topic_id))
            }
        };
        if candidate && remove_if_confirmed(ctx, &tp, local, None).await {
            removed += 1;
        }
    }
    removed
}

/// A LeaderAndIsr named `requested` as the topic id of `tp`, and the local log has another:
/// removes the local log if the store confirms it is stale. Returns whether it did (the
/// caller then creates the replica afresh).
pub(crate) async fn remove_if_stale(
    ctx: &BrokerContext,
    tp: &TopicPartition,
    requested: Uuid,
) -> bool {
    if requested.is_nil() {
        return false;
    }
    let Some(dir) = ctx.log_manager.partition_dir(tp) else {
        return false;
    };
    let Ok(local) = storage::read_partition_metadata(&dir) else {
        return false;
    };
    remove_if_confirmed(ctx, tp, local, Some(uuid_to_id(requested))).await
}

/// Asks the store whether the log of `tp` with topic id `local` is stale (and, when
/// `expected` is given, whether the store's topic id is that one); removes it if so.
async fn remove_if_confirmed(
    ctx: &BrokerContext,
    tp: &TopicPartition,
    local: Option<TopicId>,
    expected: Option<TopicId>,
) -> bool {
    let zk = ctx.zk();
    let stored = match zk.get_topic_assignment(&tp.topic, false).await {
        Ok(stored) => stored.map(|a| a.assignment.topic_id),
        Err(err) => {
            warn!(%tp, error = %err, "cannot read the topic from the store; leaving the log alone");
            return false;
        }
    };
    let reason = match stored {
        None => "its topic no longer exists",
        Some(stored_id) => {
            if expected.is_some() && stored_id != expected {
                // The request's topic id is not the store's: trust neither, change nothing.
                return false;
            }
            match (local, stored_id) {
                (Some(local), Some(stored)) if local != stored => {
                    "its topic was deleted and created again with another topic id"
                }
                _ => match zk.is_topic_marked_for_deletion(&tp.topic).await {
                    Ok(true) => "its topic is being deleted",
                    Ok(false) => return false,
                    Err(err) => {
                        warn!(%tp, error = %err, "cannot read the deletion mark; leaving the log alone");
                        return false;
                    }
                },
            }
        }
    };
    match ctx.log_manager.delete_partition_if_topic_id(tp, local) {
        Ok(Some(renamed)) => {
            // Renamed first, so only the log that was judged is stopped; a replica still open
            // on it (a broker paused past its session) closes without flushing.
            ctx.replica_manager.stop_replica(tp, true);
            ctx.replicas().remove(tp);
            info!(%tp, reason, dir = %renamed.display(), "removed a stray log");
            true
        }
        Ok(None) => false,
        Err(err) => {
            warn!(%tp, error = %err, "cannot remove a stray log");
            false
        }
    }
}

fn uuid_to_id(id: Uuid) -> TopicId {
    TopicId::from_bytes(*id.as_bytes())
}
