//! Metadata: brokers, controller, cluster id and topics from the metadata cache. Unknown
//! topics are auto-created through the controller when `auto.create.topics.enable` is set and
//! the request allows it; until they come online they read LEADER_NOT_AVAILABLE, as in Kafka.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::metadata_cache::{LiveBroker, Snapshot, TopicInfo};

/// How long a Metadata request waits for the controller's first UpdateMetadata when it
/// reaches a broker that has just started (afterwards it never waits).
const METADATA_WAIT_AT_START: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut snapshot = ctx.metadata_cache.snapshot();
    if snapshot.controller_id == -1
        && ctx
            .metadata_cache
            .wait_initialized(METADATA_WAIT_AT_START)
            .await
    {
        // Just started: an answer without a controller sends admin clients (librdkafka's)
        // waiting for their next periodic refresh, minutes away. The controller's first
        // UpdateMetadata follows the broker's registration within moments.
        snapshot = ctx.metadata_cache.snapshot();
    }
    // The endpoints of the listener the client came in on (Kafka's getAliveBrokerNodes).
    let brokers = live_brokers(ctx, &snapshot, &rctx.listener);
    let all_topics = match &request.topics {
        None => true,
        Some(topics) => version == 0 && topics.is_empty(),
    };
    let allow_auto_create = version < 4 || request.allow_auto_topic_creation;
    // Kafka's handleTopicMetadataRequest: DESCRIBE on each topic (the full list leaves the
    // others out; a named one answers TOPIC_AUTHORIZATION_FAILED), and auto-creation needs
    // CREATE on the cluster or on the topic.
    let describable = |name: &str| {
        super::authorized(
            ctx,
            rctx,
            security::acl::Operation::Describe,
            security::acl::ResourceType::Topic,
            name,
        )
    };
    let creatable = |name: &str| {
        super::authorized_cluster(ctx, rctx, security::acl::Operation::Create)
            || super::authorized(
                ctx,
                rctx,
                security::acl::Operation::Create,
                security::acl::ResourceType::Topic,
                name,
            )
    };
    let mut topics = Vec::new();
    let mut to_create = Vec::new();
    if all_topics {
        for (name, info) in &snapshot.topics {
            if describable(name) {
                topics.push(topic_metadata(name, info, &brokers, version));
            }
        }
    } else {
        for requested in request.topics.iter().flatten() {
            let name = match &requested.name {
                Some(name) => name.0.to_string(),
                None => match snapshot.topic_name(requested.topic_id) {
                    Some(name) => name.to_owned(),
                    None => {
                        topics.push(error_topic(
                            None,
                            requested.topic_id,
                            ResponseError::UnknownTopicId,
                        ));
                        continue;
                    }
                },
            };
            if !describable(&name) {
                let by_name = requested.name.is_some();
                topics.push(error_topic(
                    by_name.then_some(name),
                    if by_name {
                        Uuid::nil()
                    } else {
                        requested.topic_id
                    },
                    ResponseError::TopicAuthorizationFailed,
                ));
                continue;
            }
            if let Some(info) = snapshot.topics.get(&name) {
                topics.push(topic_metadata(&name, info, &brokers, version));
                continue;
            }
            let error = match name.parse::<model::TopicName>() {
                Err(_) => ResponseError::InvalidTopicException,
                Ok(topic)
                    if allow_auto_create
                        && ctx.config.auto_create_topics_enable
                        && !topic.is_internal()
                        && !creatable(&name) =>
                {
                    ResponseError::TopicAuthorizationFailed
                }
                Ok(topic)
                    if allow_auto_create
                        && ctx.config.auto_create_topics_enable
                        && !topic.is_internal() =>
                {
                    to_create.push(topic);
                    ResponseError::LeaderNotAvailable
                }
                Ok(_) => ResponseError::UnknownTopicOrPartition,
            };
            topics.push(error_topic(Some(name), Uuid::nil(), error));
        }
    }
    if !to_create.is_empty() {
        auto_create_topics(ctx, to_create);
    }
    // KIP-430 (v8+): what the principal may do on each topic and (v8-10) on the cluster.
    if version >= 8 && request.include_topic_authorized_operations {
        for topic in topics.iter_mut().filter(|t| t.error_code == 0) {
            if let Some(name) = &topic.name {
                topic.topic_authorized_operations = super::authorized_operations(
                    ctx,
                    rctx,
                    security::acl::ResourceType::Topic,
                    &name.0,
                );
            }
        }
    }
    let cluster_authorized_operations =
        if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
            super::authorized_operations(
                ctx,
                rctx,
                security::acl::ResourceType::Cluster,
                security::acl::CLUSTER_NAME,
            )
        } else {
            i32::MIN
        };
    MetadataResponse::default()
        .with_cluster_authorized_operations(cluster_authorized_operations)
        .with_brokers(
            brokers
                .into_iter()
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.id))
                        .with_host(StrBytes::from_string(b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.map(StrBytes::from_string))
                })
                .collect(),
        )
        .with_cluster_id(Some(StrBytes::from_string(ctx.cluster_id.clone())))
        .with_controller_id(BrokerId(snapshot.controller_id))
        .with_topics(topics)
}

/// The live brokers of the cache with their endpoints on `listener` (brokers without that
/// listener are left out, as Kafka does). Before the controller's first UpdateMetadata the
/// cache is empty; this broker then lists itself so that bootstrapping clients have somewhere
/// to go.
pub(crate) fn live_brokers(
    ctx: &BrokerContext,
    snapshot: &Snapshot,
    listener: &str,
) -> Vec<LiveBroker> {
    if snapshot.brokers.is_empty() {
        return ctx
            .advertised_on(listener)
            .map(|(host, port)| LiveBroker {
                id: ctx.broker_id,
                host: host.clone(),
                port: i32::from(port),
                rack: ctx.config.rack.clone(),
                endpoints: [(listener.to_owned(), (host, i32::from(port)))].into(),
            })
            .into_iter()
            .collect();
    }
    snapshot
        .brokers
        .values()
        .filter_map(|b| b.on_listener(listener))
        .collect()
}

/// Asks the controller to create `topics` with the broker defaults, in the background (Kafka
/// 2.8's auto-topic creation forwarded to the controller). Failures are logged; the client
/// keeps seeing LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION and retries.
fn auto_create_topics(ctx: &BrokerContext, topics: Vec<model::TopicName>) {
    create_in_background(
        ctx,
        topics
            .iter()
            .map(|t| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_num_partitions(ctx.config.num_partitions)
                    .with_replication_factor(ctx.config.default_replication_factor)
            })
            .collect(),
    );
}

/// Asks the controller to create `topics` in the background: this broker's own controller
/// when it is the active one, else forwarded to the controller of the metadata cache (Kafka's
/// `AutoTopicCreationManager`). Auto-created topics and `__consumer_offsets` come this way.
pub(crate) fn create_in_background(ctx: &BrokerContext, topics: Vec<CreatableTopic>) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(i32::try_from(ctx.config.request_timeout.as_millis()).unwrap_or(i32::MAX))
        .with_topics(topics.clone());
    let controller = ctx.controller();
    let snapshot = ctx.metadata_cache.snapshot();
    let controller_addr = snapshot
        .brokers
        .get(&snapshot.controller_id)
        .and_then(|b| b.on_listener(ctx.config.inter_broker_listener_name()))
        .map(|b| format!("{}:{}", b.host, b.port));
    let options = client::ConnectionOptions {
        client_id: format!("gregor-broker-{}", ctx.broker_id),
        ..client::ConnectionOptions::default()
    }
    .secured(&ctx.config.inter_broker_security);
    let timeout = ctx.config.request_timeout;
    tokio::spawn(async move {
        let names: Vec<String> = topics.iter().map(|t| t.name.0.to_string()).collect();
        info!(topics = ?names, "auto-creating topics");
        let response = if controller.is_active() {
            Some(controller.create_topics(request, 5).await)
        } else if let Some(addr) = controller_addr {
            forward(&addr, options, request, timeout).await
        } else {
            warn!(topics = ?names, "cannot auto-create topics: no controller known yet");
            None
        };
        for result in response.into_iter().flat_map(|r| r.topics) {
            if result.error_code != 0
                && result.error_code != ResponseError::TopicAlreadyExists.code()
            {
                warn!(topic = %result.name.0, error_code = result.error_code,
                    message = result.error_message.as_deref().unwrap_or(""), "auto-creation refused");
            }
        }
    });
}

async fn forward(
    addr: &str,
    options: client::ConnectionOptions,
    request: CreateTopicsRequest,
    timeout: Duration,
) -> Option<kafka_protocol::messages::CreateTopicsResponse> {
    let attempt = async {
        let mut connection = client::Connection::connect_with(addr, options).await?;
        connection.send(request).await
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(response)) => Some(response),
        Ok(Err(err)) if err.is_authentication() => {
            warn!(%addr, error = %err, "forwarding auto-creation to the controller failed authentication");
            None
        }
        Ok(Err(err)) => {
            debug!(%addr, error = %err, "forwarding auto-creation to the controller failed");
            None
        }
        Err(_) => {
            debug!(%addr, "forwarding auto-creation to the controller timed out");
            None
        }
    }
}

fn topic_metadata(
    name: &str,
    info: &TopicInfo,
    brokers: &[LiveBroker],
    version: i16,
) -> MetadataResponseTopic {
    let partitions = info
        .partitions
        .iter()
        .map(|(&index, p)| {
            let leader_alive = brokers.iter().any(|b| b.id == p.leader);
            let (error, leader) = if leader_alive {
                (0, p.leader)
            } else {
                (ResponseError::LeaderNotAvailable.code(), -1)
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(index)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(if version >= 7 { p.leader_epoch } else { -1 })
                .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                .with_offline_replicas(p.offline_replicas.iter().copied().map(BrokerId).collect())
        })
        .collect();
    let is_internal = name
        .parse::<model::TopicName>()
        .is_ok_and(|t| t.is_internal());
    MetadataResponseTopic::default()
        .with_error_code(0)
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_topic_id(info.topic_id)
        .with_is_internal(is_internal)
        .with_partitions(partitions)
}

fn error_topic(
    name: Option<String>,
    topic_id: Uuid,
    error: ResponseError,
) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
        .with_topic_id(topic_id)
}
