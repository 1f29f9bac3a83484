//! `gregor reassign-partitions`: Kafka's `kafka-reassign-partitions.sh` (2.8's
//! `ReassignPartitionsCommand` with `--bootstrap-server`), same flags, same JSON and the same
//! lines: `--generate`, `--execute [--throttle B/s]`, `--verify` (which clears the throttles
//! once nothing is moving), `--cancel` and `--list`.
//!
//! Better than Kafka, `--generate` balances each topic on its own (every listed broker holds
//! its share of the topic's replicas and leads its share of its partitions, within one) with
//! the fewest replica moves that reach it (an exact min-cost flow in `assignment`): replicas
//! on brokers outside the list move, the rest stay unless their broker holds more than its
//! share, and leaders are spread by reordering replicas (which moves no data). It prints how
//! many replicas move and the leader and replica count per broker before and after. It is rack-aware as Kafka's is when every listed broker
//! has a `broker.rack`: each partition's replicas go to as many different racks as there are
//! (a replica that shares a rack with another of its partition moves when a free rack exists);
//! `--disable-rack-aware` turns that off, and brokers with and without racks mixed are refused
//! as Kafka refuses them.
//!
//! Option checks, the JSON formats, the proposal and the output are pure functions, tested
//! below; only [`run`] talks to the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use client::{AdminClient, AlterConfigOp, ClientError, ConfigResourceKind};

/// The flags of `kafka-reassign-partitions.sh`.
#[derive(Debug, Default, Clone, Args)]
#[command(about = "Move partition replicas between brokers (kafka-reassign-partitions.sh).")]
pub struct ReassignArgs {
    /// REQUIRED: the server(s) to use for bootstrapping.
    #[arg(long, value_name = "host:port")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(
        long,
        alias = "admin.config",
        value_name = "Admin client property file"
    )]
    pub command_config: Option<PathBuf>,
    /// Generate a candidate partition reassignment configuration (it is not executed).
    #[arg(long)]
    pub generate: bool,
    /// Kick off the reassignment as specified by the --reassignment-json-file option.
    #[arg(long)]
    pub execute: bool,
    /// Verify if the reassignment completed as specified by --reassignment-json-file; once
    /// nothing is being moved, the throttles are removed.
    #[arg(long)]
    pub verify: bool,
    /// Cancel an active reassignment.
    #[arg(long)]
    pub cancel: bool,
    /// List all active partition reassignments.
    #[arg(long)]
    pub list: bool,
    /// The JSON file with the partition reassignment configuration:
    /// {"partitions": [{"topic": "foo", "partition": 1, "replicas": [1,2,3]}], "version": 1}.
    #[arg(long, value_name = "manual assignment json file path")]
    pub reassignment_json_file: Option<PathBuf>,
    /// Generate a reassignment moving the partitions of these topics to --broker-list:
    /// {"topics": [{"topic": "foo"},{"topic": "foo1"}], "version": 1}.
    #[arg(long, value_name = "topics to reassign json file path")]
    pub topics_to_move_json_file: Option<PathBuf>,
    /// The brokers to which the partitions should go, as "0,1,2" (with --generate).
    #[arg(long, value_name = "brokerlist")]
    pub broker_list: Option<String>,
    /// Generate the proposal without rack awareness (with --generate).
    #[arg(long)]
    pub disable_rack_aware: bool,
    /// The movement of partitions between brokers is throttled to this value (bytes/sec).
    #[arg(long, value_name = "throttle", default_value_t = -1, allow_hyphen_values = true)]
    pub throttle: i64,
    /// Execute this reassignment in addition to any other ongoing ones (also how a throttle
    /// is changed: resubmit the reassignment with --additional).
    #[arg(long)]
    pub additional: bool,
    /// Do not modify broker or topic throttles (with --verify or --cancel).
    #[arg(long)]
    pub preserve_throttles: bool,
}

/// The action asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// --generate.
    Generate,
    /// --execute.
    Execute,
    /// --verify.
    Verify,
    /// --cancel.
    Cancel,
    /// --list.
    List,
}

/// Kafka's option checks, in its order and words.
pub fn validate(args: &ReassignArgs) -> Result<Action, String> {
    let actions: Vec<Action> = [
        (args.generate, Action::Generate),
        (args.execute, Action::Execute),
        (args.verify, Action::Verify),
        (args.cancel, Action::Cancel),
        (args.list, Action::List),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, a)| a)
    .collect();
    if actions.len() != 1 {
        return Err(
            "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
                .to_owned(),
        );
    }
    let action = actions[0];
    if args.bootstrap_server.is_none() {
        return Err("Please specify --bootstrap-server".to_owned());
    }
    let missing = |name: &str| format!("Missing required argument \"[{name}]\"");
    match action {
        Action::Generate => {
            if args.topics_to_move_json_file.is_none() {
                return Err(missing("topics-to-move-json-file"));
            }
            if args.broker_list.is_none() {
                return Err(missing("broker-list"));
            }
        }
        Action::Execute | Action::Verify | Action::Cancel => {
            if args.reassignment_json_file.is_none() {
                return Err(missing("reassignment-json-file"));
            }
        }
        Action::List => {}
    }
    let not_with = |opt: &str| {
        format!(
            "Option \"{opt}\" can't be used with action \"{}\"",
            flag(action)
        )
    };
    if args.throttle >= 0 && action != Action::Execute {
        return Err(not_with("[throttle]"));
    }
    if args.additional && action != Action::Execute {
        return Err(not_with("[additional]"));
    }
    if args.preserve_throttles && !matches!(action, Action::Verify | Action::Cancel) {
        return Err(not_with("[preserve-throttles]"));
    }
    if args.broker_list.is_some() && action != Action::Generate {
        return Err(not_with("[broker-list]"));
    }
    if args.topics_to_move_json_file.is_some() && action != Action::Generate {
        return Err(not_with("[topics-to-move-json-file]"));
    }
    if args.reassignment_json_file.is_some() && matches!(action, Action::Generate | Action::List) {
        return Err(not_with("[reassignment-json-file]"));
    }
    Ok(action)
}

fn flag(action: Action) -> &'static str {
    match action {
        Action::Generate => "[generate]",
        Action::Execute => "[execute]",
        Action::Verify => "[verify]",
        Action::Cancel => "[cancel]",
        Action::List => "[list]",
    }
}

/// Partition -> replicas, by (topic, partition).
pub type Assignment = BTreeMap<(String, i32), Vec<i32>>;

/// Kafka's `parsePartitionReassignmentData` plus `parseExecuteAssignmentArgs`' checks: version
/// 1, `partitions` with `topic`, `partition`, `replicas` and optional `log_dirs` (only "any",
/// Gregor has no intra-broker moves).
pub fn parse_reassignment_json(text: &str) -> Result<Assignment, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| "The input string is not a valid JSON".to_owned())?;
    let version = value.get("version").and_then(|v| v.as_i64()).unwrap_or(1);
    if version != 1 {
        return Err(format!("Not supported version field value {version}"));
    }
    let entries = value
        .get("partitions")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    if entries.is_empty() {
        return Err("Partition reassignment list cannot be empty".to_owned());
    }
    let mut out = Assignment::new();
    let mut duplicates = Vec::new();
    let mut replica_duplicates = Vec::new();
    for entry in &entries {
        let topic = entry.get("topic").and_then(|t| t.as_str());
        let partition = entry.get("partition").and_then(|p| p.as_i64());
        let replicas = entry.get("replicas").and_then(|r| r.as_array()).map(|r| {
            r.iter()
                .map(|b| b.as_i64().and_then(|b| i32::try_from(b).ok()))
                .collect::<Option<Vec<i32>>>()
        });
        let (Some(topic), Some(partition), Some(Some(replicas))) = (topic, partition, replicas)
        else {
            return Err(format!(
                "Each partition needs a string \"topic\", an integer \"partition\" and a list of integer \"replicas\": {entry}"
            ));
        };
        let partition =
            i32::try_from(partition).map_err(|_| format!("Invalid partition: {entry}"))?;
        if replicas.is_empty() {
            return Err("Partition replica list cannot be empty".to_owned());
        }
        if let Some(dirs) = entry.get("log_dirs").and_then(|d| d.as_array()) {
            if dirs.len() != replicas.len() {
                return Err(format!(
                    "Size of replicas list {replicas:?} is different from size of log dirs list {dirs:?} for partition {topic}-{partition}"
                ));
            }
            if dirs.iter().any(|d| d.as_str() != Some("any")) {
                return Err(format!(
                    "log_dirs other than \"any\" are not supported (no moves between log directories): {topic}-{partition}"
                ));
            }
        }
        let mut seen = BTreeSet::new();
        let repeated: BTreeSet<i32> = replicas
            .iter()
            .copied()
            .filter(|b| !seen.insert(*b))
            .collect();
        if !repeated.is_empty() {
            replica_duplicates.push(format!(
                "{topic}-{partition} contains multiple entries for {}",
                join(&repeated.into_iter().collect::<Vec<_>>())
            ));
        }
        if out
            .insert((topic.to_owned(), partition), replicas)
            .is_some()
        {
            duplicates.push(format!("{topic}-{partition}"));
        }
    }
    if !duplicates.is_empty() {
        return Err(format!(
            "Partition reassignment contains duplicate topic partitions: {}",
            duplicates.join(",")
        ));
    }
    if !replica_duplicates.is_empty() {
        return Err(format!(
            "Partition replica lists may not contain duplicate entries: {}",
            replica_duplicates.join(",")
        ));
    }
    Ok(out)
}

/// `{"topics": [{"topic": "foo"}], "version": 1}` -> the topic names (duplicates refused).
pub fn parse_topics_json(text: &str) -> Result<Vec<String>, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| "The input string is not a valid JSON".to_owned())?;
    let version = value.get("version").and_then(|v| v.as_i64()).unwrap_or(1);
    if version != 1 {
        return Err(format!("Not supported version field value {version}"));
    }
    let mut topics = Vec::new();
    for entry in value
        .get("topics")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default()
    {
        match entry.get("topic").and_then(|t| t.as_str()) {
            Some(t) => topics.push(t.to_owned()),
            None => {
                return Err(format!(
                    "Each entry of \"topics\" needs a string \"topic\": {entry}"
                ))
            }
        }
    }
    let mut seen = BTreeSet::new();
    let duplicates: Vec<&String> = topics.iter().filter(|t| !seen.insert(*t)).collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "List of topics to reassign contains duplicate entries: {}",
            duplicates
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    Ok(topics)
}

/// `--broker-list 0,1,2` (duplicates refused, as Kafka does).
pub fn parse_broker_list(text: &str) -> Result<Vec<i32>, String> {
    let ids = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<i32>()
                .map_err(|_| format!("Invalid broker id in --broker-list: '{}'", s.trim()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = BTreeSet::new();
    let duplicates: Vec<String> = ids
        .iter()
        .filter(|b| !seen.insert(**b))
        .map(i32::to_string)
        .collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "Broker list contains duplicate entries: {}",
            duplicates.join(",")
        ));
    }
    Ok(ids)
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// Kafka's `formatAsReassignmentJson`: compact, sorted by topic and partition, every replica
/// with log dir "any".
pub fn reassignment_json(assignment: &Assignment) -> String {
    let partitions: Vec<serde_json::Value> = assignment
        .iter()
        .map(|((topic, partition), replicas)| {
            serde_json::json!({
                "topic": topic,
                "partition": partition,
                "replicas": replicas,
                "log_dirs": replicas.iter().map(|_| "any").collect::<Vec<_>>(),
            })
        })
        .collect();
    // serde_json keeps insertion order only with preserve_order; write the envelope by hand
    // so that "version" comes first, as in Kafka's output.
    let body: Vec<String> = partitions
        .iter()
        .map(|p| {
            format!(
                "{{\"topic\":{},\"partition\":{},\"replicas\":{},\"log_dirs\":{}}}",
                p["topic"], p["partition"], p["replicas"], p["log_dirs"]
            )
        })
        .collect();
    format!("{{\"version\":1,\"partitions\":[{}]}}", body.join(","))
}

/// A proposal for `--generate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The new assignment of every partition of the topics.
    pub assignment: Assignment,
    /// Replicas that must be copied to a broker that does not have them.
    pub moves: usize,
}

/// The racks `--generate` places by: every listed broker's rack, or none (not rack-aware)
/// when no listed broker has one or `--disable-rack-aware` is given. Some with and some
/// without is refused, as Kafka refuses it.
pub fn generate_racks(
    brokers: &[i32],
    racks: &BTreeMap<i32, Option<String>>,
    disable_rack_aware: bool,
) -> Result<BTreeMap<i32, String>, String> {
    if disable_rack_aware {
        return Ok(BTreeMap::new());
    }
    let known: BTreeMap<i32, String> = brokers
        .iter()
        .filter_map(|b| racks.get(b).cloned().flatten().map(|r| (*b, r)))
        .collect();
    if !known.is_empty() && known.len() != brokers.len() {
        return Err("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.".to_owned());
    }
    Ok(known)
}

/// The `--generate` proposal (`assignment::propose_reassignment`): each topic balanced on
/// its own over the listed brokers (replicas and leaders within one per broker), with the
/// fewest replica moves that reach it; replicas on unlisted brokers go to listed ones, and
/// leaders (first replicas) are spread by reordering within each partition. With `racks`
/// (every listed broker's rack; empty = not rack-aware) each partition's replicas also take
/// as many different racks as there are. Deterministic.
pub fn propose(
    current: &Assignment,
    brokers: &[i32],
    racks: &BTreeMap<i32, String>,
) -> Result<Proposal, String> {
    let mut topics = assignment::TopicAssignments::new();
    for ((topic, partition), replicas) in current {
        topics
            .entry(topic.clone())
            .or_default()
            .insert(*partition, replicas.clone());
    }
    let proposal = assignment::propose_reassignment(&topics, brokers, racks)?;
    let assignment = proposal
        .assignment
        .into_iter()
        .flat_map(|(topic, partitions)| {
            partitions
                .into_iter()
                .map(move |(partition, replicas)| ((topic.clone(), partition), replicas))
        })
        .collect();
    Ok(Proposal {
        assignment,
        moves: proposal.moves,
    })
}

/// Leaders and replicas per broker.
pub fn spread(assignment: &Assignment) -> BTreeMap<i32, (usize, usize)> {
    let mut out: BTreeMap<i32, (usize, usize)> = BTreeMap::new();
    for replicas in assignment.values() {
        for (i, b) in replicas.iter().enumerate() {
            let e = out.entry(*b).or_default();
            e.1 += 1;
            if i == 0 {
                e.0 += 1;
            }
        }
    }
    out
}

/// The `--generate` summary Kafka does not print: moves and the spread before and after.
pub fn spread_lines(before: &Assignment, after: &Assignment, moves: usize) -> Vec<String> {
    let total: usize = before.values().map(Vec::len).sum();
    let mut lines = vec![format!(
        "Replicas to move: {moves} of {total} (leaders/replicas per broker, before -> after):"
    )];
    let (b, a) = (spread(before), spread(after));
    let brokers: BTreeSet<i32> = b.keys().chain(a.keys()).copied().collect();
    for broker in brokers {
        let (bl, br) = b.get(&broker).copied().unwrap_or_default();
        let (al, ar) = a.get(&broker).copied().unwrap_or_default();
        lines.push(format!("  broker {broker}: {bl}/{br} -> {al}/{ar}"));
    }
    lines
}

/// Kafka's throttle configs for a move (`calculateLeaderThrottles` /
/// `calculateFollowerThrottles`): per topic, the leader throttle lists `partition:source`
/// for every current replica, the follower throttle `partition:destination` for every new
/// one. Also returns every broker involved.
pub fn throttle_configs(
    current: &Assignment,
    proposed: &Assignment,
) -> (BTreeMap<String, (String, String)>, BTreeSet<i32>) {
    let mut leader: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut follower: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut brokers = BTreeSet::new();
    for ((topic, partition), target) in proposed {
        let sources = current
            .get(&(topic.clone(), *partition))
            .cloned()
            .unwrap_or_default();
        let l = leader.entry(topic.clone()).or_default();
        for s in &sources {
            l.insert(format!("{partition}:{s}"));
            brokers.insert(*s);
        }
        let f = follower.entry(topic.clone()).or_default();
        for d in target.iter().filter(|d| !sources.contains(d)) {
            f.insert(format!("{partition}:{d}"));
            brokers.insert(*d);
        }
    }
    let join_set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    let configs = leader
        .iter()
        .map(|(t, l)| {
            let f = follower.get(t).map(join_set).unwrap_or_default();
            (t.clone(), (join_set(l), f))
        })
        .collect();
    (configs, brokers)
}

/// Kafka's `--verify` lines for the targets, given what is moving and the current replicas.
pub fn verify_lines(
    targets: &Assignment,
    moving: &BTreeSet<(String, i32)>,
    current: &Assignment,
) -> Vec<String> {
    let mut lines = vec!["Status of partition reassignment:".to_owned()];
    for ((topic, partition), target) in targets {
        let key = (topic.clone(), *partition);
        if moving.contains(&key) {
            lines.push(format!(
                "Reassignment of partition {topic}-{partition} is still in progress."
            ));
            continue;
        }
        let now = current.get(&key).cloned().unwrap_or_default();
        if &now == target {
            lines.push(format!(
                "Reassignment of partition {topic}-{partition} is complete."
            ));
        } else {
            lines.push(format!(
                "There is no active reassignment of partition {topic}-{partition}, but replica set is {} rather than {}.",
                join(&now),
                join(target)
            ));
        }
    }
    lines
}

/// Kafka's `--list` text.
pub fn list_text(ongoing: &[client::OngoingReassignment]) -> String {
    if ongoing.is_empty() {
        return "No partition reassignments found.".to_owned();
    }
    let lines: Vec<String> = ongoing
        .iter()
        .map(|r| {
            let mut line = format!(
                "{}-{}: replicas: {}.",
                r.topic,
                r.partition,
                join(&r.replicas)
            );
            if !r.adding.is_empty() {
                line.push_str(&format!(" adding: {}.", join(&r.adding)));
            }
            if !r.removing.is_empty() {
                line.push_str(&format!(" removing: {}.", join(&r.removing)));
            }
            line
        })
        .collect();
    format!("Current partition reassignments:\n{}", lines.join("\n"))
}

const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

const CANNOT_EXECUTE: &str = "Cannot execute because there is an existing partition assignment.  \
Use --additional to override this and create a new partition assignment in addition to the \
existing one. The --additional flag can also be used to change the throttle by resubmitting \
the current reassignment.";

const RUN_VERIFY: &str = "Warning: You must run --verify periodically, until the reassignment \
completes, to ensure the throttle is removed.";

/// A failure that ends the command: the message goes to stdout, as Kafka's tool prints it,
/// and the exit code is 1.
struct Failed(String);

/// Runs `gregor reassign-partitions`.
pub fn run(args: ReassignArgs) -> anyhow::Result<ExitCode> {
    let action = match validate(&args) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(1));
        }
    };
    let read = |path: &Option<PathBuf>, what: &str| -> anyhow::Result<String> {
        let path = path.as_ref().expect("checked by validate");
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {what} {}", path.display()))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let options = crate::admin_options::admin_options(
            args.bootstrap_server.as_deref().unwrap_or_default(),
            "reassign-partitions",
            args.command_config.as_deref(),
            "--command-config",
        )?;
        let mut admin = AdminClient::connect(options).await?;
        let outcome = match action {
            Action::List => list(&mut admin).await,
            Action::Generate => {
                let topics = parse_topics_json(&read(
                    &args.topics_to_move_json_file,
                    "--topics-to-move-json-file",
                )?);
                let brokers = parse_broker_list(args.broker_list.as_deref().unwrap_or_default());
                match (topics, brokers) {
                    (Ok(t), Ok(b)) => generate(&mut admin, &t, &b, args.disable_rack_aware).await,
                    (Err(e), _) | (_, Err(e)) => Err(Failed(e)),
                }
            }
            Action::Execute | Action::Verify | Action::Cancel => {
                match parse_reassignment_json(&read(
                    &args.reassignment_json_file,
                    "--reassignment-json-file",
                )?) {
                    Err(e) => Err(Failed(e)),
                    Ok(targets) => match action {
                        Action::Execute => execute(&mut admin, &targets, &args).await,
                        Action::Verify => {
                            verify(&mut admin, &targets, args.preserve_throttles).await
                        }
                        _ => cancel(&mut admin, &targets, args.preserve_throttles).await,
                    },
                }
            }
        };
        anyhow::Ok(outcome)
    });
    match result {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(Failed(message))) => {
            println!("{message}");
            Ok(ExitCode::from(1))
        }
        Err(err) => {
            println!("Error: {err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

fn client_failed(err: ClientError) -> Failed {
    Failed(format!("Error: {err}"))
}

/// The current replicas of every partition of `topics` (an unknown topic fails, as Kafka's
/// describeTopics does).
async fn current_assignment(
    admin: &mut AdminClient,
    topics: &[String],
) -> Result<Assignment, Failed> {
    let described = admin.describe_topics(topics).await.map_err(|e| match e.code() {
        Some(3) => Failed(format!(
            "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: {e} (topics: {})",
            topics.join(",")
        )),
        _ => client_failed(e),
    })?;
    Ok(described
        .into_iter()
        .flat_map(|t| {
            let name = t.name.clone();
            t.partitions
                .into_iter()
                .map(move |p| ((name.clone(), p.partition), p.replicas))
        })
        .collect())
}

async fn list(admin: &mut AdminClient) -> Result<(), Failed> {
    let ongoing = admin
        .list_partition_reassignments(None)
        .await
        .map_err(client_failed)?;
    println!("{}", list_text(&ongoing));
    Ok(())
}

async fn generate(
    admin: &mut AdminClient,
    topics: &[String],
    brokers: &[i32],
    disable_rack_aware: bool,
) -> Result<(), Failed> {
    let live: BTreeSet<i32> = admin.brokers().keys().copied().collect();
    let unknown: Vec<i32> = brokers
        .iter()
        .copied()
        .filter(|b| !live.contains(b))
        .collect();
    if !unknown.is_empty() {
        return Err(Failed(format!(
            "Error: The broker list names brokers that are not live: {} (live: {})",
            join(&unknown),
            join(&live.iter().copied().collect::<Vec<_>>())
        )));
    }
    let current = current_assignment(admin, topics).await?;
    let racks = generate_racks(brokers, admin.racks(), disable_rack_aware)
        .map_err(|e| Failed(format!("Error: {e}")))?;
    let proposal = propose(&current, brokers, &racks).map_err(|e| Failed(format!("Error: {e}")))?;
    println!(
        "Current partition replica assignment\n{}\n",
        reassignment_json(&current)
    );
    println!(
        "Proposed partition reassignment configuration\n{}",
        reassignment_json(&proposal.assignment)
    );
    println!();
    for line in spread_lines(&current, &proposal.assignment, proposal.moves) {
        println!("{line}");
    }
    Ok(())
}

async fn execute(
    admin: &mut AdminClient,
    targets: &Assignment,
    args: &ReassignArgs,
) -> Result<(), Failed> {
    let ongoing = admin
        .list_partition_reassignments(None)
        .await
        .map_err(client_failed)?;
    if !args.additional && !ongoing.is_empty() {
        return Err(Failed(CANNOT_EXECUTE.to_owned()));
    }
    let live: BTreeSet<i32> = admin.brokers().keys().copied().collect();
    let down: BTreeSet<i32> = targets
        .values()
        .flatten()
        .copied()
        .filter(|b| !live.contains(b))
        .collect();
    if !down.is_empty() {
        // Kafka's tool refuses these; the controller accepts a broker it knows and waits for
        // it (and refuses one the cluster never had).
        eprintln!(
            "Warning: broker(s) {} are not live; their replicas are added when they register.",
            join(&down.into_iter().collect::<Vec<_>>())
        );
    }
    let topics: Vec<String> = targets
        .keys()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let all = current_assignment(admin, &topics).await?;
    let current: Assignment = all
        .into_iter()
        .filter(|(k, _)| targets.contains_key(k))
        .collect();
    println!(
        "Current partition replica assignment\n\n{}\n\nSave this to use as the --reassignment-json-file option during rollback",
        reassignment_json(&current)
    );
    if args.throttle >= 0 {
        println!("{RUN_VERIFY}");
        // Sources of partitions already moving are their original replicas.
        let mut sources = current.clone();
        for r in &ongoing {
            let key = (r.topic.clone(), r.partition);
            if sources.contains_key(&key) {
                let origin = r
                    .replicas
                    .iter()
                    .copied()
                    .filter(|b| !r.adding.contains(b))
                    .collect();
                sources.insert(key, origin);
            }
        }
        let (topic_configs, brokers) = throttle_configs(&sources, targets);
        for (topic, (leader, follower)) in &topic_configs {
            let mut ops = vec![AlterConfigOp::Set(
                LEADER_REPLICAS.to_owned(),
                leader.clone(),
            )];
            if !follower.is_empty() {
                ops.push(AlterConfigOp::Set(
                    FOLLOWER_REPLICAS.to_owned(),
                    follower.clone(),
                ));
            }
            admin
                .incremental_alter_configs(ConfigResourceKind::Topic, topic, &ops, false)
                .await
                .map_err(client_failed)?;
        }
        let rate = args.throttle.to_string();
        for broker in &brokers {
            if !live.contains(broker) {
                // Its own configs are set through it (as Kafka's tool does); it is down.
                eprintln!("Warning: broker {broker} is not live; its throttle rate is not set.");
                continue;
            }
            let ops = [
                AlterConfigOp::Set(LEADER_RATE.to_owned(), rate.clone()),
                AlterConfigOp::Set(FOLLOWER_RATE.to_owned(), rate.clone()),
            ];
            admin
                .incremental_alter_configs(
                    ConfigResourceKind::Broker,
                    &broker.to_string(),
                    &ops,
                    false,
                )
                .await
                .map_err(client_failed)?;
        }
        println!(
            "The inter-broker throttle limit was set to {} B/s",
            args.throttle
        );
    }
    let request: Vec<(String, i32, Option<Vec<i32>>)> = targets
        .iter()
        .map(|((t, p), r)| (t.clone(), *p, Some(r.clone())))
        .collect();
    let results = admin
        .alter_partition_reassignments(&request)
        .await
        .map_err(client_failed)?;
    let errors: BTreeMap<String, String> = results
        .into_iter()
        .filter_map(|(tp, r)| r.err().map(|e| (tp, e.to_string())))
        .collect();
    if !errors.is_empty() {
        return Err(Failed(format!(
            "Error reassigning partition(s):\n{}",
            errors
                .iter()
                .map(|(tp, e)| format!("{tp}: {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )));
    }
    let names: Vec<String> = targets.keys().map(|(t, p)| format!("{t}-{p}")).collect();
    println!(
        "Successfully started partition reassignment{} for {}",
        if names.len() == 1 { "" } else { "s" },
        names.join(",")
    );
    Ok(())
}

async fn verify(
    admin: &mut AdminClient,
    targets: &Assignment,
    preserve_throttles: bool,
) -> Result<(), Failed> {
    let ongoing = admin
        .list_partition_reassignments(None)
        .await
        .map_err(client_failed)?;
    let moving: BTreeSet<(String, i32)> = ongoing
        .iter()
        .map(|r| (r.topic.clone(), r.partition))
        .collect();
    let topics: Vec<String> = targets
        .keys()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut current = Assignment::new();
    for topic in &topics {
        // A topic that is gone shows as an empty replica set, as in Kafka.
        if let Ok(a) = current_assignment(admin, std::slice::from_ref(topic)).await {
            current.extend(a);
        }
    }
    for line in verify_lines(targets, &moving, &current) {
        println!("{line}");
    }
    if ongoing.is_empty() && !preserve_throttles {
        clear_throttles(admin, targets).await?;
    }
    Ok(())
}

async fn cancel(
    admin: &mut AdminClient,
    targets: &Assignment,
    preserve_throttles: bool,
) -> Result<(), Failed> {
    let ongoing = admin
        .list_partition_reassignments(None)
        .await
        .map_err(client_failed)?;
    let moving: BTreeSet<(String, i32)> = ongoing
        .iter()
        .map(|r| (r.topic.clone(), r.partition))
        .collect();
    let to_cancel: Vec<(String, i32, Option<Vec<i32>>)> = targets
        .keys()
        .filter(|k| moving.contains(*k))
        .map(|(t, p)| (t.clone(), *p, None))
        .collect();
    if to_cancel.is_empty() {
        println!("None of the specified partition reassignments are active.");
    } else {
        let results = admin
            .alter_partition_reassignments(&to_cancel)
            .await
            .map_err(client_failed)?;
        let errors: Vec<String> = results
            .iter()
            .filter_map(|(tp, r)| r.as_ref().err().map(|e| format!("{tp}: {e}")))
            .collect();
        if !errors.is_empty() {
            return Err(Failed(format!(
                "Error cancelling partition reassignment{} for:\n{}",
                if errors.len() == 1 { "" } else { "s" },
                errors.join("\n")
            )));
        }
        let names: Vec<String> = to_cancel
            .iter()
            .map(|(t, p, _)| format!("{t}-{p}"))
            .collect();
        println!(
            "Successfully cancelled partition reassignment{} for: {}",
            if names.len() == 1 { "" } else { "s" },
            names.join(",")
        );
    }
    if !preserve_throttles {
        clear_throttles(admin, targets).await?;
    }
    Ok(())
}

/// Kafka's `clearAllThrottles`: the rate configs of every live broker and every broker the
/// targets name, and the replica lists of the targets' topics.
async fn clear_throttles(admin: &mut AdminClient, targets: &Assignment) -> Result<(), Failed> {
    let mut brokers: BTreeSet<i32> = admin.brokers().keys().copied().collect();
    brokers.extend(targets.values().flatten().copied());
    println!(
        "Clearing broker-level throttles on broker{} {}",
        if brokers.len() == 1 { "" } else { "s" },
        join(&brokers.iter().copied().collect::<Vec<_>>())
    );
    for broker in &brokers {
        let ops = [
            AlterConfigOp::Delete(LEADER_RATE.to_owned()),
            AlterConfigOp::Delete(FOLLOWER_RATE.to_owned()),
        ];
        let cleared = admin
            .incremental_alter_configs(ConfigResourceKind::Broker, &broker.to_string(), &ops, false)
            .await;
        // A broker's own configs are changed through it: one that is down (or just went)
        // keeps its rate; say so rather than stop halfway.
        if let Err(e) = cleared {
            eprintln!("Warning: could not clear the throttle of broker {broker}: {e}");
        }
    }
    let topics: BTreeSet<&String> = targets.keys().map(|(t, _)| t).collect();
    println!(
        "Clearing topic-level throttles on topic{} {}",
        if topics.len() == 1 { "" } else { "s" },
        topics
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    for topic in topics {
        let ops = [
            AlterConfigOp::Delete(LEADER_REPLICAS.to_owned()),
            AlterConfigOp::Delete(FOLLOWER_REPLICAS.to_owned()),
        ];
        admin
            .incremental_alter_configs(ConfigResourceKind::Topic, topic, &ops, false)
            .await
            .map_err(client_failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReassignArgs,
    }

    fn check(argv: &[&str]) -> Result<Action, String> {
        let mut full = vec!["reassign-partitions"];
        full.extend_from_slice(argv);
        validate(&Cli::parse_from(full).args)
    }

    fn a(entries: &[(&str, i32, &[i32])]) -> Assignment {
        entries
            .iter()
            .map(|(t, p, r)| (((*t).to_owned(), *p), r.to_vec()))
            .collect()
    }

    #[test]
    fn options_are_checked_as_kafka_does() {
        assert!(check(&[])
            .unwrap_err()
            .starts_with("Command must include exactly one action"));
        assert!(check(&["--list", "--verify"])
            .unwrap_err()
            .starts_with("Command must include"));
        assert_eq!(
            check(&["--list"]).unwrap_err(),
            "Please specify --bootstrap-server"
        );
        let bs = |rest: &[&'static str]| {
            let mut v = vec!["--bootstrap-server", "x:1"];
            v.extend_from_slice(rest);
            check(&v)
        };
        assert_eq!(bs(&["--list"]), Ok(Action::List));
        assert_eq!(
            bs(&["--generate", "--broker-list", "1"]).unwrap_err(),
            "Missing required argument \"[topics-to-move-json-file]\""
        );
        assert_eq!(
            bs(&["--execute"]).unwrap_err(),
            "Missing required argument \"[reassignment-json-file]\""
        );
        assert_eq!(
            bs(&[
                "--verify",
                "--reassignment-json-file",
                "f",
                "--throttle",
                "10"
            ])
            .unwrap_err(),
            "Option \"[throttle]\" can't be used with action \"[verify]\""
        );
        assert_eq!(
            bs(&[
                "--execute",
                "--reassignment-json-file",
                "f",
                "--throttle",
                "10"
            ]),
            Ok(Action::Execute)
        );
    }

    #[test]
    fn reassignment_json_is_kafkas_with_its_checks() {
        let ok = parse_reassignment_json(
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}"#,
        )
        .unwrap();
        assert_eq!(ok, a(&[("t", 0, &[1, 2, 3])]));
        assert_eq!(
            reassignment_json(&ok),
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}"#
        );
        let err = |s: &str| parse_reassignment_json(s).unwrap_err();
        assert_eq!(err("nope"), "The input string is not a valid JSON");
        assert_eq!(
            err(r#"{"version":1,"partitions":[]}"#),
            "Partition reassignment list cannot be empty"
        );
        assert_eq!(
            err(r#"{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}"#),
            "Partition replica list cannot be empty"
        );
        assert_eq!(
            err(
                r#"{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}"#
            ),
            "Partition reassignment contains duplicate topic partitions: t-0"
        );
        assert_eq!(
            err(r#"{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}"#),
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"
        );
        assert!(err(
            r#"{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}"#
        )
        .contains("not supported"));
        assert_eq!(
            parse_topics_json(r#"{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}"#).unwrap(),
            ["a", "b"]
        );
        assert!(
            parse_topics_json(r#"{"topics":[{"topic":"a"},{"topic":"a"}]}"#)
                .unwrap_err()
                .starts_with("List of topics to reassign contains duplicate entries: a")
        );
        assert_eq!(parse_broker_list("0,1,2").unwrap(), [0, 1, 2]);
        assert_eq!(
            parse_broker_list("0,1,1").unwrap_err(),
            "Broker list contains duplicate entries: 1"
        );
    }

    /// Every listed broker within one of its share, no replica outside the list, no partition
    /// with a broker twice, leaders within one where reordering allows.
    fn assert_balanced(p: &Proposal, brokers: &[i32]) {
        let s = spread(&p.assignment);
        let replicas: Vec<usize> = brokers
            .iter()
            .map(|b| s.get(b).map_or(0, |x| x.1))
            .collect();
        let (min, max) = (
            replicas.iter().min().unwrap(),
            replicas.iter().max().unwrap(),
        );
        assert!(max - min <= 1, "replicas per broker {replicas:?}");
        for r in p.assignment.values() {
            assert!(r.iter().all(|b| brokers.contains(b)), "{r:?}");
            assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), r.len(), "{r:?}");
        }
        let leaders: Vec<usize> = brokers
            .iter()
            .map(|b| s.get(b).map_or(0, |x| x.0))
            .collect();
        let (lmin, lmax) = (leaders.iter().min().unwrap(), leaders.iter().max().unwrap());
        assert!(lmax - lmin <= 1, "leaders per broker {leaders:?}");
    }

    #[test]
    fn a_new_broker_gets_its_share_and_nothing_else_moves() {
        // 4 partitions RF 3 on {0,1,2}: 12 replicas; adding broker 3 needs exactly 3 moves.
        let current = a(&[
            ("t", 0, &[0, 1, 2]),
            ("t", 1, &[1, 2, 0]),
            ("t", 2, &[2, 0, 1]),
            ("t", 3, &[0, 2, 1]),
        ]);
        let p = propose(&current, &[0, 1, 2, 3], &BTreeMap::new()).unwrap();
        assert_eq!(p.moves, 3, "{:?}", p.assignment);
        assert_balanced(&p, &[0, 1, 2, 3]);
        // Already balanced: nothing moves.
        assert_eq!(
            propose(&p.assignment, &[0, 1, 2, 3], &BTreeMap::new())
                .unwrap()
                .moves,
            0
        );
    }

    #[test]
    fn draining_a_broker_moves_only_its_replicas() {
        let current = a(&[
            ("t", 0, &[0, 1]),
            ("t", 1, &[1, 2]),
            ("t", 2, &[2, 3]),
            ("t", 3, &[3, 0]),
        ]);
        let p = propose(&current, &[0, 1, 2], &BTreeMap::new()).unwrap();
        assert_eq!(p.moves, 2, "{:?}", p.assignment);
        assert_balanced(&p, &[0, 1, 2]);
        assert_eq!(
            propose(&current, &[0], &BTreeMap::new()).unwrap_err(),
            "Replication factor: 2 larger than available brokers: 1."
        );
    }

    fn racks(pairs: &[(i32, &str)]) -> BTreeMap<i32, String> {
        pairs.iter().map(|(b, r)| (*b, (*r).to_owned())).collect()
    }

    /// Each partition's replicas on distinct racks (as many as there are).
    fn assert_rack_spread(p: &Proposal, racks: &BTreeMap<i32, String>) {
        let rack_count = racks.values().collect::<BTreeSet<_>>().len();
        for (tp, replicas) in &p.assignment {
            let used: BTreeSet<&String> = replicas.iter().map(|b| &racks[b]).collect();
            assert_eq!(
                used.len(),
                replicas.len().min(rack_count),
                "{tp:?} on {replicas:?}"
            );
        }
    }

    #[test]
    fn rack_aware_generation_spreads_each_partition_over_racks() {
        // 6 partitions RF 2, both replicas on rack a's brokers 0 and 1; brokers 2, 3 are rack b.
        let current: Assignment = (0..6)
            .map(|p| {
                (
                    ("r".to_owned(), p),
                    if p % 2 == 0 { vec![0, 1] } else { vec![1, 0] },
                )
            })
            .collect();
        let brokers = [0, 1, 2, 3];
        let r = racks(&[(0, "a"), (1, "a"), (2, "b"), (3, "b")]);
        let p = propose(&current, &brokers, &r).unwrap();
        assert_rack_spread(&p, &r);
        assert_balanced(&p, &brokers);
        // One replica of each partition must move to rack b: 6 moves, no more.
        assert_eq!(p.moves, 6, "{:?}", p.assignment);
        // Without racks the same input needs the same count, but nothing forces the spread.
        let plain = propose(&current, &brokers, &BTreeMap::new()).unwrap();
        assert_balanced(&plain, &brokers);
        // Already spread and balanced: nothing moves.
        assert_eq!(propose(&p.assignment, &brokers, &r).unwrap().moves, 0);
        // Three racks, RF 3 on two racks: one replica of each partition moves to rack c.
        let current = a(&[
            ("t", 0, &[0, 1, 2]),
            ("t", 1, &[2, 3, 0]),
            ("t", 2, &[1, 3, 2]),
        ]);
        let r3 = racks(&[(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]);
        let p = propose(&current, &[0, 1, 2, 3, 4, 5], &r3).unwrap();
        assert_rack_spread(&p, &r3);
        assert_balanced(&p, &[0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn racks_for_generate_are_all_or_none() {
        let known = BTreeMap::from([
            (0, Some("a".to_owned())),
            (1, Some("b".to_owned())),
            (2, None),
        ]);
        assert_eq!(
            generate_racks(&[0, 1], &known, false).unwrap(),
            racks(&[(0, "a"), (1, "b")])
        );
        assert!(generate_racks(&[0, 1, 2], &known, false)
            .unwrap_err()
            .contains("--disable-rack-aware"));
        assert!(generate_racks(&[0, 1, 2], &known, true).unwrap().is_empty());
        assert!(generate_racks(&[2], &known, false).unwrap().is_empty());
    }

    #[test]
    fn a_skewed_topic_is_balanced_within_one_with_fewer_moves_than_a_reshuffle() {
        // 12 partitions RF 2 all on {0,1} of 6 brokers.
        let current: Assignment = (0..12)
            .map(|p| {
                (
                    ("s".to_owned(), p),
                    if p % 2 == 0 { vec![0, 1] } else { vec![1, 0] },
                )
            })
            .collect();
        let brokers = [0, 1, 2, 3, 4, 5];
        let p = propose(&current, &brokers, &BTreeMap::new()).unwrap();
        assert_balanced(&p, &brokers);
        // 24 replicas over 6 brokers: 4 each; brokers 0 and 1 give up 8 each.
        assert_eq!(p.moves, 16);
    }

    #[test]
    fn throttles_name_sources_for_leaders_and_new_replicas_for_followers() {
        let current = a(&[("t", 0, &[0, 1, 2])]);
        let target = a(&[("t", 0, &[1, 2, 3])]);
        let (configs, brokers) = throttle_configs(&current, &target);
        assert_eq!(configs["t"], ("0:0,0:1,0:2".to_owned(), "0:3".to_owned()));
        assert_eq!(brokers, BTreeSet::from([0, 1, 2, 3]));
    }

    #[test]
    fn verify_and_list_print_kafkas_lines() {
        let targets = a(&[("t", 0, &[1, 2]), ("t", 1, &[2, 3]), ("t", 2, &[3, 1])]);
        let moving = BTreeSet::from([("t".to_owned(), 1)]);
        let current = a(&[("t", 0, &[1, 2]), ("t", 1, &[2, 3, 1]), ("t", 2, &[1, 2])]);
        assert_eq!(
            verify_lines(&targets, &moving, &current),
            [
                "Status of partition reassignment:",
                "Reassignment of partition t-0 is complete.",
                "Reassignment of partition t-1 is still in progress.",
                "There is no active reassignment of partition t-2, but replica set is 1,2 rather than 3,1.",
            ]
        );
        assert_eq!(list_text(&[]), "No partition reassignments found.");
        let ongoing = [client::OngoingReassignment {
            topic: "t".to_owned(),
            partition: 1,
            replicas: vec![2, 3, 1],
            adding: vec![3],
            removing: vec![1],
        }];
        assert_eq!(
            list_text(&ongoing),
            "Current partition reassignments:\nt-1: replicas: 2,3,1. adding: 3. removing: 1."
        );
    }
}
