//! `gregor delete-records`: Kafka's `kafka-delete-records.sh` (DeleteRecordsCommand): moves
//! the log start offset of partitions up to the offsets of a JSON file, on their leaders.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::DeleteRecordsRequest;

use crate::cluster::{self, Cluster};

/// The flags of `kafka-delete-records.sh`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Delete the records of partitions below the given offsets (kafka-delete-records.sh)."
)]
pub struct DeleteRecordsArgs {
    /// REQUIRED: The server to connect to.
    #[arg(long, value_name = "server(s) to use for bootstrapping")]
    pub bootstrap_server: Option<String>,
    /// REQUIRED: The JSON file with offset per partition. The format to use is:
    /// {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version":1}
    #[arg(long, value_name = "Offset json file path")]
    pub offset_json_file: Option<std::path::PathBuf>,
    /// A property file containing configs to be passed to Admin Client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "command config property file path"
    )]
    pub command_config: Option<std::path::PathBuf>,
}

/// The partitions and offsets of the JSON file, each partition once (DeleteRecordsCommand's
/// checks and messages).
fn parse_offsets(text: &str) -> Result<BTreeMap<(String, i32), i64>, String> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| "The input string is not a valid JSON".to_owned())?;
    let version = json
        .get("version")
        .map_or(Some(1), serde_json::Value::as_i64);
    if version != Some(1) {
        return Err(format!(
            "Not supported version field value {}",
            json.get("version")
                .map_or_else(String::new, ToString::to_string)
        ));
    }
    let partitions = json
        .get("partitions")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| "Missing partitions field".to_owned())?;
    let mut offsets = BTreeMap::new();
    let mut duplicates = Vec::new();
    for entry in partitions {
        let topic = entry.get("topic").and_then(serde_json::Value::as_str);
        let partition = entry
            .get("partition")
            .and_then(serde_json::Value::as_i64)
            .and_then(|p| i32::try_from(p).ok());
        let offset = entry.get("offset").and_then(serde_json::Value::as_i64);
        let (Some(topic), Some(partition), Some(offset)) = (topic, partition, offset) else {
            return Err(format!(
                "Each entry of partitions needs a string topic, an int partition and a long offset: {entry}"
            ));
        };
        if offsets
            .insert((topic.to_owned(), partition), offset)
            .is_some()
        {
            duplicates.push(format!("{topic}-{partition}"));
        }
    }
    if !duplicates.is_empty() {
        return Err(format!(
            "Offset json file contains duplicate topic partitions: {}",
            duplicates.join(",")
        ));
    }
    Ok(offsets)
}

/// Runs the command; returns the process exit code.
pub fn run(args: DeleteRecordsArgs) -> anyhow::Result<ExitCode> {
    let (Some(bootstrap), Some(file)) = (&args.bootstrap_server, &args.offset_json_file) else {
        eprintln!(
            "Missing required argument \"[{}]\"",
            if args.bootstrap_server.is_none() {
                "bootstrap-server"
            } else {
                "offset-json-file"
            }
        );
        return Ok(ExitCode::from(1));
    };
    let offsets = match std::fs::read_to_string(file)
        .map_err(|e| format!("{}: {e}", file.display()))
        .and_then(|text| parse_offsets(&text))
    {
        Ok(offsets) => offsets,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(1));
        }
    };
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(
            bootstrap,
            "gregor-delete-records",
            args.command_config.as_deref(),
        )?;
        let mut cluster = Cluster::connect(bootstrap, options).await?;
        println!("Executing records delete operation");
        let mut results: BTreeMap<String, Result<i64, String>> = BTreeMap::new();
        let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<(i32, i64)>>> = BTreeMap::new();
        for ((topic, partition), offset) in &offsets {
            let leader = cluster
                .leaders
                .get(topic)
                .and_then(|p| p.get(partition))
                .copied();
            match leader {
                Some(leader) if leader >= 0 => by_leader
                    .entry(leader)
                    .or_default()
                    .entry(topic.clone())
                    .or_default()
                    .push((*partition, *offset)),
                Some(_) => {
                    results.insert(
                        format!("{topic}-{partition}"),
                        Err(cluster::error_message(5).to_owned()),
                    );
                }
                None => {
                    results.insert(
                        format!("{topic}-{partition}"),
                        Err(cluster::error_message(3).to_owned()),
                    );
                }
            }
        }
        for (leader, topics) in by_leader {
            let request = DeleteRecordsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(
                    topics
                        .iter()
                        .map(|(topic, partitions)| {
                            DeleteRecordsTopic::default()
                                .with_name(cluster::topic_name(topic))
                                .with_partitions(
                                    partitions
                                        .iter()
                                        .map(|(p, o)| {
                                            DeleteRecordsPartition::default()
                                                .with_partition_index(*p)
                                                .with_offset(*o)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let response = cluster.broker(leader).await?.send(request).await?;
            for topic in response.topics {
                for p in topic.partitions {
                    let key = format!("{}-{}", topic.name.as_str(), p.partition_index);
                    let answer = if p.error_code == 0 {
                        Ok(p.low_watermark)
                    } else {
                        Err(cluster::error_message(p.error_code).to_owned())
                    };
                    results.insert(key, answer);
                }
            }
        }
        anyhow::Ok(results)
    });
    match result {
        Ok(results) => {
            println!("Records delete operation completed:");
            for (partition, answer) in results {
                match answer {
                    Ok(low) => println!("partition: {partition}\tlow_watermark: {low}"),
                    Err(message) => println!("partition: {partition}\terror: {message}"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_file_is_checked_as_kafka_checks_it() {
        let ok =
            parse_offsets(r#"{"partitions":[{"topic":"t","partition":1,"offset":5}],"version":1}"#)
                .unwrap();
        assert_eq!(ok, BTreeMap::from([(("t".to_owned(), 1), 5)]));
        assert_eq!(
            parse_offsets("nope").unwrap_err(),
            "The input string is not a valid JSON"
        );
        assert_eq!(
            parse_offsets(r#"{"version":1}"#).unwrap_err(),
            "Missing partitions field"
        );
        assert!(parse_offsets(r#"{"partitions":[],"version":2}"#)
            .unwrap_err()
            .starts_with("Not supported version field value 2"));
        assert_eq!(
            parse_offsets(r#"{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,"offset":2}]}"#)
                .unwrap_err(),
            "Offset json file contains duplicate topic partitions: t-0"
        );
    }
}
