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
    /// Open connections by the client software they named in ApiVersions v3+ (KIP-511);
    /// an entry goes when its count drops to zero, so the map is never larger than the
    /// number of open connections.
    client_software: Mutex<BTreeMap<ClientSoftware, u64>>,
}

/// What a connection's client said it is in ApiVersions v3+ (KIP-511): Kafka's
/// `ClientInformation`. Both parts match `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`, so
/// they need no escaping as Prometheus label values.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientSoftware {
    /// `client_software_name`, or `unknown` before (or without) ApiVersions v3+.
    pub name: String,
    /// `client_software_version`, or `unknown`.
    pub version: String,
}

impl ClientSoftware {
    /// Kafka's `ClientInformation.EMPTY`: what a connection is until it says otherwise.
    pub fn unknown() -> ClientSoftware {
        ClientSoftware {
            name: "unknown".to_owned(),
            version: "unknown".to_owned(),
        }
    }
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

    /// A connection now counts as `software` (at open: [`ClientSoftware::unknown`]); it no
    /// longer counts as `previous`, if given.
    pub fn client_software_set(
        &self,
        previous: Option<&ClientSoftware>,
        software: &ClientSoftware,
    ) {
        let mut map = self
            .client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(previous) = previous {
            Self::release(&mut map, previous);
        }
        *map.entry(software.clone()).or_default() += 1;
    }

    /// A connection that counted as `software` closed.
    pub fn client_software_closed(&self, software: &ClientSoftware) {
        let mut map = self
            .client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Self::release(&mut map, software);
    }

    fn release(map: &mut BTreeMap<ClientSoftware, u64>, software: &ClientSoftware) {
        if let Some(count) = map.get_mut(software) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                map.remove(software);
            }
        }
    }

    /// Open connections by client software.
    pub fn client_software(&self) -> BTreeMap<ClientSoftware, u64> {
        self.client_software
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
    // Kafka's `socket-server-metrics` `connections` by clientSoftwareName/Version (KIP-511).
    let _ = writeln!(out, "# TYPE gregor_client_connections gauge");
    for s in samples {
        for (software, count) in s.metrics.client_software() {
            let _ = writeln!(
                out,
                "gregor_client_connections{{broker=\"{}\",client_software_name=\"{}\",client_software_version=\"{}\"}} {count}",
                s.broker_id, software.name, software.version
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

#[cfg(test)]
mod tests {
    use super::*;

    fn software(name: &str, version: &str) -> ClientSoftware {
        ClientSoftware {
            name: name.to_owned(),
            version: version.to_owned(),
        }
    }

    #[test]
    fn client_software_counts_follow_connections_and_render_as_labels() {
        let metrics = Metrics::default();
        let unknown = ClientSoftware::unknown();
        let rdkafka = software("librdkafka", "2.16.1");
        metrics.client_software_set(None, &unknown);
        metrics.client_software_set(None, &unknown);
        metrics.client_software_set(Some(&unknown), &rdkafka);
        let text = render(&[MetricsSample {
            broker_id: 7,
            metrics: &metrics,
            partitions: 0,
            is_controller: false,
        }]);
        assert!(text.contains("gregor_client_connections{broker=\"7\",client_software_name=\"librdkafka\",client_software_version=\"2.16.1\"} 1\n"), "{text}");
        assert!(
            text.contains(
                "client_software_name=\"unknown\",client_software_version=\"unknown\"} 1\n"
            ),
            "{text}"
        );
        metrics.client_software_closed(&rdkafka);
        metrics.client_software_closed(&unknown);
        assert!(metrics.client_software().is_empty());
        // Closing what is not counted changes nothing.
        metrics.client_software_closed(&rdkafka);
        assert!(metrics.client_software().is_empty());
    }
}
