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
    let existing = match load_existing(zk).await {
        Ok(existing) => existing,
        Err(err) => {
            return (
                error_response(request, api_version, &AdminError::from_store(err)),
                Vec::new(),
            )
        }
    };
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
                Ok(plan) if request.validate_only => Ok((plan, None)),
                Ok(plan) => match write(ctx, zk, &plan).await {
                    Ok(id) => {
                        info!(topic = %plan.name, partitions = plan.assignment.len(), "created topic");
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
                success_result(&plan, topic_id, api_version)
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
            &ctx.cluster_load(),
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

async fn load_existing(zk: &KafkaZkClient) -> Result<ExistingTopics, ZkClientError> {
    Ok(ExistingTopics {
        topics: zk.get_all_topics(false).await?.into_iter().collect(),
        marked_for_deletion: zk.get_topic_deletions(false).await?.into_iter().collect(),
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
