//! `gregor configs`: Kafka's `kafka-configs.sh --bootstrap-server` for users' SCRAM
//! credentials (KIP-554): `--entity-type users --alter --add-config
//! 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`, `--delete-config SCRAM-SHA-512`
//! and `--describe`, with Kafka's output lines. The password is salted and hashed on this
//! side (PBKDF2), as Kafka's admin client does; the broker only stores the result.
//!
//! Not yet: quotas (DescribeClientQuotas/AlterClientQuotas), `--entity-type topics|brokers`
//! (use `gregor topics --alter --config` for topics).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Args;
use client::{AdminClient, AdminOptions, ClientError};
use security::scram::ScramMechanism;

/// Kafka's `DefaultScramIterations`.
const DEFAULT_ITERATIONS: u32 = 4096;

/// The flags of `kafka-configs.sh` this command takes.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Add, delete or describe users' SCRAM credentials (kafka-configs.sh).")]
pub struct ConfigsArgs {
    /// The Kafka server to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(long, value_name = "command config property file")]
    pub command_config: Option<PathBuf>,
    /// Type of entity (users).
    #[arg(long, value_name = "entity-type")]
    pub entity_type: Option<String>,
    /// Name of entity (a user principal name).
    #[arg(long, value_name = "entity-name")]
    pub entity_name: Option<String>,
    /// List configs for the given entity.
    #[arg(long)]
    pub describe: bool,
    /// Alter the configuration for the entity.
    #[arg(long)]
    pub alter: bool,
    /// Key Value pairs of configs to add, e.g. 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'.
    #[arg(long, value_name = "key=value,...")]
    pub add_config: Option<String>,
    /// Config keys to remove, e.g. 'SCRAM-SHA-256,SCRAM-SHA-512'.
    #[arg(long, value_name = "key,...")]
    pub delete_config: Option<String>,
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
        _ => "KafkaException",
    }
}

/// Runs `gregor configs`.
pub fn run(args: ConfigsArgs) -> anyhow::Result<ExitCode> {
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        eprintln!("Missing required argument \"[bootstrap-server]\"");
        return Ok(ExitCode::from(1));
    };
    if args.describe == args.alter {
        eprintln!("Command must include exactly one action: --describe, --alter");
        return Ok(ExitCode::from(1));
    }
    match args.entity_type.as_deref() {
        Some("users") => {}
        Some(other @ ("topics" | "brokers" | "clients" | "broker-loggers" | "ips")) => {
            eprintln!("--entity-type {other} is not supported by gregor configs yet (users only; topics: gregor topics --alter --config)");
            return Ok(ExitCode::from(1));
        }
        Some(other) => {
            eprintln!("Invalid entity type {other}, the entity type must be one of users, topics, clients, brokers, broker-loggers, ips");
            return Ok(ExitCode::from(1));
        }
        None => {
            eprintln!("At least one of --entity-type or --entity-default must be specified");
            return Ok(ExitCode::from(1));
        }
    }
    let mut upsertions = Vec::new();
    let mut deletions = Vec::new();
    if args.alter {
        if args.entity_name.as_deref().is_none_or(str::is_empty) {
            eprintln!("An entity name must be specified with --alter of users");
            return Ok(ExitCode::from(1));
        }
        for (key, value) in parse_add_config(args.add_config.as_deref().unwrap_or(""))? {
            let Some(mechanism) = ScramMechanism::from_name(&key) else {
                eprintln!("Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: Set({key})");
                return Ok(ExitCode::from(1));
            };
            upsertions.push((mechanism, parse_credential(mechanism, &value)?));
        }
        for key in args
            .delete_config
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            let Some(mechanism) = ScramMechanism::from_name(key) else {
                eprintln!("Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. Unexpected config names: List({key})");
                return Ok(ExitCode::from(1));
            };
            deletions.push(mechanism);
        }
        if upsertions.is_empty() && deletions.is_empty() {
            eprintln!(
                "At least one of --add-config or --delete-config must be specified with --alter"
            );
            return Ok(ExitCode::from(1));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut options = AdminOptions::new(&bootstrap);
        options.connection.client_id = "configs-tool".to_owned();
        if let Some(path) = &args.command_config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --command-config {}", path.display()))?;
            let config = client::parse_command_config(&text)?;
            for ignored in &config.ignored {
                eprintln!("{ignored}");
            }
            options.apply(&config);
        }
        let mut admin = AdminClient::connect(options).await?;
        if args.alter {
            let user = args.entity_name.as_deref().unwrap_or_default();
            let upsertions: Vec<(ScramMechanism, u32, String)> = upsertions
                .into_iter()
                .map(|(m, (iterations, password))| (m, iterations, password))
                .collect();
            match admin
                .alter_user_scram_credentials(user, &upsertions, &deletions)
                .await
            {
                Ok(()) => {
                    println!("Completed updating config for user {user}.");
                    Ok(ExitCode::SUCCESS)
                }
                Err(err) => {
                    eprintln!("Error while executing config command with args '--entity-type users --entity-name {user}'");
                    eprintln!("{}: {err}", exception_name(&err));
                    Ok(ExitCode::from(1))
                }
            }
        } else {
            let users: Vec<String> = args.entity_name.iter().cloned().collect();
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
