//! OffsetCommit, OffsetFetch and OffsetDelete on the core.
//!
//! Writes go in two steps so that the core stays free of I/O: `prepare_*` validates and
//! returns a plan naming what to write, the caller performs it with its
//! [`crate::OffsetStore`] (one transaction), and `complete_*` applies the outcome to the cache
//! and builds the response. The cache never holds an offset the store refused.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName as WireTopicName,
};
use model::{TopicName, TopicPartition};

use crate::classic::{str_bytes, ClassicGroup, ClassicGroupState};
use crate::core::{CoordinatorCore, Group};
use crate::error::{code_of, GroupError};
use crate::offsets::{OffsetAndMetadata, OffsetStoreError};

/// (topic, partition, outcome); `None` = waiting for the store.
type PartitionOutcome = (String, i32, Option<Result<(), GroupError>>);

/// A validated OffsetCommit: what to write, and the per-partition outcome so far.
#[derive(Debug)]
pub struct OffsetCommitPlan {
    /// The group.
    pub group_id: String,
    /// The offsets to write in one store transaction (empty: nothing to write).
    pub to_store: Vec<(TopicPartition, OffsetAndMetadata)>,
    /// In request order.
    results: Vec<PartitionOutcome>,
}

/// A validated OffsetDelete.
#[derive(Debug)]
pub struct OffsetDeletePlan {
    /// The group.
    pub group_id: String,
    /// The offsets to delete in one store transaction (empty: nothing to delete).
    pub to_delete: Vec<TopicPartition>,
    group_error: Result<(), GroupError>,
    results: Vec<PartitionOutcome>,
}

impl CoordinatorCore {
    /// Validates an OffsetCommit (Kafka's `handleCommitOffsets`): generation and member checks
    /// for groups with members, simple commits (generation -1) for groups without.
    pub fn prepare_offset_commit(
        &mut self,
        now_ms: u64,
        version: i16,
        request: &OffsetCommitRequest,
    ) -> OffsetCommitPlan {
        let group_id = request.group_id.0.as_str().to_owned();
        let group_check = self.check_commit(now_ms, version, request);
        let mut to_store = Vec::new();
        let mut results = Vec::new();
        for topic in &request.topics {
            let name = topic.name.0.as_str();
            for partition in &topic.partitions {
                let index = partition.partition_index;
                let outcome = group_check.clone().and_then(|()| {
                    let tp = self.known_partition(name, index)?;
                    let metadata = partition
                        .committed_metadata
                        .as_ref()
                        .map_or(String::new(), |m| m.as_str().to_owned());
                    let max = self.config.offset_metadata_max_bytes;
                    if metadata.len() > max {
                        return Err(GroupError::OffsetMetadataTooLarge {
                            length: metadata.len(),
                            max,
                        });
                    }
                    let offset = OffsetAndMetadata {
                        offset: partition.committed_offset,
                        leader_epoch: partition.committed_leader_epoch,
                        metadata,
                        // OffsetCommit v1 may name the commit time; v2-v4 may ask for a
                        // retention of their own (Kafka 2.1+'s KafkaApis: expire = now +
                        // retention_time_ms, the old expiration rule for that offset).
                        commit_timestamp_ms: if version == 1 && partition.commit_timestamp != -1 {
                            partition.commit_timestamp
                        } else {
                            now_ms as i64
                        },
                        expire_timestamp_ms: (request.retention_time_ms != -1
                            && (2..=4).contains(&version))
                        .then(|| (now_ms as i64).saturating_add(request.retention_time_ms)),
                    };
                    to_store.push((tp, offset));
                    Ok(())
                });
                // Partitions headed for the store wait for its answer.
                let outcome = match outcome {
                    Ok(()) => None,
                    Err(err) => Some(Err(err)),
                };
                results.push((name.to_owned(), index, outcome));
            }
        }
        OffsetCommitPlan {
            group_id,
            to_store,
            results,
        }
    }

    /// Applies the store's answer to a prepared commit and builds the response.
    pub fn complete_offset_commit(
        &mut self,
        plan: OffsetCommitPlan,
        stored: Result<(), OffsetStoreError>,
    ) -> OffsetCommitResponse {
        let store_outcome = stored.map_err(|e| GroupError::Store(e.0));
        if store_outcome.is_ok() && !plan.to_store.is_empty() {
            let offsets = self.offsets.entry(plan.group_id.clone()).or_default();
            for (tp, offset) in plan.to_store {
                offsets.insert(tp, offset);
            }
        }
        let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
        for (topic, partition, outcome) in plan.results {
            let outcome = outcome.unwrap_or_else(|| store_outcome.clone());
            let response_partition = OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code_of(&outcome));
            match topics.last_mut() {
                Some(last) if last.name.0.as_str() == topic => {
                    last.partitions.push(response_partition)
                }
                _ => topics.push(
                    OffsetCommitResponseTopic::default()
                        .with_name(WireTopicName(str_bytes(&topic)))
                        .with_partitions(vec![response_partition]),
                ),
            }
        }
        OffsetCommitResponse::default().with_topics(topics)
    }

    /// TxnOffsetCommit's group checks (Kafka's `doTxnCommitOffsets`, KIP-447): an unknown
    /// group is created for its offsets; a member id, when given, must be a member; a
    /// generation, when given (>= 0), must be the group's. Kafka's error code otherwise.
    pub fn check_txn_offset_commit(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), i16> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId.code());
        }
        let Some(group) = self.groups.get(group_id) else {
            self.groups
                .insert(group_id.to_owned(), Group::Classic(ClassicGroup::new()));
            return Ok(());
        };
        let err = match group {
            Group::Classic(group) => {
                if group.state == ClassicGroupState::Dead {
                    Some(GroupError::CoordinatorNotAvailable)
                } else if group.is_static_member_fenced(member_id, instance_id) {
                    Some(GroupError::FencedInstanceId)
                } else if !member_id.is_empty() && !group.has(member_id) {
                    Some(GroupError::UnknownMemberId)
                } else if generation >= 0 && generation != group.generation_id {
                    Some(GroupError::IllegalGeneration)
                } else {
                    None
                }
            }
            Group::Consumer(group) => match group.member_epoch(member_id) {
                None if !member_id.is_empty() => Some(GroupError::UnknownMemberId),
                Some(epoch) if generation >= 0 && generation != epoch => {
                    Some(GroupError::IllegalGeneration)
                }
                _ => None,
            },
        };
        err.map_or(Ok(()), |e| Err(e.code()))
    }

    /// Makes committed transactional offsets visible (the COMMIT marker reached the group's
    /// partition), over what the group had.
    pub fn apply_txn_offsets(
        &mut self,
        group_id: &str,
        offsets: impl IntoIterator<Item = (TopicPartition, OffsetAndMetadata)>,
    ) {
        self.groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::Classic(ClassicGroup::new()));
        self.offsets
            .entry(group_id.to_owned())
            .or_default()
            .extend(offsets);
    }

    fn check_commit(
        &mut self,
        now_ms: u64,
        version: i16,
        request: &OffsetCommitRequest,
    ) -> Result<(), GroupError> {
        let group_id = request.group_id.0.as_str();
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let generation = request.generation_id_or_member_epoch;
        let member_id = request.member_id.as_str();
        let instance_id = request.group_instance_id.as_ref().map(|s| s.as_str());
        match self.groups.get_mut(group_id) {
            None if generation < 0 => {
                // A consumer that does not use group management: the group exists for its offsets.
                self.groups
                    .insert(group_id.to_owned(), Group::Classic(ClassicGroup::new()));
                Ok(())
            }
            None => Err(GroupError::IllegalGeneration),
            Some(Group::Classic(group)) => {
                if group.state == ClassicGroupState::Dead {
                    return Err(GroupError::CoordinatorNotAvailable);
                }
                if group.is_static_member_fenced(member_id, instance_id) {
                    return Err(GroupError::FencedInstanceId);
                }
                if generation < 0 && group.state == ClassicGroupState::Empty {
                    return Ok(());
                }
                if !group.has(member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                if generation != group.generation_id {
                    return Err(GroupError::IllegalGeneration);
                }
                match group.state {
                    ClassicGroupState::Stable | ClassicGroupState::PreparingRebalance => {
                        // A commit proves the member is alive, like a heartbeat.
                        let member = group.members.get_mut(member_id).expect("checked above");
                        member.heartbeat_deadline_ms =
                            Some(now_ms + member.session_timeout_ms.max(0) as u64);
                        Ok(())
                    }
                    _ => Err(GroupError::RebalanceInProgress),
                }
            }
            Some(Group::Consumer(group)) => {
                if generation < 0 && group.is_empty() {
                    return Ok(());
                }
                let Some(epoch) = group.member_epoch(member_id) else {
                    return Err(GroupError::UnknownMemberId);
                };
                if generation != epoch {
                    return Err(if version >= 9 {
                        GroupError::StaleMemberEpoch {
                            received: generation,
                            expected: epoch,
                        }
                    } else {
                        GroupError::IllegalGeneration
                    });
                }
                Ok(())
            }
        }
    }

    /// The partition, if the topic metadata knows it (and unchecked if the broker never gave
    /// the coordinator any topic metadata).
    fn known_partition(&self, topic: &str, partition: i32) -> Result<TopicPartition, GroupError> {
        let name: TopicName = topic
            .parse()
            .map_err(|_| GroupError::UnknownTopicOrPartition)?;
        if self.topics_known() {
            let exists = self
                .topics
                .get(topic)
                .is_some_and(|t| (0..t.partitions).contains(&partition));
            if !exists {
                return Err(GroupError::UnknownTopicOrPartition);
            }
        } else if partition < 0 {
            return Err(GroupError::UnknownTopicOrPartition);
        }
        Ok(TopicPartition::new(name, partition))
    }

    fn topics_known(&self) -> bool {
        !self.topics.is_empty()
    }

    /// OffsetFetch: v0-7 ask for one group, v8+ for several. Partitions without a committed
    /// offset answer offset -1; a null topic list (v2+) means every committed partition.
    pub fn fetch_offsets(&self, version: i16, request: &OffsetFetchRequest) -> OffsetFetchResponse {
        if version >= 8 {
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    let wanted: Option<Vec<(String, Vec<i32>)>> = g.topics.as_ref().map(|ts| {
                        ts.iter()
                            .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                            .collect()
                    });
                    let member = g.member_id.as_ref().map(|m| (m.as_str(), g.member_epoch));
                    let (error, topics) = self.fetch_group(g.group_id.0.as_str(), wanted, member);
                    let topics = topics
                        .into_iter()
                        .map(|(name, partitions)| {
                            OffsetFetchResponseTopics::default()
                                .with_name(WireTopicName(str_bytes(&name)))
                                .with_partitions(
                                    partitions
                                        .into_iter()
                                        .map(|(p, o)| {
                                            OffsetFetchResponsePartitions::default()
                                                .with_partition_index(p)
                                                .with_committed_offset(o.offset)
                                                .with_committed_leader_epoch(o.leader_epoch)
                                                .with_metadata(Some(str_bytes(&o.metadata)))
                                        })
                                        .collect(),
                                )
                        })
                        .collect();
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code_of(&error))
                        .with_topics(topics)
                })
                .collect();
            return OffsetFetchResponse::default().with_groups(groups);
        }
        let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes.clone()))
                .collect()
        });
        let (error, topics) = self.fetch_group(request.group_id.0.as_str(), wanted, None);
        let topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(WireTopicName(str_bytes(&name)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, o)| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(o.offset)
                                    .with_committed_leader_epoch(o.leader_epoch)
                                    .with_metadata(Some(str_bytes(&o.metadata)))
                                    // v0 and v1 have no top-level error: it goes on each partition.
                                    .with_error_code(if version < 2 { code_of(&error) } else { 0 })
                            })
                            .collect(),
                    )
            })
            .collect();
        OffsetFetchResponse::default()
            .with_error_code(code_of(&error))
            .with_topics(topics)
    }

    #[allow(clippy::type_complexity)]
    fn fetch_group(
        &self,
        group_id: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(&str, i32)>,
    ) -> (
        Result<(), GroupError>,
        Vec<(String, Vec<(i32, OffsetAndMetadata)>)>,
    ) {
        if group_id.is_empty() {
            return (Err(GroupError::InvalidGroupId), Vec::new());
        }
        if let (Some((member_id, epoch)), Some(Group::Consumer(group))) =
            (member, self.groups.get(group_id))
        {
            match group.member_epoch(member_id) {
                None => return (Err(GroupError::UnknownMemberId), Vec::new()),
                Some(current) if current != epoch => {
                    return (
                        Err(GroupError::StaleMemberEpoch {
                            received: epoch,
                            expected: current,
                        }),
                        Vec::new(),
                    )
                }
                Some(_) => {}
            }
        }
        let committed = self.offsets.get(group_id);
        let none = OffsetAndMetadata {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: -1,
            expire_timestamp_ms: None,
        };
        let topics = match wanted {
            Some(wanted) => wanted
                .into_iter()
                .map(|(topic, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|p| {
                            let found = topic.parse::<TopicName>().ok().and_then(|name| {
                                committed?.get(&TopicPartition::new(name, p)).cloned()
                            });
                            (p, found.unwrap_or_else(|| none.clone()))
                        })
                        .collect();
                    (topic, partitions)
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<(i32, OffsetAndMetadata)>> = BTreeMap::new();
                for (tp, offset) in committed.into_iter().flatten() {
                    by_topic
                        .entry(tp.topic.as_str().to_owned())
                        .or_default()
                        .push((tp.partition, offset.clone()));
                }
                by_topic.into_iter().collect()
            }
        };
        (Ok(()), topics)
    }

    /// Validates an OffsetDelete (Kafka's `handleDeleteOffsets`): an empty group may drop any
    /// offsets; a group with members only those of topics it is not subscribed to.
    pub fn prepare_offset_delete(&mut self, request: &OffsetDeleteRequest) -> OffsetDeletePlan {
        let group_id = request.group_id.0.as_str().to_owned();
        let group_error = self.check_offset_delete(&group_id);
        let subscribed = self.subscribed_topics_of(&group_id);
        let has_members = self.group_has_members(&group_id);
        let mut to_delete = Vec::new();
        let mut results = Vec::new();
        if group_error.is_ok() {
            for topic in request.topics.iter() {
                let name = topic.name.0.as_str();
                for partition in topic.partitions.iter() {
                    let index = partition.partition_index;
                    let outcome = match self.known_partition(name, index) {
                        Err(err) => Some(Err(err)),
                        Ok(_)
                            if has_members
                                && subscribed.as_ref().is_none_or(|s| s.contains(name)) =>
                        {
                            Some(Err(GroupError::GroupSubscribedToTopic))
                        }
                        Ok(tp) => {
                            to_delete.push(tp);
                            None
                        }
                    };
                    results.push((name.to_owned(), index, outcome));
                }
            }
        }
        OffsetDeletePlan {
            group_id,
            to_delete,
            group_error,
            results,
        }
    }

    fn check_offset_delete(&self, group_id: &str) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        match self.groups.get(group_id) {
            None => Err(GroupError::GroupIdNotFound),
            Some(Group::Classic(group)) if group.state == ClassicGroupState::Dead => {
                Err(GroupError::GroupIdNotFound)
            }
            Some(Group::Classic(group))
                if group.state != ClassicGroupState::Empty
                    && group.protocol_type.as_deref()
                        != Some(crate::consumer_protocol::CONSUMER_PROTOCOL_TYPE) =>
            {
                Err(GroupError::NonEmptyGroup)
            }
            Some(_) => Ok(()),
        }
    }

    fn group_has_members(&self, group_id: &str) -> bool {
        match self.groups.get(group_id) {
            Some(Group::Classic(group)) => !group.members.is_empty(),
            Some(Group::Consumer(group)) => !group.is_empty(),
            None => false,
        }
    }

    /// Applies the store's answer to a prepared OffsetDelete and builds the response.
    pub fn complete_offset_delete(
        &mut self,
        plan: OffsetDeletePlan,
        deleted: Result<(), OffsetStoreError>,
    ) -> OffsetDeleteResponse {
        let store_outcome = deleted.map_err(|e| GroupError::Store(e.0));
        if store_outcome.is_ok() {
            if let Some(offsets) = self.offsets.get_mut(&plan.group_id) {
                for tp in &plan.to_delete {
                    offsets.remove(tp);
                }
                if offsets.is_empty() {
                    self.offsets.remove(&plan.group_id);
                }
            }
            self.remove_group_if_forgotten(&plan.group_id);
        }
        let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
        for (topic, partition, outcome) in plan.results {
            let outcome = outcome.unwrap_or_else(|| store_outcome.clone());
            let entry = OffsetDeleteResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code_of(&outcome));
            match topics.last_mut() {
                Some(last) if last.name.0.as_str() == topic => last.partitions.push(entry),
                _ => topics.push(
                    OffsetDeleteResponseTopic::default()
                        .with_name(WireTopicName(str_bytes(&topic)))
                        .with_partitions(vec![entry]),
                ),
            }
        }
        OffsetDeleteResponse::default()
            .with_error_code(code_of(&plan.group_error))
            .with_topics(topics)
    }

    /// Kafka drops an empty group once it has no offsets left.
    pub(crate) fn remove_group_if_forgotten(&mut self, group_id: &str) {
        let forgotten = match self.groups.get(group_id) {
            Some(Group::Classic(group)) => {
                group.state == ClassicGroupState::Empty && !self.offsets.contains_key(group_id)
            }
            _ => false,
        };
        if forgotten {
            self.groups.remove(group_id);
        }
    }
}
