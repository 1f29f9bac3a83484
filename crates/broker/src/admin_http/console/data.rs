//! What the console pages show, gathered by Kafka requests through
//! [`Cluster::call`](super::super::kafka::Cluster::call) (the handlers every Kafka client goes
//! through), the way the CLI tools gather it: Metadata for brokers, topics and placement,
//! DescribeLogDirs for sizes, DescribeConfigs for configs, ListOffsets for offsets.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeLogDirsRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;

use super::super::kafka::{CallError, Caller, Cluster};
use super::super::views::Error;
use model::BrokerId;

/// How long one Kafka request of a page may take (a broker that went away must not hang
/// the page).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Kafka's `ConfigResource.Type.TOPIC`.
pub(crate) const RESOURCE_TOPIC: i8 = 2;

/// A live broker, as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broker {
    pub id: BrokerId,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// One partition's placement and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Partition {
    pub index: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub offline: Vec<BrokerId>,
    pub error_code: i16,
    /// Replicas being added / removed by a reassignment (ListPartitionReassignments).
    pub adding: Vec<BrokerId>,
    pub removing: Vec<BrokerId>,
}

impl Partition {
    pub(crate) fn under_replicated(&self) -> bool {
        self.isr.len() < self.replicas.len()
    }
    pub(crate) fn is_offline(&self) -> bool {
        self.leader < 0
    }
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topic {
    pub name: String,
    pub id: uuid::Uuid,
    pub internal: bool,
    pub error_code: i16,
    /// By index.
    pub partitions: Vec<Partition>,
}

impl Topic {
    pub(crate) fn replication_factor(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.replicas.len())
            .max()
            .unwrap_or(0)
    }
}

/// The cluster as one Metadata response shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metadata {
    pub cluster_id: String,
    pub controller_id: BrokerId,
    /// By id.
    pub brokers: Vec<Broker>,
    /// By name.
    pub topics: Vec<Topic>,
}

impl Metadata {
    pub(crate) fn topic(&self, name: &str) -> Option<&Topic> {
        self.topics.iter().find(|t| t.name == name)
    }
}

/// Runs `call` with [`CALL_TIMEOUT`].
pub(crate) async fn bounded<T>(
    what: BrokerId,
    call: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or(Err(CallError::BrokerNotAvailable(what)))
}

/// Marks the replicas `topic`'s ongoing reassignments add and remove (asked of the
/// controller). Without an answer the partitions stay unmarked: the matrix is still right
/// about leaders and the ISR.
pub(crate) async fn mark_reassignments(
    cluster: &Cluster,
    caller: &Caller,
    topic: &str,
    partitions: &mut [Partition],
) {
    use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    use kafka_protocol::messages::ListPartitionReassignmentsRequest;
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(CALL_TIMEOUT.as_millis() as i32)
        .with_topics(Some(vec![ListPartitionReassignmentsTopics::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                topic.to_owned(),
            )))
            .with_partition_indexes(
                partitions.iter().map(|p| p.index).collect(),
            )]));
    let controller = cluster.controller_id();
    let Ok(Ok(response)) =
        tokio::time::timeout(CALL_TIMEOUT, cluster.call_controller(caller, request)).await
    else {
        return;
    };
    if response.error_code != 0 {
        tracing::debug!(
            controller,
            error_code = response.error_code,
            "console: no reassignment list"
        );
        return;
    }
    for t in response
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
    {
        for ongoing in &t.partitions {
            if let Some(p) = partitions
                .iter_mut()
                .find(|p| p.index == ongoing.partition_index)
            {
                p.adding = ongoing.adding_replicas.iter().map(|b| b.0).collect();
                p.removing = ongoing.removing_replicas.iter().map(|b| b.0).collect();
            }
        }
    }
}

/// Metadata of every topic (or of `topics`), from a broker of this process.
pub(crate) async fn metadata(
    cluster: &Cluster,
    caller: &Caller,
    topics: Option<&[&str]>,
) -> Result<Metadata, Error> {
    let broker = cluster.any()?.broker_id;
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(kafka_protocol::messages::TopicName(
                            StrBytes::from_string((*n).to_owned()),
                        )))
                })
                .collect()
        }));
    let response = bounded(broker, cluster.call(caller, broker, request)).await?;
    let mut brokers: Vec<Broker> = response
        .brokers
        .iter()
        .map(|b| Broker {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let mut topics: Vec<Topic> = response
        .topics
        .iter()
        .map(|t| {
            let mut partitions: Vec<Partition> = t
                .partitions
                .iter()
                .map(|p| Partition {
                    index: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    offline: p.offline_replicas.iter().map(|b| b.0).collect(),
                    error_code: p.error_code,
                    adding: Vec::new(),
                    removing: Vec::new(),
                })
                .collect();
            partitions.sort_by_key(|p| p.index);
            Topic {
                name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                id: t.topic_id,
                internal: t.is_internal,
                error_code: t.error_code,
                partitions,
            }
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Metadata {
        cluster_id: response
            .cluster_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        controller_id: response.controller_id.0,
        brokers,
        topics,
    })
}

/// One broker's log directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogDirs {
    /// Per directory: path, error code, total and usable bytes of its file system.
    pub dirs: Vec<(String, i16, i64, i64)>,
    /// Size of each replica it hosts.
    pub sizes: BTreeMap<(String, i32), i64>,
}

impl LogDirs {
    pub(crate) fn used_bytes(&self) -> i64 {
        self.sizes.values().sum()
    }
}

/// DescribeLogDirs of every broker in `brokers` (those that do not answer are left out).
pub(crate) async fn log_dirs(
    cluster: &Cluster,
    caller: &Caller,
    brokers: &[Broker],
) -> BTreeMap<BrokerId, LogDirs> {
    let mut out = BTreeMap::new();
    for broker in brokers {
        let request = DescribeLogDirsRequest::default().with_topics(None);
        let Ok(response) = bounded(broker.id, cluster.call(caller, broker.id, request)).await
        else {
            continue;
        };
        let mut dirs = LogDirs::default();
        for result in response.results {
            dirs.dirs.push((
                result.log_dir.to_string(),
                result.error_code,
                result.total_bytes,
                result.usable_bytes,
            ));
            for topic in result.topics {
                for p in topic.partitions {
                    if !p.is_future_key {
                        dirs.sizes.insert(
                            (topic.name.0.to_string(), p.partition_index),
                            p.partition_size,
                        );
                    }
                }
            }
        }
        out.insert(broker.id, dirs);
    }
    out
}

/// One config of a topic as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    pub name: String,
    pub value: Option<String>,
    /// `topic`, `broker`, `default` (Kafka's `ConfigSource`, shortened).
    pub source: &'static str,
    pub sensitive: bool,
}

/// Kafka's `ConfigSource` ids, as the console names them.
pub(crate) fn source_name(source: i8) -> &'static str {
    match source {
        1 => "topic",
        2 | 3 | 4 | 7 => "broker",
        5 => "default",
        _ => "unknown",
    }
}

/// The configs of each of `topics` (from the controller, as `kafka-configs --describe`).
pub(crate) async fn topic_configs(
    cluster: &Cluster,
    caller: &Caller,
    topics: &[&str],
) -> Result<BTreeMap<String, Result<Vec<Config>, Error>>, Error> {
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let broker = cluster.any()?.broker_id;
    let request = DescribeConfigsRequest::default().with_resources(
        topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(StrBytes::from_string((*t).to_owned()))
                    .with_configuration_keys(None)
            })
            .collect(),
    );
    let response = bounded(broker, cluster.call(caller, broker, request)).await?;
    Ok(response
        .results
        .into_iter()
        .map(|r| {
            let configs = if r.error_code != 0 {
                Err(Error::Kafka(
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                ))
            } else {
                let mut configs: Vec<Config> = r
                    .configs
                    .into_iter()
                    .map(|c| Config {
                        name: c.name.to_string(),
                        value: c.value.map(|v| v.to_string()),
                        source: source_name(c.config_source),
                        sensitive: c.is_sensitive,
                    })
                    .collect();
                configs.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(configs)
            };
            (r.resource_name.to_string(), configs)
        })
        .collect())
}
