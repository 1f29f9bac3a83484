//! DescribeClientQuotas (v0-1) and AlterClientQuotas (v0-1, KIP-546), as Kafka's
//! ZooKeeper-mode broker answers them (2.8's `ZkAdminManager`): quotas live in
//! `/config/users/<u>`, `/config/clients/<c>` and `/config/users/<u>/clients/<c>` (names
//! sanitized, `<default>` for the default entity), the same znodes `kafka-configs.sh
//! --zookeeper` writes. An alteration is written with a `/config/changes` notification, which
//! every broker's quota manager ([`crate::quotas`]) reads again: a quota set here holds on
//! every broker within a moment.
//!
//! Gregor enforces `producer_byte_rate`, `consumer_byte_rate` (whole bytes per second, at
//! least 1) and `request_percentage` (a positive number: Kafka takes any DOUBLE, but zero or
//! less would throttle every request for ever). The other quota key Kafka knows
//! (`controller_mutation_rate`) and IP quotas (`connection_creation_rate`) are refused with
//! INVALID_REQUEST saying so, rather than stored and silently not enforced.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntityData as AlterEntity;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlteredEntity, EntryData as AlteredEntry,
};
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use tracing::{info, warn};
use znodes::zk_client::KafkaZkClient;

use crate::context::BrokerContext;
use crate::quotas::{
    desanitize, sanitize, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

/// Kafka's `ClientQuotaEntity` types.
const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";
/// The store's name of a default entity.
const DEFAULT: &str = "<default>";
/// Quota keys Kafka accepts for users and clients that this broker does not enforce.
const NOT_ENFORCED: [&str; 1] = ["controller_mutation_rate"];

/// A filter component's match (`match_type` 0, 1, 2).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Match {
    Exact(String),
    Default,
    Any,
}

/// One side of a stored entity: a name or the default.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    Named(String),
    Default,
}

impl Name {
    fn from_store(sanitized: &str) -> Name {
        if sanitized == DEFAULT {
            Name::Default
        } else {
            Name::Named(desanitize(sanitized))
        }
    }

    fn to_store(&self) -> String {
        match self {
            Name::Named(name) => sanitize(name),
            Name::Default => DEFAULT.to_owned(),
        }
    }

    /// The wire form: null for the default.
    fn to_wire(&self) -> Option<StrBytes> {
        match self {
            Name::Named(name) => Some(StrBytes::from_string(name.clone())),
            Name::Default => None,
        }
    }
}

/// A stored entity: (user, client id), at least one of them present.
type Entity = (Option<Name>, Option<Name>);

fn invalid(message: impl Into<String>) -> (ResponseError, String) {
    (ResponseError::InvalidRequest, message.into())
}

pub(super) async fn describe(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    // DESCRIBE_CONFIGS on the cluster, as Kafka's handleDescribeClientQuotasRequest.
    let allowed = super::authorized_cluster(ctx, rctx, security::acl::Operation::DescribeConfigs);
    let outcome = if allowed {
        describe_matching(ctx, &request).await
    } else {
        let error = ResponseError::ClusterAuthorizationFailed;
        Err((error, error.to_string()))
    };
    match outcome {
        Ok(entries) => DescribeClientQuotasResponse::default().with_entries(Some(entries)),
        Err((error, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None),
    }
}

async fn describe_matching(
    ctx: &BrokerContext,
    request: &DescribeClientQuotasRequest,
) -> Result<Vec<DescribedEntry>, (ResponseError, String)> {
    let (mut user, mut client, mut ip) = (None, None, None);
    for component in &request.components {
        let matched = match (component.match_type, &component._match) {
            (0, Some(name)) => Match::Exact(name.to_string()),
            (0, None) => return Err(invalid("An exact match filter component needs a name")),
            (1, _) => Match::Default,
            (2, _) => Match::Any,
            (other, _) => return Err(invalid(format!("Unexpected match type {other}"))),
        };
        let slot = match component.entity_type.as_str() {
            USER => &mut user,
            CLIENT_ID => &mut client,
            IP => &mut ip,
            "" => return Err(invalid("Unexpected empty filter component entity type")),
            other => {
                return Err((
                    ResponseError::UnsupportedVersion,
                    format!("Custom entity type '{other}' not supported"),
                ))
            }
        };
        if slot.is_some() {
            let which = if component.entity_type.as_str() == CLIENT_ID {
                "client"
            } else {
                component.entity_type.as_str()
            };
            return Err(invalid(format!(
                "Duplicate {which} filter component entity type"
            )));
        }
        *slot = Some(matched);
    }
    if ip.is_some() && (user.is_some() || client.is_some()) {
        return Err(invalid(
            "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.",
        ));
    }
    // No IP quota is ever stored (they are refused): an IP filter matches nothing.
    if ip.is_some() {
        return Ok(Vec::new());
    }
    let strict = request.strict;
    let matches = |component: &Option<Match>, name: &Option<Name>| match component {
        Some(Match::Exact(wanted)) => name == &Some(Name::Named(wanted.clone())),
        Some(Match::Default) => name == &Some(Name::Default),
        Some(Match::Any) => name.is_some(),
        None => name.is_none() || !strict,
    };
    let zk = ctx.zk();
    let mut entries = Vec::new();
    for (path, entity) in stored_entities(&zk).await? {
        if !matches(&user, &entity.0) || !matches(&client, &entity.1) {
            continue;
        }
        let config = zk
            .get_entity_config(&path)
            .await
            .map_err(|err| store_error(&err))?;
        let values: Vec<ValueData> = config
            .iter()
            .filter(|(key, _)| is_quota_key(key))
            .filter_map(|(key, value)| match value.trim().parse::<f64>() {
                Ok(value) => Some(
                    ValueData::default()
                        .with_key(StrBytes::from_string(key.clone()))
                        .with_value(value),
                ),
                Err(_) => {
                    warn!(entity = %path, key = %key, value = %value, "not a number: quota left out");
                    None
                }
            })
            .collect();
        if values.is_empty() {
            continue;
        }
        let mut described = Vec::new();
        if let Some(name) = &entity.0 {
            described.push(
                DescribedEntity::default()
                    .with_entity_type(StrBytes::from_static_str(USER))
                    .with_entity_name(name.to_wire()),
            );
        }
        if let Some(name) = &entity.1 {
            described.push(
                DescribedEntity::default()
                    .with_entity_type(StrBytes::from_static_str(CLIENT_ID))
                    .with_entity_name(name.to_wire()),
            );
        }
        entries.push(
            DescribedEntry::default()
                .with_entity(described)
                .with_values(values),
        );
    }
    Ok(entries)
}

/// Every user, client and user/client entity with a config node: (store path, entity).
async fn stored_entities(
    zk: &KafkaZkClient,
) -> Result<Vec<(String, Entity)>, (ResponseError, String)> {
    let children = |path: String| async move {
        zk.get_config_entity_children(&path)
            .await
            .map_err(|err| store_error(&err))
    };
    let mut out = Vec::new();
    for user in children("users".to_owned()).await? {
        out.push((
            format!("users/{user}"),
            (Some(Name::from_store(&user)), None),
        ));
        for client in children(format!("users/{user}/clients")).await? {
            out.push((
                format!("users/{user}/clients/{client}"),
                (
                    Some(Name::from_store(&user)),
                    Some(Name::from_store(&client)),
                ),
            ));
        }
    }
    for client in children("clients".to_owned()).await? {
        out.push((
            format!("clients/{client}"),
            (None, Some(Name::from_store(&client))),
        ));
    }
    Ok(out)
}

fn is_quota_key(key: &str) -> bool {
    key == PRODUCER_BYTE_RATE
        || key == CONSUMER_BYTE_RATE
        || key == REQUEST_PERCENTAGE
        || NOT_ENFORCED.contains(&key)
}

fn store_error(err: &znodes::zk_client::ZkClientError) -> (ResponseError, String) {
    (
        ResponseError::UnknownServerError,
        format!("cannot read or write the quota configs in the metadata store: {err}"),
    )
}

pub(super) async fn alter(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // ALTER_CONFIGS on the cluster, as Kafka's handleAlterClientQuotasRequest.
    let allowed = super::authorized_cluster(ctx, rctx, security::acl::Operation::AlterConfigs);
    let mut entries = Vec::with_capacity(request.entries.len());
    for entry in request.entries {
        let echoed: Vec<AlteredEntity> = entry
            .entity
            .iter()
            .map(|e| {
                AlteredEntity::default()
                    .with_entity_type(e.entity_type.clone())
                    .with_entity_name(e.entity_name.clone())
            })
            .collect();
        let outcome = if allowed {
            alter_one(ctx, &entry.entity, &entry.ops, request.validate_only).await
        } else {
            let error = ResponseError::ClusterAuthorizationFailed;
            Err((error, error.to_string()))
        };
        let answered = match outcome {
            Ok(()) => AlteredEntry::default(),
            Err((error, message)) => AlteredEntry::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        };
        entries.push(answered.with_entity(echoed));
    }
    AlterClientQuotasResponse::default().with_entries(entries)
}

async fn alter_one(
    ctx: &BrokerContext,
    entity: &[AlterEntity],
    ops: &[kafka_protocol::messages::alter_client_quotas_request::OpData],
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let (mut user, mut client) = (None, None);
    for part in entity {
        let name = match &part.entity_name {
            Some(name) if name.is_empty() => {
                return Err(invalid(format!("Empty {} not supported", part.entity_type)))
            }
            Some(name) => Name::Named(name.to_string()),
            None => Name::Default,
        };
        let slot = match part.entity_type.as_str() {
            USER => &mut user,
            CLIENT_ID => &mut client,
            IP => {
                return Err(invalid(
                    "IP quotas (connection_creation_rate) are not supported by this broker",
                ))
            }
            other => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {other}"
                )))
            }
        };
        if slot.is_some() {
            return Err(invalid(format!(
                "Duplicate entity type {} in one client quota entity",
                part.entity_type
            )));
        }
        *slot = Some(name);
    }
    let path = match (&user, &client) {
        (Some(u), Some(c)) => format!("users/{}/clients/{}", u.to_store(), c.to_store()),
        (Some(u), None) => format!("users/{}", u.to_store()),
        (None, Some(c)) => format!("clients/{}", c.to_store()),
        (None, None) => return Err(invalid("Invalid client quota entity")),
    };
    let zk = ctx.zk();
    // The node may hold other configs (a user's SCRAM credentials): only quota keys change.
    let mut config: BTreeMap<String, String> = zk
        .get_entity_config(&path)
        .await
        .map_err(|err| store_error(&err))?;
    for op in ops {
        let key = op.key.as_str();
        if op.remove {
            config.remove(key);
            continue;
        }
        if key == PRODUCER_BYTE_RATE || key == CONSUMER_BYTE_RATE {
            // A Long in Kafka's config definition: whole numbers only.
            let whole = (op.value + 1e-6).floor();
            if !op.value.is_finite() || (whole - op.value).abs() > 1e-6 {
                return Err(invalid(format!("Configuration {key} must be a LONG value")));
            }
            if whole < 1.0 {
                return Err(invalid(format!(
                    "Configuration {key} must be at least 1 (bytes per second); remove it to lift the quota"
                )));
            }
            config.insert(key.to_owned(), format!("{}", whole as i64));
        } else if key == REQUEST_PERCENTAGE {
            if !op.value.is_finite() || op.value <= 0.0 {
                return Err(invalid(format!(
                    "Configuration {key} must be a positive number (percent of one request thread's time); remove it to lift the quota"
                )));
            }
            config.insert(key.to_owned(), format!("{}", op.value));
        } else if NOT_ENFORCED.contains(&key) {
            return Err(invalid(format!(
                "{key} is not enforced by this broker; it enforces producer_byte_rate, consumer_byte_rate and request_percentage"
            )));
        } else {
            return Err(invalid(format!("Invalid configuration key {key}")));
        }
    }
    if validate_only {
        return Ok(());
    }
    zk.set_entity_config_and_notify(&path, &config)
        .await
        .map_err(|err| store_error(&err))?;
    info!(entity = %path, config = ?config, "client quotas altered");
    Ok(())
}
