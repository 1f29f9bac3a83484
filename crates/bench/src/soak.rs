//! `gregor bench soak`: many connections of mixed traffic for a fixed time, plus misbehaving
//! ones, against a running cluster; then checks that nothing was lost and nothing leaked
//! (issue 14's soak).
//!
//! Built on tokio and the project's own Kafka client (`client::Connection`, codecs from
//! `kafka-protocol`), so a thousand connections cost a thousand sockets and small tasks, not a
//! thousand librdkafka instances with their threads.
//!
//! The well-behaved connections, each one request at a time with `pause` between requests:
//! - produce (4 in 10): one batch of `records_per_batch` records, `acks=all`, to the leader
//!   of one partition; every acknowledged base offset is kept with what was sent;
//! - fetch (2 in 10): follow one partition from its start on its leader (`max_wait_ms` 500),
//!   checking that record offsets go up by one across batches;
//! - metadata (2 in 10): Metadata of the topic or of every topic, checking the topic and
//!   its leaders are there;
//! - group (2 in 10): members of `groups` consumer groups on their coordinators: JoinGroup
//!   (with the member id round trip), SyncGroup (the leader assigns partitions), Heartbeat,
//!   OffsetCommit and OffsetFetch of the partitions they own, then LeaveGroup after a
//!   lifetime of 5-20 s and a new member 1-3 s later. A rebalance answer
//!   (`REBALANCE_IN_PROGRESS`) is counted apart and the member rejoins: that is the protocol.
//!   Committed offsets come from one increasing counter per group, so an OffsetFetch right
//!   after a successful commit must return at least the value just committed.
//!
//! The misbehaving ones:
//! - `stalled` connections that write the first half of a request frame and then nothing;
//!   if the broker closes one (`connections.max.idle.ms`) it is counted and reopened;
//! - `disconnectors` tasks that in a loop connect, send something and close before the
//!   answer: a whole Produce (acks=all), a whole long-polling Fetch, half a frame, a JoinGroup
//!   that makes a pending member, a Metadata followed by half of another request.
//!
//! Any failure of a well-behaved request (an error code, a timeout, a closed connection, a
//! check that does not hold) is an error, counted by kind. Every `sample_interval` the RSS and
//! the number of open file descriptors of each watched broker process are read from `/proc`.
//! At the end: every acknowledged record is read back (offset and content), the brokers' fds
//! other than regular files (sockets above all) must come back to within `fd_margin` of their
//! count before the soak (log files open when first used and stay in a bounded LRU, so they
//! are reported, not checked), and the RSS may grow at most `rss_growth_limit_mib` from the
//! end of the ramp-up to its maximum.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use client::{AdminClient, AdminOptions, ClientError, Connection, ConnectionOptions, NewTopic};
use kafka_protocol::messages::{
    fetch_request, offset_commit_request, offset_fetch_request, produce_request, BrokerId,
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FetchRequest, FindCoordinatorRequest,
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, RequestHeader, SyncGroupRequest,
    TopicName,
};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::BenchError;

const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const REBALANCE_IN_PROGRESS: i16 = 27;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const MEMBER_ID_REQUIRED: i16 = 79;

/// Session and rebalance timeouts of the soak's group members.
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// The session timeout of the disconnectors' throwaway JoinGroups (the broker's minimum,
/// `group.min.session.timeout.ms`, Kafka's default 6 s), so their pending members go soon.
const PENDING_SESSION_TIMEOUT_MS: i32 = 6_000;
/// Per-request timeout of the well-behaved clients: above the rebalance timeout, since a
/// JoinGroup is answered only when the rebalance completes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The most error messages kept verbatim in the report.
const ERROR_SAMPLES: usize = 20;

/// What `gregor bench soak` was asked for.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// `host:port[,host:port...]`.
    pub bootstrap_server: String,
    /// The topic produced to and fetched from (created if missing).
    pub topic: String,
    /// Its partitions when created.
    pub partitions: i32,
    /// Its replication factor when created.
    pub replication_factor: i16,
    /// Well-behaved connections.
    pub connections: usize,
    /// Connections that send half a frame and stall.
    pub stalled: usize,
    /// Tasks that connect, send and disconnect before the answer, in a loop.
    pub disconnectors: usize,
    /// Consumer groups the group connections are members of.
    pub groups: usize,
    /// How long the traffic runs.
    pub duration: Duration,
    /// Pause of each well-behaved connection between two requests.
    pub pause: Duration,
    /// Bytes per record value (at least 10).
    pub message_size: usize,
    /// Records per produced batch.
    pub records_per_batch: usize,
    /// The broker processes to watch (RSS, open fds).
    pub broker_pids: Vec<u32>,
    /// How many more fds other than regular files (sockets, pipes, eventfds) than before
    /// the soak a broker may hold at the end. Regular files (segments and indexes, opened
    /// when first used and kept in a bounded LRU) are reported, not checked.
    pub fd_margin: u64,
    /// How much a broker's RSS may grow from the end of the ramp-up to its maximum, MiB.
    pub rss_growth_limit_mib: u64,
    /// How often RSS and fds are sampled.
    pub sample_interval: Duration,
    /// Print a progress line to stderr every ten samples.
    pub progress: bool,
}

/// One broker process over the soak.
#[derive(Debug, Clone, Default)]
pub struct ProcessFigures {
    /// Its pid.
    pub pid: u32,
    /// `VmRSS` before the soak, KiB.
    pub rss_start_kib: u64,
    /// `VmRSS` at the end of the ramp-up (every connection open), KiB.
    pub rss_after_ramp_kib: u64,
    /// Smallest and largest `VmRSS` sampled during the traffic, KiB.
    pub rss_min_kib: u64,
    /// See `rss_min_kib`.
    pub rss_max_kib: u64,
    /// `VmRSS` after the read-back, KiB.
    pub rss_end_kib: u64,
    /// `RssAnon` (heap) at the end of the ramp-up and its largest sample after, KiB.
    pub anon_after_ramp_kib: u64,
    /// See `anon_after_ramp_kib`.
    pub anon_max_kib: u64,
    /// Open fds before the soak.
    pub fds_start: u64,
    /// Of those, fds that are not regular files (sockets, pipes, eventfds, epoll).
    pub non_file_fds_start: u64,
    /// Of those, sockets.
    pub sockets_start: u64,
    /// Smallest and largest fd count sampled during the traffic.
    pub fds_min: u64,
    /// See `fds_min`.
    pub fds_max: u64,
    /// Open fds after every soak connection closed.
    pub fds_end: u64,
    /// Of those, fds that are not regular files.
    pub non_file_fds_end: u64,
    /// Of those, sockets.
    pub sockets_end: u64,
    /// `VmRSS` (KiB) every tenth of the traffic's duration, from the start.
    pub rss_series_kib: Vec<u64>,
    /// Samples taken.
    pub samples: usize,
}

/// The figures and verdict of one soak.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// The options' counts, for the record.
    pub connections: usize,
    /// See [`SoakOptions::stalled`].
    pub stalled: usize,
    /// See [`SoakOptions::disconnectors`].
    pub disconnectors: usize,
    /// Seconds the traffic ran.
    pub duration_s: f64,
    /// Successful well-behaved requests per kind (`produce`, `fetch`, `metadata`,
    /// `join_group`, ...).
    pub requests: BTreeMap<String, u64>,
    /// Answers that are part of the protocol, not errors (`rebalance_in_progress`).
    pub expected: BTreeMap<String, u64>,
    /// Errors of well-behaved clients, per kind (`<request>: <what>`).
    pub errors: BTreeMap<String, u64>,
    /// The first few error messages, verbatim.
    pub error_samples: Vec<String>,
    /// Disconnect-mid-request cycles completed, per variant.
    pub disconnect_cycles: BTreeMap<String, u64>,
    /// Stalled connections the broker closed (they were reopened).
    pub stalled_closed_by_broker: u64,
    /// Batches and records acknowledged.
    pub acked_batches: u64,
    /// See `acked_batches`.
    pub acked_records: u64,
    /// Acknowledged records read back with the right offset and content.
    pub records_verified: u64,
    /// Acknowledged records not found at their offset.
    pub records_missing: u64,
    /// Acknowledged records found with other content.
    pub records_mismatched: u64,
    /// Per broker process.
    pub processes: Vec<ProcessFigures>,
    /// The checks that failed, each a sentence; empty when the soak passed.
    pub failures: Vec<String>,
}

impl SoakReport {
    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let mib = |kib: u64| (kib as f64 / 1024.0 * 10.0).round() / 10.0;
        let processes: Vec<serde_json::Value> = self
            .processes
            .iter()
            .map(|p| {
                serde_json::json!({
                    "pid": p.pid,
                    "rss_mib": {
                        "start": mib(p.rss_start_kib),
                        "after_ramp": mib(p.rss_after_ramp_kib),
                        "min": mib(p.rss_min_kib),
                        "max": mib(p.rss_max_kib),
                        "end": mib(p.rss_end_kib),
                    },
                    "anon_rss_mib": {
                        "after_ramp": mib(p.anon_after_ramp_kib),
                        "max": mib(p.anon_max_kib),
                    },
                    "rss_series_mib": p.rss_series_kib.iter().map(|&k| mib(k)).collect::<Vec<_>>(),
                    "fds": {
                        "start": p.fds_start,
                        "min": p.fds_min,
                        "max": p.fds_max,
                        "end": p.fds_end,
                        "non_file_start": p.non_file_fds_start,
                        "non_file_end": p.non_file_fds_end,
                        "sockets_start": p.sockets_start,
                        "sockets_end": p.sockets_end,
                    },
                    "samples": p.samples,
                })
            })
            .collect();
        serde_json::json!({
            "mode": "soak",
            "passed": self.failures.is_empty(),
            "connections": {
                "well_behaved": self.connections,
                "stalled": self.stalled,
                "disconnectors": self.disconnectors,
            },
            "duration_s": (self.duration_s * 10.0).round() / 10.0,
            "requests": self.requests,
            "expected": self.expected,
            "errors": self.errors,
            "error_count": self.errors.values().sum::<u64>(),
            "error_samples": self.error_samples,
            "disconnect_cycles": self.disconnect_cycles,
            "stalled_closed_by_broker": self.stalled_closed_by_broker,
            "acked": { "batches": self.acked_batches, "records": self.acked_records },
            "read_back": {
                "verified": self.records_verified,
                "missing": self.records_missing,
                "mismatched": self.records_mismatched,
            },
            "processes": processes,
            "failures": self.failures,
        })
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string_pretty(&self.to_json()).map_err(|_| fmt::Error)?;
        writeln!(f, "{text}")
    }
}

/// Runs the soak (see the module docs). `Err` when it could not run at all (no cluster, the
/// topic cannot be created); a soak that ran returns its report, whose `failures` say which
/// checks failed.
pub fn soak(opts: &SoakOptions) -> Result<SoakReport, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| soak_error(format!("cannot start the tokio runtime: {e}")))?;
    runtime.block_on(run(opts.clone()))
}

fn soak_error(detail: String) -> BenchError {
    BenchError::Soak { detail }
}

/// The cluster as the soak sees it.
#[derive(Debug)]
struct Topology {
    /// Broker id → `host:port`.
    brokers: BTreeMap<i32, String>,
    /// Partition → leader's `host:port`.
    leaders: Vec<String>,
    /// Group id → its coordinator's `host:port`.
    coordinators: Vec<(String, String)>,
}

/// One acknowledged batch.
#[derive(Debug, Clone, Copy)]
struct Acked {
    base_offset: i64,
    producer: u32,
    seq: u32,
    count: u16,
}

/// What every task shares.
#[derive(Debug)]
struct Shared {
    opts: SoakOptions,
    topology: Topology,
    stop: watch::Receiver<bool>,
    requests: Mutex<BTreeMap<String, u64>>,
    expected: Mutex<BTreeMap<String, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
    error_samples: Mutex<Vec<String>>,
    disconnect_cycles: Mutex<BTreeMap<String, u64>>,
    stalled_closed: AtomicU64,
    /// Per partition, the acknowledged batches.
    acked: Vec<Mutex<Vec<Acked>>>,
    /// Per group, the next offset to commit.
    commit_counters: Vec<AtomicI64>,
}

impl Shared {
    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    fn ok(&self, what: &str) {
        *lock(&self.requests).entry(what.to_string()).or_default() += 1;
    }

    fn expected(&self, what: &str) {
        *lock(&self.expected).entry(what.to_string()).or_default() += 1;
    }

    fn error(&self, request: &str, kind: &str, detail: impl fmt::Display) {
        *lock(&self.errors)
            .entry(format!("{request}: {kind}"))
            .or_default() += 1;
        let mut samples = lock(&self.error_samples);
        if samples.len() < ERROR_SAMPLES {
            samples.push(format!("{request}: {kind}: {detail}"));
        }
    }

    fn client_error(&self, request: &str, err: &ClientError) {
        let kind = match err {
            ClientError::Io { .. } => "connection failed".to_string(),
            ClientError::Timeout { .. } => "timeout".to_string(),
            ClientError::Server { code, .. } => format!("error code {code}"),
            ClientError::Decode { .. } => "undecodable response".to_string(),
            ClientError::Protocol { .. } => "protocol error".to_string(),
            ClientError::UnsupportedVersion { .. } => "unsupported version".to_string(),
            ClientError::Authentication { .. } => "authentication failed".to_string(),
            ClientError::Config(_) => "client config".to_string(),
        };
        self.error(request, &kind, err);
    }

    fn code_error(&self, request: &str, code: i16) {
        self.error(
            request,
            &format!("error code {code}"),
            client::error_message(code),
        );
    }

    /// Sleeps `d`, or less when the soak stops; true when it stopped.
    async fn pause(&self, d: Duration) -> bool {
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
        self.stopped()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn group_name(g: usize) -> String {
    format!("soak-group-{g}")
}

/// An acks=all Produce of `records` to one partition, with a 30 s timeout.
fn produce_acks_all(topic: &str, partition: usize, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition as i32)
                    .with_records(Some(records)),
            ])])
}

fn connection_options(client_id: String) -> ConnectionOptions {
    ConnectionOptions {
        client_id,
        connect_timeout: Duration::from_secs(30),
        request_timeout: REQUEST_TIMEOUT,
        ..ConnectionOptions::default()
    }
}

/// A small deterministic generator (xorshift64*), seeded per task.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(if span == 0 { 0 } else { self.next() % span })
    }
}

/// The value of record `index` of batch `seq` of producer `producer`: the three numbers, then
/// bytes derived from them, `size` bytes in all (at least 10).
fn record_value(producer: u32, seq: u32, index: u16, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size.max(10));
    v.extend_from_slice(&producer.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(&index.to_be_bytes());
    let mut rng = Rng::new((u64::from(producer) << 32) ^ (u64::from(seq) << 16) ^ u64::from(index));
    while v.len() < size {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(size.max(10));
    v
}

fn encode_batch(producer: u32, seq: u32, count: u16, size: usize) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            // Consecutive (from -1) so the encoder keeps them in one batch.
            sequence: i32::from(i) - 1,
            timestamp: now_ms(),
            key: None,
            value: Some(Bytes::from(record_value(producer, seq, i, size))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("a batch of plain records always encodes");
    buf.freeze()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Splits a Fetch response's records into complete batches (a fetch may end with part of
/// one) and decodes them: `(offset, value)` of every record.
fn decode_records(mut data: Bytes) -> Result<Vec<(i64, Option<Bytes>)>, String> {
    let mut out = Vec::new();
    while data.len() >= 12 {
        let len = i32::from_be_bytes([data[8], data[9], data[10], data[11]]);
        if len < 0 {
            return Err(format!("negative batch length {len}"));
        }
        let whole = 12 + len as usize;
        if whole > data.len() {
            break;
        }
        let mut batch = data.split_to(whole);
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| e.to_string())?;
        out.extend(set.records.into_iter().map(|r| (r.offset, r.value)));
    }
    Ok(out)
}

/// One look at a process through `/proc`.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// `VmRSS`, KiB.
    rss: u64,
    /// `RssAnon`, KiB.
    anon: u64,
    /// Open fds.
    fds: u64,
    /// Open fds that are not regular files.
    non_file: u64,
    /// Open sockets.
    sockets: u64,
}

/// Reads `/proc/<pid>/status` (`VmRSS`, `RssAnon`) and `/proc/<pid>/fd` (what each fd is).
fn probe(pid: u32) -> Result<Probe, BenchError> {
    let status =
        fs::read_to_string(format!("/proc/{pid}/status")).map_err(|source| BenchError::Proc {
            pid,
            file: "status",
            source,
        })?;
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l[key.len()..].split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let dir = fs::read_dir(format!("/proc/{pid}/fd")).map_err(|source| BenchError::Proc {
        pid,
        file: "fd",
        source,
    })?;
    let (mut fds, mut non_file, mut sockets) = (0, 0, 0);
    for entry in dir.flatten() {
        fds += 1;
        // An fd closed between the listing and the readlink is simply not counted further.
        let Ok(target) = fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target.starts_with("socket:") {
            sockets += 1;
        }
        if !target.starts_with('/') || target.starts_with("/dev/") {
            non_file += 1;
        }
    }
    Ok(Probe {
        rss: field("VmRSS:"),
        anon: field("RssAnon:"),
        fds,
        non_file,
        sockets,
    })
}

async fn run(opts: SoakOptions) -> Result<SoakReport, BenchError> {
    if opts.message_size < 10 {
        return Err(soak_error("--message-size must be at least 10".into()));
    }
    let topology = setup(&opts).await?;
    // The baseline: after the setup's connections closed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut processes = Vec::new();
    for &pid in &opts.broker_pids {
        let at = probe(pid)?;
        processes.push(ProcessFigures {
            pid,
            rss_start_kib: at.rss,
            rss_min_kib: u64::MAX,
            fds_start: at.fds,
            non_file_fds_start: at.non_file,
            sockets_start: at.sockets,
            fds_min: u64::MAX,
            rss_series_kib: vec![at.rss],
            ..ProcessFigures::default()
        });
    }
    let (stop_tx, stop) = watch::channel(false);
    let shared = Arc::new(Shared {
        acked: (0..topology.leaders.len())
            .map(|_| Mutex::new(Vec::new()))
            .collect(),
        commit_counters: (0..opts.groups.max(1)).map(|_| AtomicI64::new(1)).collect(),
        opts: opts.clone(),
        topology,
        stop,
        requests: Mutex::default(),
        expected: Mutex::default(),
        errors: Mutex::default(),
        error_samples: Mutex::default(),
        disconnect_cycles: Mutex::default(),
        stalled_closed: AtomicU64::new(0),
    });

    // Connections open over the ramp-up, not all in one burst (the listen backlog).
    let ramp = Duration::from_millis((opts.connections + opts.stalled) as u64 * 4)
        .clamp(Duration::from_secs(1), Duration::from_secs(10));
    let total = (opts.connections + opts.stalled + opts.disconnectors).max(1);
    let mut tasks = Vec::new();
    for i in 0..opts.connections {
        let s = Arc::clone(&shared);
        let delay = ramp * i as u32 / total as u32;
        let role = i % 10;
        let member = (role >= 8).then(|| (i / 10) % opts.groups.max(1));
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            match (role, member) {
                (0..=3, _) => producer(s, i).await,
                (4..=5, _) => fetcher(s, i).await,
                (6..=7, _) => metadata(s, i).await,
                (_, Some(g)) => group_member(s, i, g).await,
                _ => {}
            }
        }));
    }
    for i in 0..opts.stalled {
        let s = Arc::clone(&shared);
        let delay = ramp * (opts.connections + i) as u32 / total as u32;
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            stalled(s, i).await;
        }));
    }
    for i in 0..opts.disconnectors {
        let s = Arc::clone(&shared);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(ramp).await;
            disconnector(s, i).await;
        }));
    }

    // Sample until the end of the traffic.
    let started = Instant::now();
    let after_ramp = ramp + Duration::from_secs(2).min(opts.duration / 4);
    let mut ramp_taken = false;
    let mut n = 0usize;
    while started.elapsed() < opts.duration {
        tokio::time::sleep(opts.sample_interval.min(opts.duration - started.elapsed())).await;
        n += 1;
        let past_ramp = started.elapsed() >= after_ramp;
        let tenth = opts.duration / 10;
        let series_due =
            |p: &ProcessFigures| started.elapsed() >= tenth * p.rss_series_kib.len() as u32;
        for p in &mut processes {
            let Probe { rss, anon, fds, .. } = probe(p.pid)?;
            if series_due(p) {
                p.rss_series_kib.push(rss);
            }
            p.samples += 1;
            p.rss_min_kib = p.rss_min_kib.min(rss);
            p.rss_max_kib = p.rss_max_kib.max(rss);
            p.fds_min = p.fds_min.min(fds);
            p.fds_max = p.fds_max.max(fds);
            if past_ramp && !ramp_taken {
                p.rss_after_ramp_kib = rss;
                p.anon_after_ramp_kib = anon;
            }
            if past_ramp {
                p.anon_max_kib = p.anon_max_kib.max(anon);
            }
        }
        if past_ramp {
            ramp_taken = true;
        }
        if opts.progress && n.is_multiple_of(10) {
            let errors: u64 = lock(&shared.errors).values().sum();
            let requests: u64 = lock(&shared.requests).values().sum();
            let rss: Vec<String> = processes
                .iter()
                .map(|p| format!("{}MiB", p.rss_max_kib / 1024))
                .collect();
            eprintln!(
                "soak: t={:.0}s requests={requests} errors={errors} rss_max={}",
                started.elapsed().as_secs_f64(),
                rss.join(",")
            );
        }
    }
    let duration_s = started.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    // Each task ends its request in flight (a JoinGroup may wait for a rebalance).
    let deadline = Instant::now() + REQUEST_TIMEOUT + Duration::from_secs(30);
    let mut unfinished = 0;
    for task in tasks {
        let left = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(left, task).await.is_err() {
            unfinished += 1;
        }
    }

    let mut report = SoakReport {
        connections: opts.connections,
        stalled: opts.stalled,
        disconnectors: opts.disconnectors,
        duration_s,
        ..SoakReport::default()
    };
    if unfinished > 0 {
        report.failures.push(format!(
            "{unfinished} tasks did not end within {:?} of the stop",
            REQUEST_TIMEOUT + Duration::from_secs(30)
        ));
    }
    read_back(&shared, &mut report).await;

    // Every soak connection is closed now: the brokers' fds must come back.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut settled = true;
        for p in &mut processes {
            let at = probe(p.pid)?;
            p.rss_end_kib = at.rss;
            p.fds_end = at.fds;
            p.non_file_fds_end = at.non_file;
            p.sockets_end = at.sockets;
            settled &= at.non_file <= p.non_file_fds_start + opts.fd_margin;
        }
        if settled || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    report.requests = lock(&shared.requests).clone();
    report.expected = lock(&shared.expected).clone();
    report.errors = lock(&shared.errors).clone();
    report.error_samples = lock(&shared.error_samples).clone();
    report.disconnect_cycles = lock(&shared.disconnect_cycles).clone();
    report.stalled_closed_by_broker = shared.stalled_closed.load(Ordering::Relaxed);
    let errors: u64 = report.errors.values().sum();
    if errors > 0 {
        report.failures.push(format!(
            "{errors} errors of well-behaved clients: {:?}",
            report.errors
        ));
    }
    if report.acked_records == 0 {
        report
            .failures
            .push("no record was acknowledged: the produce traffic did not run".into());
    }
    if report.records_missing > 0 || report.records_mismatched > 0 {
        report.failures.push(format!(
            "of {} acknowledged records, {} missing and {} with other content when read back",
            report.acked_records, report.records_missing, report.records_mismatched
        ));
    }
    for p in &processes {
        if p.non_file_fds_end > p.non_file_fds_start + opts.fd_margin {
            report.failures.push(format!(
                "broker pid {}: {} open fds other than files at the end ({} sockets), {} before the soak ({} sockets; margin {})",
                p.pid, p.non_file_fds_end, p.sockets_end, p.non_file_fds_start, p.sockets_start, opts.fd_margin
            ));
        }
        let growth = p.rss_max_kib.saturating_sub(p.rss_after_ramp_kib);
        if p.rss_after_ramp_kib > 0 && growth > opts.rss_growth_limit_mib * 1024 {
            report.failures.push(format!(
                "broker pid {}: RSS grew {} MiB after the ramp-up ({} → {} MiB; limit {} MiB)",
                p.pid,
                growth / 1024,
                p.rss_after_ramp_kib / 1024,
                p.rss_max_kib / 1024,
                opts.rss_growth_limit_mib
            ));
        }
    }
    report.processes = processes
        .into_iter()
        .map(|mut p| {
            if p.samples == 0 {
                p.rss_min_kib = p.rss_start_kib;
                p.rss_max_kib = p.rss_start_kib;
                p.fds_min = p.fds_start;
                p.fds_max = p.fds_start;
            }
            p
        })
        .collect();
    Ok(report)
}

/// Creates the topic, waits until it is fully replicated, and finds (and warms up) the
/// group coordinators.
async fn setup(opts: &SoakOptions) -> Result<Topology, BenchError> {
    let mut admin_options = AdminOptions::new(&opts.bootstrap_server);
    admin_options.connection.client_id = "soak-setup".into();
    let mut admin = AdminClient::connect(admin_options)
        .await
        .map_err(|e| soak_error(format!("cannot reach {}: {e}", opts.bootstrap_server)))?;
    let topic_error = |detail: String| BenchError::Topic {
        topic: opts.topic.clone(),
        detail,
    };
    let created = admin
        .create_topics(
            &[NewTopic {
                name: opts.topic.clone(),
                partitions: Some(opts.partitions),
                replication_factor: Some(opts.replication_factor),
                assignment: None,
                configs: vec![(
                    "min.insync.replicas".into(),
                    opts.replication_factor.clamp(1, 2).to_string(),
                )],
            }],
            false,
        )
        .await
        .map_err(|e| topic_error(e.to_string()))?;
    for (_, result) in created.iter() {
        if let Err(e) = result {
            if e.code() != Some(TOPIC_ALREADY_EXISTS) {
                return Err(topic_error(e.to_string()));
            }
        }
    }
    // Fully replicated: every partition has a leader and its whole replica set in sync.
    let deadline = Instant::now() + Duration::from_secs(120);
    let partitions = loop {
        admin.refresh().await.ok();
        let described = admin
            .describe_topics(std::slice::from_ref(&opts.topic))
            .await;
        if let Ok(described) = &described {
            if let Some(t) = described.first() {
                let ready = !t.partitions.is_empty()
                    && t.partitions.iter().all(|p| {
                        p.leader.is_some() && {
                            let mut isr = p.isr.clone();
                            let mut replicas = p.replicas.clone();
                            isr.sort_unstable();
                            replicas.sort_unstable();
                            isr == replicas
                        }
                    });
                if ready {
                    break t.partitions.clone();
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(topic_error(format!(
                "not fully replicated after 120 s: {described:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let brokers = admin.brokers().clone();
    let mut leaders = Vec::new();
    for p in &partitions {
        let leader = p.leader.expect("checked above");
        let addr = brokers
            .get(&leader)
            .cloned()
            .ok_or_else(|| topic_error(format!("leader {leader} not among {brokers:?}")))?;
        leaders.push(addr);
    }
    drop(admin);

    // The group coordinators: FindCoordinator until the offsets topic exists, then an
    // OffsetFetch on the coordinator until it has loaded the group.
    let bootstrap = brokers.values().next().cloned().expect("a broker");
    let mut conn = Connection::connect_with(&bootstrap, connection_options("soak-setup".into()))
        .await
        .map_err(|e| soak_error(format!("cannot reach {bootstrap}: {e}")))?;
    let mut coordinators = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    for g in 0..opts.groups.max(1) {
        let group = group_name(g);
        let addr = loop {
            let found = find_coordinator(&mut conn, &group).await;
            match found {
                Ok(addr) => match warm_coordinator(&addr, &group, &opts.topic).await {
                    Ok(true) => break addr,
                    Ok(false) => {}
                    Err(e) => return Err(soak_error(format!("group {group}: {e}"))),
                },
                Err(Ok(code))
                    if [COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS]
                        .contains(&code) => {}
                Err(Ok(code)) => {
                    return Err(soak_error(format!(
                        "FindCoordinator for {group}: error {code}: {}",
                        client::error_message(code)
                    )))
                }
                Err(Err(e)) => return Err(soak_error(format!("FindCoordinator: {e}"))),
            }
            if Instant::now() >= deadline {
                return Err(soak_error(format!(
                    "no coordinator ready for group {group} after 180 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        coordinators.push((group, addr));
    }
    Ok(Topology {
        brokers,
        leaders,
        coordinators,
    })
}

/// FindCoordinator (v3, one key): the coordinator's `host:port`, or its error code.
async fn find_coordinator(
    conn: &mut Connection,
    group: &str,
) -> Result<String, Result<i16, ClientError>> {
    let response = conn
        .send_version(
            FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(group.to_string()))
                .with_key_type(0),
            3,
        )
        .await
        .map_err(Err)?;
    if response.error_code != NONE {
        return Err(Ok(response.error_code));
    }
    Ok(format!("{}:{}", response.host, response.port))
}

/// An OffsetFetch of `group` on `addr`: true once it answers without a loading error.
async fn warm_coordinator(addr: &str, group: &str, topic: &str) -> Result<bool, ClientError> {
    let mut conn = Connection::connect_with(addr, connection_options("soak-setup".into())).await?;
    let response = conn
        .send_version(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name(topic))
                        .with_partition_indexes(vec![0]),
                ])),
            7,
        )
        .await?;
    Ok(match response.error_code {
        NONE => true,
        COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR => false,
        code => return Err(ClientError::server(code, None)),
    })
}

/// Connects a well-behaved client, counting a failure as an error of `what`.
async fn connect(s: &Shared, addr: &str, client_id: String, what: &str) -> Option<Connection> {
    match Connection::connect_with(addr, connection_options(client_id)).await {
        Ok(conn) => Some(conn),
        Err(e) => {
            s.client_error(&format!("{what} connect"), &e);
            None
        }
    }
}

async fn producer(s: Arc<Shared>, i: usize) {
    let partitions = s.topology.leaders.len();
    let partition = i % partitions;
    let addr = s.topology.leaders[partition].clone();
    let producer = i as u32;
    let count = s.opts.records_per_batch.clamp(1, u16::MAX as usize) as u16;
    let mut conn = None;
    let mut seq = 0u32;
    while !s.stopped() {
        if conn.is_none() {
            conn = connect(&s, &addr, format!("soak-producer-{i}"), "produce").await;
        }
        if let Some(c) = conn.as_mut() {
            let request = produce_acks_all(
                &s.opts.topic,
                partition,
                encode_batch(producer, seq, count, s.opts.message_size),
            );
            match c.send(request).await {
                Ok(response) => {
                    let p = response
                        .responses
                        .first()
                        .and_then(|t| t.partition_responses.first());
                    match p {
                        Some(p) if p.error_code == NONE && p.base_offset >= 0 => {
                            lock(&s.acked[partition]).push(Acked {
                                base_offset: p.base_offset,
                                producer,
                                seq,
                                count,
                            });
                            s.ok("produce");
                        }
                        Some(p) if p.error_code != NONE => s.code_error("produce", p.error_code),
                        Some(p) => s.error("produce", "bad base offset", p.base_offset),
                        None => s.error("produce", "no partition in the response", ""),
                    }
                }
                Err(e) => {
                    s.client_error("produce", &e);
                    conn = None;
                }
            }
            seq += 1;
        }
        if s.pause(s.opts.pause).await {
            break;
        }
    }
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(256 * 1024)])])
}

async fn fetcher(s: Arc<Shared>, i: usize) {
    let partitions = s.topology.leaders.len();
    let partition = (i / 10 * 2 + i % 2) % partitions;
    let addr = s.topology.leaders[partition].clone();
    let mut conn = None;
    let mut offset = 0i64;
    while !s.stopped() {
        if conn.is_none() {
            conn = connect(&s, &addr, format!("soak-fetcher-{i}"), "fetch").await;
        }
        if let Some(c) = conn.as_mut() {
            let request = fetch_request(&s.opts.topic, partition as i32, offset, 500);
            match c.send(request).await {
                Ok(response) if response.error_code != NONE => {
                    s.code_error("fetch", response.error_code)
                }
                Ok(response) => {
                    let p = response
                        .responses
                        .first()
                        .and_then(|t| t.partitions.first());
                    match p {
                        None => s.error("fetch", "no partition in the response", ""),
                        Some(p) if p.error_code != NONE => s.code_error("fetch", p.error_code),
                        Some(p) => {
                            match check_fetched(p.records.clone(), offset, p.high_watermark) {
                                Ok(next) => {
                                    offset = next;
                                    s.ok("fetch");
                                }
                                Err(e) => s.error("fetch", "bad records", e),
                            }
                        }
                    }
                }
                Err(e) => {
                    s.client_error("fetch", &e);
                    conn = None;
                }
            }
        }
        if s.pause(s.opts.pause).await {
            break;
        }
    }
}

/// Checks the records a Fetch at `offset` returned: offsets go up by one from `offset`
/// (the first batch may start before it) and stay below the high watermark. Returns the next
/// offset to fetch.
fn check_fetched(records: Option<Bytes>, offset: i64, high_watermark: i64) -> Result<i64, String> {
    let Some(records) = records else {
        return Ok(offset);
    };
    let mut next = offset;
    for (o, _) in decode_records(records)? {
        if o < offset {
            continue;
        }
        if o != next {
            return Err(format!("record at offset {o}, expected {next}"));
        }
        next += 1;
    }
    if next > high_watermark {
        return Err(format!(
            "records up to offset {} beyond the high watermark {high_watermark}",
            next - 1
        ));
    }
    Ok(next)
}

async fn metadata(s: Arc<Shared>, i: usize) {
    let brokers: Vec<&String> = s.topology.brokers.values().collect();
    let addr = brokers[i % brokers.len()].clone();
    let mut conn = None;
    let mut all = i.is_multiple_of(2);
    while !s.stopped() {
        if conn.is_none() {
            conn = connect(&s, &addr, format!("soak-metadata-{i}"), "metadata").await;
        }
        if let Some(c) = conn.as_mut() {
            let topics = (!all).then(|| {
                vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(name(&s.opts.topic))),
                ]
            });
            let request = MetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(false);
            match c.send(request).await {
                Ok(response) => {
                    let topic = response
                        .topics
                        .iter()
                        .find(|t| t.name.as_ref().is_some_and(|n| *n.0 == *s.opts.topic));
                    match topic {
                        None => s.error("metadata", "topic missing", &s.opts.topic),
                        Some(t) if t.error_code != NONE => s.code_error("metadata", t.error_code),
                        Some(t) if t.partitions.len() != s.topology.leaders.len() => {
                            s.error("metadata", "wrong partition count", t.partitions.len())
                        }
                        Some(t) if t.partitions.iter().any(|p| p.leader_id.0 < 0) => {
                            s.error("metadata", "partition without a leader", "")
                        }
                        Some(_) if response.brokers.len() != s.topology.brokers.len() => {
                            s.error("metadata", "wrong broker count", response.brokers.len())
                        }
                        Some(_) => s.ok("metadata"),
                    }
                }
                Err(e) => {
                    s.client_error("metadata", &e);
                    conn = None;
                }
            }
            all = !all;
        }
        if s.pause(s.opts.pause).await {
            break;
        }
    }
}

/// A member's view of its group after a successful SyncGroup.
#[derive(Debug)]
struct Membership {
    member_id: StrBytes,
    generation: i32,
    partitions: Vec<i32>,
}

/// How one step of the group protocol ended.
enum Step<T> {
    Done(T),
    /// A rebalance: join again.
    Rejoin,
    /// An error (already counted).
    Failed,
}

fn subscription(topic: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_string(topic.to_string())])
        .encode(&mut buf, 1)
        .expect("a subscription always encodes");
    buf.freeze()
}

fn assignment(topic: &str, partitions: Vec<i32>) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![
            kafka_protocol::messages::consumer_protocol_assignment::TopicPartition::default()
                .with_topic(name(topic))
                .with_partitions(partitions),
        ])
        .encode(&mut buf, 1)
        .expect("an assignment always encodes");
    buf.freeze()
}

fn assigned_partitions(mut bytes: Bytes) -> Result<Vec<i32>, String> {
    use kafka_protocol::protocol::Decodable;
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    if bytes.len() < 2 {
        return Err("assignment shorter than its version".into());
    }
    let version = bytes.get_i16();
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3))
        .map_err(|e| e.to_string())?;
    Ok(a.assigned_partitions
        .into_iter()
        .flat_map(|t| t.partitions)
        .collect())
}

async fn join(s: &Shared, c: &mut Connection, group: &str) -> Step<Membership> {
    let mut member_id = StrBytes::default();
    let topic = &s.opts.topic;
    let joined = loop {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_session_timeout_ms(SESSION_TIMEOUT_MS)
            .with_rebalance_timeout_ms(SESSION_TIMEOUT_MS)
            .with_member_id(member_id.clone())
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(subscription(topic)),
            ]);
        match c.send_version(request, 5).await {
            Ok(r) if r.error_code == MEMBER_ID_REQUIRED => {
                s.expected("member_id_required");
                member_id = r.member_id;
            }
            Ok(r) if r.error_code == REBALANCE_IN_PROGRESS => {
                s.expected("rebalance_in_progress");
            }
            Ok(r) if r.error_code != NONE => {
                s.code_error("join_group", r.error_code);
                return Step::Failed;
            }
            Ok(r) => break r,
            Err(e) => {
                s.client_error("join_group", &e);
                return Step::Failed;
            }
        }
        if s.stopped() {
            return Step::Failed;
        }
    };
    s.ok("join_group");
    let member_id = joined.member_id.clone();
    let assignments = if joined.leader == member_id {
        let mut members: Vec<StrBytes> =
            joined.members.iter().map(|m| m.member_id.clone()).collect();
        members.sort();
        let n = s.topology.leaders.len() as i32;
        members
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let mine: Vec<i32> = (0..n)
                    .filter(|p| *p as usize % members.len() == k)
                    .collect();
                kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(m.clone())
                    .with_assignment(assignment(topic, mine))
            })
            .collect()
    } else {
        Vec::new()
    };
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id(joined.generation_id)
        .with_member_id(member_id.clone())
        .with_assignments(assignments);
    match c.send_version(request, 3).await {
        Ok(r) if r.error_code == REBALANCE_IN_PROGRESS => {
            s.expected("rebalance_in_progress");
            Step::Rejoin
        }
        Ok(r) if r.error_code != NONE => {
            s.code_error("sync_group", r.error_code);
            Step::Failed
        }
        Ok(r) => match assigned_partitions(r.assignment) {
            Ok(partitions) => {
                s.ok("sync_group");
                Step::Done(Membership {
                    member_id,
                    generation: joined.generation_id,
                    partitions,
                })
            }
            Err(e) => {
                s.error("sync_group", "bad assignment", e);
                Step::Failed
            }
        },
        Err(e) => {
            s.client_error("sync_group", &e);
            Step::Failed
        }
    }
}

/// One Heartbeat, OffsetCommit and OffsetFetch round of a member.
async fn member_round(s: &Shared, c: &mut Connection, group: usize, m: &Membership) -> Step<()> {
    let group_id = GroupId(StrBytes::from_string(group_name(group)));
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(group_id.clone())
        .with_generation_id(m.generation)
        .with_member_id(m.member_id.clone());
    match c.send_version(heartbeat, 3).await {
        Ok(r) if r.error_code == REBALANCE_IN_PROGRESS => {
            s.expected("rebalance_in_progress");
            return Step::Rejoin;
        }
        Ok(r) if r.error_code != NONE => {
            s.code_error("heartbeat", r.error_code);
            return Step::Failed;
        }
        Ok(_) => s.ok("heartbeat"),
        Err(e) => {
            s.client_error("heartbeat", &e);
            return Step::Failed;
        }
    }
    if m.partitions.is_empty() {
        return Step::Done(());
    }
    let value = s.commit_counters[group].fetch_add(1, Ordering::SeqCst);
    let commit = OffsetCommitRequest::default()
        .with_group_id(group_id.clone())
        .with_generation_id_or_member_epoch(m.generation)
        .with_member_id(m.member_id.clone())
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name(&s.opts.topic))
                .with_partitions(
                    m.partitions
                        .iter()
                        .map(|&p| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(value)
                                .with_committed_leader_epoch(-1)
                        })
                        .collect(),
                ),
        ]);
    match c.send_version(commit, 7).await {
        Ok(r) => {
            let codes: Vec<i16> = r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect();
            if codes.len() != m.partitions.len() {
                s.error("offset_commit", "wrong partition count", codes.len());
                return Step::Failed;
            }
            if codes.contains(&REBALANCE_IN_PROGRESS) {
                s.expected("rebalance_in_progress");
                return Step::Rejoin;
            }
            if let Some(&code) = codes.iter().find(|&&c| c != NONE) {
                s.code_error("offset_commit", code);
                return Step::Failed;
            }
            s.ok("offset_commit");
        }
        Err(e) => {
            s.client_error("offset_commit", &e);
            return Step::Failed;
        }
    }
    let fetch = OffsetFetchRequest::default()
        .with_group_id(group_id)
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(name(&s.opts.topic))
                .with_partition_indexes(m.partitions.clone()),
        ]));
    match c.send_version(fetch, 7).await {
        Ok(r) if r.error_code != NONE => {
            s.code_error("offset_fetch", r.error_code);
            Step::Failed
        }
        Ok(r) => {
            let got: Vec<(i32, i64, i16)> = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                })
                .collect();
            if got.len() != m.partitions.len() {
                s.error("offset_fetch", "wrong partition count", got.len());
                return Step::Failed;
            }
            for (p, offset, code) in got {
                if code != NONE {
                    s.code_error("offset_fetch", code);
                    return Step::Failed;
                }
                if offset < value {
                    s.error(
                        "offset_fetch",
                        "committed offset went backwards",
                        format!("partition {p}: {offset} after committing {value}"),
                    );
                    return Step::Failed;
                }
            }
            s.ok("offset_fetch");
            Step::Done(())
        }
        Err(e) => {
            s.client_error("offset_fetch", &e);
            Step::Failed
        }
    }
}

async fn leave(s: &Shared, c: &mut Connection, group: usize, member_id: &StrBytes) -> bool {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group_name(group))))
        .with_members(vec![
            kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                .with_member_id(member_id.clone()),
        ]);
    match c.send_version(request, 3).await {
        Ok(r) => {
            let code = if r.error_code != NONE {
                r.error_code
            } else {
                r.members.first().map_or(NONE, |m| m.error_code)
            };
            if code != NONE {
                s.code_error("leave_group", code);
                return false;
            }
            s.ok("leave_group");
            true
        }
        Err(e) => {
            s.client_error("leave_group", &e);
            false
        }
    }
}

async fn group_member(s: Arc<Shared>, i: usize, group: usize) {
    let addr = s.topology.coordinators[group].1.clone();
    let mut rng = Rng::new(i as u64 + 1);
    let mut conn = None;
    'members: while !s.stopped() {
        if conn.is_none() {
            conn = connect(&s, &addr, format!("soak-member-{i}"), "group").await;
            if conn.is_none() {
                if s.pause(Duration::from_secs(1)).await {
                    break;
                }
                continue;
            }
        }
        let c = conn.as_mut().expect("connected above");
        let lifetime = rng.between(Duration::from_secs(5), Duration::from_secs(20));
        let born = Instant::now();
        let mut membership = None;
        loop {
            if membership.is_none() {
                match join(&s, c, &group_name(group)).await {
                    Step::Done(m) => membership = Some(m),
                    Step::Rejoin => continue,
                    Step::Failed => {
                        conn = None;
                        if s.pause(s.opts.pause).await {
                            break 'members;
                        }
                        continue 'members;
                    }
                }
            }
            let m = membership.as_ref().expect("joined above");
            if s.stopped() || born.elapsed() >= lifetime {
                let member_id = m.member_id.clone();
                if !leave(&s, c, group, &member_id).await {
                    conn = None;
                }
                break;
            }
            match member_round(&s, c, group, m).await {
                Step::Done(()) => {}
                Step::Rejoin => {
                    // Rejoin with the same member id, as a consumer does.
                    membership = None;
                    continue;
                }
                Step::Failed => {
                    conn = None;
                    continue 'members;
                }
            }
            s.pause(s.opts.pause).await;
        }
        if s.pause(rng.between(Duration::from_secs(1), Duration::from_secs(3)))
            .await
        {
            break;
        }
    }
}

/// A request frame (size prefix, header, body) encoded with kafka-protocol.
fn frame<R: Request>(request: &R, version: i16, correlation_id: i32) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("soak-misbehaving")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, R::header_version(version))
        .expect("a header always encodes");
    request
        .encode(&mut buf, version)
        .expect("the soak's requests always encode");
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf
}

fn metadata_frame(topic: &str) -> BytesMut {
    let request = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(name(topic))),
    ]));
    frame(&request, 9, 1)
}

async fn stalled(s: Arc<Shared>, i: usize) {
    let brokers: Vec<&String> = s.topology.brokers.values().collect();
    let addr = brokers[i % brokers.len()].clone();
    let whole = metadata_frame(&s.opts.topic);
    let half = &whole[..whole.len() / 2];
    let mut stop = s.stop.clone();
    while !s.stopped() {
        let Ok(mut stream) = TcpStream::connect(&addr).await else {
            if s.pause(Duration::from_secs(1)).await {
                break;
            }
            continue;
        };
        if stream.write_all(half).await.is_ok() {
            let mut byte = [0u8; 1];
            tokio::select! {
                _ = stream.read(&mut byte) => {
                    // The broker closed it (or wrote, which it must not for half a frame).
                    s.stalled_closed.fetch_add(1, Ordering::Relaxed);
                }
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        if s.pause(Duration::from_secs(1)).await {
            break;
        }
    }
}

async fn disconnector(s: Arc<Shared>, i: usize) {
    let partitions = s.topology.leaders.len();
    let mut n = i;
    while !s.stopped() {
        let partition = n % partitions;
        let variant = n % 5;
        n += 1;
        let (addr, bytes, name) = match variant {
            0 => {
                let request = produce_acks_all(
                    &s.opts.topic,
                    partition,
                    encode_batch(u32::MAX - i as u32, n as u32, 4, s.opts.message_size),
                );
                (
                    s.topology.leaders[partition].clone(),
                    frame(&request, 8, 1),
                    "produce",
                )
            }
            1 => {
                // A long poll for more than there is: the broker parks it, then answers a
                // closed socket.
                let request = fetch_request(&s.opts.topic, partition as i32, 0, 3_000)
                    .with_min_bytes(8 << 20)
                    .with_max_bytes(8 << 20);
                (
                    s.topology.leaders[partition].clone(),
                    frame(&request, 11, 1),
                    "fetch",
                )
            }
            2 => {
                let whole = metadata_frame(&s.opts.topic);
                let half = whole[..whole.len() / 2].into();
                (s.topology.leaders[partition].clone(), half, "half_frame")
            }
            3 => {
                let group = &s.topology.coordinators[n % s.topology.coordinators.len()];
                let request = JoinGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(format!(
                        "soak-disconnect-{}",
                        n % 4
                    ))))
                    .with_session_timeout_ms(PENDING_SESSION_TIMEOUT_MS)
                    .with_rebalance_timeout_ms(PENDING_SESSION_TIMEOUT_MS)
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocols(vec![
                        kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str("range"))
                            .with_metadata(subscription(&s.opts.topic)),
                    ]);
                (group.1.clone(), frame(&request, 5, 1), "join_group")
            }
            _ => {
                let mut bytes = metadata_frame(&s.opts.topic);
                let second = metadata_frame(&s.opts.topic);
                bytes.extend_from_slice(&second[..second.len() / 2]);
                (
                    s.topology.leaders[partition].clone(),
                    bytes,
                    "metadata_then_half",
                )
            }
        };
        if let Ok(mut stream) = TcpStream::connect(&addr).await {
            if stream.write_all(&bytes).await.is_ok() {
                *lock(&s.disconnect_cycles)
                    .entry(name.to_string())
                    .or_default() += 1;
            }
            // Dropped here: closed before the answer.
        }
        if s.pause(Duration::from_millis(20)).await {
            break;
        }
    }
}

/// Reads every acknowledged record back from the partition leaders.
async fn read_back(s: &Shared, report: &mut SoakReport) {
    let size = s.opts.message_size;
    for (partition, addr) in s.topology.leaders.iter().enumerate() {
        let mut acked = std::mem::take(&mut *lock(&s.acked[partition]));
        acked.sort_by_key(|a| a.base_offset);
        report.acked_batches += acked.len() as u64;
        let records: u64 = acked.iter().map(|a| u64::from(a.count)).sum();
        report.acked_records += records;
        let Some(end) = acked.last().map(|a| a.base_offset + i64::from(a.count)) else {
            continue;
        };
        // Offset → (producer, seq, index) for every acknowledged record.
        let mut expected: HashMap<i64, (u32, u32, u16)> = HashMap::new();
        for a in &acked {
            for k in 0..a.count {
                expected.insert(a.base_offset + i64::from(k), (a.producer, a.seq, k));
            }
        }
        let mut conn =
            match Connection::connect_with(addr, connection_options("soak-read-back".into())).await
            {
                Ok(c) => c,
                Err(e) => {
                    report
                        .failures
                        .push(format!("read-back of partition {partition}: {e}"));
                    report.records_missing += records;
                    continue;
                }
            };
        let mut offset = acked[0].base_offset;
        let mut found = 0u64;
        while offset < end {
            let request =
                fetch_request(&s.opts.topic, partition as i32, offset, 0).with_max_bytes(8 << 20);
            let request = {
                let mut r = request;
                r.topics[0].partitions[0].partition_max_bytes = 8 << 20;
                r
            };
            let response = match conn.send(request).await {
                Ok(r) => r,
                Err(e) => {
                    report.failures.push(format!(
                        "read-back of partition {partition} at offset {offset}: {e}"
                    ));
                    break;
                }
            };
            let p = response
                .responses
                .first()
                .and_then(|t| t.partitions.first());
            let Some(p) = p.filter(|p| p.error_code == NONE && response.error_code == NONE) else {
                report.failures.push(format!(
                    "read-back of partition {partition} at offset {offset}: error {:?}",
                    p.map(|p| p.error_code)
                ));
                break;
            };
            let decoded = match p.records.clone().map(decode_records).transpose() {
                Ok(d) => d.unwrap_or_default(),
                Err(e) => {
                    report.failures.push(format!(
                        "read-back of partition {partition} at offset {offset}: {e}"
                    ));
                    break;
                }
            };
            let before = offset;
            for (o, value) in decoded {
                if o < offset {
                    continue;
                }
                offset = o + 1;
                if let Some(&(producer, seq, index)) = expected.get(&o) {
                    found += 1;
                    if value.as_deref() == Some(&record_value(producer, seq, index, size)[..]) {
                        report.records_verified += 1;
                    } else {
                        report.records_mismatched += 1;
                    }
                }
            }
            if offset == before {
                // Nothing more below the high watermark.
                break;
            }
        }
        report.records_missing += records - found;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_values_are_deterministic_and_distinct() {
        let a = record_value(1, 2, 3, 100);
        assert_eq!(a.len(), 100);
        assert_eq!(a, record_value(1, 2, 3, 100));
        assert_ne!(a, record_value(1, 2, 4, 100));
        assert_ne!(a, record_value(2, 2, 3, 100));
        assert_eq!(record_value(1, 2, 3, 4).len(), 10);
    }

    #[test]
    fn fetched_batches_decode_and_a_partial_tail_is_left() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&encode_batch(7, 0, 3, 20));
        let second = encode_batch(7, 1, 2, 20);
        // The second batch at offsets 3-4, cut short.
        let mut second = BytesMut::from(&second[..]);
        second[..8].copy_from_slice(&3i64.to_be_bytes());
        data.extend_from_slice(&second[..second.len() - 5]);
        let records = decode_records(data.freeze()).expect("decodes");
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].0, 2);
        assert_eq!(
            records[1].1.as_deref(),
            Some(&record_value(7, 0, 1, 20)[..])
        );
    }

    #[test]
    fn fetch_checks_catch_a_gap_and_the_high_watermark() {
        let batch = encode_batch(1, 0, 3, 10);
        assert_eq!(check_fetched(Some(batch.clone()), 0, 3), Ok(3));
        assert_eq!(check_fetched(Some(batch.clone()), 1, 3), Ok(3));
        assert!(check_fetched(Some(batch.clone()), 0, 2).is_err());
        let mut moved = BytesMut::from(&batch[..]);
        moved[..8].copy_from_slice(&5i64.to_be_bytes());
        assert!(check_fetched(Some(moved.freeze()), 3, 10).is_err());
        assert_eq!(check_fetched(None, 4, 10), Ok(4));
    }

    #[test]
    fn assignments_round_trip() {
        let bytes = assignment("t", vec![0, 3, 6]);
        assert_eq!(assigned_partitions(bytes), Ok(vec![0, 3, 6]));
        assert_eq!(assigned_partitions(Bytes::new()), Ok(vec![]));
    }
}
