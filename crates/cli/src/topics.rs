//! `gregor topics`: Kafka 2.8's `kafka-topics.sh --bootstrap-server ...`, same flags, same
//! messages and output shapes, over the `client` crate's [`AdminClient`].
//!
//! The flow is Kafka's `TopicCommand`: parse the flags, check their combinations
//! ([`validate`], printing Kafka's usage messages), then run one action against the cluster.
//! Errors from the action print `Error while executing topic command : <message>` on stdout
//! and exit with 1. Argument checks and output formatting are pure functions, tested below;
//! only [`run`] and the `execute_*` functions talk to a broker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use client::{
    AdminClient, AdminOptions, ConfigEntry, ConfigResourceKind, NewPartitions, NewTopic,
    PartitionInfo, TopicMetadata,
};
use model::{TopicId, TopicName, INTERNAL_TOPICS};

/// Kafka's TOPIC_ALREADY_EXISTS error code.
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// The warning Kafka prints for a new topic name containing `.` or `_`.
pub const COLLISION_WARNING: &str = "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.";

/// The prefix of every error from an action, as Kafka prints it.
const ERROR_PREFIX: &str = "Error while executing topic command : ";

/// The flags of `kafka-topics.sh` (Kafka 2.8, `--bootstrap-server` mode), plus
/// `--validate-name`.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Create, delete, describe, or change a topic (kafka-topics.sh).")]
pub struct TopicsArgs {
    /// REQUIRED: The Kafka server to connect to (host:port[,host:port...]).
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to the admin client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "command config property file"
    )]
    pub command_config: Option<PathBuf>,
    /// List all available topics.
    #[arg(long)]
    pub list: bool,
    /// Create a new topic.
    #[arg(long)]
    pub create: bool,
    /// Delete a topic.
    #[arg(long)]
    pub delete: bool,
    /// Alter the number of partitions and replica assignment for the topic.
    #[arg(long)]
    pub alter: bool,
    /// List details for the given topics.
    #[arg(long)]
    pub describe: bool,
    /// The topic to create, alter, describe or delete. A regular expression except for
    /// --create; escape regex symbols, e.g. "test\.topic".
    #[arg(long, value_name = "topic", allow_hyphen_values = true)]
    pub topic: Option<String>,
    /// The topic-id to describe (Kafka 3.x). This is used only with --bootstrap-server option
    /// for describing topics; it wins over --topic.
    #[arg(long, value_name = "topic-id", allow_hyphen_values = true)]
    pub topic_id: Option<String>,
    /// A topic configuration override for the topic being created (name=value, repeatable).
    #[arg(long, value_name = "name=value")]
    pub config: Vec<String>,
    /// A topic configuration override to be removed (not supported with --bootstrap-server).
    #[arg(long, value_name = "name")]
    pub delete_config: Vec<String>,
    /// The number of partitions for the topic being created or altered. If not supplied for
    /// create, defaults to the cluster default.
    #[arg(long, value_name = "# of partitions", allow_negative_numbers = true)]
    pub partitions: Option<i32>,
    /// The replication factor for each partition in the topic being created. If not
    /// supplied, defaults to the cluster default.
    #[arg(long, value_name = "replication factor", allow_negative_numbers = true)]
    pub replication_factor: Option<i32>,
    /// A list of manual partition-to-broker assignments: 0:1:2,3:4:5 (partition 0 on brokers
    /// 0,1,2; partition 1 on 3,4,5).
    #[arg(
        long,
        value_name = "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , ..."
    )]
    pub replica_assignment: Option<String>,
    /// If set when describing topics, only show under replicated partitions.
    #[arg(long)]
    pub under_replicated_partitions: bool,
    /// If set when describing topics, only show partitions whose leader is not available.
    #[arg(long)]
    pub unavailable_partitions: bool,
    /// If set when describing topics, only show partitions whose isr count is less than the
    /// configured minimum.
    #[arg(long)]
    pub under_min_isr_partitions: bool,
    /// If set when describing topics, only show partitions whose isr count is equal to the
    /// configured minimum.
    #[arg(long)]
    pub at_min_isr_partitions: bool,
    /// If set when describing topics, only show topics that have overridden configs.
    #[arg(long)]
    pub topics_with_overrides: bool,
    /// If set when altering or deleting or describing topics, the action will only execute if
    /// the topic exists.
    #[arg(long)]
    pub if_exists: bool,
    /// If set when creating topics, the action will only execute if the topic does not
    /// already exist.
    #[arg(long)]
    pub if_not_exists: bool,
    /// Disable rack aware replica assignment (accepted for compatibility; placement is the
    /// broker's).
    #[arg(long)]
    pub disable_rack_aware: bool,
    /// Exclude internal topics when running list or describe command.
    #[arg(long)]
    pub exclude_internal: bool,
    /// Check a topic name against Kafka's rules and exit (0 when legal); needs no broker.
    #[arg(long, value_name = "name", allow_hyphen_values = true)]
    pub validate_name: Option<String>,
}

/// The one action a valid command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `--create`
    Create,
    /// `--alter`
    Alter,
    /// `--list`
    List,
    /// `--describe`
    Describe,
    /// `--delete`
    Delete,
}

/// A command line refused before anything is sent, with Kafka's message; printed on stderr
/// with the usage, exit code 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `gregor topics` and returns the process exit code.
pub fn run(args: TopicsArgs) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.validate_name {
        return Ok(print_outcome(validate_name(name, &args)));
    }
    let action = match validate(&args) {
        Ok(action) => action,
        Err(usage) => {
            eprintln!("{usage}");
            eprintln!("{}", usage_text());
            return Ok(ExitCode::from(1));
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(execute(action, &args));
    Ok(print_outcome(outcome))
}

/// What an action printed and whether it failed, so the printing stays in one place.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Lines for stdout (results and `Error while executing topic command : ...`).
    pub stdout: Vec<String>,
    /// Lines for stderr (notes).
    pub stderr: Vec<String>,
    /// Whether anything failed (exit code 1).
    pub failed: bool,
}

impl Outcome {
    fn error(&mut self, message: impl std::fmt::Display) {
        self.stdout.push(format!("{ERROR_PREFIX}{message}"));
        self.failed = true;
    }
}

fn print_outcome(outcome: Outcome) -> ExitCode {
    // Notes (ignored settings, ignored assignment entries) come before the results they
    // explain.
    for line in &outcome.stderr {
        eprintln!("{line}");
    }
    for line in &outcome.stdout {
        println!("{line}");
    }
    if outcome.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `--validate-name NAME`: legal names exit 0 (with Kafka's collision warning when the name
/// has `.` or `_`); illegal ones print the rule they break and exit 1.
pub fn validate_name(name: &str, args: &TopicsArgs) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(action) = first_action_flag(args) {
        outcome.stderr.push(format!(
            "Option \"[validate-name]\" can't be used with option \"[{action}]\""
        ));
        outcome.failed = true;
        return outcome;
    }
    match name.parse::<TopicName>() {
        Ok(topic) if topic.has_collision_chars() => {
            outcome.stdout.push(COLLISION_WARNING.to_string())
        }
        Ok(_) => {}
        Err(err) => outcome.error(err),
    }
    outcome
}

fn first_action_flag(args: &TopicsArgs) -> Option<&'static str> {
    [
        (args.create, "create"),
        (args.list, "list"),
        (args.alter, "alter"),
        (args.describe, "describe"),
        (args.delete, "delete"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// Kafka's `TopicCommandOptions.checkArgs` for `--bootstrap-server` mode: exactly one
/// action, the required options for it, and no option that makes no sense with it.
pub fn validate(args: &TopicsArgs) -> Result<Action, UsageError> {
    if args.bootstrap_server.is_none()
        && args.command_config.is_none()
        && first_action_flag(args).is_none()
        && present_options(args).is_empty()
    {
        return Err(UsageError(
            "Create, delete, describe, or change a topic.".to_string(),
        ));
    }
    let actions = [
        (args.create, Action::Create),
        (args.list, Action::List),
        (args.alter, Action::Alter),
        (args.describe, Action::Describe),
        (args.delete, Action::Delete),
    ];
    let chosen: Vec<Action> = actions
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, a)| *a)
        .collect();
    let [action] = chosen[..] else {
        return Err(UsageError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
                .to_string(),
        ));
    };
    if args.bootstrap_server.is_none() {
        return Err(UsageError(
            "--bootstrap-server must be specified".to_string(),
        ));
    }
    let present = present_options(args);
    let has = |name: &str| present.contains(&name);
    let missing = |name: &str| UsageError(format!("Missing required argument \"[{name}]\""));

    if action != Action::List && action != Action::Describe && !has("topic") {
        return Err(missing("topic"));
    }
    if action == Action::Describe && args.if_exists && !has("topic") && !has("topic-id") {
        // Kafka 3.x's message, since --topic-id came with it.
        return Err(UsageError(
            "--topic or --topic-id is required to describe a topic".to_string(),
        ));
    }
    if action == Action::Alter {
        if has("config") {
            return Err(UsageError(
                "Option combination \"[bootstrap-server],[config]\" can't be used with option \"[alter]\" (the kafka-configs CLI supports altering topic configs with a --bootstrap-server option)"
                    .to_string(),
            ));
        }
        if !has("partitions") {
            return Err(missing("partitions"));
        }
    }

    let action_name = action_name(action);
    let report_opts = [
        "under-replicated-partitions",
        "under-min-isr-partitions",
        "at-min-isr-partitions",
        "unavailable-partitions",
    ];
    let only_with = |option: &str, allowed: &[Action]| -> Result<(), UsageError> {
        if has(option) && !allowed.contains(&action) {
            return Err(invalid(option, action_name));
        }
        Ok(())
    };
    only_with("config", &[Action::Alter, Action::Create])?;
    if has("delete-config") {
        // Kafka refuses it with every action but --alter, and with --bootstrap-server always.
        let other = if action == Action::Alter {
            "bootstrap-server"
        } else {
            action_name
        };
        return Err(invalid("delete-config", other));
    }
    only_with("partitions", &[Action::Alter, Action::Create])?;
    only_with("replication-factor", &[Action::Create])?;
    only_with("replica-assignment", &[Action::Create, Action::Alter])?;
    if action == Action::Create && has("replica-assignment") {
        for conflicting in ["partitions", "replication-factor"] {
            if has(conflicting) {
                return Err(invalid("replica-assignment", conflicting));
            }
        }
    }
    for report in report_opts {
        only_with(report, &[Action::Describe])?;
        if has(report) {
            for other in report_opts.iter().chain(["topics-with-overrides"].iter()) {
                if *other != report && has(other) {
                    return Err(invalid(report, other));
                }
            }
        }
    }
    only_with("topics-with-overrides", &[Action::Describe])?;
    only_with(
        "if-exists",
        &[Action::Alter, Action::Delete, Action::Describe],
    )?;
    only_with("if-not-exists", &[Action::Create])?;
    only_with("exclude-internal", &[Action::List, Action::Describe])?;
    Ok(action)
}

fn invalid(option: &str, with: &str) -> UsageError {
    UsageError(format!(
        "Option \"[{option}]\" can't be used with option \"[{with}]\""
    ))
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Create => "create",
        Action::Alter => "alter",
        Action::List => "list",
        Action::Describe => "describe",
        Action::Delete => "delete",
    }
}

/// The non-action options present on the command line, by their Kafka names.
fn present_options(args: &TopicsArgs) -> Vec<&'static str> {
    [
        (args.topic.is_some(), "topic"),
        (args.topic_id.is_some(), "topic-id"),
        (!args.config.is_empty(), "config"),
        (!args.delete_config.is_empty(), "delete-config"),
        (args.partitions.is_some(), "partitions"),
        (args.replication_factor.is_some(), "replication-factor"),
        (args.replica_assignment.is_some(), "replica-assignment"),
        (
            args.under_replicated_partitions,
            "under-replicated-partitions",
        ),
        (args.unavailable_partitions, "unavailable-partitions"),
        (args.under_min_isr_partitions, "under-min-isr-partitions"),
        (args.at_min_isr_partitions, "at-min-isr-partitions"),
        (args.topics_with_overrides, "topics-with-overrides"),
        (args.if_exists, "if-exists"),
        (args.if_not_exists, "if-not-exists"),
        (args.exclude_internal, "exclude-internal"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

fn usage_text() -> String {
    let mut command = TopicsArgs::augment_args(clap::Command::new("gregor topics"));
    command.render_help().to_string()
}

// ---------------------------------------------------------------------------------------
// Pure pieces of the actions: topic filters, config parsing, output formatting.
// ---------------------------------------------------------------------------------------

/// Kafka's `IncludeList` topic filter: `,` means `|`, spaces and surrounding quotes are
/// dropped, and the regex must match the whole name.
#[derive(Debug, Clone)]
pub struct TopicFilter {
    regex: regex::Regex,
}

impl TopicFilter {
    /// Compiles `raw` the way Kafka does; the error text is Kafka's.
    pub fn new(raw: &str) -> Result<TopicFilter, String> {
        let cleaned = raw.trim().replace(',', "|").replace(' ', "");
        let cleaned = cleaned
            .trim_start_matches(['"', '\''])
            .trim_end_matches(['"', '\'']);
        regex::Regex::new(&format!("^(?:{cleaned})$"))
            .map(|regex| TopicFilter { regex })
            .map_err(|_| format!("{cleaned} is an invalid regex."))
    }

    /// Whether `topic` passes (internal topics are dropped when `exclude_internal`).
    pub fn allows(&self, topic: &str, exclude_internal: bool) -> bool {
        self.regex.is_match(topic) && !(exclude_internal && is_internal(topic))
    }
}

fn is_internal(topic: &str) -> bool {
    INTERNAL_TOPICS.contains(&topic)
}

/// Kafka's `doGetTopics`: the sorted names that pass the optional `--topic` filter and the
/// `--exclude-internal` flag.
pub fn select_topics(
    all: &[String],
    filter: Option<&TopicFilter>,
    exclude_internal: bool,
) -> Vec<String> {
    let mut selected: Vec<String> = all
        .iter()
        .filter(|topic| match filter {
            Some(filter) => filter.allows(topic, exclude_internal),
            None => !(exclude_internal && is_internal(topic)),
        })
        .cloned()
        .collect();
    selected.sort();
    selected
}

/// Kafka's `ensureTopicExists`: a named `--topic` that matched nothing is an error unless
/// `--if-exists` was given.
pub fn ensure_topic_exists(
    found: &[String],
    requested: Option<&str>,
    if_exists: bool,
) -> Result<(), String> {
    match requested {
        Some(topic) if !if_exists && found.is_empty() => {
            Err(format!("Topic '{topic}' does not exist as expected"))
        }
        _ => Ok(()),
    }
}

/// Parses `--config k=v` values as Kafka does (split on `=` with spaces around it; exactly
/// one key and one non-empty value) and validates each against the topic config rules.
/// Returns the pairs in the order given (a repeated key keeps its last value).
pub fn parse_topic_configs(values: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for value in values {
        let parts: Vec<&str> = value.split('=').collect();
        // Java's split drops trailing empty strings, so "k=" is one part and refused.
        let parts: Vec<&str> = match parts.iter().rposition(|p| !p.is_empty()) {
            Some(last) => parts[..=last].to_vec(),
            None => Vec::new(),
        };
        let [key, val] = parts[..] else {
            return Err("requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".".to_string());
        };
        let (key, val) = (key.trim().to_string(), val.trim().to_string());
        pairs.retain(|(k, _)| *k != key);
        pairs.push((key, val));
    }
    for (key, value) in &pairs {
        model::topic_config::validate(key, value).map_err(|err| err.to_string())?;
    }
    Ok(pairs)
}

/// The warning Kafka prints when `message.format.version` is set on a topic.
pub fn message_format_warning(configs: &[(String, String)]) -> Option<String> {
    configs
        .iter()
        .find(|(key, _)| key == "message.format.version")
        .map(|(key, value)| {
            format!("WARNING: The configuration {key}={value} is specified. This configuration will be ignored if the version is newer than the inter.broker.protocol.version specified in the broker.")
        })
}

/// For `--alter --replica-assignment`: the entries for partitions from `current_count` on
/// (Kafka drops the entries of existing partitions: they never move), and a note for stderr
/// when some entries were dropped (SPEC section 9).
pub fn new_partition_assignment(
    topic: &str,
    assignment: &BTreeMap<i32, Vec<i32>>,
    current_count: usize,
) -> (Vec<Vec<i32>>, Option<String>) {
    let kept: Vec<Vec<i32>> = assignment.values().skip(current_count).cloned().collect();
    let dropped = assignment.len().min(current_count);
    let note = (dropped > 0).then(|| {
        format!(
            "Note: topic '{topic}' already has {current_count} partitions; the first {dropped} entries of --replica-assignment are ignored (existing partitions never move) and only the entries for new partitions are used."
        )
    });
    (kept, note)
}

/// Which partition lines `--describe` prints, from the report flags.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DescribeFilters {
    /// `--under-replicated-partitions`
    pub under_replicated: bool,
    /// `--unavailable-partitions`
    pub unavailable: bool,
    /// `--under-min-isr-partitions`
    pub under_min_isr: bool,
    /// `--at-min-isr-partitions`
    pub at_min_isr: bool,
    /// `--topics-with-overrides`
    pub with_overrides: bool,
}

impl DescribeFilters {
    fn from_args(args: &TopicsArgs) -> DescribeFilters {
        DescribeFilters {
            under_replicated: args.under_replicated_partitions,
            unavailable: args.unavailable_partitions,
            under_min_isr: args.under_min_isr_partitions,
            at_min_isr: args.at_min_isr_partitions,
            with_overrides: args.topics_with_overrides,
        }
    }

    /// Whether topic header lines are printed (no partition report flag).
    fn describe_configs(&self) -> bool {
        !self.under_replicated && !self.unavailable && !self.under_min_isr && !self.at_min_isr
    }
}

/// The `--describe` lines for one topic, exactly as Kafka 2.8 prints them: the header line
/// (`Topic: T\tTopicId: ...\tPartitionCount: N\tReplicationFactor: R\tConfigs: k=v,...`)
/// unless a partition report flag is set, then one line per partition that passes the
/// filters (none with `--topics-with-overrides`).
pub fn describe_lines(
    topic: &TopicMetadata,
    configs: &[ConfigEntry],
    live_brokers: &[i32],
    filters: DescribeFilters,
    moving: &Moving,
) -> Vec<String> {
    let mut lines = Vec::new();
    let overrides: Vec<&ConfigEntry> = configs.iter().filter(|c| !c.is_default).collect();
    if filters.describe_configs() && (!filters.with_overrides || !overrides.is_empty()) {
        // Kafka's getReplicationFactor: while the first partition moves (a replica it adds
        // or removes is in its replicas), its replicas without the ones being added.
        let replication_factor = topic.partitions.first().map_or(0, |p| {
            match moving.get(&(topic.name.clone(), p.partition)) {
                Some((adding, removing))
                    if p.replicas
                        .iter()
                        .any(|b| adding.contains(b) || removing.contains(b)) =>
                {
                    p.replicas.iter().filter(|b| !adding.contains(b)).count()
                }
                _ => p.replicas.len(),
            }
        });
        let rendered: Vec<String> = overrides
            .iter()
            .map(|c| format!("{}={}", c.name, c.value.as_deref().unwrap_or("null")))
            .collect();
        let mut line = format!("Topic: {}", topic.name);
        let topic_id = TopicId::from_bytes(topic.topic_id);
        if topic.topic_id != [0; 16] {
            let _ = write!(line, "\tTopicId: {topic_id}");
        }
        let _ = write!(
            line,
            "\tPartitionCount: {}\tReplicationFactor: {replication_factor}\tConfigs: {}",
            topic.partitions.len(),
            rendered.join(",")
        );
        lines.push(line);
    }
    if filters.with_overrides {
        return lines;
    }
    let min_isr = configs
        .iter()
        .find(|c| c.name == "min.insync.replicas")
        .and_then(|c| c.value.as_deref())
        .and_then(|v| v.parse::<usize>().ok());
    for partition in &topic.partitions {
        if should_print_partition(partition, live_brokers, min_isr, filters) {
            let mut line = partition_line(&topic.name, partition);
            if let Some((adding, removing)) = moving.get(&(topic.name.clone(), partition.partition))
            {
                let join =
                    |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
                let _ = write!(
                    line,
                    "\tAdding Replicas: {}\tRemoving Replicas: {}",
                    join(adding),
                    join(removing)
                );
            }
            lines.push(line);
        }
    }
    lines
}

/// The partitions being reassigned: (topic, partition) -> (adding, removing), as
/// ListPartitionReassignments reports them; `--describe` adds them to the partition line, as
/// Kafka 2.8 does.
pub type Moving = BTreeMap<(String, i32), (Vec<i32>, Vec<i32>)>;

/// What is being moved among `topics`; empty when the cluster cannot say (Kafka ignores a
/// broker without ListPartitionReassignments too).
async fn moving_partitions(admin: &mut AdminClient, topics: &[TopicMetadata]) -> Moving {
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition)))
        .collect();
    if partitions.is_empty() {
        return Moving::new();
    }
    match admin.list_partition_reassignments(Some(&partitions)).await {
        Ok(ongoing) => ongoing
            .into_iter()
            .map(|r| ((r.topic, r.partition), (r.adding, r.removing)))
            .collect(),
        Err(_) => Moving::new(),
    }
}

/// One partition line: `\tTopic: T\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0`.
pub fn partition_line(topic: &str, partition: &PartitionInfo) -> String {
    let join = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let leader = partition
        .leader
        .map_or_else(|| "none".to_string(), |id| id.to_string());
    format!(
        "\tTopic: {topic}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}",
        partition.partition,
        join(&partition.replicas),
        join(&partition.isr)
    )
}

fn should_print_partition(
    partition: &PartitionInfo,
    live_brokers: &[i32],
    min_isr: Option<usize>,
    filters: DescribeFilters,
) -> bool {
    let has_leader = partition.leader.is_some();
    let under_replicated = partition.replicas.len() > partition.isr.len();
    let unavailable = partition
        .leader
        .is_none_or(|leader| !live_brokers.contains(&leader));
    let under_min_isr = !has_leader || min_isr.is_some_and(|min| partition.isr.len() < min);
    let at_min_isr = min_isr == Some(partition.isr.len());
    filters.describe_configs()
        || (filters.under_replicated && under_replicated)
        || (filters.unavailable && unavailable)
        || (filters.under_min_isr && under_min_isr)
        || (filters.at_min_isr && at_min_isr)
}

// ---------------------------------------------------------------------------------------
// The actions, against a cluster.
// ---------------------------------------------------------------------------------------

async fn execute(action: Action, args: &TopicsArgs) -> Outcome {
    let mut outcome = Outcome::default();
    if let Err(message) = execute_action(action, args, &mut outcome).await {
        outcome.error(message);
    }
    outcome
}

async fn execute_action(
    action: Action,
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    // Everything that can be checked without a broker is checked before connecting, so a
    // typo is reported even when the cluster is down.
    let filter = match action {
        Action::Create => None,
        _ => args.topic.as_deref().map(TopicFilter::new).transpose()?,
    };
    let assignment = parse_assignment(args)?;
    let new_topic = match action {
        Action::Create => Some(prepare_create(args, assignment.clone(), outcome)?),
        _ => None,
    };
    // Kafka 3.x: a non-zero --topic-id is used instead of --topic.
    let topic_id = match (action, args.topic_id.as_deref()) {
        (Action::Describe, Some(text)) => parse_topic_id(text)?,
        _ => None,
    };
    if action == Action::Describe
        && args.if_exists
        && args.topic.is_some()
        && args.topic_id.is_some()
    {
        outcome.stdout.push(
            "Only topic id will be used when both --topic and --topic-id are specified and topicId is not Uuid.ZERO_UUID"
                .to_string(),
        );
    }
    let mut admin = connect(args, outcome).await?;
    if let Some(id) = topic_id {
        return execute_describe_by_id(&mut admin, id, args, outcome).await;
    }
    let topics = match action {
        Action::Create => Vec::new(),
        _ => get_topics(&mut admin, args, filter.as_ref()).await?,
    };
    match (action, new_topic) {
        (Action::Create, Some(topic)) => execute_create(&mut admin, topic, args, outcome).await,
        (Action::List, _) => {
            // Kafka prints the names joined by newlines, so no topics is one empty line.
            outcome.stdout.push(topics.join("\n"));
            Ok(())
        }
        (Action::Alter, _) => {
            execute_alter(&mut admin, &topics, assignment.as_ref(), args, outcome).await
        }
        (Action::Describe, _) => execute_describe(&mut admin, &topics, args, outcome).await,
        (Action::Delete, _) => execute_delete(&mut admin, &topics, args, outcome).await,
        (Action::Create, None) => Err("internal error: create without a topic".to_string()),
    }
}

fn parse_assignment(args: &TopicsArgs) -> Result<Option<BTreeMap<i32, Vec<i32>>>, String> {
    // Kafka ignores an empty --replica-assignment.
    match args.replica_assignment.as_deref().filter(|s| !s.is_empty()) {
        Some(text) => model::replica_assignment::parse_replica_assignment(text)
            .map(Some)
            .map_err(|err| err.to_string()),
        None => Ok(None),
    }
}

/// The checks Kafka's `createTopic` makes before sending, in its order: the config
/// overrides, the collision warning, the replication factor and partition ranges.
pub fn prepare_create(
    args: &TopicsArgs,
    assignment: Option<BTreeMap<i32, Vec<i32>>>,
    outcome: &mut Outcome,
) -> Result<NewTopic, String> {
    let name = args.topic.clone().unwrap_or_default();
    let configs = parse_topic_configs(&args.config)?;
    outcome.stdout.extend(message_format_warning(&configs));
    if name.contains(['.', '_']) {
        outcome.stdout.push(COLLISION_WARNING.to_string());
    }
    let replication_factor = match args.replication_factor {
        None => None,
        Some(rf) => Some(
            i16::try_from(rf)
                .ok()
                .filter(|rf| *rf >= 1)
                .ok_or_else(|| {
                    format!(
                        "The replication factor must be between 1 and {} inclusive",
                        i16::MAX
                    )
                })?,
        ),
    };
    if args.partitions.is_some_and(|p| p < 1) {
        return Err("The partitions must be greater than 0".to_string());
    }
    Ok(NewTopic {
        name,
        partitions: args.partitions,
        replication_factor,
        assignment,
        configs,
    })
}

async fn connect(args: &TopicsArgs, outcome: &mut Outcome) -> Result<AdminClient, String> {
    let bootstrap = args.bootstrap_server.clone().unwrap_or_default();
    let mut options = AdminOptions::new(&bootstrap);
    if let Some(path) = &args.command_config {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read --command-config {}: {err}", path.display()))?;
        let config = client::parse_command_config(&text).map_err(|err| err.to_string())?;
        outcome.stderr.extend(config.ignored.iter().cloned());
        options.apply(&config);
    }
    AdminClient::connect(options)
        .await
        .map_err(|err| err.to_string())
}

/// Kafka's `getTopics`: all topic names (internal ones only without `--exclude-internal`),
/// filtered by `--topic`, sorted.
async fn get_topics(
    admin: &mut AdminClient,
    args: &TopicsArgs,
    filter: Option<&TopicFilter>,
) -> Result<Vec<String>, String> {
    let listings = admin.list_topics().await.map_err(|err| err.to_string())?;
    let names: Vec<String> = listings
        .into_iter()
        .filter(|t| !(args.exclude_internal && t.is_internal))
        .map(|t| t.name)
        .collect();
    Ok(select_topics(&names, filter, args.exclude_internal))
}

async fn execute_create(
    admin: &mut AdminClient,
    topic: NewTopic,
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let name = topic.name.clone();
    let results = admin
        .create_topics(&[topic], false)
        .await
        .map_err(|err| err.to_string())?;
    for (_, result) in results {
        match result {
            Ok(()) => outcome.stdout.push(format!("Created topic {name}.")),
            Err(err) if err.code() == Some(TOPIC_ALREADY_EXISTS) && args.if_not_exists => {}
            Err(err) => return Err(err.to_string()),
        }
    }
    Ok(())
}

async fn execute_alter(
    admin: &mut AdminClient,
    topics: &[String],
    assignment: Option<&BTreeMap<i32, Vec<i32>>>,
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    ensure_topic_exists(topics, args.topic.as_deref(), args.if_exists)?;
    // Kafka's ZooKeeper-era TopicCommand: a group's partition is its id's hash modulo the
    // partition count, so more partitions would move every group.
    if args.partitions.is_some() {
        if let Some(topic) = topics.iter().find(|t| is_internal(t)) {
            return Err(format!(
                "The number of partitions for the internal topic {topic} cannot be changed."
            ));
        }
    }
    if topics.is_empty() {
        return Ok(());
    }
    let total_count = args.partitions.unwrap_or_default();
    let mut increases = Vec::with_capacity(topics.len());
    if let Some(assignment) = assignment {
        let described = admin
            .describe_topics(topics)
            .await
            .map_err(|err| err.to_string())?;
        for topic in described {
            let (kept, note) =
                new_partition_assignment(&topic.name, assignment, topic.partitions.len());
            outcome.stderr.extend(note);
            increases.push(NewPartitions {
                topic: topic.name,
                total_count,
                assignment: Some(kept),
            });
        }
    } else {
        increases.extend(topics.iter().map(|topic| NewPartitions {
            topic: topic.clone(),
            total_count,
            assignment: None,
        }));
    }
    let results = admin
        .create_partitions(&increases, false)
        .await
        .map_err(|err| err.to_string())?;
    report_per_topic(results, outcome);
    Ok(())
}

async fn execute_describe(
    admin: &mut AdminClient,
    topics: &[String],
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    ensure_topic_exists(topics, args.topic.as_deref(), args.if_exists)?;
    if topics.is_empty() {
        return Ok(());
    }
    let described = admin
        .describe_topics(topics)
        .await
        .map_err(|err| err.to_string())?;
    let configs = admin
        .describe_configs(ConfigResourceKind::Topic, topics)
        .await
        .map_err(|err| err.to_string())?;
    let live_brokers: Vec<i32> = admin.brokers().keys().copied().collect();
    let filters = DescribeFilters::from_args(args);
    let moving = moving_partitions(admin, &described).await;
    for (topic, (_, config)) in described.iter().zip(configs) {
        let config = config.map_err(|err| err.to_string())?;
        outcome.stdout.extend(describe_lines(
            topic,
            &config,
            &live_brokers,
            filters,
            &moving,
        ));
    }
    Ok(())
}

/// A `--topic-id` in Kafka's form (22 characters of URL-safe base64) or as a UUID with
/// dashes; `None` for the zero id, which Kafka treats as "not given".
fn parse_topic_id(text: &str) -> Result<Option<TopicId>, String> {
    let id: TopicId = text
        .parse()
        .map_err(|_| format!("Invalid topic id '{text}': expected 22 characters of URL-safe base64 (as `--describe` prints TopicId) or a UUID with dashes"))?;
    Ok((id.as_bytes() != &[0; 16]).then_some(id))
}

/// Kafka 3.x's `describeTopic` with a topic id: the listing must have it (unless
/// `--if-exists`), then Metadata by id (v12) and the topic's configs.
async fn execute_describe_by_id(
    admin: &mut AdminClient,
    id: TopicId,
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let listings = admin.list_topics().await.map_err(|err| err.to_string())?;
    let known = listings
        .iter()
        .filter(|t| !(args.exclude_internal && t.is_internal))
        .any(|t| &t.topic_id == id.as_bytes());
    if !known {
        if args.if_exists {
            return Ok(());
        }
        return Err(format!("TopicId '{id}' does not exist as expected"));
    }
    let described = admin
        .describe_topics_by_id(&[*id.as_bytes()])
        .await
        .map_err(|err| err.to_string())?;
    let names: Vec<String> = described.iter().map(|t| t.name.clone()).collect();
    let configs = admin
        .describe_configs(ConfigResourceKind::Topic, &names)
        .await
        .map_err(|err| err.to_string())?;
    let live_brokers: Vec<i32> = admin.brokers().keys().copied().collect();
    let filters = DescribeFilters::from_args(args);
    let moving = moving_partitions(admin, &described).await;
    for (topic, (_, config)) in described.iter().zip(configs) {
        let config = config.map_err(|err| err.to_string())?;
        outcome.stdout.extend(describe_lines(
            topic,
            &config,
            &live_brokers,
            filters,
            &moving,
        ));
    }
    Ok(())
}

async fn execute_delete(
    admin: &mut AdminClient,
    topics: &[String],
    args: &TopicsArgs,
    outcome: &mut Outcome,
) -> Result<(), String> {
    ensure_topic_exists(topics, args.topic.as_deref(), args.if_exists)?;
    // Kafka's ZooKeeper-era TopicCommand: internal topics are never marked for deletion (the
    // group coordinators live in __consumer_offsets).
    let (internal, topics): (Vec<String>, Vec<String>) =
        topics.iter().cloned().partition(|t| is_internal(t));
    for topic in &internal {
        outcome.error(format!(
            "Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion."
        ));
    }
    let topics = &topics[..];
    if topics.is_empty() {
        return Ok(());
    }
    // Kafka 2.8 prints nothing when the deletion is accepted.
    let results = admin
        .delete_topics(topics)
        .await
        .map_err(|err| err.to_string())?;
    report_per_topic(results, outcome);
    Ok(())
}

/// Reports failed items of a batched request, one error line each; with several topics the
/// line names the topic (Kafka would print only the first failure).
fn report_per_topic(results: client::ItemResults<()>, outcome: &mut Outcome) {
    let several = results.len() > 1;
    for (topic, result) in results {
        if let Err(err) = result {
            if several {
                outcome.error(format!("{err} (topic '{topic}')"));
            } else {
                outcome.error(err);
            }
        }
    }
}

/// Parses `gregor topics` arguments (without the program and subcommand names), for tests.
#[cfg(test)]
fn parse(argv: &[&str]) -> TopicsArgs {
    let command = TopicsArgs::augment_args(clap::Command::new("topics"));
    use clap::FromArgMatches as _;
    let matches = command
        .try_get_matches_from(std::iter::once("topics").chain(argv.iter().copied()))
        .unwrap_or_else(|err| panic!("{argv:?}: {err}"));
    TopicsArgs::from_arg_matches(&matches).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(argv: &[&str]) -> Result<Action, String> {
        validate(&parse(argv)).map_err(|e| e.0)
    }

    const BS: [&str; 2] = ["--bootstrap-server", "localhost:9092"];

    fn with_bs(rest: &[&'static str]) -> Vec<&'static str> {
        BS.iter().copied().chain(rest.iter().copied()).collect()
    }

    #[test]
    fn option_validation_matches_kafka_messages() {
        let cases: &[(&[&str], Result<Action, &str>)] = &[
            (&["--create", "--topic", "t"], Ok(Action::Create)),
            (&["--create", "--topic", "t", "--partitions", "3", "--replication-factor", "1"], Ok(Action::Create)),
            (&["--create", "--topic", "t", "--replica-assignment", "0:1,1:2", "--config", "retention.ms=1"], Ok(Action::Create)),
            (&["--list"], Ok(Action::List)),
            (&["--describe"], Ok(Action::Describe)),
            (&["--describe", "--topic", "t.*", "--under-replicated-partitions"], Ok(Action::Describe)),
            (&["--alter", "--topic", "t", "--partitions", "5", "--replica-assignment", "0,1,2,0,1"], Ok(Action::Alter)),
            (&["--delete", "--topic", "t", "--if-exists"], Ok(Action::Delete)),
            (&["--list", "--describe"], Err("Command must include exactly one action: --list, --describe, --create, --alter or --delete")),
            (&["--topic", "t"], Err("Command must include exactly one action: --list, --describe, --create, --alter or --delete")),
            (&["--create"], Err("Missing required argument \"[topic]\"")),
            (&["--delete"], Err("Missing required argument \"[topic]\"")),
            (&["--describe", "--if-exists"], Err("--topic or --topic-id is required to describe a topic")),
            (&["--describe", "--if-exists", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAQ"], Ok(Action::Describe)),
            (&["--alter", "--topic", "t"], Err("Missing required argument \"[partitions]\"")),
            (&["--alter", "--topic", "t", "--partitions", "4", "--config", "a=b"], Err("Option combination \"[bootstrap-server],[config]\" can't be used with option \"[alter]\" (the kafka-configs CLI supports altering topic configs with a --bootstrap-server option)")),
            (&["--list", "--config", "a=b"], Err("Option \"[config]\" can't be used with option \"[list]\"")),
            (&["--alter", "--topic", "t", "--partitions", "4", "--delete-config", "a"], Err("Option \"[delete-config]\" can't be used with option \"[bootstrap-server]\"")),
            (&["--describe", "--partitions", "4"], Err("Option \"[partitions]\" can't be used with option \"[describe]\"")),
            (&["--alter", "--topic", "t", "--partitions", "4", "--replication-factor", "2"], Err("Option \"[replication-factor]\" can't be used with option \"[alter]\"")),
            (&["--delete", "--topic", "t", "--replica-assignment", "0"], Err("Option \"[replica-assignment]\" can't be used with option \"[delete]\"")),
            (&["--create", "--topic", "t", "--replica-assignment", "0", "--partitions", "1"], Err("Option \"[replica-assignment]\" can't be used with option \"[partitions]\"")),
            (&["--create", "--topic", "t", "--replica-assignment", "0", "--replication-factor", "1"], Err("Option \"[replica-assignment]\" can't be used with option \"[replication-factor]\"")),
            (&["--list", "--under-replicated-partitions"], Err("Option \"[under-replicated-partitions]\" can't be used with option \"[list]\"")),
            (&["--describe", "--under-replicated-partitions", "--unavailable-partitions"], Err("Option \"[under-replicated-partitions]\" can't be used with option \"[unavailable-partitions]\"")),
            (&["--describe", "--unavailable-partitions", "--topics-with-overrides"], Err("Option \"[unavailable-partitions]\" can't be used with option \"[topics-with-overrides]\"")),
            (&["--list", "--topics-with-overrides"], Err("Option \"[topics-with-overrides]\" can't be used with option \"[list]\"")),
            (&["--create", "--topic", "t", "--if-exists"], Err("Option \"[if-exists]\" can't be used with option \"[create]\"")),
            (&["--delete", "--topic", "t", "--if-not-exists"], Err("Option \"[if-not-exists]\" can't be used with option \"[delete]\"")),
            (&["--create", "--topic", "t", "--exclude-internal"], Err("Option \"[exclude-internal]\" can't be used with option \"[create]\"")),
        ];
        for (argv, expected) in cases {
            let got = check(&with_bs(argv));
            assert_eq!(got, expected.map_err(str::to_string), "{argv:?}");
        }
        assert_eq!(
            check(&["--list"]),
            Err("--bootstrap-server must be specified".to_string())
        );
        assert_eq!(
            check(&[]),
            Err("Create, delete, describe, or change a topic.".to_string())
        );
    }

    #[test]
    fn repeated_config_and_negative_numbers_parse() {
        let args = parse(&with_bs(&[
            "--create",
            "--topic",
            "t",
            "--config",
            "a=1",
            "--config",
            "b=2",
            "--partitions",
            "-1",
        ]));
        assert_eq!(args.config, ["a=1", "b=2"]);
        assert_eq!(args.partitions, Some(-1));
    }

    #[test]
    fn validate_name_needs_no_broker() {
        let args = TopicsArgs::default();
        assert_eq!(validate_name("orders", &args), Outcome::default());
        let warned = validate_name("orders.v1", &args);
        assert!(!warned.failed);
        assert_eq!(warned.stdout, [COLLISION_WARNING]);
        let refused = validate_name("bad name", &args);
        assert!(refused.failed);
        assert_eq!(
            refused.stdout,
            ["Error while executing topic command : Topic name \"bad name\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"]
        );
        assert!(validate_name("..", &args).failed);
        assert!(validate_name(&"a".repeat(250), &args).failed);
        let with_action = TopicsArgs {
            list: true,
            ..TopicsArgs::default()
        };
        assert!(validate_name("ok", &with_action).failed);
    }

    #[test]
    fn topic_filter_is_kafkas_include_list() {
        let all: Vec<String> = [
            "__consumer_offsets",
            "orders",
            "orders.v2",
            "payments",
            "test.topic",
            "testXtopic",
        ]
        .map(String::from)
        .to_vec();
        let select = |raw: &str, exclude: bool| {
            select_topics(&all, Some(&TopicFilter::new(raw).unwrap()), exclude)
        };
        assert_eq!(
            select("orders", false),
            ["orders"],
            "whole-name match, not a prefix"
        );
        assert_eq!(select("orders.*", false), ["orders", "orders.v2"]);
        assert_eq!(
            select("orders, payments", false),
            ["orders", "payments"],
            "comma is an alternative"
        );
        assert_eq!(
            select("\"test\\.topic\"", false),
            ["test.topic"],
            "quotes stripped, escaped dot"
        );
        assert_eq!(
            select(".*", true).len(),
            5,
            "--exclude-internal drops __consumer_offsets"
        );
        assert_eq!(select_topics(&all, None, true).len(), 5);
        assert_eq!(select_topics(&all, None, false).len(), 6);
        assert_eq!(
            TopicFilter::new("a(").unwrap_err(),
            "a( is an invalid regex."
        );
    }

    #[test]
    fn a_missing_topic_is_an_error_unless_if_exists() {
        assert_eq!(
            ensure_topic_exists(&[], Some("t"), false),
            Err("Topic 't' does not exist as expected".to_string())
        );
        assert_eq!(ensure_topic_exists(&[], Some("t"), true), Ok(()));
        assert_eq!(ensure_topic_exists(&[], None, false), Ok(()));
    }

    #[test]
    fn topic_configs_parse_like_kafka() {
        assert_eq!(
            parse_topic_configs(&[
                " retention.ms = 600001 ".to_string(),
                "cleanup.policy=compact".to_string()
            ]),
            Ok(vec![
                ("retention.ms".to_string(), "600001".to_string()),
                ("cleanup.policy".to_string(), "compact".to_string())
            ])
        );
        let format_error = "requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".";
        for bad in ["retention.ms=", "a=b=c", "novalue"] {
            assert_eq!(
                parse_topic_configs(&[bad.to_string()]),
                Err(format_error.to_string()),
                "{bad}"
            );
        }
        assert_eq!(
            parse_topic_configs(&["no.such.key=1".to_string()]),
            Err("Unknown topic config name: no.such.key".to_string())
        );
        assert!(parse_topic_configs(&["retention.ms=soon".to_string()])
            .unwrap_err()
            .starts_with("Invalid value soon for configuration retention.ms"));
        let configs = parse_topic_configs(&["message.format.version=2.0".to_string()]).unwrap();
        assert!(message_format_warning(&configs)
            .unwrap()
            .starts_with("WARNING: The configuration message.format.version=2.0 is specified."));
    }

    #[test]
    fn alter_uses_only_the_new_partitions_entries() {
        let assignment =
            model::replica_assignment::parse_replica_assignment("0:1,1:2,2:0,3:4,4:0").unwrap();
        let (kept, note) = new_partition_assignment("t", &assignment, 3);
        assert_eq!(kept, [vec![3, 4], vec![4, 0]]);
        assert!(note
            .unwrap()
            .contains("the first 3 entries of --replica-assignment are ignored"));
        // Listing only the new partitions loses them, exactly as in Kafka 2.8.
        let only_new = model::replica_assignment::parse_replica_assignment("3:4,4:0").unwrap();
        let (kept, _) = new_partition_assignment("t", &only_new, 3);
        assert!(kept.is_empty());
        let (kept, note) = new_partition_assignment("t", &assignment, 0);
        assert_eq!(kept.len(), 5);
        assert_eq!(note, None);
    }

    fn partition(
        partition: i32,
        leader: Option<i32>,
        replicas: &[i32],
        isr: &[i32],
    ) -> PartitionInfo {
        PartitionInfo {
            partition,
            leader,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
        }
    }

    fn entry(name: &str, value: &str, is_default: bool) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            value: Some(value.into()),
            is_default,
            is_sensitive: false,
            read_only: false,
            source: if is_default {
                client::ConfigSource::DefaultConfig
            } else {
                client::ConfigSource::DynamicTopicConfig
            },
            synonyms: Vec::new(),
        }
    }

    fn sample() -> TopicMetadata {
        let mut topic_id = [0u8; 16];
        for (i, byte) in topic_id.iter_mut().enumerate() {
            *byte = i as u8;
        }
        TopicMetadata {
            name: "orders".into(),
            topic_id,
            is_internal: false,
            partitions: vec![
                partition(0, Some(1), &[1, 2, 0], &[1, 2, 0]),
                partition(1, Some(2), &[2, 0, 1], &[2, 0]),
                partition(2, None, &[0, 1, 2], &[]),
                partition(3, Some(7), &[7, 1, 2], &[7, 1, 2]),
            ],
        }
    }

    #[test]
    fn describe_prints_kafkas_header_and_partition_lines() {
        let configs = [
            entry("retention.ms", "600001", false),
            entry("min.insync.replicas", "2", false),
            entry("cleanup.policy", "delete", true),
        ];
        let lines = describe_lines(
            &sample(),
            &configs,
            &[0, 1, 2],
            DescribeFilters::default(),
            &Moving::new(),
        );
        assert_eq!(
            lines,
            [
                "Topic: orders\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 4\tReplicationFactor: 3\tConfigs: retention.ms=600001,min.insync.replicas=2",
                "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0",
                "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,0,1\tIsr: 2,0",
                "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 0,1,2\tIsr: ",
                "\tTopic: orders\tPartition: 3\tLeader: 7\tReplicas: 7,1,2\tIsr: 7,1,2",
            ]
        );
    }

    #[test]
    fn describe_shows_adding_and_removing_replicas_of_partitions_being_moved() {
        let moving = Moving::from([(("orders".to_owned(), 1), (vec![1], vec![0]))]);
        let lines = describe_lines(
            &sample(),
            &[],
            &[0, 1, 2],
            DescribeFilters::default(),
            &moving,
        );
        assert_eq!(
            lines[2],
            "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,0,1\tIsr: 2,0\tAdding Replicas: 1\tRemoving Replicas: 0"
        );
        assert!(!lines[1].contains("Adding"), "{}", lines[1]);
        assert!(
            lines[0].contains("\tReplicationFactor: 3\t"),
            "{}",
            lines[0]
        );
        // The first partition moving: the replication factor leaves out the added replicas
        // (Kafka's getReplicationFactor), not the full set Metadata lists meanwhile.
        let moving = Moving::from([(("orders".to_owned(), 0), (vec![0], vec![2]))]);
        let lines = describe_lines(
            &sample(),
            &[],
            &[0, 1, 2],
            DescribeFilters::default(),
            &moving,
        );
        assert!(
            lines[0].contains("\tReplicationFactor: 2\t"),
            "{}",
            lines[0]
        );
        // A move that finished after Metadata was read: the replicas say so.
        let done = Moving::from([(("orders".to_owned(), 0), (vec![5], vec![6]))]);
        let lines = describe_lines(
            &sample(),
            &[],
            &[0, 1, 2],
            DescribeFilters::default(),
            &done,
        );
        assert!(
            lines[0].contains("\tReplicationFactor: 3\t"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn describe_report_flags_filter_partitions_and_drop_the_header() {
        let configs = [entry("min.insync.replicas", "2", false)];
        let partitions_of = |filters: DescribeFilters| -> Vec<String> {
            describe_lines(&sample(), &configs, &[0, 1, 2], filters, &Moving::new())
                .iter()
                .map(|line| line.split('\t').nth(2).unwrap().to_string())
                .collect()
        };
        let under = DescribeFilters {
            under_replicated: true,
            ..DescribeFilters::default()
        };
        assert_eq!(partitions_of(under), ["Partition: 1", "Partition: 2"]);
        let unavailable = DescribeFilters {
            unavailable: true,
            ..DescribeFilters::default()
        };
        assert_eq!(
            partitions_of(unavailable),
            ["Partition: 2", "Partition: 3"],
            "no leader, or leader 7 not live"
        );
        let under_min = DescribeFilters {
            under_min_isr: true,
            ..DescribeFilters::default()
        };
        assert_eq!(partitions_of(under_min), ["Partition: 2"]);
        let at_min = DescribeFilters {
            at_min_isr: true,
            ..DescribeFilters::default()
        };
        assert_eq!(partitions_of(at_min), ["Partition: 1"]);
    }

    #[test]
    fn topics_with_overrides_prints_only_headers_of_topics_with_overrides() {
        let filters = DescribeFilters {
            with_overrides: true,
            ..DescribeFilters::default()
        };
        let mut topic = sample();
        topic.topic_id = [0; 16];
        assert!(describe_lines(
            &topic,
            &[entry("cleanup.policy", "delete", true)],
            &[0, 1, 2],
            filters,
            &Moving::new()
        )
        .is_empty());
        assert_eq!(
            describe_lines(
                &topic,
                &[entry("retention.ms", "1", false)],
                &[0, 1, 2],
                filters,
                &Moving::new()
            ),
            ["Topic: orders\tPartitionCount: 4\tReplicationFactor: 3\tConfigs: retention.ms=1"],
            "no TopicId field for the zero id"
        );
    }
}
