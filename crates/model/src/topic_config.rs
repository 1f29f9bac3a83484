//! Kafka 2.8's topic-level configs: every key, its type, default, valid values and the
//! broker-level key it defaults from, plus [`TopicConfig`], the validated overrides of one
//! topic (what `/config/topics/<t>` holds).
//!
//! Error messages follow Kafka's `ConfigDef`: `Invalid value abc for configuration
//! retention.ms: Not a number of type LONG`.

use std::collections::BTreeMap;
use std::fmt;

/// Why a topic config key or value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a topic-level config.
    #[error("Unknown topic config name: {0}")]
    UnknownKey(String),
    /// The value does not parse as the key's type or falls outside its valid values.
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        /// The config key.
        key: String,
        /// The refused value, as given.
        value: String,
        /// Kafka's explanation (`Not a number of type LONG`, `Value must be at least 0`, ...).
        reason: String,
    },
}

/// The type of a config value, with Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` or `false` (case-insensitive).
    Boolean,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A 64-bit float.
    Double,
    /// A string.
    String,
    /// A comma-separated list of strings.
    List,
}

impl fmt::Display for ConfigType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
        })
    }
}

/// Which values of the right type are accepted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Validator {
    /// Any value of the type.
    Any,
    /// A number no smaller than this.
    AtLeast(i64),
    /// A number within `min..=max`.
    Between(f64, f64),
    /// One of these strings (case-sensitive, as Kafka 2.8).
    OneOf(&'static [&'static str]),
    /// A list whose every item is one of these strings.
    ListOf(&'static [&'static str]),
    /// `*` or a list of `partition:broker` pairs (the replication throttle lists).
    ThrottledReplicas,
    /// A Kafka message format / inter-broker protocol version such as `2.8` or `0.10.2-IV0`.
    ApiVersion,
}

/// One topic-level config key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigDef {
    /// The topic-level key, e.g. `retention.ms`.
    pub name: &'static str,
    /// Its type.
    pub ty: ConfigType,
    /// Kafka's default, as `DescribeConfigs` shows it when neither topic nor broker overrides.
    pub default: &'static str,
    /// Valid values.
    pub validator: Validator,
    /// The broker-level key whose value is the default for every topic (`log.retention.ms`),
    /// if any.
    pub broker_key: Option<&'static str>,
}

const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
const LONG_MAX: &str = "9223372036854775807";

const fn def(
    name: &'static str,
    ty: ConfigType,
    default: &'static str,
    validator: Validator,
    broker_key: Option<&'static str>,
) -> ConfigDef {
    ConfigDef {
        name,
        ty,
        default,
        validator,
        broker_key,
    }
}

/// Every topic-level config of Kafka 2.8, sorted by key.
pub const TOPIC_CONFIGS: &[ConfigDef] = {
    use ConfigType::*;
    use Validator::*;
    &[
        def(
            "cleanup.policy",
            List,
            "delete",
            ListOf(CLEANUP_POLICIES),
            Some("log.cleanup.policy"),
        ),
        def(
            "compression.type",
            String,
            "producer",
            OneOf(COMPRESSION_TYPES),
            Some("compression.type"),
        ),
        def(
            "delete.retention.ms",
            Long,
            "86400000",
            AtLeast(0),
            Some("log.cleaner.delete.retention.ms"),
        ),
        def(
            "file.delete.delay.ms",
            Long,
            "60000",
            AtLeast(0),
            Some("log.segment.delete.delay.ms"),
        ),
        def(
            "flush.messages",
            Long,
            LONG_MAX,
            AtLeast(0),
            Some("log.flush.interval.messages"),
        ),
        def(
            "flush.ms",
            Long,
            LONG_MAX,
            AtLeast(0),
            Some("log.flush.interval.ms"),
        ),
        // The throttle lists have no broker-wide default: they name this topic's replicas.
        def(
            "follower.replication.throttled.replicas",
            List,
            "",
            ThrottledReplicas,
            None,
        ),
        def(
            "index.interval.bytes",
            Int,
            "4096",
            AtLeast(0),
            Some("log.index.interval.bytes"),
        ),
        def(
            "leader.replication.throttled.replicas",
            List,
            "",
            ThrottledReplicas,
            None,
        ),
        def(
            "max.compaction.lag.ms",
            Long,
            LONG_MAX,
            AtLeast(1),
            Some("log.cleaner.max.compaction.lag.ms"),
        ),
        def(
            "max.message.bytes",
            Int,
            "1048588",
            AtLeast(0),
            Some("message.max.bytes"),
        ),
        def(
            "message.downconversion.enable",
            Boolean,
            "true",
            Any,
            Some("log.message.downconversion.enable"),
        ),
        def(
            "message.format.version",
            String,
            "2.8-IV1",
            ApiVersion,
            Some("log.message.format.version"),
        ),
        def(
            "message.timestamp.difference.max.ms",
            Long,
            LONG_MAX,
            AtLeast(0),
            Some("log.message.timestamp.difference.max.ms"),
        ),
        def(
            "message.timestamp.type",
            String,
            "CreateTime",
            OneOf(TIMESTAMP_TYPES),
            Some("log.message.timestamp.type"),
        ),
        def(
            "min.cleanable.dirty.ratio",
            Double,
            "0.5",
            Between(0.0, 1.0),
            Some("log.cleaner.min.cleanable.ratio"),
        ),
        def(
            "min.compaction.lag.ms",
            Long,
            "0",
            AtLeast(0),
            Some("log.cleaner.min.compaction.lag.ms"),
        ),
        def(
            "min.insync.replicas",
            Int,
            "1",
            AtLeast(1),
            Some("min.insync.replicas"),
        ),
        def(
            "preallocate",
            Boolean,
            "false",
            Any,
            Some("log.preallocate"),
        ),
        def(
            "retention.bytes",
            Long,
            "-1",
            Any,
            Some("log.retention.bytes"),
        ),
        def(
            "retention.ms",
            Long,
            "604800000",
            AtLeast(-1),
            Some("log.retention.ms"),
        ),
        // 14 bytes is the smallest legacy record (Kafka's LegacyRecord.RECORD_OVERHEAD_V0).
        def(
            "segment.bytes",
            Int,
            "1073741824",
            AtLeast(14),
            Some("log.segment.bytes"),
        ),
        def(
            "segment.index.bytes",
            Int,
            "10485760",
            AtLeast(0),
            Some("log.index.size.max.bytes"),
        ),
        def(
            "segment.jitter.ms",
            Long,
            "0",
            AtLeast(0),
            Some("log.roll.jitter.ms"),
        ),
        def(
            "segment.ms",
            Long,
            "604800000",
            AtLeast(1),
            Some("log.roll.ms"),
        ),
        def(
            "unclean.leader.election.enable",
            Boolean,
            "false",
            Any,
            Some("unclean.leader.election.enable"),
        ),
    ]
};

/// The definition of a topic-level key, if it is one.
pub fn definition(key: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == key)
}

/// Checks that `key` is a topic-level config and `value` a valid value for it.
pub fn validate(key: &str, value: &str) -> Result<(), ConfigError> {
    let def = definition(key).ok_or_else(|| ConfigError::UnknownKey(key.to_owned()))?;
    check_value(def, value).map_err(|reason| ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    })
}

/// Validated topic-level overrides of one topic (the `config` object of
/// `/config/topics/<t>`), with typed getters that fall back to Kafka's defaults.
///
/// Broker-level defaults (`log.retention.ms` set in `server.properties`) are not applied
/// here; the broker layers its own config under these overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// No overrides: every getter returns Kafka's default.
    pub fn new() -> Self {
        TopicConfig::default()
    }

    /// Validates every pair; the first bad key or value is the error.
    pub fn from_overrides<K, V>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut config = TopicConfig::new();
        for (key, value) in pairs {
            config.set(key, value)?;
        }
        Ok(config)
    }

    /// Validates and sets one override.
    pub fn set(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), ConfigError> {
        let (key, value) = (key.into(), value.into());
        validate(&key, &value)?;
        self.overrides.insert(key, value);
        Ok(())
    }

    /// Removes one override, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.overrides.remove(key)
    }

    /// The overrides, sorted by key.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The override for `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.overrides.get(key).map(String::as_str)
    }

    /// The override for `key`, or Kafka's default for it; `None` for unknown keys.
    pub fn value_or_default(&self, key: &str) -> Option<&str> {
        self.get(key).or_else(|| definition(key).map(|d| d.default))
    }

    /// `cleanup.policy` as a list (`["delete"]` by default).
    pub fn cleanup_policy(&self) -> Vec<String> {
        split_list(self.str_value("cleanup.policy"))
            .into_iter()
            .map(str::to_owned)
            .collect()
    }
    /// Whether `cleanup.policy` includes `compact`.
    pub fn compact(&self) -> bool {
        split_list(self.str_value("cleanup.policy")).contains(&"compact")
    }
    /// Whether `cleanup.policy` includes `delete`.
    pub fn delete(&self) -> bool {
        split_list(self.str_value("cleanup.policy")).contains(&"delete")
    }
    /// `compression.type`.
    pub fn compression_type(&self) -> &str {
        self.str_value("compression.type").trim()
    }
    /// `delete.retention.ms`.
    pub fn delete_retention_ms(&self) -> i64 {
        self.number("delete.retention.ms")
    }
    /// `file.delete.delay.ms`.
    pub fn file_delete_delay_ms(&self) -> i64 {
        self.number("file.delete.delay.ms")
    }
    /// `flush.messages`.
    pub fn flush_messages(&self) -> i64 {
        self.number("flush.messages")
    }
    /// `flush.ms`.
    pub fn flush_ms(&self) -> i64 {
        self.number("flush.ms")
    }
    /// `index.interval.bytes`.
    pub fn index_interval_bytes(&self) -> i32 {
        self.number("index.interval.bytes")
    }
    /// `max.compaction.lag.ms`.
    pub fn max_compaction_lag_ms(&self) -> i64 {
        self.number("max.compaction.lag.ms")
    }
    /// `max.message.bytes`.
    pub fn max_message_bytes(&self) -> i32 {
        self.number("max.message.bytes")
    }
    /// `message.downconversion.enable`.
    pub fn message_downconversion_enable(&self) -> bool {
        self.boolean("message.downconversion.enable")
    }
    /// `message.format.version`.
    pub fn message_format_version(&self) -> &str {
        self.str_value("message.format.version").trim()
    }
    /// `message.timestamp.difference.max.ms`.
    pub fn message_timestamp_difference_max_ms(&self) -> i64 {
        self.number("message.timestamp.difference.max.ms")
    }
    /// `message.timestamp.type` (`CreateTime` or `LogAppendTime`).
    pub fn message_timestamp_type(&self) -> &str {
        self.str_value("message.timestamp.type").trim()
    }
    /// `min.cleanable.dirty.ratio`.
    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        self.number("min.cleanable.dirty.ratio")
    }
    /// `min.compaction.lag.ms`.
    pub fn min_compaction_lag_ms(&self) -> i64 {
        self.number("min.compaction.lag.ms")
    }
    /// `min.insync.replicas`.
    pub fn min_insync_replicas(&self) -> i32 {
        self.number("min.insync.replicas")
    }
    /// `preallocate`.
    pub fn preallocate(&self) -> bool {
        self.boolean("preallocate")
    }
    /// `retention.bytes` (-1: unlimited).
    pub fn retention_bytes(&self) -> i64 {
        self.number("retention.bytes")
    }
    /// `retention.ms` (-1: unlimited).
    pub fn retention_ms(&self) -> i64 {
        self.number("retention.ms")
    }
    /// `segment.bytes`.
    pub fn segment_bytes(&self) -> i32 {
        self.number("segment.bytes")
    }
    /// `segment.index.bytes`.
    pub fn segment_index_bytes(&self) -> i32 {
        self.number("segment.index.bytes")
    }
    /// `segment.jitter.ms`.
    pub fn segment_jitter_ms(&self) -> i64 {
        self.number("segment.jitter.ms")
    }
    /// `segment.ms`.
    pub fn segment_ms(&self) -> i64 {
        self.number("segment.ms")
    }
    /// `unclean.leader.election.enable`.
    pub fn unclean_leader_election_enable(&self) -> bool {
        self.boolean("unclean.leader.election.enable")
    }

    /// The override, else Kafka's default; "" only for a key missing from [`TOPIC_CONFIGS`],
    /// which the unit test `every_getter_key_is_defined` rules out for every getter.
    fn str_value(&self, key: &str) -> &str {
        self.get(key)
            .or_else(|| definition(key).map(|d| d.default))
            .unwrap_or_default()
    }

    fn number<T: std::str::FromStr + Default>(&self, key: &str) -> T {
        // Overrides were validated on the way in and every default parses (unit tests), so
        // the fallbacks are never taken.
        let default = || {
            definition(key)
                .and_then(|d| d.default.parse().ok())
                .unwrap_or_default()
        };
        self.str_value(key)
            .trim()
            .parse()
            .unwrap_or_else(|_| default())
    }

    fn boolean(&self, key: &str) -> bool {
        self.str_value(key).trim().eq_ignore_ascii_case("true")
    }
}

fn check_value(def: &ConfigDef, value: &str) -> Result<(), String> {
    let trimmed = value.trim();
    let not_a = || format!("Not a number of type {}", def.ty);
    match def.ty {
        ConfigType::Boolean => {
            if !(trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false")) {
                return Err("Expected value to be either true or false".to_owned());
            }
        }
        ConfigType::Int => check_range(
            def.validator,
            f64::from(trimmed.parse::<i32>().map_err(|_| not_a())?),
        )?,
        // i64 -> f64 loses precision only far beyond any bound we check.
        ConfigType::Long => check_range(
            def.validator,
            trimmed.parse::<i64>().map_err(|_| not_a())? as f64,
        )?,
        ConfigType::Double => {
            let v: f64 = trimmed.parse().map_err(|_| not_a())?;
            if !v.is_finite() {
                return Err(not_a());
            }
            check_range(def.validator, v)?
        }
        ConfigType::String => check_string(def.validator, trimmed)?,
        ConfigType::List => check_list(def.validator, trimmed)?,
    }
    Ok(())
}

fn check_range(validator: Validator, v: f64) -> Result<(), String> {
    match validator {
        Validator::AtLeast(min) if v < min as f64 => Err(format!("Value must be at least {min}")),
        Validator::Between(min, _) if v < min => Err(format!("Value must be at least {min}")),
        Validator::Between(_, max) if v > max => Err(format!("Value must be no more than {max}")),
        _ => Ok(()),
    }
}

fn check_string(validator: Validator, s: &str) -> Result<(), String> {
    match validator {
        Validator::OneOf(allowed) if !allowed.contains(&s) => {
            Err(format!("String must be one of: {}", allowed.join(", ")))
        }
        Validator::ApiVersion if !is_api_version(s) => {
            Err(format!("Version `{s}` is not a valid version"))
        }
        _ => Ok(()),
    }
}

fn check_list(validator: Validator, s: &str) -> Result<(), String> {
    let items = split_list(s);
    match validator {
        Validator::ListOf(allowed) => match items.iter().find(|item| !allowed.contains(item)) {
            Some(_) => Err(format!("String must be one of: {}", allowed.join(", "))),
            None => Ok(()),
        },
        Validator::ThrottledReplicas => {
            let pair = |item: &&str| {
                item.split_once(':').is_some_and(|(p, b)| {
                    p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                })
            };
            if items == ["*"] || items.iter().all(pair) {
                Ok(())
            } else {
                Err(
                    "must be the literal '*' or a list of replicas in the following format: \
                     [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                        .to_owned(),
                )
            }
        }
        _ => Ok(()),
    }
}

/// Kafka's list syntax: comma-separated, whitespace around items ignored, "" is empty.
fn split_list(s: &str) -> Vec<&str> {
    let s = s.trim();
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').map(str::trim).collect()
    }
}

/// Kafka's known versions (`ApiVersion.allVersions`), short forms and internal versions.
const API_VERSIONS: &[&str] = &[
    "0.8.0",
    "0.8.1",
    "0.8.2",
    "0.9.0",
    "0.10.0-IV0",
    "0.10.0-IV1",
    "0.10.0",
    "0.10.1-IV0",
    "0.10.1-IV1",
    "0.10.1-IV2",
    "0.10.1",
    "0.10.2-IV0",
    "0.10.2",
    "0.11.0-IV0",
    "0.11.0-IV1",
    "0.11.0-IV2",
    "0.11.0",
    "1.0-IV0",
    "1.0",
    "1.1-IV0",
    "1.1",
    "2.0-IV0",
    "2.0-IV1",
    "2.0",
    "2.1-IV0",
    "2.1-IV1",
    "2.1-IV2",
    "2.1",
    "2.2-IV0",
    "2.2-IV1",
    "2.2",
    "2.3-IV0",
    "2.3-IV1",
    "2.3",
    "2.4-IV0",
    "2.4-IV1",
    "2.4",
    "2.5-IV0",
    "2.5",
    "2.6-IV0",
    "2.6",
    "2.7-IV0",
    "2.7-IV1",
    "2.7-IV2",
    "2.7",
    "2.8-IV0",
    "2.8-IV1",
    "2.8",
];

/// Whether `s` names a Kafka version. Like Kafka, only the significant segments count
/// (`0.10.2.1` is `0.10.2`, `2.8.0` is `2.8`).
fn is_api_version(s: &str) -> bool {
    let segments: Vec<&str> = s.split('.').collect();
    let significant = if segments.first() == Some(&"0") { 3 } else { 2 };
    if segments.len() < significant {
        return false;
    }
    // Trailing segments beyond the significant ones must be numeric patch levels.
    if !segments[significant..]
        .iter()
        .all(|seg| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    API_VERSIONS.contains(&segments[..significant].join(".").as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_complete() {
        let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 26);
        for def in TOPIC_CONFIGS {
            assert_eq!(
                validate(def.name, def.default),
                Ok(()),
                "default of {} must be valid",
                def.name
            );
        }
        assert_eq!(
            definition("retention.ms").unwrap().broker_key,
            Some("log.retention.ms")
        );
        assert_eq!(
            definition("segment.ms").unwrap().broker_key,
            Some("log.roll.ms")
        );
    }

    #[test]
    fn messages_match_kafka() {
        let err = |k: &str, v: &str| validate(k, v).unwrap_err().to_string();
        assert_eq!(err("foo", "1"), "Unknown topic config name: foo");
        assert_eq!(
            err("retention.ms", "abc"),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            err("retention.ms", "-2"),
            "Invalid value -2 for configuration retention.ms: Value must be at least -1"
        );
        assert_eq!(
            err("segment.bytes", "3000000000"),
            "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"
        );
        assert_eq!(
            err("segment.bytes", "13"),
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14"
        );
        assert_eq!(
            err("preallocate", "yes"),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false"
        );
        assert_eq!(
            err("compression.type", "brotli"),
            "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
        );
        assert_eq!(
            err("cleanup.policy", "compact,archive"),
            "Invalid value compact,archive for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            err("min.cleanable.dirty.ratio", "1.5"),
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
        );
        assert!(err("message.format.version", "3.9").contains("is not a valid version"));
        assert!(err("leader.replication.throttled.replicas", "0:a").contains("the literal '*'"));
    }

    #[test]
    fn accepts_valid_values() {
        for (k, v) in [
            ("retention.ms", "600001"),
            ("retention.ms", " -1 "),
            ("retention.bytes", "-5"),
            ("cleanup.policy", "compact, delete"),
            ("cleanup.policy", ""),
            ("preallocate", "TRUE"),
            ("min.cleanable.dirty.ratio", "0"),
            ("message.format.version", "0.10.2.1"),
            ("message.format.version", "2.8.0"),
            ("message.format.version", "2.1-IV2"),
            ("leader.replication.throttled.replicas", "*"),
            ("follower.replication.throttled.replicas", "0:1,1:2"),
            ("max.compaction.lag.ms", "1"),
        ] {
            assert_eq!(validate(k, v), Ok(()), "{k}={v}");
        }
    }

    #[test]
    fn typed_getters_use_overrides_then_defaults() {
        let config = TopicConfig::from_overrides([
            ("retention.ms", "600001"),
            ("cleanup.policy", "compact"),
        ])
        .unwrap();
        assert_eq!(config.retention_ms(), 600_001);
        assert!(config.compact() && !config.delete());
        assert_eq!(config.segment_bytes(), 1_073_741_824);
        assert_eq!(config.file_delete_delay_ms(), 60_000);
        assert_eq!(config.min_cleanable_dirty_ratio(), 0.5);
        assert_eq!(config.flush_messages(), i64::MAX);
        assert!(config.message_downconversion_enable());
        assert!(!config.unclean_leader_election_enable());
        assert_eq!(config.message_timestamp_type(), "CreateTime");
        assert_eq!(config.value_or_default("segment.ms"), Some("604800000"));
        assert_eq!(config.value_or_default("nope"), None);
        assert_eq!(config.overrides().len(), 2);
        assert!(TopicConfig::from_overrides([("retention.ms", "x")]).is_err());
    }

    #[test]
    fn every_getter_key_is_defined() {
        // Each getter, on no overrides, must print exactly its key's table default: a typo
        // in a getter's key would give "" or 0 instead.
        let c = TopicConfig::new();
        let getters: Vec<(&str, String)> = vec![
            ("cleanup.policy", c.cleanup_policy().join(",")),
            ("compression.type", c.compression_type().to_owned()),
            ("delete.retention.ms", c.delete_retention_ms().to_string()),
            ("file.delete.delay.ms", c.file_delete_delay_ms().to_string()),
            ("flush.messages", c.flush_messages().to_string()),
            ("flush.ms", c.flush_ms().to_string()),
            ("index.interval.bytes", c.index_interval_bytes().to_string()),
            (
                "max.compaction.lag.ms",
                c.max_compaction_lag_ms().to_string(),
            ),
            ("max.message.bytes", c.max_message_bytes().to_string()),
            (
                "message.downconversion.enable",
                c.message_downconversion_enable().to_string(),
            ),
            (
                "message.format.version",
                c.message_format_version().to_owned(),
            ),
            (
                "message.timestamp.difference.max.ms",
                c.message_timestamp_difference_max_ms().to_string(),
            ),
            (
                "message.timestamp.type",
                c.message_timestamp_type().to_owned(),
            ),
            (
                "min.cleanable.dirty.ratio",
                c.min_cleanable_dirty_ratio().to_string(),
            ),
            (
                "min.compaction.lag.ms",
                c.min_compaction_lag_ms().to_string(),
            ),
            ("min.insync.replicas", c.min_insync_replicas().to_string()),
            ("preallocate", c.preallocate().to_string()),
            ("retention.bytes", c.retention_bytes().to_string()),
            ("retention.ms", c.retention_ms().to_string()),
            ("segment.bytes", c.segment_bytes().to_string()),
            ("segment.index.bytes", c.segment_index_bytes().to_string()),
            ("segment.jitter.ms", c.segment_jitter_ms().to_string()),
            ("segment.ms", c.segment_ms().to_string()),
            (
                "unclean.leader.election.enable",
                c.unclean_leader_election_enable().to_string(),
            ),
        ];
        for (key, value) in getters {
            assert_eq!(
                Some(value.as_str()),
                definition(key).map(|d| d.default),
                "{key}"
            );
        }
    }
}
