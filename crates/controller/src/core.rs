//! `Core`: the controller's deciding half, in raft-rs's `RawNode` shape. It does no I/O:
//! [`Core::step`] takes an [`Input`] (an event's reads, or the outcome of the store
//! operation the core asked for last) and returns a [`Ready`]: the next fenced store
//! operation to carry out, the channel changes, the control requests to send and, once an
//! execution is over, what it did. The event loop (`event_loop.rs`) is the thin driver:
//! read, `step`, carry out `Ready`, feed back the outcome; the simulation
//! (`replication_sim.rs`) drives the same `Core` over its simulated store and brokers.
//!
//! In the core today: carrying out the state machines' [`Effect`]s (partition-state writes
//! batched in rounds, what a failed, refused or existing write means for the context, the
//! topic assignment writes, topic deletions, the control requests built from what was
//! written), elections that lost a write race run again, and the broker-change diff (new,
//! dead and bounced brokers). Every store write the core asks for is fenced on the
//! controller epoch's znode version: the loop carries [`StoreOp`]s out with
//! `ctx.epoch_zk_version` and nothing else.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tracing::{error, info, warn};

use model::{BrokerId, TopicName, TopicPartition};
use znodes::json::{PartitionStateZNode, TopicAssignment};
use znodes::zk_client::{VersionedPartitionState, ZkClientError};

use crate::channel_manager::RequestBatch;
use crate::context::{ControllerContext, LeaderIsrAndControllerEpoch, LiveBroker};
use crate::effect::Effect;
use crate::partition_state_machine::{self, PartitionState};
use crate::{lifecycle, reassignment};

/// How many times an election whose write lost a race is run again within one event.
pub const ELECTION_RETRIES: usize = 3;

/// The topic config key (and broker default) that allows electing an out-of-sync replica.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// What the core is told.
#[derive(Debug)]
pub enum Input {
    /// Carry out the effects of an event. `elect_again`: a partition whose state write lost
    /// a race (another writer moved the znode) and whose leader is not online is elected
    /// again from the state read back, at most [`ELECTION_RETRIES`] times (Kafka retries an
    /// election on a version conflict until it is written).
    Execute {
        /// The state machines' effects, in order.
        effects: Vec<Effect>,
        /// Whether lost elections are run again.
        elect_again: bool,
    },
    /// A BrokerChange event's read of `/brokers/ids`: every registered broker.
    Brokers(BTreeMap<BrokerId, LiveBroker>),
    /// The outcome of the last [`Ready::op`].
    Outcome(Outcome),
}

/// One store operation the core asks for. Writes are fenced on the controller epoch's znode
/// version (`ctx.epoch_zk_version`); the loop carries out one at a time.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    /// Create these partition state znodes and update those (at their expected version),
    /// together. Answered by [`Outcome::StatesWritten`].
    WriteStates {
        /// Partition state znodes to create (with their parents).
        creates: Vec<(TopicPartition, PartitionStateZNode)>,
        /// Partition state znodes to overwrite at the version given.
        updates: Vec<(TopicPartition, PartitionStateZNode, i32)>,
    },
    /// Read these partition states. Answered by [`Outcome::StatesRead`].
    ReadStates(Vec<TopicPartition>),
    /// Read these topics' config overrides. Answered by [`Outcome::TopicConfigs`].
    ReadTopicConfigs(Vec<TopicName>),
    /// Write these topic assignment znodes, one by one, stopping at `ControllerMoved`.
    /// Answered by [`Outcome::TopicsWritten`].
    WriteTopicAssignments(Vec<(TopicName, TopicAssignment)>),
    /// Remove these partitions from `/admin/reassign_partitions` (only where their target
    /// there is the one given), deleting it when none is left. Answered by [`Outcome::Done`].
    RemoveFromZkReassignment(Vec<(TopicPartition, Option<Vec<BrokerId>>)>),
    /// Delete the topic's znodes (the last step of its deletion). Answered by
    /// [`Outcome::Done`]; a failure other than `ControllerMoved` is only logged (the mark
    /// stays, so the next controller resumes the deletion).
    DeleteTopicZnodes(TopicName),
}

/// Per topic: its config overrides, or why they could not be read.
pub type TopicConfigReads = Vec<(TopicName, Result<BTreeMap<String, String>, ZkClientError>)>;

/// What a [`StoreOp`] did. A store error that fails the whole operation (the epoch fence,
/// a lost session) is not an outcome: the loop ends the event with it and calls
/// [`Core::abort`].
#[derive(Debug)]
pub enum Outcome {
    /// Per created and per updated partition.
    StatesWritten {
        /// The creates' results.
        created: Vec<(TopicPartition, Result<(), ZkClientError>)>,
        /// The updates' results (the new znode version).
        updated: Vec<(TopicPartition, Result<i32, ZkClientError>)>,
    },
    /// Per partition read.
    StatesRead(
        Vec<(
            TopicPartition,
            Result<Option<VersionedPartitionState>, ZkClientError>,
        )>,
    ),
    /// Per topic: its config overrides, or why they could not be read.
    TopicConfigs(TopicConfigReads),
    /// Per topic written, until the first `ControllerMoved` (which the loop returns instead).
    TopicsWritten(Vec<(TopicName, Result<(), ZkClientError>)>),
    /// The operation is done.
    Done,
}

/// A channel manager change the loop makes before anything else of a [`Ready`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelChange {
    /// Open (or reopen) a queue to this broker.
    Add(LiveBroker),
    /// Drop the queue to this broker.
    Remove(BrokerId),
}

/// What the loop carries out after a step, in this order: the channel changes, the
/// topic-deleted hooks, the control requests, then the store operation (whose outcome it
/// feeds back). With no operation the step's work is over: `finished` says what it did.
#[derive(Debug, Default)]
pub struct Ready {
    /// Channel manager changes, in order.
    pub channels: Vec<ChannelChange>,
    /// Topics whose deletion completed: run the topic-deleted hook for each.
    pub topics_deleted: Vec<TopicName>,
    /// Control requests to send, built from the context when sent.
    pub requests: Option<RequestBatch>,
    /// The next store operation.
    pub op: Option<StoreOp>,
    /// The work is over (no `op`): what the writes did.
    pub finished: Option<Finished>,
}

/// What an execution did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The writes, over every election retry.
    pub executed: Executed,
    /// When the work was a broker change: the brokers it found.
    pub broker_change: Option<BrokerDiff>,
}

/// The brokers a BrokerChange found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BrokerDiff {
    /// Registered and not live before.
    pub new: BTreeSet<BrokerId>,
    /// Live before and no longer registered.
    pub dead: BTreeSet<BrokerId>,
    /// Registered again with a new broker epoch (a quick restart).
    pub bounced: BTreeSet<BrokerId>,
}

impl BrokerDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.new.is_empty() && self.dead.is_empty() && self.bounced.is_empty()
    }
}

/// What an execution did to the partitions whose state znode it wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Executed {
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
pub enum PartitionWrite {
    /// The state znode has this version now (created, adopted or updated).
    Written {
        /// The znode version (Kafka's partition epoch).
        zk_version: i32,
    },
    /// The write failed; the context holds what the store has (re-read), or the partition
    /// went back to New.
    Failed,
}

/// The controller's deciding half: the context and the work in progress.
#[derive(Debug, Default)]
pub struct Core {
    /// The controller context (what the controller knows of the cluster).
    pub ctx: ControllerContext,
    /// The default of `unclean.leader.election.enable` (a topic override wins).
    unclean_default: bool,
    job: Option<Job>,
}

/// Work waiting for the outcome of a store operation.
#[derive(Debug)]
enum Job {
    /// A broker change read the configs of the topics that may need an unclean election.
    BrokerChange {
        diff: BrokerDiff,
        registered: BTreeMap<BrokerId, LiveBroker>,
    },
    Execution(Box<Execution>),
}

#[derive(Debug)]
struct Execution {
    elect_again: bool,
    /// Election retries done.
    attempt: usize,
    /// What every pass before this one did.
    total: Executed,
    /// This pass.
    pass: Pass,
    broker_change: Option<BrokerDiff>,
}

/// One pass over a list of effects: the state-write rounds, then the other effects in order.
#[derive(Debug)]
struct Pass {
    rounds: VecDeque<Round>,
    /// The topic assignments to write (each once, after the states).
    topic_writes: BTreeSet<TopicName>,
    zk_removals: Vec<(TopicPartition, Option<Vec<BrokerId>>)>,
    /// The other effects, in order, consumed from the front.
    others: VecDeque<Effect>,
    executed: Executed,
    /// The partitions whose write failed, once the writes are over.
    failed: Option<BTreeSet<TopicPartition>>,
    batch: RequestBatch,
    stage: Stage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The next round of state writes goes out.
    Rounds,
    /// A round's writes are out.
    Writing,
    /// The states of a round's existing (adopt) and refused (reread) writes are being read.
    Reading,
    TopicWrites,
    WritingTopics,
    ZkRemovals,
    RemovingFromZk,
    Others,
    DeletingTopic,
}

/// The partition-state writes of one event that go to the store together.
#[derive(Debug, Default)]
struct Round {
    creates: Vec<(TopicPartition, LeaderIsrAndControllerEpoch)>,
    updates: Vec<(TopicPartition, LeaderIsrAndControllerEpoch, i32)>,
    /// Creates that found the znode: read and adopted.
    adopt: BTreeSet<TopicPartition>,
}

impl Pass {
    /// Sorts effects: partition-state writes into rounds (the n-th write of a partition in
    /// round n, so writes to one partition keep their order), assignment writes and
    /// `/admin/reassign_partitions` removals aside, the rest in order.
    fn new(effects: Vec<Effect>) -> Pass {
        let mut rounds: Vec<Round> = Vec::new();
        let mut writes_per_partition: BTreeMap<TopicPartition, usize> = BTreeMap::new();
        let mut next_round = |tp: &TopicPartition, rounds: &mut Vec<Round>| {
            let count = writes_per_partition.entry(tp.clone()).or_default();
            let index = *count;
            *count += 1;
            if rounds.len() <= index {
                rounds.resize_with(index + 1, Round::default);
            }
            index
        };
        let mut pass = Pass {
            rounds: VecDeque::new(),
            topic_writes: BTreeSet::new(),
            zk_removals: Vec::new(),
            others: VecDeque::new(),
            executed: Executed::default(),
            failed: None,
            batch: RequestBatch::default(),
            stage: Stage::Rounds,
        };
        for effect in effects {
            match effect {
                Effect::CreatePartitionState { tp, state } => {
                    let i = next_round(&tp, &mut rounds);
                    rounds[i].creates.push((tp, state));
                }
                Effect::UpdatePartitionState {
                    tp,
                    state,
                    expected_zk_version,
                } => {
                    let i = next_round(&tp, &mut rounds);
                    rounds[i].updates.push((tp, state, expected_zk_version));
                }
                Effect::WriteTopicAssignment(topic) => {
                    pass.topic_writes.insert(topic);
                }
                Effect::RemoveFromZkReassignment { tp, replicas } => {
                    pass.zk_removals.push((tp, replicas));
                }
                other => pass.others.push_back(other),
            }
        }
        pass.rounds = rounds.into();
        pass
    }
}

/// A partition state as its znode holds it.
pub fn to_znode(state: &LeaderIsrAndControllerEpoch) -> PartitionStateZNode {
    PartitionStateZNode::new(
        state.controller_epoch,
        state.leader,
        state.leader_epoch,
        state.isr.clone(),
    )
    .with_leader_recovery_state(state.leader_recovery_state)
}

/// A partition state read from the store, as the context keeps it.
pub fn leadership_from(state: PartitionStateZNode, zk_version: i32) -> LeaderIsrAndControllerEpoch {
    LeaderIsrAndControllerEpoch {
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        isr: state.isr,
        controller_epoch: state.controller_epoch,
        zk_version,
        leader_recovery_state: state.leader_recovery_state,
    }
}

impl Core {
    /// A core over `ctx`; `unclean_default` is the broker default of
    /// `unclean.leader.election.enable`.
    pub fn new(ctx: ControllerContext, unclean_default: bool) -> Core {
        Core {
            ctx,
            unclean_default,
            job: None,
        }
    }

    /// Drops the work in progress: the loop ended the event with a store error.
    pub fn abort(&mut self) {
        self.job = None;
    }

    /// Whether work waits for an outcome.
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Takes one input and says what to do next.
    ///
    /// Returns an error when an outcome fails the whole event (as the store's own errors
    /// do); the work in progress is dropped then.
    pub fn step(&mut self, input: Input) -> Result<Ready, ZkClientError> {
        let result = self.step_inner(input);
        if result.is_err() {
            self.job = None;
        }
        result
    }

    fn step_inner(&mut self, input: Input) -> Result<Ready, ZkClientError> {
        let mut ready = Ready::default();
        match input {
            Input::Execute {
                effects,
                elect_again,
            } => {
                assert!(self.job.is_none(), "an execution is already in progress");
                let execution = Execution {
                    elect_again,
                    attempt: 0,
                    total: Executed::default(),
                    pass: Pass::new(effects),
                    broker_change: None,
                };
                self.advance(execution, None, &mut ready)?;
            }
            Input::Brokers(registered) => {
                assert!(self.job.is_none(), "an execution is already in progress");
                let diff = self.broker_diff(&registered, &mut ready);
                let topics = lifecycle::topics_needing_unclean_decision(&self.ctx);
                self.ctx.unclean_election_topics.clear();
                if topics.is_empty() {
                    self.after_broker_configs(diff, &registered, &mut ready)?;
                } else {
                    ready.op = Some(StoreOp::ReadTopicConfigs(topics.into_iter().collect()));
                    self.job = Some(Job::BrokerChange { diff, registered });
                }
            }
            Input::Outcome(outcome) => match self.job.take() {
                Some(Job::BrokerChange { diff, registered }) => {
                    let Outcome::TopicConfigs(configs) = outcome else {
                        panic!("a broker change waits for topic configs, got {outcome:?}");
                    };
                    self.apply_unclean_configs(configs);
                    self.after_broker_configs(diff, &registered, &mut ready)?;
                }
                Some(Job::Execution(execution)) => {
                    self.advance(*execution, Some(outcome), &mut ready)?;
                }
                None => panic!("an outcome with no store operation asked for: {outcome:?}"),
            },
        }
        Ok(ready)
    }

    /// The topics to read `unclean.leader.election.enable` of before an election, clearing
    /// what the context knew (each election decides afresh).
    pub fn unclean_topics_to_read(&mut self) -> Vec<TopicName> {
        self.ctx.unclean_election_topics.clear();
        lifecycle::topics_needing_unclean_decision(&self.ctx)
            .into_iter()
            .collect()
    }

    /// Records which topics may elect an out-of-sync replica (topic override, else the
    /// broker default); a topic whose config cannot be read elects cleanly (it waits), as
    /// Kafka does.
    pub fn apply_unclean_configs(&mut self, configs: TopicConfigReads) {
        for (topic, config) in configs {
            match config {
                Ok(config) => {
                    let enabled = config
                        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
                        .map_or(self.unclean_default, |v| {
                            v.trim().eq_ignore_ascii_case("true")
                        });
                    if enabled {
                        self.ctx.unclean_election_topics.insert(topic);
                    }
                }
                Err(err) => {
                    warn!(%topic, error = %err, "cannot read the topic's config; its leader election stays clean")
                }
            }
        }
    }

    // ---- Broker changes ----

    /// New, dead and bounced brokers against the live set; the live set follows (a bounced
    /// broker is removed here and added back after its failure is handled).
    fn broker_diff(
        &mut self,
        registered: &BTreeMap<BrokerId, LiveBroker>,
        ready: &mut Ready,
    ) -> BrokerDiff {
        let ctx = &self.ctx;
        let diff = BrokerDiff {
            new: registered
                .keys()
                .copied()
                .filter(|id| !ctx.is_live(*id))
                .collect(),
            dead: ctx
                .live_brokers
                .keys()
                .copied()
                .filter(|id| !registered.contains_key(id))
                .collect(),
            bounced: registered
                .iter()
                .filter(|(id, b)| {
                    ctx.live_brokers
                        .get(id)
                        .is_some_and(|live| live.epoch != b.epoch)
                })
                .map(|(id, _)| *id)
                .collect(),
        };
        for id in &diff.new {
            self.add_live_broker(registered[id].clone(), ready);
        }
        for id in diff.dead.iter().chain(&diff.bounced) {
            self.ctx.live_brokers.remove(id);
            ready.channels.push(ChannelChange::Remove(*id));
        }
        info!(new = ?diff.new, dead = ?diff.dead, bounced = ?diff.bounced, "broker change");
        diff
    }

    /// Makes a broker live (and known), opening its queue.
    pub fn add_live_broker(&mut self, live: LiveBroker, ready: &mut Ready) {
        self.ctx.known_brokers.insert(live.id);
        self.ctx.live_brokers.insert(live.id, live.clone());
        ready.channels.push(ChannelChange::Add(live));
    }

    fn after_broker_configs(
        &mut self,
        diff: BrokerDiff,
        registered: &BTreeMap<BrokerId, LiveBroker>,
        ready: &mut Ready,
    ) -> Result<(), ZkClientError> {
        let mut effects = Vec::new();
        if !diff.new.is_empty() {
            effects.extend(lifecycle::on_broker_startup(&mut self.ctx, &diff.new));
            effects.extend(reassignment::on_broker_startup(&mut self.ctx, &diff.new));
        }
        if !diff.bounced.is_empty() {
            effects.extend(lifecycle::on_broker_failure(&mut self.ctx, &diff.bounced));
            for id in &diff.bounced {
                self.add_live_broker(registered[id].clone(), ready);
            }
            effects.extend(lifecycle::on_broker_startup(&mut self.ctx, &diff.bounced));
            effects.extend(reassignment::on_broker_startup(
                &mut self.ctx,
                &diff.bounced,
            ));
        }
        if !diff.dead.is_empty() {
            effects.extend(lifecycle::on_broker_failure(&mut self.ctx, &diff.dead));
        }
        let execution = Execution {
            elect_again: true,
            attempt: 0,
            total: Executed::default(),
            pass: Pass::new(effects),
            broker_change: Some(diff),
        };
        self.advance(execution, None, ready)
    }

    // ---- Executing effects ----

    /// Runs the execution until it needs a store operation (kept as the job) or is over.
    fn advance(
        &mut self,
        mut ex: Execution,
        mut outcome: Option<Outcome>,
        ready: &mut Ready,
    ) -> Result<(), ZkClientError> {
        loop {
            let pass = &mut ex.pass;
            match pass.stage {
                Stage::Rounds => {
                    let Some(round) = pass.rounds.front() else {
                        pass.stage = Stage::TopicWrites;
                        continue;
                    };
                    // A partition whose earlier write failed in this event is not written
                    // again: its later write was computed from a state the store lacks.
                    let skipped = pass.executed.failed();
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
                    if creates.is_empty() && updates.is_empty() {
                        pass.rounds.pop_front();
                        continue;
                    }
                    pass.stage = Stage::Writing;
                    ready.op = Some(StoreOp::WriteStates { creates, updates });
                    break;
                }
                Stage::Writing => {
                    let Some(Outcome::StatesWritten { created, updated }) = outcome.take() else {
                        panic!("state writes wait for their outcome");
                    };
                    let mut read = Vec::new();
                    let round = pass.rounds.front_mut().expect("the round written");
                    for (tp, result) in created {
                        match result {
                            Ok(()) => {
                                pass.executed
                                    .partitions
                                    .insert(tp, PartitionWrite::Written { zk_version: 0 });
                            }
                            // Written by hand or by an earlier controller: adopt it instead
                            // of failing.
                            Err(ZkClientError::NodeExists(_)) => {
                                round.adopt.insert(tp.clone());
                                read.push(tp);
                            }
                            Err(err) => {
                                error!(%tp, error = %err, "could not write the partition state; the partition stays New");
                                revert_to_new(&mut self.ctx, &tp);
                                pass.executed.partitions.insert(tp, PartitionWrite::Failed);
                            }
                        }
                    }
                    for (tp, result) in updated {
                        match result {
                            Ok(zk_version) => {
                                if let Some(l) = self.ctx.leadership.get_mut(&tp) {
                                    l.zk_version = zk_version;
                                }
                                pass.executed
                                    .partitions
                                    .insert(tp, PartitionWrite::Written { zk_version });
                            }
                            Err(err) => {
                                error!(%tp, error = %err, "could not update the partition state; reloading it");
                                pass.executed
                                    .partitions
                                    .insert(tp.clone(), PartitionWrite::Failed);
                                read.push(tp);
                            }
                        }
                    }
                    if read.is_empty() {
                        pass.rounds.pop_front();
                        pass.stage = Stage::Rounds;
                        continue;
                    }
                    pass.stage = Stage::Reading;
                    ready.op = Some(StoreOp::ReadStates(read));
                    break;
                }
                Stage::Reading => {
                    let Some(Outcome::StatesRead(states)) = outcome.take() else {
                        panic!("state reads wait for their outcome");
                    };
                    let round = pass.rounds.pop_front().expect("the round written");
                    for (tp, result) in states {
                        if round.adopt.contains(&tp) {
                            match result {
                                Ok(Some(existing)) => {
                                    info!(%tp, "partition state znode exists already; adopting it");
                                    let zk_version = existing.zk_version;
                                    self.ctx.leadership.insert(
                                        tp.clone(),
                                        leadership_from(existing.state, zk_version),
                                    );
                                    pass.executed
                                        .partitions
                                        .insert(tp, PartitionWrite::Written { zk_version });
                                }
                                Ok(None) | Err(ZkClientError::Decode { .. }) => {
                                    revert_to_new(&mut self.ctx, &tp);
                                    pass.executed.partitions.insert(tp, PartitionWrite::Failed);
                                }
                                Err(err) => return Err(err),
                            }
                        } else if let Some(current) = result? {
                            self.ctx
                                .leadership
                                .insert(tp, leadership_from(current.state, current.zk_version));
                        }
                    }
                    pass.stage = Stage::Rounds;
                }
                Stage::TopicWrites => {
                    // Reassignment: each topic's assignment once, from the context, after
                    // the states; then /admin/reassign_partitions.
                    let writes: Vec<_> = std::mem::take(&mut pass.topic_writes)
                        .into_iter()
                        .filter_map(|topic| {
                            reassignment::topic_znode(&self.ctx, &topic).map(|z| (topic, z))
                        })
                        .collect();
                    if writes.is_empty() {
                        pass.stage = Stage::ZkRemovals;
                        continue;
                    }
                    pass.stage = Stage::WritingTopics;
                    ready.op = Some(StoreOp::WriteTopicAssignments(writes));
                    break;
                }
                Stage::WritingTopics => {
                    let Some(Outcome::TopicsWritten(results)) = outcome.take() else {
                        panic!("topic writes wait for their outcome");
                    };
                    for (topic, result) in results {
                        match result {
                            Ok(()) => info!(%topic, "topic assignment written"),
                            Err(err @ ZkClientError::ControllerMoved { .. }) => return Err(err),
                            Err(err) => {
                                error!(%topic, error = %err, "could not write the topic's assignment");
                                pass.executed.failed_topics.insert(topic);
                            }
                        }
                    }
                    pass.stage = Stage::ZkRemovals;
                }
                Stage::ZkRemovals => {
                    if pass.zk_removals.is_empty() {
                        pass.stage = Stage::Others;
                        continue;
                    }
                    pass.stage = Stage::RemovingFromZk;
                    ready.op = Some(StoreOp::RemoveFromZkReassignment(std::mem::take(
                        &mut pass.zk_removals,
                    )));
                    break;
                }
                Stage::RemovingFromZk | Stage::DeletingTopic => {
                    let Some(Outcome::Done) = outcome.take() else {
                        panic!("the operation waits for its outcome");
                    };
                    pass.stage = Stage::Others;
                }
                Stage::Others => {
                    let failed = pass.failed.get_or_insert_with(|| pass.executed.failed());
                    let Some(effect) = pass.others.pop_front() else {
                        // The pass is over: its requests go out, then maybe a retry.
                        let batch = std::mem::take(&mut pass.batch);
                        if !batch.is_empty() {
                            ready.requests = Some(batch);
                        }
                        if self.next_pass(&mut ex) {
                            continue;
                        }
                        ready.finished = Some(Finished {
                            executed: ex.total,
                            broker_change: ex.broker_change,
                        });
                        return Ok(());
                    };
                    match effect {
                        Effect::LeaderAndIsr {
                            brokers,
                            tp,
                            is_new,
                        } => {
                            if !failed.contains(&tp) {
                                pass.batch.add_leader_and_isr(&brokers, &tp, is_new);
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
                            pass.batch.add_update_metadata(&brokers, &partitions);
                        }
                        Effect::StopReplica { broker, tp, delete } => {
                            pass.batch.add_stop_replica(broker, &tp, delete)
                        }
                        Effect::DeleteTopicZnodes(topic) => {
                            pass.stage = Stage::DeletingTopic;
                            ready.op = Some(StoreOp::DeleteTopicZnodes(topic));
                            break;
                        }
                        Effect::TopicDeleted(topic) => ready.topics_deleted.push(topic),
                        Effect::CreatePartitionState { .. }
                        | Effect::UpdatePartitionState { .. }
                        | Effect::WriteTopicAssignment(_)
                        | Effect::RemoveFromZkReassignment { .. } => {
                            unreachable!("sorted out by Pass::new")
                        }
                    }
                }
            }
        }
        self.job = Some(Job::Execution(Box::new(ex)));
        Ok(())
    }

    /// Ends a pass: adds what it did to the total and, for an execution that elects again,
    /// starts a pass electing the partitions whose write failed (another writer moved the
    /// znode; the context now holds what the store has) and whose leader is not online.
    fn next_pass(&mut self, ex: &mut Execution) -> bool {
        let pass = std::mem::replace(&mut ex.pass, Pass::new(Vec::new()));
        ex.total.partitions.extend(pass.executed.partitions);
        ex.total.failed_topics.extend(pass.executed.failed_topics);
        if !ex.elect_again || ex.attempt >= ELECTION_RETRIES {
            return false;
        }
        let retry: Vec<_> = ex
            .total
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
            return false;
        }
        ex.attempt += 1;
        warn!(
            partitions = retry.len(),
            attempt = ex.attempt,
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
        ex.pass = Pass::new(effects);
        true
    }
}

fn revert_to_new(ctx: &mut ControllerContext, tp: &TopicPartition) {
    ctx.leadership.remove(tp);
    ctx.partition_states.insert(tp.clone(), PartitionState::New);
}
