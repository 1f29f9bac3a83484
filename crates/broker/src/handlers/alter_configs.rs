//! AlterConfigs (the legacy API: the given set replaces a topic's overrides). Values are
//! validated with `model::topic_config`; the result goes to `/config/topics/<t>` with a
//! `/config/changes/config_change_<seq>` notification.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use model::TopicConfig;
use tracing::info;

use super::describe_configs::{parse_topic, RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::context::BrokerContext;

pub(super) type Refusal = (ResponseError, String);

pub(super) async fn handle(
    ctx: &BrokerContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let result = match resource.resource_type {
            RESOURCE_TOPIC => {
                let configs: Vec<(String, String)> = resource
                    .configs
                    .iter()
                    .filter_map(|c| {
                        c.value
                            .as_ref()
                            .map(|v| (c.name.to_string(), v.to_string()))
                    })
                    .collect();
                alter_topic(ctx, &resource.resource_name, request.validate_only, |_| {
                    Ok(configs)
                })
                .await
            }
            other => Err(unsupported_resource(other)),
        };
        responses.push(
            result_to_response(result)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// Reads the topic's overrides, lets `change` compute the new set, validates it and, unless
/// `validate_only`, writes it and notifies brokers.
pub(super) async fn alter_topic(
    ctx: &BrokerContext,
    name: &StrBytes,
    validate_only: bool,
    change: impl FnOnce(BTreeMap<String, String>) -> Result<Vec<(String, String)>, Refusal>,
) -> Result<(), Refusal> {
    let topic = parse_topic(name)?;
    let zk = ctx.zk();
    let store_error = |err: znodes::zk_client::ZkClientError| {
        (ResponseError::UnknownServerError, err.to_string())
    };
    if !zk.topic_exists(&topic).await.map_err(store_error)? {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Topic {topic} does not exist."),
        ));
    }
    let current = zk.get_topic_config(&topic).await.map_err(store_error)?;
    let wanted = change(current)?;
    let config = TopicConfig::from_overrides(wanted)
        .map_err(|err| (ResponseError::InvalidConfig, err.to_string()))?;
    if validate_only {
        return Ok(());
    }
    zk.set_topic_config(&topic, config.overrides())
        .await
        .map_err(store_error)?;
    zk.create_config_change_notification(&topic)
        .await
        .map_err(store_error)?;
    info!(%topic, overrides = ?config.overrides(), "topic config changed");
    Ok(())
}

pub(super) fn unsupported_resource(resource_type: i8) -> Refusal {
    if resource_type == RESOURCE_BROKER {
        (
            ResponseError::InvalidRequest,
            "Dynamic broker configs are not supported; edit server.properties".to_string(),
        )
    } else {
        (
            ResponseError::InvalidRequest,
            format!("Unsupported resource type {resource_type}"),
        )
    }
}

fn result_to_response(result: Result<(), Refusal>) -> AlterConfigsResourceResponse {
    match result {
        Ok(()) => AlterConfigsResourceResponse::default(),
        Err((error, message)) => AlterConfigsResourceResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}
