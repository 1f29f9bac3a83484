//! The admin client: bootstrap, Metadata, and topic admin requests routed to the controller.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions as ElectLeadersTopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeConfigsRequest, ElectLeadersRequest,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::command_config::CommandConfig;
use crate::connection::{Connection, ConnectionOptions};
use crate::error::ClientError;

/// Kafka's `NOT_CONTROLLER` error code.
const NOT_CONTROLLER: i16 = 41;
/// DescribeConfigs `config_source` for a value that is nobody's override (`DEFAULT_CONFIG`).
const DEFAULT_CONFIG_SOURCE: i8 = 5;

/// Settings for an [`AdminClient`].
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// `host:port[,host:port...]`, tried in order until one answers.
    pub bootstrap_servers: String,
    /// Per-connection settings (client id and timeouts).
    pub connection: ConnectionOptions,
    /// How many times a request refused with `NOT_CONTROLLER` (or sent while no controller is
    /// known) is retried after refreshing metadata.
    pub controller_retries: usize,
    /// The pause before each such retry.
    pub retry_backoff: Duration,
}

impl AdminOptions {
    /// Defaults (Kafka's admin client timeouts, client id `gregor-admin`) for `bootstrap_servers`.
    pub fn new(bootstrap_servers: &str) -> AdminOptions {
        AdminOptions {
            bootstrap_servers: bootstrap_servers.to_string(),
            connection: ConnectionOptions {
                client_id: "gregor-admin".to_string(),
                ..ConnectionOptions::default()
            },
            controller_retries: 5,
            retry_backoff: Duration::from_millis(100),
        }
    }

    /// Applies the settings of a `--command-config` file on top of these options.
    pub fn apply(&mut self, config: &CommandConfig) {
        if let Some(client_id) = &config.client_id {
            self.connection.client_id = client_id.clone();
        }
        if let Some(timeout) = config.request_timeout {
            self.connection.request_timeout = timeout;
        }
        if let Some(timeout) = config.connect_timeout {
            self.connection.connect_timeout = timeout;
        }
        if let Some(retries) = config.retries {
            self.controller_retries = retries;
        }
        if let Some(backoff) = config.retry_backoff {
            self.retry_backoff = backoff;
        }
        if let Some(sasl) = &config.sasl {
            self.connection.sasl = Some(sasl.clone());
        }
        if let Some(tls) = &config.tls {
            self.connection.tls = Some(tls.clone());
        }
    }
}

/// A topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// The topic name.
    pub name: String,
    /// The topic id (all zeros when the broker's Metadata version has none).
    pub topic_id: [u8; 16],
    /// Whether the broker flags it as internal (`__consumer_offsets`, ...).
    pub is_internal: bool,
    /// Partitions in ascending order.
    pub partitions: Vec<PartitionInfo>,
}

/// One partition as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition index.
    pub partition: i32,
    /// The leader, `None` when there is none (Metadata's `-1`).
    pub leader: Option<i32>,
    /// The assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
}

/// A topic name with its id and internal flag, as listing returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicListing {
    /// The topic name.
    pub name: String,
    /// The topic id (all zero from brokers older than Metadata v10).
    pub topic_id: [u8; 16],
    /// Whether the broker flags it as internal.
    pub is_internal: bool,
}

/// One log directory of one broker, as DescribeLogDirs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    /// The directory's absolute path.
    pub path: String,
    /// The directory's error code (0: none; KAFKA_STORAGE_ERROR when offline).
    pub error_code: i16,
    /// Its replicas: (topic, partition) -> replica.
    pub replicas: BTreeMap<(String, i32), ReplicaInfo>,
    /// The file system's size in bytes (DescribeLogDirs v4+), if known.
    pub total_bytes: Option<i64>,
    /// The bytes still free for the broker (v4+), if known.
    pub usable_bytes: Option<i64>,
}

/// One replica in a log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// The log's size in bytes.
    pub size: i64,
    /// How far its end is behind the high watermark (-1: not open).
    pub offset_lag: i64,
    /// Whether this is the future log of an intra-broker move.
    pub is_future: bool,
}

/// A topic to create. `None` counts mean "the broker's default" (sent as -1, CreateTopics v4+).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic name, sent as given (the broker validates it).
    pub name: String,
    /// Partition count.
    pub partitions: Option<i32>,
    /// Replication factor.
    pub replication_factor: Option<i16>,
    /// Explicit assignment: partition → replicas. Excludes the two counts.
    pub assignment: Option<BTreeMap<i32, Vec<i32>>>,
    /// Topic config overrides, in the order given.
    pub configs: Vec<(String, String)>,
}

/// A partition increase for one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPartitions {
    /// The topic.
    pub topic: String,
    /// The new total partition count.
    pub total_count: i32,
    /// Replicas for each new partition, in partition order; `None` lets the controller place them.
    pub assignment: Option<Vec<Vec<i32>>>,
}

/// The kinds of config resource this client describes and alters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigResourceKind {
    /// A topic (resource type 2).
    Topic,
    /// A broker (resource type 4); the empty name is the cluster-wide default.
    Broker,
    /// A broker's loggers (resource type 8).
    BrokerLogger,
}

impl ConfigResourceKind {
    fn code(self) -> i8 {
        match self {
            ConfigResourceKind::Topic => 2,
            ConfigResourceKind::Broker => 4,
            ConfigResourceKind::BrokerLogger => 8,
        }
    }
}

/// Where a config value comes from: Kafka's `ConfigEntry.ConfigSource`, by its wire code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// 0.
    Unknown,
    /// 1: a topic's override.
    DynamicTopicConfig,
    /// 2: this broker's dynamic config (`/config/brokers/<id>`).
    DynamicBrokerConfig,
    /// 3: the cluster-wide dynamic default (`/config/brokers/<default>`).
    DynamicDefaultBrokerConfig,
    /// 4: server.properties.
    StaticBrokerConfig,
    /// 5: the built-in default.
    DefaultConfig,
    /// 6: a broker logger's level.
    DynamicBrokerLoggerConfig,
}

impl ConfigSource {
    /// The source of a wire code (unknown codes are `Unknown`).
    pub fn from_code(code: i8) -> ConfigSource {
        match code {
            1 => ConfigSource::DynamicTopicConfig,
            2 => ConfigSource::DynamicBrokerConfig,
            3 => ConfigSource::DynamicDefaultBrokerConfig,
            4 => ConfigSource::StaticBrokerConfig,
            5 => ConfigSource::DefaultConfig,
            6 => ConfigSource::DynamicBrokerLoggerConfig,
            _ => ConfigSource::Unknown,
        }
    }

    /// Kafka's enum constant name, as kafka-configs.sh prints it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Unknown => "UNKNOWN",
            ConfigSource::DynamicTopicConfig => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBrokerConfig => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBrokerConfig => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBrokerConfig => "STATIC_BROKER_CONFIG",
            ConfigSource::DefaultConfig => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLoggerConfig => "DYNAMIC_BROKER_LOGGER_CONFIG",
        }
    }
}

/// One synonym of a config entry (DescribeConfigs with `include_synonyms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    /// The key at that level (a broker key may differ from the topic key).
    pub name: String,
    /// The value (`None` for sensitive values).
    pub value: Option<String>,
    /// The level.
    pub source: ConfigSource,
}

/// One config entry from DescribeConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The key.
    pub name: String,
    /// The value (`None` for sensitive values).
    pub value: Option<String>,
    /// Whether this is the default (nobody overrode it), as Kafka's `ConfigEntry.isDefault`.
    pub is_default: bool,
    /// Whether the value is sensitive.
    pub is_sensitive: bool,
    /// Whether the value cannot be changed.
    pub read_only: bool,
    /// Where the value comes from (v1+; v0 answers only `is_default`).
    pub source: ConfigSource,
    /// The synonyms in order of precedence, when asked for.
    pub synonyms: Vec<ConfigSynonym>,
}

/// An IncrementalAlterConfigs operation on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Set the key to the value.
    Set(String, String),
    /// Remove the override, reverting to the default.
    Delete(String),
}

/// A partition being reassigned, as ListPartitionReassignments reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Every replica (the target's first).
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
}

/// The per-item outcome of a batched admin request.
pub type ItemResults<T> = Vec<(String, Result<T, ClientError>)>;

/// A client quota entity (KIP-546): (entity type `user` / `client-id` / `ip`, its name or
/// `None` for the default entity).
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// How a DescribeClientQuotas filter component matches an entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name exactly.
    Exact(String),
    /// The default entity of the type.
    Default,
    /// Any entity of the type (named or default).
    Any,
}

/// Talks to a cluster: bootstraps from a server list, keeps one [`Connection`] per broker,
/// sends topic admin requests to the controller.
#[derive(Debug)]
pub struct AdminClient {
    options: AdminOptions,
    /// Broker id → `host:port`, from the last Metadata.
    brokers: BTreeMap<i32, String>,
    /// Broker id → `broker.rack` (if set), from the last Metadata.
    racks: BTreeMap<i32, Option<String>>,
    controller_id: Option<i32>,
    /// Open connections by `host:port`.
    connections: HashMap<String, Connection>,
    /// The address the last Metadata came from, used for requests any broker can answer.
    any_broker: String,
}

impl AdminClient {
    /// Connects to the first reachable bootstrap server and reads the cluster's metadata.
    pub async fn connect(options: AdminOptions) -> Result<AdminClient, ClientError> {
        let servers: Vec<String> = options
            .bootstrap_servers
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            return Err(ClientError::Config(
                "No resolvable bootstrap urls given in bootstrap.servers".to_string(),
            ));
        }
        let mut last_error = None;
        for server in &servers {
            match Connection::connect_with(server, options.connection.clone()).await {
                Ok(connection) => {
                    let mut client = AdminClient {
                        options,
                        brokers: BTreeMap::new(),
                        racks: BTreeMap::new(),
                        controller_id: None,
                        connections: HashMap::from([(server.clone(), connection)]),
                        any_broker: server.clone(),
                    };
                    client.refresh().await?;
                    return Ok(client);
                }
                Err(err) => {
                    tracing::debug!(%server, %err, "bootstrap server unreachable");
                    last_error = Some(err);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::Config("no bootstrap servers".to_string())))
    }

    /// The live brokers from the last Metadata, by id.
    pub fn brokers(&self) -> &BTreeMap<i32, String> {
        &self.brokers
    }

    /// Each live broker's rack (`None` without `broker.rack`), from the last Metadata.
    pub fn racks(&self) -> &BTreeMap<i32, Option<String>> {
        &self.racks
    }

    /// The controller's id from the last Metadata.
    pub fn controller_id(&self) -> Option<i32> {
        self.controller_id
    }

    /// Every topic's name and internal flag, sorted by name.
    pub async fn list_topics(&mut self) -> Result<Vec<TopicListing>, ClientError> {
        let response = self.metadata(None).await?;
        let mut topics: Vec<TopicListing> = response
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                t.name.as_ref().map(|name| TopicListing {
                    name: name.0.to_string(),
                    topic_id: *t.topic_id.as_bytes(),
                    is_internal: t.is_internal,
                })
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// Metadata for `topics`, in the order asked. A topic the broker reports an error for
    /// (e.g. `UNKNOWN_TOPIC_OR_PARTITION`) makes the whole call fail, as Kafka's
    /// `describeTopics().all()` does.
    pub async fn describe_topics(
        &mut self,
        topics: &[String],
    ) -> Result<Vec<TopicMetadata>, ClientError> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let response = self.metadata(Some(topics)).await?;
        let mut by_name: HashMap<String, TopicMetadata> = HashMap::new();
        for topic in &response.topics {
            let Some(name) = &topic.name else { continue };
            if topic.error_code != 0 {
                return Err(ClientError::server(topic.error_code, None));
            }
            let mut partitions: Vec<PartitionInfo> = topic
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            by_name.insert(
                name.0.to_string(),
                TopicMetadata {
                    name: name.0.to_string(),
                    topic_id: *topic.topic_id.as_bytes(),
                    is_internal: topic.is_internal,
                    partitions,
                },
            );
        }
        topics
            .iter()
            .map(|name| {
                by_name
                    .remove(name)
                    .ok_or_else(|| ClientError::server(3, None))
            })
            .collect()
    }

    /// Metadata for the topics with these ids, in the order asked (Kafka's
    /// `describeTopics(TopicCollection.ofTopicIds(...))`): Metadata v12, which names topics by
    /// id. An unknown id fails the call with UNKNOWN_TOPIC_ID.
    pub async fn describe_topics_by_id(
        &mut self,
        ids: &[[u8; 16]],
    ) -> Result<Vec<TopicMetadata>, ClientError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let addr = self.any_broker.clone();
        let connection = self.connection(&addr).await?;
        let version = connection.negotiated_version::<MetadataRequest>()?;
        if version < 12 {
            return Err(ClientError::UnsupportedVersion {
                api: kafka_protocol::messages::ApiKey::Metadata,
                client: "12 (topics by id)".to_owned(),
                broker: connection.broker_versions(kafka_protocol::messages::ApiKey::Metadata),
            });
        }
        let request = MetadataRequest::default()
            .with_topics(Some(
                ids.iter()
                    .map(|id| {
                        MetadataRequestTopic::default()
                            .with_name(None)
                            .with_topic_id(uuid::Uuid::from_bytes(*id))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let response = connection.send_version(request, version).await;
        let response = self.forget_if_broken(&addr, response)?;
        let mut by_id: HashMap<[u8; 16], TopicMetadata> = HashMap::new();
        for topic in &response.topics {
            if topic.error_code != 0 {
                return Err(ClientError::server(topic.error_code, None));
            }
            let Some(name) = &topic.name else { continue };
            let mut partitions: Vec<PartitionInfo> = topic
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            by_id.insert(
                *topic.topic_id.as_bytes(),
                TopicMetadata {
                    name: name.0.to_string(),
                    topic_id: *topic.topic_id.as_bytes(),
                    is_internal: topic.is_internal,
                    partitions,
                },
            );
        }
        ids.iter()
            .map(|id| {
                by_id
                    .remove(id)
                    .ok_or_else(|| ClientError::server(100, None))
            })
            .collect()
    }

    /// The log directories of each broker in `brokers` (Kafka's `describeLogDirs`): one
    /// DescribeLogDirs for every partition, sent to each broker itself. Brokers missing
    /// from the cluster metadata fail the call.
    pub async fn describe_log_dirs(
        &mut self,
        brokers: &[i32],
    ) -> Result<BTreeMap<i32, Vec<LogDirDescription>>, ClientError> {
        let mut out = BTreeMap::new();
        for &id in brokers {
            let Some(addr) = self.brokers.get(&id).cloned() else {
                return Err(ClientError::Protocol {
                    addr: self.any_broker.clone(),
                    message: format!("broker {id} is not in the cluster metadata"),
                });
            };
            let connection = self.connection(&addr).await?;
            let response = connection
                .send(kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(None))
                .await;
            let response = self.forget_if_broken(&addr, response)?;
            if response.error_code != 0 {
                return Err(ClientError::server(response.error_code, None));
            }
            let dirs = response
                .results
                .iter()
                .map(|dir| LogDirDescription {
                    path: dir.log_dir.to_string(),
                    error_code: dir.error_code,
                    replicas: dir
                        .topics
                        .iter()
                        .flat_map(|t| {
                            t.partitions.iter().map(move |p| {
                                (
                                    (t.name.0.to_string(), p.partition_index),
                                    ReplicaInfo {
                                        size: p.partition_size,
                                        offset_lag: p.offset_lag,
                                        is_future: p.is_future_key,
                                    },
                                )
                            })
                        })
                        .collect(),
                    total_bytes: (dir.total_bytes >= 0).then_some(dir.total_bytes),
                    usable_bytes: (dir.usable_bytes >= 0).then_some(dir.usable_bytes),
                })
                .collect();
            out.insert(id, dirs);
        }
        Ok(out)
    }

    /// Creates topics on the controller. Per-topic results, in the order given.
    pub async fn create_topics(
        &mut self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<ItemResults<()>, ClientError> {
        let timeout_ms = self.timeout_ms();
        let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
        self.on_controller(
            names,
            |version, pending| {
                let wanted: Vec<&NewTopic> = topics
                    .iter()
                    .filter(|t| pending.contains(&t.name))
                    .collect();
                let mut creatable = Vec::with_capacity(wanted.len());
                for topic in wanted {
                    creatable.push(creatable_topic(topic, version)?);
                }
                Ok(CreateTopicsRequest::default()
                    .with_topics(creatable)
                    .with_timeout_ms(timeout_ms)
                    .with_validate_only(validate_only))
            },
            |response| {
                response
                    .topics
                    .into_iter()
                    .map(|t| {
                        (
                            t.name.0.to_string(),
                            t.error_code,
                            t.error_message.map(|m| m.to_string()),
                        )
                    })
                    .collect()
            },
        )
        .await
    }

    /// Raises partition counts on the controller. Per-topic results, in the order given.
    pub async fn create_partitions(
        &mut self,
        increases: &[NewPartitions],
        validate_only: bool,
    ) -> Result<ItemResults<()>, ClientError> {
        let timeout_ms = self.timeout_ms();
        let names: Vec<String> = increases.iter().map(|p| p.topic.clone()).collect();
        self.on_controller(
            names,
            |_version, pending| {
                let topics = increases
                    .iter()
                    .filter(|p| pending.contains(&p.topic))
                    .map(|p| {
                        CreatePartitionsTopic::default()
                            .with_name(topic_name(&p.topic))
                            .with_count(p.total_count)
                            .with_assignments(p.assignment.as_ref().map(|assignment| {
                                assignment
                                    .iter()
                                    .map(|replicas| {
                                        CreatePartitionsAssignment::default().with_broker_ids(
                                            replicas.iter().map(|b| BrokerId(*b)).collect(),
                                        )
                                    })
                                    .collect()
                            }))
                    })
                    .collect();
                Ok(CreatePartitionsRequest::default()
                    .with_topics(topics)
                    .with_timeout_ms(timeout_ms)
                    .with_validate_only(validate_only))
            },
            |response| {
                response
                    .results
                    .into_iter()
                    .map(|r| {
                        (
                            r.name.0.to_string(),
                            r.error_code,
                            r.error_message.map(|m| m.to_string()),
                        )
                    })
                    .collect()
            },
        )
        .await
    }

    /// Deletes topics on the controller. Per-topic results, in the order given.
    pub async fn delete_topics(
        &mut self,
        topics: &[String],
    ) -> Result<ItemResults<()>, ClientError> {
        let timeout_ms = self.timeout_ms();
        self.on_controller(
            topics.to_vec(),
            |version, pending| {
                let request = DeleteTopicsRequest::default().with_timeout_ms(timeout_ms);
                // v6 names topics in `topics` (name or id); earlier versions in `topic_names`.
                Ok(if version >= 6 {
                    request.with_topics(
                        pending
                            .iter()
                            .map(|name| {
                                DeleteTopicState::default().with_name(Some(topic_name(name)))
                            })
                            .collect(),
                    )
                } else {
                    request.with_topic_names(pending.iter().map(|name| topic_name(name)).collect())
                })
            },
            |response| {
                response
                    .responses
                    .into_iter()
                    .filter_map(|r| {
                        let name = r.name?.0.to_string();
                        Some((name, r.error_code, r.error_message.map(|m| m.to_string())))
                    })
                    .collect()
            },
        )
        .await
    }

    /// Describes the configs of resources of one kind (any broker answers topic configs).
    pub async fn describe_configs(
        &mut self,
        kind: ConfigResourceKind,
        names: &[String],
    ) -> Result<ItemResults<Vec<ConfigEntry>>, ClientError> {
        self.describe_configs_with_synonyms(kind, names, false)
            .await
    }

    /// Describes the configs of resources of one kind, with each entry's synonyms when
    /// `include_synonyms`. A broker's (or its loggers') configs are asked of that broker, as
    /// Kafka's admin client does (a broker describes only itself); `names` must then be one
    /// broker (or the empty default name).
    pub async fn describe_configs_with_synonyms(
        &mut self,
        kind: ConfigResourceKind,
        names: &[String],
        include_synonyms: bool,
    ) -> Result<ItemResults<Vec<ConfigEntry>>, ClientError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let request = DescribeConfigsRequest::default()
            .with_resources(
                names
                    .iter()
                    .map(|name| {
                        DescribeConfigsResource::default()
                            .with_resource_type(kind.code())
                            .with_resource_name(StrBytes::from_string(name.clone()))
                            .with_configuration_keys(None)
                    })
                    .collect(),
            )
            .with_include_synonyms(include_synonyms);
        let addr = self.config_broker(kind, &names[0]);
        let connection = self.connection(&addr).await?;
        let version = connection.negotiated_version::<DescribeConfigsRequest>()?;
        let response = connection.send_version(request, version).await;
        let response = self.forget_if_broken(&addr, response)?;
        let mut by_name: HashMap<String, Result<Vec<ConfigEntry>, ClientError>> = response
            .results
            .into_iter()
            .map(|result| {
                let outcome = if result.error_code != 0 {
                    Err(ClientError::server(
                        result.error_code,
                        result.error_message.as_deref(),
                    ))
                } else {
                    Ok(result
                        .configs
                        .into_iter()
                        .map(|c| ConfigEntry {
                            name: c.name.to_string(),
                            value: c.value.map(|v| v.to_string()),
                            is_default: if version == 0 {
                                c.is_default
                            } else {
                                c.config_source == DEFAULT_CONFIG_SOURCE
                            },
                            is_sensitive: c.is_sensitive,
                            read_only: c.read_only,
                            source: if version == 0 {
                                if c.is_default {
                                    ConfigSource::DefaultConfig
                                } else {
                                    ConfigSource::Unknown
                                }
                            } else {
                                ConfigSource::from_code(c.config_source)
                            },
                            synonyms: c
                                .synonyms
                                .into_iter()
                                .map(|s| ConfigSynonym {
                                    name: s.name.to_string(),
                                    value: s.value.map(|v| v.to_string()),
                                    source: ConfigSource::from_code(s.source),
                                })
                                .collect(),
                        })
                        .collect())
                };
                (result.resource_name.to_string(), outcome)
            })
            .collect();
        Ok(names
            .iter()
            .map(|name| {
                let outcome = by_name.remove(name).unwrap_or_else(|| {
                    Err(ClientError::Protocol {
                        addr: addr.clone(),
                        message: format!("DescribeConfigs response has no result for {name}"),
                    })
                });
                (name.clone(), outcome)
            })
            .collect())
    }

    /// Applies IncrementalAlterConfigs operations to one resource.
    pub async fn incremental_alter_configs(
        &mut self,
        kind: ConfigResourceKind,
        name: &str,
        ops: &[AlterConfigOp],
        validate_only: bool,
    ) -> Result<(), ClientError> {
        let configs = ops
            .iter()
            .map(|op| match op {
                AlterConfigOp::Set(key, value) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.clone()))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.clone()))),
                AlterConfigOp::Delete(key) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.clone()))
                    .with_config_operation(1)
                    .with_value(None),
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(kind.code())
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_configs(configs)])
            .with_validate_only(validate_only);
        let addr = self.config_broker(kind, name);
        let response = self.connection(&addr).await?.send(request).await;
        let response = self.forget_if_broken(&addr, response)?;
        let first = response.responses.first();
        one_config_result(
            addr,
            "IncrementalAlterConfigs",
            first.map(|r| (r.error_code, r.error_message.as_deref())),
        )
    }

    /// AlterConfigs (the legacy API): `configs` replace every dynamic config of the resource
    /// (kafka-configs.sh alters brokers this way).
    pub async fn alter_configs(
        &mut self,
        kind: ConfigResourceKind,
        name: &str,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
        };
        use kafka_protocol::messages::AlterConfigsRequest;
        let request = AlterConfigsRequest::default()
            .with_resources(vec![LegacyResource::default()
                .with_resource_type(kind.code())
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_configs(
                    configs
                        .iter()
                        .map(|(key, value)| {
                            LegacyConfig::default()
                                .with_name(StrBytes::from_string(key.clone()))
                                .with_value(Some(StrBytes::from_string(value.clone())))
                        })
                        .collect(),
                )])
            .with_validate_only(validate_only);
        let addr = self.config_broker(kind, name);
        let response = self.connection(&addr).await?.send(request).await;
        let response = self.forget_if_broken(&addr, response)?;
        let first = response.responses.first();
        one_config_result(
            addr,
            "AlterConfigs",
            first.map(|r| (r.error_code, r.error_message.as_deref())),
        )
    }

    /// Where a config request for `name` goes: a broker's own configs (and its loggers) to
    /// that broker, as Kafka's admin client sends them (a broker refuses another's id); topic
    /// configs and the cluster default to any broker.
    fn config_broker(&self, kind: ConfigResourceKind, name: &str) -> String {
        match kind {
            ConfigResourceKind::Broker | ConfigResourceKind::BrokerLogger => name
                .parse::<i32>()
                .ok()
                .and_then(|id| self.brokers.get(&id).cloned())
                .unwrap_or_else(|| self.any_broker.clone()),
            ConfigResourceKind::Topic => self.any_broker.clone(),
        }
    }

    /// Sends one request to any broker (the bootstrap one) and returns its answer as is:
    /// for APIs every broker answers alike, such as the ACL APIs (each broker reads and
    /// writes the same ACL znodes).
    pub async fn send_to_any<R: kafka_protocol::protocol::Request>(
        &mut self,
        request: R,
    ) -> Result<R::Response, ClientError> {
        let addr = self.any_broker.clone();
        let response = self.connection(&addr).await?.send(request).await;
        self.forget_if_broken(&addr, response)
    }

    /// DescribeUserScramCredentials (KIP-554): per user, its (mechanism name, iterations);
    /// `users` empty describes every user that has a credential.
    pub async fn describe_user_scram_credentials(
        &mut self,
        users: &[String],
    ) -> Result<ItemResults<Vec<(String, i32)>>, ClientError> {
        use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
        use kafka_protocol::messages::DescribeUserScramCredentialsRequest;

        let request = DescribeUserScramCredentialsRequest::default().with_users(Some(
            users
                .iter()
                .map(|u| UserName::default().with_name(StrBytes::from_string(u.clone())))
                .collect(),
        ));
        let addr = self.any_broker.clone();
        let response = self.connection(&addr).await?.send(request).await;
        let response = self.forget_if_broken(&addr, response)?;
        if response.error_code != 0 {
            return Err(ClientError::server(
                response.error_code,
                response.error_message.as_deref(),
            ));
        }
        Ok(response
            .results
            .into_iter()
            .map(|r| {
                let outcome = if r.error_code != 0 {
                    Err(ClientError::server(
                        r.error_code,
                        r.error_message.as_deref(),
                    ))
                } else {
                    Ok(r.credential_infos
                        .iter()
                        .map(|c| {
                            let name = security::scram::ScramMechanism::from_id(c.mechanism)
                                .map_or("UNKNOWN", |m| m.name());
                            (name.to_owned(), c.iterations)
                        })
                        .collect())
                };
                (r.user.to_string(), outcome)
            })
            .collect())
    }

    /// AlterUserScramCredentials (KIP-554) on the controller for one user: `upsertions` are
    /// (mechanism, iterations, password), salted and hashed here as Kafka's admin client does
    /// (the password never leaves the client); `deletions` are mechanisms.
    pub async fn alter_user_scram_credentials(
        &mut self,
        user: &str,
        upsertions: &[(security::scram::ScramMechanism, u32, String)],
        deletions: &[security::scram::ScramMechanism],
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::alter_user_scram_credentials_request::{
            ScramCredentialDeletion, ScramCredentialUpsertion,
        };
        use kafka_protocol::messages::AlterUserScramCredentialsRequest;

        let name = StrBytes::from_string(user.to_owned());
        let upsertions: Vec<ScramCredentialUpsertion> = upsertions
            .iter()
            .map(|(mechanism, iterations, password)| {
                let salt: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
                    .iter()
                    .flat_map(|u| u.into_bytes())
                    .collect();
                let salted = mechanism.salted_password(password.as_bytes(), &salt, *iterations);
                ScramCredentialUpsertion::default()
                    .with_name(name.clone())
                    .with_mechanism(mechanism.id())
                    .with_iterations(*iterations as i32)
                    .with_salt(salt.into())
                    .with_salted_password(salted.into())
            })
            .collect();
        let deletions: Vec<ScramCredentialDeletion> = deletions
            .iter()
            .map(|m| {
                ScramCredentialDeletion::default()
                    .with_name(name.clone())
                    .with_mechanism(m.id())
            })
            .collect();
        let results = self
            .on_controller(
                vec![user.to_owned()],
                |_, _| {
                    Ok(AlterUserScramCredentialsRequest::default()
                        .with_upsertions(upsertions.clone())
                        .with_deletions(deletions.clone()))
                },
                |response: kafka_protocol::messages::AlterUserScramCredentialsResponse| {
                    response
                        .results
                        .into_iter()
                        .map(|r| {
                            (
                                r.user.to_string(),
                                r.error_code,
                                r.error_message.map(|m| m.to_string()),
                            )
                        })
                        .collect()
                },
            )
            .await?;
        results
            .into_iter()
            .map(|(_, outcome)| outcome)
            .collect::<Result<Vec<()>, _>>()
            .map(|_| ())
    }

    /// DescribeClientQuotas (KIP-546) on any broker: the entities matching `components`
    /// (`strict`: entities with other types too are left out) and their quotas, in the
    /// broker's order.
    pub async fn describe_client_quotas(
        &mut self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<(QuotaEntity, Vec<(String, f64)>)>, ClientError> {
        use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
        use kafka_protocol::messages::DescribeClientQuotasRequest;

        let components = components
            .iter()
            .map(|(entity_type, matched)| {
                let (match_type, name) = match matched {
                    QuotaMatch::Exact(name) => (0, Some(StrBytes::from_string(name.clone()))),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(StrBytes::from_string(entity_type.clone()))
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let addr = self.any_broker.clone();
        let response = self.connection(&addr).await?.send(request).await;
        let response = self.forget_if_broken(&addr, response)?;
        if response.error_code != 0 {
            return Err(ClientError::server(
                response.error_code,
                response.error_message.as_deref(),
            ));
        }
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|entry| {
                let entity = entry
                    .entity
                    .iter()
                    .map(|e| {
                        (
                            e.entity_type.to_string(),
                            e.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect();
                let values = entry
                    .values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect();
                (entity, values)
            })
            .collect())
    }

    /// AlterClientQuotas (KIP-546) on any broker for one entity: each op sets a key
    /// (`Some(value)`) or removes it (`None`).
    pub async fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
        ops: &[(String, Option<f64>)],
        validate_only: bool,
    ) -> Result<(), ClientError> {
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        use kafka_protocol::messages::AlterClientQuotasRequest;

        let entity_data = entity
            .iter()
            .map(|(entity_type, name)| {
                EntityData::default()
                    .with_entity_type(StrBytes::from_string(entity_type.clone()))
                    .with_entity_name(name.clone().map(StrBytes::from_string))
            })
            .collect();
        let ops = ops
            .iter()
            .map(|(key, value)| {
                OpData::default()
                    .with_key(StrBytes::from_string(key.clone()))
                    .with_value(value.unwrap_or(0.0))
                    .with_remove(value.is_none())
            })
            .collect();
        let request = AlterClientQuotasRequest::default()
            .with_validate_only(validate_only)
            .with_entries(vec![EntryData::default()
                .with_entity(entity_data)
                .with_ops(ops)]);
        let addr = self.any_broker.clone();
        let response = self.connection(&addr).await?.send(request).await;
        let response = self.forget_if_broken(&addr, response)?;
        match response.entries.first() {
            Some(e) if e.error_code != 0 => Err(ClientError::server(
                e.error_code,
                e.error_message.as_deref(),
            )),
            Some(_) => Ok(()),
            None => Err(ClientError::Protocol {
                addr,
                message: "AlterClientQuotas response has no entry".to_string(),
            }),
        }
    }

    /// ElectLeaders on the controller (`election_type` 0 PREFERRED, 1 UNCLEAN) for these
    /// partitions (`None`: every partition). Per partition: `Ok` when a leader was elected,
    /// else the broker's error (ELECTION_NOT_NEEDED among them). A controller that moved
    /// (NOT_CONTROLLER) is looked up again and asked again.
    pub async fn elect_leaders(
        &mut self,
        election_type: i8,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<ItemResults<()>, ClientError> {
        let timeout_ms = self.timeout_ms();
        let mut attempt = 0;
        loop {
            let last_attempt = attempt >= self.options.controller_retries;
            let Some(addr) = self.controller_addr() else {
                if last_attempt {
                    return Err(ClientError::server(
                        NOT_CONTROLLER,
                        Some("No controller is known to the cluster's brokers; retries exhausted."),
                    ));
                }
                attempt += 1;
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
                continue;
            };
            let topic_partitions = partitions.map(|named| {
                partitions_by_topic(named)
                    .into_iter()
                    .map(|(topic, partitions)| {
                        ElectLeadersTopicPartitions::default()
                            .with_topic(topic_name(topic))
                            .with_partitions(partitions)
                    })
                    .collect()
            });
            let request = ElectLeadersRequest::default()
                .with_election_type(election_type)
                .with_topic_partitions(topic_partitions)
                .with_timeout_ms(timeout_ms);
            let sent = match self.connection(&addr).await {
                Ok(connection) => connection.send(request).await,
                Err(err) => Err(err),
            };
            let response = match self.forget_if_broken(&addr, sent) {
                Ok(response) => response,
                Err(err) if !last_attempt => {
                    tracing::debug!(%addr, %err, attempt, "controller unreachable, refreshing metadata");
                    attempt += 1;
                    tokio::time::sleep(self.options.retry_backoff).await;
                    self.refresh().await?;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let results: ItemResults<()> = response
                .replica_election_results
                .iter()
                .flat_map(|t| {
                    t.partition_result.iter().map(|r| {
                        let name = format!("{}-{}", t.topic.0, r.partition_id);
                        let outcome = if r.error_code == 0 {
                            Ok(())
                        } else {
                            Err(ClientError::server(
                                r.error_code,
                                r.error_message.as_deref(),
                            ))
                        };
                        (name, outcome)
                    })
                })
                .collect();
            let moved = response.error_code == NOT_CONTROLLER
                || (!results.is_empty()
                    && results
                        .iter()
                        .all(|(_, r)| matches!(r, Err(e) if e.code() == Some(NOT_CONTROLLER))));
            if moved && !last_attempt {
                attempt += 1;
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
                continue;
            }
            if response.error_code != 0 {
                return Err(ClientError::server(response.error_code, None));
            }
            return Ok(results);
        }
    }

    /// AlterPartitionReassignments on the controller: per `(topic, partition, target)` (a
    /// `None` target cancels), `Ok` when the reassignment started, else the broker's error.
    /// Results are named `topic-partition`. A controller that moved is looked up again.
    pub async fn alter_partition_reassignments(
        &mut self,
        reassignments: &[(String, i32, Option<Vec<i32>>)],
    ) -> Result<ItemResults<()>, ClientError> {
        let mut by_topic: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for (topic, partition, target) in reassignments {
            by_topic.entry(topic).or_default().push(
                ReassignablePartition::default()
                    .with_partition_index(*partition)
                    .with_replicas(
                        target
                            .as_ref()
                            .map(|r| r.iter().map(|&b| BrokerId(b)).collect()),
                    ),
            );
        }
        let topics: Vec<_> = by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                ReassignableTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(partitions)
            })
            .collect();
        let request = AlterPartitionReassignmentsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(self.timeout_ms());
        let response = self
            .send_to_controller(request, |r| r.error_code == NOT_CONTROLLER)
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::server(
                response.error_code,
                response.error_message.as_deref(),
            ));
        }
        Ok(response
            .responses
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let name = format!("{}-{}", t.name.0, p.partition_index);
                    let outcome = if p.error_code == 0 {
                        Ok(())
                    } else {
                        Err(ClientError::server(
                            p.error_code,
                            p.error_message.as_deref(),
                        ))
                    };
                    (name, outcome)
                })
            })
            .collect())
    }

    /// ListPartitionReassignments on the controller: the partitions being moved among
    /// `partitions` (`None`: all), sorted by topic and partition.
    pub async fn list_partition_reassignments(
        &mut self,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<OngoingReassignment>, ClientError> {
        let topics = partitions.map(|named| {
            partitions_by_topic(named)
                .into_iter()
                .map(|(topic, partitions)| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(partitions)
                })
                .collect()
        });
        let request = ListPartitionReassignmentsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(self.timeout_ms());
        let response = self
            .send_to_controller(request, |r| r.error_code == NOT_CONTROLLER)
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::server(
                response.error_code,
                response.error_message.as_deref(),
            ));
        }
        let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
        let mut out: Vec<OngoingReassignment> = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| OngoingReassignment {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    replicas: ids(&p.replicas),
                    adding: ids(&p.adding_replicas),
                    removing: ids(&p.removing_replicas),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    /// Sends `request` to the controller, looking it up again (bounded by
    /// `controller_retries`) when it is unknown, unreachable or `moved` says it moved.
    async fn send_to_controller<R>(
        &mut self,
        request: R,
        moved: impl Fn(&R::Response) -> bool,
    ) -> Result<R::Response, ClientError>
    where
        R: kafka_protocol::protocol::Request + Clone,
    {
        let mut attempt = 0;
        loop {
            let last_attempt = attempt >= self.options.controller_retries;
            let Some(addr) = self.controller_addr() else {
                if last_attempt {
                    return Err(ClientError::server(
                        NOT_CONTROLLER,
                        Some("No controller is known to the cluster's brokers; retries exhausted."),
                    ));
                }
                attempt += 1;
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
                continue;
            };
            let sent = match self.connection(&addr).await {
                Ok(connection) => connection.send(request.clone()).await,
                Err(err) => Err(err),
            };
            match self.forget_if_broken(&addr, sent) {
                Ok(response) if moved(&response) && !last_attempt => {}
                Ok(response) => return Ok(response),
                Err(err) if !last_attempt => {
                    tracing::debug!(%addr, %err, attempt, "controller unreachable, refreshing metadata");
                }
                Err(err) => return Err(err),
            }
            attempt += 1;
            tokio::time::sleep(self.options.retry_backoff).await;
            self.refresh().await?;
        }
    }

    /// Re-reads the broker list and controller id from any broker.
    pub async fn refresh(&mut self) -> Result<(), ClientError> {
        self.metadata(Some(&[])).await.map(drop)
    }

    /// Sends Metadata (all topics for `None`) to a known broker and records brokers and
    /// controller. Never asks the broker to auto-create topics.
    async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<MetadataResponse, ClientError> {
        let addr = self.any_broker.clone();
        let connection = self.connection(&addr).await?;
        let version = connection.negotiated_version::<MetadataRequest>()?;
        let topics = match topics {
            Some(names) => Some(
                names
                    .iter()
                    .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                    .collect(),
            ),
            // v0 has no null: an empty list means "all topics" there.
            None if version == 0 => Some(Vec::new()),
            None => None,
        };
        let request = MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(version < 4);
        let response = connection.send_version(request, version).await;
        let response = self.forget_if_broken(&addr, response)?;
        self.brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        self.racks = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.rack.as_ref().map(|r| r.to_string())))
            .collect();
        self.controller_id = (response.controller_id.0 >= 0).then_some(response.controller_id.0);
        Ok(response)
    }

    /// Sends a request built for the still-pending items to the controller, retrying items
    /// refused with `NOT_CONTROLLER` (after a metadata refresh and a backoff) up to
    /// `controller_retries` times.
    async fn on_controller<R, B, P>(
        &mut self,
        items: Vec<String>,
        build: B,
        parse: P,
    ) -> Result<ItemResults<()>, ClientError>
    where
        R: kafka_protocol::protocol::Request,
        B: Fn(i16, &[String]) -> Result<R, ClientError>,
        P: Fn(R::Response) -> Vec<(String, i16, Option<String>)>,
    {
        let mut results: HashMap<String, Result<(), ClientError>> = HashMap::new();
        let mut pending = items.clone();
        let mut attempt = 0;
        while !pending.is_empty() {
            let last_attempt = attempt >= self.options.controller_retries;
            let Some(addr) = self.controller_addr() else {
                if last_attempt {
                    return Err(ClientError::server(
                        NOT_CONTROLLER,
                        Some("No controller is known to the cluster's brokers; retries exhausted."),
                    ));
                }
                attempt += 1;
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
                continue;
            };
            // A controller we cannot reach may have moved (or died and been replaced):
            // refresh and retry. Nothing was sent, so retrying cannot repeat a request.
            if let Err(err) = self.connection(&addr).await {
                if last_attempt {
                    return Err(err);
                }
                tracing::debug!(%addr, %err, attempt, "controller unreachable, refreshing metadata");
                attempt += 1;
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
                continue;
            }
            let connection = self.connection(&addr).await?;
            let version = connection.negotiated_version::<R>()?;
            let request = build(version, &pending)?;
            let response = connection.send_version(request, version).await;
            let response = self.forget_if_broken(&addr, response)?;
            let mut retry = Vec::new();
            for (name, code, message) in parse(response) {
                if !pending.contains(&name) {
                    continue;
                }
                if code == NOT_CONTROLLER && !last_attempt {
                    retry.push(name);
                } else if code == 0 {
                    results.insert(name, Ok(()));
                } else {
                    results.insert(name, Err(ClientError::server(code, message.as_deref())));
                }
            }
            for name in &pending {
                if !retry.contains(name) && !results.contains_key(name) {
                    results.insert(
                        name.clone(),
                        Err(ClientError::Protocol {
                            addr: addr.clone(),
                            message: format!("the response has no result for {name}"),
                        }),
                    );
                }
            }
            pending = retry;
            if !pending.is_empty() {
                attempt += 1;
                tracing::debug!(%addr, attempt, "NOT_CONTROLLER, refreshing metadata");
                tokio::time::sleep(self.options.retry_backoff).await;
                self.refresh().await?;
            }
        }
        Ok(items
            .into_iter()
            .map(|name| {
                let outcome = results.remove(&name).unwrap_or(Ok(()));
                (name, outcome)
            })
            .collect())
    }

    fn controller_addr(&self) -> Option<String> {
        self.controller_id
            .and_then(|id| self.brokers.get(&id).cloned())
    }

    /// The open connection to `addr`, connecting (again) when there is none or the old one
    /// has failed.
    async fn connection(&mut self, addr: &str) -> Result<&mut Connection, ClientError> {
        let options = self.options.connection.clone();
        match self.connections.entry(addr.to_string()) {
            Entry::Occupied(entry) => Ok(entry.into_mut()),
            Entry::Vacant(entry) => {
                let connection = Connection::connect_with(addr, options).await?;
                Ok(entry.insert(connection))
            }
        }
    }

    /// Forgets a connection whose socket failed, so the next request reconnects.
    fn forget_if_broken<T>(
        &mut self,
        addr: &str,
        result: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if matches!(
            result,
            Err(ClientError::Io { .. }
                | ClientError::Timeout { .. }
                | ClientError::Protocol { .. })
        ) {
            self.connections.remove(addr);
        }
        result
    }

    /// The `timeout_ms` sent in CreateTopics/CreatePartitions/DeleteTopics: nine tenths of
    /// the request timeout, so the broker's own `REQUEST_TIMED_OUT` answer (deletion still
    /// continues) arrives before this client gives up on the response.
    fn timeout_ms(&self) -> i32 {
        let millis = self.options.connection.request_timeout.as_millis() * 9 / 10;
        i32::try_from(millis).unwrap_or(i32::MAX)
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn creatable_topic(topic: &NewTopic, version: i16) -> Result<CreatableTopic, ClientError> {
    let configs = topic
        .configs
        .iter()
        .map(|(key, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(key.clone()))
                .with_value(Some(StrBytes::from_string(value.clone())))
        })
        .collect();
    let base = CreatableTopic::default()
        .with_name(topic_name(&topic.name))
        .with_configs(configs);
    if let Some(assignment) = &topic.assignment {
        return Ok(base
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(
                assignment
                    .iter()
                    .map(|(partition, replicas)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*partition)
                            .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect())
                    })
                    .collect(),
            ));
    }
    if version < 4 && (topic.partitions.is_none() || topic.replication_factor.is_none()) {
        return Err(ClientError::Config(format!(
            "the broker only supports CreateTopics v{version}, which cannot ask for the default partition count or replication factor; pass --partitions and --replication-factor"
        )));
    }
    Ok(base
        .with_num_partitions(topic.partitions.unwrap_or(-1))
        .with_replication_factor(topic.replication_factor.unwrap_or(-1)))
}

/// `(topic, partition)` pairs grouped by topic, in topic order (request bodies name each topic
/// once with its partitions).
fn partitions_by_topic(named: &[(String, i32)]) -> BTreeMap<&str, Vec<i32>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in named {
        by_topic.entry(topic).or_default().push(*partition);
    }
    by_topic
}

/// The outcome of an alter of one config resource: its result's error, or a protocol error
/// naming `api` when the response has no result at all.
fn one_config_result(
    addr: String,
    api: &str,
    first: Option<(i16, Option<&str>)>,
) -> Result<(), ClientError> {
    match first {
        Some((code, message)) if code != 0 => Err(ClientError::server(code, message)),
        Some(_) => Ok(()),
        None => Err(ClientError::Protocol {
            addr,
            message: format!("{api} response has no result"),
        }),
    }
}
