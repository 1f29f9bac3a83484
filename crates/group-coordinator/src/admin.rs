//! DescribeGroups, ListGroups and DeleteGroups on the core.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};

use crate::classic::{str_bytes, ClassicGroup, ClassicGroupState};
use crate::consumer::ConsumerGroup;
use crate::consumer_protocol::{self, CONSUMER_PROTOCOL_TYPE};
use crate::core::{CoordinatorCore, Group};
use crate::error::{code_of, GroupError};
use crate::membership::MembershipEvent;
use crate::offsets::OffsetStoreError;
use crate::Output;

/// A validated DeleteGroups: the groups whose offsets the caller deletes from the store.
#[derive(Debug)]
pub struct DeleteGroupsPlan {
    /// Groups to delete from the store, one `delete_group` call each.
    pub eligible: Vec<String>,
    results: Vec<(String, Option<Result<(), GroupError>>)>,
}

impl CoordinatorCore {
    /// DescribeGroups. An unknown group is described as `Dead` with no error, as Kafka 2.8 does.
    pub fn describe_groups(&self, request: &DescribeGroupsRequest) -> DescribeGroupsResponse {
        let groups = request
            .groups
            .iter()
            .map(|id| {
                let described = DescribedGroup::default().with_group_id(id.clone());
                if id.0.is_empty() {
                    return described.with_error_code(GroupError::InvalidGroupId.code());
                }
                match self.groups.get(id.0.as_str()) {
                    None => described.with_group_state(str_bytes("Dead")),
                    Some(Group::Classic(group)) => describe_classic(group, described),
                    Some(Group::Consumer(group)) => describe_consumer(group, described),
                }
            })
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    /// ListGroups, with the v4 state filter and the v5 type filter (`classic`, `consumer`).
    pub fn list_groups(&self, request: &ListGroupsRequest) -> ListGroupsResponse {
        let groups = self
            .groups
            .iter()
            .filter_map(|(id, group)| {
                let (protocol_type, state, group_type) = match group {
                    Group::Classic(g) => (
                        g.protocol_type.clone().unwrap_or_default(),
                        g.state.name(),
                        "classic",
                    ),
                    Group::Consumer(g) => (
                        CONSUMER_PROTOCOL_TYPE.to_owned(),
                        g.state_name(),
                        "consumer",
                    ),
                };
                let state_ok = request.states_filter.is_empty()
                    || request
                        .states_filter
                        .iter()
                        .any(|s| s.as_str().eq_ignore_ascii_case(state));
                let type_ok = request.types_filter.is_empty()
                    || request
                        .types_filter
                        .iter()
                        .any(|t| t.as_str().eq_ignore_ascii_case(group_type));
                (state_ok && type_ok).then(|| {
                    ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(id)))
                        .with_protocol_type(str_bytes(&protocol_type))
                        .with_group_state(str_bytes(state))
                        .with_group_type(str_bytes(group_type))
                })
            })
            .collect();
        ListGroupsResponse::default().with_groups(groups)
    }

    /// Validates a DeleteGroups (Kafka's `handleDeleteGroups`): only empty groups go. They
    /// leave the coordinator at once; their offsets go once the caller has deleted them from
    /// the store.
    pub fn prepare_delete_groups(&mut self, request: &DeleteGroupsRequest) -> DeleteGroupsPlan {
        let mut eligible = Vec::new();
        let mut results = Vec::new();
        for id in &request.groups_names {
            let group_id = id.0.as_str().to_owned();
            let outcome = if group_id.is_empty() {
                Some(Err(GroupError::InvalidGroupId))
            } else {
                match self.groups.get(&group_id) {
                    None => Some(Err(GroupError::GroupIdNotFound)),
                    Some(Group::Classic(g)) if g.state == ClassicGroupState::Dead => {
                        Some(Err(GroupError::GroupIdNotFound))
                    }
                    Some(Group::Classic(g)) if g.state != ClassicGroupState::Empty => {
                        Some(Err(GroupError::NonEmptyGroup))
                    }
                    Some(Group::Consumer(g)) if !g.is_empty() => {
                        Some(Err(GroupError::NonEmptyGroup))
                    }
                    Some(_) => {
                        self.groups.remove(&group_id);
                        if !eligible.contains(&group_id) {
                            eligible.push(group_id.clone());
                        }
                        None
                    }
                }
            };
            results.push((group_id, outcome));
        }
        DeleteGroupsPlan { eligible, results }
    }

    /// Applies the store's answers (`group -> result` for every eligible group).
    pub fn complete_delete_groups(
        &mut self,
        plan: DeleteGroupsPlan,
        deleted: &[(String, Result<(), OffsetStoreError>)],
    ) -> DeleteGroupsResponse {
        for (group_id, result) in deleted {
            match result {
                Ok(()) => {
                    self.offsets.remove(group_id);
                    self.outbox
                        .push(Output::Membership(MembershipEvent::GroupDeleted {
                            group_id: group_id.clone(),
                        }));
                }
                Err(_) => {
                    // The offsets are still stored: the group stays visible, empty, so that a
                    // retry can delete it.
                    if self.offsets.contains_key(group_id) && !self.groups.contains_key(group_id) {
                        self.groups
                            .insert(group_id.clone(), Group::Classic(ClassicGroup::new()));
                    }
                }
            }
        }
        let results = plan
            .results
            .into_iter()
            .map(|(group_id, outcome)| {
                let outcome = outcome.unwrap_or_else(|| {
                    match deleted.iter().find(|(g, _)| *g == group_id).map(|(_, r)| r) {
                        Some(Err(e)) => Err(GroupError::Store(e.0.clone())),
                        _ => Ok(()),
                    }
                });
                DeletableGroupResult::default()
                    .with_group_id(GroupId(str_bytes(&group_id)))
                    .with_error_code(code_of(&outcome))
            })
            .collect();
        DeleteGroupsResponse::default().with_results(results)
    }
}

fn describe_classic(group: &ClassicGroup, described: DescribedGroup) -> DescribedGroup {
    let stable = group.state == ClassicGroupState::Stable;
    let protocol = if stable {
        group.protocol_name.clone().unwrap_or_default()
    } else {
        String::new()
    };
    let members = group
        .members
        .values()
        .map(|m| {
            let member = DescribedGroupMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                .with_client_id(str_bytes(&m.client.client_id))
                .with_client_host(str_bytes(&m.client.client_host));
            if stable {
                let metadata = m
                    .protocols
                    .iter()
                    .find(|(name, _)| *name == protocol)
                    .map(|(_, md)| md.clone())
                    .unwrap_or_default();
                member
                    .with_member_metadata(metadata)
                    .with_member_assignment(m.assignment.clone())
            } else {
                member
            }
        })
        .collect();
    described
        .with_group_state(str_bytes(group.state.name()))
        .with_protocol_type(str_bytes(
            group.protocol_type.as_deref().unwrap_or_default(),
        ))
        .with_protocol_data(str_bytes(&protocol))
        .with_members(members)
}

/// A KIP-848 group seen through DescribeGroups, so classic tools (and `gregor
/// consumer-groups --describe`) show its members and assignments in the consumer protocol.
fn describe_consumer(group: &ConsumerGroup, described: DescribedGroup) -> DescribedGroup {
    let members = group
        .members()
        .map(|m| {
            let assigned = m
                .assigned
                .iter()
                .map(|(t, ps)| (t.clone(), ps.iter().copied().collect()))
                .collect();
            DescribedGroupMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                .with_client_id(str_bytes(&m.client.client_id))
                .with_client_host(str_bytes(&m.client.client_host))
                .with_member_metadata(consumer_protocol::encode_subscription(&m.subscribed_topics))
                .with_member_assignment(consumer_protocol::encode_assignment(&assigned))
        })
        .collect();
    described
        .with_group_state(str_bytes(group.state_name()))
        .with_protocol_type(str_bytes(CONSUMER_PROTOCOL_TYPE))
        .with_protocol_data(str_bytes(group.assignor_name()))
        .with_members(members)
}
