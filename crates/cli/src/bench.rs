//! `gregor bench produce|consume|end-to-end|failover|topics|soak|connect`: parses the flags and
//! prints the figures of a [`bench`] run (librdkafka, or the project's client for the soak and
//! for `connect`, against any Kafka-compatible broker; the bench's librdkafka is built without
//! TLS and SASL, so `connect` measures authenticated connections with the client crate, the
//! one brokers use between themselves).
//!
//! Only built with `--features bench`, so the server's default build does not link
//! librdkafka. Figures go to stdout as `key=value` lines; progress lines go to stderr.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand, ValueEnum};

/// `gregor bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Send --messages messages; report MB/s, msgs/s and send → delivery-report latency.
    Produce(CommonArgs),
    /// Read --messages messages from the beginning of every partition; report MB/s, msgs/s.
    Consume(CommonArgs),
    /// Produce (use --rate) while consuming; report produce latency and end-to-end latency
    /// (the send timestamp written into each message → its receipt).
    EndToEnd(CommonArgs),
    /// Produce at --rate to every partition, then SIGKILL (or SIGTERM) one broker: report
    /// the seconds until its partitions have new leaders in the metadata and acknowledge
    /// messages again, until it exits (SIGTERM), and failed sends.
    Failover(FailoverArgs),
    /// Create --topics topics of --partitions partitions; report the seconds to the
    /// CreateTopics answers and until every partition has a leader in the metadata, the
    /// latency of Metadata and 1-record Produce requests to an existing topic meanwhile, and
    /// the broker's RSS (--broker-pid). --no-create: only wait for existing topics (after a
    /// restart). --delete: delete them afterwards and time it.
    Topics(TopicsArgs),
    /// For --duration-secs: --connections well-behaved connections (produce acks=all, fetch,
    /// metadata, consumer groups joining and leaving), --stalled connections that send half a
    /// frame, --disconnectors that close mid-request; samples each --broker-pid's RSS and open
    /// fds; then reads back every acknowledged record. Prints a JSON summary; exits 1 when a
    /// check fails (an error of a well-behaved client, a lost or changed record, fd or RSS
    /// growth).
    Soak(SoakArgs),
    /// Open --connections connections one after another on each of --concurrency tasks, each
    /// secured as --command-config says (TLS handshake, SASL exchange) and ending with the
    /// ApiVersions handshake, then closed; report connections/s, the connect latency and the
    /// broker's CPU per connection (--broker-pid).
    Connect(ConnectArgs),
}

#[derive(Debug, Args)]
struct ConnectArgs {
    /// The broker: host:port.
    #[arg(long)]
    bootstrap_server: String,
    /// Client properties (security.protocol, sasl.mechanism, sasl.username/sasl.password or
    /// sasl.jaas.config, ssl.ca.location), as every `gregor` command's --command-config.
    #[arg(long)]
    command_config: Option<std::path::PathBuf>,
    /// Connections to open in all.
    #[arg(long, default_value_t = 1000)]
    connections: u64,
    /// Connections being opened at once.
    #[arg(long, default_value_t = 4)]
    concurrency: u64,
    /// Pid of the broker process on this machine: report its CPU per connection.
    #[arg(long)]
    broker_pid: Option<u32>,
}

/// `gregor bench connect`.
fn connect(a: ConnectArgs) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    let mut options = client::ConnectionOptions {
        client_id: "gregor-bench-connect".to_owned(),
        ..client::ConnectionOptions::default()
    };
    if let Some(path) = &a.command_config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let config = client::parse_command_config(&text)?;
        options.sasl = config.sasl;
        options.tls = config.tls;
    }
    let protocol = client::Security {
        tls: options.tls.clone(),
        sasl: options.sasl.clone(),
    }
    .protocol_name();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let probe = a.broker_pid.map(bench::BrokerProbe::start).transpose()?;
    let next = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(a.connections as usize)));
    let started = std::time::Instant::now();
    let failures: u64 = runtime.block_on(async {
        let tasks: Vec<_> = (0..a.concurrency.max(1))
            .map(|_| {
                let (next, latencies, options) =
                    (Arc::clone(&next), Arc::clone(&latencies), options.clone());
                let addr = a.bootstrap_server.clone();
                let total = a.connections;
                tokio::spawn(async move {
                    let mut failures = 0u64;
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        let begun = std::time::Instant::now();
                        match client::Connection::connect_with(&addr, options.clone()).await {
                            Ok(connection) => {
                                drop(connection);
                                let took = begun.elapsed();
                                latencies
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push(took);
                            }
                            Err(err) => {
                                if failures == 0 {
                                    eprintln!("connection failed: {err}");
                                }
                                failures += 1;
                            }
                        }
                    }
                    failures
                })
            })
            .collect();
        let mut failures = 0;
        for task in tasks {
            failures += task.await.unwrap_or(0);
        }
        failures
    });
    let elapsed = started.elapsed();
    let usage = probe.map(bench::BrokerProbe::finish).transpose()?;
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    latencies.sort();
    let ok = latencies.len() as u64;
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    println!("protocol={protocol}");
    if let Some(sasl) = &options.sasl {
        println!("mechanism={}", sasl.mechanism);
    }
    println!("connections={ok}");
    println!("failed={failures}");
    println!("concurrency={}", a.concurrency.max(1));
    println!("elapsed_s={:.3}", elapsed.as_secs_f64());
    println!(
        "connections_per_sec={:.1}",
        ok as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    println!("connect_p50_ms={:.2}", pct(0.50));
    println!("connect_p99_ms={:.2}", pct(0.99));
    if let Some(usage) = usage {
        println!("broker_cpu_s={:.2}", usage.cpu_seconds);
        println!(
            "broker_cpu_ms_per_connection={:.3}",
            usage.cpu_seconds * 1000.0 / (ok.max(1) as f64)
        );
    }
    if failures > 0 {
        bail!("{failures} of {} connections failed", a.connections);
    }
    Ok(())
}

#[derive(Debug, Args)]
struct SoakArgs {
    /// The brokers: host:port[,host:port...].
    #[arg(long)]
    bootstrap_server: String,
    /// The topic (created if missing).
    #[arg(long, default_value = "soak")]
    topic: String,
    /// Partitions of the topic when created.
    #[arg(long, default_value_t = 12)]
    partitions: i32,
    /// Replication factor of the topic when created.
    #[arg(long, default_value_t = 3)]
    replication_factor: i16,
    /// Well-behaved connections (4 in 10 produce, 2 fetch, 2 metadata, 2 group members).
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// Connections that send half a frame and stall.
    #[arg(long, default_value_t = 200)]
    stalled: usize,
    /// Tasks that connect, send and close before the answer, in a loop.
    #[arg(long, default_value_t = 20)]
    disconnectors: usize,
    /// Consumer groups the group connections share.
    #[arg(long, default_value_t = 40)]
    groups: usize,
    /// How long the traffic runs.
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,
    /// Milliseconds each well-behaved connection waits between two requests.
    #[arg(long, default_value_t = 200)]
    pause_ms: u64,
    /// Bytes per record value (at least 10).
    #[arg(long, default_value_t = 100)]
    message_size: usize,
    /// Records per produced batch.
    #[arg(long, default_value_t = 4)]
    records_per_batch: usize,
    /// Pid of a broker process on this machine to watch (repeatable; one for a dev-cluster).
    #[arg(long = "broker-pid")]
    broker_pids: Vec<u32>,
    /// Open fds other than regular files (sockets, pipes) a broker may hold at the end above
    /// its count before the soak; log files are reported, not checked (they open when first
    /// used and stay in a bounded LRU).
    #[arg(long, default_value_t = 16)]
    fd_margin: u64,
    /// MiB a broker's RSS may grow from the end of the ramp-up to its maximum.
    #[arg(long, default_value_t = 256)]
    rss_growth_limit_mib: u64,
    /// Milliseconds between two RSS/fd samples.
    #[arg(long, default_value_t = 1000)]
    sample_ms: u64,
    /// Do not print the progress line every ten samples.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct TopicsArgs {
    /// The broker(s) to connect to: host:port[,host:port...].
    #[arg(long)]
    bootstrap_server: String,
    /// Partitions per topic.
    #[arg(long)]
    partitions: i32,
    /// How many topics.
    #[arg(long, default_value_t = 1)]
    topics: usize,
    /// Replication factor.
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
    /// Topics are named <prefix>-0, <prefix>-1, ...
    #[arg(long, default_value = "bench-topics")]
    prefix: String,
    /// Topics per CreateTopics (and DeleteTopics) request.
    #[arg(long, default_value_t = 100)]
    topics_per_request: usize,
    /// Create nothing; wait until the existing topics are all online.
    #[arg(long)]
    no_create: bool,
    /// Delete the topics at the end and time it.
    #[arg(long)]
    delete: bool,
    /// The existing 1-partition topic the Metadata and Produce probes use (created if
    /// missing).
    #[arg(long, default_value = "bench-topics-probe")]
    probe_topic: String,
    /// Milliseconds between Metadata requests for all topics while waiting.
    #[arg(long, default_value_t = 100)]
    poll_ms: u64,
    /// Seconds the probes go on once online (the idle RSS is read after).
    #[arg(long, default_value_t = 5)]
    settle_secs: u64,
    /// Pid of the broker process on this machine: report its RSS and CPU.
    #[arg(long)]
    broker_pid: Option<u32>,
    /// Give up waiting for a phase after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SignalArg {
    Kill,
    Term,
}

#[derive(Debug, Args)]
struct FailoverArgs {
    /// The brokers, the one to stop included: host:port[,host:port...].
    #[arg(long)]
    bootstrap_server: String,
    /// An existing topic.
    #[arg(long)]
    topic: String,
    /// `broker.id` of the broker to stop.
    #[arg(long)]
    broker_id: i32,
    /// Its process id on this machine.
    #[arg(long)]
    broker_pid: u32,
    /// kill: SIGKILL (a crash); term: SIGTERM (a controlled shutdown).
    #[arg(long, value_enum, default_value = "kill")]
    signal: SignalArg,
    /// Messages per second over all partitions.
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Producer acks.
    #[arg(long, value_enum, default_value = "all")]
    acks: AcksArg,
    /// Bytes per message value.
    #[arg(long, default_value_t = 100)]
    message_size: usize,
    /// A librdkafka producer property, key=value (repeatable).
    #[arg(long = "producer-property", value_name = "KEY=VALUE")]
    producer_property: Vec<String>,
    /// librdkafka producers the partitions are spread over (partition p from producer p %
    /// N): librdkafka sends one partition per ProduceRequest and a broker serves a
    /// connection's requests one at a time, so many partitions per broker need several.
    #[arg(long, default_value_t = 1)]
    producers: usize,
    /// Produce to this many partitions only, spread evenly over the topic; the metadata
    /// figure still covers every partition the broker led (default: every partition).
    #[arg(long)]
    sample: Option<usize>,
    /// Give up waiting for a phase after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AcksArg {
    #[value(name = "0")]
    Zero,
    #[value(name = "1")]
    One,
    #[value(name = "all", alias = "-1")]
    All,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// The broker(s) to connect to: host:port[,host:port...].
    #[arg(long)]
    bootstrap_server: String,
    /// The topic to write or read.
    #[arg(long)]
    topic: String,
    /// Bytes per message value.
    #[arg(long, default_value_t = 1024)]
    message_size: usize,
    /// Messages to send (produce, end-to-end) or to read (consume).
    #[arg(long)]
    messages: u64,
    /// Producer acks.
    #[arg(long, value_enum, default_value = "1")]
    acks: AcksArg,
    /// Create the topic with this many partitions if it does not exist.
    #[arg(long)]
    partitions: Option<i32>,
    /// Replication factor when the topic is created.
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
    /// Producer compression.type.
    #[arg(long, value_enum, default_value = "none")]
    compression: CompressionArg,
    /// Send at this fixed rate (messages per second) instead of as fast as possible.
    #[arg(long)]
    rate: Option<u64>,
    /// A librdkafka producer property, key=value (repeatable), e.g. linger.ms=0.
    #[arg(long = "producer-property", value_name = "KEY=VALUE")]
    producer_property: Vec<String>,
    /// A librdkafka consumer property, key=value (repeatable), e.g. fetch.wait.max.ms=10.
    #[arg(long = "consumer-property", value_name = "KEY=VALUE")]
    consumer_property: Vec<String>,
    /// Pid of the broker process on this machine: report its CPU (per GB and per request)
    /// and peak RSS over the run.
    #[arg(long)]
    broker_pid: Option<u32>,
    /// Give up when nothing is delivered or received for this many seconds.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    /// Do not print the progress line every second.
    #[arg(long)]
    quiet: bool,
}

fn parse_properties(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("property {kv:?} is not KEY=VALUE"),
        })
        .collect()
}

fn options(a: CommonArgs) -> anyhow::Result<bench::BenchOptions> {
    if a.partitions.is_some_and(|p| p < 1) {
        bail!("--partitions must be at least 1");
    }
    Ok(bench::BenchOptions {
        bootstrap_server: a.bootstrap_server,
        topic: a.topic,
        message_size: a.message_size,
        messages: a.messages,
        acks: match a.acks {
            AcksArg::Zero => bench::Acks::None,
            AcksArg::One => bench::Acks::Leader,
            AcksArg::All => bench::Acks::All,
        },
        partitions: a.partitions,
        replication_factor: a.replication_factor,
        compression: match a.compression {
            CompressionArg::None => bench::Compression::None,
            CompressionArg::Gzip => bench::Compression::Gzip,
            CompressionArg::Snappy => bench::Compression::Snappy,
            CompressionArg::Lz4 => bench::Compression::Lz4,
            CompressionArg::Zstd => bench::Compression::Zstd,
        },
        rate: a.rate,
        producer_properties: parse_properties(&a.producer_property)
            .context("--producer-property")?,
        consumer_properties: parse_properties(&a.consumer_property)
            .context("--consumer-property")?,
        broker_pid: a.broker_pid,
        progress: !a.quiet,
        timeout: Duration::from_secs(a.timeout_secs.max(1)),
    })
}

/// Runs one benchmark and prints its figures.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.mode {
        Mode::Produce(a) => {
            let report = bench::produce(&options(a)?)?;
            print!("{report}");
        }
        Mode::Consume(a) => {
            let report = bench::consume(&options(a)?)?;
            print!("{report}");
        }
        Mode::EndToEnd(a) => {
            let (produced, consumed) = bench::end_to_end(&options(a)?)?;
            print!("{produced}{consumed}");
        }
        Mode::Failover(a) => {
            let opts = bench::FailoverOptions {
                bootstrap_server: a.bootstrap_server,
                topic: a.topic,
                broker_id: a.broker_id,
                broker_pid: a.broker_pid,
                signal: match a.signal {
                    SignalArg::Kill => bench::Signal::Kill,
                    SignalArg::Term => bench::Signal::Term,
                },
                rate: a.rate.max(1),
                acks: match a.acks {
                    AcksArg::Zero => bench::Acks::None,
                    AcksArg::One => bench::Acks::Leader,
                    AcksArg::All => bench::Acks::All,
                },
                message_size: a.message_size,
                producer_properties: parse_properties(&a.producer_property)
                    .context("--producer-property")?,
                producers: a.producers.max(1),
                sample: a.sample,
                timeout: Duration::from_secs(a.timeout_secs.max(1)),
            };
            print!("{}", bench::failover(&opts)?);
        }
        Mode::Topics(a) => {
            if a.partitions < 1 || a.topics < 1 || a.replication_factor < 1 {
                bail!("--partitions, --topics and --replication-factor must be at least 1");
            }
            let opts = bench::TopicsOptions {
                bootstrap_server: a.bootstrap_server,
                prefix: a.prefix,
                topics: a.topics,
                partitions: a.partitions,
                replication_factor: a.replication_factor,
                topics_per_request: a.topics_per_request.max(1),
                create: !a.no_create,
                delete: a.delete,
                probe_topic: a.probe_topic,
                poll_interval: Duration::from_millis(a.poll_ms.max(1)),
                settle: Duration::from_secs(a.settle_secs),
                broker_pid: a.broker_pid,
                timeout: Duration::from_secs(a.timeout_secs.max(1)),
            };
            print!("{}", bench::topics(&opts)?);
        }
        Mode::Connect(a) => connect(a)?,
        Mode::Soak(a) => {
            if a.partitions < 1 || a.replication_factor < 1 || a.connections < 10 {
                bail!("--partitions and --replication-factor must be at least 1, --connections at least 10");
            }
            let opts = bench::SoakOptions {
                bootstrap_server: a.bootstrap_server,
                topic: a.topic,
                partitions: a.partitions,
                replication_factor: a.replication_factor,
                connections: a.connections,
                stalled: a.stalled,
                disconnectors: a.disconnectors,
                groups: a.groups.max(1),
                duration: Duration::from_secs(a.duration_secs.max(1)),
                pause: Duration::from_millis(a.pause_ms),
                message_size: a.message_size,
                records_per_batch: a.records_per_batch.max(1),
                broker_pids: a.broker_pids,
                fd_margin: a.fd_margin,
                rss_growth_limit_mib: a.rss_growth_limit_mib,
                sample_interval: Duration::from_millis(a.sample_ms.max(10)),
                progress: !a.quiet,
            };
            let report = bench::soak(&opts)?;
            print!("{report}");
            if !report.failures.is_empty() {
                for failure in &report.failures {
                    eprintln!("soak failed: {failure}");
                }
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_split_at_the_first_equals() {
        let p = parse_properties(&["linger.ms=0".into(), "a=b=c".into()]).expect("valid");
        assert_eq!(
            p,
            vec![
                ("linger.ms".to_string(), "0".to_string()),
                ("a".to_string(), "b=c".to_string())
            ]
        );
        assert!(parse_properties(&["novalue".into()]).is_err());
        assert!(parse_properties(&["=x".into()]).is_err());
    }
}
