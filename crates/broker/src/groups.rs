//! Consumer groups on this broker: the [`GroupCoordinator`] wired to the metadata store, and
//! the rule deciding which broker coordinates a group.
//!
//! # Which broker coordinates
//!
//! The active controller coordinates every group. FindCoordinator answers the controller id
//! of the metadata cache; any other broker answers group requests with `NOT_COORDINATOR`, so
//! clients look the coordinator up again. The rule is deterministic (one controller at a
//! time, elected through `/controller`) and follows failover without extra machinery: a
//! broker starts a coordinator, loading every committed offset from the store, at the first
//! group request of its controller term, and drops it when the term ends; members rejoin the
//! new controller. Membership lives in memory only, as in Kafka.
//!
//! # What is stored
//!
//! Committed offsets at `/consumers/<group>/offsets/<t>/<p>` (persistent, one multi per
//! OffsetCommit request), member registrations at `/consumers/<group>/ids/<member>` and
//! owners at `/consumers/<group>/owners/<t>/<p>` (ephemeral, this broker's session). The
//! znode holds only the offset (Kafka's format), so a reloaded offset has no metadata string
//! or leader epoch; its commit time is the znode's mtime.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use group_coordinator::{
    ClientInfo, GroupConfig, GroupCoordinator, GroupOffsets, MembershipEvent, MembershipSink,
    OffsetAndMetadata, OffsetStore, OffsetStoreError, TopicMetadata,
};
use model::{TopicName, TopicPartition};
use tracing::{info, warn};
use znodes::json::ConsumerMemberZNode;
use znodes::zk_client::KafkaZkClient;

use crate::config::BrokerConfig;
use crate::context::BrokerContext;

/// The coordinator type this broker runs.
pub(crate) type Coordinator = GroupCoordinator<ZkOffsetStore, ZkMembershipSink>;

/// Kafka's NOT_COORDINATOR error code.
pub(crate) const NOT_COORDINATOR: i16 = 16;
/// Kafka's COORDINATOR_NOT_AVAILABLE error code.
pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = 15;

tokio::task_local! {
    /// The peer of the connection whose request is being handled (JoinGroup and KIP-848
    /// heartbeats record it as the member's host).
    pub(crate) static PEER: SocketAddr;
}

/// How often the broker checks whether it is still the controller, to drop the group state
/// of a term that ended even when no group request arrives.
const TERM_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The broker's group state: a coordinator exists only while this broker is the controller.
/// It is started (loading every committed offset from the store) by the first group request
/// of a controller term and dropped when the term ends, so a deposed broker keeps no stale
/// groups or offsets and runs no timers against the store.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    current: Mutex<Option<Coordinator>>,
    starting: tokio::sync::Mutex<()>,
    ctx: OnceLock<Weak<BrokerContext>>,
}

impl Groups {
    /// Attaches the group state to its broker and starts the task that drops the coordinator
    /// when this broker stops being the controller.
    pub(crate) fn start(ctx: &Arc<BrokerContext>) {
        let _ = ctx.groups.ctx.set(Arc::downgrade(ctx));
        let weak = Arc::downgrade(ctx);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TERM_CHECK_INTERVAL).await;
                let Some(ctx) = weak.upgrade() else {
                    return;
                };
                if !ctx.controller().is_active() {
                    ctx.groups.stop("this broker is no longer the controller");
                }
            }
        });
    }

    /// Stops the coordinator, if any (broker shutdown or end of the controller term); parked
    /// JoinGroup/SyncGroup requests are answered COORDINATOR_NOT_AVAILABLE.
    pub(crate) fn stop(&self, why: &str) {
        let stopped = self.lock().take();
        if let Some(coordinator) = stopped {
            info!(why, "no longer coordinating consumer groups");
            coordinator.shutdown();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Coordinator>> {
        // Every update is a single assignment, so a poisoned value is still consistent.
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The coordinator if this broker coordinates groups now, else the error code to answer
    /// (`NOT_COORDINATOR` on a broker that is not the controller, `COORDINATOR_NOT_AVAILABLE`
    /// while committed offsets cannot be loaded).
    pub(crate) async fn serving(&self, ctx: &BrokerContext) -> Result<Coordinator, i16> {
        if !ctx.controller().is_active() {
            self.stop("this broker is no longer the controller");
            return Err(NOT_COORDINATOR);
        }
        if let Some(coordinator) = self.lock().clone() {
            return Ok(coordinator);
        }
        let _starting = self.starting.lock().await;
        if let Some(coordinator) = self.lock().clone() {
            return Ok(coordinator);
        }
        let weak = self.ctx.get().cloned().unwrap_or_default();
        let store = Arc::new(ZkOffsetStore { ctx: weak.clone() });
        let sink = Arc::new(ZkMembershipSink { ctx: weak });
        let coordinator = match Coordinator::start(group_config(&ctx.config), store, sink).await {
            Ok(coordinator) => coordinator,
            Err(err) => {
                warn!(%err, "cannot load committed offsets to coordinate consumer groups");
                return Err(COORDINATOR_NOT_AVAILABLE);
            }
        };
        coordinator.set_topics(topics(ctx));
        info!(
            broker_id = ctx.broker_id,
            "coordinating consumer groups (committed offsets loaded)"
        );
        *self.lock() = Some(coordinator.clone());
        Ok(coordinator)
    }
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
        ..defaults
    }
}

/// Pushes the metadata cache's topics into the coordinator (after every UpdateMetadata).
pub(crate) fn on_metadata_update(ctx: &BrokerContext) {
    let current = ctx.groups.lock().clone();
    if let Some(coordinator) = current {
        coordinator.set_topics(topics(ctx));
    }
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

/// The controller config of this broker, with the hook dropping group offsets of deleted
/// topics (the controller coordinates groups, so the hook runs on the coordinator).
pub(crate) fn controller_config(
    config: &BrokerConfig,
    groups: &Arc<Groups>,
) -> controller::ControllerConfig {
    let groups = Arc::downgrade(groups);
    controller::ControllerConfig {
        on_topic_deleted: controller::TopicDeletedHook::new(move |topic: &TopicName| {
            let Some(groups) = groups.upgrade() else {
                return;
            };
            let topic = topic.clone();
            tokio::spawn(async move {
                let current = groups.lock().clone();
                let dropped = match current {
                    Some(coordinator) => coordinator.on_topic_deleted(&topic).await,
                    // No group request yet this term: only the store holds offsets.
                    None => {
                        let ctx = groups.ctx.get().cloned().unwrap_or_default();
                        ZkOffsetStore { ctx }.delete_topic_offsets(&topic).await
                    }
                };
                if let Err(err) = dropped {
                    warn!(%topic, %err, "cannot drop group offsets of deleted topic");
                }
            });
        }),
        ..config.controller_config()
    }
}

/// [`OffsetStore`] over the metadata store (the broker's current session).
#[derive(Debug)]
pub(crate) struct ZkOffsetStore {
    ctx: Weak<BrokerContext>,
}

impl ZkOffsetStore {
    fn zk(&self) -> Result<KafkaZkClient, OffsetStoreError> {
        self.ctx
            .upgrade()
            .map(|ctx| ctx.zk())
            .ok_or_else(|| OffsetStoreError("broker is shutting down".to_owned()))
    }
}

fn store_err(err: znodes::ZkClientError) -> OffsetStoreError {
    OffsetStoreError(err.to_string())
}

impl OffsetStore for ZkOffsetStore {
    async fn commit(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<(), OffsetStoreError> {
        let plain: Vec<(TopicPartition, i64)> = offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), o.offset))
            .collect();
        self.zk()?
            .commit_consumer_offsets(group_id, &plain)
            .await
            .map_err(store_err)
    }

    async fn load_all(&self) -> Result<GroupOffsets, OffsetStoreError> {
        let all = self
            .zk()?
            .get_all_consumer_offsets()
            .await
            .map_err(store_err)?;
        Ok(all
            .into_iter()
            .map(|(group, offsets)| {
                let offsets = offsets
                    .into_iter()
                    .map(|(tp, stored)| {
                        (
                            tp,
                            OffsetAndMetadata {
                                offset: stored.offset,
                                leader_epoch: -1,
                                metadata: String::new(),
                                commit_timestamp_ms: stored.mtime_ms,
                            },
                        )
                    })
                    .collect();
                (group, offsets)
            })
            .collect())
    }

    async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<(), OffsetStoreError> {
        self.zk()?
            .delete_consumer_offsets(group_id, partitions)
            .await
            .map_err(store_err)
    }

    async fn delete_group(&self, group_id: &str) -> Result<(), OffsetStoreError> {
        self.zk()?
            .delete_consumer_group(group_id)
            .await
            .map_err(store_err)
    }

    async fn delete_topic_offsets(&self, topic: &TopicName) -> Result<(), OffsetStoreError> {
        self.zk()?
            .delete_topic_consumer_offsets(topic)
            .await
            .map_err(store_err)
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
