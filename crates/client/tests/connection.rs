//! `Connection` against a real TCP peer: version negotiation, correlation, timeouts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use client::{ClientError, Connection, ConnectionOptions};
use common::{kafka_2_8_versions, Reply, TestBroker};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// Answers Metadata by echoing the requested topic names back, so a test can tell which
/// response belongs to which request; CreateTopics with an empty response.
fn echo(delay_for: impl Fn(&str) -> Option<Duration> + Send + Sync + 'static) -> common::Handler {
    Arc::new(move |_header, request| match request {
        RequestKind::Metadata(req) => {
            let topics: Vec<_> = req
                .topics
                .iter()
                .flatten()
                .map(|t| MetadataResponseTopic::default().with_name(t.name.clone()))
                .collect();
            let first = topics
                .first()
                .and_then(|t| t.name.as_ref())
                .map(|n| n.0.to_string())
                .unwrap_or_default();
            let response = ResponseKind::Metadata(MetadataResponse::default().with_topics(topics));
            match delay_for(&first) {
                Some(delay) => Reply::Delay(delay, response),
                None => Reply::Respond(response),
            }
        }
        RequestKind::CreateTopics(_) => {
            Reply::Respond(ResponseKind::CreateTopics(CreateTopicsResponse::default()))
        }
        _ => Reply::Close,
    })
}

fn metadata_for(topic: &str) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]))
}

fn names(response: &MetadataResponse) -> Vec<String> {
    response
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect()
}

fn quick(request_timeout_ms: u64) -> ConnectionOptions {
    ConnectionOptions {
        client_id: "test-client".to_string(),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_millis(request_timeout_ms),
        ..ConnectionOptions::default()
    }
}

#[tokio::test]
async fn handshake_uses_api_versions_v3_and_send_picks_the_highest_common_version() {
    let mut versions = kafka_2_8_versions();
    versions.retain(|(api, _, _)| *api != ApiKey::Metadata && *api != ApiKey::CreateTopics);
    versions.push((ApiKey::Metadata, 0, 5)); // older broker: below our 11
    versions.push((ApiKey::CreateTopics, 0, 9)); // newer broker: above our 7
    let broker = TestBroker::start(versions, echo(|_| None)).await;

    let mut connection = Connection::connect(&broker.addr, "my-client")
        .await
        .unwrap();
    assert_eq!(connection.broker_versions(ApiKey::Metadata), Some((0, 5)));
    let response = connection.send(metadata_for("a")).await.unwrap();
    assert_eq!(names(&response), ["a"]);
    connection
        .send(CreateTopicsRequest::default())
        .await
        .unwrap();

    assert_eq!(broker.seen_versions(ApiKey::ApiVersions), [3]);
    assert_eq!(broker.seen_versions(ApiKey::Metadata), [5]);
    assert_eq!(broker.seen_versions(ApiKey::CreateTopics), [7]);
    let seen = broker.seen();
    assert!(seen
        .iter()
        .all(|s| s.client_id.as_deref() == Some("my-client")));
    let ids: Vec<i32> = seen.iter().map(|s| s.correlation_id).collect();
    assert_eq!(ids, [0, 1, 2], "correlation ids increase per request");
}

#[tokio::test]
async fn falls_back_to_api_versions_v0_when_the_broker_refuses_v3() {
    let mut versions = kafka_2_8_versions();
    versions.retain(|(api, _, _)| *api != ApiKey::ApiVersions);
    versions.push((ApiKey::ApiVersions, 0, 2));
    let broker = TestBroker::start(versions, echo(|_| None)).await;

    let mut connection = Connection::connect(&broker.addr, "c").await.unwrap();
    assert_eq!(broker.seen_versions(ApiKey::ApiVersions), [3, 0]);
    let response = connection.send(metadata_for("still-works")).await.unwrap();
    assert_eq!(names(&response), ["still-works"]);
}

#[tokio::test]
async fn an_api_the_broker_does_not_advertise_is_refused_without_sending() {
    let versions = vec![(ApiKey::ApiVersions, 0, 3), (ApiKey::Metadata, 0, 11)];
    let broker = TestBroker::start(versions, echo(|_| None)).await;
    let mut connection = Connection::connect(&broker.addr, "c").await.unwrap();

    let err = connection
        .send(CreateTopicsRequest::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::UnsupportedVersion {
                api: ApiKey::CreateTopics,
                broker: None,
                ..
            }
        ),
        "{err:?}"
    );
    let err = connection
        .send_version(metadata_for("x"), 12)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::UnsupportedVersion {
                api: ApiKey::Metadata,
                broker: Some((0, 11)),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(broker.seen_versions(ApiKey::CreateTopics).is_empty());
    assert!(broker.seen_versions(ApiKey::Metadata).is_empty());

    // A forced version inside the broker's range is used as given.
    connection.send_version(metadata_for("x"), 1).await.unwrap();
    assert_eq!(broker.seen_versions(ApiKey::Metadata), [1]);
}

#[tokio::test]
async fn pipelined_requests_get_their_own_responses_in_order() {
    // The first request is answered slowest; responses must still match requests.
    let broker = TestBroker::start(
        kafka_2_8_versions(),
        echo(|topic| (topic == "t0").then(|| Duration::from_millis(200))),
    )
    .await;
    let mut connection = Connection::connect_with(&broker.addr, quick(5_000))
        .await
        .unwrap();

    let requests: Vec<_> = (0..5).map(|i| metadata_for(&format!("t{i}"))).collect();
    let responses = connection.send_all(requests).await.unwrap();
    let got: Vec<Vec<String>> = responses.iter().map(names).collect();
    assert_eq!(got, [["t0"], ["t1"], ["t2"], ["t3"], ["t4"]]);
}

#[tokio::test]
async fn a_request_times_out_and_its_late_answer_is_not_given_to_the_next_request() {
    let broker = TestBroker::start(
        kafka_2_8_versions(),
        echo(|topic| (topic == "slow").then(|| Duration::from_millis(400))),
    )
    .await;
    let mut connection = Connection::connect_with(&broker.addr, quick(150))
        .await
        .unwrap();

    let err = connection.send(metadata_for("slow")).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("Metadata response"), "{err}");

    // The peer answers in order: wait for the late "slow" answer to arrive and be dropped,
    // then the next request on the same connection must get its own answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let response = connection.send(metadata_for("fast")).await.unwrap();
    assert_eq!(names(&response), ["fast"]);
}

#[tokio::test]
async fn a_handshake_that_is_never_answered_times_out() {
    // A raw listener that accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let _keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let err = Connection::connect_with(&silent_addr, quick(100))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
}

#[tokio::test]
async fn a_wrong_correlation_id_is_a_protocol_error_and_closes_the_connection() {
    let handler: common::Handler = Arc::new(|_, _| {
        Reply::WrongCorrelation(ResponseKind::Metadata(MetadataResponse::default()))
    });
    let broker = TestBroker::start(kafka_2_8_versions(), handler).await;
    let mut connection = Connection::connect_with(&broker.addr, quick(2_000))
        .await
        .unwrap();

    let err = connection.send(metadata_for("x")).await.unwrap_err();
    assert!(matches!(err, ClientError::Protocol { .. }), "{err:?}");
    assert!(err.to_string().contains("does not match"), "{err}");
    let err = connection.send(metadata_for("y")).await.unwrap_err();
    assert!(matches!(err, ClientError::Io { .. }), "{err:?}");
}

#[tokio::test]
async fn a_peer_that_closes_fails_the_request_with_io() {
    let handler: common::Handler = Arc::new(|_, _| Reply::Close);
    let broker = TestBroker::start(kafka_2_8_versions(), handler).await;
    let mut connection = Connection::connect_with(&broker.addr, quick(2_000))
        .await
        .unwrap();
    let err = connection.send(metadata_for("x")).await.unwrap_err();
    assert!(matches!(err, ClientError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("closed"), "{err}");
}

#[tokio::test]
async fn connection_refused_is_io() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = Connection::connect_with(&addr, quick(500))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Io { .. }), "{err:?}");
}

#[tokio::test]
async fn control_requests_go_out_at_the_forced_versions() {
    use kafka_protocol::messages::{
        LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest,
    };
    let handler: common::Handler = Arc::new(|_, request| match request {
        RequestKind::LeaderAndIsr(_) => {
            Reply::Respond(ResponseKind::LeaderAndIsr(Default::default()))
        }
        RequestKind::UpdateMetadata(_) => {
            Reply::Respond(ResponseKind::UpdateMetadata(Default::default()))
        }
        RequestKind::StopReplica(_) => {
            Reply::Respond(ResponseKind::StopReplica(Default::default()))
        }
        _ => Reply::Close,
    });
    let broker = TestBroker::start(kafka_2_8_versions(), handler).await;
    let mut connection = Connection::connect(&broker.addr, "controller")
        .await
        .unwrap();
    connection
        .send_version(LeaderAndIsrRequest::default(), 5)
        .await
        .unwrap();
    connection
        .send_version(UpdateMetadataRequest::default(), 7)
        .await
        .unwrap();
    connection
        .send_version(StopReplicaRequest::default(), 3)
        .await
        .unwrap();
    assert_eq!(broker.seen_versions(ApiKey::LeaderAndIsr), [5]);
    assert_eq!(broker.seen_versions(ApiKey::UpdateMetadata), [7]);
    assert_eq!(broker.seen_versions(ApiKey::StopReplica), [3]);
}
