//! `gregor broker-api-versions`: Kafka's `kafka-broker-api-versions.sh`: every broker of the
//! cluster with the versions of each API it advertises, and the version this client would use.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Args;
use client::Connection;
use kafka_protocol::messages::ApiKey;

use crate::cluster::{self, Cluster};

/// The flags of `kafka-broker-api-versions.sh`.
#[derive(Debug, Clone, Args)]
#[command(about = "Print the API versions each broker supports (kafka-broker-api-versions.sh).")]
pub struct BrokerApiVersionsArgs {
    /// REQUIRED: The server to connect to.
    #[arg(long, value_name = "server(s) to use for bootstrapping")]
    pub bootstrap_server: Option<String>,
    /// A property file containing configs to be passed to Admin Client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "command config property file"
    )]
    pub command_config: Option<std::path::PathBuf>,
}

/// Kafka's `NodeApiVersions.toString(true)`: one `Name(key): min to max [usable: v]` per API.
fn versions_text(connection: &Connection) -> String {
    let lines: Vec<String> = ApiKey::iter()
        .filter_map(|api| {
            let (min, max) = connection.broker_versions(api)?;
            let mut line = format!("{api:?}({}): ", api as i16);
            if min == max {
                let _ = write!(line, "{min}");
            } else {
                let _ = write!(line, "{min} to {max}");
            }
            let ours = client::versions::client_versions(api);
            if ours.max < min {
                line.push_str(" [unusable: node too new]");
            } else if max < ours.min {
                line.push_str(" [unusable: node too old]");
            } else {
                let _ = write!(line, " [usable: {}]", ours.max.min(max));
            }
            Some(line)
        })
        .collect();
    format!("(\n\t{}\n)", lines.join(",\n\t"))
}

/// Runs the command; returns the process exit code.
pub fn run(args: BrokerApiVersionsArgs) -> anyhow::Result<ExitCode> {
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        eprintln!("Missing required argument \"[bootstrap-server]\"");
        return Ok(ExitCode::from(1));
    };
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(
            &bootstrap,
            "gregor-broker-api-versions",
            args.command_config.as_deref(),
        )?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let mut out = String::new();
        let ids: Vec<i32> = cluster.brokers.keys().copied().collect();
        for id in ids {
            let addr = cluster.brokers[&id].clone();
            let rack = cluster
                .racks
                .get(&id)
                .cloned()
                .flatten()
                .unwrap_or_else(|| "null".to_owned());
            let node = format!("{addr} (id: {id} rack: {rack})");
            match cluster.broker(id).await {
                Ok(connection) => {
                    let _ = writeln!(out, "{node} -> {}", versions_text(connection));
                }
                Err(err) => {
                    let _ = writeln!(out, "{node} -> ERROR: {err:#}");
                }
            }
        }
        anyhow::Ok(out)
    });
    match result {
        Ok(out) => {
            print!("{out}");
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err:#}");
            Ok(ExitCode::from(1))
        }
    }
}
