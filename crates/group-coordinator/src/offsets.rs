//! Committed offsets: the value type, the [`OffsetStore`] trait through which they leave this
//! crate, and an in-memory store for tests.
//!
//! The broker implements [`OffsetStore`] on top of `__consumer_offsets` (one batch of Kafka's
//! records per call, answered once the in-sync replicas have it), so committed offsets
//! survive consumer crashes, broker restarts and coordinator moves. The coordinator
//! keeps a cache of every offset and writes through: the cache changes only after the store
//! said yes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use model::TopicPartition;

use crate::log_records::GroupMetadataSnapshot;

/// One committed offset, as OffsetCommit carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// Client metadata (`""` when the client sent none).
    pub metadata: String,
    /// When the coordinator accepted the commit (ms since the Unix epoch, the injected clock).
    pub commit_timestamp_ms: i64,
    /// An explicit expiry (ms since the Unix epoch): OffsetCommit v2-v4's `retention_time_ms`
    /// added to the commit time, stored as `OffsetCommitValue` v1. `None` (every newer
    /// commit): the offset expires by `offsets.retention.minutes` (KIP-211).
    pub expire_timestamp_ms: Option<i64>,
}

/// All offsets of all groups: group -> partition -> offset.
pub type GroupOffsets = BTreeMap<String, BTreeMap<TopicPartition, OffsetAndMetadata>>;

/// The offset store could not do what was asked. The coordinator answers the affected
/// partitions with `COORDINATOR_NOT_AVAILABLE`, which clients retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("offset store unavailable: {0}")]
pub struct OffsetStoreError(pub String);

/// Durable storage for committed offsets, implemented by the broker.
///
/// Each method is one store transaction: all of a call's writes happen, or none do.
pub trait OffsetStore: Send + Sync + 'static {
    /// Writes the offsets of one OffsetCommit request (one transaction for the whole request).
    fn commit(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> impl Future<Output = Result<(), OffsetStoreError>> + Send;

    /// Reads every committed offset of every group (at startup and when this broker becomes
    /// the coordinator).
    fn load_all(&self) -> impl Future<Output = Result<GroupOffsets, OffsetStoreError>> + Send;

    /// Deletes some offsets of one group (OffsetDelete).
    fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> impl Future<Output = Result<(), OffsetStoreError>> + Send;

    /// Deletes one group: its offsets (`offsets`, the partitions the coordinator knows of)
    /// and its metadata (DeleteGroups).
    fn delete_group(
        &self,
        group_id: &str,
        offsets: &[TopicPartition],
    ) -> impl Future<Output = Result<(), OffsetStoreError>> + Send;

    /// Stores a classic group's metadata (a rebalance completed or the group became empty),
    /// so that another coordinator resumes it. Stores that keep only offsets do nothing.
    fn store_group(
        &self,
        group_id: &str,
        value: &GroupMetadataSnapshot,
    ) -> impl Future<Output = Result<(), OffsetStoreError>> + Send {
        let _ = (group_id, value);
        async { Ok(()) }
    }

    /// Appends records of a KIP-848 group (`crate::consumer_records`; `None` values are
    /// tombstones), in order, as one write. Stores that keep only offsets do nothing.
    fn store_records(
        &self,
        group_id: &str,
        records: &[crate::consumer_records::RecordWrite],
    ) -> impl Future<Output = Result<(), OffsetStoreError>> + Send {
        let _ = (group_id, records);
        async { Ok(()) }
    }
}

/// An [`OffsetStore`] in memory, for tests; it can be told to fail its next call.
#[derive(Debug, Default)]
pub struct InMemoryOffsetStore {
    offsets: Mutex<GroupOffsets>,
    fail_next: AtomicBool,
    commits: Mutex<usize>,
}

impl InMemoryOffsetStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that already holds `offsets` (a restarted broker's store).
    pub fn with_offsets(offsets: GroupOffsets) -> Self {
        InMemoryOffsetStore {
            offsets: Mutex::new(offsets),
            ..Self::default()
        }
    }

    /// Makes the next call fail with [`OffsetStoreError`].
    pub fn fail_next_call(&self) {
        self.fail_next.store(true, Ordering::SeqCst);
    }

    /// What the store holds now.
    pub fn snapshot(&self) -> GroupOffsets {
        crate::sync::lock(&self.offsets, "store lock").clone()
    }

    /// How many `commit` transactions succeeded.
    pub fn commit_count(&self) -> usize {
        *crate::sync::lock(&self.commits, "store lock")
    }

    fn check_failure(&self) -> Result<(), OffsetStoreError> {
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err(OffsetStoreError("injected failure".to_owned()));
        }
        Ok(())
    }
}

impl OffsetStore for InMemoryOffsetStore {
    async fn commit(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<(), OffsetStoreError> {
        self.check_failure()?;
        let mut all = crate::sync::lock(&self.offsets, "store lock");
        let group = all.entry(group_id.to_owned()).or_default();
        for (tp, offset) in offsets {
            group.insert(tp.clone(), offset.clone());
        }
        *crate::sync::lock(&self.commits, "store lock") += 1;
        Ok(())
    }

    async fn load_all(&self) -> Result<GroupOffsets, OffsetStoreError> {
        self.check_failure()?;
        Ok(self.snapshot())
    }

    async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<(), OffsetStoreError> {
        self.check_failure()?;
        let mut all = crate::sync::lock(&self.offsets, "store lock");
        if let Some(group) = all.get_mut(group_id) {
            for tp in partitions {
                group.remove(tp);
            }
            if group.is_empty() {
                all.remove(group_id);
            }
        }
        Ok(())
    }

    async fn delete_group(
        &self,
        group_id: &str,
        _offsets: &[TopicPartition],
    ) -> Result<(), OffsetStoreError> {
        self.check_failure()?;
        crate::sync::lock(&self.offsets, "store lock").remove(group_id);
        Ok(())
    }
}
