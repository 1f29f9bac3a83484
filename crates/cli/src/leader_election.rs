//! `gregor leader-election`: Kafka's `kafka-leader-election.sh` (2.8's `LeaderElectionCommand`),
//! same flags, same output: one line for the partitions elected, one for those whose valid
//! leader was already elected (ELECTION_NOT_NEEDED), one per failure with its exception, and
//! exit code 1 when any partition failed or the options are wrong.
//!
//! Option checks, the JSON file and the output are pure functions, tested below; only
//! [`run`] talks to the cluster.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use client::{AdminClient, ClientError};

/// The flags of `kafka-leader-election.sh`.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Elect preferred or unclean leaders (kafka-leader-election.sh).")]
pub struct LeaderElectionArgs {
    /// REQUIRED: the server(s) to connect to.
    #[arg(long, value_name = "host:port")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(
        long = "admin.config",
        alias = "command-config",
        value_name = "config file"
    )]
    pub admin_config: Option<PathBuf>,
    /// REQUIRED: type of election to attempt: PREFERRED or UNCLEAN.
    #[arg(long, value_name = "election type")]
    pub election_type: Option<String>,
    /// Name of the topic for which to perform an election (requires --partition).
    #[arg(long, value_name = "topic name")]
    pub topic: Option<String>,
    /// Partition id for which to perform an election (requires --topic).
    #[arg(long, value_name = "partition id")]
    pub partition: Option<i32>,
    /// The JSON file with the partitions to elect:
    /// {"partitions": [{"topic": "foo", "partition": 1}, ...]}.
    #[arg(long, value_name = "Path to JSON file")]
    pub path_to_json_file: Option<PathBuf>,
    /// Perform the election on all topic partitions.
    #[arg(long)]
    pub all_topic_partitions: bool,
}

/// What to elect, once the options are valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// 0 PREFERRED, 1 UNCLEAN.
    pub election_type: i8,
    /// The partitions (`None`: all).
    pub partitions: Option<Vec<(String, i32)>>,
}

/// Kafka's option checks, in its order and words.
pub fn validate(args: &LeaderElectionArgs) -> Result<(), String> {
    if args.bootstrap_server.is_none() {
        return Err("Missing required argument \"[bootstrap-server]\"".to_owned());
    }
    let Some(kind) = &args.election_type else {
        return Err("Missing required argument \"[election-type]\"".to_owned());
    };
    if election_type(kind).is_none() {
        return Err(format!(
            "Value for option election-type must be PREFERRED or UNCLEAN, not {kind}"
        ));
    }
    let chosen = [
        args.topic.is_some(),
        args.all_topic_partitions,
        args.path_to_json_file.is_some(),
    ]
    .iter()
    .filter(|&&b| b)
    .count();
    if chosen != 1 {
        return Err("One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file".to_owned());
    }
    match (args.topic.is_some(), args.partition.is_some()) {
        (true, false) => Err("Missing required option(s): --partition".to_owned()),
        (false, true) => Err("Option --partition is only allowed if --topic is used".to_owned()),
        _ => Ok(()),
    }
}

/// PREFERRED -> 0, UNCLEAN -> 1 (any case, as Kafka's `ElectionType` converter).
pub fn election_type(text: &str) -> Option<i8> {
    match text.to_ascii_uppercase().as_str() {
        "PREFERRED" => Some(0),
        "UNCLEAN" => Some(1),
        _ => None,
    }
}

/// Kafka's `parsePartitions`: `{"partitions": [{"topic": .., "partition": ..}]}`; duplicates
/// are refused.
pub fn parse_json(text: &str) -> Result<Vec<(String, i32)>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("The JSON file is not valid JSON: {e}"))?;
    let Some(entries) = value.get("partitions").and_then(|p| p.as_array()) else {
        return Err("Replica election data is missing \"partitions\" field".to_owned());
    };
    let mut partitions = Vec::new();
    for entry in entries {
        let topic = entry.get("topic").and_then(|t| t.as_str());
        let partition = entry.get("partition").and_then(|p| p.as_i64());
        match (topic, partition) {
            (Some(t), Some(p)) if i32::try_from(p).is_ok() => {
                partitions.push((t.to_owned(), p as i32))
            }
            _ => {
                return Err(format!(
                    "Each entry of \"partitions\" needs a string \"topic\" and an integer \"partition\": {entry}"
                ))
            }
        }
    }
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<String> = partitions
        .iter()
        .filter(|tp| !seen.insert((*tp).clone()))
        .map(|(t, p)| format!("{t}-{p}"))
        .collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "Replica election data contains duplicate partitions: {}",
            duplicates.into_iter().collect::<Vec<_>>().join(",")
        ));
    }
    Ok(partitions)
}

/// The Java exception Kafka's tool prints for an error code.
fn exception_name(code: i16) -> &'static str {
    match code {
        3 => "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
        7 => "org.apache.kafka.common.errors.TimeoutException",
        17 => "org.apache.kafka.common.errors.InvalidTopicException",
        41 => "org.apache.kafka.common.errors.NotControllerException",
        42 => "org.apache.kafka.common.errors.InvalidRequestException",
        80 => "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException",
        83 => "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException",
        _ => "org.apache.kafka.common.errors.UnknownServerException",
    }
}

/// ELECTION_NOT_NEEDED.
const ELECTION_NOT_NEEDED: i16 = 84;

/// Kafka's output lines for the results, and whether any partition failed.
pub fn report(kind: &str, results: &[(String, Result<(), ClientError>)]) -> (Vec<String>, bool) {
    let mut succeeded = Vec::new();
    let mut noop = Vec::new();
    let mut failed = Vec::new();
    for (tp, result) in results {
        match result {
            Ok(()) => succeeded.push(tp.clone()),
            Err(e) if e.code() == Some(ELECTION_NOT_NEEDED) => noop.push(tp.clone()),
            Err(e) => failed.push((tp.clone(), e)),
        }
    }
    let mut lines = Vec::new();
    if !succeeded.is_empty() {
        lines.push(format!(
            "Successfully completed leader election ({kind}) for partitions {}",
            succeeded.join(", ")
        ));
    }
    if !noop.is_empty() {
        lines.push(format!(
            "Valid replica already elected for partitions {}",
            noop.join(", ")
        ));
    }
    for (tp, e) in &failed {
        let class = e
            .code()
            .map_or("org.apache.kafka.common.KafkaException", exception_name);
        lines.push(format!(
            "Error completing leader election ({kind}) for partition: {tp}: {class}: {e}"
        ));
    }
    if !failed.is_empty() {
        lines.push(format!("{} replica(s) could not be elected", failed.len()));
    }
    (lines, !failed.is_empty())
}

/// Runs `gregor leader-election`.
pub fn run(args: LeaderElectionArgs) -> anyhow::Result<ExitCode> {
    if let Err(message) = validate(&args) {
        eprintln!("{message}");
        return Ok(ExitCode::from(1));
    }
    let kind = args
        .election_type
        .as_deref()
        .unwrap_or_default()
        .to_ascii_uppercase();
    let partitions = if let Some(path) = &args.path_to_json_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --path-to-json-file {}", path.display()))?;
        match parse_json(&text) {
            Ok(p) => Some(p),
            Err(message) => {
                eprintln!("{message}");
                return Ok(ExitCode::from(1));
            }
        }
    } else if let (Some(topic), Some(partition)) = (&args.topic, args.partition) {
        Some(vec![(topic.clone(), partition)])
    } else {
        None
    };
    let plan = Plan {
        election_type: election_type(&kind).unwrap_or(0),
        partitions,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let options = crate::admin_options::admin_options(
            args.bootstrap_server.as_deref().unwrap_or_default(),
            "leader-election-tool",
            args.admin_config.as_deref(),
            "--admin.config",
        )?;
        let mut admin = AdminClient::connect(options).await?;
        let results = admin
            .elect_leaders(plan.election_type, plan.partitions.as_deref())
            .await?;
        anyhow::Ok(results)
    });
    let results = match result {
        Ok(results) => results,
        Err(err) => {
            match err.downcast_ref::<ClientError>() {
                Some(ClientError::Timeout { .. }) => {
                    println!("Timeout waiting for election results")
                }
                _ => println!("Error while making request"),
            }
            eprintln!("{err:#}");
            return Ok(ExitCode::from(1));
        }
    };
    let (lines, failed) = report(&kind, &results);
    for line in &lines {
        println!("{line}");
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LeaderElectionArgs,
    }

    fn check(argv: &[&str]) -> Result<(), String> {
        let mut full = vec!["leader-election"];
        full.extend_from_slice(argv);
        validate(&Cli::parse_from(full).args)
    }

    #[test]
    fn options_are_checked_as_kafka_does() {
        let bs = ["--bootstrap-server", "x:1"];
        assert!(check(&[]).unwrap_err().contains("[bootstrap-server]"));
        assert!(check(&bs).unwrap_err().contains("[election-type]"));
        let with = |rest: &[&'static str]| {
            let mut v = vec!["--bootstrap-server", "x:1", "--election-type", "preferred"];
            v.extend_from_slice(rest);
            check(&v)
        };
        assert!(with(&[]).unwrap_err().starts_with("One and only one"));
        assert!(
            with(&["--all-topic-partitions", "--topic", "t", "--partition", "0"])
                .unwrap_err()
                .starts_with("One and only one")
        );
        assert_eq!(
            with(&["--topic", "t"]).unwrap_err(),
            "Missing required option(s): --partition"
        );
        assert_eq!(
            with(&["--all-topic-partitions", "--partition", "1"]).unwrap_err(),
            "Option --partition is only allowed if --topic is used"
        );
        assert!(with(&["--topic", "t", "--partition", "0"]).is_ok());
        assert!(with(&["--all-topic-partitions"]).is_ok());
        assert!(check(&[
            "--bootstrap-server",
            "x:1",
            "--election-type",
            "sideways",
            "--all-topic-partitions"
        ])
        .unwrap_err()
        .contains("PREFERRED or UNCLEAN"));
    }

    #[test]
    fn json_file_is_kafkas_and_duplicates_are_refused() {
        assert_eq!(
            parse_json(
                r#"{"partitions":[{"topic":"a","partition":1},{"topic":"b","partition":0}]}"#
            )
            .unwrap(),
            vec![("a".to_owned(), 1), ("b".to_owned(), 0)]
        );
        assert_eq!(
            parse_json(
                r#"{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}"#
            )
            .unwrap_err(),
            "Replica election data contains duplicate partitions: a-1"
        );
        assert!(parse_json(r#"{"partitions":[{"topic":"a"}]}"#).is_err());
        assert!(parse_json("{}").unwrap_err().contains("\"partitions\""));
        assert!(parse_json("nope").is_err());
    }

    #[test]
    fn report_lines_are_kafkas() {
        let results = vec![
            ("t-0".to_owned(), Ok(())),
            ("t-1".to_owned(), Err(ClientError::server(84, None))),
            ("t-2".to_owned(), Ok(())),
            (
                "t-3".to_owned(),
                Err(ClientError::server(
                    80,
                    Some("preferred replica 2 is not alive"),
                )),
            ),
        ];
        let (lines, failed) = report("PREFERRED", &results);
        assert!(failed);
        assert_eq!(
            lines,
            vec![
                "Successfully completed leader election (PREFERRED) for partitions t-0, t-2",
                "Valid replica already elected for partitions t-1",
                "Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: preferred replica 2 is not alive",
                "1 replica(s) could not be elected",
            ]
        );
        let (lines, failed) = report("UNCLEAN", &results[1..2]);
        assert!(!failed);
        assert_eq!(
            lines,
            vec!["Valid replica already elected for partitions t-1"]
        );
    }
}
