//! A few real counters, rendered in Prometheus' text format by the admin listener.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters of one broker.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<&'static str, u64>>,
    request_errors: AtomicU64,
    connections_open: AtomicI64,
    connections_total: AtomicU64,
}

impl Metrics {
    /// Counts one request of `api`.
    pub fn request(&self, api: &'static str) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(api)
            .or_default() += 1;
    }

    /// Counts one request that closed its connection (malformed, unknown API).
    pub fn request_error(&self) {
        self.request_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection opened.
    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed.
    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Requests counted so far, by API name.
    pub fn requests(&self) -> BTreeMap<&'static str, u64> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Requests that closed their connection.
    pub fn request_errors(&self) -> u64 {
        self.request_errors.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn connections_open(&self) -> i64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections_total(&self) -> u64 {
        self.connections_total.load(Ordering::Relaxed)
    }
}

/// One broker's numbers for [`render`].
#[derive(Debug)]
pub struct MetricsSample<'a> {
    /// `broker.id`.
    pub broker_id: i32,
    /// Its counters.
    pub metrics: &'a Metrics,
    /// Live partition logs.
    pub partitions: usize,
    /// Whether it is the active controller.
    pub is_controller: bool,
}

/// Reads one number of a sample.
type SampleValue = fn(&MetricsSample<'_>) -> String;

/// Renders the samples in Prometheus' text format, one `# TYPE` line per metric.
pub fn render(samples: &[MetricsSample<'_>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# TYPE gregor_requests_total counter");
    for s in samples {
        for (api, count) in s.metrics.requests() {
            let _ = writeln!(
                out,
                "gregor_requests_total{{broker=\"{}\",api=\"{api}\"}} {count}",
                s.broker_id
            );
        }
    }
    let gauges: [(&str, &str, SampleValue); 5] = [
        ("gregor_request_errors_total", "counter", |s| {
            s.metrics.request_errors().to_string()
        }),
        ("gregor_connections", "gauge", |s| {
            s.metrics.connections_open().to_string()
        }),
        ("gregor_connections_total", "counter", |s| {
            s.metrics.connections_total().to_string()
        }),
        ("gregor_partitions", "gauge", |s| s.partitions.to_string()),
        ("gregor_is_controller", "gauge", |s| {
            u8::from(s.is_controller).to_string()
        }),
    ];
    for (name, kind, value) in gauges {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in samples {
            let _ = writeln!(out, "{name}{{broker=\"{}\"}} {}", s.broker_id, value(s));
        }
    }
    out
}
