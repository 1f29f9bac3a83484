//! Seeded random runs of the pure controller (state machines, deletion manager, lifecycle)
//! against a simulated cluster: brokers die and return, topics are created, grown and
//! deleted, StopReplica responses arrive late. Invariants are checked after every step, and
//! at the end every deletion must have completed and every partition must be online. A
//! failing run prints its seed.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use model::{BrokerId, TopicName, TopicPartition};

use crate::context::{ControllerContext, PartitionAndReplica};
use crate::effect::Effect;
use crate::lifecycle;
use crate::partition_state_machine::PartitionState;
use crate::test_support::{broker, name};
use crate::topic_deletion;

const BROKERS: i32 = 5;
const STEPS: usize = 250;
const RUNS: u64 = 40;

#[derive(Debug, Default)]
struct Sim {
    ctx: ControllerContext,
    /// StopReplica(delete) requests sent and not answered yet.
    in_flight: BTreeSet<PartitionAndReplica>,
    deleted: BTreeSet<TopicName>,
    next_topic: usize,
}

impl Sim {
    fn new() -> Sim {
        let mut sim = Sim::default();
        sim.ctx.epoch = 1;
        for id in 0..BROKERS {
            sim.ctx.live_brokers.insert(id, broker(id));
        }
        sim
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::LeaderAndIsr { brokers, .. } | Effect::UpdateMetadata { brokers, .. } => {
                    for b in brokers {
                        assert!(self.ctx.is_live(b), "request to dead broker {b}");
                    }
                }
                Effect::StopReplica { broker, tp, delete } => {
                    assert!(
                        self.ctx.is_live(broker),
                        "StopReplica to dead broker {broker}"
                    );
                    if delete {
                        self.in_flight.insert(PartitionAndReplica {
                            tp,
                            replica: broker,
                        });
                    }
                }
                Effect::TopicDeleted(topic) => {
                    self.deleted.insert(topic);
                }
                Effect::CreatePartitionState { .. }
                | Effect::UpdatePartitionState { .. }
                | Effect::DeleteTopicZnodes(_)
                | Effect::WriteTopicAssignment(_)
                | Effect::RemoveFromZkReassignment { .. } => {}
            }
        }
    }

    fn step(&mut self, rng: &mut StdRng) {
        match rng.random_range(0..7) {
            0 => self.create_topic(rng),
            1 => {
                let b = rng.random_range(0..BROKERS);
                if self.ctx.is_live(b) && self.ctx.live_brokers.len() > 1 {
                    self.ctx.live_brokers.remove(&b);
                    self.in_flight.retain(|r| r.replica != b);
                    let effects = lifecycle::on_broker_failure(&mut self.ctx, &BTreeSet::from([b]));
                    self.apply(effects);
                }
            }
            2 => self.start_broker(rng.random_range(0..BROKERS)),
            3 => {
                let candidates: Vec<_> = self
                    .ctx
                    .all_topics
                    .iter()
                    .filter(|t| !self.ctx.is_topic_queued_for_deletion(t))
                    .cloned()
                    .collect();
                if !candidates.is_empty() {
                    let topic = candidates[rng.random_range(0..candidates.len())].clone();
                    let effects =
                        topic_deletion::enqueue_topics(&mut self.ctx, &BTreeSet::from([topic]));
                    self.apply(effects);
                }
            }
            4 => self.answer_one(rng),
            5 => self.add_partition(rng),
            _ => self.answer_one(rng),
        }
    }

    fn create_topic(&mut self, rng: &mut StdRng) {
        let topic = name(&format!("t{}", self.next_topic));
        self.next_topic += 1;
        let rf = rng.random_range(1..=3);
        let partitions = rng.random_range(1..=4);
        let assignment = (0..partitions)
            .map(|p| (p, self.random_replicas(rng, rf)))
            .collect();
        self.ctx.set_topic_assignment(topic.clone(), assignment);
        let tps = self.ctx.partitions_for_topic(&topic);
        let effects = lifecycle::on_new_partition_creation(&mut self.ctx, &tps);
        self.apply(effects);
    }

    fn add_partition(&mut self, rng: &mut StdRng) {
        let candidates: Vec<_> = self
            .ctx
            .all_topics
            .iter()
            .filter(|t| !self.ctx.is_topic_queued_for_deletion(t))
            .cloned()
            .collect();
        if candidates.is_empty() {
            return;
        }
        let topic = candidates[rng.random_range(0..candidates.len())].clone();
        let mut assignment = self.ctx.assignments[&topic].clone();
        let rf = assignment[&0].len();
        let p = assignment.len() as i32;
        assignment.insert(p, self.random_replicas(rng, rf));
        self.ctx.set_topic_assignment(topic.clone(), assignment);
        let effects =
            lifecycle::on_new_partition_creation(&mut self.ctx, &[TopicPartition::new(topic, p)]);
        self.apply(effects);
    }

    fn random_replicas(&self, rng: &mut StdRng, rf: usize) -> Vec<BrokerId> {
        let mut replicas = Vec::new();
        while replicas.len() < rf {
            let b = rng.random_range(0..BROKERS);
            if !replicas.contains(&b) {
                replicas.push(b);
            }
        }
        replicas
    }

    fn start_broker(&mut self, b: BrokerId) {
        if !self.ctx.is_live(b) {
            self.ctx.live_brokers.insert(b, broker(b));
            let effects = lifecycle::on_broker_startup(&mut self.ctx, &BTreeSet::from([b]));
            self.apply(effects);
        }
    }

    fn answer_one(&mut self, rng: &mut StdRng) {
        if self.in_flight.is_empty() {
            return;
        }
        let index = rng.random_range(0..self.in_flight.len());
        let Some(replica) = self.in_flight.iter().nth(index).cloned() else {
            return;
        };
        self.in_flight.remove(&replica);
        let effects = if rng.random_range(0..10) == 0 {
            topic_deletion::fail_replica_deletion(&mut self.ctx, std::slice::from_ref(&replica))
        } else {
            topic_deletion::complete_replica_deletion(&mut self.ctx, std::slice::from_ref(&replica))
        };
        self.apply(effects);
    }

    fn check_invariants(&self) {
        let ctx = &self.ctx;
        for (tp, state) in &ctx.partition_states {
            assert!(
                ctx.all_topics.contains(&tp.topic),
                "{tp} has a state but no topic"
            );
            if *state == PartitionState::Online {
                let leadership = ctx
                    .leadership
                    .get(tp)
                    .unwrap_or_else(|| panic!("{tp} online without leadership"));
                if !ctx.is_topic_queued_for_deletion(&tp.topic) {
                    assert!(
                        ctx.is_live(leadership.leader),
                        "{tp} online with dead leader {}",
                        leadership.leader
                    );
                }
            }
        }
        for replica in ctx.replica_states.keys() {
            assert!(
                ctx.replicas(&replica.tp).contains(&replica.replica),
                "{replica:?} not in the assignment"
            );
        }
        for topic in &self.deleted {
            assert!(
                !ctx.all_topics.contains(topic),
                "{topic} deleted but still known"
            );
        }
    }

    /// Every broker returns and every request is answered: nothing may stay stuck.
    fn settle(&mut self) {
        for b in 0..BROKERS {
            self.start_broker(b);
        }
        let mut rounds = 0;
        while !self.in_flight.is_empty() || !self.ctx.topics_to_be_deleted.is_empty() {
            rounds += 1;
            assert!(
                rounds < 10_000,
                "deletion does not finish: {:?}",
                self.ctx.topics_to_be_deleted
            );
            if self.in_flight.is_empty() {
                // Failed deletions wait for a broker of theirs to return (Kafka): bounce one.
                let topic = self
                    .ctx
                    .topics_to_be_deleted
                    .first()
                    .cloned()
                    .expect("checked non-empty");
                let holder = self
                    .ctx
                    .replicas_for_topic(&topic)
                    .first()
                    .map(|r| r.replica)
                    .expect("a replica");
                self.ctx.live_brokers.remove(&holder);
                let effects =
                    lifecycle::on_broker_failure(&mut self.ctx, &BTreeSet::from([holder]));
                self.apply(effects);
                self.start_broker(holder);
                continue;
            }
            let replica = self.in_flight.pop_first().expect("checked non-empty");
            let effects = topic_deletion::complete_replica_deletion(&mut self.ctx, &[replica]);
            self.apply(effects);
        }
        for tp in self.ctx.partition_states.keys() {
            assert_eq!(
                self.ctx.partition_state(tp),
                PartitionState::Online,
                "{tp} is not online at the end"
            );
        }
    }
}

#[test]
fn random_cluster_histories_keep_invariants_and_finish_deletions() {
    for seed in 0..RUNS {
        let result = std::panic::catch_unwind(|| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut sim = Sim::new();
            for _ in 0..STEPS {
                sim.step(&mut rng);
                sim.check_invariants();
            }
            sim.settle();
            sim.check_invariants();
        });
        if let Err(panic) = result {
            eprintln!("simulation failed with seed {seed}");
            std::panic::resume_unwind(panic);
        }
    }
}
