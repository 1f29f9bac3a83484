//! DescribeConfigs: a topic's configs (its overrides from `/config/topics/<t>`, else the
//! broker-level default from `server.properties`, else Kafka's default) with Kafka's config
//! sources and synonyms; and this broker's static configs.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use model::topic_config::{ConfigDef, ConfigType, TOPIC_CONFIGS};

use crate::context::BrokerContext;

/// Kafka's `ConfigResource.Type` codes.
pub(super) const RESOURCE_TOPIC: i8 = 2;
pub(super) const RESOURCE_BROKER: i8 = 4;

/// Kafka's `DescribeConfigsResponse.ConfigSource` codes.
const SOURCE_DYNAMIC_TOPIC_CONFIG: i8 = 1;
const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut results = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let result = if let Some(refusal) = super::config_refusal(
            ctx,
            rctx,
            security::acl::Operation::DescribeConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            Err(refusal)
        } else {
            match resource.resource_type {
                RESOURCE_TOPIC => {
                    describe_topic(ctx, resource, request.include_synonyms, version).await
                }
                RESOURCE_BROKER if resource.resource_name.is_empty() => {
                    // The cluster default: only what `/config/brokers/<default>` sets.
                    let (default, _) = dynamic_broker_configs(ctx).await;
                    Ok(describe_dynamic_default(
                        resource,
                        &default,
                        request.include_synonyms,
                        version,
                    ))
                }
                RESOURCE_BROKER => {
                    let dynamic = dynamic_broker_configs(ctx).await;
                    describe_broker(ctx, resource, request.include_synonyms, version).map(
                        |mut entries| {
                            entries.extend(describe_dynamic(
                                resource,
                                &dynamic,
                                request.include_synonyms,
                                version,
                            ));
                            entries
                        },
                    )
                }
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("unsupported resource type {other}"),
                )),
            }
        };
        let base = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        results.push(match result {
            Ok(configs) => base.with_configs(configs),
            Err((error, message)) => base
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}

type Refusal = (ResponseError, String);

/// Kafka's `DYNAMIC_BROKER_CONFIG` and `DYNAMIC_DEFAULT_BROKER_CONFIG` sources.
const SOURCE_DYNAMIC_BROKER_CONFIG: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
/// DescribeConfigs v3+ `config_type` LONG.
const TYPE_LONG: i8 = 5;

/// `/config/brokers/<default>` and `/config/brokers/<id>` (empty when unreadable).
async fn dynamic_broker_configs(
    ctx: &BrokerContext,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let zk = ctx.zk();
    let read = |entity: String| {
        let zk = zk.clone();
        async move { zk.get_entity_config(&entity).await.unwrap_or_default() }
    };
    (
        read("brokers/<default>".to_owned()).await,
        read(format!("brokers/{}", ctx.broker_id)).await,
    )
}

/// The dynamic broker configs (the replication throttle rates) that are set, with Kafka's
/// sources and synonyms: this broker's value, else the cluster default. An unset one is not
/// listed (unlimited), as Kafka, whose static config does not define them.
fn describe_dynamic(
    resource: &DescribeConfigsResource,
    (default, own): &(BTreeMap<String, String>, BTreeMap<String, String>),
    include_synonyms: bool,
    version: i16,
) -> Vec<DescribeConfigsResourceResult> {
    super::alter_configs::DYNAMIC_BROKER_CONFIGS
        .iter()
        .filter(|key| wanted(resource, key))
        .filter_map(|&key| {
            let mut synonyms = Vec::new();
            if let Some(v) = own.get(key) {
                synonyms.push((key.to_owned(), v.clone(), SOURCE_DYNAMIC_BROKER_CONFIG));
            }
            if let Some(v) = default.get(key) {
                synonyms.push((
                    key.to_owned(),
                    v.clone(),
                    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
                ));
            }
            let (_, value, source) = synonyms.first()?.clone();
            Some(entry(
                key,
                &value,
                source,
                false,
                TYPE_LONG,
                include_synonyms.then_some(&synonyms),
                version,
            ))
        })
        .collect()
}

/// The brokers' cluster default (resource name `""`): the configs
/// `/config/brokers/<default>` sets, each with only its DYNAMIC_DEFAULT_BROKER_CONFIG
/// synonym (Kafka's `createBrokerConfigEntry(perBrokerConfig = false)`).
fn describe_dynamic_default(
    resource: &DescribeConfigsResource,
    default: &BTreeMap<String, String>,
    include_synonyms: bool,
    version: i16,
) -> Vec<DescribeConfigsResourceResult> {
    default
        .iter()
        .filter(|(key, _)| wanted(resource, key))
        .map(|(key, value)| {
            let synonyms = vec![(
                key.clone(),
                value.clone(),
                SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
            )];
            entry(
                key,
                value,
                SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
                false,
                TYPE_LONG,
                include_synonyms.then_some(&synonyms),
                version,
            )
        })
        .collect()
}

async fn describe_topic(
    ctx: &BrokerContext,
    resource: &DescribeConfigsResource,
    include_synonyms: bool,
    version: i16,
) -> Result<Vec<DescribeConfigsResourceResult>, Refusal> {
    let topic = parse_topic(&resource.resource_name)?;
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
    let overrides = zk.get_topic_config(&topic).await.map_err(store_error)?;
    Ok(TOPIC_CONFIGS
        .iter()
        .filter(|def| wanted(resource, def.name))
        .map(|def| topic_entry(ctx, def, &overrides, include_synonyms, version))
        .collect())
}

fn topic_entry(
    ctx: &BrokerContext,
    def: &ConfigDef,
    overrides: &BTreeMap<String, String>,
    include_synonyms: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    // Synonyms in Kafka's order of precedence: topic override, broker static, default.
    let mut synonyms: Vec<(String, String, i8)> = Vec::new();
    if let Some(value) = overrides.get(def.name) {
        synonyms.push((
            def.name.to_string(),
            value.clone(),
            SOURCE_DYNAMIC_TOPIC_CONFIG,
        ));
    }
    if let Some((broker_key, value)) = ctx.config.topic_default(def.name) {
        synonyms.push((
            broker_key.to_string(),
            value.to_string(),
            SOURCE_STATIC_BROKER_CONFIG,
        ));
    }
    let default_name = def.broker_key.unwrap_or(def.name);
    synonyms.push((
        default_name.to_string(),
        def.default.to_string(),
        SOURCE_DEFAULT_CONFIG,
    ));
    let (_, value, source) = synonyms[0].clone();
    entry(
        def.name,
        &value,
        source,
        false,
        config_type(def.ty),
        include_synonyms.then_some(&synonyms),
        version,
    )
}

fn describe_broker(
    ctx: &BrokerContext,
    resource: &DescribeConfigsResource,
    include_synonyms: bool,
    version: i16,
) -> Result<Vec<DescribeConfigsResourceResult>, Refusal> {
    let name = resource.resource_name.as_str();
    let Ok(id) = name.parse::<i32>() else {
        return Err((
            ResponseError::InvalidRequest,
            format!("Broker id must be an integer, but it is: {name}"),
        ));
    };
    if id != ctx.broker_id {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                ctx.broker_id
            ),
        ));
    }
    let config = &ctx.config;
    let log_dirs: Vec<String> = config
        .log_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let listeners: Vec<String> = config
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect();
    let effective: Vec<(&str, String, u8)> = vec![
        ("broker.id", config.broker_id.to_string(), 3),
        ("listeners", listeners.join(","), 2),
        ("log.dirs", log_dirs.join(","), 2),
        ("broker.rack", config.rack.clone().unwrap_or_default(), 2),
        (
            "zookeeper.connect",
            config.zookeeper_connect.clone().unwrap_or_default(),
            2,
        ),
        ("num.partitions", config.num_partitions.to_string(), 3),
        (
            "default.replication.factor",
            config.default_replication_factor.to_string(),
            3,
        ),
        (
            "auto.create.topics.enable",
            config.auto_create_topics_enable.to_string(),
            1,
        ),
        (
            "delete.topic.enable",
            config.delete_topic_enable.to_string(),
            1,
        ),
        (
            "file.delete.delay.ms",
            config.file_delete_delay.as_millis().to_string(),
            5,
        ),
        (
            "min.insync.replicas",
            config.min_insync_replicas.to_string(),
            3,
        ),
        (
            "socket.request.max.bytes",
            config.socket_request_max_bytes.to_string(),
            3,
        ),
        (
            "fetch.max.bytes",
            config.limits.fetch_max_bytes.to_string(),
            3,
        ),
        (
            "replica.fetch.response.max.bytes",
            config.limits.replica_fetch_response_max_bytes.to_string(),
            3,
        ),
    ];
    let mut entries: Vec<DescribeConfigsResourceResult> = effective
        .into_iter()
        .filter(|(key, _, _)| wanted(resource, key))
        .map(|(key, value, ty)| {
            let source = if config.originals.contains_key(key) {
                SOURCE_STATIC_BROKER_CONFIG
            } else {
                SOURCE_DEFAULT_CONFIG
            };
            let synonyms = vec![(key.to_string(), value.clone(), source)];
            entry(
                key,
                &value,
                source,
                true,
                ty as i8,
                include_synonyms.then_some(&synonyms),
                version,
            )
        })
        .collect();
    for def in TOPIC_CONFIGS {
        let Some(broker_key) = def.broker_key else {
            continue;
        };
        if !wanted(resource, broker_key) {
            continue;
        }
        let (value, source) = match config.topic_defaults.get(broker_key) {
            Some(value) => (value.clone(), SOURCE_STATIC_BROKER_CONFIG),
            None => (def.default.to_string(), SOURCE_DEFAULT_CONFIG),
        };
        let synonyms = vec![(broker_key.to_string(), value.clone(), source)];
        entries.push(entry(
            broker_key,
            &value,
            source,
            true,
            config_type(def.ty),
            include_synonyms.then_some(&synonyms),
            version,
        ));
    }
    Ok(entries)
}

fn entry(
    name: &str,
    value: &str,
    source: i8,
    read_only: bool,
    config_type: i8,
    synonyms: Option<&Vec<(String, String, i8)>>,
    version: i16,
) -> DescribeConfigsResourceResult {
    let synonyms = synonyms
        .map(|list| {
            list.iter()
                .map(|(n, v, s)| {
                    DescribeConfigsSynonym::default()
                        .with_name(StrBytes::from_string(n.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                        .with_source(*s)
                })
                .collect()
        })
        .unwrap_or_default();
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(Some(StrBytes::from_string(value.to_string())))
        .with_read_only(read_only)
        // v0 says `is_default`; v1+ carry the source instead (and refuse `is_default`).
        .with_is_default(version == 0 && source == SOURCE_DEFAULT_CONFIG)
        .with_config_source(source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(config_type)
        .with_documentation(None)
}

/// Whether the request asks for `key`: a null or empty key list asks for every config.
fn wanted(resource: &DescribeConfigsResource, key: &str) -> bool {
    match &resource.configuration_keys {
        Some(keys) if !keys.is_empty() => keys.iter().any(|k| k.as_str() == key),
        _ => true,
    }
}

/// Kafka's `ConfigDef.Type` codes in DescribeConfigs v3+.
fn config_type(ty: ConfigType) -> i8 {
    match ty {
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Long => 5,
        ConfigType::Double => 6,
        ConfigType::List => 7,
    }
}

pub(super) fn parse_topic(name: &StrBytes) -> Result<model::TopicName, Refusal> {
    name.as_str()
        .parse()
        .map_err(|err: model::TopicError| (ResponseError::InvalidTopicException, err.to_string()))
}
