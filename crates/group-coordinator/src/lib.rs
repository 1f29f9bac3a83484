//! Consumer groups: membership, rebalancing, assignment and committed offsets (SPEC section 7).
//!
//! Owns the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with Kafka
//! 2.8's semantics, the KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe) with server-side `range` and `uniform` assignors, DescribeGroups,
//! ListGroups, DeleteGroups, OffsetCommit, OffsetFetch and OffsetDelete.
//!
//! Does not own: sockets, request framing, FindCoordinator (which broker coordinates which
//! group is the broker's decision), topic metadata (the broker pushes it in with
//! [`GroupCoordinator::set_topics`]), or the store: committed offsets and group metadata
//! leave through [`OffsetStore`] (the broker appends them to `__consumer_offsets` in Kafka's
//! record formats, which [`log_records`] encodes and decodes) and member/owner znodes through
//! [`MembershipSink`]. Which groups this coordinator holds is the broker's decision: it adds
//! the groups of an offsets partition it starts leading ([`GroupCoordinator::load_groups`])
//! and drops them when it stops ([`GroupCoordinator::unload_groups`]).
//!
//! Two layers:
//! - [`CoordinatorCore`] is pure and deterministic: `(now_ms, request)` in, responses and
//!   [`Output`]s out, timers fired by [`CoordinatorCore::tick`]. Tests drive it without
//!   sockets or sleeps.
//! - [`GroupCoordinator`] wraps it for async handlers: it supplies the clock, parks JoinGroup
//!   and SyncGroup until the rebalance answers them, runs the timers, and performs offset
//!   writes before the cache changes.
//!
//! # How a broker handler calls it
//!
//! ```no_run
//! use std::sync::Arc;
//! use group_coordinator::{
//!     ClientInfo, GroupConfig, GroupCoordinator, InMemoryOffsetStore, NoopMembershipSink,
//! };
//! use kafka_protocol::messages::{JoinGroupRequest, OffsetCommitRequest};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // At broker startup (the broker passes its own OffsetStore and MembershipSink):
//! let config = GroupConfig { initial_rebalance_delay_ms: 3000, ..GroupConfig::default() };
//! let groups = GroupCoordinator::start(
//!     config,
//!     Arc::new(InMemoryOffsetStore::new()),
//!     Arc::new(NoopMembershipSink),
//! )
//! .await?;
//!
//! // handlers/join_group.rs: awaits until the rebalance completes. Like Kafka, the
//! // connection must not process its next request before this one is answered.
//! # let (request, version) = (JoinGroupRequest::default(), 7);
//! let client = ClientInfo { client_id: "rdkafka".into(), client_host: "/127.0.0.1".into() };
//! let response = groups.join_group(request, version, client).await;
//!
//! // handlers/offset_commit.rs: one OffsetStore::commit per request.
//! # let commit = OffsetCommitRequest::default();
//! let response = groups.offset_commit(&commit, 8).await;
//! # Ok(())
//! # }
//! ```
//!
//! The broker also calls [`GroupCoordinator::set_topics`] whenever its metadata cache changes
//! (KIP-848 assigns by topic id, and OffsetCommit answers `UNKNOWN_TOPIC_OR_PARTITION` for
//! partitions that do not exist; before the first call no existence check is made), and
//! [`GroupCoordinator::on_topic_deleted`] when a topic is deleted.
//!
//! # What the broker provides
//!
//! | piece | what it does |
//! | --- | --- |
//! | [`OffsetStore`] | one batch of records appended to `__consumer_offsets` per call, answered once replicated |
//! | [`MembershipSink`] | `/consumers/<group>/ids/<member>` and `/consumers/<group>/owners/<t>/<p>` |
//! | FindCoordinator | which broker coordinates which group; that broker calls [`GroupCoordinator::load_groups`] when it takes groups over |
//! | one request at a time per connection | a parked JoinGroup holds back the connection's next request, as Kafka's muted channels do |
//!
//! # Versions handled
//!
//! JoinGroup 0-9 (MEMBER_ID_REQUIRED from v4 for dynamic members), SyncGroup 0-5,
//! Heartbeat 0-4, LeaveGroup 0-5 (batches from v3), OffsetCommit 0-9 (`STALE_MEMBER_EPOCH`
//! for KIP-848 members from v9), OffsetFetch 0-9 (several groups from v8), OffsetDelete 0,
//! DescribeGroups 0-5, ListGroups 0-5 (state filter v4, type filter v5), DeleteGroups 0-2,
//! ConsumerGroupHeartbeat 0, ConsumerGroupDescribe 0. Which of these the broker advertises is
//! `protocol::SUPPORTED_APIS`' decision.

mod admin;
mod assignor;
mod classic;
pub mod consumer;
mod consumer_persist;
pub mod consumer_protocol;
pub mod consumer_records;
mod core;
mod error;
pub mod log_records;
mod membership;
mod offset_ops;
mod offsets;
pub mod reset;
mod service;
mod sync;

pub use crate::admin::DeleteGroupsPlan;
pub use crate::assignor::{
    range, uniform, MemberAssignments, ServerAssignor, Subscriptions, UnknownAssignor,
};
pub use crate::classic::ClassicGroupState;
pub use crate::core::{
    ClientInfo, CoordinatorCore, GroupConfig, Output, Token, TopicMetadata,
    GROUP_CLEANUP_INTERVAL_MS, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
pub use crate::error::GroupError;
pub use crate::log_records::{GroupMetadataSnapshot, MemberSnapshot};
pub use crate::membership::{
    MembershipEvent, MembershipSink, NoopMembershipSink, RecordingMembershipSink,
};
pub use crate::offset_ops::{OffsetCommitPlan, OffsetDeletePlan};
pub use crate::offsets::{
    GroupOffsets, InMemoryOffsetStore, OffsetAndMetadata, OffsetStore, OffsetStoreError,
};
pub use crate::service::{GroupCoordinator, MEMBERSHIP_QUEUE_CAPACITY};
