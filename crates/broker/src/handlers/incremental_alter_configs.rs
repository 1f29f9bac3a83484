//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use model::topic_config::{definition, ConfigType};

use super::alter_configs::{alter_broker, alter_topic, unsupported_resource, Refusal};
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::context::BrokerContext;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
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
                    let ops = resource.configs.clone();
                    alter_topic(
                        ctx,
                        &resource.resource_name,
                        request.validate_only,
                        |current| apply(current, &ops),
                    )
                    .await
                }
                RESOURCE_BROKER => {
                    let ops = resource.configs.clone();
                    alter_broker(
                        ctx,
                        &resource.resource_name,
                        request.validate_only,
                        |current| apply(current, &ops),
                    )
                    .await
                }
                other => Err(unsupported_resource(other)),
            }
        };
        let response = match result {
            Ok(()) => AlterConfigsResourceResponse::default(),
            Err((error, message)) => AlterConfigsResourceResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        };
        responses.push(
            response
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Applies the ops to the current overrides (Kafka's `prepareIncrementalConfigs`).
fn apply(
    mut current: BTreeMap<String, String>,
    ops: &[AlterableConfig],
) -> Result<Vec<(String, String)>, Refusal> {
    let mut seen = BTreeSet::new();
    for op in ops {
        let key = op.name.to_string();
        if !seen.insert(key.clone()) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {key}"),
            ));
        }
        let value = op.value.as_ref().map(|v| v.to_string());
        match op.config_operation {
            OP_SET => {
                current.insert(key, value.unwrap_or_default());
            }
            OP_DELETE => {
                current.remove(&key);
            }
            OP_APPEND | OP_SUBTRACT => {
                let def = definition(&key).ok_or_else(|| {
                    (
                        ResponseError::InvalidConfig,
                        format!("Unknown topic config name: {key}"),
                    )
                })?;
                if def.ty != ConfigType::List {
                    let verb = if op.config_operation == OP_APPEND {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err((
                        ResponseError::InvalidConfig,
                        format!("Config value {verb} is not allowed for config key: {key}"),
                    ));
                }
                let existing = current
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| def.default.to_string());
                let mut items: Vec<String> = existing
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                for item in value
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    if op.config_operation == OP_APPEND {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                current.insert(key, items.join(","));
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("Unknown config operation {other}"),
                ))
            }
        }
    }
    Ok(current.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &'static str, operation: i8, value: Option<&'static str>) -> AlterableConfig {
        AlterableConfig::default()
            .with_name(StrBytes::from_static_str(name))
            .with_config_operation(operation)
            .with_value(value.map(StrBytes::from_static_str))
    }

    #[test]
    fn set_delete_append_subtract() {
        let current = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let result = apply(
            current,
            &[
                op("retention.ms", OP_DELETE, None),
                op("cleanup.policy", OP_APPEND, Some("compact")),
                op("segment.ms", OP_SET, Some("5")),
            ],
        )
        .unwrap();
        assert_eq!(
            result,
            vec![
                ("cleanup.policy".into(), "delete,compact".into()),
                ("segment.ms".into(), "5".into())
            ]
        );
        let refused =
            apply(BTreeMap::new(), &[op("retention.ms", OP_APPEND, Some("1"))]).unwrap_err();
        assert_eq!(refused.0, ResponseError::InvalidConfig);
        let dup = apply(
            BTreeMap::new(),
            &[op("a", OP_SET, Some("1")), op("a", OP_SET, Some("2"))],
        )
        .unwrap_err();
        assert_eq!(dup.0, ResponseError::InvalidRequest);
    }
}
