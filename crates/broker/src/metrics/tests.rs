use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::prometheus::{render, BrokerSample, ControllerGauges, ReplicaGauges};
use super::*;

fn software(name: &str, version: &str) -> ClientSoftware {
    ClientSoftware {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

fn sample(metrics: &Metrics) -> BrokerSample<'_> {
    BrokerSample {
        broker_id: 7,
        metrics,
        partitions: 0,
        replicas: ReplicaGauges::default(),
        is_controller: false,
        controller: ControllerGauges::default(),
        store_write_latency: telemetry::HistogramSnapshot::default(),
        topics: metrics.topics(|_| true),
        groups: None,
    }
}

fn text(metrics: &Metrics) -> String {
    render(&[sample(metrics)], &telemetry::HistogramSnapshot::default())
}

#[test]
fn client_software_counts_follow_connections_and_render_as_labels() {
    let metrics = Metrics::default();
    let unknown = ClientSoftware::unknown();
    let rdkafka = software("librdkafka", "2.16.1");
    metrics.client_software_set(None, &unknown);
    metrics.client_software_set(None, &unknown);
    metrics.client_software_set(Some(&unknown), &rdkafka);
    let text = text(&metrics);
    assert!(text.contains("gregor_client_connections{broker=\"7\",client_software_name=\"librdkafka\",client_software_version=\"2.16.1\"} 1\n"), "{text}");
    assert!(
        text.contains("client_software_name=\"unknown\",client_software_version=\"unknown\"} 1\n"),
        "{text}"
    );
    metrics.client_software_closed(&rdkafka);
    metrics.client_software_closed(&unknown);
    assert!(metrics.client_software().is_empty());
    // Closing what is not counted changes nothing.
    metrics.client_software_closed(&rdkafka);
    assert!(metrics.client_software().is_empty());
}

/// Known topics, by name and id.
struct Lookup(Vec<(&'static str, Uuid)>);

impl TopicLookup for Lookup {
    fn is_known(&self, topic: &str) -> bool {
        self.0.iter().any(|(name, _)| *name == topic)
    }
    fn name_of(&self, topic_id: Uuid) -> Option<String> {
        self.0
            .iter()
            .find(|(_, id)| *id == topic_id)
            .map(|(name, _)| (*name).to_owned())
    }
}

/// A v2 batch of `records` records (only the header fields the counter reads).
fn batch(records: i32, body: usize) -> Vec<u8> {
    let mut b = vec![0u8; 61 + body];
    let length = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&length.to_be_bytes());
    b[16] = 2;
    b[57..61].copy_from_slice(&records.to_be_bytes());
    b
}

#[test]
fn record_count_reads_v2_headers_and_counts_legacy_messages_as_one() {
    let mut set = batch(3, 10);
    set.extend(batch(5, 0));
    assert_eq!(record_count(&set), 8);
    // A legacy message: offset, size, then crc, magic 1, ...
    let mut legacy = vec![0u8; 12 + 20];
    legacy[8..12].copy_from_slice(&20i32.to_be_bytes());
    legacy[16] = 1;
    assert_eq!(record_count(&legacy), 1);
    // A truncated tail is not counted.
    assert_eq!(record_count(&set[..set.len() - 1]), 3);
    assert_eq!(record_count(&[]), 0);
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

#[tokio::test]
async fn produce_and_fetch_count_per_topic_and_in_total() {
    let metrics = Arc::new(Metrics::default());
    let lookup = Lookup(vec![("t", Uuid::from_u128(1))]);
    let records = Bytes::from(batch(4, 100));
    let produce = RequestKind::Produce(ProduceRequest::default().with_topic_data(vec![
        TopicProduceData::default()
            .with_name(topic_name("t"))
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records.clone())),
                PartitionProduceData::default()
                    .with_index(1)
                    .with_records(Some(records.clone())),
            ]),
        TopicProduceData::default()
            .with_name(topic_name("made-up"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records.clone()))]),
    ]));
    let produced = ResponseKind::Produce(ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(topic_name("t"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_base_offset(10),
                // Not the leader: not appended, and not a "failed" request in Kafka's sense.
                PartitionProduceResponse::default()
                    .with_index(1)
                    .with_base_offset(-1)
                    .with_error_code(6),
            ]),
        TopicProduceResponse::default()
            .with_name(topic_name("made-up"))
            .with_partition_responses(vec![PartitionProduceResponse::default()
                .with_index(0)
                .with_base_offset(-1)
                .with_error_code(87)]),
    ]));
    let fetch = RequestKind::Fetch(FetchRequest::default());
    let fetched = ResponseKind::Fetch(FetchResponse::default().with_responses(vec![
        // Fetch v13+ names topics by id only.
        FetchableTopicResponse::default()
            .with_topic_id(Uuid::from_u128(1))
            .with_partitions(vec![PartitionData::default()
                .with_records(Some(Bytes::from_static(&[0u8; 33])))]),
    ]));
    let follower = RequestKind::Fetch(FetchRequest::default().with_replica_id(BrokerId(2)));
    connection_scope(Arc::clone(&metrics), async {
        TopicScan::of(&produce).account(&produced, &lookup);
        TopicScan::of(&fetch).account(&fetched, &lookup);
        let scan = TopicScan::of(&follower);
        assert!(scan.is_follower_fetch());
        scan.account(&fetched, &lookup);
    })
    .await;
    let per_topic = metrics.topic("t").expect("t is counted");
    assert_eq!(per_topic.bytes_in.get(), records.len() as u64);
    assert_eq!(per_topic.messages_in.get(), 4);
    assert_eq!(per_topic.total_produce_requests.get(), 2);
    assert_eq!(per_topic.failed_produce_requests.get(), 0);
    assert_eq!(
        per_topic.bytes_out.get(),
        33,
        "followers' bytes are replication bytes"
    );
    assert_eq!(per_topic.total_fetch_requests.get(), 2);
    assert!(
        metrics.topic("made-up").is_none(),
        "unknown names get no series"
    );
    assert_eq!(metrics.all_topics.failed_produce_requests.get(), 1);
    assert_eq!(metrics.all_topics.total_produce_requests.get(), 3);
    assert_eq!(metrics.replication_bytes_out.get(), 33);
    let text = text(&metrics);
    for line in [
        format!(
            "kafka_server_brokertopicmetrics_bytesin_total{{broker=\"7\",topic=\"t\"}} {}\n",
            records.len()
        ),
        "kafka_server_brokertopicmetrics_messagesin_total{broker=\"7\"} 4\n".to_owned(),
        "kafka_server_brokertopicmetrics_bytesout_total{broker=\"7\",topic=\"t\"} 33\n".to_owned(),
        "kafka_server_brokertopicmetrics_failedproducerequests_total{broker=\"7\"} 1\n".to_owned(),
        "kafka_server_brokertopicmetrics_replicationbytesout_total{broker=\"7\"} 33\n".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} missing in\n{text}");
    }
    // A topic that is gone loses its series.
    assert!(metrics.topics(|_| false).is_empty());
    assert!(metrics.topic("t").is_none());
}

#[tokio::test]
async fn requests_split_their_time_and_parked_ones_count_in_the_purgatory() {
    let metrics = Arc::new(Metrics::default());
    let t0 = Instant::now();
    connection_scope(Arc::clone(&metrics), async {
        request_started(ApiKey::Produce);
        parked();
        parked(); // only the first one counts
        assert_eq!(metrics.purgatory_size(Purgatory::Produce), 1);
        let parked_at = request_finished();
        assert!(parked_at.is_some());
        assert_eq!(metrics.purgatory_size(Purgatory::Produce), 0);
        request_started(ApiKey::Metadata);
        assert_eq!(request_finished(), None);
    })
    .await;
    let ms = Duration::from_millis;
    let times = RequestTimes {
        received: t0,
        dequeued: t0 + ms(1),
        parked: Some(t0 + ms(3)),
        handled: t0 + ms(40),
        send_started: t0 + ms(40),
        sent: t0 + ms(41),
    };
    metrics.request_done(ApiKey::Produce, 8, false, &times);
    metrics.request_done(ApiKey::Fetch, 12, true, &times);
    metrics.request_done(ApiKey::Fetch, 99, false, &times);
    let text = text(&metrics);
    for line in [
        "kafka_network_requestmetrics_requests_total{broker=\"7\",request=\"Produce\",version=\"8\"} 1\n",
        "kafka_network_requestmetrics_requests_total{broker=\"7\",request=\"FetchFollower\",version=\"12\"} 1\n",
        // Versions past the table count as the last one.
        "kafka_network_requestmetrics_requests_total{broker=\"7\",request=\"FetchConsumer\",version=\"19\"} 1\n",
        // 37 ms parked: in the 50 ms bucket, not the 25 ms one.
        "kafka_network_requestmetrics_remotetimems_bucket{broker=\"7\",request=\"Produce\",le=\"25\"} 0\n",
        "kafka_network_requestmetrics_remotetimems_bucket{broker=\"7\",request=\"Produce\",le=\"50\"} 1\n",
        "kafka_network_requestmetrics_localtimems_sum{broker=\"7\",request=\"Produce\"} 2\n",
        "kafka_network_requestmetrics_totaltimems_count{broker=\"7\",request=\"Produce\"} 1\n",
        "kafka_network_requestmetrics_totaltimems_bucket{broker=\"7\",request=\"Produce\",le=\"+Inf\"} 1\n",
        "kafka_server_delayedoperationpurgatory_purgatorysize{broker=\"7\",delayedOperation=\"Produce\"} 0\n",
        "gregor_requests_total{broker=\"7\",api=\"Fetch\"} 2\n",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    for bound in super::prometheus::bucket_bounds_ms() {
        assert!(
            text.contains(&format!(
                "kafka_network_requestmetrics_totaltimems_bucket{{broker=\"7\",request=\"Produce\",le=\"{bound}\"}}"
            )),
            "bucket {bound}"
        );
    }
}

#[test]
fn every_family_is_declared_once_and_every_sample_belongs_to_one() {
    let metrics = Metrics::default();
    metrics
        .controller_events
        .observe("TopicChange", Duration::from_millis(2));
    metrics.request_done(
        ApiKey::Metadata,
        12,
        false,
        &RequestTimes {
            received: Instant::now(),
            dequeued: Instant::now(),
            parked: None,
            handled: Instant::now(),
            send_started: Instant::now(),
            sent: Instant::now(),
        },
    );
    let text = text(&metrics);
    let mut families = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            assert!(
                families.insert(name.to_owned(), kind.to_owned()).is_none(),
                "{name} twice"
            );
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|b| families.get(*b).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(families.contains_key(base), "{line} has no # TYPE");
    }
    assert_eq!(
        families["kafka_controller_controllerstats_topicchangerateandtimems"],
        "histogram"
    );
}
