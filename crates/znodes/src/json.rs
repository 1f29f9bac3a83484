//! The Kafka 2.8 JSON of every znode, as serde structs (plus Kafka 3.9's
//! `leader_recovery_state` in a partition's state, KIP-704).
//!
//! Field order in each struct is the order written (and matches the SPEC's examples byte
//! for byte); maps keyed by partition use `BTreeMap<i32, _>`, which serde_json writes as
//! string keys (`"0"`, `"1"`, ... `"10"`) in numeric order. Timestamps are decimal strings,
//! as Kafka writes them. Reading ignores unknown fields and accepts older versions.

use std::collections::BTreeMap;

use model::{BrokerId, LeaderRecoveryState, TopicId};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// Why a znode's data could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not the expected JSON.
    #[error("invalid {what} JSON: {source}")]
    Json {
        /// Which znode format was expected.
        what: &'static str,
        /// The parse error.
        source: serde_json::Error,
    },
    /// A plain-text znode (controller epoch, consumer offset) that is not a number.
    #[error("invalid {what}: '{text}' is not a number")]
    NotANumber {
        /// Which znode format was expected.
        what: &'static str,
        /// The data, lossily decoded.
        text: String,
    },
}

/// Encoding and decoding shared by every JSON znode.
pub trait ZnodeJson: Serialize + DeserializeOwned {
    /// A short name for error messages.
    const WHAT: &'static str;

    /// The compact JSON Kafka writes.
    fn to_json_bytes(&self) -> Vec<u8> {
        // Serializing these plain structs to a Vec cannot fail: every map key is a string or
        // an integer and no custom Serialize impl returns an error. Writing empty data to the
        // store instead would be a silent corruption, so a bug here must be loud.
        serde_json::to_vec(self).expect("znode JSON structs always serialize")
    }

    /// Parses a znode's data.
    fn from_json_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        serde_json::from_slice(bytes).map_err(|source| FormatError::Json {
            what: Self::WHAT,
            source,
        })
    }
}

/// `/brokers/ids/<id>`: a live broker's registration (Kafka's `BrokerIdZNode`, version 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Format version; Kafka 2.8 writes 5.
    pub version: i32,
    /// Host of the PLAINTEXT listener, or `null` when there is none.
    pub host: Option<String>,
    /// Port of the PLAINTEXT listener, or -1.
    pub port: i32,
    /// Every listener as `NAME://host:port`.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// Listener name -> security protocol.
    #[serde(default)]
    pub listener_security_protocol_map: BTreeMap<String, String>,
    /// JMX port, -1 when disabled.
    #[serde(default = "minus_one")]
    pub jmx_port: i32,
    /// `broker.rack`; omitted when the broker has none, as Kafka does (a `null` reads as none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Registration time, milliseconds since the epoch, written as a string.
    #[serde(with = "string_i64")]
    pub timestamp: i64,
    /// Supported feature versions (version 5). Kafka 2.8 writes `{}`; omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<String, serde_json::Value>>,
}

impl ZnodeJson for BrokerRegistration {
    const WHAT: &'static str = "broker registration";
}

impl BrokerRegistration {
    /// A version 5 registration for PLAINTEXT listeners: `host`/`port` come from the first
    /// listener, every listener maps to the PLAINTEXT protocol.
    pub fn plaintext(host: &str, port: u16, rack: Option<String>, timestamp_ms: i64) -> Self {
        BrokerRegistration {
            version: 5,
            host: Some(host.to_owned()),
            port: i32::from(port),
            endpoints: vec![format!("PLAINTEXT://{host}:{port}")],
            listener_security_protocol_map: BTreeMap::from([(
                "PLAINTEXT".to_owned(),
                "PLAINTEXT".to_owned(),
            )]),
            jmx_port: -1,
            rack,
            timestamp: timestamp_ms,
            features: None,
        }
    }

    /// A version 5 registration of `endpoints` (listener name, host, port, security protocol
    /// name), as Kafka writes it: `host`/`port` are those of the first endpoint whose protocol
    /// is PLAINTEXT (for clients that only know the top-level fields), else `null`/-1.
    pub fn new(
        endpoints: &[(String, String, u16, String)],
        rack: Option<String>,
        timestamp_ms: i64,
    ) -> Self {
        let plaintext = endpoints.iter().find(|(_, _, _, p)| p == "PLAINTEXT");
        BrokerRegistration {
            version: 5,
            host: plaintext.map(|(_, host, _, _)| host.clone()),
            port: plaintext.map_or(-1, |(_, _, port, _)| i32::from(*port)),
            endpoints: endpoints
                .iter()
                .map(|(name, host, port, _)| format!("{name}://{host}:{port}"))
                .collect(),
            listener_security_protocol_map: endpoints
                .iter()
                .map(|(name, _, _, protocol)| (name.clone(), protocol.clone()))
                .collect(),
            jmx_port: -1,
            rack,
            timestamp: timestamp_ms,
            features: None,
        }
    }

    /// Every endpoint as (listener name, host, port); endpoints that do not parse are skipped.
    pub fn parsed_endpoints(&self) -> Vec<(String, String, u16)> {
        self.endpoints
            .iter()
            .filter_map(|e| {
                let (name, rest) = e.split_once("://")?;
                let (host, port) = rest.rsplit_once(':')?;
                Some((
                    name.to_owned(),
                    host.trim_matches(['[', ']']).to_owned(),
                    port.parse().ok()?,
                ))
            })
            .collect()
    }
}

/// `/brokers/topics/<t>`: a topic's replica assignment (Kafka's `TopicZNode`, version 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicAssignment {
    /// Format version: 3 with a topic id, 2 without, 1 for the oldest writers.
    pub version: i32,
    /// The topic id (version 3); absent in older versions.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_topic_id"
    )]
    pub topic_id: Option<TopicId>,
    /// Partition -> replicas, the first replica the preferred leader.
    pub partitions: BTreeMap<i32, Vec<BrokerId>>,
    /// Replicas being added by an ongoing reassignment, per partition (version 2+).
    #[serde(default)]
    pub adding_replicas: BTreeMap<i32, Vec<BrokerId>>,
    /// Replicas being removed by an ongoing reassignment, per partition (version 2+).
    #[serde(default)]
    pub removing_replicas: BTreeMap<i32, Vec<BrokerId>>,
    /// Gregor's own field: the replicas a partition had before its ongoing reassignment, in
    /// their order. Kafka keeps only their set (`partitions` minus `adding_replicas`, in the
    /// target's order), so its cancel can change the first replica, the preferred leader; a
    /// cancel here restores this list exactly. Written only while a partition moves; Kafka's
    /// readers ignore it, and without it the set is read as Kafka reads it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub original_replicas: BTreeMap<i32, Vec<BrokerId>>,
}

impl ZnodeJson for TopicAssignment {
    const WHAT: &'static str = "topic assignment";
}

impl TopicAssignment {
    /// A version 3 assignment with no reassignment in progress.
    pub fn new(topic_id: TopicId, partitions: BTreeMap<i32, Vec<BrokerId>>) -> Self {
        TopicAssignment {
            version: 3,
            topic_id: Some(topic_id),
            partitions,
            adding_replicas: BTreeMap::new(),
            removing_replicas: BTreeMap::new(),
            original_replicas: BTreeMap::new(),
        }
    }
}

/// `/brokers/topics/<t>/partitions/<p>/state` (Kafka's `TopicPartitionStateZNode`).
///
/// Kafka 3.9 adds `leader_recovery_state` (KIP-704) only when it is RECOVERING (`1`), and
/// reads a state without it (Kafka 2.8's) as RECOVERED; any other value is refused, as
/// Kafka's `LeaderRecoveryState.of` refuses it. The field order is the one Kafka 3.9 (Scala
/// 2.13) writes: its `HashMap` iterates these six keys as `controller_epoch`, `leader`,
/// `version`, `leader_recovery_state`, `leader_epoch`, `isr` (and without the fifth, as
/// Kafka 2.8's well-known `{"controller_epoch":..,"leader":..,"version":1,..}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateZNode {
    /// Epoch of the controller that wrote this state.
    pub controller_epoch: i32,
    /// The leader, or -1 when none.
    pub leader: BrokerId,
    /// Format version: 1.
    pub version: i32,
    /// KIP-704: RECOVERING after an unclean election until the leader reports RECOVERED.
    #[serde(
        default,
        skip_serializing_if = "LeaderRecoveryState::is_recovered",
        with = "recovery_state"
    )]
    pub leader_recovery_state: LeaderRecoveryState,
    /// Bumped at every leader change.
    pub leader_epoch: i32,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
}

impl ZnodeJson for PartitionStateZNode {
    const WHAT: &'static str = "partition state";
}

impl PartitionStateZNode {
    /// A version 1 state.
    pub fn new(
        controller_epoch: i32,
        leader: BrokerId,
        leader_epoch: i32,
        isr: Vec<BrokerId>,
    ) -> Self {
        PartitionStateZNode {
            controller_epoch,
            leader,
            version: 1,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch,
            isr,
        }
    }

    /// The same state with `leader_recovery_state` set.
    pub fn with_leader_recovery_state(mut self, state: LeaderRecoveryState) -> Self {
        self.leader_recovery_state = state;
        self
    }
}

/// `/controller`: the active controller (Kafka's `ControllerZNode`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerZNode {
    /// Format version: 1.
    pub version: i32,
    /// The controller's broker id.
    pub brokerid: BrokerId,
    /// Election time, milliseconds since the epoch, as a string.
    #[serde(with = "string_i64")]
    pub timestamp: i64,
}

impl ZnodeJson for ControllerZNode {
    const WHAT: &'static str = "controller";
}

impl ControllerZNode {
    /// A version 1 controller node.
    pub fn new(brokerid: BrokerId, timestamp_ms: i64) -> Self {
        ControllerZNode {
            version: 1,
            brokerid,
            timestamp: timestamp_ms,
        }
    }
}

/// `/controller_epoch`: the election count as plain decimal text (`1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ControllerEpochZNode(pub i32);

impl ControllerEpochZNode {
    /// The decimal text.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.to_string().into_bytes()
    }

    /// Parses the decimal text (surrounding whitespace allowed).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        parse_number("controller epoch", bytes).map(ControllerEpochZNode)
    }
}

/// `/consumers/<group>/offsets/<t>/<p>`: a committed offset as decimal text.
pub fn encode_consumer_offset(offset: i64) -> Vec<u8> {
    offset.to_string().into_bytes()
}

/// Parses a committed offset.
pub fn decode_consumer_offset(bytes: &[u8]) -> Result<i64, FormatError> {
    parse_number("consumer offset", bytes)
}

/// `/config/topics/<t>` (and other config entities): `{"version":1,"config":{...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfigZNode {
    /// Format version: 1.
    pub version: i32,
    /// Override key -> value, both strings.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

impl ZnodeJson for TopicConfigZNode {
    const WHAT: &'static str = "topic config";
}

impl TopicConfigZNode {
    /// A version 1 config node.
    pub fn new(config: BTreeMap<String, String>) -> Self {
        TopicConfigZNode { version: 1, config }
    }
}

/// `/config/changes/config_change_<seq>`: tells brokers an entity's config changed. Kafka
/// writes version 2 (`entity_path`); version 1 (`entity_type` + `entity_name`) is still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChangeNotification {
    /// Format version: 2.
    pub version: i32,
    /// `<entity type>/<name>`, e.g. `topics/orders`, `users/alice/clients/app` (version 2).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub entity_path: String,
    /// Version 1: the entity type (`topics`, `clients`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_type: Option<String>,
    /// Version 1: the entity's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_name: Option<String>,
}

impl ZnodeJson for ConfigChangeNotification {
    const WHAT: &'static str = "config change notification";
}

impl ConfigChangeNotification {
    /// A version 2 notification for a topic.
    pub fn topic(topic: &model::TopicName) -> Self {
        ConfigChangeNotification::entity(format!("topics/{topic}"))
    }

    /// A version 2 notification for `entity_path` (`<type>/<name>[/<type>/<name>]`).
    pub fn entity(entity_path: String) -> Self {
        ConfigChangeNotification {
            version: 2,
            entity_path,
            entity_type: None,
            entity_name: None,
        }
    }

    /// The changed entity's path, `<type>/<name>`, whichever version wrote it.
    pub fn changed_entity_path(&self) -> Option<String> {
        if !self.entity_path.is_empty() {
            return Some(self.entity_path.clone());
        }
        match (&self.entity_type, &self.entity_name) {
            (Some(kind), Some(name)) => Some(format!("{kind}/{name}")),
            _ => None,
        }
    }
}

/// One partition of a [`ReassignPartitions`] request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignmentEntry {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The target replica list.
    pub replicas: Vec<BrokerId>,
}

/// `/admin/reassign_partitions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignPartitions {
    /// Format version: 1.
    pub version: i32,
    /// The partitions to move.
    pub partitions: Vec<ReassignmentEntry>,
}

impl ZnodeJson for ReassignPartitions {
    const WHAT: &'static str = "partition reassignment";
}

/// One partition of a [`PreferredReplicaElection`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionEntry {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

/// `/admin/preferred_replica_election`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferredReplicaElection {
    /// Format version: 1.
    pub version: i32,
    /// The partitions whose preferred replica should lead.
    pub partitions: Vec<ElectionEntry>,
}

impl ZnodeJson for PreferredReplicaElection {
    const WHAT: &'static str = "preferred replica election";
}

/// `/consumers/<group>/ids/<member>`: an old-style consumer's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerMemberZNode {
    /// Format version: 1.
    pub version: i32,
    /// Topic (or pattern) -> number of consumer threads.
    pub subscription: BTreeMap<String, i32>,
    /// `static`, `white_list` or `black_list`.
    pub pattern: String,
    /// Registration time, milliseconds since the epoch, as a string.
    #[serde(with = "string_i64")]
    pub timestamp: i64,
}

impl ZnodeJson for ConsumerMemberZNode {
    const WHAT: &'static str = "consumer member";
}

/// `/cluster/id`: `{"version":"1","id":"..."}` (the version is a string in Kafka).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdZNode {
    /// Format version: `"1"`.
    pub version: String,
    /// The cluster id (Kafka uses a random UUID in URL-safe base64).
    pub id: String,
}

impl ZnodeJson for ClusterIdZNode {
    const WHAT: &'static str = "cluster id";
}

impl ClusterIdZNode {
    /// A version "1" node.
    pub fn new(id: impl Into<String>) -> Self {
        ClusterIdZNode {
            version: "1".to_owned(),
            id: id.into(),
        }
    }
}

/// `/latest_producer_id_block`: the last block of producer ids a broker claimed (Kafka's
/// `ProducerIdBlockZNode`, version 1): `{"version":1,"broker":0,"block_start":"0",
/// "block_end":"999"}`, the bounds written as decimal strings (a bare number is accepted on
/// read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlockZNode {
    /// Format version; Kafka writes 1.
    pub version: i32,
    /// The broker that claimed the block.
    pub broker: BrokerId,
    /// The first id of the block.
    #[serde(with = "string_i64")]
    pub block_start: i64,
    /// The last id of the block (inclusive).
    #[serde(with = "string_i64")]
    pub block_end: i64,
}

impl ZnodeJson for ProducerIdBlockZNode {
    const WHAT: &'static str = "producer id block";
}

impl ProducerIdBlockZNode {
    /// A version 1 block `[block_start, block_end]` claimed by `broker`.
    pub fn new(broker: BrokerId, block_start: i64, block_end: i64) -> Self {
        ProducerIdBlockZNode {
            version: 1,
            broker,
            block_start,
            block_end,
        }
    }
}

fn minus_one() -> i32 {
    -1
}

fn parse_number<T: std::str::FromStr>(what: &'static str, bytes: &[u8]) -> Result<T, FormatError> {
    let text = String::from_utf8_lossy(bytes);
    text.trim().parse().map_err(|_| FormatError::NotANumber {
        what,
        text: text.into_owned(),
    })
}

/// Milliseconds written as a JSON string (`"1633072800000"`); a bare number is accepted on read.
mod string_i64 {
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum StringOrNumber {
        String(String),
        Number(i64),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        match StringOrNumber::deserialize(d)? {
            StringOrNumber::String(s) => s.trim().parse().map_err(de::Error::custom),
            StringOrNumber::Number(n) => Ok(n),
        }
    }
}

/// A leader recovery state as Kafka's number (0 RECOVERED, 1 RECOVERING).
mod recovery_state {
    use model::LeaderRecoveryState;
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &LeaderRecoveryState,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_i32(i32::from(value.value()))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<LeaderRecoveryState, D::Error> {
        let value = i64::deserialize(d)?;
        i8::try_from(value)
            .ok()
            .and_then(LeaderRecoveryState::from_value)
            .ok_or_else(|| {
                de::Error::custom(format!(
                    "leader_recovery_state {value} is not a leader recovery state (0 RECOVERED, 1 RECOVERING)"
                ))
            })
    }
}

/// A topic id as its 22-character base64 text.
mod opt_topic_id {
    use model::TopicId;
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<TopicId>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(id) => s.collect_str(id),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<TopicId>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| s.parse().map_err(de::Error::custom))
            .transpose()
    }
}
