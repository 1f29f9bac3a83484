//! What the console pages and `/metrics` show that takes more than one Kafka request:
//! offsets from the partitions' leaders, consumer groups with their lag. Built only from
//! Kafka responses ([`super::kafka::Cluster::call`]), the way `gregor consumer-groups
//! --describe` builds them, so both show the same numbers.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId as WireBrokerId, DescribeGroupsRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, OffsetFetchRequest, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::kafka::{CallError, Caller, Cluster};
use crate::metadata_cache::Snapshot;

/// ListOffsets' "latest" timestamp (the high watermark for a consumer).
pub(crate) const LATEST: i64 = -1;
/// ListOffsets' "earliest" timestamp (the log start offset).
pub(crate) const EARLIEST: i64 = -2;

/// A (topic, partition) pair by name.
pub(crate) type Tp = (String, i32);

/// The offset at `timestamp` ([`LATEST`], [`EARLIEST`]) of each of `partitions`, asked of
/// each one's leader (one ListOffsets per leader). Partitions without a leader, or whose
/// leader answered an error, are left out.
pub(crate) async fn offsets(
    cluster: &Cluster,
    caller: &Caller,
    snapshot: &Snapshot,
    partitions: impl IntoIterator<Item = Tp>,
    timestamp: i64,
) -> BTreeMap<Tp, i64> {
    let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    for (topic, partition) in partitions {
        let leader = snapshot
            .topics
            .get(&topic)
            .and_then(|t| t.partitions.get(&partition))
            .map_or(-1, |p| p.leader);
        if leader >= 0 {
            by_leader
                .entry(leader)
                .or_default()
                .entry(topic)
                .or_default()
                .push(partition);
        }
    }
    let mut offsets = BTreeMap::new();
    for (leader, topics) in by_leader {
        let request = ListOffsetsRequest::default()
            .with_replica_id(WireBrokerId(-1))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(WireTopicName(StrBytes::from_string(topic)))
                            .with_partitions(
                                partitions
                                    .into_iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let Ok(response) = cluster.call(caller, leader, request).await else {
            continue;
        };
        for topic in response.topics {
            for p in topic.partitions {
                if p.error_code == 0 && p.offset >= 0 {
                    offsets.insert((topic.name.0.to_string(), p.partition_index), p.offset);
                }
            }
        }
    }
    offsets
}

/// A consumer group as ListGroups lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

/// The groups every live broker coordinates (each lists the groups of the offsets partitions
/// it leads, see `groups.rs`), as kafka-consumer-groups' `--list` gathers them.
pub(crate) async fn list_groups(
    cluster: &Cluster,
    caller: &Caller,
) -> Result<Vec<GroupListing>, Error> {
    let mut groups: Vec<GroupListing> = Vec::new();
    for broker in cluster.live_brokers() {
        let response = cluster
            .call(caller, broker, ListGroupsRequest::default())
            .await?;
        if response.error_code != 0 {
            return Err(Error::Kafka(response.error_code, None));
        }
        groups.extend(response.groups.into_iter().map(|g| GroupListing {
            group_id: g.group_id.0.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: g.group_state.to_string(),
        }));
    }
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    Ok(groups)
}

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    /// Assigned partitions, sorted.
    pub assigned: Vec<Tp>,
}

/// One partition of a group: committed offset, log end, lag and owner (kafka-consumer-groups'
/// `--describe` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupPartition {
    pub committed: Option<i64>,
    pub log_end: Option<i64>,
    /// The member it is assigned to (member id), if any.
    pub owner: Option<String>,
}

impl GroupPartition {
    /// Log end minus committed offset (never negative), when both are known.
    pub(crate) fn lag(&self) -> Option<i64> {
        match (self.committed, self.log_end) {
            (Some(committed), Some(end)) => Some((end - committed).max(0)),
            _ => None,
        }
    }
}

/// A group described: DescribeGroups, OffsetFetch, and the leaders' log ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<Member>,
    pub partitions: BTreeMap<Tp, GroupPartition>,
}

impl GroupDescription {
    /// Total lag per topic.
    pub(crate) fn lag_per_topic(&self) -> BTreeMap<&str, i64> {
        let mut lag = BTreeMap::new();
        for ((topic, _), p) in &self.partitions {
            if let Some(l) = p.lag() {
                *lag.entry(topic.as_str()).or_default() += l;
            }
        }
        lag
    }
}

/// Why a view could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// No answer.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A Kafka error code (and message) in the answer.
    #[error("{}", .1.clone().unwrap_or_else(|| client::error_message(*.0).to_owned()))]
    Kafka(i16, Option<String>),
}

/// Describes `group` as `gregor consumer-groups --describe` does.
pub(crate) async fn describe_group(
    cluster: &Cluster,
    caller: &Caller,
    snapshot: &Snapshot,
    group: &str,
) -> Result<GroupDescription, Error> {
    let group_id = GroupId(StrBytes::from_string(group.to_owned()));
    let described = cluster
        .call_coordinator(
            caller,
            group,
            DescribeGroupsRequest::default().with_groups(vec![group_id.clone()]),
        )
        .await?;
    let info = described
        .groups
        .into_iter()
        .next()
        .ok_or(Error::Kafka(69, None))?;
    if info.error_code != 0 {
        return Err(Error::Kafka(info.error_code, None));
    }
    let fetched = cluster
        .call_coordinator(
            caller,
            group,
            OffsetFetchRequest::default()
                .with_group_id(group_id)
                .with_topics(None),
        )
        .await?;
    if fetched.error_code != 0 {
        return Err(Error::Kafka(fetched.error_code, None));
    }
    let mut partitions: BTreeMap<Tp, GroupPartition> = BTreeMap::new();
    for topic in &fetched.topics {
        for p in &topic.partitions {
            if p.error_code == 0 && p.committed_offset >= 0 {
                partitions.insert(
                    (topic.name.0.to_string(), p.partition_index),
                    GroupPartition {
                        committed: Some(p.committed_offset),
                        log_end: None,
                        owner: None,
                    },
                );
            }
        }
    }
    let members: Vec<Member> = info
        .members
        .iter()
        .map(|m| {
            let mut assigned: Vec<Tp> =
                group_coordinator::consumer_protocol::assigned_partitions(&m.member_assignment)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                    .collect();
            assigned.sort();
            Member {
                member_id: m.member_id.to_string(),
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
                assigned,
            }
        })
        .collect();
    for member in &members {
        for tp in &member.assigned {
            partitions
                .entry(tp.clone())
                .or_insert(GroupPartition {
                    committed: None,
                    log_end: None,
                    owner: None,
                })
                .owner = Some(member.member_id.clone());
        }
    }
    let all: BTreeSet<Tp> = partitions.keys().cloned().collect();
    let log_end = offsets(cluster, caller, snapshot, all, LATEST).await;
    for (tp, p) in partitions.iter_mut() {
        p.log_end = log_end.get(tp).copied();
    }
    Ok(GroupDescription {
        group_id: group.to_owned(),
        state: info.group_state.to_string(),
        protocol_type: info.protocol_type.to_string(),
        protocol: info.protocol_data.to_string(),
        members,
        partitions,
    })
}
