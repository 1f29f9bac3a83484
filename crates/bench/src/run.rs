//! The three modes: produce, consume, end-to-end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::{BenchError, BenchOptions, BrokerProbe, LatencySummary, Report};

/// How often librdkafka reports statistics (used for the request counts).
const STATS_INTERVAL_MS: u64 = 200;

/// Counts requests of one API from librdkafka's statistics.
#[derive(Debug)]
struct StatsContext {
    api: &'static str,
    requests: AtomicU64,
}

impl ClientContext for StatsContext {
    fn stats(&self, statistics: Statistics) {
        let n: i64 = statistics
            .brokers
            .values()
            .filter_map(|b| b.req.get(self.api))
            .sum();
        self.requests.store(n.max(0) as u64, Ordering::Relaxed);
    }
}

/// Collects delivery reports: latency samples (send time travels as the opaque, in
/// nanoseconds since the run's start) and counts.
#[derive(Debug)]
struct ProduceContext {
    stats: StatsContext,
    start: Instant,
    delivered: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<KafkaError>>,
    latencies_us: Mutex<Vec<u32>>,
    /// Read the clock for every delivery report (fixed rate, final flush); otherwise use
    /// `clock_ns`. At full speed a clock read per message was a third of the sending thread.
    precise: AtomicBool,
    /// A recent `start.elapsed()` in nanoseconds, refreshed by the sending loop right before
    /// each poll at full speed (latencies there are queueing-bound: hundreds of ms).
    clock_ns: AtomicU64,
}

impl ProduceContext {
    /// Nanoseconds since `start`, read now; also refreshes `clock_ns`.
    fn tick(&self) -> u64 {
        let now = self.start.elapsed().as_nanos() as u64;
        self.clock_ns.store(now, Ordering::Relaxed);
        now
    }
}

impl ClientContext for ProduceContext {
    fn stats(&self, statistics: Statistics) {
        self.stats.stats(statistics);
    }
}

impl ProducerContext for ProduceContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_at_ns: usize) {
        match result {
            Ok(_) => {
                let now = if self.precise.load(Ordering::Relaxed) {
                    self.start.elapsed().as_nanos() as u64
                } else {
                    self.clock_ns.load(Ordering::Relaxed)
                };
                let us = now.saturating_sub(sent_at_ns as u64) / 1000;
                self.delivered.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut v) = self.latencies_us.lock() {
                    v.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
            Err((e, _)) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = Some(e.clone());
                }
            }
        }
    }
}

impl ConsumerContext for StatsContext {}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A message value of `size` bytes: letters (so codecs see text-like data, as in Kafka's
/// own perf tool), the first 8 bytes overwritten per message with the send timestamp in end-to-end mode.
fn make_payload(size: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'A' + (x % 26) as u8
        })
        .collect()
}

fn producer_config(opts: &BenchOptions) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &opts.bootstrap_server)
        .set("acks", opts.acks.as_str())
        .set("compression.type", opts.compression.as_str())
        .set("statistics.interval.ms", STATS_INTERVAL_MS.to_string());
    for (k, v) in &opts.producer_properties {
        c.set(k, v);
    }
    c
}

fn consumer_config(opts: &BenchOptions) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &opts.bootstrap_server)
        .set("group.id", format!("gregor-bench-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("statistics.interval.ms", STATS_INTERVAL_MS.to_string());
    for (k, v) in &opts.consumer_properties {
        c.set(k, v);
    }
    c
}

/// Creates the topic if `--partitions` was given (an existing topic is fine), then waits
/// until the metadata shows every partition with a leader.
fn ensure_topic(opts: &BenchOptions) -> Result<(), BenchError> {
    let Some(partitions) = opts.partitions else {
        return Ok(());
    };
    let topic_err = |detail: String| BenchError::Topic {
        topic: opts.topic.clone(),
        detail,
    };
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &opts.bootstrap_server)
        .create()
        .map_err(|source| BenchError::Client {
            client: "admin",
            source,
        })?;
    let new = NewTopic::new(
        &opts.topic,
        partitions,
        TopicReplication::Fixed(opts.replication_factor),
    );
    let admin_opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| topic_err(format!("cannot start a runtime for the admin client: {e}")))?;
    let results = rt
        .block_on(admin.create_topics([&new], &admin_opts))
        .map_err(|e| topic_err(format!("CreateTopics failed: {e}")))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(topic_err(format!("CreateTopics answered {code}"))),
        }
    }
    // Wait until every partition has a leader.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let md = admin
            .inner()
            .fetch_metadata(Some(&opts.topic), Duration::from_secs(5));
        if let Ok(md) = md {
            if let Some(t) = md.topics().iter().find(|t| t.name() == opts.topic) {
                if t.error().is_none()
                    && !t.partitions().is_empty()
                    && t.partitions().iter().all(|p| p.leader() >= 0)
                {
                    return Ok(());
                }
            }
        }
        if Instant::now() > deadline {
            return Err(topic_err("no leader for every partition after 30 s".into()));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Prints a progress line to stderr once a second.
struct Progress {
    kind: &'static str,
    enabled: bool,
    start: Instant,
    next: Instant,
    last_count: u64,
    last_at: Instant,
}

impl Progress {
    fn new(kind: &'static str, enabled: bool) -> Progress {
        let now = Instant::now();
        Progress {
            kind,
            enabled,
            start: now,
            next: now + Duration::from_secs(1),
            last_count: 0,
            last_at: now,
        }
    }

    fn tick(&mut self, count: u64, msg_size: usize, probe: Option<&mut BrokerProbe>) {
        let now = Instant::now();
        if !self.enabled || now < self.next {
            return;
        }
        self.next = now + Duration::from_secs(1);
        let dt = now.duration_since(self.last_at).as_secs_f64().max(1e-9);
        let rate = (count - self.last_count) as f64 / dt;
        self.last_count = count;
        self.last_at = now;
        let rss = probe
            .and_then(|p| p.sample().ok())
            .map(|kib| format!(" broker_rss_MiB={:.1}", kib as f64 / 1024.0))
            .unwrap_or_default();
        eprintln!(
            "{}: t={:.1}s messages={} MB/s={:.1} msgs/s={:.0}{}",
            self.kind,
            now.duration_since(self.start).as_secs_f64(),
            count,
            rate * msg_size as f64 / 1e6,
            rate,
            rss
        );
    }
}

/// Sends `opts.messages` messages and waits for every delivery report. Latency is send →
/// delivery report. The topic is created first when `opts.partitions` is set.
pub fn produce(opts: &BenchOptions) -> Result<Report, BenchError> {
    ensure_topic(opts)?;
    let mut probe = opts.broker_pid.map(BrokerProbe::start).transpose()?;
    let report = produce_inner(opts, probe.as_mut(), "produce", false)?;
    let broker = probe.map(BrokerProbe::finish).transpose()?;
    Ok(Report { broker, ..report })
}

/// `stamp_time`: write the wall-clock send time into the first 8 bytes of each message (for
/// the end-to-end consumer).
fn produce_inner(
    opts: &BenchOptions,
    mut probe: Option<&mut BrokerProbe>,
    kind: &'static str,
    stamp_time: bool,
) -> Result<Report, BenchError> {
    let context = ProduceContext {
        stats: StatsContext {
            api: "Produce",
            requests: AtomicU64::new(0),
        },
        start: Instant::now(),
        delivered: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        last_error: Mutex::new(None),
        latencies_us: Mutex::new(Vec::with_capacity(
            usize::try_from(opts.messages).unwrap_or(0).min(50_000_000),
        )),
        precise: AtomicBool::new(opts.rate.is_some()),
        clock_ns: AtomicU64::new(0),
    };
    let producer: BaseProducer<ProduceContext> = producer_config(opts)
        .create_with_context(context)
        .map_err(|source| BenchError::Client {
            client: "producer",
            source,
        })?;
    let ctx = producer.context();
    let mut payload = make_payload(opts.message_size);
    let stamp = stamp_time && payload.len() >= 8;
    let mut progress = Progress::new(kind, opts.progress);
    let interval = opts
        .rate
        .filter(|&r| r > 0)
        .map(|r| Duration::from_secs_f64(1.0 / r as f64));
    let requests_before = ctx.stats.requests.load(Ordering::Relaxed);
    let start = Instant::now();
    for i in 0..opts.messages {
        if let Some(interval) = interval {
            let due = start + interval.mul_f64(i as f64);
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                // Serve delivery reports while waiting, so their latency is not inflated.
                producer.poll(due - now);
            }
        }
        if stamp {
            payload[..8].copy_from_slice(&now_unix_ns().to_le_bytes());
        }
        let sent_at = if interval.is_some() || i.is_multiple_of(64) {
            ctx.tick()
        } else {
            ctx.clock_ns.load(Ordering::Relaxed)
        } as usize;
        let mut record = BaseRecord::<(), [u8], usize>::with_opaque_to(&opts.topic, sent_at)
            .payload(&payload[..]);
        let mut waited = Instant::now();
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    let before =
                        ctx.delivered.load(Ordering::Relaxed) + ctx.errors.load(Ordering::Relaxed);
                    ctx.tick();
                    producer.poll(Duration::from_millis(1));
                    ctx.tick();
                    let after =
                        ctx.delivered.load(Ordering::Relaxed) + ctx.errors.load(Ordering::Relaxed);
                    if after != before {
                        waited = Instant::now();
                    } else if waited.elapsed() > opts.timeout {
                        return Err(BenchError::Produce {
                            sent: i,
                            source: KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                        });
                    }
                }
                Err((source, _)) => return Err(BenchError::Produce { sent: i, source }),
            }
        }
        // Serving delivery reports costs a few clock reads in rdkafka's poll; at full speed
        // do it every 64 messages (the queue holds far more), at a fixed rate every time.
        if interval.is_some() || i.is_multiple_of(64) {
            producer.poll(Duration::ZERO);
        }
        if i.is_multiple_of(256) {
            progress.tick(
                ctx.delivered.load(Ordering::Relaxed),
                opts.message_size,
                probe.as_deref_mut(),
            );
        }
    }
    // Wait for the outstanding delivery reports, with progress lines.
    ctx.precise.store(true, Ordering::Relaxed);
    let mut last_change = Instant::now();
    let mut last_done = 0;
    while producer.in_flight_count() > 0 {
        producer.poll(Duration::from_millis(50));
        let done = ctx.delivered.load(Ordering::Relaxed) + ctx.errors.load(Ordering::Relaxed);
        if done != last_done {
            last_done = done;
            last_change = Instant::now();
        } else if last_change.elapsed() > opts.timeout {
            return Err(BenchError::FlushTimeout {
                pending: producer.in_flight_count(),
                timeout: opts.timeout,
            });
        }
        progress.tick(
            ctx.delivered.load(Ordering::Relaxed),
            opts.message_size,
            probe.as_deref_mut(),
        );
    }
    let elapsed = start.elapsed();
    // Let one more statistics report arrive so the request count covers the whole run.
    thread::sleep(Duration::from_millis(STATS_INTERVAL_MS * 2));
    producer.poll(Duration::ZERO);
    let delivered = ctx.delivered.load(Ordering::Relaxed);
    let errors = ctx.errors.load(Ordering::Relaxed);
    if delivered == 0 && errors > 0 {
        let source = ctx
            .last_error
            .lock()
            .ok()
            .and_then(|mut e| e.take())
            .unwrap_or(KafkaError::MessageProduction(RDKafkaErrorCode::Fail));
        return Err(BenchError::Produce { sent: 0, source });
    }
    let latency = ctx
        .latencies_us
        .lock()
        .ok()
        .and_then(|mut v| LatencySummary::from_samples(&mut v));
    let requests = ctx.stats.requests.load(Ordering::Relaxed) - requests_before;
    Ok(Report {
        kind,
        messages: delivered,
        bytes: delivered * opts.message_size as u64,
        elapsed,
        errors,
        latency,
        requests: Some(requests),
        broker: None,
    })
}

/// Where the consumer starts.
#[derive(Debug, Clone, Copy)]
enum StartAt {
    /// The log start of every partition.
    Beginning,
    /// The high watermark of every partition at assignment time.
    End,
}

/// Reads `opts.messages` messages from the start of every partition of the topic.
pub fn consume(opts: &BenchOptions) -> Result<Report, BenchError> {
    let mut probe = opts.broker_pid.map(BrokerProbe::start).transpose()?;
    let report = consume_inner(opts, StartAt::Beginning, None, probe.as_mut(), "consume")?;
    let broker = probe.map(BrokerProbe::finish).transpose()?;
    Ok(Report { broker, ..report })
}

fn consume_inner(
    opts: &BenchOptions,
    start_at: StartAt,
    ready: Option<&AtomicBool>,
    mut probe: Option<&mut BrokerProbe>,
    kind: &'static str,
) -> Result<Report, BenchError> {
    let context = StatsContext {
        api: "Fetch",
        requests: AtomicU64::new(0),
    };
    let consumer: BaseConsumer<StatsContext> = consumer_config(opts)
        .create_with_context(context)
        .map_err(|source| BenchError::Client {
        client: "consumer",
        source,
    })?;
    let md = consumer
        .fetch_metadata(Some(&opts.topic), Duration::from_secs(10))
        .map_err(|source| BenchError::Consume {
            received: 0,
            source,
        })?;
    let partitions: Vec<i32> = md
        .topics()
        .iter()
        .find(|t| t.name() == opts.topic)
        .map(|t| t.partitions().iter().map(|p| p.id()).collect())
        .unwrap_or_default();
    if partitions.is_empty() {
        return Err(BenchError::Topic {
            topic: opts.topic.clone(),
            detail: "no partitions in the metadata (does the topic exist?)".into(),
        });
    }
    let mut tpl = TopicPartitionList::new();
    for &p in &partitions {
        let offset = match start_at {
            StartAt::Beginning => Offset::Beginning,
            StartAt::End => {
                let (_, high) = consumer
                    .fetch_watermarks(&opts.topic, p, Duration::from_secs(10))
                    .map_err(|source| BenchError::Consume {
                        received: 0,
                        source,
                    })?;
                Offset::Offset(high)
            }
        };
        tpl.add_partition_offset(&opts.topic, p, offset)
            .map_err(|source| BenchError::Consume {
                received: 0,
                source,
            })?;
    }
    consumer
        .assign(&tpl)
        .map_err(|source| BenchError::Consume {
            received: 0,
            source,
        })?;
    if let Some(ready) = ready {
        ready.store(true, Ordering::Release);
    }
    let mut latencies: Vec<u32> = Vec::new();
    let measure_latency = matches!(start_at, StartAt::End);
    let mut progress = Progress::new(kind, opts.progress);
    let mut received = 0u64;
    let mut bytes = 0u64;
    let start = Instant::now();
    let mut last_receipt = start;
    let requests_before = consumer.context().requests.load(Ordering::Relaxed);
    while received < opts.messages {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let payload = m.payload().unwrap_or(&[]);
                received += 1;
                bytes += payload.len() as u64;
                last_receipt = Instant::now();
                if measure_latency && payload.len() >= 8 {
                    let mut ts = [0u8; 8];
                    ts.copy_from_slice(&payload[..8]);
                    let sent = u64::from_le_bytes(ts);
                    let us = now_unix_ns().saturating_sub(sent) / 1000;
                    latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
            Some(Err(e)) => {
                // Partition EOF and transient broker errors are reported here; only give
                // up when nothing has arrived for the timeout.
                if last_receipt.elapsed() > opts.timeout {
                    return Err(BenchError::Consume {
                        received,
                        source: e,
                    });
                }
            }
            None => {
                if last_receipt.elapsed() > opts.timeout {
                    return Err(BenchError::ConsumeStalled {
                        received,
                        expected: opts.messages,
                        idle: opts.timeout,
                    });
                }
            }
        }
        if received.is_multiple_of(256) {
            progress.tick(received, opts.message_size, probe.as_deref_mut());
        }
    }
    let elapsed = last_receipt.duration_since(start);
    thread::sleep(Duration::from_millis(STATS_INTERVAL_MS * 2));
    let _ = consumer.poll(Duration::ZERO);
    let requests = consumer.context().requests.load(Ordering::Relaxed) - requests_before;
    Ok(Report {
        kind,
        messages: received,
        bytes,
        elapsed,
        errors: 0,
        latency: LatencySummary::from_samples(&mut latencies),
        requests: Some(requests),
        broker: None,
    })
}

/// Produces `opts.messages` messages (at `opts.rate` if set) while a consumer, assigned at
/// the high watermark first, reads them; the consumer's latency is end-to-end, from the
/// timestamp written into each message at send time to its receipt. Returns the producer's
/// report and the consumer's (which carries the broker usage, if watched).
pub fn end_to_end(opts: &BenchOptions) -> Result<(Report, Report), BenchError> {
    ensure_topic(opts)?;
    let mut probe = opts.broker_pid.map(BrokerProbe::start).transpose()?;
    let ready = Arc::new(AtomicBool::new(false));
    let consumer = {
        let opts = opts.clone();
        let ready = Arc::clone(&ready);
        thread::spawn(move || {
            let quiet = BenchOptions {
                progress: false,
                ..opts
            };
            consume_inner(&quiet, StartAt::End, Some(&ready), None, "end-to-end")
        })
    };
    while !ready.load(Ordering::Acquire) && !consumer.is_finished() {
        thread::sleep(Duration::from_millis(10));
    }
    // Give the consumer's first fetch a moment to reach the broker.
    thread::sleep(Duration::from_millis(500));
    let produced = produce_inner(opts, probe.as_mut(), "produce", true);
    let consumed = consumer.join().map_err(|_| BenchError::ConsumerThread)??;
    let produced = produced?;
    let broker = probe.map(BrokerProbe::finish).transpose()?;
    Ok((produced, Report { broker, ..consumed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_the_size_and_is_letters() {
        let p = make_payload(1000);
        assert_eq!(p.len(), 1000);
        assert!(p.iter().all(u8::is_ascii_uppercase));
        assert!(make_payload(0).is_empty());
    }

    #[test]
    fn configs_apply_user_properties_last() {
        let opts = BenchOptions {
            bootstrap_server: "localhost:9092".into(),
            topic: "t".into(),
            message_size: 10,
            messages: 1,
            acks: crate::Acks::All,
            partitions: None,
            replication_factor: 1,
            compression: crate::Compression::Zstd,
            rate: None,
            producer_properties: vec![("acks".into(), "0".into())],
            consumer_properties: vec![("fetch.wait.max.ms".into(), "5".into())],
            broker_pid: None,
            progress: false,
            timeout: Duration::from_secs(1),
        };
        let p = producer_config(&opts);
        assert_eq!(p.get("acks"), Some("0"));
        assert_eq!(p.get("compression.type"), Some("zstd"));
        let c = consumer_config(&opts);
        assert_eq!(c.get("fetch.wait.max.ms"), Some("5"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
    }
}
