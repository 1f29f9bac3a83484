//! `gregor bench`: a load generator that measures any Kafka-compatible broker through
//! librdkafka (the `rdkafka` crate, built from source).
//!
//! This crate owns the three benchmark modes and their figures:
//! - [`produce`]: sends `messages` records of `message_size` bytes (optionally at a fixed
//!   rate) and measures throughput and the send → delivery-report latency;
//! - [`consume`]: reads `messages` records from the start of every partition and measures
//!   throughput;
//! - [`end_to_end`]: produces at a fixed rate while a consumer reads the same topic, and
//!   measures the latency from the timestamp written into each message to its receipt;
//! - [`failover`]: produces at a fixed rate, sends SIGKILL or SIGTERM to one broker, and
//!   measures until its partitions have new leaders and accept produce again;
//! - [`topics`]: creates many partitions at once and measures until they are online, with
//!   Metadata and Produce latency to an existing topic meanwhile and the broker's RSS;
//! - [`soak`]: a thousand connections of mixed traffic plus stalled and disconnecting ones
//!   for a fixed time, then checks for errors, lost records, fd and RSS growth (this one
//!   speaks through the project's own client crate, not librdkafka).
//!
//! Each run can also watch the broker process (`broker_pid`): CPU time from
//! `/proc/<pid>/stat` (utime + stime, before and after) and peak RSS from
//! `/proc/<pid>/status` (`VmHWM`, plus `VmRSS` sampled every second).
//!
//! It does not parse command lines (the `cli` crate does) and knows nothing about Gregor's
//! internals: it speaks to the broker only through the Kafka protocol (librdkafka, and for
//! the soak the `client` crate), so the same figures can be taken against Apache Kafka. It is kept out of the server's default build: only
//! `cargo build -p cli --features bench` links librdkafka.

mod failover;
mod latency;
mod procfs;
mod run;
mod soak;
mod topics;

pub use failover::{failover, FailoverOptions, FailoverReport, Signal};
pub use latency::LatencySummary;
pub use procfs::{BrokerProbe, BrokerUsage};
pub use run::{consume, end_to_end, produce};
pub use soak::{soak, ProcessFigures, SoakOptions, SoakReport};
pub use topics::{topics, TopicsOptions, TopicsReport};

use std::fmt;
use std::time::Duration;

/// Errors of a benchmark run; each names what to check.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// librdkafka refused a configuration property or failed to create a client.
    #[error("cannot create the {client} client (check --producer-property / --consumer-property): {source}")]
    Client {
        /// `producer`, `consumer` or `admin`.
        client: &'static str,
        /// The librdkafka error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// The topic could not be created or did not become ready.
    #[error("topic {topic}: {detail}")]
    Topic {
        /// The topic name.
        topic: String,
        /// What went wrong.
        detail: String,
    },
    /// Sending a message failed with an error other than a full local queue.
    #[error("produce failed after {sent} messages: {source}")]
    Produce {
        /// Messages handed to librdkafka before the failure.
        sent: u64,
        /// The librdkafka error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// The consumer stopped receiving before the expected count arrived.
    #[error("consumer received {received} of {expected} messages; nothing new for {idle:?} (is the topic filled? see --messages)")]
    ConsumeStalled {
        /// Messages received.
        received: u64,
        /// Messages expected.
        expected: u64,
        /// How long nothing arrived.
        idle: Duration,
    },
    /// A consumer error that is not transient.
    #[error("consume failed after {received} messages: {source}")]
    Consume {
        /// Messages received before the failure.
        received: u64,
        /// The librdkafka error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// Delivery reports did not all arrive in time.
    #[error("{pending} messages still in flight after {timeout:?} (is the broker up?)")]
    FlushTimeout {
        /// Messages not yet acknowledged.
        pending: i32,
        /// How long the flush waited.
        timeout: Duration,
    },
    /// The broker process could not be observed.
    #[error("cannot read /proc/{pid}/{file}: {source} (is --broker-pid right?)")]
    Proc {
        /// The broker's pid.
        pid: u32,
        /// `stat` or `status`.
        file: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The soak could not run (cluster unreachable, topic or groups not ready).
    #[error("soak: {detail}")]
    Soak {
        /// What went wrong.
        detail: String,
    },
    /// The end-to-end consumer thread panicked.
    #[error("the consumer thread panicked")]
    ConsumerThread,
}

/// `acks` of the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: fire and forget.
    None,
    /// `acks=1`: the leader has appended.
    Leader,
    /// `acks=all`: every in-sync replica has it.
    All,
}

impl Acks {
    /// The value of librdkafka's `acks` property.
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

/// `compression.type` of the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// gzip (zlib).
    Gzip,
    /// snappy.
    Snappy,
    /// lz4.
    Lz4,
    /// zstd.
    Zstd,
}

impl Compression {
    /// The value of librdkafka's `compression.type` property.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// `host:port[,host:port...]`.
    pub bootstrap_server: String,
    /// Topic to write or read.
    pub topic: String,
    /// Bytes per message value (no key).
    pub message_size: usize,
    /// Messages to send or to read.
    pub messages: u64,
    /// Producer `acks`.
    pub acks: Acks,
    /// Create the topic with this many partitions if it does not exist.
    pub partitions: Option<i32>,
    /// Replication factor when the topic is created.
    pub replication_factor: i32,
    /// Producer `compression.type`.
    pub compression: Compression,
    /// Fixed send rate in messages per second; `None` sends as fast as possible.
    pub rate: Option<u64>,
    /// Extra librdkafka producer properties, applied last.
    pub producer_properties: Vec<(String, String)>,
    /// Extra librdkafka consumer properties, applied last.
    pub consumer_properties: Vec<(String, String)>,
    /// Pid of the broker process to watch (CPU and RSS), if on this machine.
    pub broker_pid: Option<u32>,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Give up when nothing is delivered or received for this long.
    pub timeout: Duration,
}

/// The figures of one side (producer or consumer) of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// `produce`, `consume` or `end-to-end`.
    pub kind: &'static str,
    /// Messages delivered (produce) or received (consume).
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// Wall time from the first send (or the assignment) to the last delivery (or receipt).
    pub elapsed: Duration,
    /// Messages whose delivery failed.
    pub errors: u64,
    /// Latency: send → delivery report (produce) or message timestamp → receipt (end-to-end).
    pub latency: Option<LatencySummary>,
    /// Produce or Fetch requests sent, as counted by librdkafka's statistics.
    pub requests: Option<u64>,
    /// The broker's CPU and memory over the run.
    pub broker: Option<BrokerUsage>,
}

impl Report {
    /// Payload megabytes (10^6 bytes) per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Messages per second.
    pub fn msgs_per_sec(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Prints `key=value` lines, one figure group per line, prefixed by the mode, so that
/// scripts (and the smoke test) can parse them.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.kind;
        writeln!(
            f,
            "{k}: messages={} bytes={} seconds={:.3} MB/s={:.1} msgs/s={:.0} errors={}",
            self.messages,
            self.bytes,
            self.elapsed.as_secs_f64(),
            self.mb_per_sec(),
            self.msgs_per_sec(),
            self.errors
        )?;
        if let Some(l) = &self.latency {
            writeln!(
                f,
                "{k}: latency_ms p50={:.3} p99={:.3} p999={:.3} max={:.3} samples={}",
                l.p50_ms(),
                l.p99_ms(),
                l.p999_ms(),
                l.max_ms(),
                l.samples
            )?;
        }
        if let Some(r) = self.requests {
            writeln!(f, "{k}: requests={r}")?;
        }
        if let Some(b) = &self.broker {
            let gb = self.bytes as f64 / 1e9;
            write!(f, "{k}: broker cpu_s={:.3}", b.cpu_seconds)?;
            if gb > 0.0 {
                write!(f, " cpu_s_per_GB={:.3}", b.cpu_seconds / gb)?;
            }
            if let Some(r) = self.requests.filter(|&r| r > 0) {
                write!(
                    f,
                    " cpu_us_per_request={:.2}",
                    b.cpu_seconds * 1e6 / r as f64
                )?;
            }
            writeln!(
                f,
                " peak_rss_MiB={:.1} hwm_rss_MiB={:.1}",
                b.peak_rss_sampled_kib as f64 / 1024.0,
                b.hwm_rss_kib as f64 / 1024.0
            )?;
        }
        Ok(())
    }
}
