//! CreatePartitions, phase 1 (SPEC section 4): existing partitions never move; the new
//! ones are placed (or taken from the request) and the merged assignment is written with a
//! conditional set of `/brokers/topics/<t>`.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use model::{BrokerId, TopicName};
use znodes::json::TopicAssignment;
use znodes::zk_client::{KafkaZkClient, VersionedTopicAssignment};

use super::{broker_metadata, AdminError, Await, AwaitCondition};
use crate::context::ControllerContext;
use crate::ControllerConfig;

/// Handles a CreatePartitions request; returns the response and the results that wait for
/// the new partitions to come online.
pub async fn handle(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    config: &ControllerConfig,
    request: &CreatePartitionsRequest,
) -> (CreatePartitionsResponse, Vec<Await>) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for topic in &request.topics {
        *counts.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    let mut awaits = Vec::new();
    // What is left of max.partitions.per.request for the topics after this one.
    let mut budget = config.max_partitions_per_request;
    for (index, topic) in request.topics.iter().enumerate() {
        let outcome = if counts[topic.name.0.as_str()] > 1 {
            Err(AdminError::InvalidRequest(
                "Duplicate topic in request.".to_owned(),
            ))
        } else {
            add_partitions(ctx, zk, config, topic, request.validate_only, &mut budget).await
        };
        let (code, message) = match outcome {
            Ok(name) => {
                if !request.validate_only && request.timeout_ms > 0 {
                    awaits.push(Await {
                        index,
                        condition: AwaitCondition::Online {
                            topic: name,
                            partitions: topic.count,
                        },
                    });
                }
                (0, None)
            }
            Err(err) => (err.code(), Some(StrBytes::from_string(err.to_string()))),
        };
        results.push(
            CreatePartitionsTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    if request.timeout_ms <= 0 && !request.validate_only {
        for result in results.iter_mut().filter(|r| r.error_code == 0) {
            result.error_code = ResponseError::RequestTimedOut.code();
        }
    }
    (
        CreatePartitionsResponse::default().with_results(results),
        awaits,
    )
}

async fn add_partitions(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    config: &ControllerConfig,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
    budget: &mut i32,
) -> Result<TopicName, AdminError> {
    let raw = topic.name.0.as_str();
    let unknown =
        || AdminError::UnknownTopicOrPartition(format!("The topic '{raw}' does not exist."));
    let name: TopicName = raw.parse().map_err(|_| unknown())?;
    if zk
        .is_topic_marked_for_deletion(&name)
        .await
        .map_err(AdminError::from_store)?
    {
        return Err(AdminError::InvalidTopic(format!(
            "The topic '{name}' is queued for deletion."
        )));
    }
    let Some(current) = zk
        .get_topic_assignment(&name, false)
        .await
        .map_err(AdminError::from_store)?
    else {
        return Err(unknown());
    };
    let increment = i64::from(topic.count) - current.assignment.partitions.len() as i64;
    if increment > i64::from(*budget) {
        return Err(AdminError::InvalidPartitions(format!(
            "Adding {increment} partitions to '{name}' would pass max.partitions.per.request ({}) for this request ({} left); add them in several requests or raise max.partitions.per.request.",
            config.max_partitions_per_request, *budget
        )));
    }
    let new_partitions = plan_new_partitions(ctx, config, &name, &current.assignment, topic)?;
    *budget -= new_partitions.len() as i32;
    if validate_only {
        return Ok(name);
    }
    write(ctx, zk, &name, current, new_partitions).await?;
    Ok(name)
}

/// Validates the request for one topic and places the new partitions. Pure.
pub fn plan_new_partitions(
    ctx: &ControllerContext,
    config: &ControllerConfig,
    name: &TopicName,
    current: &TopicAssignment,
    topic: &CreatePartitionsTopic,
) -> Result<BTreeMap<i32, Vec<BrokerId>>, AdminError> {
    let reassigning = |m: &BTreeMap<i32, Vec<BrokerId>>| m.values().any(|r| !r.is_empty());
    if reassigning(&current.adding_replicas) || reassigning(&current.removing_replicas) {
        return Err(AdminError::ReassignmentInProgress(format!(
            "A partition reassignment is in progress for the topic '{name}'."
        )));
    }
    let existing = &current.partitions;
    let old = existing.len() as i32;
    let requested = topic.count;
    if requested < old {
        return Err(AdminError::InvalidPartitions(format!(
            "Topic currently has {old} partitions, which is higher than the requested {requested}."
        )));
    }
    if requested == old {
        return Err(AdminError::InvalidPartitions(format!(
            "Topic already has {old} partitions."
        )));
    }
    let increment = requested - old;
    let live: BTreeSet<BrokerId> = ctx.live_brokers.keys().copied().collect();
    let Some(given) = &topic.assignments else {
        return assignment::assign_added_partitions(
            &broker_metadata(ctx),
            existing,
            requested,
            config.placement_strategy,
            false,
            &ctx.cluster_load(),
        )
        .map_err(AdminError::from_assignment);
    };
    let given: Vec<Vec<BrokerId>> = given
        .iter()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    let unknown: BTreeSet<BrokerId> = given
        .iter()
        .flatten()
        .copied()
        .filter(|b| !live.contains(b))
        .collect();
    if !unknown.is_empty() {
        let list: Vec<_> = unknown.iter().map(|b| b.to_string()).collect();
        return Err(AdminError::InvalidReplicaAssignment(format!(
            "Unknown broker(s) in replica assignment: {}.",
            list.join(", ")
        )));
    }
    if given.len() as i32 != increment {
        return Err(AdminError::InvalidReplicaAssignment(format!(
            "Increasing the number of partitions by {increment} but {} assignments provided.",
            given.len()
        )));
    }
    let expected_rf = existing.get(&0).map(Vec::len).unwrap_or(0);
    let proposed: BTreeMap<i32, Vec<BrokerId>> = given
        .into_iter()
        .enumerate()
        .map(|(i, r)| (old + i as i32, r))
        .collect();
    for (partition, replicas) in &proposed {
        if replicas.is_empty() {
            return Err(AdminError::InvalidReplicaAssignment(format!(
                "Cannot have replication factor of 0 for partition id {partition}."
            )));
        }
        if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
            let list: Vec<_> = replicas.iter().map(|b| b.to_string()).collect();
            return Err(AdminError::InvalidReplicaAssignment(format!(
                "Duplicate brokers not allowed in replica assignment: {} for partition id {partition}.",
                list.join(", ")
            )));
        }
    }
    let bad: Vec<_> = proposed
        .iter()
        .filter(|(_, r)| r.len() != expected_rf)
        .collect();
    if !bad.is_empty() {
        let partitions: Vec<_> = bad.iter().map(|(p, _)| p.to_string()).collect();
        let factors: Vec<_> = bad.iter().map(|(_, r)| r.len().to_string()).collect();
        return Err(AdminError::InvalidReplicaAssignment(format!(
            "Inconsistent replication factor between partitions, partition 0 has {expected_rf} while partitions [{}] have replication factors [{}], respectively.",
            partitions.join(", "),
            factors.join(", ")
        )));
    }
    Ok(proposed)
}

async fn write(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    name: &TopicName,
    current: VersionedTopicAssignment,
    new_partitions: BTreeMap<i32, Vec<BrokerId>>,
) -> Result<(), AdminError> {
    let mut assignment = current.assignment;
    info!(topic = %name, new = ?new_partitions, "adding partitions");
    assignment.partitions.extend(new_partitions);
    zk.set_topic_assignment(
        name,
        &assignment,
        Some(current.zk_version),
        Some(ctx.epoch_zk_version),
    )
    .await
    .map_err(AdminError::from_store)
}

/// NOT_CONTROLLER for every topic.
pub fn not_controller(request: &CreatePartitionsRequest) -> CreatePartitionsResponse {
    let err = AdminError::NotController(
        "This is not the correct controller for this cluster.".to_owned(),
    );
    CreatePartitionsResponse::default().with_results(
        request
            .topics
            .iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(err.code())
                    .with_error_message(Some(StrBytes::from_string(err.to_string())))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::{BrokerId as WireBrokerId, TopicName as WireTopicName};
    use model::TopicId;

    use super::*;
    use crate::test_support::{ctx_with, name};

    fn request(count: i32, assignments: Option<&[&[i32]]>) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(WireTopicName(StrBytes::from_static_str("t")))
            .with_count(count)
            .with_assignments(assignments.map(|a| {
                a.iter()
                    .map(|r| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(r.iter().map(|&b| WireBrokerId(b)).collect())
                    })
                    .collect()
            }))
    }

    /// Topic t has partitions 0 [0,1] and 1 [1,2]; brokers 0..5 are live.
    fn check(
        topic: CreatePartitionsTopic,
        strategy: assignment::Strategy,
    ) -> Result<BTreeMap<i32, Vec<BrokerId>>, (i16, String)> {
        let ctx = ctx_with(&[0, 1, 2, 3, 4], &[]);
        let config = ControllerConfig {
            placement_strategy: strategy,
            ..ControllerConfig::default()
        };
        let current = TopicAssignment::new(
            TopicId::random(),
            BTreeMap::from([(0, vec![0, 1]), (1, vec![1, 2])]),
        );
        plan_new_partitions(&ctx, &config, &name("t"), &current, &topic)
            .map_err(|e| (e.code(), e.to_string()))
    }

    #[test]
    fn refusals() {
        let cases: Vec<(CreatePartitionsTopic, i16, &str)> = vec![
            (
                request(1, None),
                37,
                "Topic currently has 2 partitions, which is higher than the requested 1.",
            ),
            (request(2, None), 37, "Topic already has 2 partitions."),
            (
                request(4, Some(&[&[0, 9], &[8, 1]])),
                39,
                "Unknown broker(s) in replica assignment: 8, 9.",
            ),
            (
                request(4, Some(&[&[0, 1]])),
                39,
                "Increasing the number of partitions by 2 but 1 assignments provided.",
            ),
            (
                request(3, Some(&[&[0, 0]])),
                39,
                "Duplicate brokers not allowed",
            ),
            (
                request(3, Some(&[&[0]])),
                39,
                "Inconsistent replication factor between partitions, partition 0 has 2",
            ),
            (
                request(3, Some(&[&[]])),
                39,
                "Cannot have replication factor of 0 for partition id 2.",
            ),
        ];
        for (topic, code, message) in cases {
            let (got, text) = check(topic, assignment::Strategy::Kafka).unwrap_err();
            assert_eq!(got, code, "{text}");
            assert!(text.contains(message), "{text:?} lacks {message:?}");
        }
    }

    #[test]
    fn new_partitions_only_and_kafkas_default_placement() {
        // Explicit: only the new partitions, numbered after the existing ones.
        assert_eq!(
            check(request(3, Some(&[&[3, 4]])), assignment::Strategy::Kafka).unwrap(),
            BTreeMap::from([(2, vec![3, 4])])
        );
        // Kafka: start index = position of the first broker >= partition 0's leader (0), shift 0.
        let added = check(request(4, None), assignment::Strategy::Kafka).unwrap();
        assert_eq!(added.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        assert!(added.values().all(|r| r.len() == 2));
    }

    #[test]
    fn reassignment_in_progress_is_refused() {
        let ctx = ctx_with(&[0, 1, 2], &[]);
        let mut current =
            TopicAssignment::new(TopicId::random(), BTreeMap::from([(0, vec![0, 1])]));
        current.adding_replicas.insert(0, vec![2]);
        let err = plan_new_partitions(
            &ctx,
            &ControllerConfig::default(),
            &name("t"),
            &current,
            &request(2, None),
        )
        .unwrap_err();
        assert_eq!(err.code(), 60);
        assert_eq!(
            err.to_string(),
            "A partition reassignment is in progress for the topic 't'."
        );
    }
}
