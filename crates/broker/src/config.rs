//! `BrokerConfig`: Kafka's `server.properties` keys (plus `--override key=value` on top),
//! parsed and validated once at start-up. Unknown keys are logged and ignored; a bad value
//! refuses to start with a message naming the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use model::BrokerId;
use security::SecurityProtocol;
use tracing::warn;

/// Why a configuration cannot be used. Every message names the offending key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The properties file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The properties file is not one Java's `Properties.load` reads.
    #[error("cannot read config file {path}: {error}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Where and what.
        error: client::PropertiesError,
    },
    /// An `--override` is not `key=value`.
    #[error("override '{0}' is not key=value")]
    BadOverride(String),
    /// A value does not parse or is out of range.
    #[error("invalid value '{value}' for {key}: {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong.
        reason: String,
    },
}

/// A `listeners` entry: `NAME://host:port` (an empty host binds every interface), with the
/// security protocol `listener.security.protocol.map` gives its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, upper-cased as Kafka normalises it (`PLAINTEXT`, `INTERNAL`).
    pub name: String,
    /// Host to bind or advertise; empty means "all interfaces" / "this host's name".
    pub host: String,
    /// Port; 0 picks a free port when binding.
    pub port: u16,
    /// How its connections are secured.
    pub protocol: SecurityProtocol,
}

/// One endpoint as `/brokers/ids/<id>` lists it: what clients of a listener connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedEndpoint {
    /// The listener name.
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port (the bound port when the config says 0).
    pub port: u16,
    /// The listener's security protocol.
    pub protocol: SecurityProtocol,
}

impl Listener {
    /// The address to bind.
    pub fn bind_addr(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            self.host.as_str()
        };
        format!("{host}:{}", self.port)
    }
}

/// The create-topic policy rules (`create.topic.policy.*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTopicPolicyConfig {
    /// `create.topic.policy.min.partitions`.
    pub min_partitions: Option<i32>,
    /// `create.topic.policy.min.replication.factor`.
    pub min_replication_factor: Option<i16>,
    /// `create.topic.policy.required.configs`: topic config keys every new topic must set.
    pub required_configs: Vec<String>,
}

/// The bounds on what clients can make the broker hold (ARCHITECTURE.md invariant 8), by
/// Kafka's keys and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimits {
    /// `fetch.max.bytes`: the most record bytes one consumer Fetch response carries (a
    /// request asking for more gets this; the first batch is returned whole even when larger,
    /// KIP-74).
    pub fetch_max_bytes: usize,
    /// `replica.fetch.response.max.bytes`: the same bound for a follower's Fetch.
    pub replica_fetch_response_max_bytes: usize,
    /// `queued.max.requests`: requests read and being handled at once (Kafka's default 500).
    /// A request parked waiting (a long-polling Fetch, an acks=-1 Produce, a JoinGroup) does
    /// not count, as in Kafka's purgatory; past the limit connections stop reading.
    pub queued_max_requests: usize,
    /// `queued.max.request.bytes`: the memory pool for request bytes. A connection reads a
    /// frame only after the pool has room for all of it, and the room is given back when the
    /// response is written. `None` (`-1`, Kafka's default) is no pool; unset here it is
    /// 256 MiB or `socket.request.max.bytes`, whichever is larger, so memory stays bounded.
    pub queued_max_request_bytes: Option<usize>,
    /// `max.connections`: connections served at once; past it the listener stops accepting
    /// until one closes (Kafka's default is unbounded; here 4096).
    pub max_connections: usize,
    /// `max.connections.per.ip`: connections from one address; one more is closed at once.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`: `host:count,...` (hosts resolved at start).
    pub max_connections_per_ip_overrides: BTreeMap<std::net::IpAddr, usize>,
    /// `fetch.zero.copy.enable` (Gregor's own key, default true): consumers on PLAINTEXT
    /// connections get their records with `sendfile`, as Kafka always does; false copies
    /// them through memory (for comparison).
    pub fetch_zero_copy: bool,
    /// `quota.window.num` (Kafka's default 11): samples a client's byte rate is measured over.
    pub quota_window_num: usize,
    /// `quota.window.size.seconds` (default 1): the length of one sample.
    pub quota_window_size: Duration,
}

/// One broker's configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `broker.id`.
    pub broker_id: BrokerId,
    /// `listeners` (the first one serves clients).
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`, defaulting to `listeners`.
    pub advertised_listeners: Option<Vec<Listener>>,
    /// `inter.broker.listener.name`, or the listener named after
    /// `security.inter.broker.protocol` (default `PLAINTEXT`).
    pub inter_broker_listener: String,
    /// `control.plane.listener.name` (KIP-291): the listener controller requests use.
    pub control_plane_listener: Option<String>,
    /// How this broker connects to the inter-broker listener of the others (TLS trust and
    /// client certificate, SASL login): replica fetchers, AlterPartition, controlled
    /// shutdown, forwarded auto-creation.
    pub inter_broker_security: client::Security,
    /// The same for the control-plane listener (the controller's requests); the
    /// inter-broker one without `control.plane.listener.name`.
    pub control_plane_security: client::Security,
    /// The data directory (`--data-dir`): holds `logs/` and `metadata/` unless `log.dirs`
    /// and `metadata.log.dir` say otherwise.
    pub data_dir: PathBuf,
    /// `log.dirs` (or `log.dir`), defaulting to `<data_dir>/logs`.
    pub log_dirs: Vec<PathBuf>,
    /// `metadata.log.dir` (Kafka's KRaft name): the directory of the embedded store. Defaults
    /// to the first `log.dirs` entry when `log.dirs` (or `log.dir`) is set, else to
    /// `<data_dir>/metadata`. Unused with `zookeeper.connect`.
    pub metadata_log_dir: PathBuf,
    /// `metadata.store.cache.bytes` (Gregor's own key): the cap of the embedded store's page
    /// cache, default [`metastore::DEFAULT_CACHE_BYTES`] (8 MiB). The cache fills up to it
    /// and stays there; reads never use it. Unused with `zookeeper.connect`.
    pub metadata_store_cache_bytes: usize,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `zookeeper.connect`: use a ZooKeeper ensemble instead of the embedded store.
    pub zookeeper_connect: Option<String>,
    /// `zookeeper.session.timeout.ms`.
    pub zookeeper_session_timeout: Duration,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `offsets.topic.num.partitions` (50): partitions of `__consumer_offsets`.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor` (3): its replication factor; creation waits until
    /// that many brokers are alive.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes` (100 MiB).
    pub offsets_topic_segment_bytes: i32,
    /// `offsets.topic.compression.codec` (0 = none; Kafka's ids: 1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd): how the coordinators compress the batches they append.
    pub offsets_topic_compression_codec: i32,
    /// `offsets.commit.timeout.ms` (5000): how long a commit waits for the offsets topic's
    /// in-sync replicas.
    pub offsets_commit_timeout: Duration,
    /// `offsets.retention.minutes` (10080, 7 days): how long committed offsets outlive an
    /// empty group (KIP-211), or a topic the group no longer subscribes to.
    pub offsets_retention: Duration,
    /// `offsets.retention.check.interval.ms` (600000): how often coordinators look for
    /// expired offsets and forget empty groups without offsets.
    pub offsets_retention_check_interval: Duration,
    /// The transaction coordinator's settings (`transaction.*`, `transactional.id.*`).
    pub transactions: TransactionConfig,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `file.delete.delay.ms`: how long a deleted partition's `-delete` directory stays.
    pub file_delete_delay: Duration,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `socket.request.max.bytes`.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`: a connection with no request for this long is closed.
    pub connections_max_idle: Duration,
    /// `num.io.threads` (Kafka's default 8): the threads that do the broker's disk work
    /// (appends, reads, offset lookups, log creation and deletion) off the async workers; the
    /// process's blocking pool has this many (a dev cluster, the sum over its brokers). Work
    /// beyond it waits in the pool's queue instead of starting one more thread.
    pub num_io_threads: usize,
    /// What one request or connection may cost the broker (fetch sizes, queues, connections).
    pub limits: RequestLimits,
    /// `request.timeout.ms`, used for controller requests.
    pub request_timeout: Duration,
    /// `controlled.shutdown.enable`: on SIGTERM, ask the controller to move this broker's
    /// leaderships away before stopping.
    pub controlled_shutdown_enable: bool,
    /// `controlled.shutdown.max.retries`: ControlledShutdown attempts before stopping anyway.
    pub controlled_shutdown_max_retries: u32,
    /// `controlled.shutdown.retry.backoff.ms`: the wait after a failed attempt.
    pub controlled_shutdown_retry_backoff: Duration,
    /// `placement.strategy`: `balanced` (default) or `kafka`.
    pub placement_strategy: assignment::Strategy,
    /// `max.partitions.per.request`: the most partitions one CreateTopics or CreatePartitions
    /// request may add (default 10,000, Kafka's KRaft cap).
    pub max_partitions_per_request: i32,
    /// `auto.leader.rebalance.enable` (default true): the controller moves leaderships back
    /// to the preferred replicas by itself.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.per.broker.percentage` (default 10).
    pub leader_imbalance_per_broker_percentage: u32,
    /// `leader.imbalance.check.interval.seconds` (default 300).
    pub leader_imbalance_check_interval: Duration,
    /// `create.topic.policy.*`.
    pub create_topic_policy: CreateTopicPolicyConfig,
    /// `admin.listener` (HTTP); `None` when set to `none` or empty.
    pub admin_listener: Option<SocketAddr>,
    /// Broker-level topic defaults that were set (`log.retention.ms=...`), by broker key.
    pub topic_defaults: BTreeMap<String, String>,
    /// Replication settings (`replica.*`, `num.replica.fetchers`, fetch sessions).
    pub replication: replication::ReplicationConfig,
    /// `authorizer.class.name` with `super.users` and `allow.everyone.if.no.acl.found`;
    /// `None` without an authorizer (every request allowed, as Kafka).
    pub authorizer: Option<security::acl::AuthorizerSettings>,
    /// Every key as given, for `DescribeConfigs` on the broker.
    pub originals: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig::from_properties(BTreeMap::new(), Path::new("./data"))
            .expect("the defaults are valid")
    }
}

/// Keys this broker understands besides the broker-level topic defaults.
const KNOWN_KEYS: &[&str] = &[
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "broker.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "control.plane.listener.name",
    "log.dirs",
    "log.dir",
    "metadata.log.dir",
    "metadata.store.cache.bytes",
    "broker.rack",
    "zookeeper.connect",
    "zookeeper.session.timeout.ms",
    "zookeeper.connection.timeout.ms",
    "num.partitions",
    "default.replication.factor",
    "auto.create.topics.enable",
    "delete.topic.enable",
    "file.delete.delay.ms",
    "min.insync.replicas",
    "socket.request.max.bytes",
    "request.timeout.ms",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "connections.max.idle.ms",
    "num.io.threads",
    "fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "queued.max.requests",
    "queued.max.request.bytes",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "fetch.zero.copy.enable",
    "quota.window.num",
    "quota.window.size.seconds",
    "placement.strategy",
    "max.partitions.per.request",
    "create.topic.policy.min.partitions",
    "create.topic.policy.min.replication.factor",
    "create.topic.policy.required.configs",
    "admin.listener",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "offsets.topic.compression.codec",
    "offsets.commit.timeout.ms",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.state.log.segment.bytes",
    "transaction.max.timeout.ms",
    "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.partition.verification.enable",
    "log.retention.check.interval.ms",
    "log.flush.offset.checkpoint.interval.ms",
    "log.flush.scheduler.interval.ms",
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.backoff.ms",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "connections.max.reauth.ms",
    "connection.failed.authentication.delay.ms",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
    "replica.lag.time.max.ms",
    "num.replica.fetchers",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes",
    "replica.fetch.backoff.ms",
    "replica.socket.timeout.ms",
    "max.incremental.fetch.session.cache.slots",
];

impl BrokerConfig {
    /// Reads `path` (if given), applies `overrides` (`key=value`) on top, and validates.
    pub fn load(
        path: Option<&Path>,
        overrides: &[String],
        data_dir: &Path,
    ) -> Result<BrokerConfig, ConfigError> {
        let mut props = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                parse_properties(&text).map_err(|error| ConfigError::Syntax {
                    path: path.to_path_buf(),
                    error,
                })?
            }
            None => BTreeMap::new(),
        };
        for item in overrides {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(item.clone()))?;
            props.insert(key.trim().to_string(), value.trim().to_string());
        }
        BrokerConfig::from_properties(props, data_dir)
    }

    /// Validates a map of properties.
    pub fn from_properties(
        props: BTreeMap<String, String>,
        data_dir: &Path,
    ) -> Result<BrokerConfig, ConfigError> {
        let get = |key: &str| props.get(key).map(String::as_str);
        for key in props.keys() {
            // `listener.name.<l>.<key>` is a per-listener setting (read where it is used).
            if !KNOWN_KEYS.contains(&key.as_str())
                && !is_topic_default_key(key)
                && !key.starts_with("listener.name.")
            {
                warn!(key, "unknown config key; ignoring it");
            }
        }
        let protocols = parse_protocol_map(get("listener.security.protocol.map"))?;
        let listeners = parse_listeners(
            "listeners",
            get("listeners").unwrap_or("PLAINTEXT://127.0.0.1:9092"),
            &protocols,
        )?;
        let advertised_listeners = get("advertised.listeners")
            .map(|v| parse_listeners("advertised.listeners", v, &protocols))
            .transpose()?;
        let (inter_broker_listener, control_plane_listener) = listener_roles(
            &props,
            &protocols,
            &listeners,
            advertised_listeners.as_deref(),
        )?;
        // The broker's own connections to other brokers speak the inter-broker listener's
        // protocol (controller requests the control-plane listener's), with the broker's
        // truststore, keystore and SASL login (auth::client).
        let listener_for = |name: &str| {
            listeners
                .iter()
                .find(|l| l.name == name)
                .cloned()
                .ok_or_else(|| {
                    invalid(
                        "listeners",
                        name,
                        "the inter-broker and control-plane listeners must be bound by this broker",
                    )
                })
        };
        let inter_broker_security = crate::auth::client::client_security(
            &props,
            &listener_for(&inter_broker_listener)?,
            "inter-broker",
        )?;
        let control_plane_security = match &control_plane_listener {
            None => inter_broker_security.clone(),
            Some(name) => {
                crate::auth::client::client_security(&props, &listener_for(name)?, "control-plane")?
            }
        };
        let log_dirs: Vec<PathBuf> = match get("log.dirs").or(get("log.dir")) {
            Some(value) => value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect(),
            None => vec![data_dir.join("logs")],
        };
        if log_dirs.is_empty() {
            return Err(invalid("log.dirs", "", "must name at least one directory"));
        }
        let metadata_log_dir = match get("metadata.log.dir").map(str::trim) {
            Some("") => {
                return Err(invalid(
                    "metadata.log.dir",
                    "",
                    "must name a directory (or be left out)",
                ))
            }
            Some(dir) => PathBuf::from(dir),
            None if get("log.dirs").or(get("log.dir")).is_some() => log_dirs[0].clone(),
            None => data_dir.join(metastore::EMBEDDED_SUBDIR),
        };
        let mut topic_defaults = BTreeMap::new();
        for (key, value) in &props {
            if let Some(topic_key) = topic_key_for_broker_key(key) {
                model::topic_config::validate(topic_key, value)
                    .map_err(|err| invalid(key, value, &err.to_string()))?;
                topic_defaults.insert(key.clone(), value.clone());
            }
        }
        let strategy_text = get("placement.strategy").unwrap_or("balanced");
        let placement_strategy = strategy_text.parse::<assignment::Strategy>().map_err(|_| {
            invalid(
                "placement.strategy",
                strategy_text,
                "expected balanced or kafka",
            )
        })?;
        let socket_request_max_bytes = parse_num(
            &props,
            "socket.request.max.bytes",
            protocol::DEFAULT_MAX_REQUEST_BYTES,
            1,
        )?;
        let broker_id = parse_num(&props, "broker.id", 0, 0)?;
        let mut replication = replication_config(&props, broker_id)?;
        replication.inter_broker_security = inter_broker_security.clone();
        replication
            .inter_broker_listener
            .clone_from(&inter_broker_listener);
        let config = BrokerConfig {
            broker_id,
            replication,
            listeners,
            advertised_listeners,
            inter_broker_listener,
            control_plane_listener,
            inter_broker_security,
            control_plane_security,
            data_dir: data_dir.to_path_buf(),
            log_dirs,
            metadata_log_dir,
            metadata_store_cache_bytes: parse_num(
                &props,
                "metadata.store.cache.bytes",
                metastore::DEFAULT_CACHE_BYTES,
                0,
            )?,
            rack: get("broker.rack")
                .map(str::to_string)
                .filter(|r| !r.is_empty()),
            zookeeper_connect: get("zookeeper.connect")
                .map(str::to_string)
                .filter(|z| !z.is_empty()),
            zookeeper_session_timeout: Duration::from_millis(parse_num(
                &props,
                "zookeeper.session.timeout.ms",
                18_000,
                1,
            )?),
            num_partitions: parse_num(&props, "num.partitions", 1, 1)?,
            default_replication_factor: parse_num(&props, "default.replication.factor", 1, 1)?,
            auto_create_topics_enable: parse_bool(&props, "auto.create.topics.enable", true)?,
            offsets_topic_num_partitions: parse_num(&props, "offsets.topic.num.partitions", 50, 1)?,
            offsets_topic_replication_factor: parse_num(
                &props,
                "offsets.topic.replication.factor",
                3,
                1,
            )?,
            offsets_topic_segment_bytes: parse_num(
                &props,
                "offsets.topic.segment.bytes",
                100 * 1024 * 1024,
                1,
            )?,
            offsets_topic_compression_codec: {
                let codec = parse_num(&props, "offsets.topic.compression.codec", 0, 0)?;
                if offsets_compression(codec).is_none() {
                    return Err(ConfigError::InvalidValue {
                        key: "offsets.topic.compression.codec".into(),
                        value: codec.to_string(),
                        reason: "must be 0 (none), 1 (gzip), 2 (snappy), 3 (lz4) or 4 (zstd)"
                            .into(),
                    });
                }
                codec
            },
            offsets_commit_timeout: Duration::from_millis(parse_num(
                &props,
                "offsets.commit.timeout.ms",
                5_000,
                1,
            )?),
            offsets_retention: Duration::from_secs(
                parse_num::<u64>(&props, "offsets.retention.minutes", 10_080, 1)?
                    .saturating_mul(60),
            ),
            offsets_retention_check_interval: Duration::from_millis(parse_num(
                &props,
                "offsets.retention.check.interval.ms",
                600_000,
                1,
            )?),
            transactions: TransactionConfig {
                state_log_num_partitions: parse_num(
                    &props,
                    "transaction.state.log.num.partitions",
                    50,
                    1,
                )?,
                state_log_replication_factor: parse_num(
                    &props,
                    "transaction.state.log.replication.factor",
                    3,
                    1,
                )?,
                state_log_min_isr: parse_num(&props, "transaction.state.log.min.isr", 2, 1)?,
                state_log_segment_bytes: parse_num(
                    &props,
                    "transaction.state.log.segment.bytes",
                    100 * 1024 * 1024,
                    1,
                )?,
                max_timeout_ms: parse_num(&props, "transaction.max.timeout.ms", 900_000, 1)?,
                id_expiration_ms: parse_num(
                    &props,
                    "transactional.id.expiration.ms",
                    604_800_000,
                    1,
                )?,
                abort_timed_out_interval_ms: parse_num(
                    &props,
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    10_000,
                    1,
                )?,
                remove_expired_interval_ms: parse_num(
                    &props,
                    "transaction.remove.expired.transaction.cleanup.interval.ms",
                    3_600_000,
                    1,
                )?,
                partition_verification_enable: parse_bool(
                    &props,
                    "transaction.partition.verification.enable",
                    true,
                )?,
            },
            delete_topic_enable: parse_bool(&props, "delete.topic.enable", true)?,
            file_delete_delay: Duration::from_millis(parse_num(
                &props,
                "file.delete.delay.ms",
                60_000,
                0,
            )?),
            min_insync_replicas: parse_num(&props, "min.insync.replicas", 1, 1)?,
            socket_request_max_bytes,
            connections_max_idle: Duration::from_millis(parse_num(
                &props,
                "connections.max.idle.ms",
                600_000,
                1,
            )?),
            limits: parse_limits(&props, socket_request_max_bytes)?,
            request_timeout: Duration::from_millis(parse_num(
                &props,
                "request.timeout.ms",
                30_000,
                1,
            )?),
            controlled_shutdown_enable: parse_bool(&props, "controlled.shutdown.enable", true)?,
            controlled_shutdown_max_retries: parse_num(
                &props,
                "controlled.shutdown.max.retries",
                3,
                0,
            )?,
            controlled_shutdown_retry_backoff: Duration::from_millis(parse_num(
                &props,
                "controlled.shutdown.retry.backoff.ms",
                5_000,
                0,
            )?),
            num_io_threads: parse_num(&props, "num.io.threads", DEFAULT_NUM_IO_THREADS, 1)?,
            placement_strategy,
            max_partitions_per_request: parse_num(
                &props,
                "max.partitions.per.request",
                controller::DEFAULT_MAX_PARTITIONS_PER_REQUEST,
                1,
            )?,
            auto_leader_rebalance_enable: parse_bool(&props, "auto.leader.rebalance.enable", true)?,
            leader_imbalance_per_broker_percentage: parse_num(
                &props,
                "leader.imbalance.per.broker.percentage",
                10,
                0,
            )?,
            leader_imbalance_check_interval: Duration::from_secs(parse_num(
                &props,
                "leader.imbalance.check.interval.seconds",
                300,
                1,
            )?),
            create_topic_policy: CreateTopicPolicyConfig {
                min_partitions: parse_opt_num(&props, "create.topic.policy.min.partitions", 1)?,
                min_replication_factor: parse_opt_num(
                    &props,
                    "create.topic.policy.min.replication.factor",
                    1,
                )?,
                required_configs: get("create.topic.policy.required.configs")
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            admin_listener: parse_admin_listener(
                get("admin.listener").unwrap_or("127.0.0.1:9644"),
            )?,
            topic_defaults,
            authorizer: parse_authorizer(&props)?,
            originals: props.clone(),
        };
        for key in &config.create_topic_policy.required_configs {
            if model::topic_config::definition(key).is_none() {
                return Err(invalid(
                    "create.topic.policy.required.configs",
                    key,
                    "not a topic config key",
                ));
            }
        }
        Ok(config)
    }

    /// The listener clients connect to.
    pub fn listener(&self) -> &Listener {
        &self.listeners[0]
    }

    /// The listener control requests (LeaderAndIsr, UpdateMetadata, StopReplica) must arrive
    /// on: `control.plane.listener.name` if set, else the inter-broker listener.
    pub fn control_plane_listener_name(&self) -> &str {
        self.control_plane_listener
            .as_deref()
            .unwrap_or_else(|| self.inter_broker_listener_name())
    }

    /// The listener brokers talk to each other on (`inter.broker.listener.name`).
    pub fn inter_broker_listener_name(&self) -> &str {
        &self.inter_broker_listener
    }

    /// The listener named `name`.
    pub fn listener_named(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }

    /// The endpoints advertised in `/brokers/ids/<id>`, given the port each listener is bound
    /// to: `advertised.listeners` if set (a port of 0 there means the bound port), else the
    /// listeners, with an empty or wildcard host replaced by `127.0.0.1`.
    pub fn advertised_endpoints(
        &self,
        bound_port: impl Fn(&str) -> u16,
    ) -> Vec<AdvertisedEndpoint> {
        let listeners = self
            .advertised_listeners
            .as_deref()
            .unwrap_or(&self.listeners);
        listeners
            .iter()
            .map(|listener| {
                let host = match listener.host.as_str() {
                    "" | "0.0.0.0" | "::" => "127.0.0.1".to_string(),
                    host => host.to_string(),
                };
                let port = if listener.port == 0 || self.advertised_listeners.is_none() {
                    bound_port(&listener.name)
                } else {
                    listener.port
                };
                AdvertisedEndpoint {
                    name: listener.name.clone(),
                    host,
                    port,
                    protocol: listener.protocol,
                }
            })
            .collect()
    }

    /// The controller's settings.
    pub fn controller_config(&self) -> controller::ControllerConfig {
        controller::ControllerConfig {
            broker_id: self.broker_id,
            num_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
            delete_topic_enable: self.delete_topic_enable,
            placement_strategy: self.placement_strategy,
            max_partitions_per_request: self.max_partitions_per_request,
            auto_leader_rebalance_enable: self.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage: self.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval: self.leader_imbalance_check_interval,
            create_topic_policy: controller::CreateTopicPolicy {
                min_partitions: self.create_topic_policy.min_partitions,
                min_replication_factor: self.create_topic_policy.min_replication_factor,
                required_configs: self.create_topic_policy.required_configs.clone(),
            },
            request_timeout: self.request_timeout,
            unclean_leader_election_enable: self
                .topic_default("unclean.leader.election.enable")
                .is_some_and(|(_, v)| v.trim().eq_ignore_ascii_case("true")),
            ..controller::ControllerConfig::default()
        }
    }

    /// The broker-level default for a topic config key (`retention.ms` → the value of
    /// `log.retention.ms` if set), with the broker key it came from.
    pub fn topic_default(&self, topic_key: &str) -> Option<(&str, &str)> {
        let def = model::topic_config::definition(topic_key)?;
        let broker_key = def.broker_key?;
        self.topic_defaults
            .get(broker_key)
            .map(|v| (broker_key, v.as_str()))
    }
}

/// The request-bytes pool when `queued.max.request.bytes` is not set.
const DEFAULT_REQUEST_POOL_BYTES: usize = 256 * 1024 * 1024;
/// Connections served at once when `max.connections` is not set.
const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// `num.io.threads` when not set (Kafka's default). tokio's own default, 512 threads, let a
/// 2-core broker under a soak's thousand connections grow to 420 threads (most of them waiting
/// on partition locks), each with its allocator cache: RSS crept up for as long as it ran.
const DEFAULT_NUM_IO_THREADS: usize = 8;

fn parse_limits(
    props: &BTreeMap<String, String>,
    socket_request_max_bytes: usize,
) -> Result<RequestLimits, ConfigError> {
    let pool: i64 = parse_num(props, "queued.max.request.bytes", 0, -1)?;
    let queued_max_request_bytes = match (props.contains_key("queued.max.request.bytes"), pool) {
        (false, _) => Some(DEFAULT_REQUEST_POOL_BYTES.max(socket_request_max_bytes)),
        (true, -1) => None,
        (true, bytes) => {
            let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
            if bytes < socket_request_max_bytes {
                // A frame larger than the pool could never be read.
                return Err(invalid(
                    "queued.max.request.bytes",
                    &bytes.to_string(),
                    &format!(
                        "must be -1 or at least socket.request.max.bytes ({socket_request_max_bytes})"
                    ),
                ));
            }
            Some(bytes)
        }
    };
    Ok(RequestLimits {
        // Kafka's defaults (55 MiB and 10 MiB) and lower bounds.
        fetch_max_bytes: parse_num(props, "fetch.max.bytes", 57_671_680, 1024)?,
        replica_fetch_response_max_bytes: parse_num(
            props,
            "replica.fetch.response.max.bytes",
            10_485_760,
            0,
        )?,
        queued_max_requests: parse_num(props, "queued.max.requests", 500, 1)?,
        queued_max_request_bytes,
        max_connections: parse_num(props, "max.connections", DEFAULT_MAX_CONNECTIONS, 1)?,
        max_connections_per_ip: parse_num(props, "max.connections.per.ip", usize::MAX, 0)?,
        max_connections_per_ip_overrides: parse_ip_overrides(
            props
                .get("max.connections.per.ip.overrides")
                .map_or("", String::as_str),
        )?,
        fetch_zero_copy: parse_bool(props, "fetch.zero.copy.enable", true)?,
        quota_window_num: parse_num(props, "quota.window.num", 11, 1)?,
        quota_window_size: Duration::from_secs(parse_num(
            props,
            "quota.window.size.seconds",
            1,
            1,
        )?),
    })
}

/// `host:count,host:count` (Kafka's `max.connections.per.ip.overrides`); a host that is not
/// an IP address is resolved once, here.
fn parse_ip_overrides(value: &str) -> Result<BTreeMap<std::net::IpAddr, usize>, ConfigError> {
    let key = "max.connections.per.ip.overrides";
    let mut overrides = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |reason: &str| invalid(key, entry, reason);
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:count"))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a number"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<std::net::IpAddr> = match host.parse() {
            Ok(ip) => vec![ip],
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))
                .map_err(|e| bad(&format!("cannot resolve {host}: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        for ip in ips {
            overrides.insert(ip, count);
        }
    }
    Ok(overrides)
}

/// The `replica.*` settings, with Kafka 2.8's defaults.
fn replication_config(
    props: &BTreeMap<String, String>,
    broker_id: BrokerId,
) -> Result<replication::ReplicationConfig, ConfigError> {
    let d = replication::ReplicationConfig::default();
    let config = replication::ReplicationConfig {
        broker_id,
        replica_lag_time_max_ms: parse_num(
            props,
            "replica.lag.time.max.ms",
            d.replica_lag_time_max_ms,
            1,
        )?,
        num_replica_fetchers: parse_num(props, "num.replica.fetchers", d.num_replica_fetchers, 1)?,
        replica_fetch_max_bytes: parse_num(
            props,
            "replica.fetch.max.bytes",
            d.replica_fetch_max_bytes,
            0,
        )?,
        replica_fetch_response_max_bytes: parse_num(
            props,
            "replica.fetch.response.max.bytes",
            d.replica_fetch_response_max_bytes,
            0,
        )?,
        replica_fetch_wait_max_ms: parse_num(
            props,
            "replica.fetch.wait.max.ms",
            d.replica_fetch_wait_max_ms,
            0,
        )?,
        replica_fetch_min_bytes: parse_num(
            props,
            "replica.fetch.min.bytes",
            d.replica_fetch_min_bytes,
            0,
        )?,
        replica_fetch_backoff_ms: parse_num(
            props,
            "replica.fetch.backoff.ms",
            d.replica_fetch_backoff_ms,
            0,
        )?,
        replica_socket_timeout_ms: parse_num(
            props,
            "replica.socket.timeout.ms",
            d.replica_socket_timeout_ms,
            1,
        )?,
        fetch_session_cache_slots: parse_num(
            props,
            "max.incremental.fetch.session.cache.slots",
            d.fetch_session_cache_slots,
            0,
        )?,
        ..d
    };
    // Kafka refuses a follower wait that cannot be answered within the lag time.
    if i64::from(config.replica_fetch_wait_max_ms) > config.replica_lag_time_max_ms {
        return Err(invalid(
            "replica.fetch.wait.max.ms",
            &config.replica_fetch_wait_max_ms.to_string(),
            "must not be larger than replica.lag.time.max.ms, or followers drop out of the ISR",
        ));
    }
    Ok(config)
}

/// The codec of `offsets.topic.compression.codec` (Kafka's ids: 0 none, 1 gzip, 2 snappy,
/// 3 lz4, 4 zstd).
pub(crate) fn offsets_compression(codec: i32) -> Option<records::Compression> {
    i16::try_from(codec)
        .ok()
        .and_then(records::Compression::from_id)
}

/// Reads `server.properties` text as Java's `Properties.load` does (the one reader,
/// `client::properties`), each value trimmed as Kafka's `ConfigDef` trims it; a key given
/// twice keeps its last value.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, client::PropertiesError> {
    Ok(client::parse_properties(text)?
        .into_iter()
        .map(|(key, value)| (key, value.trim().to_owned()))
        .collect())
}

fn is_topic_default_key(key: &str) -> bool {
    topic_key_for_broker_key(key).is_some()
}

fn topic_key_for_broker_key(key: &str) -> Option<&'static str> {
    model::topic_config::TOPIC_CONFIGS
        .iter()
        .find(|d| d.broker_key == Some(key))
        .map(|d| d.name)
}

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn parse_num<T>(
    props: &BTreeMap<String, String>,
    key: &str,
    default: T,
    min: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match props.get(key) {
        None => Ok(default),
        Some(value) => {
            let parsed: T = value
                .parse()
                .map_err(|_| invalid(key, value, "not a number in range"))?;
            if parsed < min {
                return Err(invalid(key, value, &format!("must be at least {min}")));
            }
            Ok(parsed)
        }
    }
}

fn parse_opt_num<T>(
    props: &BTreeMap<String, String>,
    key: &str,
    min: T,
) -> Result<Option<T>, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    if props.contains_key(key) {
        parse_num(props, key, min, min).map(Some)
    } else {
        Ok(None)
    }
}

/// The names `authorizer.class.name` accepts: Kafka's ACL authorizers and Gregor's alias.
pub const AUTHORIZER_NAMES: &[&str] = &[
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "gregor",
];

fn parse_authorizer(
    props: &BTreeMap<String, String>,
) -> Result<Option<security::acl::AuthorizerSettings>, ConfigError> {
    let name = props
        .get("authorizer.class.name")
        .map(|v| v.trim())
        .unwrap_or("");
    if name.is_empty() {
        return Ok(None);
    }
    if !AUTHORIZER_NAMES.contains(&name) {
        return Err(invalid(
            "authorizer.class.name",
            name,
            &format!(
                "Gregor's only authorizer is the ACL authorizer; use one of {}",
                AUTHORIZER_NAMES.join(", ")
            ),
        ));
    }
    let super_users = match props.get("super.users") {
        Some(text) => security::acl::AuthorizerSettings::parse_super_users(text)
            .map_err(|e| invalid("super.users", text, &e.0))?,
        None => Default::default(),
    };
    Ok(Some(security::acl::AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found: parse_bool(props, "allow.everyone.if.no.acl.found", false)?,
    }))
}

fn parse_bool(
    props: &BTreeMap<String, String>,
    key: &str,
    default: bool,
) -> Result<bool, ConfigError> {
    match props.get(key).map(|v| v.to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(invalid(key, &v, "expected true or false")),
    }
}

/// `listener.security.protocol.map`: `NAME:PROTOCOL,...`, names upper-cased; Kafka's default
/// maps each protocol's name to itself.
fn parse_protocol_map(
    value: Option<&str>,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let key = "listener.security.protocol.map";
    let Some(value) = value else {
        return Ok(security::protocol::default_protocol_map()
            .into_iter()
            .collect());
    };
    let mut map = BTreeMap::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, protocol) = item
            .split_once(':')
            .ok_or_else(|| invalid(key, item, "expected LISTENER_NAME:PROTOCOL"))?;
        let protocol: SecurityProtocol = protocol
            .parse()
            .map_err(|e: security::protocol::UnknownProtocol| invalid(key, item, &e.to_string()))?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The inter-broker and control-plane listener names, checked as Kafka's `KafkaConfig` does.
fn listener_roles(
    props: &BTreeMap<String, String>,
    protocols: &BTreeMap<String, SecurityProtocol>,
    listeners: &[Listener],
    advertised: Option<&[Listener]>,
) -> Result<(String, Option<String>), ConfigError> {
    let advertised_names: Vec<&str> = advertised
        .unwrap_or(listeners)
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    for name in &advertised_names {
        if !listeners.iter().any(|l| l.name == *name) {
            return Err(invalid(
                "advertised.listeners",
                name,
                &format!(
                    "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners ({})",
                    listener_names(listeners)
                ),
            ));
        }
    }
    let inter_broker = match (
        props.get("inter.broker.listener.name"),
        props.get("security.inter.broker.protocol"),
    ) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "inter.broker.listener.name",
                props["inter.broker.listener.name"].as_str(),
                "only one of inter.broker.listener.name and security.inter.broker.protocol should be set",
            ))
        }
        (Some(name), None) => {
            let name = name.trim().to_ascii_uppercase();
            if !protocols.contains_key(&name) {
                return Err(invalid(
                    "inter.broker.listener.name",
                    &name,
                    "not found in listener.security.protocol.map",
                ));
            }
            name
        }
        (None, protocol) => {
            let text = protocol.map(String::as_str).unwrap_or("PLAINTEXT");
            let protocol: SecurityProtocol = text.parse().map_err(
                |e: security::protocol::UnknownProtocol| {
                    invalid("security.inter.broker.protocol", text, &e.to_string())
                },
            )?;
            protocol.name().to_owned()
        }
    };
    if !advertised_names.contains(&inter_broker.as_str()) {
        return Err(invalid(
            "inter.broker.listener.name",
            &inter_broker,
            &format!(
                "inter.broker.listener.name must be a listener name defined in advertised.listeners. \
                 The valid options based on currently configured listeners are {}",
                advertised_names.join(",")
            ),
        ));
    }
    let control_plane = match props.get("control.plane.listener.name") {
        None => None,
        Some(name) => {
            let name = name.trim().to_ascii_uppercase();
            if !advertised_names.contains(&name.as_str()) {
                return Err(invalid(
                    "control.plane.listener.name",
                    &name,
                    &format!(
                        "control.plane.listener.name must be a listener name defined in advertised.listeners. \
                         The valid options based on currently configured listeners are {}",
                        advertised_names.join(",")
                    ),
                ));
            }
            if name == inter_broker {
                return Err(invalid(
                    "control.plane.listener.name",
                    &name,
                    "control.plane.listener.name, when defined, should have a different value from the inter broker listener name",
                ));
            }
            Some(name)
        }
    };
    Ok((inter_broker, control_plane))
}

fn listener_names(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .map(|l| l.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_listeners(
    key: &str,
    value: &str,
    protocols: &BTreeMap<String, SecurityProtocol>,
) -> Result<Vec<Listener>, ConfigError> {
    let mut listeners: Vec<Listener> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| invalid(key, item, "expected NAME://host:port"))?;
        let name = name.to_ascii_uppercase();
        let protocol = *protocols.get(&name).ok_or_else(|| {
            invalid(
                key,
                item,
                &format!("no security protocol defined for listener {name} in listener.security.protocol.map"),
            )
        })?;
        if listeners.iter().any(|l| l.name == name) {
            return Err(invalid(
                key,
                item,
                &format!("listener name {name} is used more than once"),
            ));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| invalid(key, item, "missing :port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| invalid(key, item, "port is not a number from 0 to 65535"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if key == "listeners" && port != 0 && listeners.iter().any(|l| l.port == port) {
            return Err(invalid(
                key,
                item,
                &format!("port {port} is used by two listeners"),
            ));
        }
        listeners.push(Listener {
            name,
            host: host.to_string(),
            port,
            protocol,
        });
    }
    if listeners.is_empty() {
        return Err(invalid(key, value, "must name at least one listener"));
    }
    Ok(listeners)
}

fn parse_admin_listener(value: &str) -> Result<Option<SocketAddr>, ConfigError> {
    if value.is_empty() || value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let value = value.trim_start_matches("http://");
    value.parse().map(Some).map_err(|_| {
        invalid(
            "admin.listener",
            value,
            "expected host:port (an IP address), or none",
        )
    })
}

/// The transaction coordinator's settings, Kafka's keys and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transaction.state.log.num.partitions` (50): partitions of `__transaction_state`.
    pub state_log_num_partitions: i32,
    /// `transaction.state.log.replication.factor` (3): its replication factor; creation
    /// waits until that many brokers are alive.
    pub state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr` (2): its `min.insync.replicas`.
    pub state_log_min_isr: i32,
    /// `transaction.state.log.segment.bytes` (100 MiB).
    pub state_log_segment_bytes: i32,
    /// `transaction.max.timeout.ms` (15 min): the largest `transaction.timeout.ms` a producer
    /// may ask for (INVALID_TRANSACTION_TIMEOUT above it).
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (7 days): a transactional id idle this long (no
    /// transaction open) is forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10 s): how often
    /// transactions past their timeout are looked for and aborted.
    pub abort_timed_out_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms` (1 h).
    pub remove_expired_interval_ms: u64,
    /// `transaction.partition.verification.enable` (true, KIP-890).
    pub partition_verification_enable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, overrides: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let mut props = parse_properties(text).unwrap();
        for o in overrides {
            let (k, v) = o.split_once('=').unwrap();
            props.insert(k.into(), v.into());
        }
        BrokerConfig::from_properties(props, Path::new("/d"))
    }

    #[test]
    fn defaults_match_kafka_and_issue() {
        let config = load("", &[]).unwrap();
        assert_eq!(config.broker_id, 0);
        assert_eq!(config.listener().bind_addr(), "127.0.0.1:9092");
        assert_eq!(config.log_dirs, vec![PathBuf::from("/d/logs")]);
        assert_eq!(config.metadata_log_dir, PathBuf::from("/d/metadata"));
        assert_eq!(config.num_partitions, 1);
        assert!(config.auto_create_topics_enable && config.delete_topic_enable);
        assert_eq!(config.file_delete_delay, Duration::from_millis(60_000));
        assert_eq!(config.socket_request_max_bytes, 104_857_600);
        assert_eq!(
            config.admin_listener,
            Some("127.0.0.1:9644".parse().unwrap())
        );
        assert_eq!(config.placement_strategy, assignment::Strategy::Balanced);
        assert_eq!(config.max_partitions_per_request, 10_000);
        assert_eq!(
            config.replication,
            replication::ReplicationConfig::default(),
            "replica.lag.time.max.ms=30000, one fetcher, 1 MiB per partition, 500 ms wait"
        );
    }

    #[test]
    fn replication_settings_and_their_checks() {
        let config = load(
            "",
            &[
                "broker.id=4",
                "replica.lag.time.max.ms=2000",
                "num.replica.fetchers=3",
                "replica.fetch.max.bytes=4096",
                "replica.fetch.wait.max.ms=100",
                "replica.fetch.min.bytes=10",
            ],
        )
        .unwrap();
        let r = &config.replication;
        assert_eq!(
            (
                r.broker_id,
                r.replica_lag_time_max_ms,
                r.num_replica_fetchers,
                r.replica_fetch_max_bytes,
                r.replica_fetch_wait_max_ms,
                r.replica_fetch_min_bytes
            ),
            (4, 2000, 3, 4096, 100, 10)
        );
        let err = load("", &["replica.lag.time.max.ms=100"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("replica.fetch.wait.max.ms"), "{err}");
        let err = load("", &["num.replica.fetchers=0"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("num.replica.fetchers"), "{err}");
    }

    #[test]
    fn properties_file_and_overrides() {
        let text = "# comment\nbroker.id=3\nlisteners = PLAINTEXT://:9093\nlog.dirs=/a,/b\n\
                    log.retention.ms: 1000\nbroker.rack r1\nnum.partitions=\\\n 4\n";
        let config = load(
            text,
            &[
                "broker.id=5",
                "placement.strategy=kafka",
                "max.partitions.per.request=500",
            ],
        )
        .unwrap();
        assert_eq!(config.max_partitions_per_request, 500);
        assert_eq!(config.controller_config().max_partitions_per_request, 500);
        assert_eq!(config.broker_id, 5);
        assert_eq!(config.listener().bind_addr(), "0.0.0.0:9093");
        assert_eq!(
            config.advertised_endpoints(|_| 9093),
            vec![AdvertisedEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9093,
                protocol: SecurityProtocol::Plaintext,
            }]
        );
        assert_eq!(
            config.log_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        // With log.dirs set, the store goes to the first of them (Kafka's KRaft default) ...
        assert_eq!(config.metadata_log_dir, PathBuf::from("/a"));
        assert_eq!(config.rack.as_deref(), Some("r1"));
        assert_eq!(config.num_partitions, 4);
        assert_eq!(
            config.topic_default("retention.ms"),
            Some(("log.retention.ms", "1000"))
        );
        assert_eq!(config.placement_strategy, assignment::Strategy::Kafka);
    }

    #[test]
    fn metadata_store_cache_bytes_defaults_to_the_store_s_and_is_checked() {
        let config = load("", &[]).unwrap();
        assert_eq!(
            config.metadata_store_cache_bytes,
            metastore::DEFAULT_CACHE_BYTES
        );
        let config = load("", &["metadata.store.cache.bytes=1048576"]).unwrap();
        assert_eq!(config.metadata_store_cache_bytes, 1_048_576);
        let err = load("", &["metadata.store.cache.bytes=-1"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("metadata.store.cache.bytes"), "{err}");
    }

    #[test]
    fn num_io_threads_defaults_to_kafka_s_and_is_checked() {
        assert_eq!(load("", &[]).unwrap().num_io_threads, 8);
        assert_eq!(load("num.io.threads=3\n", &[]).unwrap().num_io_threads, 3);
        let err = load("", &["num.io.threads=0"]).unwrap_err().to_string();
        assert!(err.contains("num.io.threads"), "{err}");
    }

    #[test]
    fn metadata_log_dir_is_set_or_follows_log_dirs() {
        let config = load("log.dir=/one\n", &["metadata.log.dir=/meta"]).unwrap();
        assert_eq!(config.metadata_log_dir, PathBuf::from("/meta"));
        let config = load("log.dir=/one\n", &[]).unwrap();
        assert_eq!(config.metadata_log_dir, PathBuf::from("/one"));
        let err = load("", &["metadata.log.dir= "]).unwrap_err().to_string();
        assert!(err.contains("metadata.log.dir"), "{err}");
    }

    #[test]
    fn shipped_server_properties_is_valid_and_all_defaults() {
        let text = include_str!("../../../config/server.properties");
        let props = parse_properties(text).unwrap();
        // Every key is commented out but the offsets topic's replication factor, which the
        // shipped file sets to 1 as Kafka's does (its default of 3 needs three brokers).
        assert_eq!(
            props,
            BTreeMap::from(
                [
                    ("offsets.topic.replication.factor", "1"),
                    ("transaction.state.log.replication.factor", "1"),
                    ("transaction.state.log.min.isr", "1"),
                ]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
            ),
            "every other key is commented out"
        );
        let shipped = BrokerConfig::from_properties(props, Path::new("./data")).unwrap();
        assert_eq!(shipped.offsets_topic_replication_factor, 1);
        assert_eq!(shipped.transactions.state_log_replication_factor, 1);
        let uncommented: String = text
            .lines()
            .map(|l| {
                l.strip_prefix('#')
                    .filter(|r| r.contains('=') && !r.starts_with(' '))
                    .unwrap_or("")
            })
            .filter(|l| {
                !l.is_empty()
                    && !l.starts_with("advertised.")
                    && !l.starts_with("zookeeper.connect")
            })
            .collect::<Vec<_>>()
            .join("\n");
        let config = BrokerConfig::from_properties(
            parse_properties(&uncommented).unwrap(),
            Path::new("./data"),
        )
        .unwrap();
        assert_eq!(config.listener().bind_addr(), "127.0.0.1:9092");

        // The commented examples (`#   key=value`) are real settings, and the inline PEM one
        // reads, through Java's format, as one value with spaces where its lines were.
        assert!(
            !text.contains("Only PLAINTEXT"),
            "SSL and SASL listeners work"
        );
        let examples: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("#   "))
            .map(|l| format!("{l}\n"))
            .collect();
        let examples = parse_properties(&examples).unwrap();
        for key in examples.keys() {
            assert!(
                KNOWN_KEYS.contains(&key.as_str()) || key.starts_with("listener.name."),
                "{key}"
            );
        }
        assert_eq!(
            examples.get("ssl.keystore.key").map(String::as_str),
            Some("-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w... -----END PRIVATE KEY-----")
        );
        assert!(examples
            .get("listeners")
            .is_some_and(|l| l.contains("EXTERNAL://")));
        assert_eq!(
            examples
                .get("listener.security.protocol.map")
                .map(String::as_str),
            Some("PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL")
        );
    }

    #[test]
    fn offsets_topic_settings_default_to_kafka_s_and_are_checked() {
        let config = load("", &[]).unwrap();
        assert_eq!(config.offsets_topic_num_partitions, 50);
        assert_eq!(config.offsets_topic_replication_factor, 3);
        assert_eq!(config.offsets_topic_segment_bytes, 104_857_600);
        assert_eq!(config.offsets_topic_compression_codec, 0);
        assert_eq!(config.offsets_commit_timeout, Duration::from_secs(5));
        assert_eq!(config.offsets_retention, Duration::from_secs(10_080 * 60));
        assert_eq!(
            config.offsets_retention_check_interval,
            Duration::from_secs(600)
        );
        let config = load(
            "offsets.retention.minutes=1\noffsets.retention.check.interval.ms=250\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.offsets_retention, Duration::from_secs(60));
        assert_eq!(
            config.offsets_retention_check_interval,
            Duration::from_millis(250)
        );
        for bad in [
            "offsets.retention.minutes=0",
            "offsets.retention.check.interval.ms=0",
        ] {
            assert!(load(bad, &[]).is_err(), "{bad}");
        }
        let config = load(
            "offsets.topic.num.partitions=3\noffsets.topic.compression.codec=4\n",
            &[],
        )
        .unwrap();
        assert_eq!(config.offsets_topic_num_partitions, 3);
        assert_eq!(config.offsets_topic_compression_codec, 4);
        for bad in [
            "offsets.topic.compression.codec=5",
            "offsets.topic.replication.factor=0",
            "offsets.topic.num.partitions=0",
        ] {
            let err = load("", &[bad]).unwrap_err().to_string();
            assert!(err.contains(bad.split('=').next().unwrap()), "{err}");
        }
    }

    #[test]
    fn bad_values_name_the_key() {
        for (o, key) in [
            ("num.partitions=0", "num.partitions"),
            ("broker.id=x", "broker.id"),
            ("listeners=FOO://h:1", "listeners"),
            (
                "security.inter.broker.protocol=SSL",
                "inter.broker.listener.name",
            ),
            ("delete.topic.enable=yes", "delete.topic.enable"),
            ("log.retention.ms=abc", "log.retention.ms"),
            ("placement.strategy=random", "placement.strategy"),
            ("max.partitions.per.request=0", "max.partitions.per.request"),
            ("admin.listener=localhost", "admin.listener"),
        ] {
            let err = load("", &[o]).unwrap_err().to_string();
            assert!(err.contains(key), "{o}: {err}");
        }
    }

    #[test]
    fn advertised_listener_port_zero_means_bound_port() {
        let hosts = |config: &BrokerConfig| -> Vec<(String, String, u16)> {
            config
                .advertised_endpoints(|_| 40001)
                .into_iter()
                .map(|e| (e.name, e.host, e.port))
                .collect()
        };
        let config = load("", &["listeners=PLAINTEXT://127.0.0.1:0"]).unwrap();
        assert_eq!(
            hosts(&config),
            [("PLAINTEXT".into(), "127.0.0.1".into(), 40001)]
        );
        let config = load("", &["advertised.listeners=PLAINTEXT://kafka.example:9092"]).unwrap();
        assert_eq!(
            hosts(&config),
            [("PLAINTEXT".into(), "kafka.example".into(), 9092)]
        );
    }

    #[test]
    fn named_listeners_with_their_protocols_and_roles() {
        let config = load(
            "",
            &[
                "listeners=client://:9092,INTERNAL://127.0.0.1:9093,CONTROL://127.0.0.1:9094",
                "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROL:PLAINTEXT",
                "inter.broker.listener.name=internal",
                "control.plane.listener.name=CONTROL",
            ],
        )
        .unwrap();
        let names: Vec<(&str, SecurityProtocol)> = config
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.protocol))
            .collect();
        assert_eq!(
            names,
            [
                ("CLIENT", SecurityProtocol::Plaintext),
                ("INTERNAL", SecurityProtocol::Plaintext),
                ("CONTROL", SecurityProtocol::Plaintext)
            ]
        );
        assert_eq!(config.inter_broker_listener_name(), "INTERNAL");
        assert_eq!(config.control_plane_listener_name(), "CONTROL");
        // security.inter.broker.protocol picks the listener named after the protocol.
        let config = load(
            "",
            &[
                "listeners=PLAINTEXT://:9092,INTERNAL://:9093",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "security.inter.broker.protocol=PLAINTEXT",
            ],
        )
        .unwrap();
        assert_eq!(config.inter_broker_listener_name(), "PLAINTEXT");
    }

    #[test]
    fn the_brokers_own_login_comes_from_the_listeners_jaas_line() {
        // SCRAM: listener.name.<l>.<mechanism>.sasl.jaas.config, as Kafka's
        // JaasContext.loadServerContext reads it.
        let config = load(
            "",
            &[
                "listeners=CLIENT://:9092,INTERNAL://:9093",
                "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                "inter.broker.listener.name=INTERNAL",
                "listener.name.internal.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                r#"listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";"#,
                r#"listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";"#,
            ],
        )
        .unwrap();
        let sasl = config.inter_broker_security.sasl.clone().unwrap();
        assert_eq!(
            (
                sasl.mechanism.as_str(),
                sasl.username.as_str(),
                sasl.password.as_str()
            ),
            ("SCRAM-SHA-512", "broker", "b-secret")
        );
        assert!(config.inter_broker_security.tls.is_none());
        assert_eq!(
            config.replication.inter_broker_security,
            config.inter_broker_security
        );
        assert_eq!(config.replication.inter_broker_listener, "INTERNAL");
        assert_eq!(config.control_plane_security, config.inter_broker_security);
        // PLAIN: the username/password options of the same line that lists the users; the
        // broker-wide sasl.jaas.config is Gregor's fallback.
        let config = load(
            "",
            &[
                "listeners=SASL_PLAINTEXT://:9092",
                "security.inter.broker.protocol=SASL_PLAINTEXT",
                "sasl.enabled.mechanisms=PLAIN",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                r#"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="p" user_broker="p";"#,
            ],
        )
        .unwrap();
        let sasl = config.inter_broker_security.sasl.unwrap();
        assert_eq!(
            (sasl.mechanism.as_str(), sasl.username.as_str()),
            ("PLAIN", "broker")
        );
        // A PLAINTEXT inter-broker listener needs nothing.
        let config = load("", &[]).unwrap();
        assert_eq!(config.inter_broker_security, client::Security::default());
    }

    #[test]
    fn listener_mistakes_are_refused_as_kafka_refuses_them() {
        for (overrides, message) in [
            (vec!["listeners=A://:9093", "listener.security.protocol.map=A:PLAINTEXT"], "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
            (vec!["listeners=PLAINTEXT://:1,PLAINTEXT://:2"], "used more than once"),
            (vec!["listeners=PLAINTEXT://:1,B://:1", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,B:PLAINTEXT"], "port 1 is used by two listeners"),
            (vec!["listeners=A://:1", "listener.security.protocol.map=A:TLS"], "unknown security protocol"),
            (vec!["inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"], "only one of"),
            (vec!["control.plane.listener.name=PLAINTEXT"], "different value from the inter broker listener"),
            (vec!["advertised.listeners=SSL://h:1"], "subset"),
            (vec!["listeners=SASL_PLAINTEXT://:2", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN"], "GSSAPI is not supported (Kafka's default; Gregor has no Kerberos)"),
            (vec!["listeners=SASL_PLAINTEXT://:2", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"], "must be included in sasl.enabled.mechanisms"),
            (vec!["listeners=SASL_PLAINTEXT://:2", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"], "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"),
            (vec!["listeners=SASL_PLAINTEXT://:2", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512", "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\";"], "no username and password options"),
            (vec!["listeners=SSL://:2", "security.inter.broker.protocol=SSL"], "need the CA that signed their certificates, in ssl.truststore.location"),
        ] {
            let err = load("", &overrides).unwrap_err().to_string();
            assert!(err.contains(message), "{overrides:?}: {err}");
        }
    }
}
