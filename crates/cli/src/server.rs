//! `gregor server` (one broker) and `gregor dev-cluster` (N brokers in one process).
//!
//! Both log to stderr with `tracing` (`RUST_LOG` respected, `info` by default), print their
//! addresses on stdout once serving, and stop gracefully on SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use broker::dev_cluster::DevClusterOptions;
use broker::BrokerConfig;
use clap::Args;

/// `gregor server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// A Kafka-style server.properties file (default: the settings of the shipped
    /// config/server.properties, built in).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set a config key on top of the file (repeatable), e.g. --override broker.id=1.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Data directory: the embedded metadata store in <data-dir>/metadata and, unless
    /// log.dirs is set, partition logs in <data-dir>/logs.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
}

/// `gregor dev-cluster`.
#[derive(Debug, Args)]
pub struct DevClusterArgs {
    /// Number of brokers.
    #[arg(long, default_value_t = 3)]
    brokers: usize,
    /// Broker ids, comma-separated (default 0..N).
    #[arg(long, value_delimiter = ',')]
    broker_ids: Option<Vec<i32>>,
    /// Racks, comma-separated, one per broker.
    #[arg(long, value_delimiter = ',')]
    racks: Option<Vec<String>>,
    /// Port of the first broker; the others use the following ports.
    #[arg(long, default_value_t = 9092)]
    port: u16,
    /// Data directory: <data-dir>/metadata and <data-dir>/broker-<id>/logs.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// A Kafka-style server.properties file applied to every broker.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set a config key for every broker (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

/// The shipped `config/server.properties`: what `gregor server` runs with when it is given no
/// `--config`, so that the one-command start behaves as the shipped file says (as Kafka's
/// quick start does with its own file): the replication factors of `__consumer_offsets` and
/// `__transaction_state` (and the latter's min.isr) at 1, without which a lone broker could
/// never create those topics (Kafka's defaults are 3).
const SHIPPED_SERVER_PROPERTIES: &str = include_str!("../../../config/server.properties");

/// The settings of the shipped file, as overrides that the user's own come after (and so win).
fn shipped_settings() -> Vec<String> {
    broker::config::parse_properties(SHIPPED_SERVER_PROPERTIES)
        // The file is ours and its unit test reads it (shipped_server_properties_is_valid).
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect()
}

/// Runs one broker until SIGINT/SIGTERM.
pub fn run_server(args: ServerArgs) -> anyhow::Result<ExitCode> {
    init_tracing();
    let overrides = match args.config {
        Some(_) => args.overrides,
        None => shipped_settings()
            .into_iter()
            .chain(args.overrides)
            .collect(),
    };
    let config =
        BrokerConfig::load(args.config.as_deref(), &overrides, &args.data_dir).map_err(one_line)?;
    runtime(config.num_io_threads)?
        .block_on(async move {
            broker::run(config, shutdown_signal(), |kafka, admin| {
                println!("gregor server listening on {kafka} (PLAINTEXT)");
                if let Some(admin) = admin {
                    println!("admin listener on http://{admin} (console: http://{admin}/, metrics: http://{admin}/metrics)");
                }
            })
            .await
        })
        .map_err(one_line)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the dev cluster until SIGINT/SIGTERM.
pub fn run_dev_cluster(args: DevClusterArgs) -> anyhow::Result<ExitCode> {
    init_tracing();
    let opts = DevClusterOptions {
        brokers: args.brokers,
        broker_ids: args.broker_ids,
        racks: args.racks,
        port: args.port,
        data_dir: args.data_dir,
        config: args.config,
        overrides: args.overrides,
    };
    let configs = broker::dev_cluster::broker_configs(&opts).map_err(one_line)?;
    // One runtime serves every broker: its blocking pool has each one's num.io.threads.
    let io_threads = configs.iter().map(|config| config.num_io_threads).sum();
    let (commands, receiver) = tokio::sync::mpsc::channel(16);
    // Commands on stdin, one a line (`stop <broker id>`); a thread, since reading stdin
    // blocks. At EOF the sender goes and the cluster just runs.
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match line.parse::<broker::dev_cluster::DevClusterCommand>() {
                Ok(command) => {
                    if commands.blocking_send(command).is_err() {
                        break;
                    }
                }
                Err(err) => eprintln!("{err}"),
            }
        }
    });
    runtime(io_threads)?
        .block_on(async move {
            broker::dev_cluster::run(configs, shutdown_signal(), receiver, |brokers, admin| {
                for (id, addr) in brokers {
                    println!("broker {id} listening on {addr} (PLAINTEXT)");
                }
                let list: Vec<String> = brokers.iter().map(|(_, a)| a.to_string()).collect();
                println!("bootstrap servers: {}", list.join(","));
                if let Some(admin) = admin {
                    println!("admin listener on http://{admin} (console: http://{admin}/, metrics: http://{admin}/metrics)");
                }
            })
            .await
        })
        .map_err(one_line)?;
    Ok(ExitCode::SUCCESS)
}

/// Our error messages already name their cause; printing the source chain as well (as
/// `{:#}` does) would repeat it.
fn one_line(err: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{err}")
}

/// The process's runtime: one async worker per core, and `io_threads` threads for the disk
/// work the brokers hand to the blocking pool (`num.io.threads`).
fn runtime(io_threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(io_threads.max(1))
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")
}

/// Logs to stderr, colored only on a terminal: a log redirected to a file (`> server.log
/// 2>&1`, a service manager) gets plain lines that grep and log shippers read as they are.
fn init_tracing() {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Resolves on the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received"),
        _ = terminate => tracing::info!("SIGTERM received"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_config_file_the_server_runs_the_shipped_settings() {
        let settings = shipped_settings();
        assert_eq!(
            settings,
            [
                "offsets.topic.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "transaction.state.log.replication.factor=1"
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig::load(None, &settings, dir.path()).unwrap();
        assert_eq!(config.offsets_topic_replication_factor, 1);
        assert_eq!(config.transactions.state_log_replication_factor, 1);
        // A user's override comes after, and wins.
        let mine: Vec<String> = settings
            .into_iter()
            .chain(["offsets.topic.replication.factor=3".to_owned()])
            .collect();
        let config = BrokerConfig::load(None, &mine, dir.path()).unwrap();
        assert_eq!(config.offsets_topic_replication_factor, 3);
    }
}
