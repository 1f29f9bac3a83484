//! The controller's single event loop: election, loading the context, turning each event
//! into state machine effects, and carrying the effects out (store writes fenced on the
//! controller epoch, then control requests batched per broker).
//!
//! Events are processed one at a time, in queue order. Watches are one-shot, so every read
//! that reacts to a watch registers it again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::controlled_shutdown_response::RemainingPartition;
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ControlledShutdownResponse,
    CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
    TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use metastore::SessionState;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{error, info, warn};

use model::{BrokerId, TopicId, TopicName, TopicPartition};
use znodes::json::{PartitionStateZNode, ReassignPartitions};
use znodes::zk_client::{KafkaZkClient, RegisteredBroker, ZkClientError};

use crate::admin::{self, Await, AwaitCondition};
use crate::channel_manager::{Barrier, ChannelManager, RequestBatch};
use crate::context::{
    ControllerContext, LeaderIsrAndControllerEpoch, LiveBroker, PartitionAndReplica,
};
use crate::effect::Effect;
use crate::election::{self, ElectionOutcome};
use crate::event::ControllerEvent;
use crate::partition_state_machine::{self, PartitionState};
use crate::replica_election::{self, ElectLeadersAnswer, ElectionType, Trigger};
use crate::{alter_partition, lifecycle, reassignment, topic_deletion, ControllerConfig};

/// The topic config key (and broker default) that allows electing an out-of-sync replica.
const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// How many times an election whose write lost a race is run again within one event.
const ELECTION_RETRIES: usize = 3;

/// How long a broker whose failover failed waits before giving up `/controller`.
const FAILOVER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// How long a controller whose broker shuts down waits for the brokers to answer the control
/// requests already queued before it resigns.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// Whether the loop goes on after an event.
enum Flow {
    Continue,
    Stop,
}

/// The event loop's state. Constructed by [`crate::start`].
#[derive(Debug)]
pub(crate) struct EventLoop {
    zk: KafkaZkClient,
    config: ControllerConfig,
    active_flag: Arc<AtomicBool>,
    active: bool,
    ctx: ControllerContext,
    channels: ChannelManager,
    pending: Vec<PendingReply>,
}

impl EventLoop {
    pub(crate) fn new(
        zk: KafkaZkClient,
        config: ControllerConfig,
        events: mpsc::Sender<ControllerEvent>,
        active_flag: Arc<AtomicBool>,
    ) -> Self {
        let channels = ChannelManager::new(
            config.broker_id,
            config.request_timeout,
            config.control_plane_key.clone(),
            events,
        )
        .with_control_listener(
            &config.control_plane_listener,
            &config.control_plane_security,
        );
        EventLoop {
            zk,
            config,
            active_flag,
            active: false,
            ctx: ControllerContext::default(),
            channels,
            pending: Vec::new(),
        }
    }

    /// Processes events until shutdown or the end of the session.
    pub(crate) async fn run(mut self, mut queue: mpsc::Receiver<ControllerEvent>) {
        let progress = self.channels.progress();
        loop {
            let deadline = self.pending.iter().map(|p| p.deadline).min();
            let timer = async move {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = queue.recv() => event,
                () = timer => {
                    self.expire_pending(Instant::now());
                    continue;
                }
                () = progress.notified() => {
                    // A broker answered a control request: replies waiting for the brokers'
                    // metadata caches may be ready.
                    self.complete_pending();
                    continue;
                }
            };
            let Some(event) = event else { break };
            let state = event.state_name();
            let started = std::time::Instant::now();
            let flow = self.process(event).await;
            self.config.on_event.observe(state, started.elapsed());
            self.complete_pending();
            if let Flow::Stop = flow {
                break;
            }
        }
        self.resign().await;
    }

    async fn process(&mut self, event: ControllerEvent) -> Flow {
        let result = match event {
            ControllerEvent::Startup | ControllerEvent::ControllerChange => self.elect().await,
            ControllerEvent::BrokerChange if self.active => self.on_broker_change().await,
            ControllerEvent::TopicChange if self.active => self.on_topic_change().await,
            ControllerEvent::PartitionModifications(topic) if self.active => {
                self.on_partition_modifications(&topic).await
            }
            ControllerEvent::TopicDeletion if self.active => self.on_topic_deletion().await,
            ControllerEvent::StopReplicaResponse { broker, deleted } if self.active => {
                self.on_stop_replica_response(broker, deleted).await
            }
            ControllerEvent::BrokerChange
            | ControllerEvent::TopicChange
            | ControllerEvent::PartitionModifications(_)
            | ControllerEvent::TopicDeletion
            | ControllerEvent::StopReplicaResponse { .. } => Ok(()),
            ControllerEvent::CreateTopics {
                request,
                api_version,
                reply,
                received,
            } => {
                if !self.active {
                    let _ = reply.send(admin::create_topics::not_controller(&request, api_version));
                    return Flow::Continue;
                }
                if expired_in_queue(received, request.timeout_ms) {
                    let response = admin::create_topics::not_controller(&request, api_version);
                    Responder::CreateTopics(reply, response).time_out_in_queue();
                    return Flow::Continue;
                }
                let (response, awaits) = admin::create_topics::handle(
                    &self.ctx,
                    &self.zk,
                    &self.config,
                    &request,
                    api_version,
                )
                .await;
                self.reply_or_wait(
                    received,
                    request.timeout_ms,
                    awaits,
                    Responder::CreateTopics(reply, response),
                );
                Ok(())
            }
            ControllerEvent::CreatePartitions {
                request,
                api_version: _,
                reply,
                received,
            } => {
                if !self.active {
                    let _ = reply.send(admin::create_partitions::not_controller(&request));
                    return Flow::Continue;
                }
                if expired_in_queue(received, request.timeout_ms) {
                    let response = admin::create_partitions::not_controller(&request);
                    Responder::CreatePartitions(reply, response).time_out_in_queue();
                    return Flow::Continue;
                }
                let (response, awaits) =
                    admin::create_partitions::handle(&self.ctx, &self.zk, &self.config, &request)
                        .await;
                self.reply_or_wait(
                    received,
                    request.timeout_ms,
                    awaits,
                    Responder::CreatePartitions(reply, response),
                );
                Ok(())
            }
            ControllerEvent::DeleteTopics {
                request,
                api_version,
                reply,
                received,
            } => {
                if !self.active {
                    let _ = reply.send(admin::delete_topics::not_controller(&request, api_version));
                    return Flow::Continue;
                }
                if expired_in_queue(received, request.timeout_ms) {
                    let response = admin::delete_topics::not_controller(&request, api_version);
                    Responder::DeleteTopics(reply, response).time_out_in_queue();
                    return Flow::Continue;
                }
                let (response, awaits) = admin::delete_topics::handle(
                    &self.ctx,
                    &self.zk,
                    &self.config,
                    &request,
                    api_version,
                )
                .await;
                self.reply_or_wait(
                    received,
                    request.timeout_ms,
                    awaits,
                    Responder::DeleteTopics(reply, response),
                );
                Ok(())
            }
            ControllerEvent::AlterPartition {
                request,
                api_version,
                reply,
            } => {
                if !self.active {
                    let _ = reply.send(alter_partition::refused(ResponseError::NotController));
                    return Flow::Continue;
                }
                self.on_alter_partition(request, api_version, reply).await
            }
            ControllerEvent::ControlledShutdown {
                broker_id,
                broker_epoch,
                reply,
            } => {
                if !self.active {
                    let _ = reply.send(
                        ControlledShutdownResponse::default()
                            .with_error_code(ResponseError::NotController.code()),
                    );
                    return Flow::Continue;
                }
                let (response, result) = self.on_controlled_shutdown(broker_id, broker_epoch).await;
                let _ = reply.send(response);
                result
            }
            ControllerEvent::ElectLeaders { request, reply } => {
                if !self.active {
                    let response =
                        replica_election::refused(&request, ResponseError::NotController);
                    let _ = reply.send(ElectLeadersAnswer {
                        response,
                        elected: BTreeMap::new(),
                    });
                    return Flow::Continue;
                }
                let (answer, result) = self.on_elect_leaders(&request).await;
                let _ = reply.send(answer);
                result
            }
            ControllerEvent::PreferredReplicaElection if self.active => {
                self.on_preferred_replica_election_znode().await
            }
            ControllerEvent::AutoLeaderRebalance if self.active => {
                self.on_auto_leader_rebalance().await
            }
            ControllerEvent::PreferredReplicaElection | ControllerEvent::AutoLeaderRebalance => {
                Ok(())
            }
            // ---- Reassignment ----
            ControllerEvent::AlterPartitionReassignments { request, reply } => {
                if !self.active {
                    let _ = reply.send(reassignment::alter_refused(
                        ResponseError::NotController,
                        "This broker is not the active controller.",
                    ));
                    return Flow::Continue;
                }
                self.on_alter_partition_reassignments(request, reply).await
            }
            ControllerEvent::ListPartitionReassignments { request, reply } => {
                let response = if self.active {
                    reassignment::list(&self.ctx, &request)
                } else {
                    reassignment::list_refused(ResponseError::NotController)
                };
                let _ = reply.send(response);
                Ok(())
            }
            ControllerEvent::ZkPartitionReassignment if self.active => {
                self.on_zk_partition_reassignment().await
            }
            ControllerEvent::ZkPartitionReassignment => Ok(()),
            // ---- end of reassignment ----
            ControllerEvent::SessionExpired => {
                info!(
                    broker_id = self.config.broker_id,
                    "session ended; the controller stops"
                );
                return Flow::Stop;
            }
            ControllerEvent::Shutdown(done) => {
                self.drain_before_resigning().await;
                self.resign().await;
                let _ = done.send(());
                return Flow::Stop;
            }
        };
        if let Err(err) = result {
            self.on_error(err).await;
        }
        Flow::Continue
    }

    async fn on_error(&mut self, err: ZkClientError) {
        match err {
            ZkClientError::ControllerMoved { .. } => {
                warn!(
                    broker_id = self.config.broker_id,
                    epoch = self.ctx.epoch,
                    "controller moved; resigning"
                );
                self.resign().await;
                if let Err(err) = self.elect().await {
                    error!(error = %err, "re-election failed");
                }
            }
            other => error!(error = %other, "controller event failed"),
        }
    }

    // ---- Election ----

    async fn elect(&mut self) -> Result<(), ZkClientError> {
        if self.active {
            match self.zk.get_controller_id(true).await? {
                Some(id) if id == self.config.broker_id => return Ok(()),
                _ => self.resign().await,
            }
        }
        match election::elect(&self.zk, self.config.broker_id).await? {
            ElectionOutcome::Elected {
                epoch,
                epoch_zk_version,
            } => {
                let result = self.on_controller_failover(epoch, epoch_zk_version).await;
                if let Err(err) = &result {
                    if !matches!(err, ZkClientError::ControllerMoved { .. }) {
                        // Holding /controller without acting as controller would stall the
                        // cluster: give it up so that an election (maybe ours) runs again.
                        error!(error = %err, "controller failover failed; giving up /controller");
                        tokio::time::sleep(FAILOVER_RETRY_BACKOFF).await;
                        self.resign().await;
                        self.channels.clear();
                        self.ctx = ControllerContext::default();
                        if let Err(err) = self.zk.delete_controller_if_owned().await {
                            warn!(error = %err, "could not delete /controller");
                        }
                        return Ok(());
                    }
                }
                result
            }
            ElectionOutcome::NotElected { .. } => Ok(()),
        }
    }

    async fn on_controller_failover(
        &mut self,
        epoch: i32,
        epoch_zk_version: i32,
    ) -> Result<(), ZkClientError> {
        let began = std::time::Instant::now();
        self.ctx = ControllerContext {
            epoch,
            epoch_zk_version,
            ..ControllerContext::default()
        };
        for (id, broker) in self.zk.get_all_brokers(true).await? {
            self.add_live_broker(id, &broker);
        }
        // The whole tree in bulk: every assignment, then every partition state, each read
        // concurrently (Kafka 2.8 pipelines these reads too).
        let topics = self.zk.get_all_topics(true).await?;
        self.load_topics(&topics).await?;
        let partitions: Vec<_> = self
            .ctx
            .all_topics
            .iter()
            .flat_map(|t| self.ctx.partitions_for_topic(t))
            .collect();
        for (tp, result) in self.zk.get_partition_states(&partitions).await {
            match result {
                Ok(Some(state)) => {
                    self.ctx
                        .leadership
                        .insert(tp, leadership_from(state.state, state.zk_version));
                }
                Ok(None) => {}
                Err(ZkClientError::Decode { path, reason }) => {
                    error!(%path, %reason, "cannot read a partition state; the partition is treated as New");
                }
                Err(err) => return Err(err),
            }
        }
        let queued = self.read_deletion_marks().await?;
        for topic in queued {
            if self.ctx.topics_being_reassigned.contains(&topic) {
                self.ctx
                    .topics_ineligible_for_deletion
                    .insert(topic.clone());
            }
            self.ctx.topics_to_be_deleted.insert(topic);
        }
        self.active = true;
        self.active_flag.store(true, Ordering::SeqCst);
        info!(
            broker_id = self.config.broker_id, epoch,
            brokers = ?self.ctx.live_broker_ids(), topics = self.ctx.all_topics.len(),
            "controller failover complete"
        );
        self.refresh_unclean_election_topics().await?;
        let mut effects = lifecycle::on_controller_failover(&mut self.ctx);
        // Kafka's initializePartitionReassignments: /admin/reassign_partitions first (it
        // supplants what the assignments record), then the reassignments in progress.
        let started = match self.read_zk_reassignment().await? {
            Some(entries) => {
                let outcome = reassignment::on_zk_reassignment(&mut self.ctx, &entries);
                effects.extend(outcome.effects);
                outcome.started
            }
            None => BTreeSet::new(),
        };
        effects.extend(reassignment::resume_all(&mut self.ctx, &started));
        let executed = self.execute_electing(effects).await?;
        // The whole failover, from the election to every LeaderAndIsr/UpdateMetadata queued
        // (the benchmark in BENCHMARKS.md reads this line).
        info!(
            epoch,
            partitions = self.ctx.leadership.len(),
            partitions_written = executed.partitions.len(),
            failed = executed.failed().len(),
            elapsed_ms = format!("{:.1}", began.elapsed().as_secs_f64() * 1e3),
            "controller failover: requests queued"
        );
        // A preferred election written while no controller ran (Kafka resumes it here).
        self.on_preferred_replica_election_znode().await
    }

    // ---- Replica leader elections (replica_election.rs) ----

    /// Runs the elections `replica_election::plan` decides, writes them, and answers each
    /// partition from its write; a write that lost a race to another writer is planned again
    /// from the state read back, at most [`ELECTION_RETRIES`] times.
    async fn run_replica_election(
        &mut self,
        partitions: BTreeSet<TopicPartition>,
        election_type: ElectionType,
        trigger: Trigger,
    ) -> Result<BTreeMap<TopicPartition, replica_election::Outcome>, ZkClientError> {
        let mut outcomes = BTreeMap::new();
        let mut todo = partitions;
        for attempt in 0..=ELECTION_RETRIES {
            if todo.is_empty() {
                break;
            }
            let plan = replica_election::plan(&mut self.ctx, &todo, election_type, trigger);
            outcomes.extend(plan.decided);
            let executed = self.execute(plan.effects).await?;
            let mut retry = BTreeSet::new();
            for tp in plan.electing {
                match executed.partitions.get(&tp) {
                    Some(PartitionWrite::Written { .. }) => {
                        let leader = self.ctx.leadership.get(&tp).map_or(-1, |l| l.leader);
                        outcomes.insert(tp, Ok(leader));
                    }
                    _ if attempt < ELECTION_RETRIES => {
                        retry.insert(tp);
                    }
                    _ => {
                        outcomes.insert(
                            tp,
                            Err((
                                ResponseError::UnknownServerError,
                                "The partition state changed under the election several times; try again.".to_owned(),
                            )),
                        );
                    }
                }
            }
            todo = retry;
        }
        let elected = outcomes.values().filter(|o| o.is_ok()).count();
        info!(
            election = election_type.name(),
            ?trigger,
            partitions = outcomes.len(),
            elected,
            "replica leader election done"
        );
        Ok(outcomes)
    }

    /// ElectLeaders: an unknown election type is refused whole (INVALID_REQUEST); a null
    /// partition list means every partition.
    async fn on_elect_leaders(
        &mut self,
        request: &kafka_protocol::messages::ElectLeadersRequest,
    ) -> (ElectLeadersAnswer, Result<(), ZkClientError>) {
        let Some(election_type) = ElectionType::from_wire(request.election_type) else {
            let response = replica_election::refused(request, ResponseError::InvalidRequest);
            return (
                ElectLeadersAnswer {
                    response,
                    elected: BTreeMap::new(),
                },
                Ok(()),
            );
        };
        let (partitions, unparsable) = replica_election::requested_partitions(&self.ctx, request);
        let result = self
            .run_replica_election(partitions, election_type, Trigger::AdminClient)
            .await;
        let (outcomes, result) = match result {
            Ok(outcomes) => (outcomes, Ok(())),
            Err(err) => {
                let response = replica_election::refused(request, ResponseError::NotController);
                return (
                    ElectLeadersAnswer {
                        response,
                        elected: BTreeMap::new(),
                    },
                    Err(err),
                );
            }
        };
        let mut entries = replica_election::outcome_entries(&outcomes);
        for (topic, partition) in unparsable {
            entries.insert(
                (topic, partition),
                (
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some("The partition does not exist.".to_owned()),
                ),
            );
        }
        let elected = outcomes
            .iter()
            .filter_map(|(tp, o)| {
                o.as_ref()
                    .ok()
                    .map(|&leader| ((tp.topic.as_str().to_owned(), tp.partition), leader))
            })
            .collect();
        (
            ElectLeadersAnswer {
                response: replica_election::response(&entries, None),
                elected,
            },
            result,
        )
    }

    /// `/admin/preferred_replica_election` (re-watched): runs a PREFERRED election of the
    /// partitions it names, then deletes it, as Kafka's controller does. A znode that is not
    /// Kafka's JSON is deleted too, with the reason in the log (it would block every later
    /// election by znode).
    async fn on_preferred_replica_election_znode(&mut self) -> Result<(), ZkClientError> {
        let entries = match self.zk.get_preferred_replica_election().await {
            Ok(Some(entries)) => entries,
            Ok(None) => return Ok(()),
            Err(ZkClientError::Decode { path, reason }) => {
                error!(%path, %reason, "cannot read the preferred replica election request; deleting it (write {{\"version\":1,\"partitions\":[{{\"topic\":..,\"partition\":..}}]}})");
                return self
                    .zk
                    .delete_preferred_replica_election(self.ctx.epoch_zk_version)
                    .await;
            }
            Err(err) => return Err(err),
        };
        let mut partitions = BTreeSet::new();
        for entry in entries {
            match entry.topic.parse::<TopicName>() {
                Ok(topic) => {
                    partitions.insert(TopicPartition::new(topic, entry.partition));
                }
                Err(_) => {
                    warn!(topic = %entry.topic, partition = entry.partition, "skipping preferred replica election: not a legal topic name")
                }
            }
        }
        info!(
            partitions = partitions.len(),
            "preferred replica election requested through /admin/preferred_replica_election"
        );
        let outcomes = self
            .run_replica_election(partitions, ElectionType::Preferred, Trigger::Zk)
            .await?;
        for (tp, outcome) in &outcomes {
            if let Err((error, message)) = outcome {
                if *error != ResponseError::ElectionNotNeeded {
                    warn!(%tp, error = %error, %message, "preferred replica election failed");
                }
            }
        }
        self.zk
            .delete_preferred_replica_election(self.ctx.epoch_zk_version)
            .await
    }

    /// The leader-imbalance check (Kafka 2.8's `checkAndTriggerAutoLeaderRebalance`).
    async fn on_auto_leader_rebalance(&mut self) -> Result<(), ZkClientError> {
        let partitions = replica_election::imbalanced_partitions(
            &self.ctx,
            self.config.leader_imbalance_per_broker_percentage,
        );
        if partitions.is_empty() {
            return Ok(());
        }
        self.run_replica_election(partitions, ElectionType::Preferred, Trigger::Auto)
            .await
            .map(drop)
    }

    // ---- Reassignment ----

    /// AlterPartitionReassignments (see [`reassignment`]): validate and start in pure code,
    /// write, answer from what the writes did.
    async fn on_alter_partition_reassignments(
        &mut self,
        request: kafka_protocol::messages::AlterPartitionReassignmentsRequest,
        reply: oneshot::Sender<kafka_protocol::messages::AlterPartitionReassignmentsResponse>,
    ) -> Result<(), ZkClientError> {
        let received = Instant::now();
        let mut plan = reassignment::alter(&mut self.ctx, &request);
        let effects = std::mem::take(&mut plan.effects);
        match self.execute_electing(effects).await {
            Ok(executed) => {
                // The answer waits until every broker has the new replica sets (as
                // CreateTopics waits), so a Metadata request (`topics --describe`) right after
                // it shows the moving replicas that ListPartitionReassignments lists.
                let response = reassignment::alter_response(plan, &executed.failed_topics);
                self.reply_or_wait(
                    received,
                    request.timeout_ms,
                    vec![Await {
                        index: 0,
                        condition: AwaitCondition::Sent,
                    }],
                    Responder::AlterPartitionReassignments(reply, response),
                );
                Ok(())
            }
            Err(err) => {
                let error = match err {
                    ZkClientError::ControllerMoved { .. } => ResponseError::NotController,
                    _ => ResponseError::UnknownServerError,
                };
                let _ = reply.send(reassignment::alter_refused(
                    error,
                    "The controller could not write the reassignment; see its log.",
                ));
                Err(err)
            }
        }
    }

    /// `/admin/reassign_partitions` was created or changed: start what it asks that is not
    /// already going to the same target (the controller's own removals change it too).
    async fn on_zk_partition_reassignment(&mut self) -> Result<(), ZkClientError> {
        let Some(entries) = self.read_zk_reassignment().await? else {
            return Ok(());
        };
        let entries: Vec<_> = entries
            .into_iter()
            .filter(|(topic, partition, replicas)| {
                let Ok(topic) = topic.parse::<TopicName>() else {
                    return true;
                };
                let tp = TopicPartition::new(topic, *partition);
                !(self.ctx.reassignments.contains_key(&tp)
                    && reassignment::ReplicaAssignment::of(&self.ctx, &tp).target() == *replicas)
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        info!(
            partitions = entries.len(),
            "reassignment requested through /admin/reassign_partitions"
        );
        let outcome = reassignment::on_zk_reassignment(&mut self.ctx, &entries);
        self.execute_electing(outcome.effects).await.map(drop)
    }

    /// Reads `/admin/reassign_partitions`, watching it (its creation when it is missing).
    /// A znode that is not Kafka's JSON is logged and deleted, so that the next request
    /// written there is seen.
    async fn read_zk_reassignment(
        &mut self,
    ) -> Result<Option<Vec<(String, i32, Vec<BrokerId>)>>, ZkClientError> {
        match self.zk.get_partition_reassignment(true).await {
            Ok(Some((znode, _))) => Ok(Some(
                znode
                    .partitions
                    .into_iter()
                    .map(|e| (e.topic, e.partition, e.replicas))
                    .collect(),
            )),
            Ok(None) => Ok(None),
            Err(ZkClientError::Decode { path, reason }) => {
                error!(%path, %reason, "ignoring a partition reassignment that is not valid JSON; deleting it");
                self.zk
                    .delete_partition_reassignment(self.ctx.epoch_zk_version)
                    .await?;
                self.zk.get_partition_reassignment(true).await.map(drop)?;
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// Removes finished (or superseded) partitions from `/admin/reassign_partitions`, and
    /// deletes it when none is left (Kafka's `maybeRemoveFromZkReassignment`).
    async fn remove_from_zk_reassignment(
        &mut self,
        removals: &[(TopicPartition, Option<Vec<BrokerId>>)],
    ) -> Result<(), ZkClientError> {
        let current = match self.zk.get_partition_reassignment(false).await {
            Ok(Some((znode, _))) => znode,
            Ok(None) | Err(ZkClientError::Decode { .. }) => return Ok(()),
            Err(err) => return Err(err),
        };
        let before = current.partitions.len();
        let remaining: Vec<_> = current
            .partitions
            .into_iter()
            .filter(|e| {
                !removals.iter().any(|(tp, replicas)| {
                    tp.topic.as_str() == e.topic
                        && tp.partition == e.partition
                        && replicas.as_ref().is_none_or(|r| *r == e.replicas)
                })
            })
            .collect();
        if remaining.len() == before {
            return Ok(());
        }
        let epoch_zk_version = self.ctx.epoch_zk_version;
        if remaining.is_empty() {
            info!("no more partitions need to be reassigned; deleting /admin/reassign_partitions");
            self.zk
                .delete_partition_reassignment(epoch_zk_version)
                .await
        } else {
            info!(
                removed = before - remaining.len(),
                remaining = remaining.len(),
                "removing partitions from /admin/reassign_partitions"
            );
            self.zk
                .set_partition_reassignment(
                    &ReassignPartitions {
                        version: 1,
                        partitions: remaining,
                    },
                    epoch_zk_version,
                )
                .await
        }
    }
    // ---- end of reassignment ----

    /// [`EventLoop::execute`], then elects again the partitions whose state write failed
    /// (another writer moved the znode; the context now holds what the store has) and whose
    /// leader is not online, from the state read back, at most [`ELECTION_RETRIES`] times:
    /// Kafka retries an election on a version conflict until it is written.
    async fn execute_electing(&mut self, effects: Vec<Effect>) -> Result<Executed, ZkClientError> {
        let mut executed = self.execute(effects).await?;
        for attempt in 1..=ELECTION_RETRIES {
            let retry: Vec<_> = executed
                .failed()
                .into_iter()
                .filter(|tp| {
                    !self.ctx.is_topic_queued_for_deletion(&tp.topic)
                        && self
                            .ctx
                            .leadership
                            .get(tp)
                            .is_some_and(|l| !self.ctx.is_replica_online(l.leader))
                })
                .collect();
            if retry.is_empty() {
                break;
            }
            warn!(
                partitions = retry.len(),
                attempt,
                "leader elections lost a write race; electing again from the store's state"
            );
            for tp in &retry {
                self.ctx
                    .partition_states
                    .insert(tp.clone(), PartitionState::Offline);
            }
            let effects = partition_state_machine::handle_state_changes(
                &mut self.ctx,
                &retry,
                PartitionState::Online,
            );
            let again = self.execute(effects).await?;
            executed.partitions.extend(again.partitions);
            executed.failed_topics.extend(again.failed_topics);
        }
        Ok(executed)
    }

    /// AlterPartition (see [`alter_partition`]): validate in pure code, write, answer from
    /// what each write did.
    async fn on_alter_partition(
        &mut self,
        request: AlterPartitionRequest,
        api_version: i16,
        reply: oneshot::Sender<AlterPartitionResponse>,
    ) -> Result<(), ZkClientError> {
        let plan = match alter_partition::plan(&mut self.ctx, &request, api_version) {
            Ok(plan) => plan,
            Err(error) => {
                let _ = reply.send(alter_partition::refused(error));
                return Ok(());
            }
        };
        let effects = plan.effects.clone();
        match self.execute(effects).await {
            Ok(executed) => {
                let response = alter_partition::response(plan, &mut self.ctx, &executed.failed());
                let _ = reply.send(response);
                // An ISR that grew may complete a reassignment (Kafka does this after
                // answering AlterPartition).
                let written: Vec<_> = executed
                    .partitions
                    .iter()
                    .filter(|(_, w)| **w != PartitionWrite::Failed)
                    .map(|(tp, _)| tp.clone())
                    .collect();
                let effects = reassignment::maybe_complete(&mut self.ctx, &written);
                if !effects.is_empty() {
                    self.execute_electing(effects).await?;
                }
                Ok(())
            }
            Err(err) => {
                let error = match err {
                    ZkClientError::ControllerMoved { .. } => ResponseError::NotController,
                    _ => ResponseError::UnknownServerError,
                };
                let _ = reply.send(alter_partition::refused(error));
                Err(err)
            }
        }
    }

    /// ControlledShutdown (Kafka's `doControlledShutdown`): refuses an unknown broker or a
    /// broker epoch other than the registration's (an older one is a previous incarnation; a
    /// newer one is a registration this controller has not seen yet, so it cannot vouch for
    /// it), else moves the broker's leaderships away and drops it from every ISR, and answers
    /// what it still leads.
    async fn on_controlled_shutdown(
        &mut self,
        broker: BrokerId,
        broker_epoch: i64,
    ) -> (ControlledShutdownResponse, Result<(), ZkClientError>) {
        let refuse = |error: ResponseError| {
            (
                ControlledShutdownResponse::default().with_error_code(error.code()),
                Ok(()),
            )
        };
        let Some(live) = self.ctx.live_brokers.get(&broker) else {
            warn!(
                broker,
                "controlled shutdown from a broker that is not registered"
            );
            return refuse(ResponseError::BrokerNotAvailable);
        };
        if broker_epoch != -1 && broker_epoch != live.epoch {
            warn!(
                broker,
                request_epoch = broker_epoch,
                registered_epoch = live.epoch,
                "controlled shutdown refused: the broker epoch is not the registration's"
            );
            return refuse(ResponseError::StaleBrokerEpoch);
        }
        info!(broker, "controlled shutdown: moving leaderships away");
        let started = std::time::Instant::now();
        let effects = lifecycle::on_controlled_shutdown(&mut self.ctx, broker);
        if let Err(err) = self.execute_electing(effects).await {
            return (
                ControlledShutdownResponse::default()
                    .with_error_code(ResponseError::NotController.code()),
                Err(err),
            );
        }
        let remaining: Vec<_> = lifecycle::partitions_led_by(&self.ctx, broker)
            .into_iter()
            .map(|tp| {
                RemainingPartition::default()
                    .with_topic_name(WireTopicName(StrBytes::from_string(
                        tp.topic.as_str().to_owned(),
                    )))
                    .with_partition_index(tp.partition)
            })
            .collect();
        info!(
            broker,
            remaining = remaining.len(),
            elapsed_ms = format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
            "controlled shutdown: leaderships moved"
        );
        (
            ControlledShutdownResponse::default().with_remaining_partitions(remaining),
            Ok(()),
        )
    }

    /// Reads `unclean.leader.election.enable` (topic override, else the broker default) of
    /// the topics whose next election cannot be clean, concurrently; a topic whose config
    /// cannot be read elects cleanly (it waits), as Kafka does.
    async fn refresh_unclean_election_topics(&mut self) -> Result<(), ZkClientError> {
        self.ctx.unclean_election_topics.clear();
        let topics = lifecycle::topics_needing_unclean_decision(&self.ctx);
        if topics.is_empty() {
            return Ok(());
        }
        let mut reads = tokio::task::JoinSet::new();
        for topic in topics {
            let zk = self.zk.clone();
            reads.spawn(async move {
                let config = zk.get_topic_config(&topic).await;
                (topic, config)
            });
        }
        let default = self.config.unclean_leader_election_enable;
        while let Some(joined) = reads.join_next().await {
            let Ok((topic, config)) = joined else {
                continue;
            };
            match config {
                Ok(config) => {
                    let enabled = config
                        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
                        .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"));
                    if enabled {
                        self.ctx.unclean_election_topics.insert(topic);
                    }
                }
                Err(err) => {
                    warn!(%topic, error = %err, "cannot read the topic's config; its leader election stays clean")
                }
            }
        }
        Ok(())
    }

    /// The broker is shutting down (not cut off): the control requests already queued, the
    /// LeaderAndIsr of a controlled shutdown of this very broker among them, are delivered
    /// before the queues go, for at most [`SHUTDOWN_DRAIN`]. Dropping them would leave the
    /// new leaders (and this broker, which would go on acting as leader until it exits)
    /// waiting for the next controller's resync.
    async fn drain_before_resigning(&mut self) {
        let session = *self.zk.subscribe_session_state().borrow();
        if !self.active || matches!(session, SessionState::Expired | SessionState::Closed) {
            return;
        }
        let started = Instant::now();
        let drained = self.channels.drain(SHUTDOWN_DRAIN).await;
        info!(
            broker_id = self.config.broker_id,
            drained,
            elapsed_ms = %format!("{:.1}", started.elapsed().as_secs_f64() * 1000.0),
            "delivered the queued control requests before resigning"
        );
    }

    /// Stops acting as controller: drops the queues, answers waiting requests and deletes
    /// `/controller` if this session still owns it.
    async fn resign(&mut self) {
        if !self.active {
            return;
        }
        info!(
            broker_id = self.config.broker_id,
            epoch = self.ctx.epoch,
            "resigning as controller"
        );
        self.active = false;
        self.active_flag.store(false, Ordering::SeqCst);
        self.channels.clear();
        for pending in std::mem::take(&mut self.pending) {
            pending.fail_remaining(
                ResponseError::NotController.code(),
                "The controller moved before the operation completed.",
            );
        }
        self.ctx = ControllerContext::default();
        if let Err(err) = self.zk.delete_controller_if_owned().await {
            warn!(error = %err, "could not delete /controller while resigning");
        }
    }

    // ---- Watch events ----

    async fn on_broker_change(&mut self) -> Result<(), ZkClientError> {
        let started = std::time::Instant::now();
        let brokers = self.zk.get_all_brokers(true).await?;
        let new: BTreeSet<BrokerId> = brokers
            .keys()
            .copied()
            .filter(|id| !self.ctx.is_live(*id))
            .collect();
        let dead: BTreeSet<BrokerId> = self
            .ctx
            .live_brokers
            .keys()
            .copied()
            .filter(|id| !brokers.contains_key(id))
            .collect();
        // A broker that re-registered between two reads (a quick restart) has a new epoch.
        let bounced: BTreeSet<BrokerId> = brokers
            .iter()
            .filter(|(id, b)| {
                self.ctx
                    .live_brokers
                    .get(id)
                    .is_some_and(|live| live.epoch != b.epoch)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &new {
            self.add_live_broker(*id, &brokers[id]);
        }
        for id in dead.iter().chain(&bounced) {
            self.ctx.live_brokers.remove(id);
            self.channels.remove_broker(*id);
        }
        info!(new = ?new, dead = ?dead, bounced = ?bounced, "broker change");
        self.refresh_unclean_election_topics().await?;
        let mut effects = Vec::new();
        if !new.is_empty() {
            effects.extend(lifecycle::on_broker_startup(&mut self.ctx, &new));
            effects.extend(reassignment::on_broker_startup(&mut self.ctx, &new));
        }
        if !bounced.is_empty() {
            effects.extend(lifecycle::on_broker_failure(&mut self.ctx, &bounced));
            for id in &bounced {
                self.add_live_broker(*id, &brokers[id]);
            }
            effects.extend(lifecycle::on_broker_startup(&mut self.ctx, &bounced));
            effects.extend(reassignment::on_broker_startup(&mut self.ctx, &bounced));
        }
        if !dead.is_empty() {
            effects.extend(lifecycle::on_broker_failure(&mut self.ctx, &dead));
        }
        let decided_ms = started.elapsed().as_secs_f64() * 1e3;
        let executed = self.execute_electing(effects).await?;
        // The controller's part of a failover, from the watch firing to the requests queued
        // (the benchmark in BENCHMARKS.md reads this line).
        info!(
            new = ?new, dead = ?dead, bounced = ?bounced,
            partitions_written = executed.partitions.len(),
            failed = executed.failed().len(),
            decided_ms = format!("{decided_ms:.1}"),
            elapsed_ms = format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
            "broker change handled"
        );
        Ok(())
    }

    async fn on_topic_change(&mut self) -> Result<(), ZkClientError> {
        let topics: BTreeSet<TopicName> = self.zk.get_all_topics(true).await?.into_iter().collect();
        let deleted: Vec<_> = self.ctx.all_topics.difference(&topics).cloned().collect();
        let new: Vec<_> = topics.difference(&self.ctx.all_topics).cloned().collect();
        for topic in &deleted {
            warn!(%topic, "topic vanished from the store without a deletion; forgetting it");
            self.ctx.remove_topic(topic);
        }
        let mut partitions = Vec::new();
        for topic in self.load_topics(&new).await? {
            partitions.extend(self.ctx.partitions_for_topic(&topic));
        }
        if !new.is_empty() {
            info!(new = ?new, "new topics");
        }
        let effects = lifecycle::on_new_partition_creation(&mut self.ctx, &partitions);
        self.execute(effects).await.map(drop)
    }

    async fn on_partition_modifications(&mut self, topic: &str) -> Result<(), ZkClientError> {
        let Ok(topic) = topic.parse::<TopicName>() else {
            return Ok(());
        };
        let Some(current) = self.zk.get_topic_assignment(&topic, true).await? else {
            return Ok(());
        };
        if !self.ctx.all_topics.contains(&topic) {
            // The topic-change event that follows loads it.
            return Ok(());
        }
        let known = self
            .ctx
            .assignments
            .get(&topic)
            .cloned()
            .unwrap_or_default();
        // Compare partition ids, not counts (SPEC section 9): hand-made state znodes or gaps
        // must not hide new partitions.
        let added: BTreeMap<i32, Vec<BrokerId>> = current
            .assignment
            .partitions
            .iter()
            .filter(|(p, _)| !known.contains_key(p))
            .map(|(p, r)| (*p, r.clone()))
            .collect();
        // Kafka 2.4+ moves replicas only through AlterPartitionReassignments or
        // /admin/reassign_partitions: an edit of existing partitions' replicas is put back.
        let edits = reassignment::hand_edits(&self.ctx, &topic, &current.assignment);
        if !edits.is_empty() {
            for (p, theirs) in &edits {
                warn!(
                    %topic, partition = p, written = ?theirs, restored = ?known.get(p),
                    "the replica list of an existing partition was changed in /brokers/topics/<t> \
                     by hand; restoring the controller's assignment. Move replicas with \
                     AlterPartitionReassignments (gregor reassign-partitions) or \
                     /admin/reassign_partitions instead"
                );
            }
            if let Some(mut restored) = reassignment::topic_znode(&self.ctx, &topic) {
                restored.topic_id = current.assignment.topic_id.or(restored.topic_id);
                if !self.ctx.is_topic_queued_for_deletion(&topic) {
                    restored.partitions.extend(added.clone());
                }
                match self
                    .zk
                    .set_topic_assignment(
                        &topic,
                        &restored,
                        Some(current.zk_version),
                        Some(self.ctx.epoch_zk_version),
                    )
                    .await
                {
                    Ok(()) => {}
                    Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                    // Changed again meanwhile: the watch brings it back here.
                    Err(err) => warn!(%topic, error = %err, "could not restore the assignment"),
                }
                if self.ctx.is_topic_queued_for_deletion(&topic) {
                    return Ok(());
                }
            }
        }
        if added.is_empty() {
            return Ok(());
        }
        if self.ctx.is_topic_queued_for_deletion(&topic) {
            info!(%topic, "skipping partition addition: the topic is being deleted; restoring its assignment");
            let mut restored = current.assignment.clone();
            restored.partitions = known;
            return self
                .zk
                .set_topic_assignment(
                    &topic,
                    &restored,
                    Some(current.zk_version),
                    Some(self.ctx.epoch_zk_version),
                )
                .await;
        }
        info!(%topic, added = ?added.keys().collect::<Vec<_>>(), "new partitions");
        let mut merged = known;
        merged.extend(added.iter().map(|(p, r)| (*p, r.clone())));
        self.ctx.set_topic_assignment(topic.clone(), merged);
        let partitions: Vec<_> = added
            .keys()
            .map(|&p| TopicPartition::new(topic.clone(), p))
            .collect();
        let effects = lifecycle::on_new_partition_creation(&mut self.ctx, &partitions);
        self.execute(effects).await.map(drop)
    }

    async fn on_topic_deletion(&mut self) -> Result<(), ZkClientError> {
        let queued = self.read_deletion_marks().await?;
        let new: BTreeSet<_> = queued
            .into_iter()
            .filter(|t| !self.ctx.is_topic_queued_for_deletion(t))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        info!(topics = ?new, "topics queued for deletion");
        let effects = topic_deletion::enqueue_topics(&mut self.ctx, &new);
        self.execute(effects).await.map(drop)
    }

    /// Reads `/admin/delete_topics` (re-registering the watch), removes marks that name no
    /// known topic (or every mark when deletion is disabled) and returns the topics to delete.
    async fn read_deletion_marks(&mut self) -> Result<BTreeSet<TopicName>, ZkClientError> {
        let marks = self.zk.get_topic_deletions(true).await?;
        let mut queued = BTreeSet::new();
        let mut to_remove = Vec::new();
        for mark in marks {
            let Ok(topic) = mark.parse::<TopicName>() else {
                warn!(%mark, "ignoring a deletion mark that is not a legal topic name");
                continue;
            };
            if !self.ctx.all_topics.contains(&topic) {
                info!(%topic, "removing the deletion mark of a topic that does not exist");
                to_remove.push(topic);
            } else if !self.config.delete_topic_enable {
                info!(%topic, "delete.topic.enable is false: removing the deletion mark");
                to_remove.push(topic);
            } else {
                queued.insert(topic);
            }
        }
        if !to_remove.is_empty() {
            self.zk
                .delete_topic_deletions(&to_remove, self.ctx.epoch_zk_version)
                .await?;
        }
        Ok(queued)
    }

    async fn on_stop_replica_response(
        &mut self,
        broker: BrokerId,
        deleted: Vec<(TopicPartition, i16)>,
    ) -> Result<(), ZkClientError> {
        // Replicas a reassignment removed were deleted without waiting (as in Kafka): only
        // the answers for topics being deleted move the deletion on.
        let (deleted, moved): (Vec<_>, Vec<_>) = deleted
            .into_iter()
            .partition(|(tp, _)| self.ctx.is_topic_queued_for_deletion(&tp.topic));
        for (tp, code) in moved {
            if code != 0 {
                warn!(broker, %tp, error_code = code,
                    "a replica removed by a reassignment could not be deleted; the broker removes it as a stray log when it restarts");
            }
        }
        let (ok, failed): (Vec<_>, Vec<_>) = deleted.into_iter().partition(|(_, code)| *code == 0);
        let ok: Vec<_> = ok
            .into_iter()
            .map(|(tp, _)| PartitionAndReplica {
                tp,
                replica: broker,
            })
            .collect();
        let failed: Vec<_> = failed
            .into_iter()
            .map(|(tp, code)| {
                warn!(broker, %tp, error_code = code, "replica deletion failed");
                PartitionAndReplica {
                    tp,
                    replica: broker,
                }
            })
            .collect();
        let mut effects = Vec::new();
        if !ok.is_empty() {
            effects.extend(topic_deletion::complete_replica_deletion(
                &mut self.ctx,
                &ok,
            ));
        }
        if !failed.is_empty() {
            effects.extend(topic_deletion::fail_replica_deletion(
                &mut self.ctx,
                &failed,
            ));
        }
        self.execute(effects).await.map(drop)
    }

    // ---- Loading ----

    fn add_live_broker(&mut self, id: BrokerId, broker: &RegisteredBroker) {
        let registration = &broker.registration;
        let endpoints: Vec<(String, String, i32, i16)> = registration
            .parsed_endpoints()
            .into_iter()
            .map(|(name, host, port)| {
                // A listener missing from the map is named after its protocol (Kafka 1.x).
                let protocol = registration
                    .listener_security_protocol_map
                    .get(&name)
                    .unwrap_or(&name)
                    .parse::<security::SecurityProtocol>()
                    .map_or(0, |p| p.id());
                (name, host, i32::from(port), protocol)
            })
            .collect();
        let inter_broker = &self.config.inter_broker_listener;
        let endpoint = endpoints
            .iter()
            .find(|(name, _, _, _)| name == inter_broker)
            .or(endpoints.first());
        let (host, port) = match endpoint {
            Some((_, host, port, _)) => (host.clone(), *port),
            None => (
                broker.registration.host.clone().unwrap_or_default(),
                broker.registration.port,
            ),
        };
        let live = LiveBroker {
            id,
            host,
            port,
            rack: broker.registration.rack.clone(),
            epoch: broker.epoch,
            endpoints,
        };
        self.channels.add_broker(&live);
        self.ctx.known_brokers.insert(id);
        self.ctx.live_brokers.insert(id, live);
    }

    /// Reads the assignments of `topics` into the context (concurrently), watching each.
    /// Returns the topics loaded (those gone or unreadable are left out).
    async fn load_topics(&mut self, topics: &[TopicName]) -> Result<Vec<TopicName>, ZkClientError> {
        let mut loaded = Vec::with_capacity(topics.len());
        for (topic, result) in self.zk.get_topic_assignments(topics, true).await {
            let versioned = match result {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(ZkClientError::Decode { path, reason }) => {
                    error!(%path, %reason, "cannot read a topic's assignment; the topic is ignored");
                    continue;
                }
                Err(err) => return Err(err),
            };
            self.load_assignment(&topic, versioned).await?;
            loaded.push(topic);
        }
        Ok(loaded)
    }

    /// Records a topic's assignment in the context, giving the topic an id first when it has
    /// none.
    async fn load_assignment(
        &mut self,
        topic: &TopicName,
        versioned: znodes::zk_client::VersionedTopicAssignment,
    ) -> Result<(), ZkClientError> {
        let mut assignment = versioned.assignment;
        if assignment.topic_id.is_none() {
            // Written without an id (by hand, or by an older writer): give it one, as Kafka
            // 2.8's controller does, so brokers can write partition.metadata.
            assignment.topic_id = Some(TopicId::random());
            assignment.version = assignment.version.max(3);
            let written = self
                .zk
                .set_topic_assignment(
                    topic,
                    &assignment,
                    Some(versioned.zk_version),
                    Some(self.ctx.epoch_zk_version),
                )
                .await;
            match written {
                Ok(()) => info!(%topic, "assigned a topic id"),
                Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                Err(err) => {
                    warn!(%topic, error = %err, "could not assign a topic id");
                    assignment.topic_id = None;
                }
            }
        }
        if let Some(id) = assignment.topic_id {
            self.ctx.topic_ids.insert(topic.clone(), id);
        }
        self.ctx
            .set_topic_assignment(topic.clone(), assignment.partitions.clone());
        for &p in assignment.partitions.keys() {
            let reassigning = crate::context::Reassigning {
                adding: assignment
                    .adding_replicas
                    .get(&p)
                    .cloned()
                    .unwrap_or_default(),
                removing: assignment
                    .removing_replicas
                    .get(&p)
                    .cloned()
                    .unwrap_or_default(),
                origin: assignment
                    .original_replicas
                    .get(&p)
                    .cloned()
                    .unwrap_or_default(),
            };
            self.ctx
                .set_reassigning(&TopicPartition::new(topic.clone(), p), Some(reassigning));
        }
        Ok(())
    }

    // ---- Effects ----

    /// Carries out the effects of one event. Partition-state writes first, batched: all
    /// creates and updates go to the store in a few chunked, epoch-fenced multis issued
    /// together (a partition written twice in one event gets its writes in order, one round
    /// each). Then the other effects in order (topic znode deletions, the deletion hook), and
    /// last the control requests, built from the context after the writes and left out for
    /// partitions whose write failed: one LeaderAndIsr, UpdateMetadata and StopReplica per
    /// broker. Returns what happened to each written partition.
    pub(crate) async fn execute(
        &mut self,
        effects: Vec<Effect>,
    ) -> Result<Executed, ZkClientError> {
        let mut rounds: Vec<Round> = Vec::new();
        let mut writes_per_partition: BTreeMap<TopicPartition, usize> = BTreeMap::new();
        let mut others = Vec::new();
        for effect in effects {
            match effect {
                Effect::CreatePartitionState { tp, state } => {
                    let round = next_round(&mut writes_per_partition, &mut rounds, &tp);
                    round.creates.push((tp, state));
                }
                Effect::UpdatePartitionState {
                    tp,
                    state,
                    expected_zk_version,
                } => {
                    let round = next_round(&mut writes_per_partition, &mut rounds, &tp);
                    round.updates.push((tp, state, expected_zk_version));
                }
                other => others.push(other),
            }
        }
        let mut executed = Executed::default();
        for round in rounds {
            self.write_round(round, &mut executed).await?;
        }
        let failed = executed.failed();
        // Reassignment: each topic's assignment once, from the context, after the states;
        // then /admin/reassign_partitions.
        let mut topic_writes = BTreeSet::new();
        let mut zk_removals = Vec::new();
        others.retain(|effect| match effect {
            Effect::WriteTopicAssignment(topic) => {
                topic_writes.insert(topic.clone());
                false
            }
            Effect::RemoveFromZkReassignment { tp, replicas } => {
                zk_removals.push((tp.clone(), replicas.clone()));
                false
            }
            _ => true,
        });
        for topic in topic_writes {
            let Some(znode) = reassignment::topic_znode(&self.ctx, &topic) else {
                continue;
            };
            match self
                .zk
                .set_topic_assignment(&topic, &znode, None, Some(self.ctx.epoch_zk_version))
                .await
            {
                Ok(()) => {
                    info!(%topic, being_reassigned = znode.adding_replicas.len().max(znode.removing_replicas.len()),
                    "topic assignment written")
                }
                Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                Err(err) => {
                    error!(%topic, error = %err, "could not write the topic's assignment");
                    executed.failed_topics.insert(topic);
                }
            }
        }
        if !zk_removals.is_empty() {
            self.remove_from_zk_reassignment(&zk_removals).await?;
        }
        let mut batch = RequestBatch::default();
        for effect in others {
            match effect {
                Effect::CreatePartitionState { .. } | Effect::UpdatePartitionState { .. } => {}
                Effect::LeaderAndIsr {
                    brokers,
                    tp,
                    is_new,
                } => {
                    if !failed.contains(&tp) {
                        batch.add_leader_and_isr(&brokers, &tp, is_new);
                    }
                }
                Effect::UpdateMetadata {
                    brokers,
                    partitions,
                } => {
                    let partitions: Vec<_> = partitions
                        .into_iter()
                        .filter(|tp| !failed.contains(tp))
                        .collect();
                    batch.add_update_metadata(&brokers, &partitions);
                }
                Effect::StopReplica { broker, tp, delete } => {
                    batch.add_stop_replica(broker, &tp, delete)
                }
                Effect::DeleteTopicZnodes(topic) => {
                    match self
                        .zk
                        .delete_topic_znodes(&topic, self.ctx.epoch_zk_version)
                        .await
                    {
                        Ok(()) => info!(%topic, "topic deleted from the store"),
                        Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                        // The mark stays, so the next controller resumes this deletion.
                        Err(err) => {
                            error!(%topic, error = %err, "could not delete the topic's znodes")
                        }
                    }
                }
                Effect::TopicDeleted(topic) => self.config.on_topic_deleted.run(&topic),
                Effect::WriteTopicAssignment(_) | Effect::RemoveFromZkReassignment { .. } => {}
            }
        }
        self.channels
            .send_batch(&self.ctx, self.config.broker_id, batch);
        Ok(executed)
    }

    /// One round of partition-state writes: the creates and the updates go to the store
    /// together; the context follows what the store did.
    async fn write_round(
        &mut self,
        round: Round,
        executed: &mut Executed,
    ) -> Result<(), ZkClientError> {
        // A partition whose earlier write failed in this event is not written again: its
        // later write was computed from a state the store does not have.
        let skipped = executed.failed();
        let to_znode = |state: &LeaderIsrAndControllerEpoch| {
            PartitionStateZNode::new(
                state.controller_epoch,
                state.leader,
                state.leader_epoch,
                state.isr.clone(),
            )
            .with_leader_recovery_state(state.leader_recovery_state)
        };
        let creates: Vec<_> = round
            .creates
            .iter()
            .filter(|(tp, _)| !skipped.contains(tp))
            .map(|(tp, state)| (tp.clone(), to_znode(state)))
            .collect();
        let updates: Vec<_> = round
            .updates
            .iter()
            .filter(|(tp, _, _)| !skipped.contains(tp))
            .map(|(tp, state, expected)| (tp.clone(), to_znode(state), *expected))
            .collect();
        let epoch_zk_version = self.ctx.epoch_zk_version;
        let (created, updated) = tokio::join!(
            async {
                if creates.is_empty() {
                    Ok(Vec::new())
                } else {
                    self.zk
                        .create_partition_states(creates, epoch_zk_version)
                        .await
                }
            },
            async {
                if updates.is_empty() {
                    Ok(Vec::new())
                } else {
                    self.zk
                        .set_partition_states(updates, epoch_zk_version)
                        .await
                }
            },
        );
        let (created, updated) = (created?, updated?);
        let mut reread = Vec::new();
        let mut adopt = Vec::new();
        for (tp, result) in created {
            match result {
                Ok(()) => {
                    executed
                        .partitions
                        .insert(tp, PartitionWrite::Written { zk_version: 0 });
                }
                // Written by hand or by an earlier controller: adopt it instead of failing.
                Err(ZkClientError::NodeExists(_)) => adopt.push(tp),
                Err(err) => {
                    error!(%tp, error = %err, "could not write the partition state; the partition stays New");
                    self.revert_to_new(&tp);
                    executed.partitions.insert(tp, PartitionWrite::Failed);
                }
            }
        }
        for (tp, result) in updated {
            match result {
                Ok(zk_version) => {
                    if let Some(l) = self.ctx.leadership.get_mut(&tp) {
                        l.zk_version = zk_version;
                    }
                    executed
                        .partitions
                        .insert(tp, PartitionWrite::Written { zk_version });
                }
                Err(err) => {
                    error!(%tp, error = %err, "could not update the partition state; reloading it");
                    executed
                        .partitions
                        .insert(tp.clone(), PartitionWrite::Failed);
                    reread.push(tp);
                }
            }
        }
        if !adopt.is_empty() {
            for (tp, result) in self.zk.get_partition_states(&adopt).await {
                match result {
                    Ok(Some(existing)) => {
                        info!(%tp, "partition state znode exists already; adopting it");
                        let zk_version = existing.zk_version;
                        self.ctx
                            .leadership
                            .insert(tp.clone(), leadership_from(existing.state, zk_version));
                        executed
                            .partitions
                            .insert(tp, PartitionWrite::Written { zk_version });
                    }
                    Ok(None) | Err(ZkClientError::Decode { .. }) => {
                        self.revert_to_new(&tp);
                        executed.partitions.insert(tp, PartitionWrite::Failed);
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        if !reread.is_empty() {
            for (tp, result) in self.zk.get_partition_states(&reread).await {
                if let Some(current) = result? {
                    self.ctx
                        .leadership
                        .insert(tp, leadership_from(current.state, current.zk_version));
                }
            }
        }
        Ok(())
    }

    fn revert_to_new(&mut self, tp: &TopicPartition) {
        self.ctx.leadership.remove(tp);
        self.ctx
            .partition_states
            .insert(tp.clone(), PartitionState::New);
    }

    // ---- Waiting requests ----

    fn reply_or_wait(
        &mut self,
        received: Instant,
        timeout_ms: i32,
        awaits: Vec<Await>,
        responder: Responder,
    ) {
        let pending = PendingReply {
            deadline: received + Duration::from_millis(timeout_ms.max(0) as u64),
            awaits: awaits.into_iter().map(|a| (a, None)).collect(),
            responder,
        };
        if pending.awaits.is_empty() {
            pending.responder.send();
        } else {
            self.pending.push(pending);
            self.complete_pending();
        }
    }

    /// Answers the waiting requests whose conditions hold in the context and whose effects
    /// every live broker's metadata cache has: once the conditions hold, a barrier is taken
    /// behind the control requests queued so far, and the reply goes out when every broker has
    /// answered up to it (Kafka answers when the receiving broker's cache shows the change;
    /// waiting for every broker's makes a describe right after the answer work on any broker).
    fn complete_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let ctx = &self.ctx;
        let channels = &self.channels;
        for pending in &mut self.pending {
            for (a, barrier) in &mut pending.awaits {
                if barrier.is_none() && condition_met(ctx, &a.condition) {
                    *barrier = Some(channels.barrier());
                }
            }
            pending
                .awaits
                .retain(|(_, barrier)| !barrier.as_ref().is_some_and(|b| channels.passed(b)));
        }
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.awaits.is_empty());
        self.pending = waiting;
        for pending in done {
            pending.responder.send();
        }
    }

    fn expire_pending(&mut self, now: Instant) {
        let (expired, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.deadline <= now);
        self.pending = waiting;
        for pending in expired {
            pending.fail_remaining(
                ResponseError::RequestTimedOut.code(),
                "The operation did not complete within the request timeout.",
            );
        }
    }
}

/// What [`EventLoop::execute`] did to the partitions whose state znode the event wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Executed {
    /// Per partition: its last write of the event.
    pub partitions: BTreeMap<TopicPartition, PartitionWrite>,
    /// Topics whose assignment znode could not be written.
    pub failed_topics: BTreeSet<TopicName>,
}

impl Executed {
    /// The partitions whose write failed (left out of the control requests).
    pub fn failed(&self) -> BTreeSet<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, w)| **w == PartitionWrite::Failed)
            .map(|(tp, _)| tp.clone())
            .collect()
    }
}

/// The outcome of one partition's state write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartitionWrite {
    /// The state znode has this version now (created, adopted or updated).
    Written {
        /// The znode version (Kafka's partition epoch).
        zk_version: i32,
    },
    /// The write failed; the context holds what the store has (re-read), or the partition
    /// went back to New.
    Failed,
}

/// The partition-state writes of one event that go to the store together.
#[derive(Debug, Default)]
struct Round {
    creates: Vec<(TopicPartition, LeaderIsrAndControllerEpoch)>,
    updates: Vec<(TopicPartition, LeaderIsrAndControllerEpoch, i32)>,
}

/// The round of `tp`'s next write: the partition's n-th write of an event goes to round n,
/// so writes to one partition keep their order.
fn next_round<'a>(
    writes: &mut BTreeMap<TopicPartition, usize>,
    rounds: &'a mut Vec<Round>,
    tp: &TopicPartition,
) -> &'a mut Round {
    let count = writes.entry(tp.clone()).or_default();
    let index = *count;
    *count += 1;
    if rounds.len() <= index {
        rounds.resize_with(index + 1, Round::default);
    }
    &mut rounds[index]
}

fn leadership_from(state: PartitionStateZNode, zk_version: i32) -> LeaderIsrAndControllerEpoch {
    LeaderIsrAndControllerEpoch {
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        isr: state.isr,
        controller_epoch: state.controller_epoch,
        zk_version,
        leader_recovery_state: state.leader_recovery_state,
    }
}

/// Whether a request that reached the controller at `received` is past its timeout already
/// (a non-positive timeout asks for an immediate answer with the work going on, so it never
/// expires in the queue).
fn expired_in_queue(received: Instant, timeout_ms: i32) -> bool {
    timeout_ms > 0 && received + Duration::from_millis(timeout_ms as u64) <= Instant::now()
}

fn condition_met(ctx: &ControllerContext, condition: &AwaitCondition) -> bool {
    match condition {
        AwaitCondition::Online { topic, partitions } => (0..*partitions).all(|p| {
            ctx.leadership
                .contains_key(&TopicPartition::new(topic.clone(), p))
        }),
        AwaitCondition::Deleted(topic) => !ctx.all_topics.contains(topic),
        AwaitCondition::Sent => true,
    }
}

/// A response held back until its topics are online or deleted, in the controller's context
/// and then in every broker's metadata cache.
#[derive(Debug)]
struct PendingReply {
    deadline: Instant,
    /// The results still waiting, each with the barrier taken once its condition held in the
    /// context.
    awaits: Vec<(Await, Option<Barrier>)>,
    responder: Responder,
}

impl PendingReply {
    /// Sets `code` on every result still waiting and sends the response. A result whose
    /// condition held in the context but not yet in every broker's cache is still waiting.
    fn fail_remaining(mut self, code: i16, message: &str) {
        for (a, _) in &self.awaits {
            self.responder.set_error(a.index, code, message);
        }
        self.responder.send();
    }
}

#[derive(Debug)]
enum Responder {
    CreateTopics(oneshot::Sender<CreateTopicsResponse>, CreateTopicsResponse),
    CreatePartitions(
        oneshot::Sender<CreatePartitionsResponse>,
        CreatePartitionsResponse,
    ),
    DeleteTopics(oneshot::Sender<DeleteTopicsResponse>, DeleteTopicsResponse),
    /// Waits only for the brokers' metadata; the reassignments have started either way.
    AlterPartitionReassignments(
        oneshot::Sender<kafka_protocol::messages::AlterPartitionReassignmentsResponse>,
        kafka_protocol::messages::AlterPartitionReassignmentsResponse,
    ),
}

impl Responder {
    fn set_error(&mut self, index: usize, code: i16, message: &str) {
        let message = Some(StrBytes::from_string(message.to_owned()));
        match self {
            Responder::CreateTopics(_, r) => {
                if let Some(t) = r.topics.get_mut(index) {
                    t.error_code = code;
                    t.error_message = message;
                }
            }
            Responder::CreatePartitions(_, r) => {
                if let Some(t) = r.results.get_mut(index) {
                    t.error_code = code;
                    t.error_message = message;
                }
            }
            Responder::DeleteTopics(_, r) => {
                if let Some(t) = r.responses.get_mut(index) {
                    t.error_code = code;
                    t.error_message = message;
                }
            }
            // Started already: a broker slow to take the metadata is no error of the request.
            Responder::AlterPartitionReassignments(..) => {}
        }
    }

    /// Answers REQUEST_TIMED_OUT for every item of a request that waited in the controller's
    /// queue past its timeout, without running it (nothing was changed).
    fn time_out_in_queue(mut self) {
        let items = match &self {
            Responder::CreateTopics(_, r) => r.topics.len(),
            Responder::CreatePartitions(_, r) => r.results.len(),
            Responder::DeleteTopics(_, r) => r.responses.len(),
            Responder::AlterPartitionReassignments(..) => 0,
        };
        for index in 0..items {
            self.set_error(
                index,
                ResponseError::RequestTimedOut.code(),
                "The request waited for the controller longer than its timeout; it was not run.",
            );
        }
        self.send();
    }

    fn send(self) {
        // The requester may have gone away (connection closed); nothing to do then.
        match self {
            Responder::CreateTopics(tx, r) => drop(tx.send(r)),
            Responder::CreatePartitions(tx, r) => drop(tx.send(r)),
            Responder::DeleteTopics(tx, r) => drop(tx.send(r)),
            Responder::AlterPartitionReassignments(tx, r) => drop(tx.send(r)),
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName as WireName};
    use metastore::{EmbeddedStore, SessionOptions};

    use super::*;

    fn request(topic: &str, timeout_ms: i32) -> CreateTopicsRequest {
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(WireName(StrBytes::from_string(topic.to_owned())))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![
                    kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![kafka_protocol::messages::BrokerId(0)]),
                ])])
            .with_timeout_ms(timeout_ms)
    }

    /// A request that waited in the queue past its timeout is answered REQUEST_TIMED_OUT and
    /// not run; one still in time runs, and its wait counts from its arrival.
    #[tokio::test]
    async fn a_request_past_its_timeout_when_dequeued_is_not_run() {
        let store = EmbeddedStore::open_in_memory();
        let (client, events) = store.connect(SessionOptions::default());
        let zk = KafkaZkClient::new(client, events);
        zk.ensure_persistent_paths().await.unwrap();
        let (tx, _rx) = mpsc::channel(16);
        let mut event_loop = EventLoop::new(
            zk.clone(),
            ControllerConfig::default(),
            tx,
            Arc::new(AtomicBool::new(false)),
        );
        event_loop.process(ControllerEvent::Startup).await;
        assert!(event_loop.active);

        let (reply, answer) = oneshot::channel();
        let arrived = Instant::now() - Duration::from_millis(1_500);
        event_loop
            .process(ControllerEvent::CreateTopics {
                request: request("late", 1_000),
                api_version: 5,
                reply,
                received: arrived,
            })
            .await;
        let mut answer = answer;
        let response = answer.try_recv().expect("answered at once");
        assert_eq!(response.topics[0].error_code, 7, "REQUEST_TIMED_OUT");
        assert!(response.topics[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("it was not run"));
        assert!(!zk.topic_exists(&"late".parse().unwrap()).await.unwrap());

        // In time: it runs (the topic is written) and then waits for its partition, which
        // has no live broker here, until 1,000 ms after its arrival.
        let (reply, answer) = oneshot::channel();
        let arrived = Instant::now() - Duration::from_millis(700);
        event_loop
            .process(ControllerEvent::CreateTopics {
                request: request("in-time", 1_000),
                api_version: 5,
                reply,
                received: arrived,
            })
            .await;
        assert!(zk.topic_exists(&"in-time".parse().unwrap()).await.unwrap());
        let deadline = event_loop.pending[0].deadline;
        assert_eq!(deadline, arrived + Duration::from_millis(1_000));
        event_loop.expire_pending(deadline);
        assert_eq!(answer.await.unwrap().topics[0].error_code, 7);
    }

    /// `/admin/preferred_replica_election` that is not Kafka's JSON is deleted (with the
    /// reason in the log) instead of blocking every later election by znode; a good one
    /// naming an unknown partition runs (nothing to elect) and is deleted too.
    #[tokio::test]
    async fn the_preferred_replica_election_znode_is_run_and_deleted() {
        let store = EmbeddedStore::open_in_memory();
        let (client, events) = store.connect(SessionOptions::default());
        let zk = KafkaZkClient::new(client, events);
        zk.ensure_persistent_paths().await.unwrap();
        let (tx, _rx) = mpsc::channel(16);
        let mut event_loop = EventLoop::new(
            zk.clone(),
            ControllerConfig::default(),
            tx,
            Arc::new(AtomicBool::new(false)),
        );
        event_loop.process(ControllerEvent::Startup).await;
        assert!(event_loop.active);
        let path = znodes::paths::preferred_replica_election();
        for data in [
            &b"{not json"[..],
            br#"{"version":1,"partitions":[{"topic":"nope","partition":0}]}"#,
        ] {
            zk.client()
                .create(path, data, metastore::CreateMode::Persistent)
                .await
                .unwrap();
            event_loop
                .process(ControllerEvent::PreferredReplicaElection)
                .await;
            assert!(
                zk.client().exists(path, false).await.unwrap().is_none(),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }
}
