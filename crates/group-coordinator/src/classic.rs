//! The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with Kafka 2.8's
//! semantics: the state machine of `GroupCoordinator.scala` / `GroupMetadata.scala`, with the
//! purgatories replaced by deadlines that [`CoordinatorCore::tick`] fires.
//!
//! Group states and their legal predecessors (Kafka's `validPreviousStates`):
//! `PreparingRebalance <- {Stable, CompletingRebalance, Empty}`,
//! `CompletingRebalance <- {PreparingRebalance}`, `Stable <- {CompletingRebalance}`,
//! `Empty <- {PreparingRebalance}`, `Dead <- {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead}`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use uuid::Uuid;

use crate::consumer_protocol::{self, CONSUMER_PROTOCOL_TYPE};
use crate::core::{
    ClientInfo, CoordinatorCore, Env, Group, Output, Token, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
use crate::error::GroupError;
use crate::log_records::{GroupMetadataSnapshot, MemberSnapshot};
use crate::membership::MembershipEvent;

/// A classic group's state, named as Kafka names it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicGroupState {
    /// No members (may still have offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Removed.
    Dead,
}

impl ClassicGroupState {
    /// Kafka's state name (`DescribeGroups`, `ListGroups`).
    pub fn name(self) -> &'static str {
        match self {
            ClassicGroupState::Empty => "Empty",
            ClassicGroupState::PreparingRebalance => "PreparingRebalance",
            ClassicGroupState::CompletingRebalance => "CompletingRebalance",
            ClassicGroupState::Stable => "Stable",
            ClassicGroupState::Dead => "Dead",
        }
    }

    fn valid_previous(self) -> &'static [ClassicGroupState] {
        use ClassicGroupState::*;
        match self {
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Empty => &[PreparingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }
}

/// A parked request: the caller's token and the request version (the answer's shape depends on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub token: Token,
    pub version: i16,
}

#[derive(Debug)]
pub(crate) struct ClassicMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client: ClientInfo,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: Option<Reply>,
    pub awaiting_sync: Option<Reply>,
    pub is_new: bool,
    pub heartbeat_deadline_ms: Option<u64>,
}

impl ClassicMember {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    fn subscription(&self) -> BTreeSet<String> {
        self.protocols
            .first()
            .and_then(|(_, m)| consumer_protocol::subscribed_topics(m))
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JoinTimer {
    /// Kafka's `InitialDelayedJoin`: only completes when its delay runs out.
    Initial { deadline_ms: u64, remaining_ms: u64 },
    /// Kafka's `DelayedJoin`: completes once every member rejoined, or at the deadline.
    Normal { deadline_ms: u64 },
}

impl JoinTimer {
    fn deadline_ms(self) -> u64 {
        match self {
            JoinTimer::Initial { deadline_ms, .. } | JoinTimer::Normal { deadline_ms } => {
                deadline_ms
            }
        }
    }
}

/// One classic group.
#[derive(Debug)]
pub(crate) struct ClassicGroup {
    pub state: ClassicGroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    pub members: BTreeMap<String, ClassicMember>,
    /// Dynamic members that got MEMBER_ID_REQUIRED and have until the deadline to rejoin.
    pending_members: BTreeMap<String, u64>,
    static_members: BTreeMap<String, String>,
    new_member_added: bool,
    join_timer: Option<JoinTimer>,
    pub subscribed_topics: Option<BTreeSet<String>>,
    /// When the group entered its current state (Kafka's `currentStateTimestamp`); `None` for
    /// a group loaded from the store.
    pub state_timestamp_ms: Option<u64>,
}

impl ClassicGroup {
    pub(crate) fn new() -> Self {
        ClassicGroup {
            state: ClassicGroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            new_member_added: false,
            join_timer: None,
            subscribed_topics: None,
            state_timestamp_ms: None,
        }
    }

    /// What `GroupMetadataValue` stores of this group (Kafka's `groupMetadataValue`): each
    /// member's metadata for the selected protocol and its assignment.
    pub(crate) fn snapshot(&self) -> GroupMetadataSnapshot {
        let protocol = self.protocol_name.clone();
        GroupMetadataSnapshot {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            leader: self.leader_id.clone().filter(|_| !self.members.is_empty()),
            current_state_timestamp_ms: self
                .state_timestamp_ms
                .map_or(-1, |ms| i64::try_from(ms).unwrap_or(i64::MAX)),
            members: self
                .members
                .values()
                .map(|m| MemberSnapshot {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client.client_id.clone(),
                    client_host: m.client.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .map(|p| m.metadata(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
            protocol,
        }
    }

    /// A group loaded from `__consumer_offsets` (Kafka's `GroupMetadata.loadGroup`): Stable
    /// with its members, generation and assignment when it has members, else Empty. Every
    /// member's session starts at `now_ms`, so members that died with the old coordinator
    /// leave after their session timeout.
    pub(crate) fn from_snapshot(snapshot: GroupMetadataSnapshot, now_ms: u64) -> Self {
        let mut group = ClassicGroup::new();
        group.generation_id = snapshot.generation;
        group.protocol_type = Some(snapshot.protocol_type).filter(|t| !t.is_empty());
        group.state = if snapshot.members.is_empty() {
            ClassicGroupState::Empty
        } else {
            ClassicGroupState::Stable
        };
        group.state_timestamp_ms = u64::try_from(snapshot.current_state_timestamp_ms).ok();
        for member in snapshot.members {
            let protocols = match &snapshot.protocol {
                Some(protocol) => vec![(protocol.clone(), member.subscription)],
                None => Vec::new(),
            };
            if let Some(instance) = &member.group_instance_id {
                group
                    .static_members
                    .insert(instance.clone(), member.member_id.clone());
            }
            let mut loaded = ClassicMember {
                member_id: member.member_id.clone(),
                group_instance_id: member.group_instance_id,
                client: ClientInfo {
                    client_id: member.client_id,
                    client_host: member.client_host,
                },
                rebalance_timeout_ms: member.rebalance_timeout_ms,
                session_timeout_ms: member.session_timeout_ms,
                protocols,
                assignment: member.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline_ms: None,
            };
            Self::schedule_heartbeat(&mut loaded, now_ms);
            group.members.insert(member.member_id, loaded);
        }
        group.protocol_name = snapshot.protocol;
        group.leader_id = snapshot.leader.filter(|l| group.members.contains_key(l));
        if group.leader_id.is_none() {
            group.leader_id = group.members.keys().next().cloned();
        }
        group.subscribed_topics = group.compute_subscribed_topics();
        group
    }

    /// Answers every parked JoinGroup and SyncGroup of this group with `error` (the group
    /// moved to another coordinator).
    pub(crate) fn answer_parked(&mut self, env: &mut Env<'_>, error: GroupError) {
        for member in self.members.values_mut() {
            if let Some(reply) = member.awaiting_join.take() {
                Self::answer_join(env, reply, join_error(&member.member_id, error.clone()));
            }
            if let Some(reply) = member.awaiting_sync.take() {
                Self::answer_sync(env, reply, sync_error(error.clone()));
            }
        }
    }

    pub(crate) fn next_deadline_ms(&self) -> Option<u64> {
        let members = self
            .members
            .values()
            .filter_map(|m| m.heartbeat_deadline_ms);
        let pending = self.pending_members.values().copied();
        let join = self.join_timer.map(JoinTimer::deadline_ms);
        members.chain(pending).chain(join).min()
    }

    pub(crate) fn has(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// Whether `member_id` is not the member that now owns `group_instance_id`.
    pub(crate) fn is_static_member_fenced(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> bool {
        group_instance_id
            .and_then(|id| self.static_members.get(id))
            .is_some_and(|owner| owner != member_id)
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == name))
            })
    }

    /// The protocol every member supports that most members list first among those
    /// (ties go to the earliest in the leader's preference order).
    fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *name))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((vote, _)) = member
                .protocols
                .iter()
                .find(|(p, _)| candidates.contains(&p))
            {
                *votes.entry(vote).or_default() += 1;
            }
        }
        let preference: Vec<&String> = self
            .leader_id
            .as_ref()
            .and_then(|l| self.members.get(l))
            .map(|m| m.protocols.iter().map(|(p, _)| p).collect())
            .unwrap_or_else(|| candidates.clone());
        let best = votes.values().copied().max()?;
        preference
            .into_iter()
            .chain(candidates.iter().copied())
            .find(|p| votes.get(p) == Some(&best))
            .cloned()
    }

    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as u64)
            .max()
            .unwrap_or(0)
    }

    fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    fn can_rebalance(&self) -> bool {
        ClassicGroupState::PreparingRebalance
            .valid_previous()
            .contains(&self.state)
    }

    pub(crate) fn transition_to(&mut self, group_id: &str, now_ms: u64, target: ClassicGroupState) {
        if !target.valid_previous().contains(&self.state) {
            tracing::error!(target: "state_change", group_id, from = self.state.name(), to = target.name(), "illegal group state change");
            debug_assert!(
                false,
                "illegal group state change {:?} -> {:?}",
                self.state, target
            );
        }
        tracing::debug!(target: "state_change", group_id, from = self.state.name(), to = target.name(), "group state change");
        self.state = target;
        self.state_timestamp_ms = Some(now_ms);
    }

    fn owners(&self) -> BTreeMap<TopicPartition, String> {
        let mut owners = BTreeMap::new();
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return owners;
        }
        for member in self.members.values() {
            let Some(assigned) = consumer_protocol::assigned_partitions(&member.assignment) else {
                continue;
            };
            for (topic, partitions) in assigned {
                let Ok(topic) = topic.parse::<model::TopicName>() else {
                    continue;
                };
                for partition in partitions {
                    owners.insert(
                        TopicPartition::new(topic.clone(), partition),
                        member.member_id.clone(),
                    );
                }
            }
        }
        owners
    }

    fn emit_owners(&self, env: &mut Env<'_>, owners: BTreeMap<TopicPartition, String>) {
        env.emit(MembershipEvent::OwnersChanged {
            group_id: env.group_id.to_owned(),
            owners,
        });
    }

    fn schedule_heartbeat(member: &mut ClassicMember, now_ms: u64) {
        member.heartbeat_deadline_ms = Some(now_ms + member.session_timeout_ms.max(0) as u64);
    }

    fn answer_join(env: &mut Env<'_>, reply: Reply, response: JoinGroupResponse) {
        env.outbox.push(Output::JoinGroup {
            token: reply.token,
            response: shape_join(response, reply.version),
        });
    }

    fn answer_sync(env: &mut Env<'_>, reply: Reply, response: SyncGroupResponse) {
        env.outbox.push(Output::SyncGroup {
            token: reply.token,
            response,
        });
    }

    fn add_member(
        &mut self,
        env: &mut Env<'_>,
        mut member: ClassicMember,
        protocol_type: &str,
        reply: Reply,
    ) {
        if self.members.is_empty() {
            self.protocol_type = Some(protocol_type.to_owned());
        }
        if self.state == ClassicGroupState::PreparingRebalance && self.generation_id == 0 {
            self.new_member_added = true;
        }
        member.awaiting_join = Some(reply);
        member.is_new = true;
        // New members cannot heartbeat until they have a generation; a stuck JoinGroup of a
        // vanished client is dropped after Kafka's new-member timeout instead.
        member.heartbeat_deadline_ms = Some(env.now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS);
        if let Some(instance_id) = &member.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        env.emit(MembershipEvent::MemberRegistered {
            group_id: env.group_id.to_owned(),
            member_id: member.member_id.clone(),
            subscription: member.subscription(),
            timestamp_ms: env.now_ms,
        });
        self.members.insert(member.member_id.clone(), member);
    }

    fn update_member(
        &mut self,
        env: &mut Env<'_>,
        member_id: &str,
        protocols: Vec<(String, Bytes)>,
        reply: Reply,
    ) {
        let member = self
            .members
            .get_mut(member_id)
            .expect("caller checked membership");
        if let Some(old) = member.awaiting_join.replace(reply) {
            // A JoinGroup that the client already gave up on (it rejoined): answer it so the
            // caller's slot is freed; nobody reads the answer.
            Self::answer_join(env, old, join_error("", GroupError::RebalanceInProgress));
        }
        if member.protocols != protocols {
            member.protocols = protocols;
            env.emit(MembershipEvent::MemberRegistered {
                group_id: env.group_id.to_owned(),
                member_id: member_id.to_owned(),
                subscription: member.subscription(),
                timestamp_ms: env.now_ms,
            });
        }
    }

    /// Removes a member, answering its parked requests with UNKNOWN_MEMBER_ID.
    pub(crate) fn remove_member(&mut self, env: &mut Env<'_>, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else {
            self.pending_members.remove(member_id);
            return;
        };
        if let Some(reply) = member.awaiting_join {
            Self::answer_join(env, reply, join_error("", GroupError::UnknownMemberId));
        }
        if let Some(reply) = member.awaiting_sync {
            Self::answer_sync(env, reply, sync_error(GroupError::UnknownMemberId));
        }
        if let Some(instance_id) = &member.group_instance_id {
            if self.static_members.get(instance_id).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance_id);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        env.emit(MembershipEvent::MemberRemoved {
            group_id: env.group_id.to_owned(),
            member_id: member_id.to_owned(),
        });
    }

    /// Kafka's `removeMemberAndUpdateGroup`.
    pub(crate) fn remove_member_and_update_group(&mut self, env: &mut Env<'_>, member_id: &str) {
        self.remove_member(env, member_id);
        match self.state {
            ClassicGroupState::Dead | ClassicGroupState::Empty => {}
            ClassicGroupState::Stable | ClassicGroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(env, "member removed")
            }
            ClassicGroupState::PreparingRebalance => self.try_complete_join(env),
        }
    }

    fn remove_pending_member_and_update_group(&mut self, env: &mut Env<'_>, member_id: &str) {
        self.pending_members.remove(member_id);
        if self.state == ClassicGroupState::PreparingRebalance {
            self.try_complete_join(env);
        }
    }

    fn maybe_prepare_rebalance(&mut self, env: &mut Env<'_>, reason: &str) {
        if self.can_rebalance() {
            self.prepare_rebalance(env, reason);
        }
    }

    fn prepare_rebalance(&mut self, env: &mut Env<'_>, reason: &str) {
        if self.state == ClassicGroupState::CompletingRebalance {
            self.reset_and_propagate_assignment_error(env, GroupError::RebalanceInProgress);
        }
        if self.state == ClassicGroupState::Stable {
            // The members give up their partitions until the next generation is stable.
            self.emit_owners(env, BTreeMap::new());
        }
        let initial_delay_ms = env.config.initial_rebalance_delay_ms.max(0) as u64;
        self.join_timer = Some(if self.state == ClassicGroupState::Empty {
            JoinTimer::Initial {
                deadline_ms: env.now_ms + initial_delay_ms,
                remaining_ms: self.rebalance_timeout_ms().saturating_sub(initial_delay_ms),
            }
        } else {
            JoinTimer::Normal {
                deadline_ms: env.now_ms + self.rebalance_timeout_ms(),
            }
        });
        tracing::info!(
            group_id = env.group_id,
            generation_id = self.generation_id,
            reason,
            "preparing to rebalance group"
        );
        self.transition_to(
            env.group_id,
            env.now_ms,
            ClassicGroupState::PreparingRebalance,
        );
        self.try_complete_join(env);
    }

    /// Kafka's `checkAndComplete` on the join purgatory.
    fn try_complete_join(&mut self, env: &mut Env<'_>) {
        if self.state == ClassicGroupState::PreparingRebalance
            && matches!(self.join_timer, Some(JoinTimer::Normal { .. }))
            && self.has_all_members_joined()
        {
            self.complete_join(env);
        }
    }

    fn on_join_timer(&mut self, env: &mut Env<'_>) {
        match self.join_timer {
            Some(JoinTimer::Initial { remaining_ms, .. })
                if self.new_member_added && remaining_ms != 0 =>
            {
                // More members arrived during the delay: wait once more, up to the group's
                // rebalance timeout in total.
                self.new_member_added = false;
                let delay = (env.config.initial_rebalance_delay_ms.max(0) as u64).min(remaining_ms);
                self.join_timer = Some(JoinTimer::Initial {
                    deadline_ms: env.now_ms + delay,
                    remaining_ms: remaining_ms - delay,
                });
            }
            Some(_) => self.complete_join(env),
            None => {}
        }
    }

    /// Kafka's `onCompleteJoin`.
    fn complete_join(&mut self, env: &mut Env<'_>) {
        self.join_timer = None;
        let not_rejoined: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in not_rejoined {
            tracing::info!(
                group_id = env.group_id,
                member_id,
                "removing member that did not rejoin"
            );
            self.remove_member(env, &member_id);
        }
        if self.state == ClassicGroupState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined remain: wait another round until
            // their session timeouts remove them.
            tracing::error!(
                group_id = env.group_id,
                "could not complete rebalance because no members rejoined"
            );
            self.join_timer = Some(JoinTimer::Normal {
                deadline_ms: env.now_ms + self.rebalance_timeout_ms(),
            });
            return;
        }
        self.init_next_generation(env.group_id, env.now_ms);
        if self.state == ClassicGroupState::Empty {
            tracing::info!(
                group_id = env.group_id,
                generation_id = self.generation_id,
                "group is now empty"
            );
            // Kafka stores the empty group's new generation, so a new coordinator does not
            // resurrect the members that left.
            env.outbox.push(Output::GroupMetadata {
                group_id: env.group_id.to_owned(),
                value: self.snapshot(),
            });
            return;
        }
        tracing::info!(
            group_id = env.group_id,
            generation_id = self.generation_id,
            "stabilized group"
        );
        let leader = self.leader_id.clone().unwrap_or_default();
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let all_members: Vec<JoinGroupResponseMember> = self
            .members
            .values()
            .map(|m| {
                JoinGroupResponseMember::default()
                    .with_member_id(str_bytes(&m.member_id))
                    .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                    .with_metadata(m.metadata(&protocol))
            })
            .collect();
        let generation_id = self.generation_id;
        let protocol_type = self.protocol_type.clone();
        for member in self.members.values_mut() {
            let members = if member.member_id == leader {
                all_members.clone()
            } else {
                Vec::new()
            };
            let response = JoinGroupResponse::default()
                .with_generation_id(generation_id)
                .with_protocol_type(protocol_type.as_deref().map(str_bytes))
                .with_protocol_name(Some(str_bytes(&protocol)))
                .with_leader(str_bytes(&leader))
                .with_member_id(str_bytes(&member.member_id))
                .with_members(members);
            if let Some(reply) = member.awaiting_join.take() {
                Self::answer_join(env, reply, response);
            }
            Self::schedule_heartbeat(member, env.now_ms);
            member.is_new = false;
        }
    }

    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader_id) = self.leader_id.clone() else {
            return false;
        };
        let leader_joined = self
            .members
            .get(&leader_id)
            .is_some_and(|m| m.awaiting_join.is_some());
        if leader_joined {
            return true;
        }
        match self.members.values().find(|m| m.awaiting_join.is_some()) {
            Some(joined) => {
                self.leader_id = Some(joined.member_id.clone());
                true
            }
            None => false,
        }
    }

    fn init_next_generation(&mut self, group_id: &str, now_ms: u64) {
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = None;
            self.transition_to(group_id, now_ms, ClassicGroupState::Empty);
        } else {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition_to(group_id, now_ms, ClassicGroupState::CompletingRebalance);
        }
    }

    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for member in self.members.values() {
            topics.extend(consumer_protocol::subscribed_topics(
                &member.metadata(protocol),
            )?);
        }
        Some(topics)
    }

    fn reset_and_propagate_assignment_error(&mut self, env: &mut Env<'_>, error: GroupError) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
            if let Some(reply) = member.awaiting_sync.take() {
                Self::answer_sync(env, reply, sync_error(error.clone()));
                Self::schedule_heartbeat(member, env.now_ms);
            }
        }
    }

    fn set_and_propagate_assignment(
        &mut self,
        env: &mut Env<'_>,
        mut assignment: BTreeMap<String, Bytes>,
    ) {
        let protocol_type = self.protocol_type.clone();
        let protocol_name = self.protocol_name.clone();
        for member in self.members.values_mut() {
            member.assignment = assignment.remove(&member.member_id).unwrap_or_default();
            if let Some(reply) = member.awaiting_sync.take() {
                let response = SyncGroupResponse::default()
                    .with_protocol_type(protocol_type.as_deref().map(str_bytes))
                    .with_protocol_name(protocol_name.as_deref().map(str_bytes))
                    .with_assignment(member.assignment.clone());
                Self::answer_sync(env, reply, response);
                Self::schedule_heartbeat(member, env.now_ms);
            }
        }
    }

    /// Fires this group's due timers.
    pub(crate) fn on_timers(&mut self, env: &mut Env<'_>) {
        let now = env.now_ms;
        let expired_pending: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for member_id in expired_pending {
            tracing::info!(
                group_id = env.group_id,
                member_id,
                "pending member removed after session timeout"
            );
            self.remove_pending_member_and_update_group(env, &member_id);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.heartbeat_deadline_ms.is_some_and(|d| d <= now))
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            let Some(member) = self.members.get_mut(&member_id) else {
                continue;
            };
            member.heartbeat_deadline_ms = None;
            // Members waiting in a rebalance cannot heartbeat and are not expired (Kafka's
            // `hasSatisfiedHeartbeat`), except new members, which had their 5-minute grace.
            let waiting = member.awaiting_join.is_some() || member.awaiting_sync.is_some();
            if member.is_new || !waiting {
                tracing::info!(
                    group_id = env.group_id,
                    member_id,
                    "member has failed (session timeout), removing it from the group"
                );
                self.remove_member_and_update_group(env, &member_id);
            }
        }
        if self.join_timer.is_some_and(|t| t.deadline_ms() <= now) {
            self.on_join_timer(env);
        }
    }
}

impl CoordinatorCore {
    /// JoinGroup (any version). The answer comes out of [`CoordinatorCore::take_outputs`]
    /// as [`Output::JoinGroup`] with `token`, now or when the rebalance completes.
    pub fn join_group(
        &mut self,
        now_ms: u64,
        token: Token,
        version: i16,
        request: &JoinGroupRequest,
        client: &ClientInfo,
    ) {
        let reply = Reply { token, version };
        let group_id = request.group_id.0.as_str().to_owned();
        let member_id = request.member_id.as_str();
        if let Err(error) = self.check_join(&group_id, member_id, request.session_timeout_ms) {
            self.outbox.push(Output::JoinGroup {
                token,
                response: shape_join(join_error(member_id, error), version),
            });
            return;
        }
        let is_unknown = member_id.is_empty();
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
        let group = match groups.get_mut(&group_id) {
            Some(Group::Classic(group)) => group,
            _ => unreachable!("check_join made sure a classic group exists"),
        };
        let max_size = env.config.max_size;
        if !accept_joining_member(group, member_id, max_size) {
            group.remove_member(&mut env, member_id);
            ClassicGroup::answer_join(
                &mut env,
                reply,
                join_error("", GroupError::GroupMaxSizeReached { max_size }),
            );
        } else if is_unknown {
            unknown_member_join(group, &mut env, reply, request, client);
        } else {
            current_member_join(group, &mut env, reply, request, client);
        }
        if group.state == ClassicGroupState::PreparingRebalance {
            group.try_complete_join(&mut env);
        }
    }

    fn check_join(
        &mut self,
        group_id: &str,
        member_id: &str,
        session_timeout_ms: i32,
    ) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let (min_ms, max_ms) = (
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        );
        if !(min_ms..=max_ms).contains(&session_timeout_ms) {
            return Err(GroupError::InvalidSessionTimeout {
                requested_ms: session_timeout_ms,
                min_ms,
                max_ms,
            });
        }
        match self.groups.get(group_id) {
            None if !member_id.is_empty() => Err(GroupError::UnknownMemberId),
            None => {
                self.groups
                    .insert(group_id.to_owned(), Group::Classic(ClassicGroup::new()));
                Ok(())
            }
            Some(Group::Consumer(group)) if group.is_empty() => {
                // An empty KIP-848 group turns back into a classic one, as Kafka allows.
                self.groups
                    .insert(group_id.to_owned(), Group::Classic(ClassicGroup::new()));
                Ok(())
            }
            Some(Group::Consumer(_)) => Err(GroupError::InconsistentGroupProtocol),
            Some(Group::Classic(_)) => Ok(()),
        }
    }

    /// SyncGroup. The answer comes out as [`Output::SyncGroup`] with `token`: at once, or
    /// (for followers) when the leader's assignment arrives.
    pub fn sync_group(
        &mut self,
        now_ms: u64,
        token: Token,
        version: i16,
        request: &SyncGroupRequest,
    ) {
        let reply = Reply { token, version };
        let group_id = request.group_id.0.as_str().to_owned();
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
        let group = match groups.get_mut(&group_id) {
            Some(Group::Classic(group)) => group,
            _ => {
                ClassicGroup::answer_sync(&mut env, reply, sync_error(GroupError::UnknownMemberId));
                return;
            }
        };
        if let Err(error) = check_sync(group, request) {
            ClassicGroup::answer_sync(&mut env, reply, sync_error(error));
            return;
        }
        let member_id = request.member_id.as_str();
        match group.state {
            ClassicGroupState::Empty => {
                ClassicGroup::answer_sync(&mut env, reply, sync_error(GroupError::UnknownMemberId))
            }
            ClassicGroupState::PreparingRebalance => ClassicGroup::answer_sync(
                &mut env,
                reply,
                sync_error(GroupError::RebalanceInProgress),
            ),
            ClassicGroupState::CompletingRebalance => {
                let member = group
                    .members
                    .get_mut(member_id)
                    .expect("check_sync checked membership");
                if let Some(old) = member.awaiting_sync.replace(reply) {
                    ClassicGroup::answer_sync(
                        &mut env,
                        old,
                        sync_error(GroupError::RebalanceInProgress),
                    );
                }
                if group.is_leader(member_id) {
                    let assignment: BTreeMap<String, Bytes> = request
                        .assignments
                        .iter()
                        .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
                        .collect();
                    tracing::info!(
                        group_id = env.group_id,
                        generation_id = group.generation_id,
                        "assignment received from leader"
                    );
                    group.set_and_propagate_assignment(&mut env, assignment);
                    group.transition_to(env.group_id, now_ms, ClassicGroupState::Stable);
                    env.outbox.push(Output::GroupMetadata {
                        group_id: env.group_id.to_owned(),
                        value: group.snapshot(),
                    });
                    let owners = group.owners();
                    group.emit_owners(&mut env, owners);
                }
            }
            ClassicGroupState::Stable => {
                let member = group
                    .members
                    .get_mut(member_id)
                    .expect("check_sync checked membership");
                let response = SyncGroupResponse::default()
                    .with_protocol_type(group.protocol_type.as_deref().map(str_bytes))
                    .with_protocol_name(group.protocol_name.as_deref().map(str_bytes))
                    .with_assignment(member.assignment.clone());
                ClassicGroup::schedule_heartbeat(member, now_ms);
                ClassicGroup::answer_sync(&mut env, reply, response);
            }
            ClassicGroupState::Dead => ClassicGroup::answer_sync(
                &mut env,
                reply,
                sync_error(GroupError::CoordinatorNotAvailable),
            ),
        }
    }

    /// Heartbeat.
    pub fn heartbeat(&mut self, now_ms: u64, request: &HeartbeatRequest) -> HeartbeatResponse {
        let result = self.do_heartbeat(now_ms, request);
        HeartbeatResponse::default().with_error_code(crate::error::code_of(&result))
    }

    fn do_heartbeat(&mut self, now_ms: u64, request: &HeartbeatRequest) -> Result<(), GroupError> {
        let member_id = request.member_id.as_str();
        let group = match self.groups.get_mut(request.group_id.0.as_str()) {
            Some(Group::Classic(group)) => group,
            _ => return Err(GroupError::UnknownMemberId),
        };
        if group.state == ClassicGroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if group.is_static_member_fenced(
            member_id,
            request.group_instance_id.as_ref().map(|s| s.as_str()),
        ) {
            return Err(GroupError::FencedInstanceId);
        }
        if !group.has(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if request.generation_id != group.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let state = group.state;
        let member = group.members.get_mut(member_id).expect("checked above");
        match state {
            ClassicGroupState::Empty | ClassicGroupState::Dead => Err(GroupError::UnknownMemberId),
            ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable => {
                ClassicGroup::schedule_heartbeat(member, now_ms);
                Ok(())
            }
            ClassicGroupState::PreparingRebalance => {
                ClassicGroup::schedule_heartbeat(member, now_ms);
                Err(GroupError::RebalanceInProgress)
            }
        }
    }

    /// LeaveGroup: v0-2 name one member in `member_id`, v3+ a batch in `members`.
    pub fn leave_group(
        &mut self,
        now_ms: u64,
        version: i16,
        request: &LeaveGroupRequest,
    ) -> LeaveGroupResponse {
        if version >= 5 {
            // KIP-800: the client says why each member leaves.
            for m in &request.members {
                tracing::info!(
                    group_id = request.group_id.0.as_str(),
                    member_id = m.member_id.as_str(),
                    reason = m.reason.as_ref().map_or("not provided", |r| r.as_str()),
                    "leave request"
                );
            }
        }
        let leaving: Vec<(String, Option<String>)> = if version >= 3 {
            request
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.as_str().to_owned(),
                        m.group_instance_id.as_ref().map(|s| s.as_str().to_owned()),
                    )
                })
                .collect()
        } else {
            vec![(request.member_id.as_str().to_owned(), None)]
        };
        let (top_level, results) = self.do_leave(now_ms, request.group_id.0.as_str(), &leaving);
        let members: Vec<MemberResponse> = leaving
            .iter()
            .zip(&results)
            .map(|((member_id, instance_id), result)| {
                MemberResponse::default()
                    .with_member_id(str_bytes(member_id))
                    .with_group_instance_id(instance_id.as_deref().map(str_bytes))
                    .with_error_code(crate::error::code_of(result))
            })
            .collect();
        let mut error_code = crate::error::code_of(&top_level);
        if version < 3 && error_code == 0 {
            error_code = members.first().map_or(0, |m| m.error_code);
        }
        LeaveGroupResponse::default()
            .with_error_code(error_code)
            .with_members(if version >= 3 { members } else { Vec::new() })
    }

    fn do_leave(
        &mut self,
        now_ms: u64,
        group_id: &str,
        leaving: &[(String, Option<String>)],
    ) -> (Result<(), GroupError>, Vec<Result<(), GroupError>>) {
        let unknown = || {
            leaving
                .iter()
                .map(|_| Err(GroupError::UnknownMemberId))
                .collect()
        };
        let CoordinatorCore {
            groups,
            config,
            outbox,
            ..
        } = self;
        let group = match groups.get_mut(group_id) {
            Some(Group::Classic(group)) => group,
            _ => return (Ok(()), unknown()),
        };
        if group.state == ClassicGroupState::Dead {
            return (Err(GroupError::CoordinatorNotAvailable), Vec::new());
        }
        let mut env = Env {
            now_ms,
            config,
            outbox,
            group_id,
        };
        let results = leaving
            .iter()
            .map(|(member_id, instance_id)| {
                if member_id.is_empty() {
                    // Administrative removal by group.instance.id alone.
                    let current = instance_id
                        .as_ref()
                        .and_then(|id| group.static_members.get(id).cloned());
                    return match current {
                        Some(current) => {
                            group.remove_member_and_update_group(&mut env, &current);
                            Ok(())
                        }
                        None => Err(GroupError::UnknownMemberId),
                    };
                }
                if group.pending_members.contains_key(member_id) {
                    group.remove_pending_member_and_update_group(&mut env, member_id);
                    Ok(())
                } else if group.is_static_member_fenced(member_id, instance_id.as_deref()) {
                    Err(GroupError::FencedInstanceId)
                } else if group.has(member_id) {
                    tracing::info!(group_id, member_id, "member is leaving the group");
                    group.remove_member_and_update_group(&mut env, member_id);
                    Ok(())
                } else {
                    Err(GroupError::UnknownMemberId)
                }
            })
            .collect();
        (Ok(()), results)
    }
}

fn accept_joining_member(group: &ClassicGroup, member_id: &str, max_size: usize) -> bool {
    match group.state {
        ClassicGroupState::Empty | ClassicGroupState::Dead => true,
        ClassicGroupState::PreparingRebalance => {
            group
                .members
                .get(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || group.num_awaiting_join() < max_size
        }
        ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable => {
            group.has(member_id) || group.members.len() < max_size
        }
    }
}

/// The reason a JoinGroup v8+ gives (KIP-800), for the rebalance log line.
fn client_reason(request: &JoinGroupRequest) -> &str {
    request
        .reason
        .as_ref()
        .map_or("not provided", |r| r.as_str())
}

/// JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
fn rebalance_timeout_of(request: &JoinGroupRequest, version: i16) -> i32 {
    if version == 0 || request.rebalance_timeout_ms < 0 {
        request.session_timeout_ms
    } else {
        request.rebalance_timeout_ms
    }
}

fn protocols_of(request: &JoinGroupRequest) -> Vec<(String, Bytes)> {
    request
        .protocols
        .iter()
        .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
        .collect()
}

fn unknown_member_join(
    group: &mut ClassicGroup,
    env: &mut Env<'_>,
    reply: Reply,
    request: &JoinGroupRequest,
    client: &ClientInfo,
) {
    let protocols = protocols_of(request);
    let protocol_type = request.protocol_type.as_str();
    if group.state == ClassicGroupState::Dead {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error("", GroupError::CoordinatorNotAvailable),
        );
        return;
    }
    if !group.supports_protocols(protocol_type, &protocols) {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error("", GroupError::InconsistentGroupProtocol),
        );
        return;
    }
    let instance_id = request
        .group_instance_id
        .as_ref()
        .map(|s| s.as_str().to_owned());
    let new_member_id = format!("{}-{}", client.client_id, Uuid::new_v4());
    if let Some(old_member_id) = instance_id
        .as_ref()
        .and_then(|id| group.static_members.get(id).cloned())
    {
        static_member_rejoin(
            group,
            env,
            reply,
            &old_member_id,
            new_member_id,
            protocols,
            request,
        );
        return;
    }
    // Kafka requires a known member id only of dynamic members on v4+.
    if reply.version >= 4 && instance_id.is_none() {
        let deadline = env.now_ms + request.session_timeout_ms.max(0) as u64;
        group
            .pending_members
            .insert(new_member_id.clone(), deadline);
        ClassicGroup::answer_join(
            env,
            reply,
            join_error(&new_member_id, GroupError::MemberIdRequired),
        );
        return;
    }
    add_member_and_rebalance(
        group,
        env,
        reply,
        new_member_id,
        instance_id,
        protocols,
        request,
        client,
    );
}

#[allow(clippy::too_many_arguments)]
fn add_member_and_rebalance(
    group: &mut ClassicGroup,
    env: &mut Env<'_>,
    reply: Reply,
    member_id: String,
    group_instance_id: Option<String>,
    protocols: Vec<(String, Bytes)>,
    request: &JoinGroupRequest,
    client: &ClientInfo,
) {
    let member = ClassicMember {
        member_id: member_id.clone(),
        group_instance_id,
        client: client.clone(),
        rebalance_timeout_ms: rebalance_timeout_of(request, reply.version),
        session_timeout_ms: request.session_timeout_ms,
        protocols,
        assignment: Bytes::new(),
        awaiting_join: None,
        awaiting_sync: None,
        is_new: true,
        heartbeat_deadline_ms: None,
    };
    group.add_member(env, member, request.protocol_type.as_str(), reply);
    group.maybe_prepare_rebalance(
        env,
        &format!(
            "adding new member {member_id}; client reason: {}",
            client_reason(request)
        ),
    );
}

fn static_member_rejoin(
    group: &mut ClassicGroup,
    env: &mut Env<'_>,
    reply: Reply,
    old_member_id: &str,
    new_member_id: String,
    protocols: Vec<(String, Bytes)>,
    request: &JoinGroupRequest,
) {
    let current_leader = group.leader_id.clone().unwrap_or_default();
    let Some(mut member) = group.members.remove(old_member_id) else {
        return;
    };
    tracing::info!(
        group_id = env.group_id,
        old_member_id,
        new_member_id,
        "static member rejoins with a new member id"
    );
    // The old incarnation of this instance is fenced: answer whatever it still waits for.
    if let Some(old) = member.awaiting_join.take() {
        ClassicGroup::answer_join(
            env,
            old,
            join_error(old_member_id, GroupError::FencedInstanceId),
        );
    }
    if let Some(old) = member.awaiting_sync.take() {
        ClassicGroup::answer_sync(env, old, sync_error(GroupError::FencedInstanceId));
    }
    let selected = group.protocol_name.clone().unwrap_or_default();
    let metadata_unchanged = member.metadata(&selected)
        == protocols
            .iter()
            .find(|(p, _)| *p == selected)
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
    member.member_id = new_member_id.clone();
    member.rebalance_timeout_ms = rebalance_timeout_of(request, reply.version);
    member.session_timeout_ms = request.session_timeout_ms;
    ClassicGroup::schedule_heartbeat(&mut member, env.now_ms);
    if let Some(instance_id) = &member.group_instance_id {
        group
            .static_members
            .insert(instance_id.clone(), new_member_id.clone());
    }
    if group.is_leader(old_member_id) {
        group.leader_id = Some(new_member_id.clone());
    }
    env.emit(MembershipEvent::MemberRemoved {
        group_id: env.group_id.to_owned(),
        member_id: old_member_id.to_owned(),
    });
    env.emit(MembershipEvent::MemberRegistered {
        group_id: env.group_id.to_owned(),
        member_id: new_member_id.clone(),
        subscription: member.subscription(),
        timestamp_ms: env.now_ms,
    });
    group.members.insert(new_member_id.clone(), member);
    group.update_member(env, &new_member_id, protocols, reply);
    match group.state {
        ClassicGroupState::Stable => {
            if metadata_unchanged && group.select_protocol().as_deref() == Some(selected.as_str()) {
                // Nothing the assignment depends on changed: hand back the current generation
                // without a rebalance. The old leader id is returned so that this member does
                // not think it must compute an assignment a stable group would not distribute.
                let response = JoinGroupResponse::default()
                    .with_generation_id(group.generation_id)
                    .with_protocol_type(group.protocol_type.as_deref().map(str_bytes))
                    .with_protocol_name(group.protocol_name.as_deref().map(str_bytes))
                    .with_leader(str_bytes(&current_leader))
                    .with_member_id(str_bytes(&new_member_id));
                let member = group
                    .members
                    .get_mut(&new_member_id)
                    .expect("just inserted");
                if let Some(reply) = member.awaiting_join.take() {
                    ClassicGroup::answer_join(env, reply, response);
                }
                let owners = group.owners();
                group.emit_owners(env, owners);
            } else {
                group.maybe_prepare_rebalance(env, "static member rejoined with changed metadata");
            }
        }
        ClassicGroupState::CompletingRebalance => {
            // The leader may already be assigning with the old member id: start over.
            group.prepare_rebalance(env, "static member rejoined during CompletingRebalance");
        }
        ClassicGroupState::PreparingRebalance
        | ClassicGroupState::Empty
        | ClassicGroupState::Dead => {}
    }
}

fn current_member_join(
    group: &mut ClassicGroup,
    env: &mut Env<'_>,
    reply: Reply,
    request: &JoinGroupRequest,
    client: &ClientInfo,
) {
    let member_id = request.member_id.as_str();
    let protocols = protocols_of(request);
    let instance_id = request
        .group_instance_id
        .as_ref()
        .map(|s| s.as_str().to_owned());
    if group.state == ClassicGroupState::Dead {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error(member_id, GroupError::CoordinatorNotAvailable),
        );
        return;
    }
    if !group.supports_protocols(request.protocol_type.as_str(), &protocols) {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error(member_id, GroupError::InconsistentGroupProtocol),
        );
        return;
    }
    if group.pending_members.contains_key(member_id) {
        add_member_and_rebalance(
            group,
            env,
            reply,
            member_id.to_owned(),
            None,
            protocols,
            request,
            client,
        );
        return;
    }
    let instance_not_found = instance_id
        .as_ref()
        .is_some_and(|id| !group.static_members.contains_key(id));
    if group.is_static_member_fenced(member_id, instance_id.as_deref()) {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error(member_id, GroupError::FencedInstanceId),
        );
        return;
    }
    if !group.has(member_id) || instance_not_found {
        ClassicGroup::answer_join(
            env,
            reply,
            join_error(member_id, GroupError::UnknownMemberId),
        );
        return;
    }
    let matches = group.members[member_id].matches(&protocols);
    match group.state {
        ClassicGroupState::PreparingRebalance => {
            group.update_member(env, member_id, protocols, reply);
            group.maybe_prepare_rebalance(
                env,
                &format!(
                    "member {member_id} joining during PreparingRebalance; client reason: {}",
                    client_reason(request)
                ),
            );
        }
        ClassicGroupState::CompletingRebalance if matches => {
            // The member lost our JoinGroup answer and asks again: same answer.
            let members = if group.is_leader(member_id) {
                current_member_metadata(group)
            } else {
                Vec::new()
            };
            ClassicGroup::answer_join(
                env,
                reply,
                current_generation_join(group, member_id, members),
            );
        }
        ClassicGroupState::Stable if matches && !group.is_leader(member_id) => {
            ClassicGroup::answer_join(
                env,
                reply,
                current_generation_join(group, member_id, Vec::new()),
            );
        }
        ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable => {
            // A changed subscription, or the leader asking for a new assignment (for topic
            // changes the metadata does not show): rebalance.
            group.update_member(env, member_id, protocols, reply);
            group.maybe_prepare_rebalance(
                env,
                &format!(
                    "member {member_id} rejoined with new metadata or as leader; client reason: {}",
                    client_reason(request)
                ),
            );
        }
        ClassicGroupState::Empty | ClassicGroupState::Dead => {
            ClassicGroup::answer_join(
                env,
                reply,
                join_error(member_id, GroupError::UnknownMemberId),
            );
        }
    }
}

fn current_member_metadata(group: &ClassicGroup) -> Vec<JoinGroupResponseMember> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    group
        .members
        .values()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                .with_metadata(m.metadata(&protocol))
        })
        .collect()
}

fn current_generation_join(
    group: &ClassicGroup,
    member_id: &str,
    members: Vec<JoinGroupResponseMember>,
) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_generation_id(group.generation_id)
        .with_protocol_type(group.protocol_type.as_deref().map(str_bytes))
        .with_protocol_name(group.protocol_name.as_deref().map(str_bytes))
        .with_leader(str_bytes(group.leader_id.as_deref().unwrap_or_default()))
        .with_member_id(str_bytes(member_id))
        .with_members(members)
}

fn check_sync(group: &ClassicGroup, request: &SyncGroupRequest) -> Result<(), GroupError> {
    let member_id = request.member_id.as_str();
    if group.state == ClassicGroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if group.is_static_member_fenced(
        member_id,
        request.group_instance_id.as_ref().map(|s| s.as_str()),
    ) {
        return Err(GroupError::FencedInstanceId);
    }
    if !group.has(member_id) {
        return Err(GroupError::UnknownMemberId);
    }
    if request.generation_id != group.generation_id {
        return Err(GroupError::IllegalGeneration);
    }
    if let Some(protocol_type) = &request.protocol_type {
        if group.protocol_type.as_deref() != Some(protocol_type.as_str()) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
    }
    if let Some(protocol_name) = &request.protocol_name {
        if group.protocol_name.as_deref() != Some(protocol_name.as_str()) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
    }
    Ok(())
}

/// Kafka's `JoinGroupResult(memberId, error)`.
fn join_error(member_id: &str, error: GroupError) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(error.code())
        .with_generation_id(-1)
        .with_member_id(str_bytes(member_id))
        .with_protocol_name(None)
}

fn sync_error(error: GroupError) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(error.code())
}

/// Fills the fields a version cannot leave null: before v7 the protocol name is a plain string.
fn shape_join(mut response: JoinGroupResponse, version: i16) -> JoinGroupResponse {
    if version < 7 && response.protocol_name.is_none() {
        response.protocol_name = Some(StrBytes::default());
    }
    response
}

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}
