//! FindCoordinator (v0-6): a group's coordinator is the leader of its `__consumer_offsets`
//! partition (see `crate::groups`), which is created through the controller on the first
//! lookup (COORDINATOR_NOT_AVAILABLE meanwhile, and while fewer brokers are alive than
//! `offsets.topic.replication.factor`, as Kafka). v0-3 ask for one key; v4+ for a batch
//! (`coordinator_keys`, KIP-699), answered key by key in `coordinators`.
//! A transactional id's coordinator (`key_type` 1) is the leader of its `__transaction_state`
//! partition (see `crate::txn`), created the same way under `transaction.state.log.*`.
//! `key_type` 2 (share groups, v6+) reads COORDINATOR_NOT_AVAILABLE, as in Kafka 3.9; a share
//! key below v6 is INVALID_REQUEST.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use group_coordinator::log_records::{partition_for, OFFSETS_TOPIC};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::TopicName;
use tracing::warn;

use crate::context::BrokerContext;
use crate::groups::COORDINATOR_NOT_AVAILABLE;

/// Kafka's INVALID_REQUEST error code.
const INVALID_REQUEST: i16 = 42;

/// Kafka's `CoordinatorType` ids.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// The answer for one key: the coordinator's id, host and port, or an error and its message.
type Lookup = Result<(i32, String, i32), (i16, String)>;

pub(super) fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let entry = Coordinator::default().with_key(key.clone());
                match authorize(ctx, rctx, request.key_type, key.as_str()).and_then(|()| {
                    lookup(ctx, &rctx.listener, request.key_type, key.as_str(), version)
                }) {
                    Ok((id, host, port)) => entry
                        .with_node_id(BrokerId(id))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port),
                    Err((code, message)) => entry
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(message)))
                        .with_node_id(BrokerId(-1))
                        .with_port(-1),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match authorize(ctx, rctx, request.key_type, request.key.as_str()).and_then(|()| {
        lookup(
            ctx,
            &rctx.listener,
            request.key_type,
            request.key.as_str(),
            version,
        )
    }) {
        Ok((id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

/// DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka's handleFindCoordinatorRequest.
fn authorize(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    key_type: i8,
    key: &str,
) -> Result<(), (i16, String)> {
    use security::acl::{Operation, ResourceType};
    let (resource_type, error) = match key_type {
        TRANSACTION => (
            ResourceType::TransactionalId,
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed,
        ),
        SHARE => return Ok(()),
        _ => (
            ResourceType::Group,
            kafka_protocol::error::ResponseError::GroupAuthorizationFailed,
        ),
    };
    if super::authorized(ctx, rctx, Operation::Describe, resource_type, key) {
        Ok(())
    } else {
        Err((error.code(), error.to_string()))
    }
}

/// Kafka's `getCoordinator` for one key.
fn lookup(ctx: &BrokerContext, listener: &str, key_type: i8, key: &str, version: i16) -> Lookup {
    let unavailable = |why: &str| Err((COORDINATOR_NOT_AVAILABLE, why.to_owned()));
    match key_type {
        GROUP => {}
        TRANSACTION => {
            if key.is_empty() {
                return Err((
                    INVALID_REQUEST,
                    "the transactional id must not be empty".to_owned(),
                ));
            }
            return transaction_coordinator(ctx, listener, key);
        }
        SHARE if version < 6 => {
            return Err((
                INVALID_REQUEST,
                "share group coordinators need FindCoordinator v6 or later".to_owned(),
            ))
        }
        SHARE => return unavailable("share groups are not supported by this broker"),
        other => {
            return Err((
                INVALID_REQUEST,
                format!(
                    "unknown coordinator key type {other} (0 = group, 1 = transaction, 2 = share)"
                ),
            ))
        }
    }
    if key.is_empty() {
        return Err((INVALID_REQUEST, "the group id must not be empty".to_owned()));
    }
    let snapshot = ctx.metadata_cache.snapshot();
    let Some(topic) = snapshot.topics.get(OFFSETS_TOPIC) else {
        return Err((
            COORDINATOR_NOT_AVAILABLE,
            create_offsets_topic(ctx, &snapshot),
        ));
    };
    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    let partition = partition_for(key, partitions);
    // The leader's endpoint on the listener the client came in on.
    match topic
        .partitions
        .get(&partition)
        .and_then(|p| snapshot.brokers.get(&p.leader))
        .and_then(|b| b.on_listener(listener))
    {
        Some(b) => Ok((b.id, b.host, b.port)),
        None => unavailable(&format!(
            "partition {partition} of {OFFSETS_TOPIC} has no live leader yet"
        )),
    }
}

/// The leader of the transactional id's `__transaction_state` partition (the topic created
/// through the controller on the first lookup, once `transaction.state.log.replication.factor`
/// brokers are alive).
fn transaction_coordinator(ctx: &BrokerContext, listener: &str, key: &str) -> Lookup {
    use crate::txn::TRANSACTION_STATE_TOPIC;
    let snapshot = ctx.metadata_cache.snapshot();
    let Some(topic) = snapshot.topics.get(TRANSACTION_STATE_TOPIC) else {
        let config = &ctx.config.transactions;
        let alive = snapshot.brokers.len();
        let replication_factor = config.state_log_replication_factor;
        if alive < usize::try_from(replication_factor).unwrap_or(usize::MAX) {
            let message = format!(
                "{alive} brokers are alive, fewer than transaction.state.log.replication.factor=\
                 {replication_factor} for the transaction log {TRANSACTION_STATE_TOPIC}; it is \
                 created once enough brokers are up"
            );
            warn!("{message}");
            return Err((COORDINATOR_NOT_AVAILABLE, message));
        }
        if ctx.transactions.should_create_topic(CREATE_RETRY) {
            let configs = [
                ("cleanup.policy", "compact".to_owned()),
                ("compression.type", "uncompressed".to_owned()),
                ("unclean.leader.election.enable", "false".to_owned()),
                ("min.insync.replicas", config.state_log_min_isr.to_string()),
                ("segment.bytes", config.state_log_segment_bytes.to_string()),
            ];
            super::metadata::create_in_background(
                ctx,
                vec![internal_topic(
                    TRANSACTION_STATE_TOPIC,
                    config.state_log_num_partitions,
                    replication_factor,
                    &configs,
                )],
            );
        }
        return Err((
            COORDINATOR_NOT_AVAILABLE,
            format!("the transaction log {TRANSACTION_STATE_TOPIC} is being created"),
        ));
    };
    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    let partition = partition_for(key, partitions);
    match topic
        .partitions
        .get(&partition)
        .and_then(|p| snapshot.brokers.get(&p.leader))
        .and_then(|b| b.on_listener(listener))
    {
        Some(b) => Ok((b.id, b.host, b.port)),
        None => Err((
            COORDINATOR_NOT_AVAILABLE,
            format!("partition {partition} of {TRANSACTION_STATE_TOPIC} has no live leader yet"),
        )),
    }
}

fn internal_topic(
    name: &'static str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&'static str, String)],
) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(
            configs
                .iter()
                .map(|(name, value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str(name))
                        .with_value(Some(StrBytes::from_string(value.clone())))
                })
                .collect(),
        )
}

/// How long a broker waits before asking the controller again to create the offsets topic.
const CREATE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Asks the controller to create `__consumer_offsets` (Kafka's `getCoordinator` through
/// `AutoTopicCreationManager`), unless fewer brokers are alive than its replication factor;
/// returns the message for the COORDINATOR_NOT_AVAILABLE answer.
fn create_offsets_topic(ctx: &BrokerContext, snapshot: &crate::metadata_cache::Snapshot) -> String {
    let config = &ctx.config;
    let alive = snapshot.brokers.len();
    let replication_factor = config.offsets_topic_replication_factor;
    if alive < usize::try_from(replication_factor).unwrap_or(usize::MAX) {
        let message = format!(
            "{alive} brokers are alive, fewer than offsets.topic.replication.factor={replication_factor} \
             for the offsets topic {OFFSETS_TOPIC}; it is created once enough brokers are up"
        );
        warn!("{message}");
        return message;
    }
    if ctx.groups.should_create_offsets_topic(CREATE_RETRY) {
        let configs = [
            ("cleanup.policy", "compact".to_owned()),
            ("compression.type", "producer".to_owned()),
            (
                "segment.bytes",
                config.offsets_topic_segment_bytes.to_string(),
            ),
        ];
        let topic = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(OFFSETS_TOPIC)))
            .with_num_partitions(config.offsets_topic_num_partitions)
            .with_replication_factor(replication_factor)
            .with_configs(
                configs
                    .into_iter()
                    .map(|(name, value)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_static_str(name))
                            .with_value(Some(StrBytes::from_string(value)))
                    })
                    .collect(),
            );
        super::metadata::create_in_background(ctx, vec![topic]);
    }
    format!("the offsets topic {OFFSETS_TOPIC} is being created")
}
