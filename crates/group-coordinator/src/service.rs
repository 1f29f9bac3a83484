//! [`GroupCoordinator`]: the async face of [`CoordinatorCore`] that broker handlers call.
//!
//! It owns the clock (tokio's, so paused-time tests work), parks JoinGroup and SyncGroup until
//! the core answers them, fires the core's timers from one background task, writes offsets
//! through the [`OffsetStore`] before the cache changes, and forwards membership events, in
//! order, to the [`MembershipSink`] from a second task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DeleteGroupsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use model::{TopicName, TopicPartition};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::core::{ClientInfo, CoordinatorCore, GroupConfig, Output, Token, TopicMetadata};
use crate::error::GroupError;
use crate::log_records::GroupMetadataSnapshot;
use crate::membership::{MembershipEvent, MembershipSink};
use crate::offsets::{OffsetStore, OffsetStoreError};

/// How many membership events may wait for the sink before new ones are dropped (they are
/// informational znodes; the coordinator's own state is unaffected).
pub const MEMBERSHIP_QUEUE_CAPACITY: usize = 4096;

/// The group coordinator of one broker. Cheap to clone; every clone is the same coordinator.
pub struct GroupCoordinator<S: OffsetStore, M: MembershipSink> {
    inner: Arc<Inner<S>>,
    tasks: Arc<Vec<JoinHandle<()>>>,
    _sink: std::marker::PhantomData<fn() -> M>,
}

impl<S: OffsetStore, M: MembershipSink> Clone for GroupCoordinator<S, M> {
    fn clone(&self) -> Self {
        GroupCoordinator {
            inner: Arc::clone(&self.inner),
            tasks: Arc::clone(&self.tasks),
            _sink: std::marker::PhantomData,
        }
    }
}

impl<S: OffsetStore, M: MembershipSink> std::fmt::Debug for GroupCoordinator<S, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups = self
            .inner
            .state
            .lock()
            .map(|s| s.core.group_states().len())
            .unwrap_or(0);
        f.debug_struct("GroupCoordinator")
            .field("groups", &groups)
            .finish_non_exhaustive()
    }
}

struct Inner<S> {
    state: Mutex<State>,
    store: Arc<S>,
    events: mpsc::Sender<MembershipEvent>,
    group_writes: mpsc::Sender<GroupWrite>,
    timers: Arc<Notify>,
    clock: Clock,
    commit_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

#[derive(Debug)]
struct State {
    core: CoordinatorCore,
    next_token: Token,
    joins: HashMap<Token, oneshot::Sender<JoinGroupResponse>>,
    syncs: HashMap<Token, oneshot::Sender<SyncGroupResponse>>,
}

/// Group metadata to store, and the SyncGroup answers that wait for it (Kafka answers a
/// rebalance's SyncGroup only once the group's new generation is stored).
struct GroupWrite {
    groups: Vec<(String, GroupMetadataSnapshot)>,
    held: Vec<(oneshot::Sender<SyncGroupResponse>, SyncGroupResponse)>,
    /// KIP-848 groups' changed records, by group, in order.
    records: Vec<(String, Vec<crate::consumer_records::RecordWrite>)>,
    /// Told whether everything was stored (a ConsumerGroupHeartbeat waits for it).
    done: Option<oneshot::Sender<bool>>,
}

/// Wall-clock milliseconds that advance with tokio's clock.
#[derive(Debug, Clone, Copy)]
struct Clock {
    start: Instant,
    start_wall_ms: u64,
}

impl Clock {
    fn now_ms(&self) -> u64 {
        self.start_wall_ms + self.start.elapsed().as_millis() as u64
    }

    fn instant_at(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms.saturating_sub(self.start_wall_ms))
    }
}

impl<S: OffsetStore, M: MembershipSink> GroupCoordinator<S, M> {
    /// Loads every committed offset from `store` and starts the timer and sink tasks (call
    /// inside a tokio runtime).
    pub async fn start(
        config: GroupConfig,
        store: Arc<S>,
        sink: Arc<M>,
    ) -> Result<Self, OffsetStoreError> {
        let offsets = store.load_all().await?;
        let mut core = CoordinatorCore::new(config);
        core.load_offsets(offsets);
        let (events, mut events_rx) = mpsc::channel(MEMBERSHIP_QUEUE_CAPACITY);
        let (group_writes, mut group_writes_rx) =
            mpsc::channel::<GroupWrite>(MEMBERSHIP_QUEUE_CAPACITY);
        let timers = Arc::new(Notify::new());
        let start_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                core,
                next_token: 0,
                joins: HashMap::new(),
                syncs: HashMap::new(),
            }),
            store: Arc::clone(&store),
            events,
            group_writes,
            timers: Arc::clone(&timers),
            clock: Clock {
                start: Instant::now(),
                start_wall_ms,
            },
            commit_locks: Mutex::new(HashMap::new()),
        });
        let sink_task = tokio::spawn(async move {
            while let Some(event) = events_rx.recv().await {
                sink.apply(event).await;
            }
        });
        // One writer, so a group's metadata records are appended in the order they happened.
        let group_task = tokio::spawn(async move {
            while let Some(write) = group_writes_rx.recv().await {
                let mut stored = Ok(());
                for (group_id, value) in &write.groups {
                    if let Err(err) = store.store_group(group_id, value).await {
                        tracing::warn!(group_id, %err, "could not store group metadata");
                        stored = Err(err);
                    }
                }
                for (group_id, records) in &write.records {
                    if let Err(err) = store.store_records(group_id, records).await {
                        tracing::warn!(group_id, %err, "could not store consumer group records");
                        stored = Err(err);
                    }
                }
                if let Some(done) = write.done {
                    let _ = done.send(stored.is_ok());
                }
                for (tx, response) in write.held {
                    let response = match &stored {
                        Ok(()) => response,
                        Err(_) => SyncGroupResponse::default()
                            .with_error_code(GroupError::CoordinatorNotAvailable.code()),
                    };
                    let _ = tx.send(response);
                }
            }
        });
        let timer_task = tokio::spawn(timer_loop(Arc::downgrade(&inner), timers));
        Ok(GroupCoordinator {
            inner,
            tasks: Arc::new(vec![sink_task, group_task, timer_task]),
            _sink: std::marker::PhantomData,
        })
    }

    /// Stops the background tasks and answers every parked JoinGroup/SyncGroup with
    /// `COORDINATOR_NOT_AVAILABLE` (clients then look for the coordinator again).
    pub fn shutdown(&self) {
        for task in self.tasks.iter() {
            task.abort();
        }
        let mut state = crate::sync::lock(&self.inner.state, "coordinator lock");
        // Dropping the senders wakes the parked handlers with their fallback answer.
        state.joins.clear();
        state.syncs.clear();
    }

    /// Re-reads every committed offset from the store (when this broker becomes the
    /// coordinator again after another one served the groups).
    pub async fn reload_offsets(&self) -> Result<(), OffsetStoreError> {
        let offsets = self.inner.store.load_all().await?;
        self.with_core(|core, _| core.load_offsets(offsets));
        Ok(())
    }

    /// Replaces the topic metadata (call whenever the broker's metadata cache changes).
    pub fn set_topics(&self, topics: impl IntoIterator<Item = TopicMetadata>) {
        self.with_core(|core, _| core.set_topics(topics));
    }

    /// Drops every group's offsets of a deleted topic, from the cache and the store.
    pub async fn on_topic_deleted(&self, topic: &TopicName) -> Result<(), OffsetStoreError> {
        let dropped = self.with_core(|core, _| core.on_topic_deleted(topic));
        let count: usize = dropped.iter().map(|(_, parts)| parts.len()).sum();
        tracing::info!(%topic, dropped = count, "dropping group offsets of deleted topic");
        for (group_id, partitions) in dropped {
            self.inner
                .store
                .delete_offsets(&group_id, &partitions)
                .await?;
        }
        Ok(())
    }

    /// Adds the groups and offsets replayed from one `__consumer_offsets` partition (see
    /// [`CoordinatorCore::load_groups`]).
    pub fn load_groups(
        &self,
        offsets: crate::offsets::GroupOffsets,
        groups: std::collections::BTreeMap<String, crate::log_records::GroupMetadataSnapshot>,
    ) {
        let now = self.now_ms();
        self.with_core(|core, _| core.load_groups(now, offsets, groups));
    }

    /// Adds the KIP-848 groups replayed from an offsets partition's records (see
    /// [`CoordinatorCore::load_consumer_groups`]); call after [`GroupCoordinator::load_groups`].
    pub fn load_consumer_groups(
        &self,
        groups: std::collections::BTreeMap<String, crate::consumer_records::GroupRecords>,
    ) {
        let now = self.now_ms();
        self.with_core(|core, _| core.load_consumer_groups(now, groups));
    }

    /// Forgets the groups `moved` names (see [`CoordinatorCore::unload_groups`]).
    pub fn unload_groups(&self, moved: impl Fn(&str) -> bool) -> usize {
        self.with_core(|core, _| core.unload_groups(moved))
    }

    /// JoinGroup: returns when the member's rebalance completes (or at once on an error).
    pub async fn join_group(
        &self,
        request: JoinGroupRequest,
        version: i16,
        client: ClientInfo,
    ) -> JoinGroupResponse {
        let now = self.now_ms();
        let rx = self.with_core(|core, waiters| {
            let token = waiters.next_token();
            let (tx, rx) = oneshot::channel();
            waiters.joins.insert(token, tx);
            core.join_group(now, token, version, &request, &client);
            rx
        });
        rx.await.unwrap_or_else(|_| {
            JoinGroupResponse::default()
                .with_error_code(GroupError::CoordinatorNotAvailable.code())
                .with_member_id(request.member_id.clone())
        })
    }

    /// SyncGroup: followers return when the leader's assignment arrives.
    pub async fn sync_group(&self, request: SyncGroupRequest, version: i16) -> SyncGroupResponse {
        let now = self.now_ms();
        let rx = self.with_core(|core, waiters| {
            let token = waiters.next_token();
            let (tx, rx) = oneshot::channel();
            waiters.syncs.insert(token, tx);
            core.sync_group(now, token, version, &request);
            rx
        });
        rx.await.unwrap_or_else(|_| {
            SyncGroupResponse::default().with_error_code(GroupError::CoordinatorNotAvailable.code())
        })
    }

    /// Heartbeat.
    pub fn heartbeat(&self, request: &HeartbeatRequest) -> HeartbeatResponse {
        let now = self.now_ms();
        self.with_core(|core, _| core.heartbeat(now, request))
    }

    /// LeaveGroup.
    pub fn leave_group(&self, request: &LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
        let now = self.now_ms();
        self.with_core(|core, _| core.leave_group(now, version, request))
    }

    /// ConsumerGroupHeartbeat (KIP-848).
    pub async fn consumer_group_heartbeat(
        &self,
        request: &ConsumerGroupHeartbeatRequest,
        client: &ClientInfo,
    ) -> ConsumerGroupHeartbeatResponse {
        let now = self.now_ms();
        let group_id = request.group_id.0.as_str();
        let (response, stored) = self.with_core(|core, _| {
            let response = core.consumer_group_heartbeat(now, request, client);
            let records = core.consumer_group_writes(group_id);
            if records.is_empty() {
                return (response, None);
            }
            // Queued under the coordinator lock, so a group's writes keep their order.
            let (tx, rx) = oneshot::channel();
            let write = GroupWrite {
                groups: Vec::new(),
                held: Vec::new(),
                records: vec![(group_id.to_owned(), records)],
                done: Some(tx),
            };
            match self.inner.group_writes.try_send(write) {
                Ok(()) => (response, Some(rx)),
                Err(_) => {
                    // Written again in full with the next change.
                    core.consumer_written.remove(group_id);
                    (
                        ConsumerGroupHeartbeatResponse::default()
                            .with_error_code(GroupError::CoordinatorNotAvailable.code()),
                        None,
                    )
                }
            }
        });
        // Answered once the records are in the offsets topic, as Kafka's coordinator does.
        match stored {
            None => response,
            Some(rx) => match rx.await {
                Ok(true) => response,
                _ => ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(GroupError::CoordinatorNotAvailable.code()),
            },
        }
    }

    /// ConsumerGroupDescribe (KIP-848).
    pub fn consumer_group_describe(
        &self,
        request: &ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        self.with_core(|core, _| core.consumer_group_describe(request))
    }

    /// DescribeGroups.
    pub fn describe_groups(&self, request: &DescribeGroupsRequest) -> DescribeGroupsResponse {
        self.with_core(|core, _| core.describe_groups(request))
    }

    /// ListGroups.
    pub fn list_groups(&self, request: &ListGroupsRequest) -> ListGroupsResponse {
        self.with_core(|core, _| core.list_groups(request))
    }

    /// OffsetFetch.
    pub fn offset_fetch(&self, request: &OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
        self.with_core(|core, _| core.fetch_offsets(version, request))
    }

    /// OffsetCommit: one store transaction for the request's valid partitions; the cache
    /// changes only once the store has them.
    pub async fn offset_commit(
        &self,
        request: &OffsetCommitRequest,
        version: i16,
    ) -> OffsetCommitResponse {
        let group_id = request.group_id.0.as_str().to_owned();
        // Commits of one group are written one at a time, so the cache applies them in the
        // order the store did.
        let lock = self.commit_lock(&group_id);
        let _guard = lock.lock().await;
        let now = self.now_ms();
        let plan = self.with_core(|core, _| core.prepare_offset_commit(now, version, request));
        let stored = if plan.to_store.is_empty() {
            Ok(())
        } else {
            self.inner
                .store
                .commit(&plan.group_id, &plan.to_store)
                .await
        };
        if let Err(err) = &stored {
            tracing::warn!(group_id, %err, "offset commit failed in the store");
        }
        self.with_core(|core, _| core.complete_offset_commit(plan, stored))
    }

    /// TxnOffsetCommit's group checks (see [`CoordinatorCore::check_txn_offset_commit`]).
    pub fn check_txn_offset_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), i16> {
        self.with_core(|core, _| {
            core.check_txn_offset_commit(group_id, generation, member_id, instance_id)
        })
    }

    /// Committed transactional offsets become visible (see
    /// [`CoordinatorCore::apply_txn_offsets`]).
    pub fn apply_txn_offsets(
        &self,
        group_id: &str,
        offsets: Vec<(TopicPartition, crate::OffsetAndMetadata)>,
    ) {
        self.with_core(|core, _| core.apply_txn_offsets(group_id, offsets));
    }

    /// OffsetDelete.
    pub async fn offset_delete(&self, request: &OffsetDeleteRequest) -> OffsetDeleteResponse {
        let group_id = request.group_id.0.as_str().to_owned();
        let lock = self.commit_lock(&group_id);
        let _guard = lock.lock().await;
        let plan = self.with_core(|core, _| core.prepare_offset_delete(request));
        let deleted = if plan.to_delete.is_empty() {
            Ok(())
        } else {
            self.inner
                .store
                .delete_offsets(&plan.group_id, &plan.to_delete)
                .await
        };
        self.with_core(|core, _| core.complete_offset_delete(plan, deleted))
    }

    /// DeleteGroups.
    pub async fn delete_groups(&self, request: &DeleteGroupsRequest) -> DeleteGroupsResponse {
        let (plan, offsets) = self.with_core(|core, _| {
            let plan = core.prepare_delete_groups(request);
            let offsets: Vec<_> = plan
                .eligible
                .iter()
                .map(|group_id| core.offset_partitions(group_id))
                .collect();
            (plan, offsets)
        });
        let mut deleted = Vec::with_capacity(plan.eligible.len());
        for (group_id, offsets) in plan.eligible.iter().zip(offsets) {
            deleted.push((
                group_id.clone(),
                self.inner.store.delete_group(group_id, &offsets).await,
            ));
        }
        self.with_core(|core, _| {
            let response = core.complete_delete_groups(plan, &deleted);
            // A deleted consumer group's records get tombstones.
            core.persist_consumer_groups();
            response
        })
    }

    /// The coordinator's clock, in ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    fn commit_lock(&self, group_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = crate::sync::lock(&self.inner.commit_locks, "commit locks");
        // Forget locks nobody holds, so the map stays as small as the set of busy groups.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(locks.entry(group_id.to_owned()).or_default())
    }

    fn with_core<T>(&self, f: impl FnOnce(&mut CoordinatorCore, &mut Waiters<'_>) -> T) -> T {
        self.inner.with_core(f)
    }
}

/// Parked-request bookkeeping lent to a core call.
#[derive(Debug)]
struct Waiters<'a> {
    next_token: &'a mut Token,
    joins: &'a mut HashMap<Token, oneshot::Sender<JoinGroupResponse>>,
    syncs: &'a mut HashMap<Token, oneshot::Sender<SyncGroupResponse>>,
}

impl Waiters<'_> {
    fn next_token(&mut self) -> Token {
        *self.next_token += 1;
        *self.next_token
    }
}

impl<S: OffsetStore> Inner<S> {
    fn with_core<T>(&self, f: impl FnOnce(&mut CoordinatorCore, &mut Waiters<'_>) -> T) -> T {
        let result = self.with_core_quiet(f);
        // Deadlines may have moved: let the timer task look again.
        self.timers.notify_one();
        result
    }

    /// Like `with_core`, without waking the timer task (which is the caller here).
    fn with_core_quiet<T>(&self, f: impl FnOnce(&mut CoordinatorCore, &mut Waiters<'_>) -> T) -> T {
        let mut state = crate::sync::lock(&self.state, "coordinator lock");
        let State {
            core,
            next_token,
            joins,
            syncs,
        } = &mut *state;
        let mut waiters = Waiters {
            next_token,
            joins,
            syncs,
        };
        let result = f(core, &mut waiters);
        self.dispatch(core.take_outputs(), &mut waiters);
        result
    }

    fn dispatch(&self, outputs: Vec<Output>, waiters: &mut Waiters<'_>) {
        let store_groups = outputs
            .iter()
            .any(|o| matches!(o, Output::GroupMetadata { .. }));
        let mut write = GroupWrite {
            groups: Vec::new(),
            held: Vec::new(),
            records: Vec::new(),
            done: None,
        };
        for output in outputs {
            match output {
                Output::GroupMetadata { group_id, value } => write.groups.push((group_id, value)),
                Output::ConsumerGroupRecords { group_id, records } => {
                    write.records.push((group_id, records))
                }
                Output::SyncGroup { token, response } if store_groups => {
                    if let Some(tx) = waiters.syncs.remove(&token) {
                        write.held.push((tx, response));
                    }
                }
                Output::JoinGroup { token, response } => {
                    if let Some(tx) = waiters.joins.remove(&token) {
                        // The handler may be gone (client disconnected); nothing to do then.
                        let _ = tx.send(response);
                    }
                }
                Output::SyncGroup { token, response } => {
                    if let Some(tx) = waiters.syncs.remove(&token) {
                        let _ = tx.send(response);
                    }
                }
                Output::OffsetsExpired {
                    group_id,
                    partitions,
                } => {
                    let store = Arc::clone(&self.store);
                    tokio::spawn(async move {
                        if let Err(err) = store.delete_offsets(&group_id, &partitions).await {
                            tracing::warn!(group_id, %err, "could not delete expired offsets from the store");
                        }
                    });
                }
                Output::GroupExpired {
                    group_id,
                    partitions,
                } => {
                    let store = Arc::clone(&self.store);
                    tokio::spawn(async move {
                        if let Err(err) = store.delete_group(&group_id, &partitions).await {
                            tracing::warn!(group_id, %err, "could not delete an expired group from the store");
                        }
                    });
                }
                Output::Membership(event) => {
                    if self.events.try_send(event).is_err() {
                        tracing::warn!("membership event queue full or closed; dropping an event");
                    }
                }
            }
        }
        if store_groups || !write.records.is_empty() {
            if let Err(refused) = self.group_writes.try_send(write) {
                tracing::warn!("group metadata queue full or closed; members must rejoin");
                let write = match refused {
                    mpsc::error::TrySendError::Full(w) | mpsc::error::TrySendError::Closed(w) => w,
                };
                for (tx, _) in write.held {
                    let _ = tx.send(
                        SyncGroupResponse::default()
                            .with_error_code(GroupError::CoordinatorNotAvailable.code()),
                    );
                }
            }
        }
    }
}

async fn timer_loop<S: OffsetStore>(inner: Weak<Inner<S>>, timers: Arc<Notify>) {
    loop {
        let next = {
            let Some(inner) = inner.upgrade() else { return };
            let now = inner.clock.now_ms();
            let next = inner.with_core_quiet(|core, _| {
                core.tick(now);
                core.next_deadline_ms()
            });
            next.map(|ms| inner.clock.instant_at(ms))
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = timers.notified() => {}
                }
            }
            None => timers.notified().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::{InMemoryOffsetStore, NoopMembershipSink};

    /// Issue 14: a panic while the coordinator lock is held (poisoning it) used to make every
    /// later group request panic on `expect`. Now the next requests are answered.
    #[tokio::test]
    async fn issue_14_a_panic_under_the_coordinator_lock_does_not_break_later_requests() {
        let coordinator: GroupCoordinator<InMemoryOffsetStore, NoopMembershipSink> =
            GroupCoordinator::start(
                GroupConfig::default(),
                Arc::new(InMemoryOffsetStore::default()),
                Arc::new(NoopMembershipSink),
            )
            .await
            .unwrap();
        let inner = Arc::clone(&coordinator.inner);
        let panicked = std::thread::spawn(move || {
            let _state = inner.state.lock();
            panic!("a bug in some request, under the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(coordinator.inner.state.is_poisoned());
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range"))
            ]);
        let client = ClientInfo {
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        };
        let answer = coordinator.join_group(join, 5, client).await;
        // A new member without an id is told its id (MEMBER_ID_REQUIRED), as always.
        assert_eq!(answer.error_code, 79);
        let listed = coordinator.list_groups(&ListGroupsRequest::default());
        assert_eq!(listed.error_code, 0);
        assert!(
            !coordinator.inner.state.is_poisoned(),
            "the poison is cleared"
        );
        coordinator.shutdown();
    }
}
