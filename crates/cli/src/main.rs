//! The `gregor` binary: a thin `main` whose subcommands call into the library crates.
//!
//! Each subcommand lives in its own module; this file only parses and routes.

mod acls;
mod admin_options;
mod assign;
#[cfg(feature = "bench")]
mod bench;
mod broker_api_versions;
mod cluster;
mod configs;
mod console;
mod consumer_groups;
mod delete_records;
mod dump_log;
mod get_offsets;
mod leader_election;
mod log_dirs;
mod meta;
mod perf;
mod reassign;
mod server;
mod topics;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "gregor",
    version,
    about = "A Kafka-compatible streaming broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan a replica assignment offline (Kafka's placement or the balanced strategy).
    Assign(assign::AssignArgs),
    /// Create, delete, describe, or change a topic (kafka-topics.sh).
    Topics(topics::TopicsArgs),
    /// Browse the metadata store (ZooKeeper or embedded) like zookeeper-shell.sh: ls, get, tree.
    Meta(meta::MetaArgs),
    /// List, describe, reset offsets of, or delete consumer groups (kafka-consumer-groups.sh).
    ConsumerGroups(consumer_groups::ConsumerGroupsArgs),
    /// Query log directory usage on the given brokers (kafka-log-dirs.sh).
    LogDirs(log_dirs::LogDirsArgs),
    /// Elect preferred or unclean leaders (kafka-leader-election.sh).
    LeaderElection(leader_election::LeaderElectionArgs),
    /// Move partition replicas between brokers (kafka-reassign-partitions.sh).
    ReassignPartitions(reassign::ReassignArgs),
    /// Describe or change the configs of topics, brokers, broker loggers, clients (quotas) and users (quotas, SCRAM credentials) (kafka-configs.sh).
    Configs(configs::ConfigsArgs),
    /// Add, remove or list ACLs (kafka-acls.sh).
    Acls(acls::AclsArgs),
    /// Send lines of standard input as records, with keys and headers (kafka-console-producer.sh).
    ConsoleProducer(console::ConsoleProducerArgs),
    /// Print a topic's records: from an offset, in a group, with keys, headers, timestamps (kafka-console-consumer.sh).
    ConsoleConsumer(console::ConsoleConsumerArgs),
    /// Measure produce throughput and latency (kafka-producer-perf-test.sh).
    ProducerPerfTest(perf::ProducerPerfArgs),
    /// Measure consume throughput (kafka-consumer-perf-test.sh).
    ConsumerPerfTest(perf::ConsumerPerfArgs),
    /// Print topic partitions' offsets at a time: latest, earliest, by timestamp (kafka-get-offsets.sh).
    GetOffsets(get_offsets::GetOffsetsArgs),
    /// Delete partitions' records below given offsets (kafka-delete-records.sh).
    DeleteRecords(delete_records::DeleteRecordsArgs),
    /// Print each broker's supported API versions (kafka-broker-api-versions.sh).
    BrokerApiVersions(broker_api_versions::BrokerApiVersionsArgs),
    /// Print the batches, records and index entries of a broker's log files (kafka-dump-log.sh).
    DumpLog(dump_log::DumpLogArgs),
    /// Run one broker (Kafka's kafka-server-start.sh).
    Server(server::ServerArgs),
    /// Run N brokers in one process sharing one embedded metadata store.
    DevCluster(server::DevClusterArgs),
    /// Measure a Kafka-compatible broker with librdkafka: produce, consume, end-to-end.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    // kafka-configs.sh pairs entity names with entity types by their order on the line.
    if let (Command::Configs(args), Some(("configs", configs))) =
        (&mut cli.command, matches.subcommand())
    {
        args.order_names(configs);
    }
    let result = match cli.command {
        Command::Assign(args) => assign::run(args),
        Command::Topics(args) => topics::run(args),
        Command::Meta(args) => meta::run(args),
        Command::ConsumerGroups(args) => consumer_groups::run(args),
        Command::LogDirs(args) => log_dirs::run(args),
        Command::LeaderElection(args) => leader_election::run(args),
        Command::ReassignPartitions(args) => reassign::run(args),
        Command::Configs(args) => configs::run(args),
        Command::Acls(args) => acls::run(args),
        Command::ConsoleProducer(args) => console::run_producer(args),
        Command::ConsoleConsumer(args) => console::run_consumer(args),
        Command::ProducerPerfTest(args) => perf::run_producer(args),
        Command::ConsumerPerfTest(args) => perf::run_consumer(args),
        Command::GetOffsets(args) => get_offsets::run(args),
        Command::DeleteRecords(args) => delete_records::run(args),
        Command::BrokerApiVersions(args) => broker_api_versions::run(args),
        Command::DumpLog(args) => dump_log::run(args),
        Command::Server(args) => server::run_server(args),
        Command::DevCluster(args) => server::run_dev_cluster(args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A reader that goes away (`gregor configs ... | head -1`) ends the command quietly, with
/// exit code 0, as it ends Kafka's scripts (Java's `System.out` swallows the error). Rust
/// ignores SIGPIPE, so a write to the closed pipe fails with EPIPE and `println!` panics on
/// it (exit 101 and a panic message); this hook, set once for every command, turns that one
/// panic into a quiet exit. Every other panic goes to the default hook as before.
fn quiet_on_broken_pipe() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        // std's message: "failed printing to stdout: Broken pipe (os error 32)".
        if message.starts_with("failed printing to std") && message.contains("os error 32") {
            std::process::exit(0);
        }
        default_hook(info);
    }));
}
