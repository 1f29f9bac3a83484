//! `gregor console-producer` and `gregor console-consumer`: Kafka's
//! `kafka-console-producer.sh` (lines of stdin as records, LineMessageReader's `parse.key`,
//! `parse.headers` and separators) and `kafka-console-consumer.sh` (DefaultMessageFormatter's
//! `print.*` properties, `--from-beginning`, `--offset`, `--partition`, `--group` with the
//! classic group protocol and commits, `--max-messages`, `--timeout-ms`, `--isolation-level`).
//!
//! Both talk to partition leaders directly through [`Cluster`] (Produce, Fetch, ListOffsets,
//! and JoinGroup/SyncGroup/Heartbeat/OffsetCommit/LeaveGroup for a group).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bytes::Bytes;
use clap::Args;
use group_coordinator::consumer_protocol;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetFetchRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::Compression;

use crate::cluster::{self, Cluster};

/// `key=value` pairs of a `--property`-like flag and of a properties file.
fn properties(
    pairs: &[String],
    file: Option<&PathBuf>,
    flag: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let parsed = client::parse_properties(&text).map_err(|e| e.to_string())?;
        out.extend(parsed);
    }
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("Invalid {flag} '{pair}': expected key=value"))?;
        out.insert(key.trim().to_owned(), value.to_owned());
    }
    Ok(out)
}

fn flag_on(props: &BTreeMap<String, String>, key: &str, default: bool) -> bool {
    props
        .get(key)
        .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"))
}

/// Kafka's `Utils.murmur2`, which the default partitioner hashes keys with.
fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len() as u32;
    let mut h = SEED ^ length;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for a keyed record.
fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

// ---------------------------------------------------------------------------------------
// console-producer
// ---------------------------------------------------------------------------------------

/// The flags of `kafka-console-producer.sh`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Send lines of standard input as records to a topic (kafka-console-producer.sh)."
)]
pub struct ConsoleProducerArgs {
    /// REQUIRED: The server(s) to connect to. The broker list string in the form
    /// HOST1:PORT1,HOST2:PORT2.
    #[arg(long, alias = "broker-list", value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// REQUIRED: The topic name to produce messages to.
    #[arg(long, value_name = "topic")]
    pub topic: Option<String>,
    /// The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'. If
    /// specified without value, then it defaults to 'gzip'.
    #[arg(long, value_name = "compression-codec", num_args = 0..=1, default_missing_value = "gzip")]
    pub compression_codec: Option<String>,
    /// Number of messages to send in a single batch if they are not being sent
    /// synchronously.
    #[arg(long, value_name = "size", default_value_t = 16384)]
    pub batch_size: usize,
    /// If set message send requests to the brokers are synchronously, one at a time as they
    /// arrive.
    #[arg(long)]
    pub sync: bool,
    /// The required `acks` of the producer requests.
    #[arg(
        long,
        value_name = "request required acks",
        default_value = "-1",
        allow_hyphen_values = true
    )]
    pub request_required_acks: String,
    /// The ack timeout of the producer requests.
    #[arg(long, value_name = "request timeout ms", default_value_t = 1500)]
    pub request_timeout_ms: i32,
    /// Accepted for kafka-console-producer.sh compatibility (linger time in ms).
    #[arg(long, value_name = "timeout_ms", default_value_t = 1000)]
    pub timeout: u64,
    /// A mechanism to pass user-defined properties in the form key=value to the message
    /// reader: parse.key, key.separator, parse.headers, headers.delimiter,
    /// headers.separator, headers.key.separator, null.marker, ignore.error.
    #[arg(long, value_name = "prop")]
    pub property: Vec<String>,
    /// Config properties file for the message reader.
    #[arg(long, value_name = "config file")]
    pub reader_config: Option<PathBuf>,
    /// A mechanism to pass user-defined properties in the form key=value to the producer
    /// (acks, compression.type, client.id; security settings go to --command-config).
    #[arg(long, value_name = "producer_prop")]
    pub producer_property: Vec<String>,
    /// Producer config properties file (security.protocol, sasl.*, ssl.* and producer keys).
    #[arg(long = "producer.config", value_name = "config file")]
    pub producer_config: Option<PathBuf>,
    /// Property file containing configs to be passed to the client (security.protocol,
    /// sasl.*, ssl.*).
    #[arg(long, alias = "admin.config", value_name = "config file")]
    pub command_config: Option<PathBuf>,
}

/// LineMessageReader's settings.
#[derive(Debug, Clone)]
struct LineReader {
    parse_key: bool,
    key_separator: String,
    parse_headers: bool,
    headers_delimiter: String,
    headers_separator: String,
    headers_key_separator: String,
    null_marker: Option<String>,
    ignore_error: bool,
}

/// One line read as a record: key, value, headers.
type LineRecord = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

impl LineReader {
    fn new(props: &BTreeMap<String, String>) -> Result<LineReader, String> {
        let get = |k: &str, d: &str| props.get(k).cloned().unwrap_or_else(|| d.to_owned());
        let reader = LineReader {
            parse_key: flag_on(props, "parse.key", false),
            key_separator: get("key.separator", "\t"),
            parse_headers: flag_on(props, "parse.headers", false),
            headers_delimiter: get("headers.delimiter", "\t"),
            headers_separator: get("headers.separator", ","),
            headers_key_separator: get("headers.key.separator", ":"),
            null_marker: props.get("null.marker").cloned(),
            ignore_error: flag_on(props, "ignore.error", false),
        };
        if reader.headers_delimiter == reader.headers_separator {
            return Err("headers.delimiter and headers.separator may not be equal".into());
        }
        if reader.headers_delimiter == reader.headers_key_separator {
            return Err("headers.delimiter and headers.key.separator may not be equal".into());
        }
        if reader.headers_separator == reader.headers_key_separator {
            return Err("headers.separator and headers.key.separator may not be equal".into());
        }
        if let Some(null) = &reader.null_marker {
            for (name, other) in [
                ("key.separator", &reader.key_separator),
                ("headers.separator", &reader.headers_separator),
                ("headers.delimiter", &reader.headers_delimiter),
                ("headers.key.separator", &reader.headers_key_separator),
            ] {
                if null == other {
                    return Err(format!("null.marker and {name} may not be equal"));
                }
            }
        }
        Ok(reader)
    }

    fn part<'a>(
        &self,
        enabled: bool,
        line: &'a str,
        start: usize,
        demarcation: &str,
        name: &str,
        number: usize,
    ) -> Result<Option<&'a str>, String> {
        if !enabled {
            return Ok(None);
        }
        match line.get(start..).and_then(|rest| rest.find(demarcation)) {
            Some(index) => Ok(Some(&line[start..start + index])),
            None if self.ignore_error => Ok(None),
            None => Err(format!("No {name} found on line number {number}: '{line}'")),
        }
    }

    fn is_null(&self, text: &str) -> bool {
        self.null_marker.as_deref() == Some(text)
    }

    /// LineMessageReader's reading of line `number` (from 1).
    fn read(&self, line: &str, number: usize) -> Result<LineRecord, String> {
        let headers = self.part(
            self.parse_headers,
            line,
            0,
            &self.headers_delimiter,
            "headers delimiter",
            number,
        )?;
        let header_offset = headers.map_or(0, |h| h.len() + self.headers_delimiter.len());
        let key = self.part(
            self.parse_key,
            line,
            header_offset,
            &self.key_separator,
            "key separator",
            number,
        )?;
        let key_offset = key.map_or(0, |k| k.len() + self.key_separator.len());
        let value = line.get(header_offset + key_offset..).unwrap_or("");
        let mut parsed_headers = Vec::new();
        if let Some(headers) = headers.filter(|h| !self.is_null(h)) {
            for pair in headers.split(self.headers_separator.as_str()) {
                match pair.find(self.headers_key_separator.as_str()) {
                    Some(i) => {
                        let header_key = &pair[..i];
                        if self.is_null(header_key) {
                            return Err(format!(
                                "Header keys should not be equal to the null marker '{}' as they can't be null",
                                self.null_marker.as_deref().unwrap_or("")
                            ));
                        }
                        let v = &pair[i + self.headers_key_separator.len()..];
                        parsed_headers.push((
                            header_key.to_owned(),
                            (!self.is_null(v)).then(|| v.as_bytes().to_vec()),
                        ));
                    }
                    None if self.ignore_error => parsed_headers.push((pair.to_owned(), None)),
                    None => {
                        return Err(format!(
                            "No header key separator found in pair '{pair}' on line number {number}"
                        ))
                    }
                }
            }
        }
        Ok((
            key.filter(|k| !self.is_null(k))
                .map(|k| k.as_bytes().to_vec()),
            (!self.is_null(value)).then(|| value.as_bytes().to_vec()),
            parsed_headers,
        ))
    }
}

/// One batch of `records` for a partition.
fn build_batch(records: &[LineRecord], compression: Compression) -> Bytes {
    let mut spec = BatchSpec::new(0);
    spec.compression = compression;
    let mut builder = BatchBuilder::new(spec);
    let timestamp = cluster::now_ms();
    for (i, (key, value, headers)) in records.iter().enumerate() {
        let headers: Vec<(&[u8], Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        builder.push(&NewRecord {
            offset: i as i64,
            timestamp,
            key: key.as_deref(),
            value: value.as_deref(),
            headers: &headers,
        });
    }
    Bytes::from(builder.build())
}

/// Runs console-producer; returns the process exit code.
pub fn run_producer(args: ConsoleProducerArgs) -> anyhow::Result<ExitCode> {
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
    let reader_props = match properties(&args.property, args.reader_config.as_ref(), "--property") {
        Ok(p) => p,
        Err(message) => return usage(&message),
    };
    let producer_props = match properties(
        &args.producer_property,
        args.producer_config.as_ref(),
        "--producer-property",
    ) {
        Ok(p) => p,
        Err(message) => return usage(&message),
    };
    let reader = match LineReader::new(&reader_props) {
        Ok(r) => r,
        Err(message) => {
            return usage(&format!(
                "org.apache.kafka.common.KafkaException: {message}"
            ))
        }
    };
    let codec_name = args
        .compression_codec
        .clone()
        .or_else(|| producer_props.get("compression.type").cloned())
        .unwrap_or_else(|| "none".to_owned());
    let compression = match codec_name.as_str() {
        "none" => Compression::None,
        other => match Compression::from_config(other) {
            Some(c) => c,
            None => {
                return usage(&format!(
                    "Invalid value {other} for configuration compression.type: String must be one of: none, gzip, snappy, lz4, zstd"
                ))
            }
        },
    };
    let acks_text = producer_props
        .get("acks")
        .cloned()
        .unwrap_or_else(|| args.request_required_acks.clone());
    let acks: i16 = match acks_text.trim() {
        "all" | "-1" => -1,
        "1" => 1,
        // A broker answers no acks=0 request; this client waits for the leader instead.
        "0" => 1,
        other => {
            return usage(&format!(
                "Invalid value {other} for configuration acks: String must be one of: all, -1, 0, 1"
            ))
        }
    };
    let max_batch = if args.sync { 1 } else { 500 };
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<std::io::Result<String>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let failed = line.is_err();
            if sender.send(line).is_err() || failed {
                break;
            }
        }
    });
    let client_id = producer_props
        .get("client.id")
        .cloned()
        .unwrap_or_else(|| "console-producer".to_owned());
    let security_file = args
        .command_config
        .as_deref()
        .or(args.producer_config.as_deref());
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(&bootstrap, &client_id, security_file)?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let partitions = match cluster.leaders.get(&topic) {
            Some(p) => p.len() as i32,
            None => {
                // Kafka's producer waits for the topic's metadata (auto-creation may make it).
                let mut found = 0;
                for _ in 0..30 {
                    cluster.refresh().await?;
                    if let Some(p) = cluster.leaders.get(&topic) {
                        found = p.len() as i32;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                if found == 0 {
                    bail!("org.apache.kafka.common.errors.TimeoutException: Topic {topic} not present in metadata after 3000 ms.");
                }
                found
            }
        };
        let mut number = 0usize;
        let mut sticky = rand::random_range(0..partitions.max(1));
        loop {
            // Block for one line, then take what else is already there.
            let Some(first) = receiver.recv().await else {
                break;
            };
            let mut lines = vec![first?];
            while lines.len() < max_batch {
                match receiver.try_recv() {
                    Ok(line) => lines.push(line?),
                    Err(_) => break,
                }
            }
            let mut by_partition: BTreeMap<i32, Vec<LineRecord>> = BTreeMap::new();
            for line in lines {
                number += 1;
                let record = reader
                    .read(&line, number)
                    .map_err(|m| anyhow!("org.apache.kafka.common.KafkaException: {m}"))?;
                let partition = match &record.0 {
                    Some(key) => partition_for_key(key, partitions),
                    None => sticky,
                };
                by_partition.entry(partition).or_default().push(record);
            }
            for (partition, records) in by_partition {
                cluster
                    .produce(
                        &topic,
                        partition,
                        build_batch(&records, compression),
                        acks,
                        args.request_timeout_ms.max(1),
                    )
                    .await
                    .map_err(|e| {
                        anyhow!("Error when sending message to topic {topic}: {e:#}")
                    })?;
            }
            sticky = rand::random_range(0..partitions.max(1));
        }
        anyhow::Ok(())
    });
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("{err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

// ---------------------------------------------------------------------------------------
// console-consumer
// ---------------------------------------------------------------------------------------

/// The flags of `kafka-console-consumer.sh`.
#[derive(Debug, Clone, Args)]
#[command(about = "Print a topic's records to standard output (kafka-console-consumer.sh).")]
pub struct ConsoleConsumerArgs {
    /// REQUIRED: The server(s) to connect to.
    #[arg(long, value_name = "server to connect to")]
    pub bootstrap_server: Option<String>,
    /// The topic to consume on.
    #[arg(long, value_name = "topic")]
    pub topic: Option<String>,
    /// Regular expression specifying list of topics to include for consumption.
    #[arg(long, value_name = "Java regex (String)")]
    pub include: Option<String>,
    /// The partition to consume from. Consumption starts from the end of the partition
    /// unless '--offset' is specified.
    #[arg(long, value_name = "partition")]
    pub partition: Option<i32>,
    /// The offset to start consuming from (a non-negative number), or 'earliest' which
    /// means from beginning, or 'latest' which means from end.
    #[arg(long, value_name = "consume offset", allow_hyphen_values = true)]
    pub offset: Option<String>,
    /// If the consumer does not already have an established offset to consume from, start
    /// with the earliest message present in the log rather than the latest message.
    #[arg(long)]
    pub from_beginning: bool,
    /// The consumer group id of the consumer.
    #[arg(long, value_name = "consumer group id")]
    pub group: Option<String>,
    /// The maximum number of messages to consume before exiting. If not set, consumption
    /// is continual.
    #[arg(long, value_name = "num_messages")]
    pub max_messages: Option<u64>,
    /// If specified, exit if no message is available for consumption for the specified
    /// interval.
    #[arg(long, value_name = "timeout_ms")]
    pub timeout_ms: Option<u64>,
    /// The properties to initialize the message formatter: print.timestamp, print.key,
    /// print.offset, print.partition, print.headers, print.value, key.separator,
    /// line.separator, headers.separator, null.literal.
    #[arg(long, value_name = "prop")]
    pub property: Vec<String>,
    /// The formatter class: only Kafka's DefaultMessageFormatter.
    #[arg(long, value_name = "class")]
    pub formatter: Option<String>,
    /// Set to read_committed in order to filter out transactional messages which are not
    /// committed. Set to read_uncommitted to read all messages.
    #[arg(
        long,
        value_name = "isolation-level",
        default_value = "read_uncommitted"
    )]
    pub isolation_level: String,
    /// A mechanism to pass user-defined properties in the form key=value to the consumer
    /// (auto.offset.reset, group.id, client.id, isolation.level).
    #[arg(long, value_name = "consumer_prop")]
    pub consumer_property: Vec<String>,
    /// Consumer config properties file (security.protocol, sasl.*, ssl.* and consumer
    /// keys).
    #[arg(long = "consumer.config", value_name = "config file")]
    pub consumer_config: Option<PathBuf>,
    /// Property file containing configs to be passed to the client (security.protocol,
    /// sasl.*, ssl.*).
    #[arg(long, alias = "admin.config", value_name = "config file")]
    pub command_config: Option<PathBuf>,
    /// If there is an error when processing a message, skip it instead of halt.
    #[arg(long)]
    pub skip_message_on_error: bool,
    /// Accepted for compatibility: keys are printed as bytes.
    #[arg(long, value_name = "deserializer for key")]
    pub key_deserializer: Option<String>,
    /// Accepted for compatibility: values are printed as bytes.
    #[arg(long, value_name = "deserializer for values")]
    pub value_deserializer: Option<String>,
}

/// DefaultMessageFormatter's settings.
#[derive(Debug, Clone)]
struct Formatter {
    timestamp: bool,
    key: bool,
    offset: bool,
    partition: bool,
    headers: bool,
    value: bool,
    key_separator: Vec<u8>,
    line_separator: Vec<u8>,
    headers_separator: Vec<u8>,
    null_literal: Vec<u8>,
}

impl Formatter {
    fn new(props: &BTreeMap<String, String>) -> Formatter {
        let bytes = |k: &str, d: &str| {
            props
                .get(k)
                .map_or_else(|| d.as_bytes().to_vec(), |v| unescape(v).into_bytes())
        };
        Formatter {
            timestamp: flag_on(props, "print.timestamp", false),
            key: flag_on(props, "print.key", false),
            offset: flag_on(props, "print.offset", false),
            partition: flag_on(props, "print.partition", false),
            headers: flag_on(props, "print.headers", false),
            value: flag_on(props, "print.value", true),
            key_separator: bytes("key.separator", "\t"),
            line_separator: bytes("line.separator", "\n"),
            headers_separator: bytes("headers.separator", ","),
            null_literal: bytes("null.literal", "null"),
        }
    }

    /// DefaultMessageFormatter's `writeTo`.
    fn write(&self, out: &mut Vec<u8>, record: &Consumed) {
        let sep = |out: &mut Vec<u8>, column: bool| {
            out.extend_from_slice(if column {
                &self.key_separator
            } else {
                &self.line_separator
            });
        };
        if self.timestamp {
            out.extend_from_slice(
                format!("{}:{}", record.timestamp_type, record.timestamp).as_bytes(),
            );
            sep(
                out,
                self.partition || self.offset || self.headers || self.key || self.value,
            );
        }
        if self.partition {
            out.extend_from_slice(format!("Partition:{}", record.partition).as_bytes());
            sep(out, self.offset || self.headers || self.key || self.value);
        }
        if self.offset {
            out.extend_from_slice(format!("Offset:{}", record.offset).as_bytes());
            sep(out, self.headers || self.key || self.value);
        }
        if self.headers {
            if record.headers.is_empty() {
                out.extend_from_slice(b"NO_HEADERS");
            }
            for (i, (k, v)) in record.headers.iter().enumerate() {
                out.extend_from_slice(k);
                out.push(b':');
                out.extend_from_slice(v.as_deref().unwrap_or(&self.null_literal));
                if i + 1 < record.headers.len() {
                    out.extend_from_slice(&self.headers_separator);
                }
            }
            sep(out, self.key || self.value);
        }
        if self.key {
            out.extend_from_slice(record.key.as_deref().unwrap_or(&self.null_literal));
            sep(out, self.value);
        }
        if self.value {
            out.extend_from_slice(record.value.as_deref().unwrap_or(&self.null_literal));
            out.extend_from_slice(&self.line_separator);
        }
    }
}

/// `\t`, `\n` and `\\` in a separator given on the command line, as a shell user types them.
fn unescape(text: &str) -> String {
    text.replace("\\t", "\t")
        .replace("\\n", "\n")
        .replace("\\r", "\r")
}

/// A record read from a partition.
#[derive(Debug)]
struct Consumed {
    partition: i32,
    offset: i64,
    timestamp_type: &'static str,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The records of a fetched record set from `position` on, without control records and,
/// under read_committed, without aborted transactions' records; the next position.
fn decode_fetched(
    partition: i32,
    bytes: &[u8],
    position: i64,
    aborted: &[(i64, i64)],
    read_committed: bool,
) -> anyhow::Result<(Vec<Consumed>, i64)> {
    let mut out = Vec::new();
    let mut next = position;
    let mut at = 0usize;
    let mut aborting: BTreeSet<i64> = BTreeSet::new();
    while at < bytes.len() {
        let Ok(header) = records::read_batch_header_at(bytes, at) else {
            break; // a partial batch at the end of the response
        };
        let batch = &bytes[at..at + header.size_in_bytes()];
        at += header.size_in_bytes();
        if header.last_offset() < position {
            continue;
        }
        if read_committed {
            for (pid, first) in aborted {
                if *first <= header.last_offset() && *pid == header.producer_id {
                    aborting.insert(*pid);
                }
            }
        }
        next = next.max(header.last_offset() + 1);
        if header.is_control() {
            aborting.remove(&header.producer_id);
            continue;
        }
        if read_committed && header.is_transactional() && aborting.contains(&header.producer_id) {
            continue;
        }
        let section = records::records_section(batch)?;
        let list = records::record::records(&section, header.records_count)?;
        for r in list {
            let offset = header.base_offset + i64::from(r.offset_delta);
            if offset < position {
                continue;
            }
            let (timestamp_type, timestamp) = match header.timestamp_type() {
                records::TimestampType::LogAppendTime => ("LogAppendTime", header.max_timestamp),
                records::TimestampType::CreateTime => (
                    "CreateTime",
                    header.base_timestamp.wrapping_add(r.timestamp_delta),
                ),
            };
            out.push(Consumed {
                partition,
                offset,
                timestamp_type,
                timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect(),
            });
        }
    }
    Ok((out, next))
}

/// Where a partition without a committed or given offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Earliest,
    Latest,
    At(i64),
}

/// The member's state in its group.
struct Membership {
    group: String,
    member_id: String,
    generation: i32,
    last_heartbeat: Instant,
    /// Commit positions (off for the generated `console-consumer-N` group, as Kafka's
    /// console consumer turns auto-commit off for it).
    commits: bool,
}

/// Kafka's range assignor over the members' subscriptions.
fn range_assign(
    members: &[(String, BTreeSet<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = members
        .iter()
        .map(|(m, _)| (m.clone(), BTreeMap::new()))
        .collect();
    for (topic, &count) in partitions {
        let mut subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        subscribers.sort();
        if subscribers.is_empty() {
            continue;
        }
        let n = subscribers.len() as i32;
        let per = count / n;
        let extra = count % n;
        for (i, member) in subscribers.iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.get_mut(*member)
                    .expect("a member")
                    .insert(topic.clone(), (start..start + len).collect());
            }
        }
    }
    out
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

/// JoinGroup and SyncGroup (as leader: the range assignment); the assigned partitions.
async fn join_group(
    cluster: &mut Cluster,
    membership: &mut Membership,
    topics: &BTreeSet<String>,
) -> anyhow::Result<BTreeSet<(String, i32)>> {
    for _ in 0..50 {
        let request = JoinGroupRequest::default()
            .with_group_id(group_id(&membership.group))
            .with_session_timeout_ms(45_000)
            .with_rebalance_timeout_ms(60_000)
            .with_member_id(StrBytes::from_string(membership.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(consumer_protocol::encode_subscription(topics))]);
        let joined = cluster
            .coordinator(&membership.group)
            .await?
            .send(request)
            .await?;
        match joined.error_code {
            0 => {}
            // MEMBER_ID_REQUIRED: join again with the id the coordinator gave.
            79 => {
                membership.member_id = joined.member_id.to_string();
                continue;
            }
            // UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, coordinator moves.
            25 | 27 | 14 | 15 | 16 => {
                if joined.error_code == 25 {
                    membership.member_id.clear();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            code => bail!(
                "cannot join group '{}': {}",
                membership.group,
                cluster::error_message(code)
            ),
        }
        membership.member_id = joined.member_id.to_string();
        membership.generation = joined.generation_id;
        let assignments = if joined.leader == joined.member_id {
            cluster.refresh().await?;
            let members: Vec<(String, BTreeSet<String>)> = joined
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.to_string(),
                        consumer_protocol::subscribed_topics(&m.metadata).unwrap_or_default(),
                    )
                })
                .collect();
            let wanted: BTreeSet<&String> = members.iter().flat_map(|(_, t)| t).collect();
            let counts: BTreeMap<String, i32> = cluster
                .leaders
                .iter()
                .filter(|(t, _)| wanted.contains(t))
                .map(|(t, p)| (t.clone(), p.len() as i32))
                .collect();
            range_assign(&members, &counts)
                .into_iter()
                .map(|(member, assigned)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member))
                        .with_assignment(consumer_protocol::encode_assignment(&assigned))
                })
                .collect()
        } else {
            Vec::new()
        };
        let synced = cluster
            .coordinator(&membership.group)
            .await?
            .send(
                SyncGroupRequest::default()
                    .with_group_id(group_id(&membership.group))
                    .with_generation_id(membership.generation)
                    .with_member_id(StrBytes::from_string(membership.member_id.clone()))
                    .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                    .with_protocol_name(Some(StrBytes::from_static_str("range")))
                    .with_assignments(assignments),
            )
            .await?;
        match synced.error_code {
            0 => {
                membership.last_heartbeat = Instant::now();
                let assigned =
                    consumer_protocol::assigned_partitions(&synced.assignment).unwrap_or_default();
                return Ok(assigned
                    .into_iter()
                    .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                    .collect());
            }
            25 | 27 | 22 => {
                if synced.error_code == 25 {
                    membership.member_id.clear();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            code => bail!(
                "cannot sync group '{}': {}",
                membership.group,
                cluster::error_message(code)
            ),
        }
    }
    bail!("cannot join group '{}'", membership.group)
}

async fn committed_offsets(
    cluster: &mut Cluster,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let response = cluster
        .coordinator(group)
        .await?
        .send_version(
            OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(None),
            7,
        )
        .await?;
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

async fn commit(
    cluster: &mut Cluster,
    membership: &Membership,
    positions: &BTreeMap<(String, i32), i64>,
) -> anyhow::Result<()> {
    if positions.is_empty() || !membership.commits {
        return Ok(());
    }
    let request = group_coordinator::reset::commit_request(&membership.group, positions)
        .with_generation_id_or_member_epoch(membership.generation)
        .with_member_id(StrBytes::from_string(membership.member_id.clone()));
    cluster
        .coordinator(&membership.group)
        .await?
        .send(request)
        .await?;
    Ok(())
}

/// Runs console-consumer; returns the process exit code.
pub fn run_consumer(args: ConsoleConsumerArgs) -> anyhow::Result<ExitCode> {
    let usage = |message: &str| {
        eprintln!("{message}");
        Ok(ExitCode::from(1))
    };
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        return usage("Missing required argument \"[bootstrap-server]\"");
    };
    if args.topic.is_some() == args.include.is_some() {
        return usage("Exactly one of --include/--topic is required. ");
    }
    if args.partition.is_some() && args.topic.is_none() {
        return usage("The topic is required when partition is specified.");
    }
    if args.from_beginning && args.offset.is_some() {
        return usage("Options from-beginning and offset cannot be specified together.");
    }
    if args.offset.is_some() && args.partition.is_none() {
        return usage("The partition is required when offset is specified.");
    }
    let consumer_props = match properties(
        &args.consumer_property,
        args.consumer_config.as_ref(),
        "--consumer-property",
    ) {
        Ok(p) => p,
        Err(message) => return usage(&message),
    };
    let group = match (args.group.clone(), consumer_props.get("group.id").cloned()) {
        (Some(a), Some(b)) if a != b => {
            return usage(&format!("The group ids provided in different places (directly using '--group', passing using '--consumer-property' or '--consumer.config') do not match. Detected group ids: '{a}', '{b}'"));
        }
        (a, b) => a.or(b),
    };
    if group.is_some() && args.partition.is_some() {
        return usage("Options group and partition cannot be specified together.");
    }
    if let Some(formatter) = &args.formatter {
        if !formatter.ends_with("DefaultMessageFormatter") {
            return usage(&format!(
                "The formatter {formatter} is not available: only kafka.tools.DefaultMessageFormatter is."
            ));
        }
    }
    let start = match args.offset.as_deref() {
        Some("earliest") => Start::Earliest,
        Some("latest") => Start::Latest,
        Some(text) => match text.parse::<i64>() {
            Ok(n) if n >= 0 => Start::At(n),
            _ => {
                return usage(&format!("The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long."));
            }
        },
        None if args.from_beginning => Start::Earliest,
        None => match consumer_props.get("auto.offset.reset").map(String::as_str) {
            Some("earliest") => Start::Earliest,
            _ => Start::Latest,
        },
    };
    let isolation = consumer_props
        .get("isolation.level")
        .cloned()
        .unwrap_or_else(|| args.isolation_level.clone());
    let read_committed = match isolation.as_str() {
        "read_committed" => true,
        "read_uncommitted" => false,
        other => {
            return usage(&format!("Invalid value {other} for configuration isolation.level: String must be one of: read_committed, read_uncommitted"));
        }
    };
    let format_props = match properties(&args.property, None, "--property") {
        Ok(p) => p,
        Err(message) => return usage(&message),
    };
    let include = match &args.include {
        Some(pattern) => match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(r) => Some(r),
            Err(e) => return usage(&format!("Invalid --include pattern {pattern}: {e}")),
        },
        None => None,
    };
    let formatter = Formatter::new(&format_props);
    let client_id = consumer_props
        .get("client.id")
        .cloned()
        .unwrap_or_else(|| "console-consumer".to_owned());
    let security_file = args
        .command_config
        .as_deref()
        .or(args.consumer_config.as_deref());
    let mut processed = 0u64;
    let result = cluster::runtime()?.block_on(async {
        let options = cluster::connection_options(&bootstrap, &client_id, security_file)?;
        let mut cluster = Cluster::connect(&bootstrap, options).await?;
        let topics: BTreeSet<String> = match (&args.topic, &include) {
            (Some(topic), _) => BTreeSet::from([topic.clone()]),
            (None, Some(pattern)) => cluster
                .leaders
                .keys()
                .filter(|t| pattern.is_match(t) && !cluster.internal.contains(*t))
                .cloned()
                .collect(),
            (None, None) => BTreeSet::new(),
        };
        // Without --group and --partition, Kafka's console consumer subscribes in a group
        // of its own, `console-consumer-<random>`, and commits nothing.
        let generated = (group.is_none() && args.partition.is_none())
            .then(|| format!("console-consumer-{}", rand::random_range(0..100_000)));
        let commits = group.is_some()
            && consumer_props
                .get("enable.auto.commit")
                .is_none_or(|v| v.trim().eq_ignore_ascii_case("true"));
        let mut membership = group.clone().or(generated).map(|g| Membership {
            group: g,
            member_id: String::new(),
            generation: -1,
            last_heartbeat: Instant::now(),
            commits,
        });
        let mut positions: BTreeMap<(String, i32), i64> = BTreeMap::new();
        let mut stdout = std::io::stdout();
        let mut last_message = Instant::now();
        let mut last_commit = Instant::now();
        let timeout = args.timeout_ms.map(Duration::from_millis);
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        'assignment: loop {
            // Which partitions to read, and from where.
            let assigned: BTreeSet<(String, i32)> = match membership.as_mut() {
                Some(m) => join_group(&mut cluster, m, &topics).await?,
                None => {
                    let mut all = BTreeSet::new();
                    for topic in &topics {
                        if !cluster.leaders.contains_key(topic) {
                            cluster.refresh().await?;
                        }
                        let partitions = cluster.leaders.get(topic).cloned().unwrap_or_default();
                        match args.partition {
                            Some(p) if !partitions.contains_key(&p) => {
                                bail!("Unknown partition {topic}-{p}");
                            }
                            Some(p) => {
                                all.insert((topic.clone(), p));
                            }
                            None => all.extend(partitions.keys().map(|p| (topic.clone(), *p))),
                        }
                    }
                    all
                }
            };
            let committed = match &membership {
                Some(m) => committed_offsets(&mut cluster, &m.group).await?,
                None => BTreeMap::new(),
            };
            positions.retain(|tp, _| assigned.contains(tp));
            let missing: BTreeSet<(String, i32)> = assigned
                .iter()
                .filter(|tp| !positions.contains_key(*tp) && !committed.contains_key(*tp))
                .cloned()
                .collect();
            for tp in &assigned {
                if let Some(offset) = committed.get(tp) {
                    positions.entry(tp.clone()).or_insert(*offset);
                }
            }
            if !missing.is_empty() {
                let isolation = i8::from(read_committed);
                let earliest = cluster
                    .list_offsets_detailed(&missing, -2, isolation)
                    .await?;
                let latest = cluster
                    .list_offsets_detailed(&missing, -1, isolation)
                    .await?;
                for tp in missing {
                    let low = earliest.get(&tp).and_then(|r| (*r).ok()).unwrap_or(0);
                    let high = latest.get(&tp).and_then(|r| (*r).ok()).unwrap_or(low);
                    let at = match start {
                        Start::Earliest => low,
                        Start::Latest => high,
                        Start::At(n) => n.clamp(low, high),
                    };
                    positions.insert(tp, at);
                }
            }
            loop {
                if args.max_messages.is_some_and(|max| processed >= max) {
                    break 'assignment;
                }
                if timeout.is_some_and(|t| last_message.elapsed() >= t) {
                    break 'assignment;
                }
                if let Some(m) = membership.as_mut() {
                    if m.last_heartbeat.elapsed() >= Duration::from_secs(3) {
                        m.last_heartbeat = Instant::now();
                        let beat = cluster
                            .coordinator(&m.group)
                            .await?
                            .send(
                                HeartbeatRequest::default()
                                    .with_group_id(group_id(&m.group))
                                    .with_generation_id(m.generation)
                                    .with_member_id(StrBytes::from_string(m.member_id.clone())),
                            )
                            .await?;
                        if beat.error_code != 0 {
                            if beat.error_code == 27 {
                                let _ = commit(&mut cluster, m, &positions).await;
                            }
                            continue 'assignment;
                        }
                    }
                    if last_commit.elapsed() >= Duration::from_secs(5) {
                        last_commit = Instant::now();
                        commit(&mut cluster, m, &positions).await?;
                    }
                }
                if positions.is_empty() {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                        _ = &mut ctrl_c => break 'assignment,
                    }
                    continue;
                }
                let wait = if positions.len() > 1 { 50 } else { 500 };
                let keys: Vec<(String, i32)> = positions.keys().cloned().collect();
                for (topic, partition) in keys {
                    let position = positions[&(topic.clone(), partition)];
                    let fetched = tokio::select! {
                        fetched = cluster.fetch(
                            &topic,
                            partition,
                            position,
                            1024 * 1024,
                            wait,
                            i8::from(read_committed),
                        ) => fetched?,
                        _ = &mut ctrl_c => break 'assignment,
                    };
                    if fetched.error_code != 0 {
                        if fetched.error_code == 1 {
                            // OFFSET_OUT_OF_RANGE: start over from the reset policy.
                            positions.remove(&(topic.clone(), partition));
                            continue 'assignment;
                        }
                        continue;
                    }
                    let limit = if read_committed {
                        fetched.last_stable_offset
                    } else {
                        fetched.high_watermark
                    };
                    let (records, next) = match decode_fetched(
                        partition,
                        &fetched.records,
                        position,
                        &fetched.aborted,
                        read_committed,
                    ) {
                        Ok(decoded) => decoded,
                        Err(err) if args.skip_message_on_error => {
                            eprintln!("Error processing message, skipping this message: {err:#}");
                            (Vec::new(), position + 1)
                        }
                        Err(err) => return Err(err),
                    };
                    let mut out = Vec::new();
                    // Where the next read of this partition starts: after the last record
                    // printed, or at the first one left for later (--max-messages, or past
                    // the high watermark / last stable offset).
                    let mut stopped_at = None;
                    let mut last = None;
                    for record in records {
                        if (limit >= 0 && record.offset >= limit)
                            || args.max_messages.is_some_and(|max| processed >= max)
                        {
                            stopped_at = Some(record.offset);
                            break;
                        }
                        formatter.write(&mut out, &record);
                        processed += 1;
                        last = Some(record.offset);
                    }
                    let next = match (stopped_at, last) {
                        (Some(offset), _) => offset,
                        (None, Some(offset)) => offset + 1,
                        (None, None) if limit >= 0 => next.min(limit).max(position),
                        (None, None) => next,
                    };
                    positions.insert((topic.clone(), partition), next);
                    if !out.is_empty() {
                        last_message = Instant::now();
                        stdout.write_all(&out)?;
                        stdout.flush()?;
                    }
                }
            }
        }
        if let Some(m) = &membership {
            commit(&mut cluster, m, &positions).await?;
            let coordinator = cluster.coordinator(&m.group).await?;
            let member = StrBytes::from_string(m.member_id.clone());
            // v3+ names the leaving members in a batch; v0-v2 name the one member.
            let request = if coordinator.negotiated_version::<LeaveGroupRequest>()? >= 3 {
                LeaveGroupRequest::default()
                    .with_group_id(group_id(&m.group))
                    .with_members(vec![MemberIdentity::default().with_member_id(member)])
            } else {
                LeaveGroupRequest::default()
                    .with_group_id(group_id(&m.group))
                    .with_member_id(member)
            };
            coordinator.send(request).await?;
        }
        anyhow::Ok(())
    });
    eprintln!("Processed a total of {processed} messages");
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => {
            eprintln!("Error processing message, terminating consumer process: {err:#}");
            Ok(ExitCode::from(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_partitioner() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    #[test]
    fn lines_parse_as_line_message_reader() {
        let props = BTreeMap::from([
            ("parse.key".to_owned(), "true".to_owned()),
            ("key.separator".to_owned(), ":".to_owned()),
            ("parse.headers".to_owned(), "true".to_owned()),
            ("headers.delimiter".to_owned(), "|".to_owned()),
            ("headers.key.separator".to_owned(), "=".to_owned()),
        ]);
        let reader = LineReader::new(&props).unwrap();
        let (key, value, headers) = reader.read("h1=v1,h2=v2|k:val:ue", 1).unwrap();
        assert_eq!(key.as_deref(), Some(&b"k"[..]));
        assert_eq!(value.as_deref(), Some(&b"val:ue"[..]));
        assert_eq!(
            headers,
            vec![
                ("h1".to_owned(), Some(b"v1".to_vec())),
                ("h2".to_owned(), Some(b"v2".to_vec()))
            ]
        );
        let err = reader.read("h=1|novalue", 3).unwrap_err();
        assert_eq!(
            err,
            "No key separator found on line number 3: 'h=1|novalue'"
        );
    }

    #[test]
    fn range_assignment_splits_partitions_in_order() {
        let members = vec![
            ("b".to_owned(), BTreeSet::from(["t".to_owned()])),
            ("a".to_owned(), BTreeSet::from(["t".to_owned()])),
        ];
        let assigned = range_assign(&members, &BTreeMap::from([("t".to_owned(), 3)]));
        assert_eq!(assigned["a"]["t"], vec![0, 1]);
        assert_eq!(assigned["b"]["t"], vec![2]);
    }

    #[test]
    fn the_formatter_prints_kafkas_columns() {
        let props = BTreeMap::from([
            ("print.key".to_owned(), "true".to_owned()),
            ("print.partition".to_owned(), "true".to_owned()),
            ("print.offset".to_owned(), "true".to_owned()),
            ("print.timestamp".to_owned(), "true".to_owned()),
            ("print.headers".to_owned(), "true".to_owned()),
        ]);
        let mut out = Vec::new();
        Formatter::new(&props).write(
            &mut out,
            &Consumed {
                partition: 1,
                offset: 7,
                timestamp_type: "CreateTime",
                timestamp: 5,
                key: None,
                value: Some(b"v".to_vec()),
                headers: vec![],
            },
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "CreateTime:5\tPartition:1\tOffset:7\tNO_HEADERS\tnull\tv\n"
        );
    }

    fn batch(
        base: i64,
        producer_id: i64,
        transactional: bool,
        control: bool,
        value: &[u8],
    ) -> Vec<u8> {
        let mut spec = BatchSpec::new(base);
        spec.producer_id = producer_id;
        spec.producer_epoch = 0;
        spec.base_sequence = if control { -1 } else { 0 };
        spec.transactional = transactional;
        spec.control = control;
        let mut builder = BatchBuilder::new(spec);
        builder.push(&NewRecord {
            offset: base,
            timestamp: 1,
            key: Some(if control { &[0, 0, 0, 0] } else { b"k" }),
            value: Some(value),
            headers: &[],
        });
        builder.build()
    }

    #[test]
    fn read_committed_drops_aborted_transactions_and_control_batches() {
        let mut set = batch(0, 7, true, false, b"aborted");
        set.extend(batch(1, 7, true, true, &[0, 0, 0, 0, 0, 0]));
        set.extend(batch(2, -1, false, false, b"plain"));
        let (records, next) = decode_fetched(0, &set, 0, &[(7, 0)], true).unwrap();
        let values: Vec<&[u8]> = records.iter().filter_map(|r| r.value.as_deref()).collect();
        assert_eq!(values, vec![&b"plain"[..]]);
        assert_eq!(next, 3);
        // read_uncommitted sees the aborted record, never the marker.
        let (records, _) = decode_fetched(0, &set, 0, &[(7, 0)], false).unwrap();
        let values: Vec<&[u8]> = records.iter().filter_map(|r| r.value.as_deref()).collect();
        assert_eq!(values, vec![&b"aborted"[..], &b"plain"[..]]);
        // A position inside the set skips what lies before it.
        let (records, _) = decode_fetched(0, &set, 2, &[], false).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset, 2);
    }
}
