//! `gregor get-offsets`: Kafka's `kafka-get-offsets.sh` (GetOffsetShell): the offsets of
//! topic partitions at a time (`latest`, `earliest`, `max-timestamp` or a timestamp in ms),
//! printed as `topic:partition:offset`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use clap::Args;

use crate::cluster::{self, Cluster};

/// The flags of `kafka-get-offsets.sh`.
#[derive(Debug, Clone, Args)]
#[command(about = "Print the offsets of topic partitions at a time (kafka-get-offsets.sh).")]
pub struct GetOffsetsArgs {
    /// REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.
    #[arg(long, value_name = "HOST1:PORT1,...,HOST3:PORT3")]
    pub bootstrap_server: Option<String>,
    /// Comma separated list of topic-partition patterns to get the offsets for, with the
    /// format of `topic-regex:partition` where the partition is a number, `N-M` (upper
    /// exclusive), `N-` or `-M`.
    #[arg(long, value_name = "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3")]
    pub topic_partitions: Option<String>,
    /// The topic to get the offsets for. It also accepts a regular expression. If not present,
    /// all authorized topics are queried. Cannot be used if --topic-partitions is present.
    #[arg(long, value_name = "topic")]
    pub topic: Option<String>,
    /// Comma separated list of partition ids to get the offsets for. If not present, all
    /// partitions of the authorized topics are queried. Cannot be used if --topic-partitions
    /// is present.
    #[arg(long, value_name = "partition ids")]
    pub partitions: Option<String>,
    /// timestamp of the offsets before that: <timestamp> / -1 or latest / -2 or earliest /
    /// -3 or max-timestamp.
    #[arg(
        long,
        value_name = "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp",
        default_value = "latest",
        allow_hyphen_values = true
    )]
    pub time: String,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(long, alias = "admin.config", value_name = "config file")]
    pub command_config: Option<std::path::PathBuf>,
    /// By default, internal topics are included. If specified, internal topics are excluded.
    #[arg(long)]
    pub exclude_internal_topics: bool,
}

/// The ListOffsets timestamp `--time` names.
fn parse_time(time: &str) -> Result<i64, String> {
    match time {
        "latest" => Ok(-1),
        "earliest" => Ok(-2),
        "max-timestamp" => Ok(-3),
        other => other.parse::<i64>().map_err(|_| {
            format!(
                "Malformed time argument {other}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp"
            )
        }),
    }
}

/// Which partitions of a topic a rule accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PartitionFilter {
    All,
    One(i32),
    /// lower inclusive, upper exclusive.
    Range(i32, i32),
    Set(BTreeSet<i32>),
}

impl PartitionFilter {
    fn accepts(&self, p: i32) -> bool {
        match self {
            PartitionFilter::All => true,
            PartitionFilter::One(one) => *one == p,
            PartitionFilter::Range(low, high) => *low <= p && p < *high,
            PartitionFilter::Set(set) => set.is_empty() || set.contains(&p),
        }
    }
}

/// A topic regex (matched whole, as Java's `matches`) and its partitions.
#[derive(Debug, Clone)]
struct Rule {
    topic: regex::Regex,
    partitions: PartitionFilter,
}

fn whole(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("Invalid topic pattern {pattern}: {e}"))
}

/// `--topic-partitions`' rules (GetOffsetShell's `TOPIC_PARTITION_PATTERN`).
fn parse_rules(spec: &str) -> Result<Vec<Rule>, String> {
    let pattern = regex::Regex::new(r"^([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?$")
        .expect("a valid pattern");
    spec.split(',')
        .map(|rule| {
            let caps = pattern
                .captures(rule)
                .ok_or_else(|| format!("Invalid rule specification: {rule}"))?;
            let group = |i: usize| caps.get(i).map(|m| m.as_str()).filter(|s| !s.is_empty());
            let topic = whole(group(1).unwrap_or(".*"))?;
            let number = |s: &str| {
                s.parse::<i32>()
                    .map_err(|_| format!("Invalid rule specification: {rule}"))
            };
            let partitions = if let Some(one) = group(2) {
                PartitionFilter::One(number(one)?)
            } else if group(3).is_some() || group(4).is_some() {
                PartitionFilter::Range(
                    group(3).map(number).transpose()?.unwrap_or(0),
                    group(4).map(number).transpose()?.unwrap_or(i32::MAX),
                )
            } else {
                PartitionFilter::All
            };
            Ok(Rule { topic, partitions })
        })
        .collect()
}

/// `--topic` and `--partitions` as one rule.
fn topic_rule(topic: Option<&str>, partitions: Option<&str>) -> Result<Vec<Rule>, String> {
    let set = match partitions.filter(|p| !p.is_empty()) {
        None => BTreeSet::new(),
        Some(list) => list
            .split(',')
            .map(|p| p.trim().parse::<i32>())
            .collect::<Result<_, _>>()
            .map_err(|_| {
                format!(
                    "--partitions expects a comma separated list of numeric partition ids, but received: {list}"
                )
            })?,
    };
    Ok(vec![Rule {
        topic: whole(topic.unwrap_or(".*"))?,
        partitions: PartitionFilter::Set(set),
    }])
}

/// Runs the command; returns the process exit code.
pub fn run(args: GetOffsetsArgs) -> anyhow::Result<ExitCode> {
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        eprintln!("Missing required argument \"[bootstrap-server]\"");
        return Ok(ExitCode::from(1));
    };
    let fail = |message: String| {
        eprintln!("Error occurred: {message}");
        Ok(ExitCode::from(1))
    };
    if args.topic_partitions.is_some() && (args.topic.is_some() || args.partitions.is_some()) {
        return fail("--topic-partitions cannot be used with --topic or --partitions".into());
    }
    let time = match parse_time(&args.time) {
        Ok(time) => time,
        Err(message) => return fail(message),
    };
    let rules = match &args.topic_partitions {
        Some(spec) => parse_rules(spec),
        None => topic_rule(args.topic.as_deref(), args.partitions.as_deref()),
    };
    let rules = match rules {
        Ok(rules) => rules,
        Err(message) => return fail(message),
    };
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(
            &bootstrap,
            "GetOffsetShell",
            args.command_config.as_deref(),
        )?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let mut wanted = BTreeSet::new();
        for (topic, partitions) in &cluster.leaders {
            if args.exclude_internal_topics && cluster.internal.contains(topic) {
                continue;
            }
            for p in partitions.keys() {
                if rules
                    .iter()
                    .any(|r| r.topic.is_match(topic) && r.partitions.accepts(*p))
                {
                    wanted.insert((topic.clone(), *p));
                }
            }
        }
        if wanted.is_empty() {
            anyhow::bail!("Could not match any topic-partitions with the specified filters");
        }
        cluster.list_offsets_detailed(&wanted, time, 0).await
    });
    let answers = match result {
        Ok(answers) => answers,
        Err(err) => return fail(format!("{err:#}")),
    };
    // Kafka sorts by TopicPartition.toString(): `topic-partition`.
    let mut sorted: BTreeMap<String, (String, i32, i64)> = BTreeMap::new();
    for ((topic, partition), answer) in answers {
        match answer {
            Ok(offset) if offset >= 0 => {
                sorted.insert(format!("{topic}-{partition}"), (topic, partition, offset));
            }
            Ok(_) => {}
            Err(code) => eprintln!(
                "Skip getting offsets for topic-partition {topic}-{partition} due to error: {}",
                cluster::error_message(code)
            ),
        }
    }
    for (topic, partition, offset) in sorted.values() {
        println!("{topic}:{partition}:{offset}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_rules_parse_as_kafkas() {
        assert_eq!(parse_time("latest"), Ok(-1));
        assert_eq!(parse_time("-2"), Ok(-2));
        assert_eq!(parse_time("1700000000000"), Ok(1_700_000_000_000));
        assert!(parse_time("yesterday")
            .unwrap_err()
            .starts_with("Malformed time argument yesterday."));
        let rules = parse_rules("orders:1,logs.*:2-4,:-2").unwrap();
        assert!(rules[0].topic.is_match("orders") && !rules[0].topic.is_match("orders2"));
        assert_eq!(rules[0].partitions, PartitionFilter::One(1));
        assert_eq!(rules[1].partitions, PartitionFilter::Range(2, 4));
        assert!(rules[2].topic.is_match("anything"));
        assert_eq!(rules[2].partitions, PartitionFilter::Range(0, 2));
        assert!(topic_rule(Some("t"), Some("0,x")).is_err());
    }
}
