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
    /// Delete offsets of consumer group. Supports one consumer group at the time, and
    /// multiple topics.
    #[arg(long)]
    pub delete_offsets: bool,
    /// Apply to all consumer groups.
    #[arg(long)]
    pub all_groups: bool,
    /// Describe members of the group. This option may be used with '--describe' and
    /// '--bootstrap-server' options only.
    #[arg(long)]
    pub members: bool,
    /// Describe the group and list all topic partitions in the group along with their offset
    /// lag. This is the default sub-action of and may be used with '--describe' and
    /// '--bootstrap-server' options only.
    #[arg(long)]
    pub offsets: bool,
    /// When specified with '--describe', includes the state of the group. When specified
    /// with '--list', it displays the state of all groups.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub state: Option<String>,
    /// Provide additional information, if any, when describing the group. This option may
    /// be used with '--offsets'/'--members'/'--state' and '--bootstrap-server' options only.
    #[arg(long)]
    pub verbose: bool,
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
    /// Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.
    #[arg(long, value_name = "number-of-offsets", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'
    /// (UTC unless a zone such as 'Z' or '+02:00' follows).
    #[arg(long, value_name = "datetime")]
    pub to_datetime: Option<String>,
    /// Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'.
    #[arg(long, value_name = "duration")]
    pub by_duration: Option<String>,
    /// Reset offsets to current offset.
    #[arg(long)]
    pub to_current: bool,
    /// Reset offsets to values defined in CSV file (topic,partition,offset, or
    /// group,topic,partition,offset).
    #[arg(long, value_name = "path to CSV file")]
    pub from_file: Option<std::path::PathBuf>,
    /// Export operation execution to a CSV file. Supported operations: reset-offsets.
    #[arg(long)]
    pub export: bool,
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
    DeleteOffsets,
}

/// Kafka's argument checks, with its messages.
fn validate(args: &ConsumerGroupsArgs) -> Result<Action, String> {
    let actions = [
        (args.list, Action::List),
        (args.describe, Action::Describe),
        (args.delete, Action::Delete),
        (args.reset_offsets, Action::ResetOffsets),
        (args.delete_offsets, Action::DeleteOffsets),
    ];
    let chosen: Vec<Action> = actions
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, a)| *a)
        .collect();
    if chosen.len() != 1 {
        return Err(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"
                .to_owned(),
        );
    }
    if args.bootstrap_server.is_none() {
        return Err("Missing required argument \"[bootstrap-server]\"".to_owned());
    }
    let action = chosen[0];
    match action {
        Action::List => {}
        Action::DeleteOffsets => {
            if args.group.len() > 1 {
                return Err(format!(
                    "Option [delete-offsets] supports only one [group] at a time, but found: {}",
                    args.group.join(", ")
                ));
            }
            if args.group.is_empty() || args.topic.is_empty() {
                return Err(
                    "Option [delete-offsets] takes the following options: [topic], [group]"
                        .to_owned(),
                );
            }
        }
        Action::Describe | Action::Delete => {
            if args.group.is_empty() != args.all_groups {
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
            if args.group.is_empty() != args.all_groups {
                return Err(
                    "Option [reset-offsets] takes one of these options: [all-groups], [group]"
                        .to_owned(),
                );
            }
            if args.topic.is_empty() && !args.all_topics && args.from_file.is_none() {
                return Err(
                    "Option [reset-offsets] takes one of these options: [all-topics], [topic]"
                        .to_owned(),
                );
            }
            let scenarios = [
                args.to_earliest,
                args.to_latest,
                args.to_offset.is_some(),
                args.shift_by.is_some(),
                args.to_datetime.is_some(),
                args.by_duration.is_some(),
                args.to_current,
                args.from_file.is_some(),
            ]
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
    if action != Action::Describe {
        for (on, name) in [
            (args.members, "members"),
            (args.offsets, "offsets"),
            (args.verbose, "verbose"),
        ] {
            if on {
                return Err(format!(
                    "Option \"[{name}]\" can't be used with option \"[{}]\"",
                    action_name(action)
                ));
            }
        }
    }
    if action == Action::Describe
        && [args.members, args.offsets, args.state.is_some()]
            .iter()
            .filter(|on| **on)
            .count()
            > 1
    {
        return Err(
            "Option [describe] takes at most one of these options: [members], [offsets], [state]"
                .to_owned(),
        );
    }
    if args.export && action != Action::ResetOffsets {
        return Err(format!(
            "Option \"[export]\" can't be used with option \"[{}]\"",
            action_name(action)
        ));
    }
    Ok(action)
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::List => "list",
        Action::Describe => "describe",
        Action::Delete => "delete",
        Action::ResetOffsets => "reset-offsets",
        Action::DeleteOffsets => "delete-offsets",
    }
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
        let groups = if args.all_groups {
            list_groups(&mut cluster).await?.into_iter().collect()
        } else {
            args.group.clone()
        };
        match action {
            Action::List => match &args.state {
                Some(filter) => execute_list_states(&mut cluster, filter).await,
                None => execute_list(&mut cluster).await,
            },
            Action::Describe => {
                let mut out = Output::default();
                for group in &groups {
                    if args.members {
                        execute_describe_members(&mut cluster, group, args.verbose, &mut out)
                            .await?;
                    } else if args.state.is_some() {
                        execute_describe_state(&mut cluster, group, &mut out).await?;
                    } else {
                        execute_describe(&mut cluster, group, &mut out).await?;
                    }
                }
                Ok(out)
            }
            Action::Delete => execute_delete(&mut cluster, &groups).await,
            Action::ResetOffsets => execute_reset(&mut cluster, &args, &groups).await,
            Action::DeleteOffsets => execute_delete_offsets(&mut cluster, &args).await,
        }
    });
    match result {
        Ok(out) => {
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            Ok(if out.failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
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
    /// Exit 1 after printing (e.g. --delete-offsets refused).
    failed: bool,
}

async fn execute_list(cluster: &mut Cluster) -> anyhow::Result<Output> {
    let mut out = Output::default();
    for group in list_groups(cluster).await? {
        let _ = writeln!(out.stdout, "{group}");
    }
    Ok(out)
}

/// Every group of every broker.
async fn list_groups(cluster: &mut Cluster) -> anyhow::Result<BTreeSet<String>> {
    Ok(list_groups_with_states(cluster)
        .await?
        .into_keys()
        .collect())
}

/// Every group of every broker with its state (ListGroups v4+; "Unknown" before).
async fn list_groups_with_states(
    cluster: &mut Cluster,
) -> anyhow::Result<BTreeMap<String, String>> {
    let ids: Vec<i32> = cluster.brokers.keys().copied().collect();
    let mut groups = BTreeMap::new();
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
        groups.extend(response.groups.into_iter().map(|g| {
            let state = if g.group_state.is_empty() {
                "Unknown".to_owned()
            } else {
                g.group_state.to_string()
            };
            (g.group_id.to_string(), state)
        }));
    }
    Ok(groups)
}

/// `--list --state [STATES]`: Kafka's `printGroupInfo` with the STATE column, filtered by
/// the comma-separated states given (case-insensitive), all when none.
async fn execute_list_states(cluster: &mut Cluster, filter: &str) -> anyhow::Result<Output> {
    let wanted: Vec<String> = filter
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let groups: Vec<(String, String)> = list_groups_with_states(cluster)
        .await?
        .into_iter()
        .filter(|(_, state)| wanted.is_empty() || wanted.contains(&state.to_ascii_lowercase()))
        .collect();
    Ok(Output {
        stdout: format_list_states(&groups),
        ..Output::default()
    })
}

fn format_list_states(groups: &[(String, String)]) -> String {
    let width = groups
        .iter()
        .map(|(g, _)| g.len().max(15))
        .max()
        .unwrap_or(15)
        + 10;
    let mut out = format!("{:<width$} {:<20}\n", "GROUP", "STATE");
    for (group, state) in groups {
        let _ = writeln!(out, "{group:<width$} {state:<20}");
    }
    out
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

async fn execute_reset(
    cluster: &mut Cluster,
    args: &ConsumerGroupsArgs,
    groups: &[String],
) -> anyhow::Result<Output> {
    let mut out = Output::default();
    let plan = match &args.from_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --from-file {}", path.display()))?;
            Some(parse_reset_plan(&text, groups.len() == 1, groups.first())?)
        }
        None => None,
    };
    let mut all_new = ResetPlan::new();
    for group in groups {
        let described = describe(cluster, group).await?;
        let state = described
            .groups
            .first()
            .map(|g| g.group_state.to_string())
            .unwrap_or_else(|| "Dead".to_owned());
        if let Some(refused) = reset::refuse_active(group, &state) {
            bail!("{refused}");
        }
        let committed = committed(cluster, group).await?;
        let mut partitions = BTreeSet::new();
        if let Some(plan) = &plan {
            match plan.get(group) {
                Some(entries) => partitions.extend(entries.keys().cloned()),
                None => {
                    let _ = writeln!(out.stderr, "\nError: No reset plan for group {group} found");
                    continue;
                }
            }
        } else if args.all_topics {
            partitions.extend(committed.keys().cloned());
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
        let by_time = match (&args.to_datetime, &args.by_duration) {
            (Some(datetime), _) => Some(parse_datetime(datetime).map_err(|m| anyhow!(m))?),
            (None, Some(duration)) => {
                let span = parse_duration_ms(duration).map_err(|m| anyhow!(m))?;
                Some(crate::cluster::now_ms() - span)
            }
            _ => None,
        };
        let at_time = match by_time {
            Some(ts) => Some(cluster.list_offsets_detailed(&partitions, ts, 0).await?),
            None => None,
        };
        let mut new_offsets = BTreeMap::new();
        for tp in &partitions {
            let (Some(&low), Some(&high)) = (earliest.get(tp), latest.get(tp)) else {
                bail!(
                    "Error getting ending offset of topic partition: {}-{}",
                    tp.0,
                    tp.1
                );
            };
            let to = if args.to_earliest {
                ResetTo::Earliest
            } else if args.to_latest {
                ResetTo::Latest
            } else if let Some(offset) = args.to_offset {
                ResetTo::Offset(offset)
            } else if let Some(shift) = args.shift_by {
                let Some(current) = committed.get(tp) else {
                    bail!(
                        "Cannot shift offset for partition {}-{} since there is no current committed offset",
                        tp.0,
                        tp.1
                    );
                };
                ResetTo::Offset(current + shift)
            } else if let Some(at_time) = &at_time {
                match at_time.get(tp) {
                    // No record at or after the time: Kafka resets to the log end.
                    Some(Ok(offset)) if *offset >= 0 => ResetTo::Offset(*offset),
                    Some(Ok(_)) => ResetTo::Latest,
                    _ => bail!(
                        "Error getting offset by timestamp of topic partition: {}-{}",
                        tp.0,
                        tp.1
                    ),
                }
            } else if args.to_current {
                match committed.get(tp) {
                    Some(current) => ResetTo::Offset(*current),
                    None => ResetTo::Latest,
                }
            } else if let Some(plan) = &plan {
                let wanted = plan
                    .get(group)
                    .and_then(|entries| entries.get(tp))
                    .copied()
                    .unwrap_or(low);
                ResetTo::Offset(wanted)
            } else {
                ResetTo::Earliest
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
        }
        all_new.insert(group.clone(), new_offsets);
    }
    if !args.execute && !args.dry_run {
        out.stdout.push_str("WARN: No action will be performed as the --execute option is missing.In a future major release, the default behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to keep the current default behavior without prompting.\n");
    }
    if args.export {
        out.stdout
            .push_str(&export_csv(&all_new, groups.len() == 1));
        out.stdout.push('\n');
    } else {
        for (group, offsets) in &all_new {
            out.stdout.push_str(&format_reset(group, offsets));
        }
    }
    Ok(out)
}

/// Kafka's `--export` CSV: `topic,partition,offset` for one group, with the group first for
/// several.
fn export_csv(all: &ResetPlan, single: bool) -> String {
    let mut out = String::new();
    for (group, offsets) in all {
        for ((topic, partition), offset) in offsets {
            if single {
                let _ = writeln!(out, "{topic},{partition},{offset}");
            } else {
                let _ = writeln!(out, "{group},{topic},{partition},{offset}");
            }
        }
    }
    out
}

/// New offsets by group: group -> (topic, partition) -> offset.
type ResetPlan = BTreeMap<String, BTreeMap<(String, i32), i64>>;

/// A reset plan CSV (as `--export` writes it).
fn parse_reset_plan(text: &str, single: bool, group: Option<&String>) -> anyhow::Result<ResetPlan> {
    let mut plan = ResetPlan::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let (g, topic, partition, offset) = match fields.as_slice() {
            [topic, partition, offset] if single => (
                group.cloned().unwrap_or_default(),
                *topic,
                *partition,
                *offset,
            ),
            [g, topic, partition, offset] => ((*g).to_owned(), *topic, *partition, *offset),
            _ => bail!("Invalid reset plan line '{line}': expected topic,partition,offset or group,topic,partition,offset"),
        };
        let partition: i32 = partition
            .parse()
            .map_err(|_| anyhow!("Invalid partition '{partition}' in reset plan line '{line}'"))?;
        let offset: i64 = offset
            .parse()
            .map_err(|_| anyhow!("Invalid offset '{offset}' in reset plan line '{line}'"))?;
        plan.entry(g)
            .or_default()
            .insert((topic.to_owned(), partition), offset);
    }
    Ok(plan)
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `--to-datetime`'s `YYYY-MM-DDTHH:mm:SS[.sss][Z|±hh:mm|±hhmm]` as epoch ms (UTC when no
/// zone is given).
fn parse_datetime(text: &str) -> Result<i64, String> {
    let bad = || {
        format!("Error parsing timestamp '{text}': expected the format 'YYYY-MM-DDTHH:mm:SS.sss'")
    };
    let re = regex::Regex::new(
        r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(Z|[+-]\d{2}:?\d{2})?$",
    )
    .expect("a valid pattern");
    let caps = re.captures(text).ok_or_else(bad)?;
    let n = |i: usize| -> i64 { caps.get(i).map_or(0, |m| m.as_str().parse().unwrap_or(0)) };
    let (month, day, hour, minute, second) = (n(2), n(3), n(4), n(5), n(6));
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(bad());
    }
    let millis = caps.get(7).map_or(0, |m| {
        let digits = m.as_str();
        digits.parse::<i64>().unwrap_or(0) * 10_i64.pow(3 - digits.len() as u32)
    });
    let offset_minutes = match caps.get(8).map(|m| m.as_str()) {
        None | Some("Z") => 0,
        Some(zone) => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let digits: String = zone[1..].chars().filter(char::is_ascii_digit).collect();
            let hours: i64 = digits[..2].parse().unwrap_or(0);
            let minutes: i64 = digits[2..].parse().unwrap_or(0);
            sign * (hours * 60 + minutes)
        }
    };
    let days = days_from_civil(n(1), month, day);
    Ok(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

/// Java's `Duration.parse` (`PnDTnHnMn.nS`) in ms, for `--by-duration`.
fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let re = regex::Regex::new(
        r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:\.(\d{1,9}))?S)?)?$",
    )
    .expect("a valid pattern");
    let upper = text.to_ascii_uppercase();
    let caps = re
        .captures(&upper)
        .filter(|c| (2..=5).any(|i| c.get(i).is_some()))
        .ok_or_else(|| {
            format!("Error parsing duration '{text}': expected the format 'PnDTnHnMnS'")
        })?;
    let n = |i: usize| -> i64 { caps.get(i).map_or(0, |m| m.as_str().parse().unwrap_or(0)) };
    let fraction = caps.get(6).map_or(0, |m| {
        let digits = &m.as_str()[..m.as_str().len().min(3)];
        digits.parse::<i64>().unwrap_or(0) * 10_i64.pow(3 - digits.len() as u32)
    });
    let ms = ((n(2) * 24 + n(3)) * 60 + n(4)) * 60_000 + n(5) * 1000 + fraction;
    Ok(if &caps[1] == "-" { -ms } else { ms })
}

/// `--describe --members [--verbose]`: Kafka's `printMembers`.
async fn execute_describe_members(
    cluster: &mut Cluster,
    group: &str,
    verbose: bool,
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
    if !state_notice(group, &state, out) {
        return Ok(());
    }
    let members: Vec<MemberRow> = info
        .members
        .iter()
        .map(|m| {
            let assigned =
                group_coordinator::consumer_protocol::assigned_partitions(&m.member_assignment)
                    .unwrap_or_default();
            MemberRow {
                group: group.to_owned(),
                consumer_id: m.member_id.to_string(),
                instance_id: m
                    .group_instance_id
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                host: m.client_host.to_string(),
                client_id: m.client_id.to_string(),
                assignment: assigned,
            }
        })
        .collect();
    out.stdout.push_str(&format_members(&members, verbose));
    Ok(())
}

/// One row of `--describe --members`.
#[derive(Debug, Clone)]
struct MemberRow {
    group: String,
    consumer_id: String,
    instance_id: String,
    host: String,
    client_id: String,
    assignment: BTreeMap<String, Vec<i32>>,
}

/// Kafka's `printMembers` table (GROUP-INSTANCE-ID only when a member has one).
fn format_members(members: &[MemberRow], verbose: bool) -> String {
    let width = |f: &dyn Fn(&MemberRow) -> usize, min: usize| {
        members.iter().map(f).max().unwrap_or(0).max(min)
    };
    let g = width(&|m| m.group.len(), 15);
    let c = width(&|m| m.consumer_id.len(), 15);
    let i = width(&|m| m.instance_id.len(), 17);
    let h = width(&|m| m.host.len(), 15);
    let cl = width(&|m| m.client_id.len(), 15);
    let with_instance = members.iter().any(|m| !m.instance_id.is_empty());
    let line = |cols: [&str; 6]| {
        if with_instance {
            format!(
                "{:<g$} {:<c$} {:<i$} {:<h$} {:<cl$} {:<15} ",
                cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]
            )
        } else {
            format!(
                "{:<g$} {:<c$} {:<h$} {:<cl$} {:<15} ",
                cols[0], cols[1], cols[3], cols[4], cols[5]
            )
        }
    };
    let mut out = String::from("\n");
    out.push_str(&line([
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
    ]));
    if verbose {
        out.push_str("ASSIGNMENT");
    }
    out.push('\n');
    for m in members {
        let count: usize = m.assignment.values().map(Vec::len).sum();
        out.push_str(&line([
            &m.group,
            &m.consumer_id,
            &m.instance_id,
            &m.host,
            &m.client_id,
            &count.to_string(),
        ]));
        if verbose {
            if count == 0 {
                out.push_str(MISSING);
            } else {
                let mut parts: Vec<String> = m
                    .assignment
                    .iter()
                    .filter(|(_, ps)| !ps.is_empty())
                    .map(|(topic, ps)| {
                        let mut ps = ps.clone();
                        ps.sort_unstable();
                        let list: Vec<String> = ps.iter().map(ToString::to_string).collect();
                        format!("{topic}({})", list.join(","))
                    })
                    .collect();
                parts.sort();
                out.push_str(&parts.join(", "));
            }
        }
        out.push('\n');
    }
    out
}

/// Kafka's `shouldPrintMemberState`: the notice for an empty, rebalancing or missing group;
/// false when there is nothing to print.
fn state_notice(group: &str, state: &str, out: &mut Output) -> bool {
    match state {
        "Dead" => {
            let _ = writeln!(
                out.stderr,
                "\nError: Consumer group '{group}' does not exist."
            );
            false
        }
        "Empty" => {
            let _ = writeln!(
                out.stderr,
                "\nConsumer group '{group}' has no active members."
            );
            true
        }
        "PreparingRebalance" | "CompletingRebalance" | "Reconciling" | "Assigning" => {
            let _ = writeln!(
                out.stderr,
                "\nWarning: Consumer group '{group}' is rebalancing."
            );
            true
        }
        _ => true,
    }
}

/// `--describe --state`: Kafka's `printStates`.
async fn execute_describe_state(
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
    if !state_notice(group, &state, out) {
        return Ok(());
    }
    let id = cluster.coordinators.get(group).copied().unwrap_or(-1);
    let address = cluster.brokers.get(&id).cloned().unwrap_or_default();
    out.stdout.push_str(&format_state(
        group,
        &format!("{address}  ({id})"),
        info.protocol_data.as_str(),
        &state,
        info.members.len(),
    ));
    Ok(())
}

/// Kafka's `printStates` lines.
fn format_state(
    group: &str,
    coordinator: &str,
    strategy: &str,
    state: &str,
    members: usize,
) -> String {
    let width = coordinator.len().max(25);
    // Kafka's format puts the group in a column as wide as the coordinator's.
    let line = |a: &str, b: &str, c: &str, d: &str, e: &str| {
        format!("\n{a:<width$} {b:<25} {c:<20} {d:<15} {e}")
    };
    let mut out = line(
        "GROUP",
        "COORDINATOR (ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
        "#MEMBERS",
    );
    out.push_str(&line(
        group,
        coordinator,
        strategy,
        state,
        &members.to_string(),
    ));
    out.push('\n');
    out
}

/// `--delete-offsets`: OffsetDelete (KIP-496) for the partitions of `--topic`.
async fn execute_delete_offsets(
    cluster: &mut Cluster,
    args: &ConsumerGroupsArgs,
) -> anyhow::Result<Output> {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::OffsetDeleteRequest;
    let group = &args.group[0];
    let mut out = Output::default();
    let mut results: Vec<(String, Option<i32>, Option<i16>)> = Vec::new();
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for spec in &args.topic {
        let (topic, only) = parse_topic_spec(spec)?;
        match (only, cluster.leaders.get(&topic)) {
            (Some(only), _) => topics.entry(topic).or_default().extend(only),
            (None, Some(known)) => topics.entry(topic).or_default().extend(known.keys()),
            // UNKNOWN_TOPIC_OR_PARTITION, for the topic as a whole.
            (None, None) => results.push((topic, None, Some(3))),
        }
    }
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.clone())))
        .with_topics(
            topics
                .iter()
                .map(|(topic, partitions)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(crate::cluster::topic_name(topic))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let response = cluster.coordinator(group).await?.send(request).await?;
    let mut top = response.error_code;
    for topic in response.topics {
        for p in topic.partitions {
            let error = (p.error_code != 0).then_some(p.error_code);
            if let Some(code) = error {
                if top == 0 {
                    top = code;
                }
            }
            results.push((topic.name.to_string(), Some(p.partition_index), error));
        }
    }
    if top == 0 && results.iter().any(|r| r.2.is_some()) {
        top = 3;
    }
    match top {
        0 => {
            let _ = writeln!(
                out.stdout,
                "Request succeed for deleting offsets with topic {} group {group}",
                args.topic.join(", ")
            );
        }
        24 => {
            let _ = writeln!(out.stderr, "\nError: '{group}' is not valid.");
        }
        69 => {
            let _ = writeln!(out.stderr, "\nError: '{group}' does not exist.");
        }
        30 => {
            let _ = writeln!(
                out.stderr,
                "\nError: Access to '{group}' is not authorized."
            );
        }
        68 => {
            let _ = writeln!(out.stderr, "\nError: Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.");
        }
        86 | 29 | 3 => {
            let _ = writeln!(
                out.stderr,
                "\nError: Encounter some partition level error, see the follow-up details:"
            );
        }
        code => {
            let _ = writeln!(
                out.stderr,
                "\nError: Encounter some unknown error: {}",
                error_message(code)
            );
        }
    }
    results.sort_by(|a, b| {
        format!("{}{}", a.0, a.1.unwrap_or(-1)).cmp(&format!("{}{}", b.0, b.1.unwrap_or(-1)))
    });
    let _ = write!(
        out.stdout,
        "\n{:<30} {:<15} {:<15}",
        "TOPIC", "PARTITION", "STATUS"
    );
    for (topic, partition, error) in results {
        let partition = partition.map_or_else(|| "Not Provided".to_owned(), |p| p.to_string());
        let status = match error {
            Some(code) => format!("Error: :{}", error_message(code)),
            None => "Successful".to_owned(),
        };
        let _ = write!(out.stdout, "\n{topic:<30} {partition:<15} {status:<15}");
    }
    out.stdout.push('\n');
    if top != 0 {
        out.failed = true;
    }
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

    #[test]
    fn datetimes_and_durations_parse_as_kafkas() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000"), Ok(0));
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.000Z"),
            Ok(1_700_000_000_000)
        );
        assert_eq!(
            parse_datetime("2023-11-15T00:13:20.5+02:00"),
            Ok(1_700_000_000_500)
        );
        assert!(parse_datetime("yesterday").is_err());
        assert_eq!(parse_duration_ms("PT10M"), Ok(600_000));
        assert_eq!(parse_duration_ms("P1DT2H"), Ok(93_600_000));
        assert_eq!(parse_duration_ms("PT0.25S"), Ok(250));
        assert!(parse_duration_ms("P").is_err());
        assert!(parse_duration_ms("10m").is_err());
    }

    #[test]
    fn members_state_and_export_have_kafkas_shapes() {
        let members = vec![MemberRow {
            group: "g".into(),
            consumer_id: "c-1".into(),
            instance_id: String::new(),
            host: "/127.0.0.1".into(),
            client_id: "rdkafka".into(),
            assignment: BTreeMap::from([("t".to_owned(), vec![1, 0]), ("a".to_owned(), vec![2])]),
        }];
        let text = format_members(&members, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT"
        );
        assert_eq!(
            lines[2],
            "g               c-1             /127.0.0.1      rdkafka         3               a(2), t(0,1)"
        );
        let state = format_state("g", "127.0.0.1:9092  (0)", "range", "Stable", 2);
        assert_eq!(
            state,
            format!(
                "\n{:<25} {:<25} {:<20} {:<15} {}\n{:<25} {:<25} {:<20} {:<15} {}\n",
                "GROUP",
                "COORDINATOR (ID)",
                "ASSIGNMENT-STRATEGY",
                "STATE",
                "#MEMBERS",
                "g",
                "127.0.0.1:9092  (0)",
                "range",
                "Stable",
                2
            )
        );
        let plan = BTreeMap::from([(
            "g".to_owned(),
            BTreeMap::from([(("t".to_owned(), 0), 5), (("t".to_owned(), 1), 7)]),
        )]);
        assert_eq!(export_csv(&plan, true), "t,0,5\nt,1,7\n");
        assert_eq!(export_csv(&plan, false), "g,t,0,5\ng,t,1,7\n");
        assert_eq!(
            parse_reset_plan("t,0,5\nt,1,7\n", true, Some(&"g".to_owned())).unwrap(),
            plan
        );
        assert_eq!(
            parse_reset_plan("g,t,0,5\ng,t,1,7", false, None).unwrap(),
            plan
        );
        assert!(parse_reset_plan("t,x,5", true, Some(&"g".to_owned())).is_err());
    }

    #[test]
    fn list_with_states_has_kafkas_columns() {
        let text = format_list_states(&[("g".to_owned(), "Stable".to_owned())]);
        assert_eq!(
            text,
            format!(
                "{:<25} {:<20}\n{:<25} {:<20}\n",
                "GROUP", "STATE", "g", "Stable"
            )
        );
    }
}
