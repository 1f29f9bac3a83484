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
use znodes::json::ReassignPartitions;
use znodes::zk_client::{KafkaZkClient, RegisteredBroker, ZkClientError};

use crate::admin::{self, Await, AwaitCondition};
use crate::channel_manager::{Barrier, ChannelManager};
use crate::context::{ControllerContext, LiveBroker, PartitionAndReplica};
use crate::core::{
    self, leadership_from, ChannelChange, Core, Executed, Finished, Input, Outcome, PartitionWrite,
    Ready, StoreOp,
};
use crate::effect::Effect;
use crate::election::{self, ElectionOutcome};
use crate::event::ControllerEvent;
use crate::replica_election::{self, ElectLeadersAnswer, ElectionType, Trigger};
use crate::{alter_partition, lifecycle, reassignment, topic_deletion, ControllerConfig};

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
    core: Core,
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
            active_flag,
            active: false,
            core: Core::new(
                ControllerContext::default(),
                config.unclean_leader_election_enable,
            ),
            channels,
            pending: Vec::new(),
            config,
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
                let refused = Responder::CreateTopics(
                    reply,
                    admin::create_topics::not_controller(&request, api_version),
                );
                self.admin_request(
                    received,
                    request.timeout_ms,
                    refused,
                    async |ctx, zk, config| {
                        let (response, awaits) =
                            admin::create_topics::handle(ctx, zk, config, &request, api_version)
                                .await;
                        (AdminResponse::CreateTopics(response), awaits)
                    },
                )
                .await;
                Ok(())
            }
            ControllerEvent::CreatePartitions {
                request,
                api_version: _,
                reply,
                received,
            } => {
                let refused = Responder::CreatePartitions(
                    reply,
                    admin::create_partitions::not_controller(&request),
                );
                self.admin_request(
                    received,
                    request.timeout_ms,
                    refused,
                    async |ctx, zk, config| {
                        let (response, awaits) =
                            admin::create_partitions::handle(ctx, zk, config, &request).await;
                        (AdminResponse::CreatePartitions(response), awaits)
                    },
                )
                .await;
                Ok(())
            }
            ControllerEvent::DeleteTopics {
                request,
                api_version,
                reply,
                received,
            } => {
                let refused = Responder::DeleteTopics(
                    reply,
                    admin::delete_topics::not_controller(&request, api_version),
                );
                self.admin_request(
                    received,
                    request.timeout_ms,
                    refused,
                    async |ctx, zk, config| {
                        let (response, awaits) =
                            admin::delete_topics::handle(ctx, zk, config, &request, api_version)
                                .await;
                        (AdminResponse::DeleteTopics(response), awaits)
                    },
                )
                .await;
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
                    reassignment::list(&self.core.ctx, &request)
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
                    epoch = self.core.ctx.epoch,
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
                        self.core = Core::new(
                            ControllerContext::default(),
                            self.config.unclean_leader_election_enable,
                        );
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
        self.core = Core::new(
            ControllerContext {
                epoch,
                epoch_zk_version,
                ..ControllerContext::default()
            },
            self.config.unclean_leader_election_enable,
        );
        for (id, broker) in self.zk.get_all_brokers(true).await? {
            self.add_live_broker(id, &broker);
        }
        // The whole tree in bulk: every assignment, then every partition state, each read
        // concurrently (Kafka 2.8 pipelines these reads too).
        let topics = self.zk.get_all_topics(true).await?;
        self.load_topics(&topics).await?;
        let partitions: Vec<_> = self
            .core
            .ctx
            .all_topics
            .iter()
            .flat_map(|t| self.core.ctx.partitions_for_topic(t))
            .collect();
        for (tp, result) in self.zk.get_partition_states(&partitions).await {
            match result {
                Ok(Some(state)) => {
                    self.core
                        .ctx
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
            if self.core.ctx.topics_being_reassigned.contains(&topic) {
                self.core
                    .ctx
                    .topics_ineligible_for_deletion
                    .insert(topic.clone());
            }
            self.core.ctx.topics_to_be_deleted.insert(topic);
        }
        self.active = true;
        self.active_flag.store(true, Ordering::SeqCst);
        info!(
            broker_id = self.config.broker_id, epoch,
            brokers = ?self.core.ctx.live_broker_ids(), topics = self.core.ctx.all_topics.len(),
            "controller failover complete"
        );
        self.refresh_unclean_election_topics().await?;
        let mut effects = lifecycle::on_controller_failover(&mut self.core.ctx);
        // Kafka's initializePartitionReassignments: /admin/reassign_partitions first (it
        // supplants what the assignments record), then the reassignments in progress.
        let started = match self.read_zk_reassignment().await? {
            Some(entries) => {
                let outcome = reassignment::on_zk_reassignment(&mut self.core.ctx, &entries);
                effects.extend(outcome.effects);
                outcome.started
            }
            None => BTreeSet::new(),
        };
        effects.extend(reassignment::resume_all(&mut self.core.ctx, &started));
        let executed = self.execute_electing(effects).await?;
        // The whole failover, from the election to every LeaderAndIsr/UpdateMetadata queued
        // (the benchmark in BENCHMARKS.md reads this line).
        info!(
            epoch,
            partitions = self.core.ctx.leadership.len(),
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
    /// from the state read back, at most [`core::ELECTION_RETRIES`] times.
    async fn run_replica_election(
        &mut self,
        partitions: BTreeSet<TopicPartition>,
        election_type: ElectionType,
        trigger: Trigger,
    ) -> Result<BTreeMap<TopicPartition, replica_election::Outcome>, ZkClientError> {
        let mut outcomes = BTreeMap::new();
        let mut todo = partitions;
        for attempt in 0..=core::ELECTION_RETRIES {
            if todo.is_empty() {
                break;
            }
            let plan = replica_election::plan(&mut self.core.ctx, &todo, election_type, trigger);
            outcomes.extend(plan.decided);
            let executed = self.execute(plan.effects).await?;
            let mut retry = BTreeSet::new();
            for tp in plan.electing {
                match executed.partitions.get(&tp) {
                    Some(PartitionWrite::Written { .. }) => {
                        let leader = self.core.ctx.leadership.get(&tp).map_or(-1, |l| l.leader);
                        outcomes.insert(tp, Ok(leader));
                    }
                    _ if attempt < core::ELECTION_RETRIES => {
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
        let (partitions, unparsable) =
            replica_election::requested_partitions(&self.core.ctx, request);
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
                    .delete_preferred_replica_election(self.core.ctx.epoch_zk_version)
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
            .delete_preferred_replica_election(self.core.ctx.epoch_zk_version)
            .await
    }

    /// The leader-imbalance check (Kafka 2.8's `checkAndTriggerAutoLeaderRebalance`).
    async fn on_auto_leader_rebalance(&mut self) -> Result<(), ZkClientError> {
        let partitions = replica_election::imbalanced_partitions(
            &self.core.ctx,
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
        let mut plan = reassignment::alter(&mut self.core.ctx, &request);
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
                !(self.core.ctx.reassignments.contains_key(&tp)
                    && reassignment::ReplicaAssignment::of(&self.core.ctx, &tp).target()
                        == *replicas)
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        info!(
            partitions = entries.len(),
            "reassignment requested through /admin/reassign_partitions"
        );
        let outcome = reassignment::on_zk_reassignment(&mut self.core.ctx, &entries);
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
                    .delete_partition_reassignment(self.core.ctx.epoch_zk_version)
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
        let epoch_zk_version = self.core.ctx.epoch_zk_version;
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

    /// AlterPartition (see [`alter_partition`]): validate in pure code, write, answer from
    /// what each write did.
    async fn on_alter_partition(
        &mut self,
        request: AlterPartitionRequest,
        api_version: i16,
        reply: oneshot::Sender<AlterPartitionResponse>,
    ) -> Result<(), ZkClientError> {
        let plan = match alter_partition::plan(&mut self.core.ctx, &request, api_version) {
            Ok(plan) => plan,
            Err(error) => {
                let _ = reply.send(alter_partition::refused(error));
                return Ok(());
            }
        };
        let effects = plan.effects.clone();
        match self.execute(effects).await {
            Ok(executed) => {
                let response =
                    alter_partition::response(plan, &mut self.core.ctx, &executed.failed());
                let _ = reply.send(response);
                // An ISR that grew may complete a reassignment (Kafka does this after
                // answering AlterPartition).
                let written: Vec<_> = executed
                    .partitions
                    .iter()
                    .filter(|(_, w)| **w != PartitionWrite::Failed)
                    .map(|(tp, _)| tp.clone())
                    .collect();
                let effects = reassignment::maybe_complete(&mut self.core.ctx, &written);
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
        let Some(live) = self.core.ctx.live_brokers.get(&broker) else {
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
        let effects = lifecycle::on_controlled_shutdown(&mut self.core.ctx, broker);
        if let Err(err) = self.execute_electing(effects).await {
            return (
                ControlledShutdownResponse::default()
                    .with_error_code(ResponseError::NotController.code()),
                Err(err),
            );
        }
        let remaining: Vec<_> = lifecycle::partitions_led_by(&self.core.ctx, broker)
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

    /// Reads `unclean.leader.election.enable` of the topics whose next election cannot be
    /// clean, concurrently (the core decides from what is read).
    async fn refresh_unclean_election_topics(&mut self) -> Result<(), ZkClientError> {
        let topics = self.core.unclean_topics_to_read();
        if topics.is_empty() {
            return Ok(());
        }
        if let Outcome::TopicConfigs(configs) =
            self.carry_out(StoreOp::ReadTopicConfigs(topics)).await?
        {
            self.core.apply_unclean_configs(configs);
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
            epoch = self.core.ctx.epoch,
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
        self.core = Core::new(
            ControllerContext::default(),
            self.config.unclean_leader_election_enable,
        );
        if let Err(err) = self.zk.delete_controller_if_owned().await {
            warn!(error = %err, "could not delete /controller while resigning");
        }
    }

    // ---- Watch events ----

    async fn on_broker_change(&mut self) -> Result<(), ZkClientError> {
        let started = std::time::Instant::now();
        let brokers = self
            .zk
            .get_all_brokers(true)
            .await?
            .into_iter()
            .map(|(id, b)| (id, live_broker(id, &b, &self.config.inter_broker_listener)))
            .collect();
        let (finished, decided) = self.drive_timed(Input::Brokers(brokers)).await?;
        let decided_ms = decided.duration_since(started).as_secs_f64() * 1e3;
        let diff = finished.broker_change.unwrap_or_default();
        let executed = finished.executed;
        // The controller's part of a failover, from the watch firing to the requests queued
        // (the benchmark in BENCHMARKS.md reads this line).
        info!(
            new = ?diff.new, dead = ?diff.dead, bounced = ?diff.bounced,
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
        let deleted: Vec<_> = self
            .core
            .ctx
            .all_topics
            .difference(&topics)
            .cloned()
            .collect();
        let new: Vec<_> = topics
            .difference(&self.core.ctx.all_topics)
            .cloned()
            .collect();
        for topic in &deleted {
            warn!(%topic, "topic vanished from the store without a deletion; forgetting it");
            self.core.ctx.remove_topic(topic);
        }
        let mut partitions = Vec::new();
        for topic in self.load_topics(&new).await? {
            partitions.extend(self.core.ctx.partitions_for_topic(&topic));
        }
        if !new.is_empty() {
            info!(new = ?new, "new topics");
        }
        let effects = lifecycle::on_new_partition_creation(&mut self.core.ctx, &partitions);
        self.execute(effects).await.map(drop)
    }

    async fn on_partition_modifications(&mut self, topic: &str) -> Result<(), ZkClientError> {
        let Ok(topic) = topic.parse::<TopicName>() else {
            return Ok(());
        };
        let Some(current) = self.zk.get_topic_assignment(&topic, true).await? else {
            return Ok(());
        };
        if !self.core.ctx.all_topics.contains(&topic) {
            // The topic-change event that follows loads it.
            return Ok(());
        }
        let known = self
            .core
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
        let edits = reassignment::hand_edits(&self.core.ctx, &topic, &current.assignment);
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
            if let Some(mut restored) = reassignment::topic_znode(&self.core.ctx, &topic) {
                restored.topic_id = current.assignment.topic_id.or(restored.topic_id);
                if !self.core.ctx.is_topic_queued_for_deletion(&topic) {
                    restored.partitions.extend(added.clone());
                }
                match self
                    .zk
                    .set_topic_assignment(
                        &topic,
                        &restored,
                        Some(current.zk_version),
                        Some(self.core.ctx.epoch_zk_version),
                    )
                    .await
                {
                    Ok(()) => {}
                    Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                    // Changed again meanwhile: the watch brings it back here.
                    Err(err) => warn!(%topic, error = %err, "could not restore the assignment"),
                }
                if self.core.ctx.is_topic_queued_for_deletion(&topic) {
                    return Ok(());
                }
            }
        }
        if added.is_empty() {
            return Ok(());
        }
        if self.core.ctx.is_topic_queued_for_deletion(&topic) {
            info!(%topic, "skipping partition addition: the topic is being deleted; restoring its assignment");
            let mut restored = current.assignment.clone();
            restored.partitions = known;
            return self
                .zk
                .set_topic_assignment(
                    &topic,
                    &restored,
                    Some(current.zk_version),
                    Some(self.core.ctx.epoch_zk_version),
                )
                .await;
        }
        info!(%topic, added = ?added.keys().collect::<Vec<_>>(), "new partitions");
        let mut merged = known;
        merged.extend(added.iter().map(|(p, r)| (*p, r.clone())));
        self.core.ctx.set_topic_assignment(topic.clone(), merged);
        let partitions: Vec<_> = added
            .keys()
            .map(|&p| TopicPartition::new(topic.clone(), p))
            .collect();
        let effects = lifecycle::on_new_partition_creation(&mut self.core.ctx, &partitions);
        self.execute(effects).await.map(drop)
    }

    async fn on_topic_deletion(&mut self) -> Result<(), ZkClientError> {
        let queued = self.read_deletion_marks().await?;
        let new: BTreeSet<_> = queued
            .into_iter()
            .filter(|t| !self.core.ctx.is_topic_queued_for_deletion(t))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        info!(topics = ?new, "topics queued for deletion");
        let effects = topic_deletion::enqueue_topics(&mut self.core.ctx, &new);
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
            if !self.core.ctx.all_topics.contains(&topic) {
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
                .delete_topic_deletions(&to_remove, self.core.ctx.epoch_zk_version)
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
            .partition(|(tp, _)| self.core.ctx.is_topic_queued_for_deletion(&tp.topic));
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
                &mut self.core.ctx,
                &ok,
            ));
        }
        if !failed.is_empty() {
            effects.extend(topic_deletion::fail_replica_deletion(
                &mut self.core.ctx,
                &failed,
            ));
        }
        self.execute(effects).await.map(drop)
    }

    // ---- Loading ----

    fn add_live_broker(&mut self, id: BrokerId, broker: &RegisteredBroker) {
        let live = live_broker(id, broker, &self.config.inter_broker_listener);
        let mut ready = Ready::default();
        self.core.add_live_broker(live, &mut ready);
        self.apply_channels(ready.channels);
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
                    Some(self.core.ctx.epoch_zk_version),
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
            self.core.ctx.topic_ids.insert(topic.clone(), id);
        }
        self.core
            .ctx
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
            self.core
                .ctx
                .set_reassigning(&TopicPartition::new(topic.clone(), p), Some(reassigning));
        }
        Ok(())
    }

    // ---- Carrying out the core's Ready ----

    /// Carries out the effects of one event (see [`Core`]): fenced partition-state writes in
    /// rounds, the other store writes, then the control requests, built from the context
    /// after the writes and left out for partitions whose write failed. Returns what happened
    /// to each written partition.
    pub(crate) async fn execute(
        &mut self,
        effects: Vec<Effect>,
    ) -> Result<Executed, ZkClientError> {
        self.drive(Input::Execute {
            effects,
            elect_again: false,
        })
        .await
        .map(|f| f.executed)
    }

    /// [`EventLoop::execute`], electing again the partitions whose state write lost a race
    /// (at most [`core::ELECTION_RETRIES`] times).
    async fn execute_electing(&mut self, effects: Vec<Effect>) -> Result<Executed, ZkClientError> {
        self.drive(Input::Execute {
            effects,
            elect_again: true,
        })
        .await
        .map(|f| f.executed)
    }

    /// Steps the core with `input` and carries out each [`Ready`] until the work is over:
    /// channel changes, topic-deleted hooks, control requests, then the store operation,
    /// whose outcome goes back to the core. A store error ends the work.
    async fn drive(&mut self, input: Input) -> Result<Finished, ZkClientError> {
        self.drive_timed(input).await.map(|(finished, _)| finished)
    }

    /// [`EventLoop::drive`], also returning when the core had decided: the first step that
    /// asked for more than reads (the benchmark's `decided_ms`).
    async fn drive_timed(
        &mut self,
        input: Input,
    ) -> Result<(Finished, std::time::Instant), ZkClientError> {
        let mut ready = self.core.step(input)?;
        let mut decided = None;
        loop {
            if !matches!(ready.op, Some(StoreOp::ReadTopicConfigs(_))) {
                decided.get_or_insert_with(std::time::Instant::now);
            }
            self.apply_channels(std::mem::take(&mut ready.channels));
            for topic in &ready.topics_deleted {
                self.config.on_topic_deleted.run(topic);
            }
            if let Some(batch) = ready.requests.take() {
                self.channels
                    .send_batch(&self.core.ctx, self.config.broker_id, batch);
            }
            let Some(op) = ready.op.take() else {
                let decided = decided.unwrap_or_else(std::time::Instant::now);
                return Ok((ready.finished.unwrap_or_default(), decided));
            };
            let outcome = match self.carry_out(op).await {
                Ok(outcome) => outcome,
                Err(err) => {
                    self.core.abort();
                    return Err(err);
                }
            };
            ready = self.core.step(Input::Outcome(outcome))?;
        }
    }

    fn apply_channels(&mut self, changes: Vec<ChannelChange>) {
        for change in changes {
            match change {
                ChannelChange::Add(live) => self.channels.add_broker(&live),
                ChannelChange::Remove(id) => self.channels.remove_broker(id),
            }
        }
    }

    /// Carries out one store operation, fenced on the controller epoch's znode version.
    async fn carry_out(&mut self, op: StoreOp) -> Result<Outcome, ZkClientError> {
        let epoch_zk_version = self.core.ctx.epoch_zk_version;
        match op {
            StoreOp::WriteStates { creates, updates } => {
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
                Ok(Outcome::StatesWritten {
                    created: created?,
                    updated: updated?,
                })
            }
            StoreOp::ReadStates(partitions) => Ok(Outcome::StatesRead(
                self.zk.get_partition_states(&partitions).await,
            )),
            StoreOp::ReadTopicConfigs(topics) => {
                let mut reads = tokio::task::JoinSet::new();
                for topic in topics {
                    let zk = self.zk.clone();
                    reads.spawn(async move {
                        let config = zk.get_topic_config(&topic).await;
                        (topic, config)
                    });
                }
                let mut configs = Vec::new();
                while let Some(joined) = reads.join_next().await {
                    if let Ok(read) = joined {
                        configs.push(read);
                    }
                }
                Ok(Outcome::TopicConfigs(configs))
            }
            StoreOp::WriteTopicAssignments(writes) => {
                let mut results = Vec::with_capacity(writes.len());
                for (topic, znode) in writes {
                    match self
                        .zk
                        .set_topic_assignment(&topic, &znode, None, Some(epoch_zk_version))
                        .await
                    {
                        Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                        result => results.push((topic, result)),
                    }
                }
                Ok(Outcome::TopicsWritten(results))
            }
            StoreOp::RemoveFromZkReassignment(removals) => {
                self.remove_from_zk_reassignment(&removals).await?;
                Ok(Outcome::Done)
            }
            StoreOp::DeleteTopicZnodes(topic) => {
                match self.zk.delete_topic_znodes(&topic, epoch_zk_version).await {
                    Ok(()) => info!(%topic, "topic deleted from the store"),
                    Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                    // The mark stays, so the next controller resumes this deletion.
                    Err(err) => {
                        error!(%topic, error = %err, "could not delete the topic's znodes")
                    }
                }
                Ok(Outcome::Done)
            }
        }
    }

    /// The one path of CreateTopics, CreatePartitions and DeleteTopics: NOT_CONTROLLER
    /// (`refused`) when this broker is not the controller, REQUEST_TIMED_OUT unrun when the
    /// request waited in the queue past its timeout, else `run` (validate, place, write the
    /// store fenced on the epoch) and the answer now or once its results hold.
    async fn admin_request(
        &mut self,
        received: Instant,
        timeout_ms: i32,
        refused: Responder,
        run: impl AsyncFnOnce(
            &ControllerContext,
            &KafkaZkClient,
            &ControllerConfig,
        ) -> (AdminResponse, Vec<Await>),
    ) {
        if !self.active {
            refused.send();
            return;
        }
        if expired_in_queue(received, timeout_ms) {
            refused.time_out_in_queue();
            return;
        }
        let (response, awaits) = run(&self.core.ctx, &self.zk, &self.config).await;
        self.reply_or_wait(received, timeout_ms, awaits, refused.with(response));
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
        let ctx = &self.core.ctx;
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

/// A registration as the controller keeps it: its inter-broker endpoint (else its first, else
/// the legacy host and port) and every listener.
fn live_broker(id: BrokerId, broker: &RegisteredBroker, inter_broker: &str) -> LiveBroker {
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
    let endpoint = endpoints
        .iter()
        .find(|(name, _, _, _)| name == inter_broker)
        .or(endpoints.first());
    let (host, port) = match endpoint {
        Some((_, host, port, _)) => (host.clone(), *port),
        None => (
            registration.host.clone().unwrap_or_default(),
            registration.port,
        ),
    };
    LiveBroker {
        id,
        host,
        port,
        rack: registration.rack.clone(),
        epoch: broker.epoch,
        endpoints,
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

/// The response of an admin request that ran (its [`Responder`] held the refusal).
#[derive(Debug)]
enum AdminResponse {
    CreateTopics(CreateTopicsResponse),
    CreatePartitions(CreatePartitionsResponse),
    DeleteTopics(DeleteTopicsResponse),
}

impl Responder {
    /// The same reply channel with the response of the request that ran.
    fn with(self, response: AdminResponse) -> Responder {
        match (self, response) {
            (Responder::CreateTopics(tx, _), AdminResponse::CreateTopics(r)) => {
                Responder::CreateTopics(tx, r)
            }
            (Responder::CreatePartitions(tx, _), AdminResponse::CreatePartitions(r)) => {
                Responder::CreatePartitions(tx, r)
            }
            (Responder::DeleteTopics(tx, _), AdminResponse::DeleteTopics(r)) => {
                Responder::DeleteTopics(tx, r)
            }
            (responder, response) => {
                unreachable!("{responder:?} answered with {response:?}")
            }
        }
    }

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
