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
                _ if resource.configs.iter().any(|c| c.value.is_none()) => {
                    // Kafka's `ZkAdminManager.alterConfigs`.
                    let nulls: Vec<&str> = resource
                        .configs
                        .iter()
                        .filter(|c| c.value.is_none())
                        .map(|c| c.name.as_str())
                        .collect();
                    Err((
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {}", nulls.join(",")),
                    ))
                }
                RESOURCE_TOPIC | RESOURCE_BROKER => {
                    let configs: Vec<(String, String)> = resource
                        .configs
                        .iter()
                        .filter_map(|c| {
                            c.value
                                .as_ref()
                                .map(|v| (c.name.to_string(), v.to_string()))
                        })
                        .collect();
                    if resource.resource_type == RESOURCE_TOPIC {
                        alter_topic(ctx, &resource.resource_name, request.validate_only, |_| {
                            Ok(configs)
                        })
                        .await
                    } else {
                        alter_broker(ctx, &resource.resource_name, request.validate_only, |_| {
                            Ok(configs)
                        })
                        .await
                    }
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

/// The broker configs this broker applies without a restart: Kafka's `DynamicConfig.Broker`
/// replication throttles (bytes per second). Kafka has more dynamic broker configs (thread
/// pools, SSL stores, log cleaner, broker-wide log defaults); this broker reads those from
/// server.properties only, so it refuses them as Kafka refuses a config that is not dynamic.
pub(super) const DYNAMIC_BROKER_CONFIGS: [&str; 2] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
];

/// Kafka's name of a config resource in its messages: `ConfigResource(type=BROKER, name='1')`.
fn broker_resource(name: &str) -> String {
    format!("ConfigResource(type=BROKER, name='{name}')")
}

/// Checks a broker's new dynamic configs as Kafka's `DynamicBrokerConfig.validate` does,
/// with its messages: every key must be dynamically updatable here, every value a LONG of at
/// least 0. The refusal is INVALID_REQUEST with Kafka's "Invalid config value for resource"
/// wrapping.
pub(super) fn validate_broker_configs(
    name: &str,
    configs: &BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let invalid = |reason: String| {
        (
            ResponseError::InvalidRequest,
            format!(
                "Invalid config value for resource {}: {reason}",
                broker_resource(name)
            ),
        )
    };
    let not_dynamic: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|k| !DYNAMIC_BROKER_CONFIGS.contains(k))
        .collect();
    if !not_dynamic.is_empty() {
        return Err(invalid(format!(
            "Cannot update these configs dynamically: Set({})",
            not_dynamic.join(", ")
        )));
    }
    for (key, value) in configs {
        match value.trim().parse::<i64>() {
            Ok(v) if v >= 0 => {}
            Ok(_) => {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {key}: Value must be at least 0"
                )))
            }
            Err(_) => {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {key}: Not a number of type LONG"
                )))
            }
        }
    }
    Ok(())
}

/// AlterConfigs / IncrementalAlterConfigs of a BROKER resource: `""` is the cluster default
/// (`/config/brokers/<default>`), else this broker's id (Kafka refuses another broker's id
/// on this broker). Only [`DYNAMIC_BROKER_CONFIGS`] may be set (see
/// [`validate_broker_configs`]); the result goes to `/config/brokers/<entity>` as Kafka
/// writes it (`{"version":1,"config":{...}}`) with a change notification, which every
/// broker applies live.
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
            Ok(_) => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "Unexpected broker id, expected {}, but received {name}",
                        ctx.broker_id
                    ),
                ))
            }
            Err(_) => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("Broker id must be an integer, but it is: {name}"),
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
    validate_broker_configs(name, &wanted)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_configs_are_checked_as_kafka_checks_them() {
        let configs = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(validate_broker_configs(
            "1",
            &configs(&[
                ("leader.replication.throttled.rate", "0"),
                ("follower.replication.throttled.rate", "10000000")
            ])
        )
        .is_ok());
        let refused = |name: &str, pairs: &[(&str, &str)]| {
            let (error, message) = validate_broker_configs(name, &configs(pairs)).unwrap_err();
            assert_eq!(error, ResponseError::InvalidRequest);
            message
        };
        assert_eq!(
            refused("1", &[("log.dirs", "/x"), ("broker.id", "2")]),
            "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Cannot update these configs dynamically: Set(broker.id, log.dirs)"
        );
        assert_eq!(
            refused("", &[("leader.replication.throttled.rate", "fast")]),
            "Invalid config value for resource ConfigResource(type=BROKER, name=''): Invalid value fast for configuration leader.replication.throttled.rate: Not a number of type LONG"
        );
        assert_eq!(
            refused("1", &[("follower.replication.throttled.rate", "-1")]),
            "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Invalid value -1 for configuration follower.replication.throttled.rate: Value must be at least 0"
        );
    }
}
