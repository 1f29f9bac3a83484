//! `start` and `ControllerHandle`: how the broker runs the controller and talks to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, AlterPartitionRequest,
    AlterPartitionResponse, ControlledShutdownRequest, ControlledShutdownResponse,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::debug;

use metastore::{SessionState, WatchedEvent};
use znodes::zk_client::{KafkaWatch, KafkaZkClient};

use crate::event::ControllerEvent;
use crate::event_loop::EventLoop;
use crate::replica_election::{self, ElectLeadersAnswer};
use crate::{admin, alter_partition, reassignment};
use crate::{ControllerConfig, CONTROLLER_QUEUE_CAPACITY};

/// A running controller (active or standby). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ControllerHandle {
    events: mpsc::Sender<ControllerEvent>,
    active: Arc<AtomicBool>,
}

/// Starts the controller of one broker on its session: runs for election and, when elected,
/// acts as the cluster's controller until the session ends or [`ControllerHandle::shutdown`].
pub async fn start(zk: KafkaZkClient, config: ControllerConfig) -> ControllerHandle {
    let (events, queue) = mpsc::channel(CONTROLLER_QUEUE_CAPACITY);
    let active = Arc::new(AtomicBool::new(false));
    // Subscribe before anything reads with a watch, so no event is missed.
    tokio::spawn(forward_watches(zk.subscribe_watches(), events.clone()));
    tokio::spawn(forward_session_end(
        zk.subscribe_session_state(),
        events.clone(),
    ));
    // The queue is empty: this cannot fail.
    let _ = events.try_send(ControllerEvent::Startup);
    if config.auto_leader_rebalance_enable {
        tokio::spawn(auto_leader_rebalance_ticks(
            config.leader_imbalance_check_interval,
            events.clone(),
        ));
    }
    let event_loop = EventLoop::new(zk, config, events.clone(), Arc::clone(&active));
    tokio::spawn(event_loop.run(queue));
    ControllerHandle { events, active }
}

impl ControllerHandle {
    /// Whether this broker is the active controller right now.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Events waiting for the event loop (Kafka's `ControllerEventManager.EventQueueSize`).
    pub fn queue_size(&self) -> usize {
        self.events.max_capacity() - self.events.capacity()
    }

    /// Handles CreateTopics (NOT_CONTROLLER in every result unless this is the active controller).
    pub async fn create_topics(
        &self,
        request: CreateTopicsRequest,
        api_version: i16,
    ) -> CreateTopicsResponse {
        let fallback = admin::create_topics::not_controller(&request, api_version);
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::CreateTopics {
            request,
            api_version,
            reply,
            received: tokio::time::Instant::now(),
        };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles CreatePartitions (NOT_CONTROLLER unless active).
    pub async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
        api_version: i16,
    ) -> CreatePartitionsResponse {
        let fallback = admin::create_partitions::not_controller(&request);
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::CreatePartitions {
            request,
            api_version,
            reply,
            received: tokio::time::Instant::now(),
        };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles DeleteTopics (NOT_CONTROLLER unless active); answers once the topics are
    /// deleted or the request's timeout elapses.
    pub async fn delete_topics(
        &self,
        request: DeleteTopicsRequest,
        api_version: i16,
    ) -> DeleteTopicsResponse {
        let fallback = admin::delete_topics::not_controller(&request, api_version);
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::DeleteTopics {
            request,
            api_version,
            reply,
            received: tokio::time::Instant::now(),
        };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles AlterPartition from a partition leader (NOT_CONTROLLER unless active).
    pub async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
        api_version: i16,
    ) -> AlterPartitionResponse {
        let fallback = alter_partition::refused(ResponseError::NotController);
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::AlterPartition {
            request,
            api_version,
            reply,
        };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles ControlledShutdown (NOT_CONTROLLER unless active): moves the broker's
    /// leaderships away and answers the partitions it still leads.
    pub async fn controlled_shutdown(
        &self,
        request: ControlledShutdownRequest,
    ) -> ControlledShutdownResponse {
        let fallback = ControlledShutdownResponse::default()
            .with_error_code(ResponseError::NotController.code());
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::ControlledShutdown {
            broker_id: request.broker_id.0,
            broker_epoch: request.broker_epoch,
            reply,
        };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles ElectLeaders (NOT_CONTROLLER unless active): runs the elections and answers
    /// per partition, with the leaders elected.
    pub async fn elect_leaders(&self, request: ElectLeadersRequest) -> ElectLeadersAnswer {
        let fallback = || ElectLeadersAnswer {
            response: replica_election::refused(&request, ResponseError::NotController),
            elected: Default::default(),
        };
        if !self.is_active() {
            return fallback();
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::ElectLeaders {
            request: request.clone(),
            reply,
        };
        match self.ask(event, response).await {
            Some(answer) => answer,
            None => fallback(),
        }
    }

    /// Handles AlterPartitionReassignments (NOT_CONTROLLER unless active): answers once each
    /// reassignment is started (or refused), not when it completes.
    pub async fn alter_partition_reassignments(
        &self,
        request: AlterPartitionReassignmentsRequest,
    ) -> AlterPartitionReassignmentsResponse {
        let fallback = reassignment::alter_refused(
            ResponseError::NotController,
            "This broker is not the active controller.",
        );
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::AlterPartitionReassignments { request, reply };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Handles ListPartitionReassignments (NOT_CONTROLLER unless active).
    pub async fn list_partition_reassignments(
        &self,
        request: ListPartitionReassignmentsRequest,
    ) -> ListPartitionReassignmentsResponse {
        let fallback = reassignment::list_refused(ResponseError::NotController);
        if !self.is_active() {
            return fallback;
        }
        let (reply, response) = oneshot::channel();
        let event = ControllerEvent::ListPartitionReassignments { request, reply };
        self.ask(event, response).await.unwrap_or(fallback)
    }

    /// Resigns (if active) and stops the event loop.
    pub async fn shutdown(&self) {
        let (done, wait) = oneshot::channel();
        if self
            .events
            .send(ControllerEvent::Shutdown(done))
            .await
            .is_ok()
        {
            let _ = wait.await;
        }
        self.active.store(false, Ordering::SeqCst);
    }

    async fn ask<T>(&self, event: ControllerEvent, response: oneshot::Receiver<T>) -> Option<T> {
        self.events.send(event).await.ok()?;
        response.await.ok()
    }
}

/// Turns the session's watch events into controller events.
async fn forward_watches(
    mut watches: mpsc::Receiver<WatchedEvent>,
    events: mpsc::Sender<ControllerEvent>,
) {
    while let Some(watched) = watches.recv().await {
        let event = match KafkaWatch::classify(&watched) {
            KafkaWatch::Controller => ControllerEvent::ControllerChange,
            KafkaWatch::BrokerIds => ControllerEvent::BrokerChange,
            KafkaWatch::Topics => ControllerEvent::TopicChange,
            KafkaWatch::Topic(topic) => ControllerEvent::PartitionModifications(topic),
            KafkaWatch::DeleteTopics => ControllerEvent::TopicDeletion,
            KafkaWatch::PreferredReplicaElection => ControllerEvent::PreferredReplicaElection,
            KafkaWatch::ReassignPartitions => ControllerEvent::ZkPartitionReassignment,
            KafkaWatch::ConfigChanges | KafkaWatch::Other(_) => continue,
        };
        debug!(?event, "watch fired");
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// Queues the leader-imbalance check every `interval`
/// (`leader.imbalance.check.interval.seconds`) until the loop stops; the event does nothing
/// on a broker that is not the controller.
async fn auto_leader_rebalance_ticks(
    interval: std::time::Duration,
    events: mpsc::Sender<ControllerEvent>,
) {
    let interval = interval.max(std::time::Duration::from_millis(100));
    loop {
        tokio::time::sleep(interval).await;
        // A full queue skips this check: the next one comes an interval later.
        match events.try_send(ControllerEvent::AutoLeaderRebalance) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

/// Sends [`ControllerEvent::SessionExpired`] once the session ends.
async fn forward_session_end(
    mut state: watch::Receiver<SessionState>,
    events: mpsc::Sender<ControllerEvent>,
) {
    loop {
        if matches!(
            *state.borrow_and_update(),
            SessionState::Expired | SessionState::Closed
        ) {
            let _ = events.send(ControllerEvent::SessionExpired).await;
            return;
        }
        if state.changed().await.is_err() {
            let _ = events.send(ControllerEvent::SessionExpired).await;
            return;
        }
    }
}
