//! The consumer group protocol of KIP-848 (`ConsumerGroupHeartbeat`, `ConsumerGroupDescribe`):
//! the broker assigns partitions and members reconcile towards their target one heartbeat at
//! a time.
//!
//! Epochs: the *group epoch* grows whenever membership, subscriptions or the subscribed
//! topics' partition counts change; the *assignment epoch* is the group epoch the target
//! assignment was computed for; each member's *member epoch* reaches the assignment epoch once
//! it owns exactly its target. A partition moves between members in two steps: the old owner
//! is asked to revoke it (it keeps its epoch and stays in `UnrevokedPartitions` until its
//! heartbeat no longer lists the partition), and only then is it handed to the new owner
//! (which waits in `UnreleasedPartitions` meanwhile). A member that does not revoke within its
//! rebalance timeout, or stops heartbeating for `group.consumer.session.timeout.ms`, is fenced.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_describe_response;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
};
use model::TopicPartition;
use uuid::Uuid;

use crate::assignor::{ServerAssignor, Subscriptions};
use crate::classic::str_bytes;
use crate::core::{ClientInfo, CoordinatorCore, Env, Group, TopicMetadata};
use crate::error::GroupError;
use crate::membership::MembershipEvent;

/// topic name -> partitions.
pub(crate) type TopicAssignment = BTreeMap<String, BTreeSet<i32>>;

/// The member epoch a leaving dynamic member sends.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// The member epoch a static member sends when it leaves for a while (it keeps its partitions
/// until its session times out or it comes back).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

#[derive(Debug, Clone)]
pub(crate) struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client: ClientInfo,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topics: BTreeSet<String>,
    pub server_assignor: Option<String>,
    pub state: MemberState,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub assigned: TopicAssignment,
    pub pending_revocation: TopicAssignment,
    session_deadline_ms: u64,
    revocation_deadline_ms: Option<u64>,
}

/// One KIP-848 group.
#[derive(Debug, Default)]
pub(crate) struct ConsumerGroup {
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, ConsumerMember>,
    target: BTreeMap<String, TopicAssignment>,
    subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    /// partition -> member that owns it (assigned or still revoking).
    owners: BTreeMap<(String, i32), String>,
    static_members: BTreeMap<String, String>,
    assignor: Option<ServerAssignor>,
}

impl ConsumerGroup {
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(crate) fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub(crate) fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.member_epoch)
    }

    pub(crate) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.member_epoch >= 0
                && (m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    pub(crate) fn subscribed_topic_names(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topics.iter().cloned())
            .collect()
    }

    pub(crate) fn assignor_name(&self) -> &'static str {
        self.assignor.map_or("", ServerAssignor::name)
    }

    pub(crate) fn members(&self) -> impl Iterator<Item = &ConsumerMember> {
        self.members.values()
    }

    pub(crate) fn next_deadline_ms(&self) -> Option<u64> {
        self.members
            .values()
            .flat_map(|m| std::iter::once(m.session_deadline_ms).chain(m.revocation_deadline_ms))
            .min()
    }

    pub(crate) fn on_timers(&mut self, env: &mut Env<'_>) {
        let now = env.now_ms;
        let expired: Vec<(String, &'static str)> = self
            .members
            .values()
            .filter_map(|m| {
                if m.session_deadline_ms <= now {
                    Some((m.member_id.clone(), "session timeout"))
                } else if m.revocation_deadline_ms.is_some_and(|d| d <= now) {
                    Some((
                        m.member_id.clone(),
                        "did not revoke its partitions within the rebalance timeout",
                    ))
                } else {
                    None
                }
            })
            .collect();
        for (member_id, reason) in expired {
            tracing::info!(
                group_id = env.group_id,
                member_id,
                reason,
                "fencing consumer group member"
            );
            self.fence_member(env, &member_id);
        }
    }

    /// Removes a member and releases its partitions; the next heartbeat recomputes the target.
    fn fence_member(&mut self, env: &mut Env<'_>, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance_id) = &member.instance_id {
            if self.static_members.get(instance_id).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance_id);
            }
        }
        self.target.remove(member_id);
        self.owners.retain(|_, owner| owner != member_id);
        self.group_epoch += 1;
        env.emit(MembershipEvent::MemberRemoved {
            group_id: env.group_id.to_owned(),
            member_id: member_id.to_owned(),
        });
        self.emit_owners(env);
    }

    fn emit_owners(&self, env: &mut Env<'_>) {
        let owners = self
            .owners
            .iter()
            .filter_map(|((topic, partition), member)| {
                Some((
                    TopicPartition::new(topic.parse().ok()?, *partition),
                    member.clone(),
                ))
            })
            .collect();
        env.emit(MembershipEvent::OwnersChanged {
            group_id: env.group_id.to_owned(),
            owners,
        });
    }

    fn set_member_ownership(&mut self, member: &ConsumerMember) {
        self.owners.retain(|_, owner| *owner != member.member_id);
        for (topic, partitions) in member.assigned.iter().chain(&member.pending_revocation) {
            for partition in partitions {
                self.owners
                    .insert((topic.clone(), *partition), member.member_id.clone());
            }
        }
    }

    fn compute_subscription_metadata(
        &self,
        topics: &BTreeMap<String, TopicMetadata>,
    ) -> BTreeMap<String, (Uuid, i32)> {
        self.subscribed_topic_names()
            .into_iter()
            .filter_map(|name| {
                let t = topics.get(&name)?;
                Some((name, (t.topic_id, t.partitions)))
            })
            .collect()
    }

    /// The assignor most members prefer, or the broker's default.
    fn choose_assignor(&self, config_assignors: &[ServerAssignor]) -> ServerAssignor {
        let mut votes: BTreeMap<ServerAssignor, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(assignor) = member
                .server_assignor
                .as_deref()
                .and_then(|a| a.parse().ok())
            {
                *votes.entry(assignor).or_default() += 1;
            }
        }
        let default = config_assignors
            .first()
            .copied()
            .unwrap_or(ServerAssignor::Uniform);
        let best = votes.values().copied().max().unwrap_or(0);
        config_assignors
            .iter()
            .copied()
            .find(|a| best > 0 && votes.get(a) == Some(&best))
            .unwrap_or(default)
    }

    fn update_target_assignment(&mut self, config_assignors: &[ServerAssignor]) {
        let assignor = self.choose_assignor(config_assignors);
        // The assignors order members by key. Java's and librdkafka's client-side assignors put
        // static members first, by instance id, then the others by member id; keying the
        // members that way makes the server's `range` give what those clients would compute.
        let keyed: BTreeMap<String, &ConsumerMember> = self
            .members
            .values()
            .map(|m| {
                let key = match &m.instance_id {
                    Some(instance_id) => format!("0{instance_id}"),
                    None => format!("1{}", m.member_id),
                };
                (key, m)
            })
            .collect();
        let subscriptions: Subscriptions = keyed
            .iter()
            .map(|(key, m)| (key.clone(), m.subscribed_topics.clone()))
            .collect();
        let partitions: BTreeMap<String, i32> = self
            .subscription_metadata
            .iter()
            .map(|(name, (_, count))| (name.clone(), *count))
            .collect();
        self.target = assignor
            .assign(&subscriptions, &partitions)
            .into_iter()
            .map(|(key, topics)| {
                let member = keyed[&key].member_id.clone();
                let topics = topics
                    .into_iter()
                    .map(|(t, ps)| (t, ps.into_iter().collect()))
                    .collect();
                (member, topics)
            })
            .collect();
        self.assignor = Some(assignor);
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves `member` one step towards its target assignment (Kafka's `CurrentAssignmentBuilder`).
    fn reconcile(&self, member: &mut ConsumerMember, owned: Option<&TopicAssignment>) {
        let target_epoch = self.assignment_epoch;
        match member.state {
            MemberState::Stable if member.member_epoch == target_epoch => {}
            MemberState::UnrevokedPartitions => {
                let still_owns_revoked = match owned {
                    None => true,
                    Some(owned) => intersects(owned, &member.pending_revocation),
                };
                if !still_owns_revoked {
                    self.compute_next_assignment(member, target_epoch);
                }
            }
            _ => self.compute_next_assignment(member, target_epoch),
        }
    }

    fn compute_next_assignment(&self, member: &mut ConsumerMember, target_epoch: i32) {
        let empty = TopicAssignment::new();
        let target = self.target.get(&member.member_id).unwrap_or(&empty);
        let topics: BTreeSet<&String> = target.keys().chain(member.assigned.keys()).collect();
        let mut assigned = TopicAssignment::new();
        let mut revoking = TopicAssignment::new();
        let mut assignable = TopicAssignment::new();
        let mut unreleased = false;
        for topic in topics {
            let target_parts = target.get(topic).cloned().unwrap_or_default();
            let current = member.assigned.get(topic).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = current.intersection(&target_parts).copied().collect();
            let revoke: BTreeSet<i32> = current.difference(&keep).copied().collect();
            let mut add = BTreeSet::new();
            for partition in target_parts.difference(&keep) {
                match self.owners.get(&(topic.clone(), *partition)) {
                    Some(owner) if *owner != member.member_id => unreleased = true,
                    _ => {
                        add.insert(*partition);
                    }
                }
            }
            insert_nonempty(&mut assigned, topic, keep);
            insert_nonempty(&mut revoking, topic, revoke);
            insert_nonempty(&mut assignable, topic, add);
        }
        if !revoking.is_empty() {
            // Revoke first; the member keeps its epoch until it has let go.
            member.state = MemberState::UnrevokedPartitions;
            member.assigned = assigned;
            member.pending_revocation = revoking;
            return;
        }
        for (topic, partitions) in assignable {
            assigned.entry(topic).or_default().extend(partitions);
        }
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        if member.member_epoch != target_epoch {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = target_epoch;
        }
        member.assigned = assigned;
        member.pending_revocation = TopicAssignment::new();
    }
}

impl CoordinatorCore {
    /// ConsumerGroupHeartbeat (KIP-848): join with epoch 0, heartbeat with the current epoch
    /// (acknowledging revocations by no longer listing the partitions), leave with -1 (-2 for a
    /// static member leaving for a while).
    pub fn consumer_group_heartbeat(
        &mut self,
        now_ms: u64,
        request: &ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
    ) -> ConsumerGroupHeartbeatResponse {
        let result = validate_heartbeat(request, &self.config.consumer_assignors).and_then(|()| {
            if request.member_epoch < 0 {
                self.consumer_group_leave(now_ms, request)
            } else {
                self.consumer_group_join_or_heartbeat(now_ms, request, client)
            }
        });
        result.unwrap_or_else(|error| {
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(str_bytes(&error.to_string())))
        })
    }

    fn consumer_group_leave(
        &mut self,
        now_ms: u64,
        request: &ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse, GroupError> {
        let group_id = request.group_id.0.as_str();
        let member_id = request.member_id.as_str();
        let CoordinatorCore {
            groups,
            config,
            outbox,
            ..
        } = self;
        let group = match groups.get_mut(group_id) {
            Some(Group::Consumer(group)) => group,
            _ => return Err(GroupError::GroupIdNotFound),
        };
        if !group.has_member(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        let mut env = Env {
            now_ms,
            config,
            outbox,
            group_id,
        };
        let member = group.members.get_mut(member_id).expect("checked above");
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH && member.instance_id.is_some() {
            // The static member keeps its partitions for a comeback within its session timeout.
            tracing::info!(
                group_id,
                member_id,
                "static member leaves the consumer group for now"
            );
            if member.member_epoch >= 0 {
                member.previous_member_epoch = member.member_epoch;
            }
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        } else {
            tracing::info!(group_id, member_id, "member leaves the consumer group");
            group.fence_member(&mut env, member_id);
        }
        Ok(ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(member_id)))
            .with_member_epoch(request.member_epoch))
    }

    fn consumer_group_join_or_heartbeat(
        &mut self,
        now_ms: u64,
        request: &ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
    ) -> Result<ConsumerGroupHeartbeatResponse, GroupError> {
        let group_id = request.group_id.0.as_str().to_owned();
        let joining = request.member_epoch == 0;
        self.ensure_consumer_group(&group_id, joining)?;
        let CoordinatorCore {
            groups,
            config,
            outbox,
            topics,
            ..
        } = self;
        let Some(Group::Consumer(group)) = groups.get_mut(&group_id) else {
            unreachable!("ensure_consumer_group made a consumer group")
        };
        let mut env = Env {
            now_ms,
            config,
            outbox,
            group_id: &group_id,
        };
        let member_id = if request.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            request.member_id.as_str().to_owned()
        };
        let owned = request
            .topic_partitions
            .as_ref()
            .map(|tps| owned_partitions(tps, topics));

        let (mut member, mut bump) = if joining {
            join_member(group, &mut env, &member_id, request)?
        } else {
            if let Some(instance_id) = &request.instance_id {
                // Kafka checks the instance first: a replaced incarnation is fenced.
                match group.static_members.get(instance_id.as_str()) {
                    Some(owner) if *owner != member_id => return Err(GroupError::FencedInstanceId),
                    Some(_) => {}
                    None => return Err(GroupError::UnknownMemberId),
                }
            }
            let member = group
                .members
                .get(&member_id)
                .cloned()
                .ok_or(GroupError::UnknownMemberId)?;
            check_member_epoch(&member, request.member_epoch, owned.as_ref())?;
            (member, false)
        };
        let old_assigned = member.assigned.clone();
        let old_subscription = member.subscribed_topics.clone();
        update_member_fields(&mut member, request, client);
        let subscription_changed = member.subscribed_topics != old_subscription;
        bump |= subscription_changed;
        if subscription_changed || joining {
            env.emit(MembershipEvent::MemberRegistered {
                group_id: group_id.clone(),
                member_id: member_id.clone(),
                subscription: member.subscribed_topics.clone(),
                timestamp_ms: now_ms,
            });
        }
        group.members.insert(member_id.clone(), member);

        let metadata = group.compute_subscription_metadata(topics);
        if metadata != group.subscription_metadata {
            group.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            group.group_epoch += 1;
        }
        if group.group_epoch > group.assignment_epoch {
            group.update_target_assignment(&env.config.consumer_assignors);
        }

        let mut member = group.members.remove(&member_id).expect("inserted above");
        let was_revoking = member.state == MemberState::UnrevokedPartitions;
        group.reconcile(&mut member, owned.as_ref());
        member.session_deadline_ms = now_ms + env.config.consumer_session_timeout_ms.max(0) as u64;
        if member.state == MemberState::UnrevokedPartitions {
            if !was_revoking {
                member.revocation_deadline_ms =
                    Some(now_ms + member.rebalance_timeout_ms.max(0) as u64);
            }
        } else {
            member.revocation_deadline_ms = None;
        }
        let ownership_changed = member.assigned != old_assigned
            || was_revoking != (member.state == MemberState::UnrevokedPartitions);
        group.set_member_ownership(&member);
        let full_request = joining
            || (request.rebalance_timeout_ms != -1
                && request.subscribed_topic_names.is_some()
                && request.topic_partitions.is_some());
        let assignment = (full_request || member.assigned != old_assigned)
            .then(|| wire_assignment(&member.assigned, &group.subscription_metadata, topics));
        let response = ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(&member_id)))
            .with_member_epoch(member.member_epoch)
            .with_heartbeat_interval_ms(env.config.consumer_heartbeat_interval_ms)
            .with_assignment(assignment);
        group.members.insert(member_id, member);
        if ownership_changed {
            group.emit_owners(&mut env);
        }
        Ok(response)
    }

    fn ensure_consumer_group(&mut self, group_id: &str, joining: bool) -> Result<(), GroupError> {
        match self.groups.get(group_id) {
            Some(Group::Consumer(_)) => Ok(()),
            Some(Group::Classic(classic)) if joining && classic.members.is_empty() => {
                // An empty classic group (say, one with only committed offsets) becomes a
                // consumer group; its offsets live apart from it and stay.
                self.groups.insert(
                    group_id.to_owned(),
                    Group::Consumer(ConsumerGroup::default()),
                );
                Ok(())
            }
            // An empty classic group loaded only for its offsets: a KIP-848 group whose members
            // this coordinator never saw (it moved here); they rejoin, as for a lost group.
            Some(Group::Classic(classic))
                if classic.members.is_empty() && classic.generation_id == 0 =>
            {
                Err(GroupError::UnknownMemberId)
            }
            Some(Group::Classic(_)) => Err(GroupError::GroupIdNotFound),
            None if joining => {
                self.groups.insert(
                    group_id.to_owned(),
                    Group::Consumer(ConsumerGroup::default()),
                );
                Ok(())
            }
            // The coordinator lost the group (a restart or a move): the member rejoins.
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// ConsumerGroupDescribe.
    pub fn consumer_group_describe(
        &self,
        request: &ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        let groups = request
            .group_ids
            .iter()
            .map(|id| {
                let described = consumer_group_describe_response::DescribedGroup::default()
                    .with_group_id(id.clone());
                match self.groups.get(id.0.as_str()) {
                    Some(Group::Consumer(group)) => {
                        describe_consumer_group(group, described, &self.topics)
                    }
                    _ => {
                        let error = GroupError::GroupIdNotFound;
                        described
                            .with_error_code(error.code())
                            .with_error_message(Some(str_bytes(&format!(
                                "group {} is not a consumer group",
                                id.0.as_str()
                            ))))
                            .with_group_state(str_bytes("Dead"))
                    }
                }
            })
            .collect();
        ConsumerGroupDescribeResponse::default().with_groups(groups)
    }
}

fn validate_heartbeat(
    request: &ConsumerGroupHeartbeatRequest,
    assignors: &[ServerAssignor],
) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_owned()));
    if request.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if request.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if request
                .topic_partitions
                .as_ref()
                .is_none_or(|tps| !tps.is_empty())
            {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if request
                .subscribed_topic_names
                .as_ref()
                .is_none_or(|t| t.is_empty())
            {
                return invalid("SubscribedTopicNames must be set in first request.");
            }
        }
        epoch
            if epoch > 0
                || epoch == LEAVE_GROUP_MEMBER_EPOCH
                || epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH =>
        {
            if request.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH && request.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(name) = &request.server_assignor {
        let known = name
            .as_str()
            .parse::<ServerAssignor>()
            .is_ok_and(|a| assignors.contains(&a));
        if !known {
            return Err(GroupError::UnsupportedAssignor(name.as_str().to_owned()));
        }
    }
    Ok(())
}

/// A member joining with epoch 0: new, the comeback of a static member, or a member that
/// lost its state (fenced) and starts over owning nothing. Returns the member and whether the
/// group epoch must grow.
fn join_member(
    group: &mut ConsumerGroup,
    env: &mut Env<'_>,
    member_id: &str,
    request: &ConsumerGroupHeartbeatRequest,
) -> Result<(ConsumerMember, bool), GroupError> {
    let max_size = env.config.consumer_max_size;
    if !group.has_member(member_id) && group.members.len() >= max_size {
        return Err(GroupError::GroupMaxSizeReached { max_size });
    }
    let instance_id = request.instance_id.as_ref().map(|s| s.as_str().to_owned());
    if let Some(instance_id) = &instance_id {
        if let Some(previous_id) = group.static_members.get(instance_id).cloned() {
            if previous_id != member_id {
                let previous = &group.members[&previous_id];
                if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    return Err(GroupError::UnreleasedInstanceId(instance_id.clone()));
                }
                // The instance comes back under a new member id and takes over its partitions.
                let mut member = group
                    .members
                    .remove(&previous_id)
                    .expect("static member exists");
                group
                    .target
                    .remove(&previous_id)
                    .map(|t| group.target.insert(member_id.to_owned(), t));
                member.member_id = member_id.to_owned();
                member.member_epoch = member.previous_member_epoch;
                group
                    .static_members
                    .insert(instance_id.clone(), member_id.to_owned());
                group.owners.retain(|_, owner| *owner != previous_id);
                env.emit(MembershipEvent::MemberRemoved {
                    group_id: env.group_id.to_owned(),
                    member_id: previous_id.clone(),
                });
                group.set_member_ownership(&member);
                return Ok((member, false));
            }
        }
    }
    if let Some(existing) = group.members.get(member_id) {
        // Epoch 0 from a known member: it lost its assignment (it must report none) and
        // starts over. Its partitions are free for whoever the target gives them to.
        let mut member = existing.clone();
        member.assigned.clear();
        member.pending_revocation.clear();
        member.state = MemberState::Stable;
        member.previous_member_epoch = member.member_epoch;
        member.member_epoch = 0;
        group.owners.retain(|_, owner| owner != member_id);
        return Ok((member, false));
    }
    if let Some(instance_id) = &instance_id {
        group
            .static_members
            .insert(instance_id.clone(), member_id.to_owned());
    }
    let member = ConsumerMember {
        member_id: member_id.to_owned(),
        instance_id,
        rack_id: None,
        client: ClientInfo::default(),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topics: BTreeSet::new(),
        server_assignor: None,
        state: MemberState::Stable,
        member_epoch: 0,
        previous_member_epoch: -1,
        assigned: TopicAssignment::new(),
        pending_revocation: TopicAssignment::new(),
        session_deadline_ms: env.now_ms,
        revocation_deadline_ms: None,
    };
    tracing::info!(
        group_id = env.group_id,
        member_id,
        "member joins the consumer group"
    );
    Ok((member, true))
}

/// Kafka's `throwIfMemberEpochIsInvalid`: an epoch ahead of ours is fenced; one behind is
/// accepted only if it is the previous epoch and the member owns no more than we gave it
/// (our last answer was lost).
fn check_member_epoch(
    member: &ConsumerMember,
    received: i32,
    owned: Option<&TopicAssignment>,
) -> Result<(), GroupError> {
    let fenced = Err(GroupError::FencedMemberEpoch {
        received,
        expected: member.member_epoch,
    });
    if received > member.member_epoch {
        return fenced;
    }
    if received < member.member_epoch {
        let subset = owned.is_none_or(|owned| is_subset(owned, &member.assigned));
        if received != member.previous_member_epoch || !subset {
            return fenced;
        }
    }
    Ok(())
}

fn update_member_fields(
    member: &mut ConsumerMember,
    request: &ConsumerGroupHeartbeatRequest,
    client: &ClientInfo,
) {
    if let Some(rack) = &request.rack_id {
        member.rack_id = Some(rack.as_str().to_owned());
    }
    if request.rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if let Some(names) = &request.subscribed_topic_names {
        member.subscribed_topics = names.iter().map(|n| n.0.as_str().to_owned()).collect();
    }
    if let Some(assignor) = &request.server_assignor {
        member.server_assignor = Some(assignor.as_str().to_owned());
    }
    member.client = client.clone();
}

fn owned_partitions(
    tps: &[kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions],
    topics: &BTreeMap<String, TopicMetadata>,
) -> TopicAssignment {
    let mut owned = TopicAssignment::new();
    for tp in tps {
        // Partitions of topics we no longer know are not owned by anyone here.
        if let Some(topic) = topics.values().find(|t| t.topic_id == tp.topic_id) {
            owned
                .entry(topic.name.as_str().to_owned())
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
    }
    owned
}

fn wire_assignment(
    assigned: &TopicAssignment,
    subscription_metadata: &BTreeMap<String, (Uuid, i32)>,
    topics: &BTreeMap<String, TopicMetadata>,
) -> Assignment {
    let topic_partitions = assigned
        .iter()
        .filter_map(|(name, partitions)| {
            let topic_id = subscription_metadata
                .get(name)
                .map(|(id, _)| *id)
                .or_else(|| topics.get(name).map(|t| t.topic_id))?;
            Some(
                TopicPartitions::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}

fn describe_consumer_group(
    group: &ConsumerGroup,
    described: consumer_group_describe_response::DescribedGroup,
    topics: &BTreeMap<String, TopicMetadata>,
) -> consumer_group_describe_response::DescribedGroup {
    let empty = TopicAssignment::new();
    let to_wire = |assignment: &TopicAssignment| {
        consumer_group_describe_response::Assignment::default().with_topic_partitions(
            assignment
                .iter()
                .map(|(name, partitions)| {
                    consumer_group_describe_response::TopicPartitions::default()
                        .with_topic_id(topics.get(name).map_or(Uuid::nil(), |t| t.topic_id))
                        .with_topic_name(kafka_protocol::messages::TopicName(str_bytes(name)))
                        .with_partitions(partitions.iter().copied().collect())
                })
                .collect(),
        )
    };
    let members = group
        .members
        .values()
        .map(|m| {
            consumer_group_describe_response::Member::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                .with_member_epoch(m.member_epoch)
                .with_client_id(str_bytes(&m.client.client_id))
                .with_client_host(str_bytes(&m.client.client_host))
                .with_subscribed_topic_names(
                    m.subscribed_topics
                        .iter()
                        .map(|t| kafka_protocol::messages::TopicName(str_bytes(t)))
                        .collect(),
                )
                .with_assignment(to_wire(&m.assigned))
                .with_target_assignment(to_wire(group.target.get(&m.member_id).unwrap_or(&empty)))
        })
        .collect();
    described
        .with_group_state(str_bytes(group.state_name()))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(str_bytes(group.assignor_name()))
        .with_members(members)
}

fn insert_nonempty(map: &mut TopicAssignment, topic: &str, partitions: BTreeSet<i32>) {
    if !partitions.is_empty() {
        map.insert(topic.to_owned(), partitions);
    }
}

fn intersects(a: &TopicAssignment, b: &TopicAssignment) -> bool {
    a.iter()
        .any(|(topic, ps)| b.get(topic).is_some_and(|other| !ps.is_disjoint(other)))
}

fn is_subset(a: &TopicAssignment, b: &TopicAssignment) -> bool {
    a.iter()
        .all(|(topic, ps)| ps.is_empty() || b.get(topic).is_some_and(|other| ps.is_subset(other)))
}

/// How a group is written to and read back from `__consumer_offsets`
/// ([`crate::consumer_records`]): topic names become ids through the group's subscription
/// metadata (or the cluster's topics), and back.
impl ConsumerGroup {
    pub(crate) fn to_records_state(
        &self,
        topics: &BTreeMap<String, TopicMetadata>,
    ) -> crate::consumer_records::ConsumerGroupState {
        use crate::consumer_records as cr;
        let id_of = |name: &str| {
            self.subscription_metadata
                .get(name)
                .map(|(id, _)| *id)
                .or_else(|| topics.get(name).map(|t| t.topic_id))
        };
        let by_id = |assignment: &TopicAssignment| -> cr::IdAssignment {
            assignment
                .iter()
                .filter_map(|(name, partitions)| {
                    Some((id_of(name)?, partitions.iter().copied().collect()))
                })
                .collect()
        };
        cr::ConsumerGroupState {
            epoch: self.group_epoch,
            topics: self
                .subscription_metadata
                .iter()
                .map(|(name, (id, partitions))| cr::TopicMeta {
                    id: *id,
                    name: name.clone(),
                    partitions: *partitions,
                })
                .collect(),
            members: self
                .members
                .values()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        cr::MemberMeta {
                            instance_id: m.instance_id.clone(),
                            rack_id: m.rack_id.clone(),
                            client_id: m.client.client_id.clone(),
                            client_host: m.client.client_host.clone(),
                            subscribed_topics: m.subscribed_topics.iter().cloned().collect(),
                            subscribed_regex: None,
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            server_assignor: m.server_assignor.clone(),
                        },
                    )
                })
                .collect(),
            assignment_epoch: self.assignment_epoch,
            target: self
                .target
                .iter()
                .map(|(member, assignment)| (member.clone(), by_id(assignment)))
                .collect(),
            current: self
                .members
                .values()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        cr::CurrentAssignment {
                            member_epoch: m.member_epoch,
                            previous_member_epoch: m.previous_member_epoch,
                            state: match m.state {
                                MemberState::Stable => cr::MEMBER_STATE_STABLE,
                                MemberState::UnrevokedPartitions => {
                                    cr::MEMBER_STATE_UNREVOKED_PARTITIONS
                                }
                                MemberState::UnreleasedPartitions => {
                                    cr::MEMBER_STATE_UNRELEASED_PARTITIONS
                                }
                            },
                            assigned: by_id(&m.assigned),
                            pending_revocation: by_id(&m.pending_revocation),
                        },
                    )
                })
                .collect(),
        }
    }

    /// The group a replayed set of records describes. Every member's session (and a pending
    /// revocation's deadline) restarts at `now_ms`, as Kafka's coordinator does on load.
    pub(crate) fn from_records_state(
        state: crate::consumer_records::ConsumerGroupState,
        topics: &BTreeMap<String, TopicMetadata>,
        now_ms: u64,
        session_timeout_ms: i32,
        assignors: &[ServerAssignor],
    ) -> ConsumerGroup {
        use crate::consumer_records as cr;
        let mut group = ConsumerGroup {
            group_epoch: state.epoch,
            assignment_epoch: state.assignment_epoch,
            subscription_metadata: state
                .topics
                .iter()
                .map(|t| (t.name.clone(), (t.id, t.partitions)))
                .collect(),
            ..ConsumerGroup::default()
        };
        let name_of = |id: &Uuid| {
            state
                .topics
                .iter()
                .find(|t| t.id == *id)
                .map(|t| t.name.clone())
                .or_else(|| {
                    topics
                        .values()
                        .find(|t| t.topic_id == *id)
                        .map(|t| t.name.as_str().to_owned())
                })
        };
        let by_name = |assignment: &cr::IdAssignment| -> TopicAssignment {
            let mut out = TopicAssignment::new();
            for (id, partitions) in assignment {
                if let Some(name) = name_of(id) {
                    insert_nonempty(&mut out, &name, partitions.iter().copied().collect());
                }
            }
            out
        };
        group.target = state
            .target
            .iter()
            .map(|(member, assignment)| (member.clone(), by_name(assignment)))
            .collect();
        for (member_id, meta) in state.members {
            let current = state.current.get(&member_id);
            let assigned = current.map(|c| by_name(&c.assigned)).unwrap_or_default();
            let pending_revocation = current
                .map(|c| by_name(&c.pending_revocation))
                .unwrap_or_default();
            let member = ConsumerMember {
                member_id: member_id.clone(),
                instance_id: meta.instance_id,
                rack_id: meta.rack_id,
                client: ClientInfo {
                    client_id: meta.client_id,
                    client_host: meta.client_host,
                },
                rebalance_timeout_ms: meta.rebalance_timeout_ms,
                subscribed_topics: meta.subscribed_topics.into_iter().collect(),
                server_assignor: meta.server_assignor,
                state: match current.map(|c| c.state) {
                    Some(cr::MEMBER_STATE_UNREVOKED_PARTITIONS) => MemberState::UnrevokedPartitions,
                    Some(cr::MEMBER_STATE_UNRELEASED_PARTITIONS) => {
                        MemberState::UnreleasedPartitions
                    }
                    _ => MemberState::Stable,
                },
                member_epoch: current.map_or(0, |c| c.member_epoch),
                previous_member_epoch: current.map_or(-1, |c| c.previous_member_epoch),
                revocation_deadline_ms: (!pending_revocation.is_empty())
                    .then(|| now_ms + meta.rebalance_timeout_ms.max(0) as u64),
                assigned,
                pending_revocation,
                session_deadline_ms: now_ms + session_timeout_ms.max(0) as u64,
            };
            if let Some(instance_id) = &member.instance_id {
                group
                    .static_members
                    .insert(instance_id.clone(), member_id.clone());
            }
            group.set_member_ownership(&member);
            group.members.insert(member_id, member);
        }
        group.assignor = Some(group.choose_assignor(assignors));
        group
    }
}
