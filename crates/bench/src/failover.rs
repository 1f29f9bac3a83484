//! `gregor bench failover`: what clients see when a broker goes away under load.
//!
//! A producer sends at a fixed rate to every partition of the topic; once each partition
//! has acknowledged a message, the broker process is sent SIGKILL (a crash) or SIGTERM (a
//! controlled shutdown). The run measures, from the signal:
//! - `metadata_s`: until the metadata (asked of the other brokers every 50 ms) shows a new,
//!   live leader for every partition the broker led;
//! - `resumed_s`: until every one of those partitions acknowledged a message again (the
//!   largest of the per-partition times; `resumed_p50_s` is their median);
//! - `exit_s` (SIGTERM): until the process is gone;
//! - `failed`: delivery reports with an error (a rolling restart should see none).
//!
//! The messages go round-robin over the partitions, from `producers` librdkafka producers
//! (partition `p` from producer `p % producers`). librdkafka puts one partition in each
//! ProduceRequest, and a broker serves one request of a connection at a time (as Kafka), so
//! one producer acknowledges at most one partition per acks=all round trip per broker: with
//! 1,000 partitions on a broker and a round trip of 140 ms (a loaded machine) one pass over
//! them takes 140 s, more than the warm-up may. Several producers (several connections per
//! broker) take such passes side by side.
//!
//! `sample` limits the produce to that many partitions, spread evenly over the topic (every
//! k-th one): the warm-up and `resumed_s` then cover the sampled partitions, while
//! `metadata_s` still covers every partition the broker led. With 10,000 partitions this is
//! what makes a run possible at all on a small machine (one acks=all round trip per partition
//! and connection, above).
//!
//! Like the other modes it speaks only the Kafka protocol (and sends a signal to a pid on
//! this machine), so the same figures can be taken against Apache Kafka.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

use crate::{Acks, BenchError};

/// The signal sent to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL (`kill -9`): a crash.
    Kill,
    /// SIGTERM: a controlled shutdown.
    Term,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Kill => "KILL",
            Signal::Term => "TERM",
        }
    }
}

/// What `gregor bench failover` was asked for.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// `host:port[,host:port...]`, the surviving brokers included.
    pub bootstrap_server: String,
    /// An existing topic.
    pub topic: String,
    /// The broker to stop: its `broker.id` ...
    pub broker_id: i32,
    /// ... and its process id on this machine.
    pub broker_pid: u32,
    /// SIGKILL or SIGTERM.
    pub signal: Signal,
    /// Messages per second over all partitions.
    pub rate: u64,
    /// Producer `acks`.
    pub acks: Acks,
    /// Bytes per message value.
    pub message_size: usize,
    /// Extra librdkafka producer properties, applied last.
    pub producer_properties: Vec<(String, String)>,
    /// librdkafka producers the partitions are spread over (at least 1).
    pub producers: usize,
    /// Produce to this many partitions only, spread evenly (`None`: every partition).
    pub sample: Option<usize>,
    /// Give up waiting for a phase after this long.
    pub timeout: Duration,
}

/// The figures of one failover run (see the module docs).
#[derive(Debug, Clone)]
pub struct FailoverReport {
    /// SIGKILL or SIGTERM.
    pub signal: Signal,
    /// Partitions of the topic.
    pub partitions: usize,
    /// Partitions the broker led when it was signalled.
    pub moved: usize,
    /// Partitions produced to (all of them unless `sample` was given).
    pub sampled: usize,
    /// Of those, the ones the broker led: `resumed_s` covers these.
    pub sampled_moved: usize,
    /// Producers the partitions were spread over.
    pub producers: usize,
    /// Until every partition had acknowledged a message (before the signal).
    pub warm_up: Duration,
    /// When the signal was sent, in milliseconds since the Unix epoch (to line up with logs).
    pub signal_unix_ms: u64,
    /// Signal → the metadata shows a live leader other than the broker for every moved
    /// partition.
    pub metadata: Option<Duration>,
    /// Signal → every moved partition acknowledged a message again.
    pub resumed_max: Option<Duration>,
    /// The median of the moved partitions' times.
    pub resumed_p50: Option<Duration>,
    /// Signal → the process is gone (SIGTERM runs; SIGKILL is immediate).
    pub exit: Option<Duration>,
    /// Messages handed to the producer.
    pub sent: u64,
    /// Messages acknowledged.
    pub delivered: u64,
    /// Delivery reports with an error.
    pub failed: u64,
    /// The first delivery error, if any.
    pub first_error: Option<String>,
}

impl std::fmt::Display for FailoverReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: Option<Duration>| {
            d.map_or_else(|| "none".to_string(), |d| format!("{:.3}", d.as_secs_f64()))
        };
        writeln!(
            f,
            "failover: signal={} partitions={} moved={} signal_unix_ms={} metadata_s={} resumed_s={} resumed_p50_s={} exit_s={} sampled={} sampled_moved={}",
            self.signal.name(),
            self.partitions,
            self.moved,
            self.signal_unix_ms,
            secs(self.metadata),
            secs(self.resumed_max),
            secs(self.resumed_p50),
            secs(self.exit),
            self.sampled,
            self.sampled_moved,
        )?;
        writeln!(
            f,
            "failover: sent={} delivered={} failed={} producers={} warm_up_s={:.3}{}",
            self.sent,
            self.delivered,
            self.failed,
            self.producers,
            self.warm_up.as_secs_f64(),
            self.first_error
                .as_ref()
                .map(|e| format!(" first_error={e:?}"))
                .unwrap_or_default()
        )
    }
}

/// Per-partition delivery bookkeeping, shared with librdkafka's delivery callback.
#[derive(Debug)]
struct Deliveries {
    start: Instant,
    /// Nanoseconds since `start` when the signal was sent (0: not yet).
    signal_ns: AtomicU64,
    /// Per partition: whether it acknowledged anything yet (warm-up).
    warm: Mutex<Vec<bool>>,
    /// Per partition: the first acknowledgement after the signal.
    resumed: Mutex<Vec<Option<Duration>>>,
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<KafkaError>>,
}

/// The context of every producer of a run: they share one [`Deliveries`].
#[derive(Debug, Clone)]
struct Shared(Arc<Deliveries>);

impl std::ops::Deref for Shared {
    type Target = Deliveries;

    fn deref(&self) -> &Deliveries {
        &self.0
    }
}

impl ClientContext for Shared {}

impl ProducerContext for Shared {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(msg) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                let Ok(p) = usize::try_from(msg.partition()) else {
                    return;
                };
                if let Some(w) = self
                    .warm
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(p)
                {
                    *w = true;
                }
                let signal_ns = self.signal_ns.load(Ordering::Acquire);
                if signal_ns > 0 {
                    let now = self.start.elapsed();
                    let mut resumed = self.resumed.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(slot) = resumed.get_mut(p) {
                        if slot.is_none() {
                            *slot = Some(now.saturating_sub(Duration::from_nanos(signal_ns)));
                        }
                    }
                }
            }
            Err((err, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                if first.is_none() {
                    *first = Some(err.clone());
                }
            }
        }
    }
}

/// Runs one failover measurement.
pub fn failover(opts: &FailoverOptions) -> Result<FailoverReport, BenchError> {
    let topic_err = |detail: String| BenchError::Topic {
        topic: opts.topic.clone(),
        detail,
    };
    let leaders = leaders(&opts.bootstrap_server, &opts.topic)?;
    let moved: Vec<usize> = leaders
        .iter()
        .enumerate()
        .filter(|(_, &l)| l == opts.broker_id)
        .map(|(p, _)| p)
        .collect();
    if moved.is_empty() {
        return Err(topic_err(format!(
            "broker {} leads no partition of the topic",
            opts.broker_id
        )));
    }
    let sampled = sample_partitions(leaders.len(), opts.sample);
    // The moved partitions produced to: `resumed_s` waits for these.
    let sampled_moved: Vec<usize> = moved
        .iter()
        .copied()
        .filter(|p| sampled.binary_search(p).is_ok())
        .collect();
    if sampled_moved.is_empty() {
        return Err(topic_err(format!(
            "no sampled partition is led by broker {}: sample more partitions",
            opts.broker_id
        )));
    }
    let deliveries = Shared(Arc::new(Deliveries {
        start: Instant::now(),
        signal_ns: AtomicU64::new(0),
        warm: Mutex::new(vec![false; leaders.len()]),
        resumed: Mutex::new(vec![None; leaders.len()]),
        delivered: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        first_error: Mutex::new(None),
    }));
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &opts.bootstrap_server)
        .set("acks", opts.acks.as_str())
        .set(
            "enable.idempotence",
            if opts.acks == Acks::All {
                "true"
            } else {
                "false"
            },
        )
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("retry.backoff.ms", "50")
        .set("log_level", "2");
    for (k, v) in &opts.producer_properties {
        config.set(k, v);
    }
    let producers = (0..opts.producers.max(1))
        .map(|_| {
            config
                .create_with_context::<_, BaseProducer<Shared>>(deliveries.clone())
                .map_err(|source| BenchError::Client {
                    client: "producer",
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let payload = vec![b'x'; opts.message_size];
    let interval = Duration::from_secs_f64(1.0 / opts.rate.max(1) as f64);
    let mut sender = Sender {
        producers: &producers,
        topic: &opts.topic,
        payload: &payload,
        partitions: &sampled,
        interval,
        next_at: Instant::now(),
        sent: 0,
    };

    // Warm up: every partition acknowledged something.
    let warm_started = Instant::now();
    let deadline = warm_started + opts.timeout;
    loop {
        let (warm, cold) = {
            let warm = deliveries.warm.lock().unwrap_or_else(|e| e.into_inner());
            let cold: Vec<usize> = sampled.iter().copied().filter(|&p| !warm[p]).collect();
            (sampled.len() - cold.len(), cold)
        };
        if cold.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let first: Vec<String> = cold.iter().take(10).map(|p| p.to_string()).collect();
            let queued: i32 = producers.iter().map(|p| p.in_flight_count()).sum();
            return Err(topic_err(format!(
                "not every partition produced to acknowledged a message during warm-up: {warm} of {} did in {:.0} s \
                 (not yet: {}{}; {} messages sent, {} acknowledged, {queued} waiting in the producers, \
                 {} failed{}). librdkafka sends one partition per ProduceRequest and a broker serves a \
                 connection's requests one at a time, so with many partitions per broker more \
                 --producers (connections), a longer --timeout-secs or a --sample are needed",
                sampled.len(),
                warm_started.elapsed().as_secs_f64(),
                first.join(", "),
                if cold.len() > first.len() { ", ..." } else { "" },
                sender.sent,
                deliveries.delivered.load(Ordering::Relaxed),
                deliveries.failed.load(Ordering::Relaxed),
                deliveries
                    .first_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|e| format!(", the first: {e}"))
                    .unwrap_or_default(),
            )));
        }
        sender.step()?;
    }
    let warm_up = warm_started.elapsed();

    // The metadata watcher asks the other brokers, from its own client.
    let survivors = leaders_client(&opts.bootstrap_server)?;
    let metadata_done = Arc::new(AtomicBool::new(false));
    let signalled = Instant::now();
    let signal_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    deliveries.signal_ns.store(
        (signalled - deliveries.start).as_nanos().max(1) as u64,
        Ordering::Release,
    );
    send_signal(opts.broker_pid, opts.signal)
        .map_err(|e| topic_err(format!("cannot signal pid {}: {e}", opts.broker_pid)))?;
    let watcher = {
        let done = Arc::clone(&metadata_done);
        let topic = opts.topic.clone();
        let moved = moved.clone();
        let broker = opts.broker_id;
        let timeout = opts.timeout;
        thread::spawn(move || {
            let deadline = signalled + timeout;
            while Instant::now() < deadline {
                if let Ok(md) = survivors.fetch_metadata(Some(&topic), Duration::from_secs(2)) {
                    let ok = md
                        .topics()
                        .iter()
                        .find(|t| t.name() == topic)
                        .is_some_and(|t| {
                            moved.iter().all(|&p| {
                                t.partitions()
                                    .iter()
                                    .find(|m| m.id() == p as i32)
                                    .is_some_and(|m| m.leader() >= 0 && m.leader() != broker)
                            })
                        });
                    if ok {
                        done.store(true, Ordering::Release);
                        return Some(signalled.elapsed());
                    }
                }
                thread::sleep(Duration::from_millis(50));
            }
            None
        })
    };
    let mut exit = (opts.signal == Signal::Kill).then_some(Duration::ZERO);
    let deadline = signalled + opts.timeout;
    loop {
        sender.step()?;
        if exit.is_none() && !process_alive(opts.broker_pid) {
            exit = Some(signalled.elapsed());
        }
        let resumed = {
            let resumed = deliveries.resumed.lock().unwrap_or_else(|e| e.into_inner());
            sampled_moved.iter().all(|&p| resumed[p].is_some())
        };
        if (resumed && exit.is_some() && metadata_done.load(Ordering::Acquire))
            || Instant::now() > deadline
        {
            break;
        }
    }
    let metadata = watcher.join().unwrap_or(None);
    // A little more load after the last phase, then every report.
    let tail = Instant::now() + Duration::from_secs(1);
    while Instant::now() < tail {
        sender.step()?;
    }
    let sent = sender.sent;
    for producer in &producers {
        if let Err(source) = producer.flush(Duration::from_secs(60)) {
            return Err(BenchError::Produce { sent, source });
        }
    }
    let ctx = &deliveries;
    let mut times: Vec<Duration> = {
        let resumed = ctx.resumed.lock().unwrap_or_else(|e| e.into_inner());
        sampled_moved.iter().filter_map(|&p| resumed[p]).collect()
    };
    times.sort();
    let resumed_max = (times.len() == sampled_moved.len())
        .then(|| times.last().copied())
        .flatten();
    let resumed_p50 = times.get(times.len() / 2).copied();
    let first_error = ctx
        .first_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|e| e.to_string());
    let report = FailoverReport {
        signal: opts.signal,
        partitions: leaders.len(),
        moved: moved.len(),
        sampled: sampled.len(),
        sampled_moved: sampled_moved.len(),
        producers: producers.len(),
        warm_up,
        signal_unix_ms,
        metadata,
        resumed_max,
        resumed_p50,
        exit,
        sent,
        delivered: ctx.delivered.load(Ordering::Relaxed),
        failed: ctx.failed.load(Ordering::Relaxed),
        first_error,
    };
    Ok(report)
}

/// `sample` partitions of `partitions`, evenly spread and in order (all of them when `sample`
/// is `None` or not smaller).
fn sample_partitions(partitions: usize, sample: Option<usize>) -> Vec<usize> {
    match sample {
        Some(n) if n < partitions => (0..n.max(1)).map(|i| i * partitions / n.max(1)).collect(),
        _ => (0..partitions).collect(),
    }
}

/// Sends at a fixed rate, round-robin over the partitions produced to (partition `p` from
/// producer `p % producers`), serving delivery reports.
struct Sender<'a> {
    producers: &'a [BaseProducer<Shared>],
    topic: &'a str,
    payload: &'a [u8],
    partitions: &'a [usize],
    interval: Duration,
    next_at: Instant,
    sent: u64,
}

impl Sender<'_> {
    fn step(&mut self) -> Result<(), BenchError> {
        let now = Instant::now();
        if now < self.next_at {
            self.poll_all(self.next_at - now);
            return Ok(());
        }
        self.next_at += self.interval;
        let partition = self.partitions[(self.sent % self.partitions.len() as u64) as usize];
        let producer = &self.producers[partition % self.producers.len()];
        let partition = partition as i32;
        let record = BaseRecord::<(), [u8], ()>::with_opaque_to(self.topic, ())
            .payload(self.payload)
            .partition(partition);
        match producer.send(record) {
            Ok(()) => self.sent += 1,
            Err((
                KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                _,
            )) => {
                self.poll_all(Duration::from_millis(10));
            }
            Err((source, _)) => {
                return Err(BenchError::Produce {
                    sent: self.sent,
                    source,
                })
            }
        }
        self.poll_all(Duration::ZERO);
        Ok(())
    }

    /// Serves every producer's delivery reports, waiting up to `wait` in all (one producer
    /// waits on its own queue; several are polled, then the thread sleeps a millisecond).
    fn poll_all(&self, wait: Duration) {
        if let [producer] = self.producers {
            producer.poll(wait);
            return;
        }
        for producer in self.producers {
            producer.poll(Duration::ZERO);
        }
        if !wait.is_zero() {
            thread::sleep(wait.min(Duration::from_millis(1)));
        }
    }
}

fn leaders_client(bootstrap: &str) -> Result<BaseConsumer, BenchError> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "2")
        .create()
        .map_err(|source| BenchError::Client {
            client: "consumer",
            source,
        })
}

/// The leader of each partition of `topic`, by partition id.
fn leaders(bootstrap: &str, topic: &str) -> Result<Vec<i32>, BenchError> {
    let client = leaders_client(bootstrap)?;
    let md = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| BenchError::Topic {
            topic: topic.to_string(),
            detail: format!("metadata: {e}"),
        })?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .filter(|t| t.error().is_none() && !t.partitions().is_empty())
        .ok_or_else(|| BenchError::Topic {
            topic: topic.to_string(),
            detail: "unknown topic (create it first)".into(),
        })?;
    let mut leaders = vec![-1; t.partitions().len()];
    for p in t.partitions() {
        if let Some(slot) = usize::try_from(p.id())
            .ok()
            .and_then(|i| leaders.get_mut(i))
        {
            *slot = p.leader();
        }
    }
    Ok(leaders)
}

fn send_signal(pid: u32, signal: Signal) -> std::io::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{}", signal.name()))
        .arg(pid.to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("kill exited with {status}")))
    }
}

/// Whether `pid` still runs (a zombie waiting for its parent counts as gone).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: "pid (comm) S ...".
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::sample_partitions;

    #[test]
    fn a_sample_is_spread_over_the_topic_in_order() {
        assert_eq!(sample_partitions(10, Some(5)), vec![0, 2, 4, 6, 8]);
        assert_eq!(sample_partitions(10000, Some(300)).len(), 300);
        let s = sample_partitions(10000, Some(300));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(*s.last().unwrap() < 10000 && *s.last().unwrap() >= 9900);
        assert_eq!(sample_partitions(4, None), vec![0, 1, 2, 3]);
        assert_eq!(sample_partitions(4, Some(9)), vec![0, 1, 2, 3]);
        assert_eq!(sample_partitions(4, Some(0)), vec![0]);
    }
}
