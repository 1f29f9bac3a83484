//! `gregor configs`: Kafka's `kafka-configs.sh --bootstrap-server` for users and clients:
//! client quotas (KIP-546: DescribeClientQuotas / AlterClientQuotas) for
//! `--entity-type users|clients`, the two combined (`--entity-type users --entity-name u
//! --entity-type clients --entity-name c`) and default entities (`--entity-default`), and
//! users' SCRAM credentials (KIP-554): `--alter --add-config
//! 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'` or
//! `producer_byte_rate=1048576,consumer_byte_rate=2097152`, `--delete-config` and
//! `--describe`, with Kafka's output lines and refusals. A SCRAM password is salted and hashed
//! on this side (PBKDF2), as Kafka's admin client does; the broker only stores the result.
//!
//! Entity names pair with entity types by their order on the command line, as in
//! kafka-configs.sh: `--entity-default` stands for an empty name (the default entity).
//!
//! Not yet: `--entity-type topics|brokers|broker-loggers|ips` (use `gregor topics --alter
//! --config` for topics), `--add-config-file`, the `--user`/`--client` shorthand flags.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{ArgAction, ArgMatches, Args};
use client::{AdminClient, ClientError, QuotaEntity, QuotaMatch};
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
    about = "Add, delete or describe client quotas and users' SCRAM credentials (kafka-configs.sh)."
)]
pub struct ConfigsArgs {
    /// The Kafka server to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(long, value_name = "command config property file")]
    pub command_config: Option<PathBuf>,
    /// Type of entity (users/clients); `users` and `clients` may be given together.
    #[arg(long, value_name = "entity-type")]
    pub entity_type: Vec<String>,
    /// Name of entity (user principal name/client id), one per --entity-type, in order.
    #[arg(long, value_name = "entity-name")]
    pub entity_name: Vec<String>,
    /// Default entity name for clients/users (applies to the corresponding entity type in
    /// the command line).
    #[arg(long, action = ArgAction::Append, num_args = 0, default_missing_value = "",
        value_name = "")]
    pub entity_default: Vec<String>,
    /// List configs for the given entity.
    #[arg(long)]
    pub describe: bool,
    /// Alter the configuration for the entity.
    #[arg(long)]
    pub alter: bool,
    /// Key Value pairs of configs to add, e.g. 'producer_byte_rate=1024,consumer_byte_rate=2048'
    /// or 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'.
    #[arg(long, value_name = "key=value,...")]
    pub add_config: Option<String>,
    /// Config keys to remove, e.g. 'producer_byte_rate' or 'SCRAM-SHA-256,SCRAM-SHA-512'.
    #[arg(long, value_name = "key,...")]
    pub delete_config: Option<String>,
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

    fn names(&self) -> Vec<String> {
        self.ordered_names.clone().unwrap_or_else(|| {
            let mut names = self.entity_name.clone();
            names.extend(self.entity_default.iter().map(|_| String::new()));
            names
        })
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
            let (key, value) = item.split_once('=').ok_or_else(|| {
                anyhow::anyhow!(
                    "Invalid entity config: all configs to be added must be in the format \"key=val\"."
                )
            })?;
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
    let types = &args.entity_type;
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
    if !matches!(head.as_str(), "users" | "clients") {
        return Err(format!(
            "--entity-type {head} is not supported by gregor configs yet (users and clients only; topics: gregor topics --alter --config)"
        ));
    }
    let names = args.names();
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
    // --alter.
    if names.is_empty() {
        return Err(
            "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
                .to_owned(),
        );
    }
    if args.add_config.is_none() && args.delete_config.is_none() {
        return Err(
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
                .to_owned(),
        );
    }
    if names.len() != types.len() {
        return Err(
            "--entity-name or --entity-default must be specified with each --entity-type for --alter"
                .to_owned(),
        );
    }
    let added =
        parse_add_config(args.add_config.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
    let deleted: Vec<String> = args
        .delete_config
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
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
            "--entity-name or --entity-default must be specified with each --entity-type for --alter"
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
