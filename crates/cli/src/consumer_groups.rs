//! `gregor consumer-groups`: Kafka 2.8's `kafka-consumer-groups.sh --bootstrap-server ...`
//! for `--list`, `--describe`, `--reset-offsets` and `--delete`, with its output shapes and
//! messages, over the `client` crate's [`Connection`].
//!
//! The group's coordinator is found with FindCoordinator; committed offsets come from
//! OffsetFetch, log-end offsets from ListOffsets (latest) sent to each partition's leader,
//! members from DescribeGroups. Formatting is pure and tested below; only the `execute_*`
//! functions talk to brokers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context as _};
use clap::Args;
use group_coordinator::reset::{self, ResetTo};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, ListGroupsRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::{error_message, Cluster};

const CLIENT_ID: &str = "gregor-consumer-groups";
/// What kafka-consumer-groups.sh prints for a missing value.
const MISSING: &str = "-";

/// The flags of `kafka-consumer-groups.sh` that Gregor implements.
#[derive(Debug, Default, Clone, Args)]
#[command(
    about = "List, describe, reset offsets of, or delete consumer groups (kafka-consumer-groups.sh)."
)]
pub struct ConsumerGroupsArgs {
    /// REQUIRED: The server(s) to connect to (host:port[,host:port...]).
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client and Consumer
    /// (`security.protocol`, `sasl.*`, `ssl.*`).
    #[arg(
        long,
        alias = "admin.config",
        value_name = "command config property file"
    )]
    pub command_config: Option<std::path::PathBuf>,
    /// List all consumer groups.
    #[arg(long)]
    pub list: bool,
    /// Describe consumer group and list offset lag (number of messages not yet processed)
    /// related to given group.
    #[arg(long)]
    pub describe: bool,
    /// Pass in groups to delete topic partition offsets and ownership information over the
    /// entire consumer group.
    #[arg(long)]
    pub delete: bool,
    /// Reset offsets of consumer group. Supports one consumer group at the time, and
    /// instances should be inactive.
    #[arg(long)]
    pub reset_offsets: bool,
    /// The consumer group we wish to act on.
    #[arg(long, value_name = "consumer group")]
    pub group: Vec<String>,
    /// The topic whose consumer group information should be reset: `topic` or
    /// `topic:0,1,2`.
    #[arg(long, value_name = "topic")]
    pub topic: Vec<String>,
    /// Consider all topics assigned to a group in the `reset-offsets` process.
    #[arg(long)]
    pub all_topics: bool,
    /// Reset offsets to earliest offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// Reset offsets to latest offset.
    #[arg(long)]
    pub to_latest: bool,
    /// Reset offsets to a specific offset.
    #[arg(long, value_name = "offset", allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// Execute operation. Supported operations: reset-offsets.
    #[arg(long)]
    pub execute: bool,
    /// Only show results without executing changes on Consumer Groups. Supported operations:
    /// reset-offsets.
    #[arg(long)]
    pub dry_run: bool,
}

/// The one action a command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    List,
    Describe,
    Delete,
    ResetOffsets,
}

/// Kafka's argument checks, with its messages.
fn validate(args: &ConsumerGroupsArgs) -> Result<Action, String> {
    let actions = [
        (args.list, Action::List),
        (args.describe, Action::Describe),
        (args.delete, Action::Delete),
        (args.reset_offsets, Action::ResetOffsets),
    ];
    let chosen: Vec<Action> = actions
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, a)| *a)
        .collect();
    if chosen.len() != 1 {
        return Err(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets"
                .to_owned(),
        );
    }
    if args.bootstrap_server.is_none() {
        return Err("Missing required argument \"[bootstrap-server]\"".to_owned());
    }
    let action = chosen[0];
    match action {
        Action::List => {}
        Action::Describe | Action::Delete => {
            if args.group.is_empty() {
                return Err(format!(
                    "Option [{}] takes one of these options: [all-groups], [group]",
                    if action == Action::Describe {
                        "describe"
                    } else {
                        "delete"
                    }
                ));
            }
        }
        Action::ResetOffsets => {
            if args.group.len() != 1 {
                return Err(
                    "Option [reset-offsets] takes one of these options: [all-groups], [group]"
                        .to_owned(),
                );
            }
            if args.topic.is_empty() && !args.all_topics {
                return Err(
                    "Option [reset-offsets] takes one of these options: [all-topics], [topic]"
                        .to_owned(),
                );
            }
            let scenarios = [args.to_earliest, args.to_latest, args.to_offset.is_some()]
                .iter()
                .filter(|on| **on)
                .count();
            if scenarios != 1 {
                return Err("Option [reset-offsets] takes exactly one of these options: [to-datetime], [by-duration], [to-earliest], [to-latest], [shift-by], [from-file], [to-current], [to-offset]".to_owned());
            }
            if args.execute && args.dry_run {
                return Err(
                    "Option [reset-offsets] only accepts one of [execute], [dry-run]".to_owned(),
                );
            }
        }
    }
    Ok(action)
}

/// Runs the command; returns the process exit code.
pub fn run(args: ConsumerGroupsArgs) -> anyhow::Result<ExitCode> {
    let action = match validate(&args) {
        Ok(action) => action,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(1));
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let bootstrap = args.bootstrap_server.as_deref().unwrap_or("");
        let options = crate::admin_options::admin_options(
            bootstrap,
            CLIENT_ID,
            args.command_config.as_deref(),
            "--command-config",
        )?;
        let mut cluster = Cluster::connect(bootstrap, options.connection).await?;
        match action {
            Action::List => execute_list(&mut cluster).await,
            Action::Describe => {
                let mut out = Output::default();
                for group in &args.group {
                    execute_describe(&mut cluster, group, &mut out).await?;
                }
                Ok(out)
            }
            Action::Delete => execute_delete(&mut cluster, &args.group).await,
            Action::ResetOffsets => execute_reset(&mut cluster, &args).await,
        }
    });
    match result {
        Ok(out) => {
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            println!("Error: Executing consumer group command failed due to {err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Text for stdout and stderr, printed once the action finished.
#[derive(Debug, Default)]
struct Output {
    stdout: String,
    stderr: String,
}

async fn execute_list(cluster: &mut Cluster) -> anyhow::Result<Output> {
    let ids: Vec<i32> = cluster.brokers.keys().copied().collect();
    let mut groups = BTreeSet::new();
    for id in ids {
        let mut response = cluster
            .broker(id)
            .await?
            .send(ListGroupsRequest::default())
            .await?;
        // A coordinator still loading its groups asks to be asked again (Kafka's admin
        // client retries COORDINATOR_LOAD_IN_PROGRESS).
        for _ in 0..50 {
            if response.error_code != 14 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            response = cluster
                .broker(id)
                .await?
                .send(ListGroupsRequest::default())
                .await?;
        }
        if response.error_code != 0 {
            bail!("{}", error_message(response.error_code));
        }
        groups.extend(response.groups.into_iter().map(|g| g.group_id.to_string()));
    }
    let mut out = Output::default();
    for group in groups {
        let _ = writeln!(out.stdout, "{group}");
    }
    Ok(out)
}

/// A described member: id, host, client id and its assigned partitions.
type Member = (String, String, String, Vec<(String, i32)>);

/// One row of `--describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    group: String,
    topic: String,
    partition: i32,
    current: Option<i64>,
    log_end: Option<i64>,
    consumer_id: Option<String>,
    host: Option<String>,
    client_id: Option<String>,
}

impl Row {
    fn lag(&self) -> Option<i64> {
        match (self.current, self.log_end) {
            (Some(current), Some(end)) => Some((end - current).max(0)),
            _ => None,
        }
    }
}

fn opt<T: ToString>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| MISSING.to_owned(), ToString::to_string)
}

/// Kafka's `printOffsets` table: a blank line, the header, the rows, a blank line.
fn format_rows(rows: &[Row]) -> String {
    let width = |f: &dyn Fn(&Row) -> usize| rows.iter().map(f).max().unwrap_or(0).max(15);
    let g = width(&|r| r.group.len());
    let t = width(&|r| r.topic.len());
    let c = width(&|r| opt(&r.consumer_id).len());
    let h = width(&|r| opt(&r.host).len());
    let mut out = String::from("\n");
    let line = |cols: [String; 9]| {
        format!(
            "{:<g$} {:<t$} {:<10} {:<15} {:<15} {:<15} {:<c$} {:<h$} {}",
            cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8]
        )
    };
    let header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    .map(str::to_owned);
    out.push_str(line(header).trim_end());
    out.push('\n');
    for r in rows {
        let cols = [
            r.group.clone(),
            r.topic.clone(),
            r.partition.to_string(),
            opt(&r.current),
            opt(&r.log_end),
            opt(&r.lag()),
            opt(&r.consumer_id),
            opt(&r.host),
            opt(&r.client_id),
        ];
        out.push_str(&line(cols));
        out.push('\n');
    }
    out.push('\n');
    out
}

async fn describe(cluster: &mut Cluster, group: &str) -> anyhow::Result<DescribeGroupsResponse> {
    Ok(cluster
        .coordinator(group)
        .await?
        .send(
            DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]),
        )
        .await?)
}

/// Committed offsets of `group`: (topic, partition) -> offset.
async fn committed(
    cluster: &mut Cluster,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let response = cluster
        .coordinator(group)
        .await?
        .send_version(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                .with_topics(None),
            7,
        )
        .await?;
    if response.error_code != 0 {
        bail!("{}", error_message(response.error_code));
    }
    Ok(response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
                .map(|p| ((t.name.to_string(), p.partition_index), p.committed_offset))
        })
        .collect())
}

async fn execute_describe(
    cluster: &mut Cluster,
    group: &str,
    out: &mut Output,
) -> anyhow::Result<()> {
    let described = describe(cluster, group).await?;
    let Some(info) = described.groups.first() else {
        bail!("the coordinator did not describe group '{group}'");
    };
    if info.error_code != 0 {
        bail!("{}", error_message(info.error_code));
    }
    let state = info.group_state.to_string();
    let committed = committed(cluster, group).await?;
    if state == "Dead" && committed.is_empty() {
        let _ = writeln!(
            out.stderr,
            "Error: Consumer group '{group}' does not exist."
        );
        return Ok(());
    }
    // Members with their assignments, the largest assignment first (as Kafka orders them).
    let mut members: Vec<Member> = info
        .members
        .iter()
        .map(|m| {
            let mut assigned: Vec<(String, i32)> =
                group_coordinator::consumer_protocol::assigned_partitions(&m.member_assignment)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                    .collect();
            assigned.sort();
            (
                m.member_id.to_string(),
                m.client_host.to_string(),
                m.client_id.to_string(),
                assigned,
            )
        })
        .collect();
    members.sort_by(|a, b| b.3.len().cmp(&a.3.len()).then_with(|| a.0.cmp(&b.0)));
    let mut all: BTreeSet<(String, i32)> = committed.keys().cloned().collect();
    for member in &members {
        all.extend(member.3.iter().cloned());
    }
    let log_end = cluster.list_offsets(&all, -1).await?;
    let mut rows = Vec::new();
    let mut assigned = BTreeSet::new();
    for (member_id, host, client_id, partitions) in &members {
        for tp in partitions {
            assigned.insert(tp.clone());
            rows.push(Row {
                group: group.to_owned(),
                topic: tp.0.clone(),
                partition: tp.1,
                current: committed.get(tp).copied(),
                log_end: log_end.get(tp).copied(),
                consumer_id: Some(member_id.clone()),
                host: Some(host.clone()),
                client_id: Some(client_id.clone()),
            });
        }
    }
    for (tp, offset) in &committed {
        if !assigned.contains(tp) {
            rows.push(Row {
                group: group.to_owned(),
                topic: tp.0.clone(),
                partition: tp.1,
                current: Some(*offset),
                log_end: log_end.get(tp).copied(),
                consumer_id: None,
                host: None,
                client_id: None,
            });
        }
    }
    match state.as_str() {
        "Empty" => {
            let _ = writeln!(
                out.stderr,
                "\nConsumer group '{group}' has no active members."
            );
        }
        "PreparingRebalance" | "CompletingRebalance" | "Reconciling" | "Assigning" => {
            let _ = writeln!(
                out.stderr,
                "\nWarning: Consumer group '{group}' is rebalancing."
            );
        }
        _ => {}
    }
    if !rows.is_empty() {
        out.stdout.push_str(&format_rows(&rows));
    }
    Ok(())
}

async fn execute_delete(cluster: &mut Cluster, groups: &[String]) -> anyhow::Result<Output> {
    let mut failed = Vec::new();
    for group in groups {
        let response = cluster
            .coordinator(group)
            .await?
            .send(
                DeleteGroupsRequest::default()
                    .with_groups_names(vec![GroupId(StrBytes::from_string(group.clone()))]),
            )
            .await?;
        for result in response.results {
            if result.error_code != 0 {
                failed.push((result.group_id.to_string(), result.error_code));
            }
        }
    }
    Ok(Output {
        stdout: format_delete(groups, &failed),
        ..Output::default()
    })
}

/// Kafka's messages after DeleteGroups.
fn format_delete(groups: &[String], failed: &[(String, i16)]) -> String {
    let quoted = |names: Vec<&str>| {
        names
            .iter()
            .map(|g| format!("'{g}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    let succeeded: Vec<&str> = groups
        .iter()
        .map(String::as_str)
        .filter(|g| !failed.iter().any(|(f, _)| f == g))
        .collect();
    if failed.is_empty() {
        let _ = writeln!(
            out,
            "Deletion of requested consumer groups ({}) was successful.",
            quoted(succeeded)
        );
    } else {
        let _ = writeln!(out, "Deletion of some consumer groups failed:");
        for (group, code) in failed {
            let _ = writeln!(
                out,
                "* Group '{group}' could not be deleted due to: {}",
                error_message(*code)
            );
        }
        if !succeeded.is_empty() {
            let _ = writeln!(
                out,
                "\nThese consumer groups were deleted successfully: {}",
                quoted(succeeded)
            );
        }
    }
    out
}

/// `topic` or `topic:0,1,2`.
fn parse_topic_spec(spec: &str) -> anyhow::Result<(String, Option<Vec<i32>>)> {
    match spec.split_once(':') {
        None => Ok((spec.to_owned(), None)),
        Some((topic, partitions)) => {
            let partitions = partitions
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse::<i32>()
                        .map_err(|_| anyhow!("invalid partition '{p}' in --topic {spec}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok((topic.to_owned(), Some(partitions)))
        }
    }
}

async fn execute_reset(cluster: &mut Cluster, args: &ConsumerGroupsArgs) -> anyhow::Result<Output> {
    let group = &args.group[0];
    let mut out = Output::default();
    let described = describe(cluster, group).await?;
    let state = described
        .groups
        .first()
        .map(|g| g.group_state.to_string())
        .unwrap_or_else(|| "Dead".to_owned());
    if let Some(refused) = reset::refuse_active(group, &state) {
        bail!("{refused}");
    }
    let mut partitions = BTreeSet::new();
    if args.all_topics {
        partitions.extend(committed(cluster, group).await?.into_keys());
    }
    for spec in &args.topic {
        let (topic, only) = parse_topic_spec(spec)?;
        let known = cluster
            .leaders
            .get(&topic)
            .ok_or_else(|| anyhow!("Topic '{topic}' does not exist"))?;
        match only {
            Some(only) => partitions.extend(only.into_iter().map(|p| (topic.clone(), p))),
            None => partitions.extend(known.keys().map(|p| (topic.clone(), *p))),
        }
    }
    let earliest = cluster.list_offsets(&partitions, -2).await?;
    let latest = cluster.list_offsets(&partitions, -1).await?;
    let mut new_offsets = BTreeMap::new();
    for tp in &partitions {
        let (Some(&low), Some(&high)) = (earliest.get(tp), latest.get(tp)) else {
            bail!("cannot read the offsets of {}-{}", tp.0, tp.1);
        };
        let to = if args.to_earliest {
            ResetTo::Earliest
        } else if args.to_latest {
            ResetTo::Latest
        } else {
            ResetTo::Offset(args.to_offset.unwrap_or(low))
        };
        let (offset, notice) = reset::new_offset(to, &tp.0, tp.1, low, high);
        if let Some(notice) = notice {
            let _ = writeln!(out.stdout, "{notice}");
        }
        new_offsets.insert(tp.clone(), offset);
    }
    if args.execute {
        let request = reset::commit_request(group, &new_offsets);
        let response = cluster.coordinator(group).await?.send(request).await?;
        for topic in response.topics {
            for p in topic.partitions {
                if p.error_code != 0 {
                    bail!(
                        "cannot commit the offset of {}-{}: {}",
                        topic.name.as_str(),
                        p.partition_index,
                        error_message(p.error_code)
                    );
                }
            }
        }
    } else if !args.dry_run {
        out.stdout.push_str("WARN: No action will be performed as the --execute option is missing.In a future major release, the default behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to keep the current default behavior without prompting.\n");
    }
    out.stdout.push_str(&format_reset(group, &new_offsets));
    Ok(out)
}

/// Kafka's `printOffsetsToReset` table.
fn format_reset(group: &str, offsets: &BTreeMap<(String, i32), i64>) -> String {
    let mut out = format!(
        "\n{:<30} {:<30} {:<10} {:<15}\n",
        "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"
    );
    for ((topic, partition), offset) in offsets {
        let _ = writeln!(out, "{group:<30} {topic:<30} {partition:<10} {offset:<15}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut ConsumerGroupsArgs)) -> ConsumerGroupsArgs {
        let mut a = ConsumerGroupsArgs {
            bootstrap_server: Some("b:9092".into()),
            ..Default::default()
        };
        f(&mut a);
        a
    }

    #[test]
    fn exactly_one_action_and_its_required_options() {
        assert!(validate(&args(|_| {})).is_err());
        assert!(validate(&args(|a| {
            a.list = true;
            a.describe = true;
        }))
        .is_err());
        assert_eq!(validate(&args(|a| a.list = true)), Ok(Action::List));
        assert!(validate(&args(|a| a.describe = true)).is_err());
        assert_eq!(
            validate(&args(|a| {
                a.describe = true;
                a.group = vec!["g".into()];
            })),
            Ok(Action::Describe)
        );
        let reset = |f: &dyn Fn(&mut ConsumerGroupsArgs)| {
            validate(&args(|a| {
                a.reset_offsets = true;
                a.group = vec!["g".into()];
                a.topic = vec!["t".into()];
                f(a);
            }))
        };
        assert!(reset(&|_| {}).is_err(), "no scenario");
        assert_eq!(reset(&|a| a.to_earliest = true), Ok(Action::ResetOffsets));
        assert!(reset(&|a| {
            a.to_earliest = true;
            a.to_latest = true;
        })
        .is_err());
        assert!(reset(&|a| {
            a.to_offset = Some(3);
            a.execute = true;
            a.dry_run = true;
        })
        .is_err());
    }

    #[test]
    fn describe_table_has_kafkas_columns_and_widths() {
        let rows = vec![
            Row {
                group: "g".into(),
                topic: "orders".into(),
                partition: 0,
                current: Some(3),
                log_end: Some(10),
                consumer_id: Some("rdkafka-1234".into()),
                host: Some("/127.0.0.1".into()),
                client_id: Some("rdkafka".into()),
            },
            Row {
                group: "g".into(),
                topic: "orders".into(),
                partition: 1,
                current: None,
                log_end: Some(4),
                consumer_id: None,
                host: None,
                client_id: None,
            },
        ];
        let text = format_rows(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID"
        );
        assert_eq!(
            lines[2],
            "g               orders          0          3               10              7               rdkafka-1234    /127.0.0.1      rdkafka"
        );
        assert_eq!(
            lines[3],
            "g               orders          1          -               4               -               -               -               -"
        );
        assert!(text.ends_with("\n\n"));
    }

    #[test]
    fn delete_and_reset_messages() {
        assert_eq!(
            format_delete(&["a".into(), "b".into()], &[]),
            "Deletion of requested consumer groups ('a', 'b') was successful.\n"
        );
        let failed = format_delete(&["a".into()], &[("a".into(), 68)]);
        assert!(failed.starts_with("Deletion of some consumer groups failed:\n* Group 'a' could not be deleted due to: "), "{failed}");
        let table = format_reset("g", &BTreeMap::from([(("t".to_owned(), 0), 5)]));
        assert_eq!(
            table,
            format!(
                "\n{:<30} {:<30} {:<10} {:<15}\n{:<30} {:<30} {:<10} {:<15}\n",
                "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "g", "t", 0, 5
            )
        );
        assert_eq!(
            parse_topic_spec("t:0,2").unwrap(),
            ("t".to_owned(), Some(vec![0, 2]))
        );
        assert_eq!(parse_topic_spec("t").unwrap(), ("t".to_owned(), None));
        assert!(parse_topic_spec("t:x").is_err());
    }
}
