//! [`CoordinatorCore`]: every group's state, driven by `(now_ms, request)`, doing no I/O.
//!
//! Handlers that answer at once return their response. JoinGroup and SyncGroup may have to
//! wait for other members, so they take a [`Token`] and their answer comes out of
//! [`CoordinatorCore::take_outputs`] as an [`Output`] carrying that token, either during the
//! same call or during a later call or [`CoordinatorCore::tick`]. Membership changes for the
//! store come out of the same queue, in order.
//!
//! Time only moves when the caller says so: `tick(now_ms)` fires every timer whose deadline
//! has passed (session timeouts, rebalance timeouts, the initial rebalance delay), and
//! [`CoordinatorCore::next_deadline_ms`] says when to call it next.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use model::{TopicName, TopicPartition};
use uuid::Uuid;

use crate::assignor::ServerAssignor;
use crate::classic::ClassicGroup;
use crate::consumer::ConsumerGroup;
use crate::membership::MembershipEvent;
use crate::offsets::GroupOffsets;

/// Identifies a parked JoinGroup or SyncGroup; chosen by the caller, echoed in [`Output`].
pub type Token = u64;

/// Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`: how long a new member's JoinGroup may
/// wait in a rebalance before the member is dropped.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// The broker settings the coordinator follows (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `group.max.size` (unbounded).
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms` (3000): how long the first rebalance of an empty
    /// group waits for more members (tests use 0).
    pub initial_rebalance_delay_ms: i32,
    /// `offset.metadata.max.bytes` (4096).
    pub offset_metadata_max_bytes: usize,
    /// `group.consumer.session.timeout.ms` (45000), KIP-848 groups.
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (5000), KIP-848 groups.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors` (`uniform,range`); the first is the default.
    pub consumer_assignors: Vec<ServerAssignor>,
    /// `group.consumer.max.size` (unbounded).
    pub consumer_max_size: usize,
    /// `offsets.retention.minutes` in ms (7 days): how long offsets outlive an empty group,
    /// or a commit to a topic the group no longer subscribes to.
    pub offsets_retention_ms: u64,
    /// `offsets.retention.check.interval.ms` (600000): how often expired offsets are removed
    /// and empty groups without offsets forgotten.
    pub offsets_retention_check_interval_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            initial_rebalance_delay_ms: 3_000,
            offset_metadata_max_bytes: 4_096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_assignors: vec![ServerAssignor::Uniform, ServerAssignor::Range],
            consumer_max_size: i32::MAX as usize,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: GROUP_CLEANUP_INTERVAL_MS,
        }
    }
}

/// Who sent a request: from the request header and the connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientInfo {
    /// The header's client id.
    pub client_id: String,
    /// The peer address, as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
}

/// A topic as the coordinator needs it: KIP-848 speaks topic ids, OffsetCommit checks
/// partitions exist. The broker keeps this current with [`CoordinatorCore::set_topics`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// The name.
    pub name: TopicName,
    /// The topic id.
    pub topic_id: Uuid,
    /// The number of partitions.
    pub partitions: i32,
}

/// Something the core produced for the caller to deliver.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The answer to the JoinGroup parked under `token`.
    JoinGroup {
        /// The caller's token.
        token: Token,
        /// The response to send.
        response: JoinGroupResponse,
    },
    /// The answer to the SyncGroup parked under `token`.
    SyncGroup {
        /// The caller's token.
        token: Token,
        /// The response to send.
        response: SyncGroupResponse,
    },
    /// A change for the [`crate::MembershipSink`].
    Membership(MembershipEvent),
    /// A classic group's metadata to store (a rebalance completed, or the group became empty),
    /// as Kafka's `storeGroup`. The caller holds back the SyncGroup answers of the same call
    /// until the store has it.
    GroupMetadata {
        /// The group.
        group_id: String,
        /// What `GroupMetadataValue` holds.
        value: crate::log_records::GroupMetadataSnapshot,
    },
    /// Records of a KIP-848 group that changed (a timer fenced a member, the group was
    /// deleted or expired), to append to the group's offsets partition in this order.
    ConsumerGroupRecords {
        /// The group.
        group_id: String,
        /// Keys and values (`None`: tombstone).
        records: Vec<crate::consumer_records::RecordWrite>,
    },
    /// Offsets that outlived `offsets.retention.minutes`: already gone from the cache, to be
    /// deleted from the [`crate::OffsetStore`].
    OffsetsExpired {
        /// The group.
        group_id: String,
        /// The expired partitions.
        partitions: Vec<TopicPartition>,
    },
    /// An empty group without offsets that the periodic cleanup forgot (Kafka's transition to
    /// Dead): already gone from the cache; its metadata (and these last expired offsets) to be
    /// deleted from the [`crate::OffsetStore`] with tombstones.
    GroupExpired {
        /// The group.
        group_id: String,
        /// Offsets that expired in the same cleanup.
        partitions: Vec<TopicPartition>,
    },
}

/// A group of either protocol. One id names at most one group.
#[derive(Debug)]
pub(crate) enum Group {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
}

/// The coordinator's state for every group it owns. Pure: no clock, no I/O.
#[derive(Debug)]
pub struct CoordinatorCore {
    pub(crate) config: GroupConfig,
    pub(crate) groups: BTreeMap<String, Group>,
    pub(crate) offsets: GroupOffsets,
    pub(crate) topics: BTreeMap<String, TopicMetadata>,
    pub(crate) outbox: Vec<Output>,
    /// When empty groups without offsets are next forgotten (Kafka's
    /// `offsets.retention.check.interval.ms` cleanup); armed by the first `tick`.
    next_cleanup_ms: Option<u64>,
    /// The records last written for each KIP-848 group (see `consumer_persist`).
    pub(crate) consumer_written: BTreeMap<String, crate::consumer_records::GroupRecords>,
}

/// Kafka's `offsets.retention.check.interval.ms` default: how often empty groups without
/// offsets are forgotten.
pub const GROUP_CLEANUP_INTERVAL_MS: u64 = 600_000;

/// What a handler needs besides its group: the time, the settings and the output queue.
#[derive(Debug)]
pub(crate) struct Env<'a> {
    pub now_ms: u64,
    pub config: &'a GroupConfig,
    pub outbox: &'a mut Vec<Output>,
    pub group_id: &'a str,
}

impl Env<'_> {
    pub(crate) fn emit(&mut self, event: MembershipEvent) {
        self.outbox.push(Output::Membership(event));
    }
}

impl CoordinatorCore {
    /// A coordinator with no groups and no offsets.
    pub fn new(config: GroupConfig) -> Self {
        CoordinatorCore {
            config,
            groups: BTreeMap::new(),
            offsets: BTreeMap::new(),
            topics: BTreeMap::new(),
            outbox: Vec::new(),
            next_cleanup_ms: None,
            consumer_written: BTreeMap::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Replaces the offset cache with what the store holds (startup, or becoming coordinator).
    /// Every group with offsets and no state yet appears as an empty classic group, as Kafka
    /// loads it.
    pub fn load_offsets(&mut self, offsets: GroupOffsets) {
        for group_id in offsets.keys() {
            self.groups
                .entry(group_id.clone())
                .or_insert_with(|| Group::Classic(ClassicGroup::new()));
        }
        self.offsets = offsets;
    }

    /// Adds the groups and offsets of one `__consumer_offsets` partition this coordinator now
    /// leads, as replayed from its log: classic groups resume Stable with their members,
    /// generation and assignment (each member's session restarting at `now_ms`), or Empty;
    /// a group with offsets and no metadata is an empty classic group, as Kafka loads it.
    pub fn load_groups(
        &mut self,
        now_ms: u64,
        offsets: GroupOffsets,
        groups: BTreeMap<String, crate::log_records::GroupMetadataSnapshot>,
    ) {
        for (group_id, snapshot) in groups {
            self.groups.insert(
                group_id,
                Group::Classic(ClassicGroup::from_snapshot(snapshot, now_ms)),
            );
        }
        for (group_id, group_offsets) in offsets {
            self.groups
                .entry(group_id.clone())
                .or_insert_with(|| Group::Classic(ClassicGroup::new()));
            self.offsets.insert(group_id, group_offsets);
        }
    }

    /// Forgets every group (and its offsets) for which `moved` says yes: their partition is
    /// led elsewhere now. Parked JoinGroup and SyncGroup requests of those groups are answered
    /// NOT_COORDINATOR, so their members find the new coordinator. Returns how many groups
    /// were dropped.
    pub fn unload_groups(&mut self, moved: impl Fn(&str) -> bool) -> usize {
        let ids: Vec<String> = self
            .groups
            .keys()
            .chain(self.offsets.keys())
            .filter(|id| moved(id.as_str()))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for group_id in &ids {
            if let Some(Group::Classic(mut group)) = self.groups.remove(group_id) {
                let mut env = Env {
                    now_ms: 0,
                    config: &self.config,
                    outbox: &mut self.outbox,
                    group_id,
                };
                group.answer_parked(&mut env, crate::error::GroupError::NotCoordinator);
            }
            self.offsets.remove(group_id);
        }
        // Their records stay in the log for the next coordinator: no tombstones.
        self.consumer_written.retain(|group_id, _| !moved(group_id));
        ids.len()
    }

    /// Replaces the topic metadata the coordinator checks commits against and assigns from.
    pub fn set_topics(&mut self, topics: impl IntoIterator<Item = TopicMetadata>) {
        self.topics = topics
            .into_iter()
            .map(|t| (t.name.as_str().to_owned(), t))
            .collect();
    }

    /// Drops every group's offsets of a deleted topic from the cache (the caller deletes them
    /// from the store). Returns the dropped partitions, by group.
    pub fn on_topic_deleted(&mut self, topic: &TopicName) -> Vec<(String, Vec<TopicPartition>)> {
        let mut dropped = Vec::new();
        for (group_id, offsets) in self.offsets.iter_mut() {
            let gone: Vec<TopicPartition> = offsets
                .keys()
                .filter(|tp| &tp.topic == topic)
                .cloned()
                .collect();
            for tp in &gone {
                offsets.remove(tp);
            }
            if !gone.is_empty() {
                dropped.push((group_id.clone(), gone));
            }
        }
        self.offsets.retain(|_, offsets| !offsets.is_empty());
        self.topics.remove(topic.as_str());
        dropped
    }

    /// The partitions with committed offsets of one group.
    pub fn offset_partitions(&self, group_id: &str) -> Vec<TopicPartition> {
        self.offsets
            .get(group_id)
            .map(|offsets| offsets.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes the answers and membership changes produced so far, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outbox)
    }

    /// The earliest timer deadline, if any timer is armed.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.groups
            .values()
            .filter_map(|group| match group {
                Group::Classic(g) => g.next_deadline_ms(),
                Group::Consumer(g) => g.next_deadline_ms(),
            })
            .chain(self.next_cleanup_ms)
            .min()
    }

    /// Fires every timer due at `now_ms`.
    pub fn tick(&mut self, now_ms: u64) {
        // The timer task also runs after every request; only a timer that fired can change a
        // consumer group's records here (heartbeats and deletions write their own).
        let due = self.next_deadline_ms().is_some_and(|d| d <= now_ms);
        self.fire_group_timers(now_ms);
        match self.next_cleanup_ms {
            None => {
                self.next_cleanup_ms =
                    Some(now_ms + self.config.offsets_retention_check_interval_ms)
            }
            Some(due) if due <= now_ms => {
                self.expire_offsets(now_ms);
                self.forget_empty_groups();
                self.next_cleanup_ms =
                    Some(now_ms + self.config.offsets_retention_check_interval_ms);
            }
            Some(_) => {}
        }
        // Fenced members, expired groups: their records change.
        if due {
            self.persist_consumer_groups();
        }
    }

    /// Kafka's offset expiration (KIP-211): an empty group's offsets expire `retention` after
    /// the group became empty (or after their commit, for a group loaded from the store); a
    /// group with members loses only the offsets of topics it no longer subscribes to,
    /// `retention` after their commit. An offset committed with an explicit retention
    /// (OffsetCommit v2-v4, stored as value v1) expires at its expire timestamp instead, under
    /// the same conditions (Kafka's `GroupMetadata.getExpiredOffsets`).
    fn expire_offsets(&mut self, now_ms: u64) {
        let retention = self.config.offsets_retention_ms;
        for (group_id, offsets) in self.offsets.iter_mut() {
            let (empty_since, subscribed) = match self.groups.get(group_id) {
                Some(Group::Classic(g)) if g.state == crate::classic::ClassicGroupState::Empty => {
                    (Some(g.state_timestamp_ms), None)
                }
                Some(Group::Classic(g))
                    if g.state == crate::classic::ClassicGroupState::Stable
                        && g.protocol_type.as_deref()
                            == Some(crate::consumer_protocol::CONSUMER_PROTOCOL_TYPE) =>
                {
                    match &g.subscribed_topics {
                        Some(topics) => (None, Some(topics.clone())),
                        None => continue,
                    }
                }
                Some(Group::Consumer(g)) if g.is_empty() => (Some(None), None),
                Some(Group::Consumer(g)) => (None, Some(g.subscribed_topic_names())),
                Some(Group::Classic(_)) => continue,
                None => (Some(None), None),
            };
            let expired: Vec<TopicPartition> = offsets
                .iter()
                .filter(|(tp, offset)| {
                    let committed = offset.commit_timestamp_ms.max(0) as u64;
                    let expired_since = |base: u64| match offset.expire_timestamp_ms {
                        Some(expire) => now_ms >= expire.max(0) as u64,
                        None => now_ms.saturating_sub(base) >= retention,
                    };
                    match (&empty_since, &subscribed) {
                        (Some(since), _) => expired_since(since.unwrap_or(committed)),
                        (None, Some(topics)) => {
                            !topics.contains(tp.topic.as_str()) && expired_since(committed)
                        }
                        (None, None) => false,
                    }
                })
                .map(|(tp, _)| tp.clone())
                .collect();
            if expired.is_empty() {
                continue;
            }
            for tp in &expired {
                offsets.remove(tp);
            }
            tracing::info!(group_id, expired = expired.len(), "removed expired offsets");
            self.outbox.push(Output::OffsetsExpired {
                group_id: group_id.clone(),
                partitions: expired,
            });
        }
        self.offsets.retain(|_, offsets| !offsets.is_empty());
    }

    /// Drops empty groups that have no committed offsets, as Kafka's periodic cleanup does, so
    /// that short-lived groups (console consumers with random group ids) do not accumulate.
    ///
    /// Each forgotten group leaves as [`Output::GroupExpired`] (its metadata and the offsets
    /// that expired in the same cleanup get tombstones, as Kafka's `cleanupGroupMetadata`
    /// writes for a group turned Dead), so a coordinator loading the log later does not bring
    /// it back.
    fn forget_empty_groups(&mut self) {
        let offsets = &self.offsets;
        let mut forgotten = Vec::new();
        self.groups.retain(|group_id, group| {
            let empty = match group {
                Group::Classic(g) => g.state == crate::classic::ClassicGroupState::Empty,
                Group::Consumer(g) => g.is_empty(),
            };
            let keep = !empty || offsets.contains_key(group_id);
            if !keep {
                forgotten.push(group_id.clone());
            }
            keep
        });
        for group_id in forgotten {
            let mut partitions = Vec::new();
            self.outbox.retain_mut(|output| match output {
                Output::OffsetsExpired {
                    group_id: expired_group,
                    partitions: expired,
                } if *expired_group == group_id => {
                    partitions.append(expired);
                    false
                }
                _ => true,
            });
            self.outbox.push(Output::GroupExpired {
                group_id,
                partitions,
            });
        }
    }

    fn fire_group_timers(&mut self, now_ms: u64) {
        // A timer may arm another one due at once (a zero initial rebalance delay); the bound
        // keeps a bug from spinning forever.
        for _ in 0..1_000 {
            let due: Vec<String> = self
                .groups
                .iter()
                .filter(|(_, g)| {
                    let deadline = match g {
                        Group::Classic(g) => g.next_deadline_ms(),
                        Group::Consumer(g) => g.next_deadline_ms(),
                    };
                    deadline.is_some_and(|d| d <= now_ms)
                })
                .map(|(id, _)| id.clone())
                .collect();
            if due.is_empty() {
                return;
            }
            for group_id in due {
                let CoordinatorCore {
                    groups,
                    config,
                    outbox,
                    ..
                } = self;
                let mut env = Env {
                    now_ms,
                    config,
                    outbox,
                    group_id: &group_id,
                };
                match groups.get_mut(&group_id) {
                    Some(Group::Classic(g)) => g.on_timers(&mut env),
                    Some(Group::Consumer(g)) => g.on_timers(&mut env),
                    None => {}
                }
            }
        }
        tracing::error!(now_ms, "group timers kept re-arming at the same instant");
    }

    /// The ids of every group, with their protocol type and state (for tests and tools).
    pub fn group_states(&self) -> BTreeMap<String, (String, String)> {
        self.groups
            .iter()
            .map(|(id, g)| match g {
                Group::Classic(g) => (
                    id.clone(),
                    (
                        g.protocol_type.clone().unwrap_or_default(),
                        g.state.name().to_owned(),
                    ),
                ),
                Group::Consumer(g) => (
                    id.clone(),
                    ("consumer".to_owned(), g.state_name().to_owned()),
                ),
            })
            .collect()
    }

    pub(crate) fn subscribed_topics_of(&self, group_id: &str) -> Option<BTreeSet<String>> {
        match self.groups.get(group_id)? {
            Group::Classic(g) => g.subscribed_topics.clone(),
            Group::Consumer(g) => Some(g.subscribed_topic_names()),
        }
    }
}
