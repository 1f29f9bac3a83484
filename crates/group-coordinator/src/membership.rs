//! Membership and ownership changes leaving the coordinator, in the seed's layout.
//!
//! The core emits [`MembershipEvent`]s; the async wrapper hands them, in order, to a
//! [`MembershipSink`] the broker implements by writing
//! `/consumers/<group>/ids/<member>` (ephemeral, `{"version":1,"subscription":{"t":1},
//! "pattern":"white_list","timestamp":"..."}`) and `/consumers/<group>/owners/<t>/<p>`
//! (ephemeral, the owning member id). These znodes are informational (tools read them); the
//! coordinator's in-memory state is the authority, so a failed write is logged, not retried.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Mutex;

use model::TopicPartition;

/// One change to a group's registered members or partition owners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member joined or changed its subscription: write `/consumers/<group>/ids/<member>`.
    MemberRegistered {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// The subscribed topics (each with count 1 in the seed's JSON).
        subscription: BTreeSet<String>,
        /// The registration time (ms since the Unix epoch, the injected clock).
        timestamp_ms: u64,
    },
    /// A member left or was removed: delete `/consumers/<group>/ids/<member>`.
    MemberRemoved {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
    },
    /// The group's complete ownership: replace `/consumers/<group>/owners/...` with exactly
    /// these partitions (an empty map releases every partition, as during a rebalance).
    OwnersChanged {
        /// The group.
        group_id: String,
        /// Partition -> owning member id.
        owners: BTreeMap<TopicPartition, String>,
    },
    /// The group was deleted: remove `/consumers/<group>` and everything under it.
    GroupDeleted {
        /// The group.
        group_id: String,
    },
}

/// The broker's writer of [`MembershipEvent`]s into the metadata store.
pub trait MembershipSink: Send + Sync + 'static {
    /// Applies one event. Events arrive one at a time, in the order the coordinator made them.
    fn apply(&self, event: MembershipEvent) -> impl Future<Output = ()> + Send;
}

/// A sink that drops every event (for brokers or tests that do not need the znodes).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMembershipSink;

impl MembershipSink for NoopMembershipSink {
    async fn apply(&self, _event: MembershipEvent) {}
}

/// A sink that remembers every event, for tests.
#[derive(Debug, Default)]
pub struct RecordingMembershipSink {
    events: Mutex<Vec<MembershipEvent>>,
}

impl RecordingMembershipSink {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the events recorded so far.
    pub fn take(&self) -> Vec<MembershipEvent> {
        std::mem::take(&mut *crate::sync::lock(&self.events, "sink lock"))
    }
}

impl MembershipSink for RecordingMembershipSink {
    async fn apply(&self, event: MembershipEvent) {
        crate::sync::lock(&self.events, "sink lock").push(event);
    }
}
