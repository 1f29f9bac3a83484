//! `gregor log-dirs`: Kafka's `kafka-log-dirs.sh --describe` (3.9's `LogDirsCommand`), same
//! flags, same output: two lines, then one JSON object with every queried broker's log
//! directories and their partitions (`size`, `offsetLag`, `isFuture`), from DescribeLogDirs.
//!
//! Kafka prints the JSON from hash maps, so its key order is unspecified; Gregor's is
//! alphabetical. Formatting is pure and tested below; only [`run`] talks to brokers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Args;
use client::{AdminClient, LogDirDescription};
use serde_json::{json, Value};

/// Kafka's KAFKA_STORAGE_ERROR, which `kafka-log-dirs.sh` shows as the exception class.
const KAFKA_STORAGE_ERROR: i16 = 56;

/// The flags of `kafka-log-dirs.sh`.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Query log directory usage on the given brokers (kafka-log-dirs.sh).")]
pub struct LogDirsArgs {
    /// REQUIRED: the server(s) to use for bootstrapping.
    #[arg(long, value_name = "The server(s) to use for bootstrapping")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "Admin client property file"
    )]
    pub command_config: Option<PathBuf>,
    /// Describe the specified log directories on the specified brokers.
    #[arg(long)]
    pub describe: bool,
    /// The list of topics to be queried in the form "topic1,topic2,topic3". All topics will
    /// be queried if no topic list is specified.
    #[arg(long, value_name = "Topic list", default_value = "")]
    pub topic_list: String,
    /// The list of brokers to be queried in the form "0,1,2". All brokers in the cluster
    /// will be queried if no broker list is specified.
    #[arg(long, value_name = "Broker list", default_value = "")]
    pub broker_list: String,
}

/// Runs `gregor log-dirs`; Kafka's messages, exit code 1 on any error.
pub fn run(args: LogDirsArgs) -> anyhow::Result<ExitCode> {
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        eprintln!("Missing required argument \"[bootstrap-server]\"");
        return Ok(ExitCode::from(1));
    };
    if !args.describe {
        eprintln!("Missing required argument \"[describe]\"");
        return Ok(ExitCode::from(1));
    }
    let brokers = match parse_list::<i32>(&args.broker_list) {
        Ok(brokers) => brokers,
        Err(item) => {
            eprintln!("Invalid broker id '{item}' in --broker-list");
            return Ok(ExitCode::from(1));
        }
    };
    let topics: BTreeSet<String> = parse_list::<String>(&args.topic_list).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match runtime.block_on(describe(
        &bootstrap,
        args.command_config.as_deref(),
        &brokers,
    )) {
        Ok((queried, dirs)) => {
            println!("Querying brokers for log directories information");
            println!(
                "Received log directory information from brokers {}",
                comma_joined(&queried)
            );
            println!("{}", format_json(&dirs, &topics));
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Comma-separated items, empty ones dropped (Kafka's `splitAtCommasAndFilterOutEmpty`);
/// `Err` names the first item that does not parse.
fn parse_list<T: std::str::FromStr + Ord>(text: &str) -> Result<BTreeSet<T>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<T>().map_err(|_| s.to_owned()))
        .collect()
}

fn comma_joined(ids: &BTreeSet<i32>) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// The brokers queried and their log directories.
async fn describe(
    bootstrap: &str,
    command_config: Option<&std::path::Path>,
    requested: &BTreeSet<i32>,
) -> anyhow::Result<(BTreeSet<i32>, BTreeMap<i32, Vec<LogDirDescription>>)> {
    let options = crate::admin_options::admin_options(
        bootstrap,
        "log-dirs-tool",
        command_config,
        "--command-config",
    )?;
    let mut admin = AdminClient::connect(options).await?;
    let cluster: BTreeSet<i32> = admin.brokers().keys().copied().collect();
    let missing: BTreeSet<i32> = requested.difference(&cluster).copied().collect();
    if !missing.is_empty() {
        bail!(
            "ERROR: The given brokers do not exist from --broker-list: {}. Current existent brokers: {}",
            comma_joined(&missing),
            comma_joined(&cluster)
        );
    }
    let queried = if requested.is_empty() {
        cluster
    } else {
        requested.clone()
    };
    let ids: Vec<i32> = queried.iter().copied().collect();
    let dirs = admin.describe_log_dirs(&ids).await?;
    Ok((queried, dirs))
}

/// Kafka's `formatAsJson`: `{"version":1,"brokers":[{"broker":B,"logDirs":[{"logDir":...,
/// "error":null|class,"partitions":[{"partition":"t-0","size":..,"offsetLag":..,
/// "isFuture":..}]}]}]}`, partitions of `topics` only when that set is not empty.
pub fn format_json(
    dirs: &BTreeMap<i32, Vec<LogDirDescription>>,
    topics: &BTreeSet<String>,
) -> String {
    let brokers: Vec<Value> = dirs
        .iter()
        .map(|(broker, log_dirs)| {
            let log_dirs: Vec<Value> = log_dirs
                .iter()
                .map(|dir| {
                    let partitions: Vec<Value> = dir
                        .replicas
                        .iter()
                        .filter(|((topic, _), _)| topics.is_empty() || topics.contains(topic))
                        .map(|((topic, partition), replica)| {
                            json!({
                                "partition": format!("{topic}-{partition}"),
                                "size": replica.size,
                                "offsetLag": replica.offset_lag,
                                "isFuture": replica.is_future,
                            })
                        })
                        .collect();
                    json!({
                        "logDir": dir.path,
                        "error": error_class(dir.error_code),
                        "partitions": partitions,
                    })
                })
                .collect();
            json!({ "broker": broker, "logDirs": log_dirs })
        })
        .collect();
    json!({ "version": 1, "brokers": brokers }).to_string()
}

/// The exception class Kafka's tool prints for a directory's error, `null` for none.
fn error_class(code: i16) -> Value {
    match code {
        0 => Value::Null,
        KAFKA_STORAGE_ERROR => json!("org.apache.kafka.common.errors.KafkaStorageException"),
        other => json!(format!(
            "error code {other}: {}",
            client::error_message(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::ReplicaInfo;

    fn dir(path: &str, error_code: i16, replicas: &[(&str, i32, i64)]) -> LogDirDescription {
        LogDirDescription {
            path: path.to_owned(),
            error_code,
            replicas: replicas
                .iter()
                .map(|(t, p, size)| {
                    (
                        ((*t).to_owned(), *p),
                        ReplicaInfo {
                            size: *size,
                            offset_lag: 0,
                            is_future: false,
                        },
                    )
                })
                .collect(),
            total_bytes: None,
            usable_bytes: None,
        }
    }

    #[test]
    fn json_has_kafkas_shape_and_filters_by_topic() {
        let dirs = BTreeMap::from([
            (
                0,
                vec![dir("/d/a", 0, &[("orders", 0, 120), ("users", 1, 7)])],
            ),
            (1, vec![dir("/d/b", 56, &[])]),
        ]);
        let all: Value = serde_json::from_str(&format_json(&dirs, &BTreeSet::new())).unwrap();
        assert_eq!(all["version"], 1);
        assert_eq!(all["brokers"][0]["broker"], 0);
        let d0 = &all["brokers"][0]["logDirs"][0];
        assert_eq!(d0["logDir"], "/d/a");
        assert_eq!(d0["error"], Value::Null);
        assert_eq!(
            d0["partitions"][0],
            json!({"partition": "orders-0", "size": 120, "offsetLag": 0, "isFuture": false})
        );
        assert_eq!(d0["partitions"].as_array().unwrap().len(), 2);
        assert_eq!(
            all["brokers"][1]["logDirs"][0]["error"],
            "org.apache.kafka.common.errors.KafkaStorageException"
        );
        let only: Value =
            serde_json::from_str(&format_json(&dirs, &BTreeSet::from(["users".to_owned()])))
                .unwrap();
        assert_eq!(
            only["brokers"][0]["logDirs"][0]["partitions"],
            json!([{"partition": "users-1", "size": 7, "offsetLag": 0, "isFuture": false}])
        );
    }

    #[test]
    fn lists_split_at_commas_and_drop_empty_items() {
        assert_eq!(
            parse_list::<i32>("1, 2,,3,").unwrap(),
            BTreeSet::from([1, 2, 3])
        );
        assert!(parse_list::<i32>("").unwrap().is_empty());
        assert_eq!(parse_list::<i32>("1,x").unwrap_err(), "x");
    }
}
