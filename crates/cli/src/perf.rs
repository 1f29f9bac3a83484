//! `gregor producer-perf-test` and `gregor consumer-perf-test`: Kafka's
//! `kafka-producer-perf-test.sh` and `kafka-consumer-perf-test.sh` in the default build, with
//! their flags and output lines. They drive the same Produce / Fetch path as the console
//! tools ([`Cluster`]); the librdkafka load generator stays `gregor bench` (build feature
//! `bench`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use clap::Args;
use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::Compression;

use crate::cluster::{self, Cluster};

/// `key=value` pairs and a properties file, the later winning.
fn props(pairs: &[String], file: Option<&PathBuf>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        out.extend(client::parse_properties(&text).map_err(|e| e.to_string())?);
    }
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("Invalid property '{pair}': expected key=value"))?;
        out.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    Ok(out)
}

/// The flags of `kafka-producer-perf-test.sh`.
#[derive(Debug, Clone, Args)]
#[command(about = "Measure produce throughput and latency (kafka-producer-perf-test.sh).")]
pub struct ProducerPerfArgs {
    /// Produce messages to this topic.
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// Number of messages to produce.
    #[arg(long, value_name = "NUM-RECORDS")]
    pub num_records: Option<u64>,
    /// Message size in bytes. Note that you must provide exactly one of --record-size or
    /// --payload-file.
    #[arg(long, value_name = "RECORD-SIZE")]
    pub record_size: Option<usize>,
    /// File to read the message payloads from (one per --payload-delimiter).
    #[arg(long, value_name = "PAYLOAD-FILE")]
    pub payload_file: Option<PathBuf>,
    /// Provides delimiter to be used when --payload-file is provided.
    #[arg(long, value_name = "PAYLOAD-DELIMITER", default_value = "\\n")]
    pub payload_delimiter: String,
    /// Throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set
    /// this to -1 to disable throttling.
    #[arg(long, value_name = "THROUGHPUT", allow_negative_numbers = true)]
    pub throughput: Option<f64>,
    /// Kafka producer related configuration properties like bootstrap.servers, client.id,
    /// acks, batch.size, compression.type.
    #[arg(long, value_name = "PROP-NAME=PROP-VALUE", num_args = 1..)]
    pub producer_props: Vec<String>,
    /// Producer config properties file.
    #[arg(long = "producer.config", value_name = "CONFIG-FILE")]
    pub producer_config: Option<PathBuf>,
    /// The server(s) to connect to (instead of bootstrap.servers in --producer-props).
    #[arg(long, value_name = "BOOTSTRAP-SERVER")]
    pub bootstrap_server: Option<String>,
    /// Property file with the client's security settings.
    #[arg(long, alias = "admin.config", value_name = "CONFIG-FILE")]
    pub command_config: Option<PathBuf>,
    /// Print out metrics at the end of the test (accepted; Gregor prints none).
    #[arg(long)]
    pub print_metrics: bool,
}

/// Kafka's `Stats`: a reporting window and the whole run's latencies.
struct Stats {
    start: Instant,
    count: u64,
    bytes: u64,
    max_latency: u32,
    total_latency: u64,
    latencies: Vec<u32>,
    window_start: Instant,
    window_count: u64,
    window_bytes: u64,
    window_max: u32,
    window_total: u64,
}

impl Stats {
    fn new() -> Stats {
        let now = Instant::now();
        Stats {
            start: now,
            count: 0,
            bytes: 0,
            max_latency: 0,
            total_latency: 0,
            latencies: Vec::new(),
            window_start: now,
            window_count: 0,
            window_bytes: 0,
            window_max: 0,
            window_total: 0,
        }
    }

    fn record(&mut self, latency_ms: u32, bytes: usize) {
        self.count += 1;
        self.bytes += bytes as u64;
        self.total_latency += u64::from(latency_ms);
        self.max_latency = self.max_latency.max(latency_ms);
        self.latencies.push(latency_ms);
        self.window_count += 1;
        self.window_bytes += bytes as u64;
        self.window_total += u64::from(latency_ms);
        self.window_max = self.window_max.max(latency_ms);
        if self.window_start.elapsed() >= Duration::from_secs(5) {
            self.print_window();
        }
    }

    fn print_window(&mut self) {
        let secs = self.window_start.elapsed().as_secs_f64().max(1e-9);
        println!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
            self.window_count,
            self.window_count as f64 / secs,
            self.window_bytes as f64 / secs / (1024.0 * 1024.0),
            self.window_total as f64 / self.window_count.max(1) as f64,
            f64::from(self.window_max)
        );
        self.window_start = Instant::now();
        self.window_count = 0;
        self.window_bytes = 0;
        self.window_total = 0;
        self.window_max = 0;
    }

    fn final_line(&mut self) -> String {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        self.latencies.sort_unstable();
        let pct = |p: f64| -> u32 {
            if self.latencies.is_empty() {
                return 0;
            }
            let i = ((p * self.latencies.len() as f64) as usize).min(self.latencies.len() - 1);
            self.latencies[i]
        };
        format!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
            self.count,
            self.count as f64 / secs,
            self.bytes as f64 / secs / (1024.0 * 1024.0),
            self.total_latency as f64 / self.count.max(1) as f64,
            f64::from(self.max_latency),
            pct(0.5),
            pct(0.95),
            pct(0.99),
            pct(0.999)
        )
    }
}

/// Runs producer-perf-test; returns the process exit code.
pub fn run_producer(args: ProducerPerfArgs) -> anyhow::Result<ExitCode> {
    let usage = |message: &str| {
        eprintln!("{message}");
        Ok(ExitCode::from(1))
    };
    let (Some(topic), Some(num_records), Some(throughput)) =
        (args.topic.clone(), args.num_records, args.throughput)
    else {
        return usage("argument --topic, --num-records and --throughput are required");
    };
    if args.record_size.is_some() == args.payload_file.is_some() {
        return usage("one of the arguments --record-size --payload-file is required");
    }
    if args.producer_props.is_empty() && args.producer_config.is_none() {
        return usage("Either --producer-props or --producer.config must be specified.");
    }
    let config = match props(&args.producer_props, args.producer_config.as_ref()) {
        Ok(c) => c,
        Err(m) => return usage(&m),
    };
    let Some(bootstrap) = args
        .bootstrap_server
        .clone()
        .or_else(|| config.get("bootstrap.servers").cloned())
    else {
        return usage(
            "Missing required configuration \"bootstrap.servers\" which has no default value.",
        );
    };
    let payloads: Vec<Vec<u8>> = match (&args.payload_file, args.record_size) {
        (Some(path), _) => {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => {
                    return usage(&format!(
                        "File does not exist or empty file provided. {}: {e}",
                        path.display()
                    ))
                }
            };
            let delimiter = args
                .payload_delimiter
                .replace("\\n", "\n")
                .replace("\\t", "\t");
            let list: Vec<Vec<u8>> = text
                .split(delimiter.as_str())
                .filter(|p| !p.is_empty())
                .map(|p| p.as_bytes().to_vec())
                .collect();
            if list.is_empty() {
                return usage("File does not exist or empty file provided.");
            }
            list
        }
        (None, Some(size)) => vec![(0..size).map(|_| rand::random_range(b'A'..=b'Z')).collect()],
        (None, None) => Vec::new(),
    };
    let acks: i16 = match config.get("acks").map(String::as_str).unwrap_or("all") {
        "all" | "-1" => -1,
        _ => 1,
    };
    let batch_bytes: usize = config
        .get("batch.size")
        .and_then(|v| v.parse().ok())
        .unwrap_or(16384)
        .max(1);
    let compression = config
        .get("compression.type")
        .and_then(|c| Compression::from_config(c))
        .unwrap_or(Compression::None);
    let client_id = config
        .get("client.id")
        .cloned()
        .unwrap_or_else(|| "perf-producer-client".to_owned());
    let security = args
        .command_config
        .as_deref()
        .or(args.producer_config.as_deref());
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(&bootstrap, &client_id, security)?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let partitions = match cluster.leaders.get(&topic) {
            Some(p) => p.len() as i32,
            None => bail!("org.apache.kafka.common.errors.TimeoutException: Topic {topic} not present in metadata after 60000 ms."),
        };
        let mut stats = Stats::new();
        let started = Instant::now();
        let mut sent = 0u64;
        let mut partition = 0i32;
        while sent < num_records {
            let mut spec = BatchSpec::new(0);
            spec.compression = compression;
            let mut builder = BatchBuilder::new(spec);
            let mut sizes = Vec::new();
            let timestamp = cluster::now_ms();
            while sent + (sizes.len() as u64) < num_records
                && (sizes.is_empty() || builder.records_size() < batch_bytes)
            {
                let payload = &payloads[(sent as usize + sizes.len()) % payloads.len()];
                builder.push(&NewRecord {
                    offset: sizes.len() as i64,
                    timestamp,
                    key: None,
                    value: Some(payload),
                    headers: &[],
                });
                sizes.push(payload.len());
                if throughput > 0.0 {
                    break; // throttled: one record per send keeps the rate even
                }
            }
            let sent_at = Instant::now();
            cluster
                .produce(&topic, partition, Bytes::from(builder.build()), acks, 30_000)
                .await?;
            let latency = u32::try_from(sent_at.elapsed().as_millis()).unwrap_or(u32::MAX);
            for size in &sizes {
                stats.record(latency, *size);
            }
            sent += sizes.len() as u64;
            partition = (partition + 1) % partitions.max(1);
            if throughput > 0.0 {
                // ThroughputThrottler: sleep until the rate is back under the target.
                let due = Duration::from_secs_f64(sent as f64 / throughput);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
        }
        anyhow::Ok(stats.final_line())
    });
    match result {
        Ok(line) => {
            println!("{line}");
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The flags of `kafka-consumer-perf-test.sh`.
#[derive(Debug, Clone, Args)]
#[command(about = "Measure consume throughput (kafka-consumer-perf-test.sh).")]
pub struct ConsumerPerfArgs {
    /// REQUIRED: The server(s) to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// REQUIRED: The topic to consume from.
    #[arg(long, value_name = "topic")]
    pub topic: Option<String>,
    /// REQUIRED: The number of messages to send or consume.
    #[arg(long, value_name = "count")]
    pub messages: Option<u64>,
    /// The group id to consume on (accepted; the partitions are read directly).
    #[arg(long, value_name = "gid")]
    pub group: Option<String>,
    /// The amount of data to fetch in a single request.
    #[arg(long, value_name = "size", default_value_t = 1024 * 1024)]
    pub fetch_size: i32,
    /// If the consumer does not already have an established offset to consume from, start
    /// with the latest message present in the log rather than the earliest message.
    #[arg(long)]
    pub from_latest: bool,
    /// The maximum allowed time in milliseconds between returned records.
    #[arg(long, value_name = "milliseconds", default_value_t = 10_000)]
    pub timeout: u64,
    /// If set, stats are reported for each reporting interval as configured by
    /// reporting-interval.
    #[arg(long)]
    pub show_detailed_stats: bool,
    /// Interval in milliseconds at which to print progress info.
    #[arg(long, value_name = "interval_ms", default_value_t = 5000)]
    pub reporting_interval: u64,
    /// If set, skips printing the header for the stats.
    #[arg(long)]
    pub hide_header: bool,
    /// Consumer config properties file.
    #[arg(long = "consumer.config", value_name = "config file")]
    pub consumer_config: Option<PathBuf>,
    /// Property file with the client's security settings.
    #[arg(long, alias = "admin.config", value_name = "config file")]
    pub command_config: Option<PathBuf>,
    /// Print out the metrics (accepted; Gregor prints none).
    #[arg(long)]
    pub print_metrics: bool,
}

/// Kafka's default `yyyy-MM-dd HH:mm:ss:SSS` (UTC).
fn format_time(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}:{:03}",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Runs consumer-perf-test; returns the process exit code.
pub fn run_consumer(args: ConsumerPerfArgs) -> anyhow::Result<ExitCode> {
    let usage = |message: &str| {
        eprintln!("{message}");
        Ok(ExitCode::from(1))
    };
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        return usage("Missing required argument \"[bootstrap-server]\"");
    };
    let Some(topic) = args.topic.clone() else {
        return usage("Missing required argument \"[topic]\"");
    };
    let Some(wanted) = args.messages else {
        return usage("Missing required argument \"[messages]\"");
    };
    if !args.hide_header {
        let extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
        if args.show_detailed_stats {
            println!("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}");
        } else {
            println!("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}");
        }
    }
    let security = args
        .command_config
        .as_deref()
        .or(args.consumer_config.as_deref());
    let start_ms = cluster::now_ms();
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(&bootstrap, "perf-consumer-client", security)?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let Some(partitions) = cluster.leaders.get(&topic).cloned() else {
            bail!("Topic {topic} does not exist");
        };
        let all: std::collections::BTreeSet<(String, i32)> =
            partitions.keys().map(|p| (topic.clone(), *p)).collect();
        let mut positions = cluster
            .list_offsets(&all, if args.from_latest { -1 } else { -2 })
            .await?;
        let (mut messages, mut bytes) = (0u64, 0u64);
        let (mut last_messages, mut last_bytes) = (0u64, 0u64);
        let mut last_report = Instant::now();
        let mut last_record = Instant::now();
        let mut timed_out = false;
        'outer: while messages < wanted {
            if last_record.elapsed() > Duration::from_millis(args.timeout) {
                timed_out = true;
                break;
            }
            let keys: Vec<(String, i32)> = positions.keys().cloned().collect();
            for tp in keys {
                let position = positions[&tp];
                let fetched = cluster
                    .fetch(&tp.0, tp.1, position, args.fetch_size, 100, 0)
                    .await?;
                let mut at = 0usize;
                let mut next = position;
                while at < fetched.records.len() {
                    let Ok(header) = records::read_batch_header_at(&fetched.records, at) else {
                        break;
                    };
                    let batch = &fetched.records[at..at + header.size_in_bytes()];
                    at += header.size_in_bytes();
                    if header.is_control() || header.last_offset() < position {
                        next = next.max(header.last_offset() + 1);
                        continue;
                    }
                    let section = records::records_section(batch)?;
                    for r in records::record::records(&section, header.records_count)? {
                        let offset = header.base_offset + i64::from(r.offset_delta);
                        if offset < position {
                            continue;
                        }
                        if messages >= wanted {
                            break;
                        }
                        messages += 1;
                        bytes +=
                            (r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len)) as u64;
                        next = offset + 1;
                        last_record = Instant::now();
                    }
                }
                positions.insert(tp, next);
                if args.show_detailed_stats
                    && last_report.elapsed() >= Duration::from_millis(args.reporting_interval)
                {
                    let secs = last_report.elapsed().as_secs_f64();
                    let mb = (bytes - last_bytes) as f64 / (1024.0 * 1024.0);
                    println!(
                        "{}, 0, {:.4}, {:.4}, {}, {:.4}, 0, {}, {:.4}, {:.4}",
                        format_time(cluster::now_ms()),
                        bytes as f64 / (1024.0 * 1024.0),
                        mb / secs,
                        messages,
                        (messages - last_messages) as f64 / secs,
                        last_report.elapsed().as_millis(),
                        mb / secs,
                        (messages - last_messages) as f64 / secs
                    );
                    last_report = Instant::now();
                    last_messages = messages;
                    last_bytes = bytes;
                }
                if messages >= wanted {
                    break 'outer;
                }
            }
        }
        anyhow::Ok((messages, bytes, timed_out))
    });
    let end_ms = cluster::now_ms();
    match result {
        Ok((messages, bytes, timed_out)) => {
            if timed_out {
                println!("WARNING: Exiting before consuming the expected number of messages: timeout ({} ms) exceeded. You can use the --timeout option to increase the timeout.", args.timeout);
            }
            if !args.show_detailed_stats {
                let secs = ((end_ms - start_ms) as f64 / 1000.0).max(1e-9);
                let mb = bytes as f64 / (1024.0 * 1024.0);
                let fetch_ms = end_ms - start_ms;
                let fetch_secs = (fetch_ms as f64 / 1000.0).max(1e-9);
                println!(
                    "{}, {}, {:.4}, {:.4}, {}, {:.4}, 0, {fetch_ms}, {:.4}, {:.4}",
                    format_time(start_ms),
                    format_time(end_ms),
                    mb,
                    mb / secs,
                    messages,
                    messages as f64 / secs,
                    mb / fetch_secs,
                    messages as f64 / fetch_secs
                );
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
    fn times_print_in_kafkas_default_format() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00:000");
        assert_eq!(format_time(1_700_000_000_123), "2023-11-14 22:13:20:123");
    }

    #[test]
    fn the_final_line_has_kafkas_percentiles() {
        let mut stats = Stats::new();
        for ms in 1..=100 {
            stats.record(ms, 10);
        }
        let line = stats.final_line();
        assert!(line.starts_with("100 records sent, "), "{line}");
        assert!(
            line.ends_with(" ms avg latency, 100.00 ms max latency, 51 ms 50th, 96 ms 95th, 100 ms 99th, 100 ms 99.9th."),
            "{line}"
        );
        assert!(line.contains("50.50 ms avg latency"), "{line}");
    }
}
