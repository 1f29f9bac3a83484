//! `GET /metrics`: gathers every running broker's sample (counters, gauges read from the live
//! state, consumer groups from the coordinator) and renders them.

use std::collections::BTreeMap;

use model::TopicPartition;

use super::kafka::{Caller, Cluster};
use super::views;
use crate::context::BrokerContext;
use crate::metadata_cache::Snapshot;
use crate::metrics::prometheus::{
    self, BrokerSample, ControllerGauges, GroupGauges, GroupLag, ReplicaGauges,
};

/// The whole `/metrics` text.
pub(crate) async fn metrics(cluster: &Cluster, caller: &Caller) -> String {
    let running: Vec<_> = cluster.running().collect();
    let mut groups: BTreeMap<i32, GroupGauges> = BTreeMap::new();
    for ctx in &running {
        if ctx.controller().is_active() {
            if let Some(gauges) = group_gauges(cluster, caller, ctx).await {
                groups.insert(ctx.broker_id, gauges);
            }
        }
    }
    let snapshots: Vec<_> = running
        .iter()
        .map(|ctx| ctx.metadata_cache.snapshot())
        .collect();
    let samples: Vec<BrokerSample<'_>> = running
        .iter()
        .zip(&snapshots)
        .map(|(ctx, snapshot)| sample(ctx, snapshot, groups.remove(&ctx.broker_id)))
        .collect();
    prometheus::render(&samples, &storage::log::LOG_FLUSH_TIME.snapshot())
}

fn sample<'a>(
    ctx: &'a BrokerContext,
    snapshot: &Snapshot,
    groups: Option<GroupGauges>,
) -> BrokerSample<'a> {
    let is_controller = ctx.controller().is_active();
    let mut controller = ControllerGauges {
        event_queue_size: ctx.controller().queue_size() as u64,
        ..ControllerGauges::default()
    };
    if is_controller {
        controller.global_topics = snapshot.topics.len() as u64;
        controller.active_brokers = snapshot.brokers.len() as u64;
        for info in snapshot.topics.values() {
            for p in info.partitions.values() {
                controller.global_partitions += 1;
                if p.leader < 0 {
                    controller.offline_partitions += 1;
                }
                if p.replicas.first() != Some(&p.leader) {
                    controller.preferred_replica_imbalance += 1;
                }
            }
        }
    }
    BrokerSample {
        broker_id: ctx.broker_id,
        metrics: &ctx.metrics,
        partitions: ctx.log_manager.partitions().len(),
        replicas: replica_gauges(ctx, snapshot),
        is_controller,
        controller,
        store_write_latency: ctx.zk().client().write_latency(),
        topics: ctx
            .metrics
            .topics(|topic| snapshot.topics.contains_key(topic)),
        groups,
    }
}

/// Kafka's `ReplicaManager` gauges: the partitions the metadata says this broker leads, with
/// the ISR the controller last published (it follows the leader's AlterPartition), and the
/// leader's own check of `min.insync.replicas`.
fn replica_gauges(ctx: &BrokerContext, snapshot: &Snapshot) -> ReplicaGauges {
    let mut gauges = ReplicaGauges::default();
    for (topic, info) in &snapshot.topics {
        for (&partition, p) in &info.partitions {
            if p.leader != ctx.broker_id {
                continue;
            }
            gauges.leaders += 1;
            if p.isr.len() < p.replicas.len() {
                gauges.under_replicated += 1;
            }
            let under_min_isr = topic
                .parse()
                .ok()
                .and_then(|name| {
                    ctx.replica_manager
                        .get(&TopicPartition::new(name, partition))
                })
                .is_some_and(|local| !local.enough_replicas());
            if under_min_isr {
                gauges.under_min_isr += 1;
            }
        }
    }
    gauges
}

/// The coordinator's groups: counts by state, and each group's members and lag.
async fn group_gauges(
    cluster: &Cluster,
    caller: &Caller,
    ctx: &BrokerContext,
) -> Option<GroupGauges> {
    let listed = views::list_groups(cluster, caller).await.ok()?;
    let snapshot = ctx.metadata_cache.snapshot();
    let mut gauges = GroupGauges::default();
    let (lag, pending) = ctx.groups.mirror.lag();
    gauges.zk_mirror_lag_ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
    gauges.zk_mirror_pending = pending as u64;
    for group in listed {
        *gauges.by_state.entry(group.state.clone()).or_default() += 1;
        let Ok(described) =
            views::describe_group(cluster, caller, &snapshot, &group.group_id).await
        else {
            continue;
        };
        let lag = GroupLag {
            members: described.members.len() as u64,
            partitions: described
                .partitions
                .iter()
                .filter_map(|(tp, p)| p.committed.map(|c| (tp.clone(), (c, p.lag()))))
                .collect(),
        };
        gauges.groups.insert(group.group_id, lag);
    }
    Some(gauges)
}
