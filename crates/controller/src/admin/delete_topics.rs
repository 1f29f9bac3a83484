//! DeleteTopics, phase 1 (SPEC section 5): write `/admin/delete_topics/<t>` for each topic;
//! the response waits until the deletion completes or the request's timeout elapses.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;
use uuid::Uuid;

use model::{TopicId, TopicName};
use znodes::zk_client::{KafkaZkClient, ZkClientError};

use super::{AdminError, Await, AwaitCondition};
use crate::context::ControllerContext;
use crate::ControllerConfig;

/// One topic named by a request: by name (v0-v5 and v6) or by id (v6).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Requested {
    name: Option<String>,
    id: Uuid,
}

/// Handles a DeleteTopics request; returns the response and the results that wait for the
/// deletions to complete.
pub async fn handle(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    config: &ControllerConfig,
    request: &DeleteTopicsRequest,
    api_version: i16,
) -> (DeleteTopicsResponse, Vec<Await>) {
    let requested = requested_topics(request, api_version);
    let mut counts: BTreeMap<&Requested, usize> = BTreeMap::new();
    for r in &requested {
        *counts.entry(r).or_default() += 1;
    }
    let mut results = Vec::with_capacity(requested.len());
    let mut awaits = Vec::new();
    for (index, r) in requested.iter().enumerate() {
        let outcome = if counts[r] > 1 {
            Err(AdminError::InvalidRequest(
                "Duplicate topic in request.".to_owned(),
            ))
        } else {
            match resolve(ctx, r) {
                Ok(name) => mark(ctx, zk, config, api_version, &name)
                    .await
                    .map(|()| name),
                Err(err) => Err(err),
            }
        };
        let mut result = DeletableTopicResult::default().with_topic_id(r.id);
        result.name = r
            .name
            .clone()
            .map(|n| WireTopicName(StrBytes::from_string(n)));
        match outcome {
            Ok(name) => {
                result.topic_id = ctx
                    .topic_ids
                    .get(&name)
                    .map(|id| Uuid::from_bytes(*id.as_bytes()))
                    .unwrap_or(r.id);
                result.name = Some(WireTopicName(StrBytes::from_string(name.to_string())));
                if request.timeout_ms > 0 {
                    awaits.push(Await {
                        index,
                        condition: AwaitCondition::Deleted(name),
                    });
                } else {
                    result.error_code = ResponseError::RequestTimedOut.code();
                }
            }
            Err(err) => {
                result.error_code = err.code();
                result.error_message = Some(StrBytes::from_string(err.to_string()));
            }
        }
        results.push(result);
    }
    (
        DeleteTopicsResponse::default().with_responses(results),
        awaits,
    )
}

fn requested_topics(request: &DeleteTopicsRequest, api_version: i16) -> Vec<Requested> {
    if api_version >= 6 {
        request
            .topics
            .iter()
            .map(|t| Requested {
                name: t.name.as_ref().map(|n| n.0.as_str().to_owned()),
                id: t.topic_id,
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| Requested {
                name: Some(n.0.as_str().to_owned()),
                id: Uuid::nil(),
            })
            .collect()
    }
}

fn resolve(ctx: &ControllerContext, r: &Requested) -> Result<TopicName, AdminError> {
    let unknown = || {
        AdminError::UnknownTopicOrPartition(
            "This server does not host this topic-partition.".to_owned(),
        )
    };
    match (&r.name, r.id.is_nil()) {
        (Some(_), false) => Err(AdminError::InvalidRequest(
            "Topic name and topic id cannot both be set.".to_owned(),
        )),
        (None, true) => Err(AdminError::InvalidRequest(
            "Neither topic name nor topic id is set.".to_owned(),
        )),
        (None, false) => {
            let id = TopicId::from_bytes(*r.id.as_bytes());
            ctx.topic_ids
                .iter()
                .find(|(_, &known)| known == id)
                .map(|(name, _)| name.clone())
                .ok_or_else(|| AdminError::UnknownTopicId(format!("Topic id {id} does not exist.")))
        }
        (Some(name), true) => {
            let name: TopicName = name.parse().map_err(|_| unknown())?;
            if ctx.all_topics.contains(&name) {
                Ok(name)
            } else {
                Err(unknown())
            }
        }
    }
}

async fn mark(
    ctx: &ControllerContext,
    zk: &KafkaZkClient,
    config: &ControllerConfig,
    api_version: i16,
    name: &TopicName,
) -> Result<(), AdminError> {
    if !config.delete_topic_enable {
        let message = "Topic deletion is disabled.".to_owned();
        return Err(if api_version < 3 {
            AdminError::InvalidRequest(message)
        } else {
            AdminError::TopicDeletionDisabled(message)
        });
    }
    match zk
        .create_delete_topic_path(name, Some(ctx.epoch_zk_version))
        .await
    {
        // Already marked: wait for the deletion in progress, as Kafka does.
        Ok(()) | Err(ZkClientError::NodeExists(_)) => {
            info!(topic = %name, "topic marked for deletion");
            Ok(())
        }
        Err(err) => Err(AdminError::from_store(err)),
    }
}

/// NOT_CONTROLLER for every topic.
pub fn not_controller(request: &DeleteTopicsRequest, api_version: i16) -> DeleteTopicsResponse {
    let err = AdminError::NotController(
        "This is not the correct controller for this cluster.".to_owned(),
    );
    let results = requested_topics(request, api_version)
        .into_iter()
        .map(|r| {
            DeletableTopicResult::default()
                .with_name(r.name.map(|n| WireTopicName(StrBytes::from_string(n))))
                .with_topic_id(r.id)
                .with_error_code(err.code())
                .with_error_message(Some(StrBytes::from_string(err.to_string())))
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(results)
}
