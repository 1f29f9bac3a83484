//! `gregor bench topics`: the control plane under a large create (issue 10's targets).
//!
//! Creates `topics` topics of `partitions` partitions each (CreateTopics requests of at most
//! `topics_per_request` topics, sent one after another), and measures:
//! - `answered_s`: start → the last CreateTopics answer;
//! - `online_s`: start → the metadata (all topics, asked every `poll_interval`) shows every
//!   new partition with a leader;
//! - throughout (start → online, plus `settle` after), two probes on their own connections,
//!   each one request at a time, every 20 ms: Metadata of an existing 1-partition topic
//!   (`probe_topic`, created first if missing) and a 1-record Produce to it (acks=1,
//!   linger.ms=0); their p50/p99/max latency;
//! - with `broker_pid`, the broker's RSS once online and after `settle` (`idle`), its peak
//!   (VmHWM), and its CPU seconds over the run;
//! - with `delete`, then: start of the deletion → the last DeleteTopics answer, and → the
//!   metadata lists none of the topics.
//!
//! With `create = false` nothing is created: the run measures how long until the existing
//! topics `<prefix>-0..topics` are all online (after a restart, say; the broker may still
//! be starting: librdkafka retries).
//!
//! Like the other modes it speaks only the Kafka protocol, so the same figures can be taken
//! against Apache Kafka.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::{BenchError, BrokerProbe, LatencySummary};

/// What `gregor bench topics` was asked for.
#[derive(Debug, Clone)]
pub struct TopicsOptions {
    /// `host:port[,host:port...]`.
    pub bootstrap_server: String,
    /// Topics are named `<prefix>-<i>`.
    pub prefix: String,
    /// How many topics.
    pub topics: usize,
    /// Partitions per topic.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i32,
    /// Topics per CreateTopics / DeleteTopics request.
    pub topics_per_request: usize,
    /// False: only wait for the existing topics to be online.
    pub create: bool,
    /// Delete the topics afterwards and time it.
    pub delete: bool,
    /// The existing topic the probes use.
    pub probe_topic: String,
    /// How often the metadata of all topics is asked for while waiting.
    pub poll_interval: Duration,
    /// How long the probes go on after the topics are online (and before RSS is read).
    pub settle: Duration,
    /// Pid of the broker process to watch (RSS), if on this machine.
    pub broker_pid: Option<u32>,
    /// Give up waiting for a phase after this long.
    pub timeout: Duration,
}

/// The figures of one run (see the module docs).
#[derive(Debug, Clone)]
pub struct TopicsReport {
    /// Topics and partitions in all.
    pub topics: usize,
    /// Partitions in all.
    pub partitions: usize,
    /// CreateTopics requests sent.
    pub create_requests: usize,
    /// Start → last CreateTopics answer (none when nothing was created).
    pub answered: Option<Duration>,
    /// Start → every partition has a leader in the metadata.
    pub online: Duration,
    /// Topics a CreateTopics answered with an error (other than TOPIC_ALREADY_EXISTS).
    pub create_errors: usize,
    /// The first such error.
    pub first_error: Option<String>,
    /// Metadata probe latency.
    pub metadata: Option<LatencySummary>,
    /// Metadata probes that failed or timed out.
    pub metadata_failed: u64,
    /// Produce probe latency.
    pub produce: Option<LatencySummary>,
    /// Produce probes that failed.
    pub produce_failed: u64,
    /// Broker RSS right when online, after the settle time, and its peak, in KiB; and the
    /// broker's CPU seconds from the start to the end of the settle time.
    pub rss_kib: Option<(u64, u64, u64, f64)>,
    /// Deletion: start → last DeleteTopics answer, → the metadata lists none of the topics.
    pub deleted: Option<(Duration, Duration)>,
}

impl std::fmt::Display for TopicsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: Option<Duration>| {
            d.map_or_else(|| "none".to_string(), |d| format!("{:.3}", d.as_secs_f64()))
        };
        writeln!(
            f,
            "topics: topics={} partitions={} create_requests={} answered_s={} online_s={:.3} create_errors={}",
            self.topics,
            self.partitions,
            self.create_requests,
            secs(self.answered),
            self.online.as_secs_f64(),
            self.create_errors,
        )?;
        if let Some(e) = &self.first_error {
            writeln!(f, "topics: first_error={e}")?;
        }
        let lat = |f: &mut std::fmt::Formatter<'_>,
                   name: &str,
                   l: &Option<LatencySummary>,
                   failed: u64| {
            match l {
                Some(l) => writeln!(
                    f,
                    "topics: {name}_ms p50={:.3} p99={:.3} max={:.3} samples={} failed={failed}",
                    l.p50_ms(),
                    l.p99_ms(),
                    l.max_ms(),
                    l.samples
                ),
                None => writeln!(f, "topics: {name}_ms samples=0 failed={failed}"),
            }
        };
        lat(f, "metadata", &self.metadata, self.metadata_failed)?;
        lat(f, "produce", &self.produce, self.produce_failed)?;
        if let Some((online, idle, hwm, cpu)) = self.rss_kib {
            writeln!(
                f,
                "topics: broker rss_online_MiB={:.1} rss_idle_MiB={:.1} hwm_rss_MiB={:.1} cpu_s={cpu:.3}",
                online as f64 / 1024.0,
                idle as f64 / 1024.0,
                hwm as f64 / 1024.0
            )?;
        }
        if let Some((answered, gone)) = self.deleted {
            writeln!(
                f,
                "topics: delete answered_s={:.3} gone_s={:.3}",
                answered.as_secs_f64(),
                gone.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// Latency samples (µs) of one probe, and its failures.
#[derive(Debug, Default)]
struct Samples {
    us: Vec<u32>,
    failed: u64,
}

impl Samples {
    fn record(&mut self, started: Instant, ok: bool) {
        if ok {
            let us = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            self.us.push(us);
        } else {
            self.failed += 1;
        }
    }
}

const PROBE_INTERVAL: Duration = Duration::from_millis(20);

fn client_err(client: &'static str) -> impl Fn(rdkafka::error::KafkaError) -> BenchError {
    move |source| BenchError::Client { client, source }
}

fn topic_err(topic: &str, detail: String) -> BenchError {
    BenchError::Topic {
        topic: topic.to_string(),
        detail,
    }
}

fn metadata_client(bootstrap: &str) -> Result<BaseConsumer, BenchError> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "2")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(client_err("consumer"))
}

/// Runs the benchmark.
pub fn topics(opts: &TopicsOptions) -> Result<TopicsReport, BenchError> {
    if opts.topics == 0 || opts.partitions < 1 {
        return Err(topic_err(
            &opts.prefix,
            "--topics and --partitions must be at least 1".into(),
        ));
    }
    let names: Vec<String> = (0..opts.topics)
        .map(|i| format!("{}-{i}", opts.prefix))
        .collect();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &opts.bootstrap_server)
        .set("log_level", "2")
        .create()
        .map_err(client_err("admin"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| topic_err(&opts.prefix, format!("cannot start a runtime: {e}")))?;
    let admin_opts = AdminOptions::new()
        .operation_timeout(Some(opts.timeout))
        .request_timeout(Some(opts.timeout));

    if opts.create {
        // The probe topic exists before the clock starts.
        let probe = NewTopic::new(&opts.probe_topic, 1, TopicReplication::Fixed(1));
        let results = rt
            .block_on(admin.create_topics([&probe], &admin_opts))
            .map_err(|e| topic_err(&opts.probe_topic, format!("CreateTopics failed: {e}")))?;
        for r in results {
            if let Err((_, code)) = r {
                if code != RDKafkaErrorCode::TopicAlreadyExists {
                    return Err(topic_err(
                        &opts.probe_topic,
                        format!("CreateTopics answered {code}"),
                    ));
                }
            }
        }
        wait_online(
            &metadata_client(&opts.bootstrap_server)?,
            std::slice::from_ref(&opts.probe_topic),
            1,
            opts.poll_interval,
            opts.timeout,
        )?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let metadata_samples = Arc::new(Mutex::new(Samples::default()));
    let produce_samples = Arc::new(Mutex::new(Samples::default()));
    let probes = if opts.create {
        Some((
            spawn_metadata_probe(opts, Arc::clone(&stop), Arc::clone(&metadata_samples))?,
            spawn_produce_probe(opts, Arc::clone(&stop), Arc::clone(&produce_samples))?,
        ))
    } else {
        None
    };

    let mut probe = opts.broker_pid.map(BrokerProbe::start).transpose()?;
    let start = Instant::now();
    let mut create_requests = 0;
    let mut create_errors = 0;
    let mut first_error = None;
    let mut answered = None;
    if opts.create {
        for chunk in names.chunks(opts.topics_per_request.max(1)) {
            let new: Vec<NewTopic<'_>> = chunk
                .iter()
                .map(|n| {
                    NewTopic::new(
                        n,
                        opts.partitions,
                        TopicReplication::Fixed(opts.replication_factor),
                    )
                })
                .collect();
            create_requests += 1;
            let results = rt
                .block_on(admin.create_topics(new.iter(), &admin_opts))
                .map_err(|e| topic_err(&chunk[0], format!("CreateTopics failed: {e}")))?;
            for r in results {
                if let Err((topic, code)) = r {
                    if code != RDKafkaErrorCode::TopicAlreadyExists {
                        create_errors += 1;
                        first_error.get_or_insert_with(|| format!("{topic}: {code}"));
                    }
                }
            }
        }
        answered = Some(start.elapsed());
    }
    let online = wait_online(
        &metadata_client(&opts.bootstrap_server)?,
        &names,
        opts.partitions,
        opts.poll_interval,
        opts.timeout,
    );
    let online = match online {
        Ok(()) => start.elapsed(),
        Err(err) => {
            stop.store(true, Ordering::SeqCst);
            return Err(err);
        }
    };
    let rss_online = probe.as_mut().map(BrokerProbe::sample).transpose()?;
    thread::sleep(opts.settle);
    stop.store(true, Ordering::SeqCst);
    if let Some((m, p)) = probes {
        let _ = m.join();
        let _ = p.join();
    }
    let rss_kib = match (probe, rss_online) {
        (Some(mut probe), Some(online)) => {
            let idle = probe.sample()?;
            let usage = probe.finish()?;
            Some((online, idle, usage.hwm_rss_kib, usage.cpu_seconds))
        }
        _ => None,
    };

    let deleted = if opts.delete {
        let start = Instant::now();
        for chunk in names.chunks(opts.topics_per_request.max(1)) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let results = rt
                .block_on(admin.delete_topics(&refs, &admin_opts))
                .map_err(|e| topic_err(&chunk[0], format!("DeleteTopics failed: {e}")))?;
            for r in results {
                if let Err((topic, code)) = r {
                    return Err(topic_err(&topic, format!("DeleteTopics answered {code}")));
                }
            }
        }
        let answered = start.elapsed();
        wait_gone(
            &metadata_client(&opts.bootstrap_server)?,
            &names,
            opts.poll_interval,
            opts.timeout,
        )?;
        Some((answered, start.elapsed()))
    } else {
        None
    };

    let summarize = |s: &Mutex<Samples>| {
        let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
        let failed = s.failed;
        (LatencySummary::from_samples(&mut s.us), failed)
    };
    let (metadata, metadata_failed) = summarize(&metadata_samples);
    let (produce, produce_failed) = summarize(&produce_samples);
    Ok(TopicsReport {
        topics: opts.topics,
        partitions: opts.topics * opts.partitions as usize,
        create_requests,
        answered,
        online,
        create_errors,
        first_error,
        metadata,
        metadata_failed,
        produce,
        produce_failed,
        rss_kib,
        deleted,
    })
}

/// Metadata of the probe topic, one request at a time.
fn spawn_metadata_probe(
    opts: &TopicsOptions,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Samples>>,
) -> Result<thread::JoinHandle<()>, BenchError> {
    let client = metadata_client(&opts.bootstrap_server)?;
    let topic = opts.probe_topic.clone();
    Ok(thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let started = Instant::now();
            let ok = client
                .fetch_metadata(Some(&topic), Duration::from_secs(10))
                .is_ok_and(|md| {
                    md.topics()
                        .iter()
                        .any(|t| t.name() == topic && t.error().is_none())
                });
            samples
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(started, ok);
            thread::sleep(PROBE_INTERVAL.saturating_sub(started.elapsed()));
        }
    }))
}

/// A 1-record Produce to the probe topic, waiting for its acknowledgement, one at a time.
fn spawn_produce_probe(
    opts: &TopicsOptions,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Samples>>,
) -> Result<thread::JoinHandle<()>, BenchError> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &opts.bootstrap_server)
        .set("log_level", "2")
        .set("acks", "1")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "30000")
        .create()
        .map_err(client_err("producer"))?;
    let topic = opts.probe_topic.clone();
    Ok(thread::spawn(move || {
        // Waits for the acknowledgement by polling every millisecond (librdkafka's flush()
        // sleeps in steps of up to 100 ms, which would floor every sample at 100 ms).
        let acknowledged = |producer: &BaseProducer| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while producer.in_flight_count() > 0 {
                if Instant::now() > deadline {
                    return false;
                }
                producer.poll(Duration::from_millis(1));
            }
            true
        };
        // Connect and learn the leader before measuring.
        let _ = producer.send(BaseRecord::<(), [u8]>::to(&topic).payload(&b"warm-up"[..]));
        acknowledged(&producer);
        while !stop.load(Ordering::SeqCst) {
            let started = Instant::now();
            let ok = producer
                .send(BaseRecord::<(), [u8]>::to(&topic).payload(&b"probe"[..]))
                .is_ok()
                && acknowledged(&producer);
            samples
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(started, ok);
            thread::sleep(PROBE_INTERVAL.saturating_sub(started.elapsed()));
        }
    }))
}

/// Waits until the metadata shows every topic of `names` with `partitions` partitions, each
/// with a leader.
fn wait_online(
    client: &BaseConsumer,
    names: &[String],
    partitions: i32,
    poll: Duration,
    timeout: Duration,
) -> Result<(), BenchError> {
    let wanted: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let deadline = Instant::now() + timeout;
    loop {
        let asked = Instant::now();
        // One topic: ask for it alone (cheaper); many: ask for all.
        let md = if names.len() == 1 {
            client.fetch_metadata(Some(&names[0]), Duration::from_secs(30))
        } else {
            client.fetch_metadata(None, Duration::from_secs(30))
        };
        let last = match md {
            Ok(md) => {
                let mut online = 0;
                for t in md.topics() {
                    if wanted.contains(t.name())
                        && t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions().iter().all(|p| p.leader() >= 0)
                    {
                        online += 1;
                    }
                }
                if online == wanted.len() {
                    return Ok(());
                }
                format!("{online} of {} topics online", wanted.len())
            }
            Err(e) => format!("metadata: {e}"),
        };
        if Instant::now() > deadline {
            return Err(topic_err(
                &names[0],
                format!("not all online after {timeout:?}: {last}"),
            ));
        }
        thread::sleep(poll.saturating_sub(asked.elapsed()));
    }
}

/// Waits until the metadata lists none of `names`.
fn wait_gone(
    client: &BaseConsumer,
    names: &[String],
    poll: Duration,
    timeout: Duration,
) -> Result<(), BenchError> {
    let wanted: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let deadline = Instant::now() + timeout;
    loop {
        let asked = Instant::now();
        if let Ok(md) = client.fetch_metadata(None, Duration::from_secs(30)) {
            let left = md
                .topics()
                .iter()
                .filter(|t| wanted.contains(t.name()) && t.error().is_none())
                .count();
            if left == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(topic_err(
                    &names[0],
                    format!("{left} topics still listed {timeout:?} after the deletion"),
                ));
            }
        }
        thread::sleep(poll.saturating_sub(asked.elapsed()));
    }
}
