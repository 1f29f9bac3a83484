//! The one error enum of this crate, and its Kafka error codes.
//!
//! Every refusal the coordinator answers with is a [`GroupError`]; [`GroupError::code`] is the
//! only place that turns one into a wire code. Codes newer than the `kafka-protocol` release we
//! build on (KIP-848's `FENCED_MEMBER_EPOCH` and friends) are spelled out here.

/// Why the coordinator refused a request (or one member or partition of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The group id is empty.
    #[error("the group id must not be empty")]
    InvalidGroupId,
    /// The member id is not (or no longer) a member of the group.
    #[error("the member id is not known to the group; rejoin with an empty member id")]
    UnknownMemberId,
    /// The session timeout lies outside `group.min.session.timeout.ms..=group.max.session.timeout.ms`.
    #[error(
        "session timeout {requested_ms} ms is outside the broker's range {min_ms}..={max_ms} ms"
    )]
    InvalidSessionTimeout {
        /// What the member asked for.
        requested_ms: i32,
        /// `group.min.session.timeout.ms`.
        min_ms: i32,
        /// `group.max.session.timeout.ms`.
        max_ms: i32,
    },
    /// The group is rebalancing; the member must rejoin.
    #[error("the group is rebalancing; rejoin the group")]
    RebalanceInProgress,
    /// The generation id is not the group's current one.
    #[error("the generation id is not the group's current generation; rejoin the group")]
    IllegalGeneration,
    /// The protocol type or protocols do not match the group's.
    #[error("the member's protocol type or protocols are not compatible with the group's")]
    InconsistentGroupProtocol,
    /// The group is being removed or moved.
    #[error("the group coordinator is not available for this group; retry")]
    CoordinatorNotAvailable,
    /// A dynamic member must rejoin with the member id the coordinator handed out.
    #[error("rejoin with the member id given in this response")]
    MemberIdRequired,
    /// `group.max.size` members are already in the group.
    #[error("the group has reached its maximum size ({max_size} members)")]
    GroupMaxSizeReached {
        /// `group.max.size`.
        max_size: usize,
    },
    /// Another member now owns this `group.instance.id`.
    #[error(
        "another member with the same group.instance.id has registered with a different member id"
    )]
    FencedInstanceId,
    /// The group still has members.
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// The group does not exist.
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// The group is subscribed to the topic whose offsets were to be deleted.
    #[error("the group is subscribed to this topic; its offsets cannot be deleted")]
    GroupSubscribedToTopic,
    /// The offset's metadata string is longer than `offset.metadata.max.bytes`.
    #[error("offset metadata of {length} bytes is larger than offset.metadata.max.bytes={max}")]
    OffsetMetadataTooLarge {
        /// The metadata's length in bytes.
        length: usize,
        /// `offset.metadata.max.bytes`.
        max: usize,
    },
    /// The topic or partition does not exist.
    #[error("the topic or partition does not exist")]
    UnknownTopicOrPartition,
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The member asked for a server assignor the broker does not offer.
    #[error("server assignor '{0}' is not one of group.consumer.assignors")]
    UnsupportedAssignor(String),
    /// The member's epoch is ahead of the coordinator's or too old (KIP-848).
    #[error(
        "member epoch {received} is fenced; the coordinator's epoch for this member is {expected}"
    )]
    FencedMemberEpoch {
        /// The epoch the member sent.
        received: i32,
        /// The epoch the coordinator holds.
        expected: i32,
    },
    /// An offset commit carried an old member epoch (KIP-848, OffsetCommit v9+).
    #[error("member epoch {received} is stale; the member's current epoch is {expected}")]
    StaleMemberEpoch {
        /// The epoch in the commit.
        received: i32,
        /// The member's current epoch.
        expected: i32,
    },
    /// A static member joined while the previous holder of its instance id is still active.
    #[error("instance id '{0}' is still in use by an active member")]
    UnreleasedInstanceId(String),
    /// This broker no longer coordinates the group (its offsets partition moved).
    #[error("this broker is not the coordinator of the group; find the coordinator again")]
    NotCoordinator,
    /// The offset store failed to persist or delete offsets.
    #[error("offset store failure: {0}")]
    Store(String),
}

impl GroupError {
    /// The Kafka error code carried on the wire.
    pub fn code(&self) -> i16 {
        match self {
            GroupError::CoordinatorNotAvailable | GroupError::Store(_) => 15,
            GroupError::UnknownTopicOrPartition => 3,
            GroupError::NotCoordinator => 16,
            GroupError::OffsetMetadataTooLarge { .. } => 12,
            GroupError::IllegalGeneration => 22,
            GroupError::InconsistentGroupProtocol => 23,
            GroupError::InvalidGroupId => 24,
            GroupError::UnknownMemberId => 25,
            GroupError::InvalidSessionTimeout { .. } => 26,
            GroupError::RebalanceInProgress => 27,
            GroupError::InvalidRequest(_) => 42,
            GroupError::NonEmptyGroup => 68,
            GroupError::GroupIdNotFound => 69,
            GroupError::MemberIdRequired => 79,
            GroupError::GroupMaxSizeReached { .. } => 81,
            GroupError::FencedInstanceId => 82,
            GroupError::GroupSubscribedToTopic => 86,
            GroupError::FencedMemberEpoch { .. } => 110,
            GroupError::UnreleasedInstanceId(_) => 111,
            GroupError::UnsupportedAssignor(_) => 112,
            GroupError::StaleMemberEpoch { .. } => 113,
        }
    }
}

/// The code of an optional error: `0` for success.
pub(crate) fn code_of(result: &Result<(), GroupError>) -> i16 {
    match result {
        Ok(()) => 0,
        Err(err) => err.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError;

    #[test]
    fn codes_match_kafka() {
        let cases = [
            (GroupError::UnknownMemberId, ResponseError::UnknownMemberId),
            (
                GroupError::IllegalGeneration,
                ResponseError::IllegalGeneration,
            ),
            (
                GroupError::RebalanceInProgress,
                ResponseError::RebalanceInProgress,
            ),
            (
                GroupError::MemberIdRequired,
                ResponseError::MemberIdRequired,
            ),
            (
                GroupError::FencedInstanceId,
                ResponseError::FencedInstanceId,
            ),
            (GroupError::NonEmptyGroup, ResponseError::NonEmptyGroup),
            (GroupError::GroupIdNotFound, ResponseError::GroupIdNotFound),
            (
                GroupError::GroupSubscribedToTopic,
                ResponseError::GroupSubscribedToTopic,
            ),
            (
                GroupError::GroupMaxSizeReached { max_size: 1 },
                ResponseError::GroupMaxSizeReached,
            ),
            (
                GroupError::InvalidSessionTimeout {
                    requested_ms: 1,
                    min_ms: 2,
                    max_ms: 3,
                },
                ResponseError::InvalidSessionTimeout,
            ),
            (
                GroupError::CoordinatorNotAvailable,
                ResponseError::CoordinatorNotAvailable,
            ),
            (
                GroupError::InconsistentGroupProtocol,
                ResponseError::InconsistentGroupProtocol,
            ),
            (GroupError::InvalidGroupId, ResponseError::InvalidGroupId),
            (GroupError::NotCoordinator, ResponseError::NotCoordinator),
            (
                GroupError::UnknownTopicOrPartition,
                ResponseError::UnknownTopicOrPartition,
            ),
            (
                GroupError::OffsetMetadataTooLarge { length: 2, max: 1 },
                ResponseError::OffsetMetadataTooLarge,
            ),
            (
                GroupError::InvalidRequest(String::new()),
                ResponseError::InvalidRequest,
            ),
        ];
        for (err, kafka) in cases {
            assert_eq!(err.code(), kafka.code(), "{err:?}");
        }
    }
}
