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
    rctx: &crate::auth::RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let result = if let Some(refusal) = super::config_refusal(
            ctx,
            rctx,
            security::acl::Operation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            Err(refusal)
        } else {
            match resource.resource_type {
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
                RESOURCE_BROKER => {
                    let configs: Vec<(String, String)> = resource
                        .configs
                        .iter()
                        .filter_map(|c| {
                            c.value
                                .as_ref()
                                .map(|v| (c.name.to_string(), v.to_string()))
                        })
                        .collect();
                    alter_broker(ctx, &resource.resource_name, request.validate_only, |_| {
                        Ok(configs)
                    })
                    .await
                }
                other => Err(unsupported_resource(other)),
            }
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

/// The broker configs that can change without a restart (Kafka's `DynamicConfig.Broker`
/// replication throttles; every other broker config lives in server.properties here).
pub(super) const DYNAMIC_BROKER_CONFIGS: [&str; 2] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
];

/// AlterConfigs / IncrementalAlterConfigs of a BROKER resource: `""` is the cluster default
/// (`/config/brokers/<default>`), else this broker's id (Kafka refuses another broker's id
/// on this broker). Only [`DYNAMIC_BROKER_CONFIGS`] may be set, each a number of bytes per
/// second; the result goes to `/config/brokers/<entity>` with a change notification, which
/// every broker applies live.
pub(super) async fn alter_broker(
    ctx: &BrokerContext,
    name: &StrBytes,
    validate_only: bool,
    change: impl FnOnce(BTreeMap<String, String>) -> Result<Vec<(String, String)>, Refusal>,
) -> Result<(), Refusal> {
    let entity = if name.is_empty() {
        "<default>".to_owned()
    } else {
        match name.parse::<i32>() {
            Ok(id) if id == ctx.broker_id => id.to_string(),
            _ => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "Unexpected broker id, expected {} or empty string, but received {name}",
                        ctx.broker_id
                    ),
                ))
            }
        }
    };
    let entity_path = format!("brokers/{entity}");
    let zk = ctx.zk();
    let store_error = |err: znodes::zk_client::ZkClientError| {
        (ResponseError::UnknownServerError, err.to_string())
    };
    let current = zk
        .get_entity_config(&entity_path)
        .await
        .map_err(store_error)?;
    let wanted: BTreeMap<String, String> = change(current)?.into_iter().collect();
    for (key, value) in &wanted {
        if !DYNAMIC_BROKER_CONFIGS.contains(&key.as_str()) {
            return Err((
                ResponseError::InvalidConfig,
                format!(
                    "Cannot update {key} dynamically: only {} can be changed without a restart; edit server.properties",
                    DYNAMIC_BROKER_CONFIGS.join(" and ")
                ),
            ));
        }
        if !value.trim().parse::<i64>().is_ok_and(|v| v >= 0) {
            return Err((
                ResponseError::InvalidConfig,
                format!("Invalid value {value} for configuration {key}: it must be a number of bytes per second (0 or more)"),
            ));
        }
    }
    if validate_only {
        return Ok(());
    }
    zk.set_entity_config_and_notify(&entity_path, &wanted)
        .await
        .map_err(store_error)?;
    info!(entity = %entity_path, overrides = ?wanted, "broker dynamic config changed");
    Ok(())
}

pub(super) fn unsupported_resource(resource_type: i8) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!("Unsupported resource type {resource_type}"),
    )
}

fn result_to_response(result: Result<(), Refusal>) -> AlterConfigsResourceResponse {
    match result {
        Ok(()) => AlterConfigsResourceResponse::default(),
        Err((error, message)) => AlterConfigsResourceResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}
