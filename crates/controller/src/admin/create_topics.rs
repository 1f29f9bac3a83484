//! CreateTopics, phase 1 (SPEC section 2): validation with Kafka's codes and messages,
//! defaults via -1, placement over the live brokers, then `/config/topics/<t>` and
//! `/brokers/topics/<t>` written in one epoch-fenced multi.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use model::{BrokerId, TopicConfig, TopicId, TopicName};
use znodes::json::TopicAssignment;
use znodes::zk_client::{KafkaZkClient, ZkClientError};

use super::{broker_metadata, validate_create_assignment, AdminError, Await, AwaitCondition};
use crate::context::ControllerContext;
use crate::ControllerConfig;

/// `DYNAMIC_TOPIC_CONFIG` config source.
const SOURCE_TOPIC: i8 = 1;
/// `DEFAULT_CONFIG` config source.
const SOURCE_DEFAULT: i8 = 5;

/// Gregor's own tagged field of a `CreatableTopicResult` (CreateTopics v5+), present only in
/// the answer to a `validateOnly` request: the replica assignment the controller would write
/// (see [`encode_assignment_preview`]). Clients that do not know it skip it, as KIP-482 says
/// of unknown tags; the console shows it as the placement preview.
pub const ASSIGNMENT_PREVIEW_TAG: i32 = 10_000;

/// The [`ASSIGNMENT_PREVIEW_TAG`] field: big-endian int32s, the partition count, then per
/// partition (ascending) its index, its replica count and the replicas in order.
pub fn encode_assignment_preview(assignment: &BTreeMap<i32, Vec<BrokerId>>) -> bytes::Bytes {
    let mut out = Vec::with_capacity(4 + assignment.len() * 20);
    out.extend_from_slice(&(assignment.len() as i32).to_be_bytes());
    for (partition, replicas) in assignment {
        out.extend_from_slice(&partition.to_be_bytes());
        out.extend_from_slice(&(replicas.len() as i32).to_be_bytes());
        for replica in replicas {
            out.extend_from_slice(&replica.to_be_bytes());
        }
    }
    out.into()
}

/// Reads an [`ASSIGNMENT_PREVIEW_TAG`] field; `None` when it is malformed.
pub fn decode_assignment_preview(bytes: &[u8]) -> Option<BTreeMap<i32, Vec<BrokerId>>> {
    let mut words = bytes.chunks(4).map(|w| {
        <[u8; 4]>::try_from(w)
            .ok()
            .map(i32::from_be_bytes)
            .and_then(|v| usize::try_from(v).ok().map(|u| (v, u)))
    });
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let (_, partitions) = words.next()??;
    let mut assignment = BTreeMap::new();
    for _ in 0..partitions {
        let (partition, _) = words.next()??;
        let (_, count) = words.next()??;
        let replicas = (0..count)
            .map(|_| words.next().flatten().map(|(v, _)| v))
            .collect::<Option<Vec<_>>>()?;
        assignment.insert(partition, replicas);
    }
    words.next().is_none().then_some(assignment)
}

/// A topic that passed validation: what would be (or was) written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPlan {
    /// The topic.
    pub name: TopicName,
    /// Its replica assignment.
    pub assignment: BTreeMap<i32, Vec<BrokerId>>,
    /// Its config overrides.
    pub config: TopicConfig,
}

/// What validation needs to know about the store.
#[derive(Debug, Clone, Default)]
pub struct ExistingTopics {
    /// Every topic in `/brokers/topics`.
    pub topics: BTreeSet<TopicName>,
    /// Every name in `/admin/delete_topics`.
    pub marked_for_deletion: BTreeSet<String>,
    /// Leaders and replicas per broker, including topics written but not yet loaded by the
    /// controller (and earlier topics of the same request).
    pub load: assignment::ClusterLoad,
}

/// Handles a CreateTopics request; returns the response and the results that wait for the
/// new topics to come online.
pub async fn handle(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    config: &ControllerConfig,
    request: &CreateTopicsRequest,
    api_version: i16,
) -> (CreateTopicsResponse, Vec<Await>) {
    let mut existing = match load_existing(ctx, zk).await {
        Ok(existing) => existing,
        Err(err) => {
            return (
                error_response(request, api_version, &AdminError::from_store(err)),
                Vec::new(),
            )
        }
    };
    if let Err(err) = check_partition_budget(config, request) {
        return (error_response(request, api_version, &err), Vec::new());
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for topic in &request.topics {
        *counts.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    let mut awaits = Vec::new();
    for (index, topic) in request.topics.iter().enumerate() {
        let outcome = if counts[topic.name.0.as_str()] > 1 {
            Err(AdminError::InvalidRequest(
                "Found multiple entries for this topic.".to_owned(),
            ))
        } else {
            match plan_topic(ctx, config, &existing, topic) {
                Ok(plan) if request.validate_only => {
                    existing.load.add(&plan.assignment);
                    existing.topics.insert(plan.name.clone());
                    Ok((plan, None))
                }
                Ok(plan) => match write(ctx, zk, &plan).await {
                    Ok(id) => {
                        info!(topic = %plan.name, partitions = plan.assignment.len(), "created topic");
                        existing.load.add(&plan.assignment);
                        existing.topics.insert(plan.name.clone());
                        Ok((plan, Some(id)))
                    }
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            }
        };
        let result = match outcome {
            Ok((plan, topic_id)) => {
                if !request.validate_only && request.timeout_ms > 0 {
                    let condition = AwaitCondition::Online {
                        topic: plan.name.clone(),
                        partitions: plan.assignment.len() as i32,
                    };
                    awaits.push(Await { index, condition });
                }
                let mut result = success_result(&plan, topic_id, api_version);
                if request.validate_only {
                    result.unknown_tagged_fields.insert(
                        ASSIGNMENT_PREVIEW_TAG,
                        encode_assignment_preview(&plan.assignment),
                    );
                }
                result
            }
            Err(err) => error_result(topic.name.clone(), &err),
        };
        results.push(result);
    }
    if request.timeout_ms <= 0 && !request.validate_only {
        // Kafka answers a non-positive timeout at once, with REQUEST_TIMED_OUT for every topic
        // being created (creation goes on).
        for result in results.iter_mut().filter(|r| r.error_code == 0) {
            result.error_code = ResponseError::RequestTimedOut.code();
        }
    }
    (CreateTopicsResponse::default().with_topics(results), awaits)
}

/// Refuses the whole request (nothing is created) when its topics ask for more partitions
/// in total than `max.partitions.per.request`, before anything is placed: one request must
/// not make the controller allocate without limit.
pub fn check_partition_budget(
    config: &ControllerConfig,
    request: &CreateTopicsRequest,
) -> Result<(), AdminError> {
    let total: i64 = request
        .topics
        .iter()
        .map(|t| {
            if !t.assignments.is_empty() {
                t.assignments.len() as i64
            } else if t.num_partitions == -1 {
                i64::from(config.num_partitions)
            } else {
                i64::from(t.num_partitions.max(0))
            }
        })
        .sum();
    let limit = i64::from(config.max_partitions_per_request);
    if total > limit {
        return Err(AdminError::InvalidPartitions(format!(
            "The request asks for {total} partitions in total, more than max.partitions.per.request ({limit}) allows; create them in several requests or raise max.partitions.per.request."
        )));
    }
    Ok(())
}

/// Validates one topic and computes its assignment, in Kafka's order of checks. Pure.
pub fn plan_topic(
    ctx: &ControllerContext,
    config: &ControllerConfig,
    existing: &ExistingTopics,
    topic: &CreatableTopic,
) -> Result<TopicPlan, AdminError> {
    let raw = topic.name.0.as_str();
    let name: TopicName = raw
        .parse()
        .map_err(|err: model::TopicError| AdminError::InvalidTopic(err.to_string()))?;
    if existing.topics.contains(&name) {
        return Err(AdminError::TopicAlreadyExists(format!(
            "Topic '{name}' already exists."
        )));
    }
    if existing.marked_for_deletion.contains(raw) {
        return Err(AdminError::TopicAlreadyExists(format!(
            "Topic '{name}' is marked for deletion."
        )));
    }
    let null_configs: Vec<_> = topic
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.as_str().to_owned())
        .collect();
    if !null_configs.is_empty() {
        return Err(AdminError::InvalidRequest(format!(
            "Null value not supported for topic configs : {}",
            null_configs.join(",")
        )));
    }
    if (topic.num_partitions != -1 || topic.replication_factor != -1)
        && !topic.assignments.is_empty()
    {
        return Err(AdminError::InvalidRequest(
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
                .to_owned(),
        ));
    }
    let partitions = if topic.num_partitions == -1 {
        config.num_partitions
    } else {
        topic.num_partitions
    };
    let replication_factor = if topic.replication_factor == -1 {
        config.default_replication_factor
    } else {
        topic.replication_factor
    };

    let assignment = if topic.assignments.is_empty() {
        let mut rng = rand::rng();
        assignment::assign(
            config.placement_strategy,
            &broker_metadata(ctx),
            partitions,
            replication_factor,
            assignment::Fixed::RANDOM,
            0,
            false,
            &existing.load,
            &mut rng,
        )
        .map_err(AdminError::from_assignment)?
    } else {
        // Kafka does not check that the brokers of a create-time assignment exist.
        let assignment: BTreeMap<i32, Vec<BrokerId>> = topic
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        validate_create_assignment(&assignment, topic.assignments.len())?;
        assignment
    };

    if name.has_collision_chars() {
        let colliding: Vec<_> = existing
            .topics
            .iter()
            .filter(|t| name.collides_with(t))
            .map(|t| t.to_string())
            .collect();
        if !colliding.is_empty() {
            return Err(AdminError::InvalidTopic(format!(
                "Topic '{name}' collides with existing topics: {}",
                colliding.join(", ")
            )));
        }
    }

    let topic_config = TopicConfig::from_overrides(topic.configs.iter().map(|c| {
        (
            c.name.as_str().to_owned(),
            c.value
                .as_ref()
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default(),
        )
    }))
    .map_err(|err| AdminError::InvalidConfig(err.to_string()))?;

    let actual_rf = assignment
        .values()
        .next()
        .map(|r| r.len() as i16)
        .unwrap_or(0);
    config
        .create_topic_policy
        .validate(
            name.as_str(),
            assignment.len() as i32,
            actual_rf,
            topic_config.overrides(),
        )
        .map_err(AdminError::PolicyViolation)?;

    Ok(TopicPlan {
        name,
        assignment,
        config: topic_config,
    })
}

async fn load_existing(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
) -> Result<ExistingTopics, ZkClientError> {
    let topics: BTreeSet<TopicName> = zk.get_all_topics(false).await?.into_iter().collect();
    let mut load = ctx.cluster_load();
    // Topics written by a request whose watch event the controller has not processed yet
    // still count, so back-to-back requests do not pile onto the same brokers.
    for topic in topics.iter().filter(|t| !ctx.all_topics.contains(*t)) {
        if let Some(written) = zk.get_topic_assignment(topic, false).await? {
            load.add(&written.assignment.partitions);
        }
    }
    Ok(ExistingTopics {
        topics,
        marked_for_deletion: zk.get_topic_deletions(false).await?.into_iter().collect(),
        load,
    })
}

async fn write(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    plan: &TopicPlan,
) -> Result<TopicId, AdminError> {
    let topic_id = TopicId::random();
    let assignment = TopicAssignment::new(topic_id, plan.assignment.clone());
    match zk
        .create_topic(
            &plan.name,
            plan.config.overrides(),
            &assignment,
            Some(ctx.epoch_zk_version),
        )
        .await
    {
        Ok(()) => Ok(topic_id),
        Err(ZkClientError::NodeExists(_)) => Err(AdminError::TopicAlreadyExists(format!(
            "Topic '{}' already exists.",
            plan.name
        ))),
        Err(err) => Err(AdminError::from_store(err)),
    }
}

fn success_result(
    plan: &TopicPlan,
    topic_id: Option<TopicId>,
    api_version: i16,
) -> CreatableTopicResult {
    let mut result = CreatableTopicResult::default()
        .with_name(WireTopicName(StrBytes::from_string(plan.name.to_string())))
        .with_error_code(0)
        .with_error_message(None)
        .with_num_partitions(-1)
        .with_replication_factor(-1);
    if let Some(id) = topic_id {
        result.topic_id = uuid::Uuid::from_bytes(*id.as_bytes());
    }
    if api_version >= 5 {
        result.num_partitions = plan.assignment.len() as i32;
        result.replication_factor = plan
            .assignment
            .values()
            .next()
            .map(|r| r.len() as i16)
            .unwrap_or(0);
        result.configs = Some(
            model::topic_config::TOPIC_CONFIGS
                .iter()
                .map(|def| {
                    let (value, source) = match plan.config.get(def.name) {
                        Some(v) => (v.to_owned(), SOURCE_TOPIC),
                        None => (def.default.to_owned(), SOURCE_DEFAULT),
                    };
                    CreatableTopicConfigs::default()
                        .with_name(StrBytes::from_static_str(def.name))
                        .with_value(Some(StrBytes::from_string(value)))
                        .with_read_only(false)
                        .with_config_source(source)
                        .with_is_sensitive(false)
                })
                .collect(),
        );
    }
    result
}

fn error_result(name: WireTopicName, err: &AdminError) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name)
        .with_error_code(err.code())
        .with_error_message(Some(StrBytes::from_string(err.to_string())))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_configs(Some(Vec::new()))
}

fn error_response(
    request: &CreateTopicsRequest,
    _api_version: i16,
    err: &AdminError,
) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| error_result(t.name.clone(), err))
            .collect(),
    )
}

/// NOT_CONTROLLER for every topic (this broker is not the active controller).
pub fn not_controller(request: &CreateTopicsRequest, api_version: i16) -> CreateTopicsResponse {
    let err = AdminError::NotController(
        "This is not the correct controller for this cluster.".to_owned(),
    );
    error_response(request, api_version, &err)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopicConfig,
    };
    use kafka_protocol::messages::BrokerId as WireBrokerId;

    use super::*;
    use crate::admin::CreateTopicPolicy;
    use crate::test_support::{ctx_with, name};

    fn topic(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(WireTopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
    }

    fn with_assignment(mut t: CreatableTopic, assignment: &[(i32, &[i32])]) -> CreatableTopic {
        t.assignments = assignment
            .iter()
            .map(|(p, replicas)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(*p)
                    .with_broker_ids(replicas.iter().map(|&b| WireBrokerId(b)).collect())
            })
            .collect();
        t
    }

    fn with_config(mut t: CreatableTopic, key: &str, value: Option<&str>) -> CreatableTopic {
        t.configs.push(
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(key.to_owned()))
                .with_value(value.map(|v| StrBytes::from_string(v.to_owned()))),
        );
        t
    }

    /// Plans `t` on live brokers 0..3 with topics `a.b` and `gone` (marked for deletion).
    fn check(t: CreatableTopic, config: &ControllerConfig) -> Result<TopicPlan, (i16, String)> {
        let ctx = ctx_with(&[0, 1, 2], &[]);
        let existing = ExistingTopics {
            topics: [name("a.b"), name("gone")].into_iter().collect(),
            marked_for_deletion: ["gone".to_owned()].into_iter().collect(),
            load: assignment::ClusterLoad::default(),
        };
        plan_topic(&ctx, config, &existing, &t).map_err(|e| (e.code(), e.to_string()))
    }

    #[test]
    fn refusals_have_kafkas_codes_and_messages() {
        let config = ControllerConfig::default();
        let cases: Vec<(CreatableTopic, i16, &str)> = vec![
            (
                topic("", 1, 1),
                17,
                "Topic name is illegal, it can't be empty",
            ),
            (
                topic("..", 1, 1),
                17,
                "Topic name cannot be \".\" or \"..\"",
            ),
            (topic("a b", 1, 1), 17, "illegal"),
            (
                topic(&"x".repeat(250), 1, 1),
                17,
                "can't be longer than 249",
            ),
            (topic("a.b", 1, 1), 36, "Topic 'a.b' already exists."),
            (
                topic("a_b", 1, 1),
                17,
                "Topic 'a_b' collides with existing topics: a.b",
            ),
            (
                topic("t", 0, 1),
                37,
                "Number of partitions must be larger than 0",
            ),
            (
                topic("t", -5, 1),
                37,
                "Number of partitions must be larger than 0",
            ),
            (
                topic("t", 1, 0),
                38,
                "Replication factor must be larger than 0",
            ),
            (
                topic("t", 1, 4),
                38,
                "Replication factor: 4 larger than available brokers: 3.",
            ),
            (
                with_assignment(topic("t", 2, -1), &[(0, &[0])]),
                42,
                "Both numPartitions or replicationFactor",
            ),
            (
                with_assignment(topic("t", -1, -1), &[(0, &[0, 1]), (1, &[1])]),
                39,
                "same number of replicas",
            ),
            (
                with_assignment(topic("t", -1, -1), &[(0, &[1, 1])]),
                39,
                "Duplicate replica assignment",
            ),
            (
                with_assignment(topic("t", -1, -1), &[(0, &[1]), (2, &[0])]),
                39,
                "consecutive 0-based",
            ),
            (
                with_assignment(topic("t", -1, -1), &[(0, &[])]),
                39,
                "replication factor of 0",
            ),
            (
                with_config(topic("t", 1, 1), "retention.ms", Some("abc")),
                40,
                "Invalid value abc for configuration retention.ms",
            ),
            (
                with_config(topic("t", 1, 1), "bogus", Some("1")),
                40,
                "bogus",
            ),
            (
                with_config(topic("t", 1, 1), "retention.ms", None),
                42,
                "Null value not supported for topic configs : retention.ms",
            ),
        ];
        for (t, code, message) in cases {
            let raw = t.name.0.as_str().to_owned();
            match check(t, &config) {
                Ok(plan) => panic!("{raw}: accepted as {plan:?}"),
                Err((got, text)) => {
                    assert_eq!(got, code, "{raw}: {text}");
                    assert!(text.contains(message), "{raw}: {text:?} lacks {message:?}");
                }
            }
        }
    }

    #[test]
    fn the_partitions_of_a_request_are_bounded() {
        let config = ControllerConfig {
            max_partitions_per_request: 100,
            num_partitions: 30,
            ..ControllerConfig::default()
        };
        let request =
            |topics: Vec<CreatableTopic>| CreateTopicsRequest::default().with_topics(topics);
        assert!(check_partition_budget(&config, &request(vec![topic("a", 100, 1)])).is_ok());
        // Defaults (-1) and explicit assignments count too.
        let ok = request(vec![
            topic("a", 40, 1),
            topic("b", -1, -1),
            with_assignment(topic("c", -1, -1), &[(0, &[0]), (1, &[1])]),
        ]);
        assert!(check_partition_budget(&config, &ok).is_ok());
        for over in [
            request(vec![topic("a", 101, 1)]),
            request(vec![topic("a", 60, 1), topic("b", 41, 1)]),
            request(vec![topic("a", i32::MAX, 1), topic("b", i32::MAX, 1)]),
            request(vec![topic("a", 71, 1), topic("b", -1, -1)]),
        ] {
            let err = check_partition_budget(&config, &over).unwrap_err();
            assert_eq!(err.code(), 37, "INVALID_PARTITIONS");
            assert!(
                err.to_string().contains("max.partitions.per.request (100)"),
                "{err}"
            );
        }
    }

    #[test]
    fn marked_for_deletion_is_refused() {
        // "gone" is both in the store and marked: "already exists" is found first, as Kafka.
        let config = ControllerConfig::default();
        assert_eq!(check(topic("gone", 1, 1), &config).unwrap_err().0, 36);
    }

    #[test]
    fn assignment_previews_round_trip_and_malformed_ones_are_refused() {
        let assignment: BTreeMap<i32, Vec<BrokerId>> =
            [(0, vec![1001, 1002]), (1, vec![1002, 1003]), (7, vec![])].into();
        let bytes = encode_assignment_preview(&assignment);
        assert_eq!(decode_assignment_preview(&bytes), Some(assignment));
        assert_eq!(
            decode_assignment_preview(&encode_assignment_preview(&BTreeMap::new())),
            Some(BTreeMap::new())
        );
        assert_eq!(decode_assignment_preview(&bytes[..bytes.len() - 4]), None);
        assert_eq!(decode_assignment_preview(&bytes[..bytes.len() - 1]), None);
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(decode_assignment_preview(&longer), None);
    }

    #[test]
    fn defaults_fill_minus_one_and_assignment_is_used_verbatim() {
        let config = ControllerConfig {
            num_partitions: 4,
            default_replication_factor: 2,
            ..ControllerConfig::default()
        };
        let plan = check(topic("t", -1, -1), &config).unwrap();
        assert_eq!(plan.assignment.len(), 4);
        assert!(plan.assignment.values().all(|r| r.len() == 2));
        // Kafka does not check that brokers of a create-time assignment exist.
        let plan = check(
            with_assignment(topic("t", -1, -1), &[(0, &[7, 8]), (1, &[8, 7])]),
            &config,
        )
        .unwrap();
        assert_eq!(
            plan.assignment,
            BTreeMap::from([(0, vec![7, 8]), (1, vec![8, 7])])
        );
    }

    #[test]
    fn policy_violations() {
        let config = ControllerConfig {
            create_topic_policy: CreateTopicPolicy {
                min_partitions: Some(3),
                min_replication_factor: Some(2),
                required_configs: vec!["retention.ms".to_owned()],
            },
            ..ControllerConfig::default()
        };
        let cases: Vec<(CreatableTopic, &str)> = vec![
            (
                with_config(topic("t", 1, 2), "retention.ms", Some("1000")),
                "at least 3",
            ),
            (
                with_config(topic("t", 3, 1), "retention.ms", Some("1000")),
                "replication factor 1",
            ),
            (topic("t", 3, 2), "retention.ms"),
        ];
        for (t, message) in cases {
            let (code, text) = check(t, &config).unwrap_err();
            assert_eq!(code, 44, "{text}");
            assert!(text.contains(message), "{text:?} lacks {message:?}");
        }
        assert!(check(
            with_config(topic("t", 3, 2), "retention.ms", Some("1000")),
            &config
        )
        .is_ok());
    }
}
