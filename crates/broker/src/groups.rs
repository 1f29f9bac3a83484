//! Consumer groups on this broker: the [`GroupCoordinator`] wired to the metadata store, and
//! the rule deciding which broker coordinates a group.
//!
//! # Which broker coordinates
//!
//! The active controller coordinates every group. FindCoordinator answers the controller id
//! of the metadata cache; any other broker answers group requests with `NOT_COORDINATOR`, so
//! clients look the coordinator up again. The rule is deterministic (one controller at a
//! time, elected through `/controller`) and follows failover without extra machinery: the
//! new controller re-reads every committed offset from the store ([`GroupCoordinator::
//! reload_offsets`]) before it answers its first group request, and members rejoin it.
//! Membership lives in memory only, as in Kafka.
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

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

/// The broker's group state: the coordinator once started, and whether its offsets are
/// current for this controller term.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    coordinator: OnceLock<Coordinator>,
    /// True while this broker is the controller and has reloaded offsets since it became one.
    serving: AtomicBool,
    reload: tokio::sync::Mutex<()>,
}

impl Groups {
    /// Starts the coordinator on `ctx`'s store (loads every committed offset).
    pub(crate) async fn start(ctx: &Arc<BrokerContext>) -> Result<(), OffsetStoreError> {
        let store = Arc::new(ZkOffsetStore {
            ctx: Arc::downgrade(ctx),
        });
        let sink = Arc::new(ZkMembershipSink {
            ctx: Arc::downgrade(ctx),
        });
        let coordinator = Coordinator::start(group_config(&ctx.config), store, sink).await?;
        let _ = ctx.groups.coordinator.set(coordinator);
        on_metadata_update(ctx);
        Ok(())
    }

    /// Stops the coordinator's tasks (broker shutdown).
    pub(crate) fn shutdown(&self) {
        if let Some(coordinator) = self.coordinator.get() {
            coordinator.shutdown();
        }
    }

    /// The coordinator if this broker coordinates groups now, else the error code to answer
    /// (`NOT_COORDINATOR` on a broker that is not the controller, `COORDINATOR_NOT_AVAILABLE`
    /// while offsets cannot be loaded).
    pub(crate) async fn serving(&self, ctx: &BrokerContext) -> Result<&Coordinator, i16> {
        let coordinator = self.coordinator.get().ok_or(COORDINATOR_NOT_AVAILABLE)?;
        if !ctx.controller().is_active() {
            self.serving.store(false, Ordering::SeqCst);
            return Err(NOT_COORDINATOR);
        }
        if self.serving.load(Ordering::SeqCst) {
            return Ok(coordinator);
        }
        let _guard = self.reload.lock().await;
        if !self.serving.load(Ordering::SeqCst) {
            if let Err(err) = coordinator.reload_offsets().await {
                warn!(%err, "cannot load committed offsets on becoming the group coordinator");
                return Err(COORDINATOR_NOT_AVAILABLE);
            }
            info!(
                broker_id = ctx.broker_id,
                "coordinating consumer groups (offsets reloaded)"
            );
            self.serving.store(true, Ordering::SeqCst);
        }
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
    let Some(coordinator) = ctx.groups.coordinator.get() else {
        return;
    };
    let snapshot = ctx.metadata_cache.snapshot();
    let topics: Vec<TopicMetadata> = snapshot
        .topics
        .iter()
        .filter_map(|(name, info)| {
            Some(TopicMetadata {
                name: name.parse().ok()?,
                topic_id: info.topic_id,
                partitions: i32::try_from(info.partitions.len()).ok()?,
            })
        })
        .collect();
    coordinator.set_topics(topics);
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
                if let Some(coordinator) = groups.coordinator.get() {
                    if let Err(err) = coordinator.on_topic_deleted(&topic).await {
                        warn!(%topic, %err, "cannot drop group offsets of deleted topic");
                    }
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
