//! The topic deletion manager (Kafka's `TopicDeletionManager`, SPEC section 5), pure.
//!
//! A queued topic moves its partitions Offline -> NonExistent (UpdateMetadata tells every
//! broker the leader is -2, "being deleted"), and its replicas Offline (StopReplica without
//! delete, so followers stop fetching) -> ReplicaDeletionStarted (StopReplica with delete,
//! only to brokers holding a replica). Each response moves a replica to
//! ReplicaDeletionSuccessful or ReplicaDeletionIneligible (a failed response; retried when a
//! broker of the topic returns). When every replica succeeded, the topic's znodes are
//! deleted and the controller forgets it.
//!
//! Better than Kafka (SPEC section 9), a deletion never waits for an offline broker: a
//! replica on a broker that is down, or that goes down while its StopReplica is in flight,
//! counts as deleted (without a request). When that broker returns it removes the log on its
//! own: its topic no longer exists, or exists with another topic id (`broker::stray_logs`).

use std::collections::BTreeSet;

use tracing::info;

use model::TopicName;

use crate::context::{ControllerContext, PartitionAndReplica};
use crate::effect::Effect;
use crate::partition_state_machine::{self as psm, PartitionState};
use crate::replica_state_machine::{self as rsm, ReplicaState};

/// Queues `topics` (which exist) for deletion and starts whatever can start.
pub fn enqueue_topics(ctx: &mut ControllerContext, topics: &BTreeSet<TopicName>) -> Vec<Effect> {
    for topic in topics {
        if ctx.topics_being_reassigned.contains(topic) {
            // SPEC section 8: a topic under reassignment cannot be deleted until it ends.
            ctx.topics_ineligible_for_deletion.insert(topic.clone());
        }
        ctx.topics_to_be_deleted.insert(topic.clone());
    }
    resume_deletions(ctx)
}

/// Makes `topics` eligible again (their offline broker came back) and resumes.
pub fn resume_deletion_for_topics(
    ctx: &mut ControllerContext,
    topics: &BTreeSet<TopicName>,
) -> Vec<Effect> {
    let queued: BTreeSet<_> = topics
        .intersection(&ctx.topics_to_be_deleted)
        .cloned()
        .collect();
    if queued.is_empty() {
        return Vec::new();
    }
    for topic in &queued {
        ctx.topics_ineligible_for_deletion.remove(topic);
    }
    resume_deletions(ctx)
}

/// A StopReplica(delete) succeeded for these replicas.
pub fn complete_replica_deletion(
    ctx: &mut ControllerContext,
    replicas: &[PartitionAndReplica],
) -> Vec<Effect> {
    let mut effects =
        rsm::handle_state_changes(ctx, replicas, ReplicaState::ReplicaDeletionSuccessful);
    effects.extend(resume_deletions(ctx));
    effects
}

/// These replicas' brokers are offline: their replicas count as deleted (moved through
/// Offline and ReplicaDeletionStarted, which sends nothing to an offline broker, to
/// ReplicaDeletionSuccessful), and deletions that waited only for them complete.
pub fn consider_deleted_on_offline_brokers(
    ctx: &mut ControllerContext,
    replicas: &[PartitionAndReplica],
) -> Vec<Effect> {
    let offline: Vec<_> = replicas
        .iter()
        .filter(|r| {
            ctx.is_topic_queued_for_deletion(&r.tp.topic)
                && !ctx.is_live(r.replica)
                && ctx.replica_state(r) != ReplicaState::ReplicaDeletionSuccessful
        })
        .cloned()
        .collect();
    if offline.is_empty() {
        return Vec::new();
    }
    info!(
        replicas = offline.len(),
        brokers = ?offline.iter().map(|r| r.replica).collect::<BTreeSet<_>>(),
        "replicas on offline brokers count as deleted; those brokers remove the logs when they return"
    );
    let (started, rest): (Vec<_>, Vec<_>) = offline
        .into_iter()
        .partition(|r| ctx.replica_state(r) == ReplicaState::ReplicaDeletionStarted);
    let mut effects = rsm::handle_state_changes(ctx, &rest, ReplicaState::Offline);
    effects.extend(rsm::handle_state_changes(
        ctx,
        &rest,
        ReplicaState::ReplicaDeletionStarted,
    ));
    let all: Vec<_> = started.into_iter().chain(rest).collect();
    effects.extend(rsm::handle_state_changes(
        ctx,
        &all,
        ReplicaState::ReplicaDeletionSuccessful,
    ));
    effects
}

/// A StopReplica(delete) failed for these replicas: they become ineligible and their topics
/// wait for a retry.
pub fn fail_replica_deletion(
    ctx: &mut ControllerContext,
    replicas: &[PartitionAndReplica],
) -> Vec<Effect> {
    let failed: Vec<_> = replicas
        .iter()
        .filter(|r| {
            ctx.is_topic_queued_for_deletion(&r.tp.topic)
                && ctx.replica_state(r) == ReplicaState::ReplicaDeletionStarted
        })
        .cloned()
        .collect();
    if failed.is_empty() {
        return Vec::new();
    }
    let mut effects =
        rsm::handle_state_changes(ctx, &failed, ReplicaState::ReplicaDeletionIneligible);
    for replica in &failed {
        ctx.topics_ineligible_for_deletion
            .insert(replica.tp.topic.clone());
    }
    effects.extend(resume_deletions(ctx));
    effects
}

/// Kafka's `resumeDeletions`: completes topics whose replicas are all deleted, resets failed
/// replicas for a retry, and (re)starts deletion of every eligible topic.
pub fn resume_deletions(ctx: &mut ControllerContext) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut eligible_for_retry = Vec::new();
    let mut eligible_for_deletion = BTreeSet::new();
    for topic in ctx.topics_to_be_deleted.clone() {
        if ctx.are_all_replicas_in_state(&topic, ReplicaState::ReplicaDeletionSuccessful) {
            effects.extend(complete_delete_topic(ctx, &topic));
            info!(%topic, "deletion of topic completed");
            continue;
        }
        if !ctx.is_any_replica_in_state(&topic, ReplicaState::ReplicaDeletionStarted)
            && ctx.is_any_replica_in_state(&topic, ReplicaState::ReplicaDeletionIneligible)
        {
            eligible_for_retry.push(topic.clone());
        }
        if is_topic_eligible_for_deletion(ctx, &topic) {
            info!(%topic, "deletion of topic (re)started");
            eligible_for_deletion.insert(topic);
        }
    }
    for topic in eligible_for_retry {
        let failed = ctx.replicas_in_state(&topic, ReplicaState::ReplicaDeletionIneligible);
        effects.extend(rsm::handle_state_changes(
            ctx,
            &failed,
            ReplicaState::Offline,
        ));
    }
    if !eligible_for_deletion.is_empty() {
        effects.extend(on_topic_deletion(ctx, &eligible_for_deletion));
    }
    effects
}

fn is_topic_eligible_for_deletion(ctx: &ControllerContext, topic: &TopicName) -> bool {
    ctx.is_topic_queued_for_deletion(topic)
        && !ctx.is_any_replica_in_state(topic, ReplicaState::ReplicaDeletionStarted)
        && !ctx.topics_ineligible_for_deletion.contains(topic)
}

fn on_topic_deletion(ctx: &mut ControllerContext, topics: &BTreeSet<TopicName>) -> Vec<Effect> {
    let mut effects = Vec::new();
    let unseen: Vec<_> = topics
        .difference(&ctx.topics_with_deletion_started)
        .cloned()
        .collect();
    if !unseen.is_empty() {
        let partitions: Vec<_> = unseen
            .iter()
            .flat_map(|t| ctx.partitions_for_topic(t))
            .collect();
        // Partitions that never came online (New) go Offline first, as in Kafka.
        effects.extend(psm::handle_state_changes(
            ctx,
            &partitions,
            PartitionState::Offline,
        ));
        effects.extend(psm::handle_state_changes(
            ctx,
            &partitions,
            PartitionState::NonExistent,
        ));
        ctx.topics_with_deletion_started.extend(unseen);
    }
    // Brokers stop serving the topics: the leader in this update is -2 ("being deleted").
    let partitions: Vec<_> = topics
        .iter()
        .flat_map(|t| ctx.partitions_for_topic(t))
        .collect();
    effects.push(Effect::UpdateMetadata {
        brokers: ctx.live_broker_ids(),
        partitions,
    });
    effects.extend(on_partition_deletion(ctx, topics));
    effects
}

fn on_partition_deletion(ctx: &mut ControllerContext, topics: &BTreeSet<TopicName>) -> Vec<Effect> {
    let mut dead_replicas = Vec::new();
    let mut replicas_for_deletion = Vec::new();
    for topic in topics {
        let (alive, dead): (Vec<_>, Vec<_>) = ctx
            .replicas_for_topic(topic)
            .into_iter()
            .partition(|r| ctx.is_live(r.replica));
        dead_replicas.extend(dead);
        replicas_for_deletion.extend(
            alive
                .into_iter()
                .filter(|r| ctx.replica_state(r) != ReplicaState::ReplicaDeletionSuccessful),
        );
    }
    let mut effects = consider_deleted_on_offline_brokers(ctx, &dead_replicas);
    effects.extend(rsm::handle_state_changes(
        ctx,
        &replicas_for_deletion,
        ReplicaState::Offline,
    ));
    effects.extend(rsm::handle_state_changes(
        ctx,
        &replicas_for_deletion,
        ReplicaState::ReplicaDeletionStarted,
    ));
    effects
}

fn complete_delete_topic(ctx: &mut ControllerContext, topic: &TopicName) -> Vec<Effect> {
    let deleted = ctx.replicas_in_state(topic, ReplicaState::ReplicaDeletionSuccessful);
    let mut effects = rsm::handle_state_changes(ctx, &deleted, ReplicaState::NonExistent);
    effects.push(Effect::DeleteTopicZnodes(topic.clone()));
    effects.push(Effect::TopicDeleted(topic.clone()));
    ctx.remove_topic(topic);
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::on_new_partition_creation;
    use crate::test_support::{ctx_with, name, tp};

    fn replica(topic: &str, partition: i32, broker: i32) -> PartitionAndReplica {
        PartitionAndReplica {
            tp: tp(topic, partition),
            replica: broker,
        }
    }

    fn online_topic(live: &[i32], assignment: &[&[i32]]) -> ControllerContext {
        let mut ctx = ctx_with(live, &[("t", assignment)]);
        let partitions = ctx.partitions_for_topic(&name("t"));
        on_new_partition_creation(&mut ctx, &partitions);
        ctx
    }

    fn stop_replicas(effects: &[Effect]) -> Vec<(i32, i32, bool)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::StopReplica { broker, tp, delete } => {
                    Some((*broker, tp.partition, *delete))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn deletion_runs_to_completion_when_every_broker_answers() {
        let mut ctx = online_topic(&[0, 1], &[&[0, 1], &[1, 0]]);
        let effects = enqueue_topics(&mut ctx, &BTreeSet::from([name("t")]));
        assert!(effects.contains(&Effect::UpdateMetadata {
            brokers: vec![0, 1],
            partitions: vec![tp("t", 0), tp("t", 1)]
        }));
        assert_eq!(
            stop_replicas(&effects),
            vec![
                (0, 0, false),
                (1, 0, false),
                (1, 1, false),
                (0, 1, false),
                (0, 0, true),
                (1, 0, true),
                (1, 1, true),
                (0, 1, true)
            ]
        );
        assert_eq!(
            ctx.partition_state(&tp("t", 0)),
            PartitionState::NonExistent
        );

        let effects = complete_replica_deletion(
            &mut ctx,
            &[replica("t", 0, 0), replica("t", 0, 1), replica("t", 1, 1)],
        );
        assert!(
            effects.is_empty(),
            "one replica is still being deleted: {effects:?}"
        );
        let effects = complete_replica_deletion(&mut ctx, &[replica("t", 1, 0)]);
        assert_eq!(
            effects,
            vec![
                Effect::DeleteTopicZnodes(name("t")),
                Effect::TopicDeleted(name("t"))
            ]
        );
        assert!(!ctx.all_topics.contains(&name("t")));
        assert!(ctx.replica_states.is_empty());
        assert!(ctx.topics_to_be_deleted.is_empty());
    }

    #[test]
    fn issue_9_deletion_does_not_wait_for_an_offline_broker() {
        let mut ctx = online_topic(&[0, 1], &[&[0, 1]]);
        // Broker 1 dies: its replica goes offline.
        ctx.live_brokers.remove(&1);
        rsm::handle_state_changes(&mut ctx, &[replica("t", 0, 1)], ReplicaState::Offline);

        let effects = enqueue_topics(&mut ctx, &BTreeSet::from([name("t")]));
        // Only the live broker is asked; the offline one's replica counts as deleted.
        assert_eq!(stop_replicas(&effects), vec![(0, 0, false), (0, 0, true)]);
        assert!(!ctx.topics_ineligible_for_deletion.contains(&name("t")));
        assert_eq!(
            ctx.replica_state(&replica("t", 0, 1)),
            ReplicaState::ReplicaDeletionSuccessful
        );
        let effects = complete_replica_deletion(&mut ctx, &[replica("t", 0, 0)]);
        assert!(effects.contains(&Effect::DeleteTopicZnodes(name("t"))));
        assert!(!ctx.all_topics.contains(&name("t")));
    }

    #[test]
    fn a_broker_that_dies_with_its_deletion_in_flight_does_not_hold_the_topic() {
        let mut ctx = online_topic(&[0, 1], &[&[0, 1]]);
        enqueue_topics(&mut ctx, &BTreeSet::from([name("t")]));
        complete_replica_deletion(&mut ctx, &[replica("t", 0, 0)]);
        assert!(
            ctx.all_topics.contains(&name("t")),
            "broker 1 has not answered"
        );
        ctx.live_brokers.remove(&1);
        let effects = crate::lifecycle::on_broker_failure(&mut ctx, &BTreeSet::from([1]));
        assert!(
            effects.contains(&Effect::DeleteTopicZnodes(name("t"))),
            "{effects:?}"
        );
        assert!(stop_replicas(&effects).is_empty(), "{effects:?}");
        assert!(!ctx.all_topics.contains(&name("t")));
    }

    #[test]
    fn failed_response_marks_replica_ineligible() {
        let mut ctx = online_topic(&[0], &[&[0]]);
        enqueue_topics(&mut ctx, &BTreeSet::from([name("t")]));
        let effects = fail_replica_deletion(&mut ctx, &[replica("t", 0, 0)]);
        // Ineligible -> Offline (reset for retry); the topic waits until resumed.
        assert_eq!(stop_replicas(&effects), vec![(0, 0, false)]);
        assert!(ctx.topics_ineligible_for_deletion.contains(&name("t")));
        let effects = resume_deletion_for_topics(&mut ctx, &BTreeSet::from([name("t")]));
        assert_eq!(stop_replicas(&effects), vec![(0, 0, false), (0, 0, true)]);
    }
}
