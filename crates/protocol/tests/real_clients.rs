//! Request frames captured from real clients (librdkafka 2.0.2 as in Debian's kcat,
//! librdkafka 2.16.0 through confluent-kafka, kafka-python 3.0.12) and from our own
//! controller, stored in `tests/data/` without their size prefix. Each must decode at the
//! version it was sent with and re-encode to the very same bytes.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::protocol::Encodable;
use protocol::decode_request;
use protocol::request::RequestBody;

fn capture(name: &str) -> Bytes {
    let path = format!("{}/tests/data/{name}.bin", env!("CARGO_MANIFEST_DIR"));
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

fn check(name: &str, api_key: ApiKey, version: i16, client_id: &str) -> RequestKind {
    let frame = capture(name);
    let request = decode_request(frame.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(request.api_key, api_key, "{name}");
    assert_eq!(request.api_version(), version, "{name}");
    assert_eq!(
        request.header.client_id.as_deref(),
        Some(client_id),
        "{name}"
    );
    let RequestBody::Supported(body) = request.body else {
        panic!("{name}: not a supported request");
    };
    let mut again = BytesMut::new();
    request
        .header
        .encode(&mut again, api_key.request_header_version(version))
        .unwrap();
    body.encode(&mut again, version).unwrap();
    assert_eq!(
        again.freeze(),
        frame,
        "{name}: re-encoding changed the bytes"
    );
    body
}

#[test]
fn librdkafka_2_0_2_kcat() {
    check(
        "librdkafka-2.0.2-api_versions-v3",
        ApiKey::ApiVersions,
        3,
        "rdkafka",
    );
    check(
        "librdkafka-2.0.2-metadata-v4",
        ApiKey::Metadata,
        4,
        "rdkafka",
    );
}

#[test]
fn librdkafka_2_16_confluent_kafka() {
    check(
        "librdkafka-2.16.0-api_versions-v3",
        ApiKey::ApiVersions,
        3,
        "confluent",
    );
    check(
        "librdkafka-2.16.0-metadata-v11",
        ApiKey::Metadata,
        11,
        "confluent",
    );
    match check(
        "librdkafka-2.16.0-create_topics-v4",
        ApiKey::CreateTopics,
        4,
        "confluent",
    ) {
        RequestKind::CreateTopics(req) => {
            assert_eq!(req.topics[0].num_partitions, 2);
            assert_eq!(req.topics[0].configs[0].name.as_str(), "retention.ms");
        }
        other => panic!("{other:?}"),
    }
    check(
        "librdkafka-2.16.0-describe_configs-v1",
        ApiKey::DescribeConfigs,
        1,
        "confluent",
    );
    check(
        "librdkafka-2.16.0-delete_topics-v4",
        ApiKey::DeleteTopics,
        4,
        "confluent",
    );
}

#[test]
fn kafka_python_3_opens_with_api_versions_v4_and_falls_back_to_v3() {
    // Kafka 3.9's ApiVersions v4 is served; a broker offering v3 only got this v3 retry.
    check(
        "kafka-python-3.0.12-api_versions-v4",
        ApiKey::ApiVersions,
        4,
        "kafka-python",
    );
    check(
        "kafka-python-3.0.12-api_versions-v3",
        ApiKey::ApiVersions,
        3,
        "kafka-python",
    );
    check(
        "kafka-python-3.0.12-metadata-v11",
        ApiKey::Metadata,
        11,
        "kafka-python",
    );
    match check(
        "kafka-python-3.0.12-create_topics-v7",
        ApiKey::CreateTopics,
        7,
        "kafka-python",
    ) {
        RequestKind::CreateTopics(req) => {
            assert_eq!(req.topics[0].num_partitions, -1);
            assert_eq!(req.topics[0].replication_factor, -1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gregor_controller_control_requests() {
    check(
        "gregor-controller-leader_and_isr-v5",
        ApiKey::LeaderAndIsr,
        5,
        "controller-0",
    );
    check(
        "gregor-controller-update_metadata-v7",
        ApiKey::UpdateMetadata,
        7,
        "controller-0",
    );
    check(
        "gregor-controller-stop_replica-v3",
        ApiKey::StopReplica,
        3,
        "controller-0",
    );
}
