//! `gregor configs`: Kafka's `kafka-configs.sh --bootstrap-server`, as Kafka 2.8's
//! `ConfigCommand` does it:
//! - `--entity-type topics`: DescribeConfigs with synonyms (`--describe`, `--all`), and
//!   IncrementalAlterConfigs SET/DELETE for `--alter --add-config/--delete-config`.
//! - `--entity-type brokers` (a broker id, or `--entity-default` for the cluster-wide
//!   `/config/brokers/<default>`): DescribeConfigs with synonyms, and AlterConfigs (the legacy
//!   API) with the whole new set of dynamic configs, as kafka-configs.sh alters brokers.
//! - `--entity-type broker-loggers`: the broker's log levels (DescribeConfigs and
//!   IncrementalAlterConfigs of BROKER_LOGGER).
//! - `--entity-type users|clients`: client quotas (KIP-546: DescribeClientQuotas /
//!   AlterClientQuotas), the two combined (`--entity-type users --entity-name u --entity-type
//!   clients --entity-name c`) and default entities (`--entity-default`), and users' SCRAM
//!   credentials (KIP-554): `--alter --add-config
//!   'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`. A SCRAM password is salted and
//!   hashed on this side (PBKDF2), as Kafka's admin client does; the broker stores the result.
//!
//! Entity names pair with entity types by their order on the command line, as in
//! kafka-configs.sh: `--entity-default` stands for an empty name (the default entity). The
//! shorthands `--topic`, `--client`, `--user`, `--broker`, `--broker-logger` and
//! `--client-defaults`, `--user-defaults`, `--broker-defaults` stand for the type and name.
//! `--add-config-file` reads the configs to add from a properties file.
//!
//! Not supported: `--entity-type ips` (the broker has no IP connection quotas) and
//! `--zookeeper`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{ArgAction, ArgMatches, Args};
use client::{
    AdminClient, AlterConfigOp, ClientError, ConfigEntry, ConfigResourceKind, ConfigSource,
    QuotaEntity, QuotaMatch,
};
use security::scram::ScramMechanism;

/// Kafka's `DefaultScramIterations`.
const DEFAULT_ITERATIONS: u32 = 4096;

/// Kafka's `QuotaConfigs.isClientOrUserQuotaConfig` keys.
const QUOTA_KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
];

/// The entity types `kafka-configs.sh --bootstrap-server` knows, in its order.
const ENTITY_TYPES: [&str; 6] = [
    "topics",
    "clients",
    "users",
    "brokers",
    "ips",
    "broker-loggers",
];

/// The flags of `kafka-configs.sh` this command takes.
#[derive(Debug, Default, Clone, Args)]
#[command(
    about = "Add, delete or describe configs of topics, brokers, broker loggers, client quotas and users' SCRAM credentials (kafka-configs.sh)."
)]
pub struct ConfigsArgs {
    /// The Kafka server to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "command config property file"
    )]
    pub command_config: Option<PathBuf>,
    /// Type of entity (topics/clients/users/brokers/broker-loggers); `users` and `clients`
    /// may be given together.
    #[arg(long, value_name = "entity-type")]
    pub entity_type: Vec<String>,
    /// Name of entity (topic name/client id/user principal name/broker id), one per
    /// --entity-type, in order.
    #[arg(long, value_name = "entity-name")]
    pub entity_name: Vec<String>,
    /// Default entity name for clients/users/brokers (applies to the corresponding entity
    /// type in the command line).
    #[arg(long, action = ArgAction::Append, num_args = 0, default_missing_value = "",
        value_name = "")]
    pub entity_default: Vec<String>,
    /// List configs for the given entity.
    #[arg(long)]
    pub describe: bool,
    /// Alter the configuration for the entity.
    #[arg(long)]
    pub alter: bool,
    /// List all configs for the given topic, broker, or broker-logger entity (includes
    /// static configuration when the entity type is brokers).
    #[arg(long)]
    pub all: bool,
    /// Key Value pairs of configs to add. Square brackets group values which contain commas:
    /// 'k1=v1,k2=[v1,v2,v2],k3=v3', e.g. 'retention.ms=3600000',
    /// 'producer_byte_rate=1024' or 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'.
    #[arg(long, value_name = "key=value,...")]
    pub add_config: Option<String>,
    /// Path to a properties file with configs to add. See --add-config for valid configs.
    #[arg(long, value_name = "file")]
    pub add_config_file: Option<PathBuf>,
    /// Config keys to remove, e.g. 'retention.ms' or 'SCRAM-SHA-256,SCRAM-SHA-512'.
    #[arg(long, value_name = "key,...")]
    pub delete_config: Option<String>,
    /// Suppress console prompts (accepted; this command never prompts).
    #[arg(long)]
    pub force: bool,
    /// The topic's name (--entity-type topics --entity-name TOPIC).
    #[arg(long, value_name = "topic")]
    pub topic: Option<String>,
    /// The client's ID (--entity-type clients --entity-name CLIENT).
    #[arg(long, value_name = "client")]
    pub client: Option<String>,
    /// The config defaults for all clients.
    #[arg(long)]
    pub client_defaults: bool,
    /// The user's principal name (--entity-type users --entity-name USER).
    #[arg(long, value_name = "user")]
    pub user: Option<String>,
    /// The config defaults for all users.
    #[arg(long)]
    pub user_defaults: bool,
    /// The broker's ID (--entity-type brokers --entity-name ID).
    #[arg(long, value_name = "broker")]
    pub broker: Option<String>,
    /// The config defaults for all brokers.
    #[arg(long)]
    pub broker_defaults: bool,
    /// The broker's ID for its logger config (--entity-type broker-loggers --entity-name ID).
    #[arg(long, value_name = "broker-logger")]
    pub broker_logger: Option<String>,
    /// The IP address (refused: the broker has no IP connection quotas).
    #[arg(long, value_name = "ip")]
    pub ip: Option<String>,
    /// The config defaults for all IPs (refused: no IP connection quotas).
    #[arg(long)]
    pub ip_defaults: bool,
    /// The entity names in command-line order, "" for each --entity-default (filled from the
    /// parsed matches by [`ConfigsArgs::order_names`]; without it names come before defaults).
    #[arg(skip)]
    pub ordered_names: Option<Vec<String>>,
}

impl ConfigsArgs {
    /// Records the order of `--entity-name` and `--entity-default` on the command line, which
    /// clap's derived fields lose.
    pub fn order_names(&mut self, matches: &ArgMatches) {
        let mut names: Vec<(usize, String)> = Vec::new();
        if let (Some(indices), Some(values)) = (
            matches.indices_of("entity_name"),
            matches.get_many::<String>("entity_name"),
        ) {
            names.extend(indices.zip(values.cloned()));
        }
        // Each --entity-default is an empty value of its own, with its own index.
        if let Some(indices) = matches.indices_of("entity_default") {
            names.extend(indices.map(|i| (i, String::new())));
        }
        names.sort_by_key(|(i, _)| *i);
        self.ordered_names = Some(names.into_iter().map(|(_, n)| n).collect());
    }

    /// The shorthand flags given, as (entity type, name: "" for a defaults flag), in
    /// kafka-configs.sh's order: the named flags, then the defaults flags.
    fn entity_flags(&self) -> Vec<(&'static str, String)> {
        let named = [
            ("topics", &self.topic),
            ("clients", &self.client),
            ("users", &self.user),
            ("brokers", &self.broker),
            ("broker-loggers", &self.broker_logger),
            ("ips", &self.ip),
        ];
        let defaults = [
            ("clients", self.client_defaults),
            ("users", self.user_defaults),
            ("brokers", self.broker_defaults),
            ("ips", self.ip_defaults),
        ];
        named
            .into_iter()
            .filter_map(|(t, name)| name.clone().map(|n| (t, n)))
            .chain(
                defaults
                    .into_iter()
                    .filter(|(_, given)| *given)
                    .map(|(t, _)| (t, String::new())),
            )
            .collect()
    }

    /// kafka-configs.sh's `entityTypes`: `--entity-type` values, then the shorthand flags.
    fn types(&self) -> Vec<String> {
        let mut types = self.entity_type.clone();
        types.extend(self.entity_flags().into_iter().map(|(t, _)| t.to_owned()));
        types
    }

    /// kafka-configs.sh's `entityNames`: `--entity-name`/`--entity-default` in command-line
    /// order, then the shorthand flags' names.
    fn names(&self) -> Vec<String> {
        let mut names = self.ordered_names.clone().unwrap_or_else(|| {
            let mut names = self.entity_name.clone();
            names.extend(self.entity_default.iter().map(|_| String::new()));
            names
        });
        names.extend(self.entity_flags().into_iter().map(|(_, n)| n));
        names
    }
}

/// Splits `--add-config` as Kafka does: at commas outside `[...]`, each `key=value` with the
/// brackets removed from the value.
pub fn parse_add_config(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => items.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    items.push(current);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .map(|item| {
            // Kafka splits each item at every `=` outside brackets and wants two parts.
            let mut depth = 0usize;
            let mut equals = Vec::new();
            for (at, c) in item.char_indices() {
                match c {
                    '[' => depth += 1,
                    ']' => depth = depth.saturating_sub(1),
                    '=' if depth == 0 => equals.push(at),
                    _ => {}
                }
            }
            let [at] = equals[..] else {
                anyhow::bail!(
                    "Invalid entity config: all configs to be added must be in the format \"key=val\"."
                );
            };
            let (key, value) = (&item[..at], &item[at + 1..]);
            let value: String = value.chars().filter(|c| *c != '[' && *c != ']').collect();
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// `[iterations=<n>,]password=<p>` (Kafka's pattern); iterations default to 4096.
pub fn parse_credential(mechanism: ScramMechanism, value: &str) -> anyhow::Result<(u32, String)> {
    let (iterations, password) = match value.strip_prefix("iterations=") {
        Some(rest) => {
            let (n, rest) = rest.split_once(',').unwrap_or((rest, ""));
            let Some(password) = rest.strip_prefix("password=") else {
                bail!("Invalid credential property {}={value}", mechanism.name());
            };
            let n: i64 = n.parse().map_err(|_| {
                anyhow::anyhow!("Invalid credential property {}={value}", mechanism.name())
            })?;
            (
                if n == -1 {
                    DEFAULT_ITERATIONS as i64
                } else {
                    n
                },
                password,
            )
        }
        None => match value.strip_prefix("password=") {
            Some(password) => (DEFAULT_ITERATIONS as i64, password),
            None => bail!("Invalid credential property {}={value}", mechanism.name()),
        },
    };
    if iterations < ScramMechanism::MIN_ITERATIONS as i64 {
        bail!(
            "Iterations {iterations} is less than the minimum {} required for {}",
            ScramMechanism::MIN_ITERATIONS,
            mechanism.name()
        );
    }
    let iterations = u32::try_from(iterations).unwrap_or(u32::MAX);
    Ok((iterations, password.to_owned()))
}

/// Kafka's exception class name for an error code, as kafka-configs.sh prints it.
fn exception_name(err: &ClientError) -> &'static str {
    match err.code() {
        Some(91) => "ResourceNotFoundException",
        Some(92) => "DuplicateResourceException",
        Some(93) => "UnacceptableCredentialException",
        Some(33) => "UnsupportedSaslMechanismException",
        Some(31) => "ClusterAuthorizationException",
        Some(41) => "NotControllerException",
        Some(42) => "InvalidRequestException",
        Some(40) => "InvalidConfigurationException",
        Some(35) => "UnsupportedVersionException",
        Some(3) => "UnknownTopicOrPartitionException",
        Some(17) => "InvalidTopicException",
        Some(29) => "TopicAuthorizationException",
        Some(44) => "PolicyViolationException",
        _ => "KafkaException",
    }
}

/// Java's `Double.toString`, which kafka-configs.sh prints quota values with: `1024.0`,
/// `0.5`, `1.0E7` (scientific from 10^7 and below 10^-3).
pub fn java_double(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "NaN".to_owned()
        } else if value > 0.0 {
            "Infinity".to_owned()
        } else {
            "-Infinity".to_owned()
        };
    }
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = format!("{value}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        // Rust's `{:e}` is the shortest round-trip form, e.g. `1.5e7`, `1e-4`.
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

/// What a valid command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// DescribeClientQuotas with these components (strict), then the SCRAM credentials of
    /// these users (`None`: no SCRAM describe; empty: every user).
    Describe {
        components: Vec<(String, QuotaMatch)>,
        scram_users: Option<Vec<String>>,
    },
    /// AlterClientQuotas on one entity: keys set (value) and removed (`None`); `done` is the
    /// line printed on success.
    AlterQuotas {
        entity: QuotaEntity,
        ops: Vec<(String, Option<f64>)>,
        done: String,
    },
    /// AlterUserScramCredentials for one user.
    AlterScram {
        user: String,
        upsertions: Vec<(ScramMechanism, u32, String)>,
        deletions: Vec<ScramMechanism>,
    },
    /// DescribeConfigs (with synonyms) of topics, brokers or a broker's loggers: this
    /// entity (`""`: the brokers' cluster default), or every one of the type (`None`: every
    /// topic; every broker, then the default). `all` keeps every config, not only the
    /// entity's dynamic ones.
    DescribeResource {
        kind: ConfigResourceKind,
        entity_type: String,
        name: Option<String>,
        all: bool,
    },
    /// Alters one topic (IncrementalAlterConfigs), broker (AlterConfigs with the whole new
    /// set) or broker's loggers (IncrementalAlterConfigs), as kafka-configs.sh does.
    AlterResource {
        kind: ConfigResourceKind,
        entity_type: String,
        name: String,
        added: Vec<(String, String)>,
        deleted: Vec<String>,
    },
}

/// The config resource of an entity type (`None`: a client quota entity type).
fn resource_kind(entity_type: &str) -> Option<ConfigResourceKind> {
    match entity_type {
        "topics" => Some(ConfigResourceKind::Topic),
        "brokers" => Some(ConfigResourceKind::Broker),
        "broker-loggers" => Some(ConfigResourceKind::BrokerLogger),
        _ => None,
    }
}

/// The plan for a topic, broker or broker-logger entity (the command line is checked).
fn resource_plan(
    args: &ConfigsArgs,
    kind: ConfigResourceKind,
    entity_type: &str,
    names: &[String],
) -> Result<Plan, String> {
    let name = names.first().cloned();
    if args.describe {
        return Ok(Plan::DescribeResource {
            kind,
            entity_type: entity_type.to_owned(),
            name,
            all: args.all,
        });
    }
    Ok(Plan::AlterResource {
        kind,
        entity_type: entity_type.to_owned(),
        name: name.unwrap_or_default(),
        added: configs_to_add(args)?,
        deleted: configs_to_delete(args),
    })
}

/// `--add-config` or `--add-config-file` (a properties file), as kafka-configs.sh reads
/// them; a key given twice keeps its last value.
fn configs_to_add(args: &ConfigsArgs) -> Result<Vec<(String, String)>, String> {
    let listed = if let Some(path) = &args.add_config_file {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read --add-config-file {}: {err}", path.display()))?;
        client::parse_properties(&text)
            .map_err(|err| format!("--add-config-file {}: {err}", path.display()))?
            .into_iter()
            // Kafka's ConfigDef trims a value before it parses it.
            .map(|(key, value)| (key, value.trim().to_owned()))
            .collect()
    } else {
        parse_add_config(args.add_config.as_deref().unwrap_or("")).map_err(|e| e.to_string())?
    };
    let mut added: Vec<(String, String)> = Vec::new();
    for (key, value) in listed {
        match added.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => added.push((key, value)),
        }
    }
    Ok(added)
}

/// `--delete-config k1,k2`.
fn configs_to_delete(args: &ConfigsArgs) -> Vec<String> {
    args.delete_config
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The quota entity type of a config entity type.
fn quota_type(entity_type: &str) -> &'static str {
    match entity_type {
        "users" => "user",
        "clients" => "client-id",
        _ => "ip",
    }
}

/// Checks the command line as kafka-configs.sh does and says what to do; `Err` is the
/// message for stderr (exit 1).
pub fn plan(args: &ConfigsArgs) -> Result<Plan, String> {
    if args.bootstrap_server.is_none() {
        return Err("Missing required argument \"[bootstrap-server]\"".to_owned());
    }
    if args.describe == args.alter {
        return Err("Command must include exactly one action: --describe, --alter".to_owned());
    }
    if args.describe {
        if args.add_config.is_some() {
            return Err(
                "Option \"[describe]\" can't be used with option \"[add-config]\"".to_owned(),
            );
        }
        if args.delete_config.is_some() {
            return Err(
                "Option \"[describe]\" can't be used with option \"[delete-config]\"".to_owned(),
            );
        }
    }
    let types = args.types();
    let types = &types;
    let mut seen: Vec<&String> = Vec::new();
    let mut duplicates: Vec<&str> = Vec::new();
    for t in types {
        if seen.contains(&t) {
            duplicates.push(t);
        }
        seen.push(t);
    }
    if !duplicates.is_empty() {
        return Err(format!(
            "Duplicate entity type(s) specified: {}",
            duplicates.join(",")
        ));
    }
    for t in types {
        if !ENTITY_TYPES.contains(&t.as_str()) {
            return Err(format!(
                "Invalid entity type {t}, the entity type must be one of {} with the --bootstrap-server argument",
                ENTITY_TYPES.join(",")
            ));
        }
    }
    let Some(head) = types.first() else {
        return Err("At least one entity type must be specified".to_owned());
    };
    if types.len() > 1
        && !(types.len() == 2
            && types.iter().any(|t| t == "users")
            && types.iter().any(|t| t == "clients"))
    {
        return Err("Only 'users' and 'clients' entity types may be specified together".to_owned());
    }
    let flags = args.entity_flags();
    if (!args.entity_name.is_empty()
        || !args.entity_type.is_empty()
        || !args.entity_default.is_empty())
        && !flags.is_empty()
    {
        return Err(
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags"
                .to_owned(),
        );
    }
    let names = args.names();
    let has_name = names.iter().any(|n| !n.is_empty());
    let has_default = names.iter().any(String::is_empty);
    if has_name
        && types
            .iter()
            .any(|t| t == "brokers" || t == "broker-loggers")
    {
        // kafka-configs.sh checks the first value of each flag that names a broker.
        for id in [
            args.entity_name.first(),
            args.broker.as_ref(),
            args.broker_logger.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if id.parse::<i32>().is_err() {
                return Err(format!(
                    "The entity name for {head} must be a valid integer broker id, but it is: {id}"
                ));
            }
        }
    }
    if args.describe && types.iter().any(|t| t == "broker-loggers") && !has_name {
        return Err(format!(
            "an entity name must be specified with --describe of {}",
            types.join(",")
        ));
    }
    if args.alter {
        if types
            .iter()
            .any(|t| matches!(t.as_str(), "users" | "clients" | "brokers" | "ips"))
        {
            if !has_name && !has_default {
                return Err(
                    "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
                        .to_owned(),
                );
            }
        } else if !has_name {
            return Err(format!(
                "an entity name must be specified with --alter of {}",
                types.join(",")
            ));
        }
        if args.add_config.is_some() && args.add_config_file.is_some() {
            return Err(
                "Only one of --add-config or --add-config-file must be specified".to_owned(),
            );
        }
        if args.add_config.is_none()
            && args.add_config_file.is_none()
            && args.delete_config.is_none()
        {
            return Err(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
                    .to_owned(),
            );
        }
        if names.len() != types.len() {
            return Err("An entity name must be specified for every entity type".to_owned());
        }
    }
    if head == "ips" {
        return Err(
            "--entity-type ips is not supported by gregor configs: the broker has no IP connection quotas (connection_creation_rate)"
                .to_owned(),
        );
    }
    if let Some(kind) = resource_kind(head) {
        return resource_plan(args, kind, head, &names);
    }
    if names.len() > types.len() {
        return Err("More entity names specified than entity types".to_owned());
    }
    if args.describe {
        let components = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let matched = match names.get(i).map(String::as_str) {
                    Some("") => QuotaMatch::Default,
                    Some(name) => QuotaMatch::Exact(name.to_owned()),
                    None => QuotaMatch::Any,
                };
                (quota_type(t).to_owned(), matched)
            })
            .collect();
        // SCRAM credentials only for users alone and no default (kafka-configs.sh's rule).
        let scram_users = (!types.iter().any(|t| t == "clients")
            && !names.iter().any(String::is_empty))
        .then(|| names.clone());
        return Ok(Plan::Describe {
            components,
            scram_users,
        });
    }
    // --alter of users and clients.
    let added = configs_to_add(args)?;
    let deleted = configs_to_delete(args);
    let is_quota = |k: &str| QUOTA_KEYS.contains(&k);
    let is_scram = |k: &str| ScramMechanism::from_name(k).is_some();
    let quota_change =
        added.iter().any(|(k, _)| is_quota(k)) || deleted.iter().any(|k| is_quota(k));
    let scram_change =
        added.iter().any(|(k, _)| is_scram(k)) || deleted.iter().any(|k| is_scram(k));
    let unknown_added: Vec<&str> = added
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !is_quota(k) && !is_scram(k))
        .collect();
    let unknown_deleted: Vec<&str> = deleted
        .iter()
        .map(String::as_str)
        .filter(|k| !is_quota(k) && !is_scram(k))
        .collect();
    if head == "clients" || types.len() == 2 {
        let not_quota_added: Vec<&str> = added
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !is_quota(k))
            .collect();
        if !not_quota_added.is_empty() {
            return Err(format!(
                "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set({})",
                not_quota_added.join(", ")
            ));
        }
        let not_quota_deleted: Vec<&str> = deleted
            .iter()
            .map(String::as_str)
            .filter(|k| !is_quota(k))
            .collect();
        if !not_quota_deleted.is_empty() {
            return Err(format!(
                "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: List({})",
                not_quota_deleted.join(", ")
            ));
        }
    } else {
        if !unknown_added.is_empty() {
            return Err(format!(
                "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: Set({})",
                unknown_added.join(", ")
            ));
        }
        if !unknown_deleted.is_empty() {
            return Err(format!(
                "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. Unexpected config names: List({})",
                unknown_deleted.join(", ")
            ));
        }
        if scram_change {
            if names.iter().any(String::is_empty) {
                return Err("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server.".to_owned());
            }
            if quota_change {
                return Err("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.".to_owned());
            }
        }
    }
    if added.is_empty() && deleted.is_empty() {
        return Err(
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
                .to_owned(),
        );
    }
    if !quota_change {
        // Only SCRAM keys are left (checked above).
        let user = names[0].clone();
        let mut upsertions = Vec::new();
        for (key, value) in &added {
            let Some(mechanism) = ScramMechanism::from_name(key) else {
                continue;
            };
            let (iterations, password) =
                parse_credential(mechanism, value).map_err(|e| e.to_string())?;
            upsertions.push((mechanism, iterations, password));
        }
        let deletions = deleted
            .iter()
            .filter_map(|k| ScramMechanism::from_name(k))
            .collect();
        return Ok(Plan::AlterScram {
            user,
            upsertions,
            deletions,
        });
    }
    let mut ops = Vec::new();
    for (key, value) in &added {
        let parsed: f64 = value
            .trim()
            .parse()
            .map_err(|_| format!("Cannot parse quota configuration value for {key}: {value}"))?;
        ops.push((key.clone(), Some(parsed)));
    }
    ops.extend(deleted.iter().map(|k| (k.clone(), None)));
    let entity = types
        .iter()
        .zip(&names)
        .map(|(t, n)| (quota_type(t).to_owned(), (!n.is_empty()).then(|| n.clone())))
        .collect();
    let done = if names[0].is_empty() {
        format!("Completed updating default config for {head} in the cluster.")
    } else {
        format!(
            "Completed updating config for {} {}.",
            head.trim_end_matches('s'),
            names[0]
        )
    };
    Ok(Plan::AlterQuotas { entity, ops, done })
}

/// kafka-configs.sh's describe line for one entity's quotas.
pub fn describe_line(entity: &QuotaEntity, values: &[(String, f64)]) -> String {
    let mut parts = Vec::new();
    for (wire, shown) in [
        ("user", "user-principal"),
        ("client-id", "client-id"),
        ("ip", "ip"),
    ] {
        if let Some((_, name)) = entity.iter().find(|(t, _)| t == wire) {
            parts.push(match name {
                Some(name) => format!("{shown} '{name}'"),
                None => format!("the default {shown}"),
            });
        }
    }
    let values: Vec<String> = values
        .iter()
        .map(|(k, v)| format!("{k}={}", java_double(*v)))
        .collect();
    format!(
        "Quota configs for {} are {}",
        parts.join(", "),
        values.join(", ")
    )
}

/// kafka-configs.sh's line before an entity's configs.
pub fn describe_header(entity_type: &str, entity: &str, all: bool) -> String {
    if entity.is_empty() {
        format!("Default configs for {entity_type} in the cluster are:")
    } else {
        let which = if all { "All" } else { "Dynamic" };
        let singular = entity_type.strip_suffix('s').unwrap_or(entity_type);
        format!("{which} configs for {singular} {entity} are:")
    }
}

/// kafka-configs.sh's line for one config: `  key=value sensitive=false
/// synonyms={SOURCE:key=value, ...}` (a sensitive value is `null`).
pub fn config_line(entry: &ConfigEntry) -> String {
    let synonyms: Vec<String> = entry
        .synonyms
        .iter()
        .map(|s| {
            format!(
                "{}:{}={}",
                s.source.name(),
                s.name,
                s.value.as_deref().unwrap_or("null")
            )
        })
        .collect();
    format!(
        "  {}={} sensitive={} synonyms={{{}}}",
        entry.name,
        entry.value.as_deref().unwrap_or("null"),
        entry.is_sensitive,
        synonyms.join(", ")
    )
}

/// kafka-configs.sh's line after a successful `--alter`.
pub fn completed_line(entity_type: &str, name: &str) -> String {
    if name.is_empty() {
        format!("Completed updating default config for {entity_type} in the cluster.")
    } else {
        let singular = entity_type.strip_suffix('s').unwrap_or(entity_type);
        format!("Completed updating config for {singular} {name}.")
    }
}

/// The source an entity's own configs have (what `--describe` without `--all` shows):
/// a topic's overrides, a broker's dynamic configs, or the brokers' cluster default;
/// `None` keeps every entry (a broker's loggers).
fn dynamic_source(kind: ConfigResourceKind, name: &str) -> Option<ConfigSource> {
    match kind {
        ConfigResourceKind::Topic => Some(ConfigSource::DynamicTopicConfig),
        ConfigResourceKind::Broker if name.is_empty() => {
            Some(ConfigSource::DynamicDefaultBrokerConfig)
        }
        ConfigResourceKind::Broker => Some(ConfigSource::DynamicBrokerConfig),
        ConfigResourceKind::BrokerLogger => None,
    }
}

/// kafka-configs.sh's `getResourceConfig`: DescribeConfigs with synonyms, kept to the
/// entity's own (dynamic) configs unless `all`.
async fn resource_configs(
    admin: &mut AdminClient,
    kind: ConfigResourceKind,
    name: &str,
    all: bool,
) -> Result<Vec<ConfigEntry>, ClientError> {
    let mut results = admin
        .describe_configs_with_synonyms(kind, &[name.to_owned()], true)
        .await?;
    let (_, outcome) = results.remove(0);
    let filter = if all {
        None
    } else {
        dynamic_source(kind, name)
    };
    Ok(outcome?
        .into_iter()
        .filter(|e| filter.is_none_or(|source| e.source == source))
        .collect())
}

/// SET for each added config, DELETE for each deleted one.
fn alter_ops(added: &[(String, String)], deleted: &[String]) -> Vec<AlterConfigOp> {
    added
        .iter()
        .map(|(k, v)| AlterConfigOp::Set(k.clone(), v.clone()))
        .chain(deleted.iter().map(|k| AlterConfigOp::Delete(k.clone())))
        .collect()
}

/// A broker's new dynamic configs for AlterConfigs (which replaces them all): the current
/// ones, plus the added, minus the deleted. A sensitive current value is not readable, so
/// it must be given again (kafka-configs.sh's refusal).
pub fn new_broker_configs(
    current: &[ConfigEntry],
    added: &[(String, String)],
    deleted: &[String],
) -> Result<Vec<(String, String)>, String> {
    let mut configs: std::collections::BTreeMap<String, Option<String>> = current
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    for (key, value) in added {
        configs.insert(key.clone(), Some(value.clone()));
    }
    for key in deleted {
        configs.remove(key);
    }
    let missing: Vec<&str> = configs
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "All sensitive broker config entries must be specified for --alter, missing entries: Set({})",
            missing.join(", ")
        ));
    }
    Ok(configs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect())
}

/// Runs `gregor configs`.
pub fn run(args: ConfigsArgs) -> anyhow::Result<ExitCode> {
    let plan = match plan(&args) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(1));
        }
    };
    let bootstrap = args.bootstrap_server.clone().unwrap_or_default();
    let command_line: Vec<String> = std::env::args().skip(2).collect();
    let failed = |err: &ClientError| {
        eprintln!(
            "Error while executing config command with args '{}'",
            command_line.join(" ")
        );
        eprintln!("{}: {err}", exception_name(err));
        Ok(ExitCode::from(1))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let options = crate::admin_options::admin_options(
            &bootstrap,
            "configs-tool",
            args.command_config.as_deref(),
            "--command-config",
        )?;
        let mut admin = AdminClient::connect(options).await?;
        match plan {
            Plan::DescribeResource {
                kind,
                entity_type,
                name,
                all,
            } => {
                let entities = match name {
                    Some(name) => vec![name],
                    None if kind == ConfigResourceKind::Topic => {
                        match admin.list_topics().await {
                            Ok(topics) => topics.into_iter().map(|t| t.name).collect(),
                            Err(err) => return failed(&err),
                        }
                    }
                    None => {
                        let mut ids: Vec<String> =
                            admin.brokers().keys().map(i32::to_string).collect();
                        ids.push(String::new());
                        ids
                    }
                };
                for entity in entities {
                    println!("{}", describe_header(&entity_type, &entity, all));
                    let entries = match resource_configs(&mut admin, kind, &entity, all).await {
                        Ok(entries) => entries,
                        Err(err) => return failed(&err),
                    };
                    for entry in &entries {
                        println!("{}", config_line(entry));
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            Plan::AlterResource {
                kind,
                entity_type,
                name,
                added,
                deleted,
            } => {
                if let Some((_, v)) = added.iter().find(|(k, _)| k == "message.format.version") {
                    println!(
                        "WARNING: The configuration message.format.version={v} is specified. This configuration will be ignored if the version is newer than the inter.broker.protocol.version specified in the broker."
                    );
                }
                let current = match resource_configs(
                    &mut admin,
                    kind,
                    &name,
                    false,
                )
                .await
                {
                    Ok(entries) => entries,
                    Err(err) => return failed(&err),
                };
                let outcome = if kind == ConfigResourceKind::BrokerLogger {
                    let invalid: Vec<&str> = deleted
                        .iter()
                        .map(String::as_str)
                        .chain(added.iter().map(|(k, _)| k.as_str()))
                        .filter(|k| !current.iter().any(|e| e.name == *k))
                        .collect();
                    if !invalid.is_empty() {
                        eprintln!("Invalid broker logger(s): {}", invalid.join(","));
                        return Ok(ExitCode::from(1));
                    }
                    admin
                        .incremental_alter_configs(kind, &name, &alter_ops(&added, &deleted), false)
                        .await
                } else {
                    // kafka-configs.sh refuses to delete a key the entity does not set.
                    let invalid: Vec<&str> = deleted
                        .iter()
                        .map(String::as_str)
                        .filter(|k| !current.iter().any(|e| e.name == *k))
                        .collect();
                    if !invalid.is_empty() {
                        eprintln!("Invalid config(s): {}", invalid.join(","));
                        return Ok(ExitCode::from(1));
                    }
                    if kind == ConfigResourceKind::Topic {
                        admin
                            .incremental_alter_configs(
                                kind,
                                &name,
                                &alter_ops(&added, &deleted),
                                false,
                            )
                            .await
                    } else {
                        match new_broker_configs(&current, &added, &deleted) {
                            Ok(configs) => admin.alter_configs(kind, &name, &configs, false).await,
                            Err(message) => {
                                eprintln!("{message}");
                                return Ok(ExitCode::from(1));
                            }
                        }
                    }
                };
                match outcome {
                    Ok(()) => {
                        println!("{}", completed_line(&entity_type, &name));
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(err) => failed(&err),
                }
            }
            Plan::AlterScram {
                user,
                upsertions,
                deletions,
            } => match admin
                .alter_user_scram_credentials(&user, &upsertions, &deletions)
                .await
            {
                Ok(()) => {
                    println!("Completed updating config for user {user}.");
                    Ok(ExitCode::SUCCESS)
                }
                Err(err) => failed(&err),
            },
            Plan::AlterQuotas { entity, ops, done } => {
                // kafka-configs.sh refuses to delete a key the entity does not have.
                let components: Vec<(String, QuotaMatch)> = entity
                    .iter()
                    .map(|(t, n)| {
                        let matched = n.clone().map_or(QuotaMatch::Default, QuotaMatch::Exact);
                        (t.clone(), matched)
                    })
                    .collect();
                let current = match admin.describe_client_quotas(&components, true).await {
                    Ok(found) => found.into_iter().next().map(|(_, v)| v).unwrap_or_default(),
                    Err(err) => return failed(&err),
                };
                let missing: Vec<&str> = ops
                    .iter()
                    .filter(|(k, v)| v.is_none() && !current.iter().any(|(c, _)| c == k))
                    .map(|(k, _)| k.as_str())
                    .collect();
                if !missing.is_empty() {
                    eprintln!("Invalid config(s): {}", missing.join(","));
                    return Ok(ExitCode::from(1));
                }
                match admin.alter_client_quotas(&entity, &ops, false).await {
                    Ok(()) => {
                        println!("{done}");
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(err) => failed(&err),
                }
            }
            Plan::Describe {
                components,
                scram_users,
            } => {
                match admin.describe_client_quotas(&components, true).await {
                    Ok(entries) => {
                        for (entity, values) in entries {
                            println!("{}", describe_line(&entity, &values));
                        }
                    }
                    Err(err) => return failed(&err),
                }
                let Some(users) = scram_users else {
                    return Ok(ExitCode::SUCCESS);
                };
                for (user, outcome) in admin.describe_user_scram_credentials(&users).await? {
                    match outcome {
                        Ok(infos) => {
                            let text: Vec<String> = infos
                                .iter()
                                .map(|(m, iterations)| format!("{m}=iterations={iterations}"))
                                .collect();
                            println!(
                                "SCRAM credential configs for user-principal '{user}' are {}",
                                text.join(", ")
                            );
                        }
                        Err(err) => {
                            println!(
                                "Error retrieving SCRAM credential configs for user-principal '{user}': {}: {err}",
                                exception_name(&err)
                            );
                        }
                    }
                }
                // kafka-configs.sh prints a user's error and still exits 0; so does this.
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Debug, Parser)]
    struct Line {
        #[command(flatten)]
        args: ConfigsArgs,
    }

    fn parse(line: &str) -> ConfigsArgs {
        let words = std::iter::once("configs").chain(line.split_whitespace());
        let matches = Line::command().try_get_matches_from(words).unwrap();
        let mut parsed = Line::from_arg_matches(&matches).unwrap();
        parsed.args.order_names(&matches);
        parsed.args
    }

    fn plan_of(line: &str) -> Result<Plan, String> {
        plan(&parse(&format!("--bootstrap-server 127.0.0.1:9092 {line}")))
    }

    fn user(name: Option<&str>) -> (String, Option<String>) {
        ("user".to_owned(), name.map(str::to_owned))
    }

    fn client(name: Option<&str>) -> (String, Option<String>) {
        ("client-id".to_owned(), name.map(str::to_owned))
    }

    #[test]
    fn client_quota_alterations_as_kafka_configs() {
        assert_eq!(
            plan_of("--alter --entity-type clients --entity-name c --add-config producer_byte_rate=1024,consumer_byte_rate=2048"),
            Ok(Plan::AlterQuotas {
                entity: vec![client(Some("c"))],
                ops: vec![
                    ("producer_byte_rate".to_owned(), Some(1024.0)),
                    ("consumer_byte_rate".to_owned(), Some(2048.0)),
                ],
                done: "Completed updating config for client c.".to_owned(),
            })
        );
        // Combined entities, names paired by position; the default entity.
        assert_eq!(
            plan_of("--alter --entity-type users --entity-name u --entity-type clients --entity-default --delete-config producer_byte_rate"),
            Ok(Plan::AlterQuotas {
                entity: vec![user(Some("u")), client(None)],
                ops: vec![("producer_byte_rate".to_owned(), None)],
                done: "Completed updating config for user u.".to_owned(),
            })
        );
        assert_eq!(
            plan_of("--alter --entity-type users --entity-default --entity-type clients --entity-name c --add-config request_percentage=50"),
            Ok(Plan::AlterQuotas {
                entity: vec![user(None), client(Some("c"))],
                ops: vec![("request_percentage".to_owned(), Some(50.0))],
                done: "Completed updating default config for users in the cluster.".to_owned(),
            })
        );
        assert_eq!(
            plan_of("--alter --entity-type clients --entity-default --add-config consumer_byte_rate=1e6"),
            Ok(Plan::AlterQuotas {
                entity: vec![client(None)],
                ops: vec![("consumer_byte_rate".to_owned(), Some(1e6))],
                done: "Completed updating default config for clients in the cluster.".to_owned(),
            })
        );
        assert!(matches!(
            plan_of("--alter --entity-type users --entity-default --entity-type clients --entity-default --add-config producer_byte_rate=1"),
            Ok(Plan::AlterQuotas { entity, .. }) if entity == vec![user(None), client(None)]
        ));
        // Users take quotas too (not together with SCRAM).
        assert!(matches!(
            plan_of("--alter --entity-type users --entity-name alice --add-config producer_byte_rate=10"),
            Ok(Plan::AlterQuotas { .. })
        ));
        assert!(matches!(
            plan_of("--alter --entity-type users --entity-name alice --add-config SCRAM-SHA-256=[password=p]"),
            Ok(Plan::AlterScram { .. })
        ));
    }

    #[test]
    fn refusals_are_kafka_configs_messages() {
        let err = |line: &str| plan_of(line).unwrap_err();
        assert_eq!(
            err("--alter --entity-type clients --entity-name c --add-config producer_byte_rate=fast"),
            "Cannot parse quota configuration value for producer_byte_rate: fast"
        );
        assert_eq!(
            err("--alter --entity-type clients --entity-name c --add-config SCRAM-SHA-256=[password=p]"),
            "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set(SCRAM-SHA-256)"
        );
        assert_eq!(
            err("--alter --entity-type users --entity-name u --entity-type clients --entity-name c --delete-config retention.ms"),
            "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: List(retention.ms)"
        );
        assert_eq!(
            err("--alter --entity-type users --entity-name u --add-config SCRAM-SHA-256=[password=p],producer_byte_rate=1"),
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."
        );
        assert_eq!(
            err("--alter --entity-type users --entity-default --add-config SCRAM-SHA-256=[password=p]"),
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server."
        );
        assert_eq!(
            err("--alter --entity-type users --entity-name u --entity-type clients --add-config producer_byte_rate=1"),
            "An entity name must be specified for every entity type"
        );
        assert_eq!(
            err("--alter --entity-type clients --add-config producer_byte_rate=1"),
            "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
        );
        assert_eq!(
            err("--alter --entity-type clients --entity-name c"),
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
        );
        assert_eq!(
            err("--describe --entity-type clients --entity-type clients"),
            "Duplicate entity type(s) specified: clients"
        );
        assert_eq!(
            err("--describe --entity-type users --entity-type topics"),
            "Only 'users' and 'clients' entity types may be specified together"
        );
        assert_eq!(
            err("--describe --entity-type groups"),
            "Invalid entity type groups, the entity type must be one of topics,clients,users,brokers,ips,broker-loggers with the --bootstrap-server argument"
        );
        assert_eq!(
            err("--describe --entity-type clients --entity-name a --entity-name b"),
            "More entity names specified than entity types"
        );
        assert_eq!(
            err("--describe"),
            "At least one entity type must be specified"
        );
        assert_eq!(
            err("--describe --alter --entity-type clients"),
            "Command must include exactly one action: --describe, --alter"
        );
        assert_eq!(
            err("--describe --entity-type clients --add-config producer_byte_rate=1"),
            "Option \"[describe]\" can't be used with option \"[add-config]\""
        );
    }

    #[test]
    fn describe_filters_and_lines_as_kafka_configs() {
        let exact = |n: &str| QuotaMatch::Exact(n.to_owned());
        assert_eq!(
            plan_of("--describe --entity-type clients --entity-name c"),
            Ok(Plan::Describe {
                components: vec![("client-id".to_owned(), exact("c"))],
                scram_users: None,
            })
        );
        assert_eq!(
            plan_of("--describe --entity-type users --entity-default --entity-type clients"),
            Ok(Plan::Describe {
                components: vec![
                    ("user".to_owned(), QuotaMatch::Default),
                    ("client-id".to_owned(), QuotaMatch::Any),
                ],
                scram_users: None,
            })
        );
        // Users alone also describe SCRAM credentials (all users when no name is given).
        assert_eq!(
            plan_of("--describe --entity-type users"),
            Ok(Plan::Describe {
                components: vec![("user".to_owned(), QuotaMatch::Any)],
                scram_users: Some(Vec::new()),
            })
        );
        assert_eq!(
            describe_line(
                &vec![client(Some("c"))],
                &[
                    ("consumer_byte_rate".to_owned(), 2048.0),
                    ("producer_byte_rate".to_owned(), 1024.0)
                ]
            ),
            "Quota configs for client-id 'c' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"
        );
        assert_eq!(
            describe_line(
                &vec![user(Some("u")), client(None)],
                &[("request_percentage".to_owned(), 12.5)]
            ),
            "Quota configs for user-principal 'u', the default client-id are request_percentage=12.5"
        );
        assert_eq!(java_double(1024.0), "1024.0");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(15_000_000.0), "1.5E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(9_999_999.0), "9999999.0");
    }

    fn resource(kind: ConfigResourceKind, entity_type: &str) -> (ConfigResourceKind, String) {
        (kind, entity_type.to_owned())
    }

    #[test]
    fn topic_broker_and_logger_plans_as_kafka_configs() {
        let alter = |line: &str| match plan_of(line) {
            Ok(Plan::AlterResource {
                kind,
                entity_type,
                name,
                added,
                deleted,
            }) => ((kind, entity_type), name, added, deleted),
            other => panic!("{line}: {other:?}"),
        };
        let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let topic = resource(ConfigResourceKind::Topic, "topics");
        let broker = resource(ConfigResourceKind::Broker, "brokers");
        let logger = resource(ConfigResourceKind::BrokerLogger, "broker-loggers");
        assert_eq!(
            alter("--alter --entity-type topics --entity-name t --add-config retention.ms=1000,cleanup.policy=[compact,delete] --delete-config segment.ms"),
            (
                topic.clone(),
                "t".to_owned(),
                vec![kv("retention.ms", "1000"), kv("cleanup.policy", "compact,delete")],
                vec!["segment.ms".to_owned()]
            )
        );
        // The shorthands name the same entities.
        assert_eq!(
            alter("--alter --topic t --delete-config retention.ms,segment.ms"),
            (
                topic,
                "t".to_owned(),
                vec![],
                vec!["retention.ms".to_owned(), "segment.ms".to_owned()]
            )
        );
        assert_eq!(
            alter("--alter --broker 1 --add-config follower.replication.throttled.rate=100"),
            (
                broker.clone(),
                "1".to_owned(),
                vec![kv("follower.replication.throttled.rate", "100")],
                vec![]
            )
        );
        assert_eq!(
            alter("--alter --entity-type brokers --entity-default --delete-config leader.replication.throttled.rate").1,
            ""
        );
        assert_eq!(
            alter("--alter --broker-defaults --add-config leader.replication.throttled.rate=5").0,
            broker
        );
        assert_eq!(
            alter("--alter --broker-logger 1 --add-config broker=DEBUG").0,
            logger
        );
        assert_eq!(
            plan_of("--describe --entity-type topics"),
            Ok(Plan::DescribeResource {
                kind: ConfigResourceKind::Topic,
                entity_type: "topics".to_owned(),
                name: None,
                all: false,
            })
        );
        assert_eq!(
            plan_of("--describe --broker 2 --all"),
            Ok(Plan::DescribeResource {
                kind: ConfigResourceKind::Broker,
                entity_type: "brokers".to_owned(),
                name: Some("2".to_owned()),
                all: true,
            })
        );
        // --user and --client together are the <user, client> quota entity; kafka-configs.sh
        // lists the client flag first, so the done line names the client.
        assert_eq!(
            plan_of("--alter --user u --client c --add-config producer_byte_rate=1"),
            Ok(Plan::AlterQuotas {
                entity: vec![client(Some("c")), user(Some("u"))],
                ops: vec![("producer_byte_rate".to_owned(), Some(1.0))],
                done: "Completed updating config for client c.".to_owned(),
            })
        );
        assert!(matches!(
            plan_of("--alter --user-defaults --add-config consumer_byte_rate=1"),
            Ok(Plan::AlterQuotas { entity, .. }) if entity == vec![user(None)]
        ));
        assert!(matches!(
            plan_of("--describe --client-defaults"),
            Ok(Plan::Describe { components, .. }) if components == vec![("client-id".to_owned(), QuotaMatch::Default)]
        ));
    }

    #[test]
    fn topic_broker_and_logger_refusals_are_kafka_configs_messages() {
        let err = |line: &str| plan_of(line).unwrap_err();
        assert_eq!(
            err("--alter --entity-type topics --add-config retention.ms=1"),
            "an entity name must be specified with --alter of topics"
        );
        assert_eq!(
            err("--alter --entity-type topics --entity-default --add-config retention.ms=1"),
            "an entity name must be specified with --alter of topics"
        );
        assert_eq!(
            err("--alter --entity-type brokers --add-config a=1"),
            "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
        );
        assert_eq!(
            err("--alter --entity-type broker-loggers --add-config root=INFO"),
            "an entity name must be specified with --alter of broker-loggers"
        );
        assert_eq!(
            err("--describe --entity-type broker-loggers"),
            "an entity name must be specified with --describe of broker-loggers"
        );
        assert_eq!(
            err("--describe --entity-type brokers --entity-name one"),
            "The entity name for brokers must be a valid integer broker id, but it is: one"
        );
        assert_eq!(
            err("--describe --broker-logger x"),
            "The entity name for broker-loggers must be a valid integer broker id, but it is: x"
        );
        assert_eq!(
            err("--alter --topic t"),
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
        );
        assert_eq!(
            err("--alter --topic t --add-config a=1 --add-config-file /nonexistent"),
            "Only one of --add-config or --add-config-file must be specified"
        );
        assert_eq!(
            err("--describe --entity-name t --topic t"),
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags"
        );
        assert_eq!(
            err("--describe --topic t --broker 1"),
            "Only 'users' and 'clients' entity types may be specified together"
        );
        assert_eq!(
            err("--alter --topic t --add-config retention.ms=1=2"),
            "Invalid entity config: all configs to be added must be in the format \"key=val\"."
        );
        assert!(err("--describe --ip 127.0.0.1").contains("ips is not supported"));
        assert!(err("--alter --topic t --add-config-file /nonexistent/file")
            .starts_with("cannot read --add-config-file /nonexistent/file"));
    }

    #[test]
    fn add_config_file_is_a_properties_file() {
        let dir = std::env::temp_dir().join(format!("gregor-configs-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("add.properties");
        std::fs::write(
            &file,
            "# topic settings\nretention.ms=3600000\ncleanup.policy = compact,delete\nmin.insync.replicas: 2\nretention.ms=7200000\n",
        )
        .unwrap();
        let planned = plan_of(&format!(
            "--alter --topic t --add-config-file {}",
            file.display()
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        let Ok(Plan::AlterResource { added, .. }) = planned else {
            panic!("{planned:?}");
        };
        assert_eq!(
            added,
            vec![
                ("retention.ms".to_owned(), "7200000".to_owned()),
                ("cleanup.policy".to_owned(), "compact,delete".to_owned()),
                ("min.insync.replicas".to_owned(), "2".to_owned()),
            ]
        );
    }

    #[test]
    fn resource_lines_as_kafka_configs() {
        use client::ConfigSynonym;
        assert_eq!(
            describe_header("topics", "t", false),
            "Dynamic configs for topic t are:"
        );
        assert_eq!(
            describe_header("brokers", "1", true),
            "All configs for broker 1 are:"
        );
        assert_eq!(
            describe_header("brokers", "", false),
            "Default configs for brokers in the cluster are:"
        );
        assert_eq!(
            describe_header("broker-loggers", "1", false),
            "Dynamic configs for broker-logger 1 are:"
        );
        assert_eq!(
            completed_line("topics", "t"),
            "Completed updating config for topic t."
        );
        assert_eq!(
            completed_line("brokers", ""),
            "Completed updating default config for brokers in the cluster."
        );
        assert_eq!(
            completed_line("broker-loggers", "3"),
            "Completed updating config for broker-logger 3."
        );
        let synonym = |name: &str, value: Option<&str>, source| ConfigSynonym {
            name: name.to_owned(),
            value: value.map(str::to_owned),
            source,
        };
        let entry = ConfigEntry {
            name: "retention.ms".to_owned(),
            value: Some("1000".to_owned()),
            is_default: false,
            is_sensitive: false,
            read_only: false,
            source: ConfigSource::DynamicTopicConfig,
            synonyms: vec![
                synonym(
                    "retention.ms",
                    Some("1000"),
                    ConfigSource::DynamicTopicConfig,
                ),
                synonym(
                    "log.retention.ms",
                    Some("604800000"),
                    ConfigSource::DefaultConfig,
                ),
            ],
        };
        assert_eq!(
            config_line(&entry),
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}"
        );
        let secret = ConfigEntry {
            name: "listener.name.x.ssl.key.password".to_owned(),
            value: None,
            is_sensitive: true,
            source: ConfigSource::DynamicBrokerConfig,
            synonyms: vec![synonym(
                "listener.name.x.ssl.key.password",
                None,
                ConfigSource::DynamicBrokerConfig,
            )],
            ..entry.clone()
        };
        assert_eq!(
            config_line(&secret),
            "  listener.name.x.ssl.key.password=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:listener.name.x.ssl.key.password=null}"
        );
        // AlterConfigs replaces a broker's dynamic set: the current ones stay unless deleted.
        let throttle = ConfigEntry {
            name: "leader.replication.throttled.rate".to_owned(),
            value: Some("10".to_owned()),
            ..entry.clone()
        };
        assert_eq!(
            new_broker_configs(
                std::slice::from_ref(&throttle),
                &[(
                    "follower.replication.throttled.rate".to_owned(),
                    "20".to_owned()
                )],
                &[]
            ),
            Ok(vec![
                (
                    "follower.replication.throttled.rate".to_owned(),
                    "20".to_owned()
                ),
                (
                    "leader.replication.throttled.rate".to_owned(),
                    "10".to_owned()
                ),
            ])
        );
        assert_eq!(
            new_broker_configs(
                &[throttle],
                &[],
                &["leader.replication.throttled.rate".to_owned()]
            ),
            Ok(vec![])
        );
        assert_eq!(
            new_broker_configs(std::slice::from_ref(&secret), &[], &[]),
            Err("All sensitive broker config entries must be specified for --alter, missing entries: Set(listener.name.x.ssl.key.password)".to_owned())
        );
        assert!(new_broker_configs(
            &[secret],
            &[(
                "listener.name.x.ssl.key.password".to_owned(),
                "p".to_owned()
            )],
            &[]
        )
        .is_ok());
    }

    #[test]
    fn add_config_splits_as_kafka() {
        assert_eq!(
            parse_add_config(
                "SCRAM-SHA-256=[iterations=8192,password=a=b],SCRAM-SHA-512=[password=c]"
            )
            .unwrap(),
            vec![
                (
                    "SCRAM-SHA-256".to_owned(),
                    "iterations=8192,password=a=b".to_owned()
                ),
                ("SCRAM-SHA-512".to_owned(), "password=c".to_owned()),
            ]
        );
        assert!(parse_add_config("novalue").is_err());
        let m = ScramMechanism::Sha256;
        assert_eq!(
            parse_credential(m, "iterations=8192,password=a=b").unwrap(),
            (8192, "a=b".to_owned())
        );
        assert_eq!(
            parse_credential(m, "password=p").unwrap(),
            (4096, "p".to_owned())
        );
        assert_eq!(
            parse_credential(m, "iterations=-1,password=p").unwrap(),
            (4096, "p".to_owned())
        );
        let err = parse_credential(m, "iterations=100,password=p")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"
        );
        assert!(parse_credential(m, "pass=p").is_err());
    }
}
