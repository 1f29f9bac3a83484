//! Control requests to brokers (Kafka's `ControllerChannelManager` and
//! `ControllerBrokerRequestBatch`): one bounded send queue and one task per live broker,
//! sending LeaderAndIsr, UpdateMetadata and StopReplica over the Kafka protocol with
//! `client::Connection` to the broker's PLAINTEXT endpoint, each at the newest version both
//! this controller and the broker's ApiVersions offer (Kafka picks it from
//! `inter.broker.protocol.version`; between Gregor brokers it is Kafka 3.9's: LeaderAndIsr v7,
//! UpdateMetadata v8, StopReplica v4). The requests are built with topic ids, so a broker
//! offering less than [`LEADER_AND_ISR_MIN_VERSION`] / [`UPDATE_METADATA_MIN_VERSION`] /
//! [`STOP_REPLICA_MIN_VERSION`] cannot be sent to (the send fails and is retried, logged). A failed send reconnects with
//! backoff and retries the same request until the broker is removed; StopReplica responses
//! come back to the event loop as events.
//!
//! No request is dropped silently. A full queue merges a new request into a queued one
//! (the newest state per partition wins, see [`crate::request_queue`]); when that would
//! reorder what the broker does, the queue is replaced by a resync built from the context
//! ([`resync_batch`]: every replica's leadership or stop, and the whole metadata). A broker
//! that leaves takes its queue with it, which is logged; it is told everything again when it
//! registers.
//!
//! Every request carries the control-plane proof (`security::control_plane`) in its header,
//! so the receiver knows it comes from a broker of this cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use security::control_plane::{ControlPlaneKey, PROOF_TAG};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId as WireBrokerId, LeaderAndIsrRequest, StopReplicaRequest,
    TopicName as WireTopicName, UpdateMetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Mutex;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use client::{ClientError, Connection, ConnectionOptions};
use model::{BrokerId, TopicName, TopicPartition};

use crate::context::{ControllerContext, LiveBroker, EPOCH_DURING_DELETE, LEADER_DURING_DELETE};
use crate::event::ControllerEvent;
use crate::replica_state_machine::ReplicaState;
use crate::request_queue::{Push, RequestQueue};

/// The oldest LeaderAndIsr version the controller builds (topic ids and `type`).
pub const LEADER_AND_ISR_MIN_VERSION: i16 = 5;
/// The oldest UpdateMetadata version the controller builds (topic ids).
pub const UPDATE_METADATA_MIN_VERSION: i16 = 7;
/// The oldest StopReplica version the controller builds (per-partition epochs and deletes).
pub const STOP_REPLICA_MIN_VERSION: i16 = 3;
/// How many control requests may wait for one broker.
pub const BROKER_QUEUE_CAPACITY: usize = 1024;
/// The listener name and security protocol control requests use.
const PLAINTEXT: &str = "PLAINTEXT";
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One request for one broker.
#[derive(Debug, Clone)]
pub enum ControlRequest {
    /// LeaderAndIsr.
    LeaderAndIsr(LeaderAndIsrRequest),
    /// UpdateMetadata.
    UpdateMetadata(UpdateMetadataRequest),
    /// StopReplica; `deleted` lists the partitions whose deletion the response confirms.
    StopReplica {
        /// The request.
        request: StopReplicaRequest,
        /// Partitions with `delete_partition` set.
        deleted: Vec<TopicPartition>,
    },
}

/// The per-broker queues.
#[derive(Debug)]
pub struct ChannelManager {
    brokers: BTreeMap<BrokerId, BrokerChannel>,
    events: mpsc::Sender<ControllerEvent>,
    options: ConnectionOptions,
    /// Signalled whenever a broker finished a request (see [`ChannelManager::barrier`]).
    progress: Arc<Notify>,
    /// Numbers the queues, so a barrier on a replaced queue is not mistaken for the new one.
    next_generation: u64,
    /// Requests each broker's queue holds before it merges ([`BROKER_QUEUE_CAPACITY`]).
    queue_capacity: usize,
    key: Option<ControlPlaneKey>,
    /// The listener control requests are sent to.
    control_listener: String,
}

#[derive(Debug)]
struct BrokerChannel {
    queue: Arc<SharedQueue>,
    task: JoinHandle<()>,
    /// Requests merged into queued ones since the queue was last below capacity.
    coalesced: u64,
    generation: u64,
    /// Requests queued so far.
    queued: u64,
    /// Requests the broker answered (or that were given up for good), in queue order.
    completed: Arc<AtomicU64>,
}

/// A broker's queue, shared with its send task.
#[derive(Debug)]
struct SharedQueue {
    requests: Mutex<RequestQueue>,
    /// One permit per push: wakes the send task.
    pushed: Notify,
}

impl SharedQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, RequestQueue> {
        // Every operation on the queue is a single push, pop or clear.
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn next(&self) -> ControlRequest {
        loop {
            if let Some(request) = self.lock().pop() {
                return request;
            }
            self.pushed.notified().await;
        }
    }
}

/// What [`ChannelManager::send`] did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// Queued.
    Queued,
    /// The queue was full: merged into a queued request.
    Coalesced,
    /// The queue was full and merging would reorder: nothing queued; resync the broker.
    Full,
    /// No queue for this broker (not live).
    NoQueue,
}

/// A point in every broker's queue: passed once each broker has answered every request
/// queued before it (a broker that left, or whose queue was replaced, counts as passed).
/// Requests to one broker are sent and answered in order, so passing a barrier taken after an
/// UpdateMetadata was queued means that broker's metadata cache holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Barrier(Vec<(BrokerId, u64, u64)>);

impl ChannelManager {
    /// No brokers yet; responses become events on `events`.
    pub fn new(
        controller_id: BrokerId,
        request_timeout: Duration,
        key: Option<ControlPlaneKey>,
        events: mpsc::Sender<ControllerEvent>,
    ) -> Self {
        let options = ConnectionOptions {
            client_id: format!("controller-{controller_id}"),
            request_timeout,
            ..ConnectionOptions::default()
        };
        ChannelManager {
            brokers: BTreeMap::new(),
            events,
            options,
            progress: Arc::new(Notify::new()),
            next_generation: 0,
            queue_capacity: BROKER_QUEUE_CAPACITY,
            key,
            control_listener: PLAINTEXT.to_owned(),
        }
    }

    /// Sends control requests to each broker's endpoint on `listener`
    /// (`control.plane.listener.name`, else `inter.broker.listener.name`), secured as
    /// `security` says (the listener's TLS and the broker's SASL login).
    pub fn with_control_listener(mut self, listener: &str, security: &client::Security) -> Self {
        self.control_listener = listener.to_owned();
        self.options.tls.clone_from(&security.tls);
        self.options.sasl.clone_from(&security.sasl);
        self
    }

    /// The same, with room for `capacity` requests per broker (tests use tiny queues).
    pub fn with_queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// How many requests wait in `broker`'s queue.
    pub fn queued(&self, broker: BrokerId) -> usize {
        self.brokers
            .get(&broker)
            .map_or(0, |c| c.queue.lock().len())
    }

    /// Notified (one stored permit) whenever some broker finishes a request.
    pub fn progress(&self) -> Arc<Notify> {
        Arc::clone(&self.progress)
    }

    /// The current end of every broker's queue.
    pub fn barrier(&self) -> Barrier {
        Barrier(
            self.brokers
                .iter()
                .map(|(&id, c)| (id, c.generation, c.queued))
                .collect(),
        )
    }

    /// Whether every broker has answered everything queued before `barrier` was taken.
    pub fn passed(&self, barrier: &Barrier) -> bool {
        barrier
            .0
            .iter()
            .all(|&(id, generation, queued)| match self.brokers.get(&id) {
                Some(c) if c.generation == generation => {
                    c.completed.load(Ordering::Acquire) >= queued
                }
                _ => true,
            })
    }

    /// Waits until every broker has answered what is queued now, for at most `within`;
    /// returns whether they all did.
    pub async fn drain(&self, within: Duration) -> bool {
        let barrier = self.barrier();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Registered before the check, so an answer between the two is not missed.
            let progressed = self.progress.notified();
            if self.passed(&barrier) {
                return true;
            }
            if tokio::time::timeout_at(deadline, progressed).await.is_err() {
                return self.passed(&barrier);
            }
        }
    }

    /// Starts the queue of a broker (replacing an older one).
    pub fn add_broker(&mut self, broker: &LiveBroker) {
        self.remove_broker(broker.id);
        let queue = Arc::new(SharedQueue {
            requests: Mutex::new(RequestQueue::new(self.queue_capacity)),
            pushed: Notify::new(),
        });
        // Control requests go to the control-plane listener (KIP-291), else the inter-broker
        // one (the broker's host and port).
        let addr = match broker.endpoint(&self.control_listener) {
            Some((host, port)) => format!("{host}:{port}"),
            None => format!("{}:{}", broker.host, broker.port),
        };
        let completed = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(send_loop(
            broker.id,
            addr,
            self.control_listener.clone(),
            self.options.clone(),
            Arc::clone(&queue),
            self.key.clone(),
            self.events.clone(),
            Progress {
                completed: Arc::clone(&completed),
                notify: Arc::clone(&self.progress),
            },
        ));
        self.next_generation += 1;
        self.brokers.insert(
            broker.id,
            BrokerChannel {
                queue,
                task,
                coalesced: 0,
                generation: self.next_generation,
                queued: 0,
                completed,
            },
        );
    }

    /// Drops a broker's queue (it is gone, or is resynced); requests still queued are
    /// dropped with it, which is logged.
    pub fn remove_broker(&mut self, id: BrokerId) {
        if let Some(channel) = self.brokers.remove(&id) {
            channel.task.abort();
            let dropped = channel.queue.lock().clear();
            if dropped > 0 {
                info!(
                    broker = id,
                    dropped, "send queue removed with requests still queued"
                );
            }
        }
    }

    /// Drops every queue (resignation).
    pub fn clear(&mut self) {
        for id in self.brokers.keys().copied().collect::<Vec<_>>() {
            self.remove_broker(id);
        }
    }

    /// Queues `request` for `broker`; a full queue merges it into a queued request or says
    /// [`SendOutcome::Full`] (use [`ChannelManager::send_batch`], which then resyncs).
    pub fn send(&mut self, broker: BrokerId, request: ControlRequest) -> SendOutcome {
        let Some(channel) = self.brokers.get_mut(&broker) else {
            warn!(
                broker,
                "no send queue for broker (not live); control request not sent"
            );
            return SendOutcome::NoQueue;
        };
        let mut queue = channel.queue.lock();
        let outcome = match queue.push(request) {
            Push::Queued => {
                if channel.coalesced > 0 && queue.len() <= self.queue_capacity / 2 {
                    info!(
                        broker,
                        coalesced = channel.coalesced,
                        "send queue drained below half; requests were merged while it was full"
                    );
                    channel.coalesced = 0;
                }
                channel.queued += 1;
                SendOutcome::Queued
            }
            Push::Coalesced => {
                if channel.coalesced == 0 {
                    warn!(
                        broker,
                        capacity = self.queue_capacity,
                        "send queue full: merging new requests into queued ones (newest state per partition wins)"
                    );
                }
                channel.coalesced += 1;
                SendOutcome::Coalesced
            }
            Push::Full => SendOutcome::Full,
        };
        drop(queue);
        if outcome == SendOutcome::Queued {
            channel.queue.pushed.notify_one();
        }
        outcome
    }

    /// Builds `batch` from the context and queues each request; a broker whose full queue
    /// cannot take one gets its queue replaced by [`resync_batch`] (logged).
    pub fn send_batch(
        &mut self,
        ctx: &ControllerContext,
        controller_id: BrokerId,
        batch: RequestBatch,
    ) {
        let mut resync = BTreeSet::new();
        for (broker, request) in batch.build(ctx, controller_id) {
            if resync.contains(&broker) {
                continue;
            }
            if self.send(broker, request) == SendOutcome::Full {
                resync.insert(broker);
            }
        }
        for broker in resync {
            let Some(live) = ctx.live_brokers.get(&broker) else {
                continue;
            };
            warn!(
                broker,
                capacity = self.queue_capacity,
                "send queue full with requests that cannot be merged in order: replacing it with a resync from the current state"
            );
            self.add_broker(live);
            for (_, request) in resync_batch(ctx, broker).build(ctx, controller_id) {
                self.send(broker, request);
            }
        }
    }
}

/// Everything `broker` must be told to match the context, in at most three requests: a
/// LeaderAndIsr for each of its replicas that serves (Online or New, with leadership), a
/// StopReplica for each it must stop (Offline) or delete (ReplicaDeletionStarted), and an
/// UpdateMetadata with every partition.
pub fn resync_batch(ctx: &ControllerContext, broker: BrokerId) -> RequestBatch {
    let mut batch = RequestBatch::default();
    for replica in ctx.replicas_on_broker(broker) {
        let tp = &replica.tp;
        match ctx.replica_state(&replica) {
            ReplicaState::Online | ReplicaState::New
                if ctx.leadership.contains_key(tp)
                    && !ctx.is_topic_queued_for_deletion(&tp.topic) =>
            {
                batch.add_leader_and_isr(&[broker], tp, false)
            }
            ReplicaState::Offline => batch.add_stop_replica(broker, tp, false),
            ReplicaState::ReplicaDeletionStarted => batch.add_stop_replica(broker, tp, true),
            _ => {}
        }
    }
    let all: Vec<_> = ctx.leadership.keys().cloned().collect();
    batch.add_update_metadata(&[broker], &all);
    batch
}

impl Drop for ChannelManager {
    fn drop(&mut self) {
        self.clear();
    }
}

/// How a send loop reports that it finished a request.
#[derive(Debug)]
struct Progress {
    completed: Arc<AtomicU64>,
    notify: Arc<Notify>,
}

impl Progress {
    fn done(&self) {
        self.completed.fetch_add(1, Ordering::Release);
        self.notify.notify_one();
    }
}

#[allow(clippy::too_many_arguments)]
async fn send_loop(
    broker: BrokerId,
    addr: String,
    listener: String,
    options: ConnectionOptions,
    queue: Arc<SharedQueue>,
    key: Option<ControlPlaneKey>,
    events: mpsc::Sender<ControllerEvent>,
    progress: Progress,
) {
    let mut connection: Option<Connection> = None;
    loop {
        let request = queue.next().await;
        let mut backoff = RECONNECT_BACKOFF_MIN;
        let mut stale_refusals = 0;
        let tags = proof_tags(key.as_ref(), &request, broker);
        loop {
            match send_once(broker, &mut connection, &addr, &options, &request, &tags).await {
                Ok(Some(event)) => {
                    let _ = events.send(event).await;
                    break;
                }
                Ok(None) => break,
                Err(SendError::StaleControllerEpoch) if stale_refusals < STALE_EPOCH_RETRIES => {
                    // The broker checks a new controller epoch against the store, whose
                    // replica it reads may lag behind ours: ask again shortly.
                    stale_refusals += 1;
                    warn!(broker, %addr, attempt = stale_refusals,
                        "broker refused our controller epoch; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
                Err(SendError::StaleControllerEpoch) => {
                    error!(broker, %addr, "broker keeps refusing our controller epoch (a newer controller exists); request given up");
                    report_undeliverable(
                        broker,
                        &request,
                        ResponseError::StaleControllerEpoch,
                        &events,
                    )
                    .await;
                    break;
                }
                Err(SendError::Unconfirmed) => {
                    // Not a verdict on our epoch: the broker could not ask the store (a broker
                    // paused past its session registers again before its own reads switch to
                    // the new session). Dropping the request would leave its partitions
                    // without a leader for good; it is sent again until the broker can check
                    // it, or leaves the live set (which ends this loop).
                    warn!(broker, %addr, retry_in_ms = backoff.as_millis() as u64,
                        "broker could not confirm our controller epoch with the metadata store; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
                Err(SendError::Client(
                    err @ (ClientError::UnsupportedVersion { .. } | ClientError::Config(_)),
                )) => {
                    // Retrying cannot help: the broker cannot take this request at all.
                    error!(broker, %addr, error = %err, "control request refused for good; dropped");
                    report_undeliverable(
                        broker,
                        &request,
                        ResponseError::UnsupportedVersion,
                        &events,
                    )
                    .await;
                    break;
                }
                Err(SendError::Client(err)) if err.is_authentication() => {
                    // Wrong credentials or an untrusted certificate: logged loudly, retried
                    // with back-off (someone may fix the peer's users or certificates).
                    error!(broker, %addr, %listener, error = %err, retry_in_ms = backoff.as_millis() as u64,
                        "connection to broker {broker} ({addr}) on listener {listener} failed authentication; retrying");
                    connection = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
                Err(SendError::Client(err)) => {
                    warn!(broker, %addr, error = %err, "control request failed; reconnecting");
                    connection = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
            }
        }
        progress.done();
    }
}

/// How often a request refused for its controller epoch is sent again.
const STALE_EPOCH_RETRIES: u32 = 10;

/// The refusals of a whole control request that sending it again may cure.
fn refused(error_code: i16) -> Result<(), SendError> {
    if error_code == ResponseError::StaleControllerEpoch.code() {
        Err(SendError::StaleControllerEpoch)
    } else if error_code == ResponseError::NotController.code() {
        Err(SendError::Unconfirmed)
    } else {
        Ok(())
    }
}

/// Why a request was not answered.
#[derive(Debug)]
enum SendError {
    /// Transport or protocol failure.
    Client(ClientError),
    /// The broker answered STALE_CONTROLLER_EPOCH.
    StaleControllerEpoch,
    /// The broker answered NOT_CONTROLLER: it could not read the store to confirm us (its
    /// session is being replaced after an expiry, or the store is unreachable from it).
    Unconfirmed,
}

impl From<ClientError> for SendError {
    fn from(err: ClientError) -> Self {
        SendError::Client(err)
    }
}

/// A StopReplica(delete) that will never be answered: tell the deletion manager it failed.
async fn report_undeliverable(
    broker: BrokerId,
    request: &ControlRequest,
    error: ResponseError,
    events: &mpsc::Sender<ControllerEvent>,
) {
    if let ControlRequest::StopReplica { deleted, .. } = request {
        if !deleted.is_empty() {
            let deleted = deleted
                .iter()
                .map(|tp| (tp.clone(), error.code()))
                .collect();
            let _ = events
                .send(ControllerEvent::StopReplicaResponse { broker, deleted })
                .await;
        }
    }
}

/// The header tags that prove `request` comes from the controller it names.
fn proof_tags(
    key: Option<&ControlPlaneKey>,
    request: &ControlRequest,
    receiver: BrokerId,
) -> BTreeMap<i32, Bytes> {
    let Some(key) = key else {
        return BTreeMap::new();
    };
    let (controller_id, epoch) = match request {
        ControlRequest::LeaderAndIsr(r) => (r.controller_id.0, r.controller_epoch),
        ControlRequest::UpdateMetadata(r) => (r.controller_id.0, r.controller_epoch),
        ControlRequest::StopReplica { request, .. } => {
            (request.controller_id.0, request.controller_epoch)
        }
    };
    let proof = key.proof(controller_id, epoch, receiver);
    BTreeMap::from([(PROOF_TAG, Bytes::copy_from_slice(&proof))])
}

/// The version a control request goes to `conn`'s broker at: the newest both sides offer,
/// refused when that is older than `min`, the oldest this controller can build.
fn control_version<R: kafka_protocol::protocol::Request>(
    conn: &Connection,
    min: i16,
) -> Result<i16, ClientError> {
    let version = conn.negotiated_version::<R>()?;
    if version < min {
        let api = ApiKey::try_from(R::KEY).map_err(|()| ClientError::Protocol {
            addr: conn.addr().to_owned(),
            message: format!("unknown api key {}", R::KEY),
        })?;
        return Err(ClientError::UnsupportedVersion {
            api,
            client: format!("{min}..{}", R::VERSIONS.max),
            broker: conn.broker_versions(api),
        });
    }
    Ok(version)
}

/// Sends one request; returns the event its response produces, if any.
async fn send_once(
    broker: BrokerId,
    connection: &mut Option<Connection>,
    addr: &str,
    options: &ConnectionOptions,
    request: &ControlRequest,
    tags: &BTreeMap<i32, Bytes>,
) -> Result<Option<ControllerEvent>, SendError> {
    if connection.is_none() {
        *connection = Some(Connection::connect_with(addr, options.clone()).await?);
    }
    let Some(conn) = connection.as_mut() else {
        return Ok(None);
    };
    match request {
        ControlRequest::LeaderAndIsr(req) => {
            let version = control_version::<LeaderAndIsrRequest>(conn, LEADER_AND_ISR_MIN_VERSION)?;
            let mut req = req.clone();
            if version < 6 {
                // Leader recovery state is v6+ (KIP-704); older brokers do not know it.
                for topic in &mut req.topic_states {
                    for p in &mut topic.partition_states {
                        p.leader_recovery_state = 0;
                    }
                }
            }
            let response = conn.send_version_tagged(req, version, tags).await?;
            refused(response.error_code)?;
            if response.error_code != 0 {
                warn!(%addr, error_code = response.error_code, "LeaderAndIsr refused");
            }
            for topic in &response.topics {
                for partition in topic.partition_errors.iter().filter(|p| p.error_code != 0) {
                    warn!(%addr, partition = partition.partition_index, error_code = partition.error_code, "LeaderAndIsr partition error");
                }
            }
            Ok(None)
        }
        ControlRequest::UpdateMetadata(req) => {
            let version =
                control_version::<UpdateMetadataRequest>(conn, UPDATE_METADATA_MIN_VERSION)?;
            let response = conn.send_version_tagged(req.clone(), version, tags).await?;
            refused(response.error_code)?;
            if response.error_code != 0 {
                warn!(%addr, error_code = response.error_code, "UpdateMetadata refused");
            }
            Ok(None)
        }
        ControlRequest::StopReplica { request, deleted } => {
            let version = control_version::<StopReplicaRequest>(conn, STOP_REPLICA_MIN_VERSION)?;
            let response = conn
                .send_version_tagged(request.clone(), version, tags)
                .await?;
            refused(response.error_code)?;
            debug!(%addr, error_code = response.error_code, "StopReplica answered");
            if deleted.is_empty() {
                return Ok(None);
            }
            let errors: BTreeMap<(String, i32), i16> = response
                .partition_errors
                .iter()
                .map(|p| {
                    (
                        (p.topic_name.0.as_str().to_owned(), p.partition_index),
                        p.error_code,
                    )
                })
                .collect();
            let results = deleted
                .iter()
                .map(|tp| {
                    let code = if response.error_code != 0 {
                        response.error_code
                    } else {
                        errors
                            .get(&(tp.topic.as_str().to_owned(), tp.partition))
                            .copied()
                            .unwrap_or(0)
                    };
                    (tp.clone(), code)
                })
                .collect();
            Ok(Some(ControllerEvent::StopReplicaResponse {
                broker,
                deleted: results,
            }))
        }
    }
}

/// The control requests of one event, per broker (Kafka's `ControllerBrokerRequestBatch`).
#[derive(Debug, Default)]
pub struct RequestBatch {
    leader_and_isr: BTreeMap<BrokerId, BTreeMap<TopicPartition, bool>>,
    update_metadata: BTreeMap<BrokerId, BTreeSet<TopicPartition>>,
    stop_replica: BTreeMap<BrokerId, BTreeMap<TopicPartition, bool>>,
}

impl RequestBatch {
    /// Adds LeaderAndIsr for `tp` to each broker.
    pub fn add_leader_and_isr(&mut self, brokers: &[BrokerId], tp: &TopicPartition, is_new: bool) {
        for &broker in brokers {
            let entry = self
                .leader_and_isr
                .entry(broker)
                .or_default()
                .entry(tp.clone())
                .or_insert(is_new);
            *entry |= is_new;
        }
    }

    /// Adds UpdateMetadata for `partitions` to each broker (an empty list still sends).
    pub fn add_update_metadata(&mut self, brokers: &[BrokerId], partitions: &[TopicPartition]) {
        for &broker in brokers {
            self.update_metadata
                .entry(broker)
                .or_default()
                .extend(partitions.iter().cloned());
        }
    }

    /// Adds StopReplica for `tp` to `broker`; delete wins over a stop without delete.
    pub fn add_stop_replica(&mut self, broker: BrokerId, tp: &TopicPartition, delete: bool) {
        let entry = self
            .stop_replica
            .entry(broker)
            .or_default()
            .entry(tp.clone())
            .or_insert(delete);
        *entry |= delete;
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.leader_and_isr.is_empty()
            && self.update_metadata.is_empty()
            && self.stop_replica.is_empty()
    }

    /// Builds the requests from the context, per live broker, in Kafka's order:
    /// LeaderAndIsr, then UpdateMetadata, then StopReplica.
    pub fn build(
        self,
        ctx: &ControllerContext,
        controller_id: BrokerId,
    ) -> Vec<(BrokerId, ControlRequest)> {
        let mut out = Vec::new();
        for (broker, partitions) in &self.leader_and_isr {
            if let Some(live) = ctx.live_brokers.get(broker) {
                if let Some(request) = leader_and_isr_request(ctx, controller_id, live, partitions)
                {
                    out.push((*broker, ControlRequest::LeaderAndIsr(request)));
                }
            }
        }
        for (broker, partitions) in &self.update_metadata {
            if let Some(live) = ctx.live_brokers.get(broker) {
                out.push((
                    *broker,
                    ControlRequest::UpdateMetadata(update_metadata_request(
                        ctx,
                        controller_id,
                        live,
                        partitions,
                    )),
                ));
            }
        }
        for (broker, partitions) in &self.stop_replica {
            if let Some(live) = ctx.live_brokers.get(broker) {
                let deleted = partitions
                    .iter()
                    .filter(|(_, &d)| d)
                    .map(|(tp, _)| tp.clone())
                    .collect();
                let request = stop_replica_request(ctx, controller_id, live, partitions);
                out.push((*broker, ControlRequest::StopReplica { request, deleted }));
            }
        }
        out
    }
}

fn wire_topic(topic: &TopicName) -> WireTopicName {
    WireTopicName(StrBytes::from_string(topic.as_str().to_owned()))
}

fn wire_ids(ids: &[BrokerId]) -> Vec<WireBrokerId> {
    ids.iter().map(|&id| WireBrokerId(id)).collect()
}

fn topic_uuid(ctx: &ControllerContext, topic: &TopicName) -> uuid::Uuid {
    let bytes = ctx
        .topic_ids
        .get(topic)
        .map(|id| *id.as_bytes())
        .unwrap_or([0; 16]);
    uuid::Uuid::from_bytes(bytes)
}

fn group_by_topic<'a, V>(
    partitions: impl IntoIterator<Item = (&'a TopicPartition, V)>,
) -> BTreeMap<&'a TopicName, Vec<(i32, V)>> {
    let mut by_topic: BTreeMap<&TopicName, Vec<(i32, V)>> = BTreeMap::new();
    for (tp, v) in partitions {
        by_topic
            .entry(&tp.topic)
            .or_default()
            .push((tp.partition, v));
    }
    by_topic
}

/// LeaderAndIsr (v5+: topic ids) for `broker`; `None` when no partition has leadership yet.
pub fn leader_and_isr_request(
    ctx: &ControllerContext,
    controller_id: BrokerId,
    broker: &LiveBroker,
    partitions: &BTreeMap<TopicPartition, bool>,
) -> Option<LeaderAndIsrRequest> {
    let mut leaders = BTreeSet::new();
    let mut topic_states = Vec::new();
    for (topic, entries) in group_by_topic(partitions.iter().map(|(tp, &is_new)| (tp, is_new))) {
        let mut partition_states = Vec::new();
        for (partition, is_new) in entries {
            let tp = TopicPartition::new(topic.clone(), partition);
            let Some(leadership) = ctx.leadership.get(&tp) else {
                continue;
            };
            leaders.insert(leadership.leader);
            partition_states.push(
                LeaderAndIsrPartitionState::default()
                    .with_topic_name(wire_topic(topic))
                    .with_partition_index(partition)
                    .with_controller_epoch(leadership.controller_epoch)
                    .with_leader(WireBrokerId(leadership.leader))
                    .with_leader_epoch(leadership.leader_epoch)
                    .with_isr(wire_ids(&leadership.isr))
                    .with_partition_epoch(leadership.zk_version)
                    .with_leader_recovery_state(leadership.leader_recovery_state.value())
                    .with_replicas(wire_ids(ctx.replicas(&tp)))
                    .with_adding_replicas(wire_ids(
                        ctx.reassignments.get(&tp).map_or(&[][..], |r| &r.adding),
                    ))
                    .with_removing_replicas(wire_ids(
                        ctx.reassignments.get(&tp).map_or(&[][..], |r| &r.removing),
                    ))
                    .with_is_new(is_new),
            );
        }
        if !partition_states.is_empty() {
            topic_states.push(
                LeaderAndIsrTopicState::default()
                    .with_topic_name(wire_topic(topic))
                    .with_topic_id(topic_uuid(ctx, topic))
                    .with_partition_states(partition_states),
            );
        }
    }
    if topic_states.is_empty() {
        return None;
    }
    let live_leaders = leaders
        .iter()
        .filter_map(|id| ctx.live_brokers.get(id))
        .map(|b| {
            LeaderAndIsrLiveLeader::default()
                .with_broker_id(WireBrokerId(b.id))
                .with_host_name(StrBytes::from_string(b.host.clone()))
                .with_port(b.port)
        })
        .collect();
    Some(
        LeaderAndIsrRequest::default()
            .with_controller_id(WireBrokerId(controller_id))
            .with_controller_epoch(ctx.epoch)
            .with_broker_epoch(broker.epoch)
            .with_topic_states(topic_states)
            .with_live_leaders(live_leaders),
    )
}

/// UpdateMetadata (v7+: topic ids) for `broker`: the live brokers and the given partitions (leader -2 for
/// topics being deleted; partitions without leadership are left out).
pub fn update_metadata_request(
    ctx: &ControllerContext,
    controller_id: BrokerId,
    broker: &LiveBroker,
    partitions: &BTreeSet<TopicPartition>,
) -> UpdateMetadataRequest {
    let mut topic_states = Vec::new();
    for (topic, entries) in group_by_topic(partitions.iter().map(|tp| (tp, ()))) {
        let deleting = ctx.is_topic_queued_for_deletion(topic);
        let partition_states: Vec<_> = entries
            .into_iter()
            .filter_map(|(partition, ())| {
                let tp = TopicPartition::new(topic.clone(), partition);
                let leadership = ctx.leadership.get(&tp)?;
                let replicas = ctx.replicas(&tp);
                let offline: Vec<_> = replicas
                    .iter()
                    .copied()
                    .filter(|&b| !ctx.is_live(b))
                    .collect();
                Some(
                    UpdateMetadataPartitionState::default()
                        .with_topic_name(wire_topic(topic))
                        .with_partition_index(partition)
                        .with_controller_epoch(leadership.controller_epoch)
                        .with_leader(WireBrokerId(if deleting {
                            LEADER_DURING_DELETE
                        } else {
                            leadership.leader
                        }))
                        .with_leader_epoch(leadership.leader_epoch)
                        .with_isr(wire_ids(&leadership.isr))
                        .with_zk_version(leadership.zk_version)
                        .with_replicas(wire_ids(replicas))
                        .with_offline_replicas(wire_ids(&offline)),
                )
            })
            .collect();
        if !partition_states.is_empty() {
            topic_states.push(
                UpdateMetadataTopicState::default()
                    .with_topic_name(wire_topic(topic))
                    .with_topic_id(topic_uuid(ctx, topic))
                    .with_partition_states(partition_states),
            );
        }
    }
    let live_brokers = ctx
        .live_brokers
        .values()
        .map(|b| {
            UpdateMetadataBroker::default()
                .with_id(WireBrokerId(b.id))
                .with_endpoints(endpoints(b))
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    UpdateMetadataRequest::default()
        .with_controller_id(WireBrokerId(controller_id))
        .with_controller_epoch(ctx.epoch)
        .with_broker_epoch(broker.epoch)
        .with_topic_states(topic_states)
        .with_live_brokers(live_brokers)
}

/// Every endpoint of `broker` for UpdateMetadata (one PLAINTEXT endpoint from its host and
/// port when it registered none, as tests' brokers do).
fn endpoints(broker: &LiveBroker) -> Vec<UpdateMetadataEndpoint> {
    if broker.endpoints.is_empty() {
        return vec![UpdateMetadataEndpoint::default()
            .with_host(StrBytes::from_string(broker.host.clone()))
            .with_port(broker.port)
            .with_listener(StrBytes::from_static_str(PLAINTEXT))
            .with_security_protocol(0)];
    }
    broker
        .endpoints
        .iter()
        .map(|(name, host, port, protocol)| {
            UpdateMetadataEndpoint::default()
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(*port)
                .with_listener(StrBytes::from_string(name.clone()))
                .with_security_protocol(*protocol)
        })
        .collect()
}

/// StopReplica (v3+) for `broker` (leader epoch -2 for topics being deleted, as Kafka).
pub fn stop_replica_request(
    ctx: &ControllerContext,
    controller_id: BrokerId,
    broker: &LiveBroker,
    partitions: &BTreeMap<TopicPartition, bool>,
) -> StopReplicaRequest {
    let topic_states = group_by_topic(partitions.iter().map(|(tp, &delete)| (tp, delete)))
        .into_iter()
        .map(|(topic, entries)| {
            let deleting = ctx.is_topic_queued_for_deletion(topic);
            let partition_states = entries
                .into_iter()
                .map(|(partition, delete)| {
                    let tp = TopicPartition::new(topic.clone(), partition);
                    let leader_epoch = if deleting {
                        EPOCH_DURING_DELETE
                    } else {
                        ctx.leadership
                            .get(&tp)
                            .map(|l| l.leader_epoch)
                            .unwrap_or(-1)
                    };
                    StopReplicaPartitionState::default()
                        .with_partition_index(partition)
                        .with_leader_epoch(leader_epoch)
                        .with_delete_partition(delete)
                })
                .collect();
            StopReplicaTopicState::default()
                .with_topic_name(wire_topic(topic))
                .with_partition_states(partition_states)
        })
        .collect();
    StopReplicaRequest::default()
        .with_controller_id(WireBrokerId(controller_id))
        .with_controller_epoch(ctx.epoch)
        .with_broker_epoch(broker.epoch)
        .with_topic_states(topic_states)
}

#[cfg(test)]
mod tests {
    use model::LeaderRecoveryState;

    use super::*;
    use crate::context::LeaderIsrAndControllerEpoch;
    use crate::test_support::{ctx_with, name, tp};

    fn ctx() -> ControllerContext {
        let mut ctx = ctx_with(&[0, 1], &[("t", &[&[0, 1], &[1, 2]])]);
        for (p, leader) in [(0, 0), (1, 1)] {
            ctx.leadership.insert(
                tp("t", p),
                LeaderIsrAndControllerEpoch {
                    leader,
                    leader_epoch: 3,
                    isr: vec![leader],
                    controller_epoch: 1,
                    zk_version: 4,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                },
            );
        }
        ctx
    }

    #[test]
    fn batch_builds_kafkas_requests_per_live_broker_in_order() {
        let ctx = ctx();
        let mut batch = RequestBatch::default();
        batch.add_leader_and_isr(&[0, 1, 2], &tp("t", 0), true);
        batch.add_update_metadata(&[0, 1], &[tp("t", 0), tp("t", 1)]);
        batch.add_stop_replica(1, &tp("t", 1), false);
        batch.add_stop_replica(1, &tp("t", 1), true);
        let requests = batch.build(&ctx, 7);
        let kinds: Vec<_> = requests
            .iter()
            .map(|(b, r)| match r {
                ControlRequest::LeaderAndIsr(_) => (*b, "LeaderAndIsr"),
                ControlRequest::UpdateMetadata(_) => (*b, "UpdateMetadata"),
                ControlRequest::StopReplica { .. } => (*b, "StopReplica"),
            })
            .collect();
        // Broker 2 is not live: nothing for it.
        assert_eq!(
            kinds,
            vec![
                (0, "LeaderAndIsr"),
                (1, "LeaderAndIsr"),
                (0, "UpdateMetadata"),
                (1, "UpdateMetadata"),
                (1, "StopReplica")
            ]
        );
        let ControlRequest::LeaderAndIsr(lai) = &requests[0].1 else {
            unreachable!()
        };
        assert_eq!(
            (lai.controller_id.0, lai.controller_epoch, lai.broker_epoch),
            (7, 1, 100)
        );
        let p = &lai.topic_states[0].partition_states[0];
        assert_eq!(
            (p.leader.0, p.leader_epoch, p.partition_epoch, p.is_new),
            (0, 3, 4, true)
        );
        assert_eq!(
            p.replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            lai.live_leaders
                .iter()
                .map(|l| (l.broker_id.0, l.port))
                .collect::<Vec<_>>(),
            vec![(0, 9092)]
        );
        assert_eq!(p.leader_recovery_state, 0);
        // Stop and delete of one partition merge into one entry that deletes.
        let ControlRequest::StopReplica { request, deleted } = &requests[4].1 else {
            unreachable!()
        };
        assert_eq!(deleted, &vec![tp("t", 1)]);
        assert!(request.topic_states[0].partition_states[0].delete_partition);
        assert_eq!(request.topic_states[0].partition_states[0].leader_epoch, 3);
    }

    #[test]
    fn leader_and_isr_carries_recovering_after_an_unclean_election() {
        let mut ctx = ctx();
        ctx.leadership
            .get_mut(&tp("t", 1))
            .unwrap()
            .leader_recovery_state = LeaderRecoveryState::Recovering;
        let mut batch = RequestBatch::default();
        batch.add_leader_and_isr(&[1], &tp("t", 0), false);
        batch.add_leader_and_isr(&[1], &tp("t", 1), false);
        let requests = batch.build(&ctx, 7);
        let ControlRequest::LeaderAndIsr(lai) = &requests[0].1 else {
            unreachable!()
        };
        let states: Vec<_> = lai.topic_states[0]
            .partition_states
            .iter()
            .map(|p| (p.partition_index, p.leader_recovery_state))
            .collect();
        assert_eq!(states, vec![(0, 0), (1, 1)]);
    }

    /// A broker that answers ApiVersions at once and every UpdateMetadata after `delay`.
    async fn slow_broker(delay: Duration) -> i32 {
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        use kafka_protocol::messages::{
            ApiKey, ApiVersionsResponse, ResponseHeader, UpdateMetadataResponse,
        };
        use kafka_protocol::protocol::Encodable;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            loop {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).await.is_err() {
                    return;
                }
                let mut frame = vec![0u8; u32::from_be_bytes(size) as usize];
                stream.read_exact(&mut frame).await.unwrap();
                let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
                let version = i16::from_be_bytes([frame[2], frame[3]]);
                let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                let mut out = bytes::BytesMut::new();
                ResponseHeader::default()
                    .with_correlation_id(correlation_id)
                    .encode(&mut out, api.response_header_version(version))
                    .unwrap();
                if api == ApiKey::ApiVersions {
                    let keys = [(ApiKey::ApiVersions, 3), (ApiKey::UpdateMetadata, 7)]
                        .into_iter()
                        .map(|(key, max)| {
                            ApiVersion::default()
                                .with_api_key(key as i16)
                                .with_max_version(max)
                        })
                        .collect();
                    ApiVersionsResponse::default()
                        .with_api_keys(keys)
                        .encode(&mut out, version)
                        .unwrap();
                } else {
                    tokio::time::sleep(delay).await;
                    UpdateMetadataResponse::default()
                        .encode(&mut out, version)
                        .unwrap();
                }
                stream
                    .write_all(&(out.len() as u32).to_be_bytes())
                    .await
                    .unwrap();
                stream.write_all(&out).await.unwrap();
            }
        });
        port
    }

    /// A broker advertising `ranges` (api, max) that answers every control request with an
    /// empty success at the version asked, and reports each (api, version) it received.
    async fn recording_broker(
        ranges: Vec<(kafka_protocol::messages::ApiKey, i16)>,
    ) -> (
        i32,
        mpsc::UnboundedReceiver<(kafka_protocol::messages::ApiKey, i16)>,
    ) {
        refusing_broker(ranges, 0).await
    }

    /// [`recording_broker`] that answers its first `refusals` LeaderAndIsr requests with
    /// NOT_CONTROLLER (a broker that cannot reach the store to confirm the controller).
    async fn refusing_broker(
        ranges: Vec<(kafka_protocol::messages::ApiKey, i16)>,
        refusals: usize,
    ) -> (
        i32,
        mpsc::UnboundedReceiver<(kafka_protocol::messages::ApiKey, i16)>,
    ) {
        let refusals = Arc::new(std::sync::atomic::AtomicUsize::new(refusals));
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        use kafka_protocol::messages::{
            ApiKey, ApiVersionsResponse, LeaderAndIsrResponse, ResponseHeader, StopReplicaResponse,
            UpdateMetadataResponse,
        };
        use kafka_protocol::protocol::Encodable;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        let (seen, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let ranges = ranges.clone();
                let seen = seen.clone();
                let refusals = refusals.clone();
                tokio::spawn(async move {
                    loop {
                        let mut size = [0u8; 4];
                        if stream.read_exact(&mut size).await.is_err() {
                            return;
                        }
                        let mut frame = vec![0u8; u32::from_be_bytes(size) as usize];
                        if stream.read_exact(&mut frame).await.is_err() {
                            return;
                        }
                        let api =
                            ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
                        let version = i16::from_be_bytes([frame[2], frame[3]]);
                        let correlation_id =
                            i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                        let mut out = bytes::BytesMut::new();
                        ResponseHeader::default()
                            .with_correlation_id(correlation_id)
                            .encode(&mut out, api.response_header_version(version))
                            .unwrap();
                        match api {
                            ApiKey::ApiVersions => {
                                let keys = std::iter::once((ApiKey::ApiVersions, 3))
                                    .chain(ranges.iter().copied())
                                    .map(|(key, max)| {
                                        ApiVersion::default()
                                            .with_api_key(key as i16)
                                            .with_max_version(max)
                                    })
                                    .collect();
                                ApiVersionsResponse::default()
                                    .with_api_keys(keys)
                                    .encode(&mut out, version)
                                    .unwrap();
                            }
                            ApiKey::LeaderAndIsr => {
                                let refuse = refusals
                                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                                        n.checked_sub(1)
                                    })
                                    .is_ok();
                                LeaderAndIsrResponse::default()
                                    .with_error_code(if refuse {
                                        ResponseError::NotController.code()
                                    } else {
                                        0
                                    })
                                    .encode(&mut out, version)
                                    .unwrap()
                            }
                            ApiKey::UpdateMetadata => UpdateMetadataResponse::default()
                                .encode(&mut out, version)
                                .unwrap(),
                            ApiKey::StopReplica => StopReplicaResponse::default()
                                .encode(&mut out, version)
                                .unwrap(),
                            other => panic!("unexpected {other:?}"),
                        }
                        if api != ApiKey::ApiVersions {
                            let _ = seen.send((api, version));
                        }
                        if stream
                            .write_all(&(out.len() as u32).to_be_bytes())
                            .await
                            .is_err()
                            || stream.write_all(&out).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (port, received)
    }

    #[tokio::test]
    async fn control_requests_go_at_the_newest_version_both_sides_offer() {
        use kafka_protocol::messages::ApiKey;
        let both = |broker_max: [i16; 3]| {
            vec![
                (ApiKey::LeaderAndIsr, broker_max[0]),
                (ApiKey::UpdateMetadata, broker_max[1]),
                (ApiKey::StopReplica, broker_max[2]),
            ]
        };
        // A Kafka 3.9 broker (this table), one newer than us, and a Kafka 2.8 broker.
        for (offered, expected) in [
            ([7, 8, 4], [7, 8, 4]),
            ([9, 9, 9], [7, 8, 4]),
            ([5, 7, 3], [5, 7, 3]),
        ] {
            let mut ctx = ctx();
            let (port, mut received) = recording_broker(both(offered)).await;
            ctx.live_brokers.get_mut(&0).unwrap().port = port;
            let (events, _queue) = mpsc::channel(16);
            let mut channels = ChannelManager::new(7, Duration::from_secs(60), None, events);
            channels.add_broker(&ctx.live_brokers[&0]);
            let mut batch = RequestBatch::default();
            batch.add_leader_and_isr(&[0], &tp("t", 0), false);
            batch.add_update_metadata(&[0], &[tp("t", 0)]);
            batch.add_stop_replica(0, &tp("t", 1), false);
            channels.send_batch(&ctx, 7, batch);
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(received.recv().await.unwrap());
            }
            assert_eq!(
                got,
                vec![
                    (ApiKey::LeaderAndIsr, expected[0]),
                    (ApiKey::UpdateMetadata, expected[1]),
                    (ApiKey::StopReplica, expected[2]),
                ],
                "broker offers {offered:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_broker_that_cannot_confirm_us_gets_the_request_again() {
        use kafka_protocol::messages::ApiKey;
        let mut ctx = ctx();
        let offered = vec![
            (ApiKey::LeaderAndIsr, 7),
            (ApiKey::UpdateMetadata, 8),
            (ApiKey::StopReplica, 4),
        ];
        // More refusals than a stale epoch is retried: NOT_CONTROLLER is no verdict.
        let refusals = STALE_EPOCH_RETRIES as usize + 2;
        let (port, mut received) = refusing_broker(offered, refusals).await;
        ctx.live_brokers.get_mut(&0).unwrap().port = port;
        let (events, _queue) = mpsc::channel(16);
        let mut channels = ChannelManager::new(7, Duration::from_secs(60), None, events);
        channels.add_broker(&ctx.live_brokers[&0]);
        let mut batch = RequestBatch::default();
        batch.add_leader_and_isr(&[0], &tp("t", 0), false);
        batch.add_update_metadata(&[0], &[tp("t", 0)]);
        channels.send_batch(&ctx, 7, batch);
        let mut got = Vec::new();
        while got.last() != Some(&ApiKey::UpdateMetadata) {
            let (api, _) = tokio::time::timeout(Duration::from_secs(30), received.recv())
                .await
                .expect("the broker heard nothing more")
                .unwrap();
            got.push(api);
        }
        let sent = got.iter().filter(|a| **a == ApiKey::LeaderAndIsr).count();
        assert_eq!(sent, refusals + 1, "{got:?}");
    }

    #[tokio::test]
    async fn drain_waits_for_the_answers_to_what_is_queued_within_its_bound() {
        let mut ctx = ctx();
        ctx.live_brokers.get_mut(&0).unwrap().port = slow_broker(Duration::from_millis(400)).await;
        let (events, _queue) = mpsc::channel(16);
        let mut channels = ChannelManager::new(7, Duration::from_secs(60), None, events);
        assert!(channels.drain(Duration::ZERO).await, "nothing queued");
        channels.add_broker(&ctx.live_brokers[&0]);
        for p in 0..3 {
            let request = update_metadata_request(
                &ctx,
                7,
                &ctx.live_brokers[&0],
                &BTreeSet::from([tp("t", p)]),
            );
            channels.send(0, ControlRequest::UpdateMetadata(request));
        }
        // Three answers take 1.2 s: a short bound gives up, a long one sees them all.
        let started = std::time::Instant::now();
        assert!(!channels.drain(Duration::from_millis(100)).await);
        assert!(channels.drain(Duration::from_secs(30)).await);
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(1100), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    }

    #[tokio::test]
    async fn a_stalled_broker_gets_merged_requests_then_a_resync_never_a_drop() {
        // A broker that accepts the connection and never answers: the send task waits on
        // its first request, and everything after it queues.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
            drop(socket);
        });
        let mut ctx = ctx();
        ctx.live_brokers.get_mut(&0).unwrap().port = port;
        ctx.replica_states.insert(
            crate::context::PartitionAndReplica {
                tp: tp("t", 0),
                replica: 0,
            },
            ReplicaState::Online,
        );
        let (events, _queue) = mpsc::channel(16);
        let mut channels =
            ChannelManager::new(7, Duration::from_secs(60), None, events).with_queue_capacity(2);
        channels.add_broker(&ctx.live_brokers[&0]);
        let metadata = |ctx: &ControllerContext, p: i32| {
            ControlRequest::UpdateMetadata(update_metadata_request(
                ctx,
                7,
                &ctx.live_brokers[&0],
                &BTreeSet::from([tp("t", p)]),
            ))
        };
        // The first request goes to the send task, two more fill the queue.
        assert_eq!(channels.send(0, metadata(&ctx, 0)), SendOutcome::Queued);
        for _ in 0..100 {
            if channels.queued(0) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut stop = RequestBatch::default();
        stop.add_stop_replica(0, &tp("t", 0), false);
        channels.send_batch(&ctx, 7, stop);
        assert_eq!(channels.send(0, metadata(&ctx, 0)), SendOutcome::Queued);
        // Full: metadata merges.
        assert_eq!(channels.send(0, metadata(&ctx, 1)), SendOutcome::Coalesced);
        assert_eq!(channels.queued(0), 2);
        // A LeaderAndIsr for p0 cannot overtake the queued StopReplica of p0: resync.
        let mut lai = RequestBatch::default();
        lai.add_leader_and_isr(&[0], &tp("t", 0), false);
        channels.send_batch(&ctx, 7, lai);
        // The queue now holds what broker 0 must know, from the context: its replica of t-0
        // (Online) and the metadata; nothing was dropped without being replaced.
        assert_eq!(channels.queued(0), 2);
        held.abort();
    }

    #[test]
    fn resync_tells_a_broker_everything_from_the_context() {
        use crate::context::PartitionAndReplica;
        let mut ctx = ctx();
        let replica = |p: i32| PartitionAndReplica {
            tp: tp("t", p),
            replica: 1,
        };
        ctx.replica_states.insert(replica(0), ReplicaState::Online);
        ctx.replica_states
            .insert(replica(1), ReplicaState::ReplicaDeletionStarted);
        let requests = resync_batch(&ctx, 1).build(&ctx, 7);
        assert_eq!(requests.len(), 3, "{requests:?}");
        let ControlRequest::LeaderAndIsr(lai) = &requests[0].1 else {
            panic!("LeaderAndIsr first: {requests:?}")
        };
        assert_eq!(lai.topic_states[0].partition_states.len(), 1);
        assert_eq!(lai.topic_states[0].partition_states[0].partition_index, 0);
        let ControlRequest::UpdateMetadata(um) = &requests[1].1 else {
            panic!("UpdateMetadata second: {requests:?}")
        };
        assert_eq!(um.topic_states[0].partition_states.len(), 2);
        let ControlRequest::StopReplica { deleted, .. } = &requests[2].1 else {
            panic!("StopReplica last: {requests:?}")
        };
        assert_eq!(deleted, &vec![tp("t", 1)]);
    }

    #[test]
    fn topics_being_deleted_get_leader_and_epoch_minus_two() {
        let mut ctx = ctx();
        ctx.topics_to_be_deleted.insert(name("t"));
        let um = update_metadata_request(
            &ctx,
            0,
            &ctx.live_brokers[&0],
            &BTreeSet::from([tp("t", 1)]),
        );
        let p = &um.topic_states[0].partition_states[0];
        assert_eq!(p.leader.0, LEADER_DURING_DELETE);
        assert_eq!(
            p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(
            um.live_brokers.iter().map(|b| b.id.0).collect::<Vec<_>>(),
            vec![0, 1]
        );
        let sr = stop_replica_request(
            &ctx,
            0,
            &ctx.live_brokers[&1],
            &BTreeMap::from([(tp("t", 1), true)]),
        );
        assert_eq!(
            sr.topic_states[0].partition_states[0].leader_epoch,
            EPOCH_DURING_DELETE
        );
    }
}
