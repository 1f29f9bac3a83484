//! `/metrics` in Prometheus' text format (0.0.4), under the names the Prometheus JMX
//! exporter's usual Kafka rules (`kafka-2_0_0.yml`: `lowercaseOutputName`, `...PerSec` meters
//! as `_total` counters, `Value` gauges by their MBean name, tags as labels) give Kafka's
//! MBeans, so dashboards and alerts written for Kafka work unchanged. Every series carries a
//! `broker` label (one admin listener serves every broker of a dev cluster); process-wide
//! ones (log flush time) carry none.
//!
//! Deliberate differences from the exporter: Kafka's latency MBeans are reservoirs the
//! exporter shows as `quantile` gauges; here they are real Prometheus histograms under the
//! same names (`_bucket`/`_sum`/`_count`, in milliseconds), so `..._count` matches the
//! exporter's series and quantiles come from `histogram_quantile()`. Consumer lag uses
//! kafka_exporter's names (`kafka_consumergroup_lag`...), which saves running it.
//!
//! Rendering is pure: the admin listener gathers a [`BrokerSample`] per broker first.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use telemetry::HistogramSnapshot;

use super::{ClientSoftware, Metrics, Purgatory, TopicMetrics};

/// One broker's numbers, gathered before rendering.
#[derive(Debug)]
pub(crate) struct BrokerSample<'a> {
    /// `broker.id`.
    pub broker_id: i32,
    /// Its counters.
    pub metrics: &'a Metrics,
    /// Partition logs it hosts.
    pub partitions: usize,
    /// The `ReplicaManager` gauges.
    pub replicas: ReplicaGauges,
    /// Whether it is the active controller.
    pub is_controller: bool,
    /// The controller gauges (zero unless active, as in Kafka).
    pub controller: ControllerGauges,
    /// Its store session's write latency.
    pub store_write_latency: HistogramSnapshot,
    /// Per-topic counters of the topics that exist.
    pub topics: Vec<(Arc<str>, Arc<TopicMetrics>)>,
    /// Consumer groups, on the broker that coordinates them.
    pub groups: Option<GroupGauges>,
}

/// Kafka's `ReplicaManager` gauges of one broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReplicaGauges {
    /// Partitions it leads.
    pub leaders: u64,
    /// Of those, the ones whose ISR is smaller than the replica set.
    pub under_replicated: u64,
    /// Of those, the ones whose ISR is below `min.insync.replicas`.
    pub under_min_isr: u64,
    /// ISR shrinks and expands this broker's leaders had accepted (`None` until the
    /// replication layer counts them).
    pub isr_shrinks: Option<u64>,
    /// See `isr_shrinks`.
    pub isr_expands: Option<u64>,
}

/// Kafka's `KafkaController` and `ControllerEventManager` gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ControllerGauges {
    /// Partitions without a leader.
    pub offline_partitions: u64,
    /// Partitions led by another replica than the first of their assignment.
    pub preferred_replica_imbalance: u64,
    /// Topics in the cluster.
    pub global_topics: u64,
    /// Partitions in the cluster.
    pub global_partitions: u64,
    /// Live brokers.
    pub active_brokers: u64,
    /// Events waiting for the controller's event loop.
    pub event_queue_size: u64,
}

/// Consumer groups as their coordinator sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupGauges {
    /// Groups by state (`Stable`, `Empty`, ...).
    pub by_state: BTreeMap<String, u64>,
    /// Per group: its members and its committed partitions.
    pub groups: BTreeMap<String, GroupLag>,
    /// How long the oldest commit not yet mirrored to `/consumers` has waited (ms), and how
    /// many partitions wait.
    pub zk_mirror_lag_ms: u64,
    /// See `zk_mirror_lag_ms`.
    pub zk_mirror_pending: u64,
}

/// One group's members and lag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupLag {
    /// Members now.
    pub members: u64,
    /// Per (topic, partition): committed offset and lag (`None` when the log end is unknown).
    pub partitions: BTreeMap<(String, i32), (i64, Option<i64>)>,
}

/// Renders every family for `samples`, then the process-wide ones.
pub(crate) fn render(samples: &[BrokerSample<'_>], log_flush: &HistogramSnapshot) -> String {
    let mut out = String::with_capacity(64 * 1024);
    replica_manager(&mut out, samples);
    controller(&mut out, samples);
    topics(&mut out, samples);
    requests(&mut out, samples);
    purgatory(&mut out, samples);
    groups(&mut out, samples);
    family(
        &mut out,
        "kafka_log_logflushstats_logflushrateandtimems",
        "histogram",
        "Time of each log flush (fsync), ms (process-wide).",
    );
    histogram(
        &mut out,
        "kafka_log_logflushstats_logflushrateandtimems",
        "",
        log_flush,
    );
    family(
        &mut out,
        "gregor_metastore_commit_latency_ms",
        "histogram",
        "Time until the metadata store acknowledged a write of this broker's session (the embedded store's group commit and fsync, or ZooKeeper's quorum commit), ms.",
    );
    for s in samples {
        histogram(
            &mut out,
            "gregor_metastore_commit_latency_ms",
            &broker(s),
            &s.store_write_latency,
        );
    }
    gregor(&mut out, samples);
    out
}

fn broker(s: &BrokerSample<'_>) -> String {
    format!("broker=\"{}\"", s.broker_id)
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// One histogram's `_bucket`, `_sum` and `_count` series, in milliseconds.
fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (bound, count) in h.cumulative() {
        let le = match bound {
            Some(micros) => format_ms(micros),
            None => "+Inf".to_owned(),
        };
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    sample(out, &format!("{name}_sum"), labels, format_ms(h.sum_micros));
    sample(out, &format!("{name}_count"), labels, h.count());
}

/// Microseconds as milliseconds, without trailing zeros.
fn format_ms(micros: u64) -> String {
    let whole = micros / 1000;
    let frac = micros % 1000;
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{frac:03}")
            .trim_end_matches('0')
            .to_owned()
    }
}

/// A label value with Prometheus' escapes (group ids are arbitrary strings).
pub(crate) fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

type Gauge<T> = (&'static str, &'static str, fn(&T) -> u64);
/// (name, help, value) of a counter that may not be counted yet.
type OptionalCounter = (
    &'static str,
    &'static str,
    fn(&ReplicaGauges) -> Option<u64>,
);
/// (name, help, histogram) of a `RequestMetrics` family.
type RequestHistogram = (
    &'static str,
    &'static str,
    fn(&super::ApiMetrics) -> &telemetry::Histogram,
);
/// (name, type, help, value) of one of Gregor's own series.
type OwnSeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&BrokerSample<'_>) -> String,
);

fn replica_manager(out: &mut String, samples: &[BrokerSample<'_>]) {
    let gauges: [Gauge<BrokerSample<'_>>; 4] = [
        (
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            |s| s.replicas.under_replicated,
        ),
        (
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions this broker leads whose ISR is below min.insync.replicas.",
            |s| s.replicas.under_min_isr,
        ),
        (
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads.",
            |s| s.replicas.leaders,
        ),
        (
            "kafka_server_replicamanager_partitioncount",
            "Partition logs this broker hosts.",
            |s| s.partitions as u64,
        ),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        for s in samples {
            sample(out, name, &broker(s), value(s));
        }
    }
    let counters: [OptionalCounter; 2] = [
        (
            "kafka_server_replicamanager_isrshrinks_total",
            "ISR shrinks of partitions this broker leads.",
            |r| r.isr_shrinks,
        ),
        (
            "kafka_server_replicamanager_isrexpands_total",
            "ISR expansions of partitions this broker leads.",
            |r| r.isr_expands,
        ),
    ];
    for (name, help, value) in counters {
        if samples.iter().all(|s| value(&s.replicas).is_none()) {
            continue;
        }
        family(out, name, "counter", help);
        for s in samples {
            if let Some(v) = value(&s.replicas) {
                sample(out, name, &broker(s), v);
            }
        }
    }
}

fn controller(out: &mut String, samples: &[BrokerSample<'_>]) {
    let name = "kafka_controller_kafkacontroller_activecontrollercount";
    family(out, name, "gauge", "1 on the active controller, else 0.");
    for s in samples {
        sample(out, name, &broker(s), u8::from(s.is_controller));
    }
    let gauges: [Gauge<ControllerGauges>; 6] = [
        (
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (on the active controller).",
            |c| c.offline_partitions,
        ),
        (
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
            "Partitions not led by their preferred replica (on the active controller).",
            |c| c.preferred_replica_imbalance,
        ),
        (
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster (on the active controller).",
            |c| c.global_topics,
        ),
        (
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster (on the active controller).",
            |c| c.global_partitions,
        ),
        (
            "kafka_controller_kafkacontroller_activebrokercount",
            "Live brokers (on the active controller).",
            |c| c.active_brokers,
        ),
        (
            "kafka_controller_controllereventmanager_eventqueuesize",
            "Events waiting for this broker's controller event loop.",
            |c| c.event_queue_size,
        ),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        for s in samples {
            sample(out, name, &broker(s), value(&s.controller));
        }
    }
    // One family per controller state, as Kafka has one MBean per state.
    let mut states: BTreeMap<&'static str, Vec<(String, HistogramSnapshot)>> = BTreeMap::new();
    for s in samples {
        for (state, h) in s.metrics.controller_events.snapshot() {
            states.entry(state).or_default().push((broker(s), h));
        }
    }
    for (state, per_broker) in states {
        let name = format!(
            "kafka_controller_controllerstats_{}rateandtimems",
            state.to_ascii_lowercase()
        );
        family(
            out,
            &name,
            "histogram",
            &format!("Time of the controller's {state} events, ms."),
        );
        for (labels, h) in per_broker {
            histogram(out, &name, &labels, &h);
        }
    }
}

/// `BrokerTopicMetrics` counters: (exporter name, help, value).
const TOPIC_COUNTERS: [Gauge<TopicMetrics>; 8] = [
    (
        "kafka_server_brokertopicmetrics_bytesin_total",
        "Bytes appended by producers.",
        |m| m.bytes_in.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_bytesout_total",
        "Record bytes sent to consumers.",
        |m| m.bytes_out.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_messagesin_total",
        "Records appended by producers.",
        |m| m.messages_in.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_bytesrejected_total",
        "Bytes of record sets refused as too large.",
        |m| m.bytes_rejected.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_failedproducerequests_total",
        "Partition appends that failed unexpectedly (Kafka does not count NOT_LEADER_OR_FOLLOWER and the like).",
        |m| m.failed_produce_requests.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_failedfetchrequests_total",
        "Partition reads that failed unexpectedly.",
        |m| m.failed_fetch_requests.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_totalproducerequests_total",
        "Partition appends requested.",
        |m| m.total_produce_requests.get(),
    ),
    (
        "kafka_server_brokertopicmetrics_totalfetchrequests_total",
        "Partition reads requested (consumers and followers).",
        |m| m.total_fetch_requests.get(),
    ),
];

fn topics(out: &mut String, samples: &[BrokerSample<'_>]) {
    for (name, help, value) in TOPIC_COUNTERS {
        family(out, name, "counter", help);
        for s in samples {
            let labels = broker(s);
            sample(out, name, &labels, value(&s.metrics.all_topics));
            for (topic, m) in &s.topics {
                sample(out, name, &format!("{labels},topic=\"{topic}\""), value(m));
            }
        }
    }
    let name = "kafka_server_brokertopicmetrics_replicationbytesout_total";
    family(out, name, "counter", "Record bytes sent to followers.");
    for s in samples {
        sample(out, name, &broker(s), s.metrics.replication_bytes_out.get());
    }
}

/// `RequestMetrics` histograms: (exporter name, help, which one).
const REQUEST_HISTOGRAMS: [RequestHistogram; 6] = [
    (
        "kafka_network_requestmetrics_requestqueuetimems",
        "Time a complete request waited for a handler (queued.max.requests), ms.",
        |m| &m.request_queue,
    ),
    (
        "kafka_network_requestmetrics_localtimems",
        "Time the handler worked on the request before answering or parking, ms.",
        |m| &m.local,
    ),
    (
        "kafka_network_requestmetrics_remotetimems",
        "Time the request was parked (acks=all, long polls, rebalances, controller work), ms.",
        |m| &m.remote,
    ),
    (
        "kafka_network_requestmetrics_responsequeuetimems",
        "Time from the handler's answer to the response starting to go out, ms.",
        |m| &m.response_queue,
    ),
    (
        "kafka_network_requestmetrics_responsesendtimems",
        "Time writing the response, ms.",
        |m| &m.response_send,
    ),
    (
        "kafka_network_requestmetrics_totaltimems",
        "Time from the complete request to the written response, ms.",
        |m| &m.total,
    ),
];

fn requests(out: &mut String, samples: &[BrokerSample<'_>]) {
    let name = "kafka_network_requestmetrics_requests_total";
    family(
        out,
        name,
        "counter",
        "Requests by API (Fetch split into FetchConsumer and FetchFollower) and version.",
    );
    for s in samples {
        let labels = broker(s);
        for (request, m) in s.metrics.apis() {
            for (version, count) in m.requests.iter().enumerate() {
                let count = count.get();
                if count > 0 {
                    sample(
                        out,
                        name,
                        &format!("{labels},request=\"{request}\",version=\"{version}\""),
                        count,
                    );
                }
            }
        }
    }
    for (name, help, pick) in REQUEST_HISTOGRAMS {
        family(out, name, "histogram", help);
        for s in samples {
            let labels = broker(s);
            for (request, m) in s.metrics.apis() {
                histogram(
                    out,
                    name,
                    &format!("{labels},request=\"{request}\""),
                    &pick(m).snapshot(),
                );
            }
        }
    }
}

fn purgatory(out: &mut String, samples: &[BrokerSample<'_>]) {
    for (name, help) in [
        (
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in the purgatory now.",
        ),
        (
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Delayed operations waiting in the purgatory now (one per parked request).",
        ),
    ] {
        family(out, name, "gauge", help);
        for s in samples {
            let labels = broker(s);
            for p in Purgatory::ALL {
                sample(
                    out,
                    name,
                    &format!("{labels},delayedOperation=\"{}\"", p.name()),
                    s.metrics.purgatory_size(p),
                );
            }
        }
    }
}

/// Kafka's `GroupMetadataManager` gauges by group state.
const GROUP_STATES: [(&str, &str); 5] = [
    (
        "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance",
        "PreparingRebalance",
    ),
    (
        "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance",
        "CompletingRebalance",
    ),
    (
        "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
        "Stable",
    ),
    (
        "kafka_coordinator_group_groupmetadatamanager_numgroupsdead",
        "Dead",
    ),
    (
        "kafka_coordinator_group_groupmetadatamanager_numgroupsempty",
        "Empty",
    ),
];

fn groups(out: &mut String, samples: &[BrokerSample<'_>]) {
    let coordinating: Vec<(&BrokerSample<'_>, &GroupGauges)> = samples
        .iter()
        .filter_map(|s| s.groups.as_ref().map(|g| (s, g)))
        .collect();
    let name = "kafka_coordinator_group_groupmetadatamanager_numgroups";
    family(
        out,
        name,
        "gauge",
        "Consumer groups this broker coordinates.",
    );
    for s in samples {
        let total = s.groups.as_ref().map_or(0, |g| g.by_state.values().sum());
        sample(out, name, &broker(s), total);
    }
    for (name, state) in GROUP_STATES {
        family(
            out,
            name,
            "gauge",
            &format!("Coordinated groups in state {state}."),
        );
        for s in samples {
            let n = s
                .groups
                .as_ref()
                .and_then(|g| g.by_state.get(state).copied())
                .unwrap_or(0);
            sample(out, name, &broker(s), n);
        }
    }
    for (name, help, value) in [
        (
            "gregor_consumer_offsets_zk_mirror_lag_ms",
            "How long the oldest committed offset not yet mirrored to /consumers/<group>/offsets has waited, ms (0: the mirror is current).",
            (|g: &GroupGauges| g.zk_mirror_lag_ms) as fn(&GroupGauges) -> u64,
        ),
        (
            "gregor_consumer_offsets_zk_mirror_pending",
            "Partitions whose committed offset is queued for /consumers/<group>/offsets.",
            |g: &GroupGauges| g.zk_mirror_pending,
        ),
    ] {
        family(out, name, "gauge", help);
        for s in samples {
            sample(out, name, &broker(s), s.groups.as_ref().map_or(0, value));
        }
    }
    family(
        out,
        "kafka_consumergroup_members",
        "gauge",
        "Members of the consumer group (kafka_exporter's name).",
    );
    for (s, g) in &coordinating {
        for (group, lag) in &g.groups {
            let labels = format!("{},consumergroup=\"{}\"", broker(s), escape(group));
            sample(out, "kafka_consumergroup_members", &labels, lag.members);
        }
    }
    family(
        out,
        "kafka_consumergroup_current_offset",
        "gauge",
        "Committed offset of the group per partition (kafka_exporter's name).",
    );
    family(
        out,
        "kafka_consumergroup_lag",
        "gauge",
        "Log end offset minus committed offset, per partition (kafka_exporter's name).",
    );
    family(
        out,
        "kafka_consumergroup_lag_sum",
        "gauge",
        "The group's lag summed over a topic's partitions (kafka_exporter's name).",
    );
    for (s, g) in &coordinating {
        for (group, lag) in &g.groups {
            let mut per_topic: BTreeMap<&str, i64> = BTreeMap::new();
            for ((topic, partition), (committed, partition_lag)) in &lag.partitions {
                let labels = format!(
                    "{},consumergroup=\"{}\",topic=\"{topic}\",partition=\"{partition}\"",
                    broker(s),
                    escape(group)
                );
                sample(
                    out,
                    "kafka_consumergroup_current_offset",
                    &labels,
                    committed,
                );
                if let Some(partition_lag) = partition_lag {
                    sample(out, "kafka_consumergroup_lag", &labels, partition_lag);
                    *per_topic.entry(topic).or_default() += partition_lag;
                }
            }
            for (topic, sum) in per_topic {
                let labels = format!(
                    "{},consumergroup=\"{}\",topic=\"{topic}\"",
                    broker(s),
                    escape(group)
                );
                sample(out, "kafka_consumergroup_lag_sum", &labels, sum);
            }
        }
    }
}

/// Gregor's own series (kept for the tools that read them).
fn gregor(out: &mut String, samples: &[BrokerSample<'_>]) {
    family(out, "gregor_requests_total", "counter", "Requests by API.");
    for s in samples {
        let labels = broker(s);
        let mut by_api: BTreeMap<&str, u64> = BTreeMap::new();
        for (request, m) in s.metrics.apis() {
            let api = match request {
                "FetchConsumer" | "FetchFollower" => "Fetch",
                other => other,
            };
            *by_api.entry(api).or_default() += m.requests.iter().map(|c| c.get()).sum::<u64>();
        }
        for (api, count) in by_api {
            sample(
                out,
                "gregor_requests_total",
                &format!("{labels},api=\"{api}\""),
                count,
            );
        }
    }
    // Kafka's `socket-server-metrics` `connections` by clientSoftwareName/Version (KIP-511).
    family(
        out,
        "gregor_client_connections",
        "gauge",
        "Open connections by the client software named in ApiVersions (KIP-511).",
    );
    for s in samples {
        for (software, count) in s.metrics.client_software() {
            let ClientSoftware { name, version } = software;
            sample(
                out,
                "gregor_client_connections",
                &format!(
                    "{},client_software_name=\"{name}\",client_software_version=\"{version}\"",
                    broker(s)
                ),
                count,
            );
        }
    }
    let gauges: [OwnSeries; 5] = [
        (
            "gregor_request_errors_total",
            "counter",
            "Requests that closed their connection.",
            |s| s.metrics.request_errors().to_string(),
        ),
        ("gregor_connections", "gauge", "Open connections.", |s| {
            s.metrics.connections_open().to_string()
        }),
        (
            "gregor_connections_total",
            "counter",
            "Connections accepted.",
            |s| s.metrics.connections_total().to_string(),
        ),
        (
            "gregor_partitions",
            "gauge",
            "Partition logs hosted.",
            |s| s.partitions.to_string(),
        ),
        (
            "gregor_is_controller",
            "gauge",
            "1 on the active controller.",
            |s| u8::from(s.is_controller).to_string(),
        ),
    ];
    for (name, kind, help, value) in gauges {
        family(out, name, kind, help);
        for s in samples {
            sample(out, name, &broker(s), value(s));
        }
    }
}

/// The `le` bounds every histogram has, in milliseconds as rendered (for tests).
#[cfg(test)]
pub(crate) fn bucket_bounds_ms() -> Vec<String> {
    telemetry::BUCKET_BOUNDS_MICROS
        .iter()
        .map(|&b| format_ms(b))
        .collect()
}
