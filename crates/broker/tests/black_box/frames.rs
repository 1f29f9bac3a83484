//! The Kafka listener against raw frames: ApiVersions at every version, unsupported APIs and
//! versions, malformed frames, pipelining, Metadata.

use crate::common;

use bytes::Buf;
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn api_versions_v0_and_v3_list_the_supported_table() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    for (version, correlation_id) in [(0, 1), (3, 2)] {
        let response: ApiVersionsResponse = roundtrip(
            &mut stream,
            ApiKey::ApiVersions,
            version,
            correlation_id,
            &RequestKind::ApiVersions(api_versions_request()),
        )
        .await;
        assert_eq!(response.error_code, 0);
        let keys: Vec<(i16, i16, i16)> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        let expected: Vec<(i16, i16, i16)> = protocol::SUPPORTED_APIS
            .iter()
            .map(|r| (r.api_key as i16, r.min_version, r.max_version))
            .collect();
        assert_eq!(keys, expected);
    }
    broker.shutdown().await;
}

/// ApiVersions v3+ names the client software (KIP-511), in Kafka's pattern.
fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("broker-test"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
}

#[tokio::test]
async fn api_versions_above_ours_gets_v0_unsupported_version_then_ours_works() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    let ours = protocol::supported_range(ApiKey::ApiVersions)
        .unwrap()
        .max_version;
    // A version no codec knows yet: header v2 (as every flexible ApiVersions), then a body
    // the broker must not try to parse.
    let mut payload = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(ours + 1)
        .with_correlation_id(11)
        .with_client_id(Some(StrBytes::from_static_str("future-client")))
        .encode(&mut payload, 2)
        .unwrap();
    payload.extend_from_slice(&[0x42; 7]);
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    stream.write_all(&frame).await.unwrap();
    let mut payload = read_frame(&mut stream).await;
    // Header v0 (no tagged fields) and a v0 body: error code, then the array.
    assert_eq!(payload.get_i32(), 11);
    let body = ApiVersionsResponse::decode(&mut payload, 0).unwrap();
    assert_eq!(body.error_code, 35, "UNSUPPORTED_VERSION");
    let own = body
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .unwrap();
    assert_eq!(own.max_version, ours);
    assert!(payload.is_empty());
    // The connection stays usable.
    let response: ApiVersionsResponse = roundtrip(
        &mut stream,
        ApiKey::ApiVersions,
        ours,
        12,
        &RequestKind::ApiVersions(api_versions_request()),
    )
    .await;
    assert_eq!(response.error_code, 0);
    broker.shutdown().await;
}

use kafka_protocol::protocol::Decodable;

#[tokio::test]
async fn unsupported_api_or_version_answers_an_error_and_keeps_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    // ListTransactions v2 (Kafka 4.1's, a version this broker does not serve): answered
    // UNSUPPORTED_VERSION, in the body of the newest version it knows.
    let max = protocol::api_versions::supported_range(ApiKey::ListTransactions)
        .expect("ListTransactions is served")
        .max_version;
    let asked = max + 1;
    let mut payload = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::ListTransactions as i16)
        .with_request_api_version(asked)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("broker-test")))
        .encode(&mut payload, 2)
        .unwrap();
    ListTransactionsRequest::default()
        .encode(&mut payload, max)
        .unwrap();
    stream
        .write_all(&(payload.len() as i32).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&payload).await.unwrap();
    let mut answer = read_frame(&mut stream).await;
    let header = ResponseHeader::decode(&mut answer, 1).unwrap();
    assert_eq!(header.correlation_id, 1);
    let response = ListTransactionsResponse::decode(&mut answer, max).unwrap();
    assert_eq!(response.error_code, 35);
    let metadata = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("x")))),
    ])));
    let response: MetadataResponse =
        roundtrip(&mut stream, ApiKey::Metadata, 1, 3, &metadata).await;
    assert_eq!(response.brokers.len(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn malformed_frame_closes_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let mut good = TcpStream::connect(broker.local_addr()).await.unwrap();
    let mut bad = TcpStream::connect(broker.local_addr()).await.unwrap();
    // A Metadata v1 request whose topic array claims 5 entries and holds none.
    bad.write_all(b"\x00\x00\x00\x0e\x00\x03\x00\x01\x00\x00\x00\x02\xff\xff\x00\x00\x00\x05")
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut bad, &mut buf),
    )
    .await
    .unwrap();
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "the bad connection is closed: {read:?}"
    );
    // An oversized frame is refused before it is buffered.
    let mut huge = TcpStream::connect(broker.local_addr()).await.unwrap();
    huge.write_all(&i32::MAX.to_be_bytes()).await.unwrap();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut huge, &mut buf),
    )
    .await
    .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)));
    let response: ApiVersionsResponse = roundtrip(
        &mut good,
        ApiKey::ApiVersions,
        3,
        7,
        &RequestKind::ApiVersions(api_versions_request()),
    )
    .await;
    assert_eq!(response.error_code, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    let mut batch = Vec::new();
    for correlation_id in 0..20 {
        let (key, body) = if correlation_id % 2 == 0 {
            (
                ApiKey::ApiVersions,
                RequestKind::ApiVersions(api_versions_request()),
            )
        } else {
            (
                ApiKey::Metadata,
                RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
            )
        };
        batch.extend_from_slice(&request_frame(key, 1, correlation_id, &body));
    }
    stream.write_all(&batch).await.unwrap();
    for correlation_id in 0..20 {
        let mut payload = read_frame(&mut stream).await;
        assert_eq!(payload.get_i32(), correlation_id);
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn metadata_lists_self_cluster_id_and_refuses_bad_names() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(
        dir.path(),
        &[
            "broker.id=7",
            "broker.rack=r1",
            "auto.create.topics.enable=false",
        ],
    )
    .await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    let request = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("missing")))),
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("bad/name")))),
        ])));
    let response: MetadataResponse = roundtrip(&mut stream, ApiKey::Metadata, 9, 1, &request).await;
    assert_eq!(response.brokers.len(), 1);
    assert_eq!(response.brokers[0].node_id.0, 7);
    assert_eq!(
        response.brokers[0].port,
        i32::from(broker.local_addr().port())
    );
    assert_eq!(response.brokers[0].rack.as_deref(), Some("r1"));
    assert_eq!(response.cluster_id.as_deref(), Some(broker.cluster_id()));
    assert_eq!(
        response.topics[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(response.topics[1].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    broker.shutdown().await;
}

#[tokio::test]
async fn crafted_array_counts_close_the_connection_without_harming_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let frames: [&[u8]; 3] = [
        // Metadata v1 whose topic array claims 0x7fffffff entries.
        b"\x00\x00\x00\x0e\x00\x03\x00\x01\x00\x00\x00\x02\xff\xff\x7f\xff\xff\xff",
        // Metadata v9 (flexible) whose compact topic array claims u32::MAX - 1 entries.
        b"\x00\x00\x00\x10\x00\x03\x00\x09\x00\x00\x00\x03\xff\xff\x00\xff\xff\xff\xff\x0f",
        // CreateTopics v0 whose topic name claims 32767 bytes.
        b"\x00\x00\x00\x10\x00\x13\x00\x00\x00\x00\x00\x04\xff\xff\x00\x00\x00\x01\x7f\xff",
    ];
    for frame in frames {
        let mut bad = TcpStream::connect(broker.local_addr()).await.unwrap();
        bad.write_all(frame).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut bad, &mut buf),
        )
        .await
        .unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "closed: {read:?}");
    }
    let mut good = TcpStream::connect(broker.local_addr()).await.unwrap();
    let response: ApiVersionsResponse = roundtrip(
        &mut good,
        ApiKey::ApiVersions,
        3,
        1,
        &RequestKind::ApiVersions(api_versions_request()),
    )
    .await;
    assert_eq!(response.error_code, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &["connections.max.idle.ms=200"]).await;
    let mut stream = TcpStream::connect(broker.local_addr()).await.unwrap();
    let response: ApiVersionsResponse = roundtrip(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        1,
        &RequestKind::ApiVersions(api_versions_request()),
    )
    .await;
    assert_eq!(response.error_code, 0);
    let mut buf = [0u8; 4];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut stream, &mut buf),
    )
    .await
    .expect("closed well before 5 s");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    broker.shutdown().await;
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut text)
        .await
        .unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

#[tokio::test]
async fn client_software_is_recorded_per_connection_and_exported_as_metric_labels() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &[]).await;
    let admin = broker::admin_http::AdminServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        vec![broker.admin_view()],
    )
    .await
    .unwrap();
    let label = |name: &str, version: &str, count: u32| {
        format!(
            "gregor_client_connections{{broker=\"{}\",client_software_name=\"{name}\",client_software_version=\"{version}\"}} {count}\n",
            broker.broker_id()
        )
    };
    let named = |name: &'static str, version: &'static str| {
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str(name))
                .with_client_software_version(StrBytes::from_static_str(version)),
        )
    };
    // Two connections name the same software; a third has not said anything yet.
    let mut a = TcpStream::connect(broker.local_addr()).await.unwrap();
    let mut b = TcpStream::connect(broker.local_addr()).await.unwrap();
    let silent = TcpStream::connect(broker.local_addr()).await.unwrap();
    for (stream, id) in [(&mut a, 1), (&mut b, 2)] {
        let r: ApiVersionsResponse = roundtrip(
            stream,
            ApiKey::ApiVersions,
            3,
            id,
            &named("metrics-test", "2.0"),
        )
        .await;
        assert_eq!(r.error_code, 0);
    }
    // An invalid name is refused and leaves the connection counted as it was.
    let r: ApiVersionsResponse =
        roundtrip(&mut b, ApiKey::ApiVersions, 4, 3, &named("bad name", "2.0")).await;
    assert_eq!(r.error_code, 42, "INVALID_REQUEST");
    let metrics = http_get(admin.local_addr(), "/metrics").await;
    assert!(
        metrics.contains(&label("metrics-test", "2.0", 2)),
        "{metrics}"
    );
    assert!(
        metrics.contains(&label("unknown", "unknown", 1)),
        "{metrics}"
    );
    // The same connection may name itself again (a client upgrade in place is not a thing,
    // but a new ApiVersions is allowed): it moves to the new label.
    let r: ApiVersionsResponse = roundtrip(
        &mut a,
        ApiKey::ApiVersions,
        4,
        4,
        &named("metrics-test", "2.1"),
    )
    .await;
    assert_eq!(r.error_code, 0);
    drop(b);
    drop(silent);
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = http_get(admin.local_addr(), "/metrics").await;
        if !metrics.contains("client_software_version=\"2.0\"")
            && !metrics.contains("client_software_name=\"unknown\"")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        metrics.contains(&label("metrics-test", "2.1", 1)),
        "{metrics}"
    );
    assert!(
        !metrics.contains("client_software_version=\"2.0\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("client_software_name=\"unknown\""),
        "{metrics}"
    );
    admin.shutdown().await;
    broker.shutdown().await;
}
