//! A tiny in-process Kafka peer for tests: it decodes requests with kafka-protocol, answers
//! ApiVersions from a configurable table (Kafka's v0 `UNSUPPORTED_VERSION` reply for versions
//! it does not know) and hands every other request to a closure.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the test peer does with one request.
#[derive(Debug)]
pub enum Reply {
    /// Answer with this response.
    Respond(ResponseKind),
    /// Wait, then answer.
    Delay(Duration, ResponseKind),
    /// Answer with a correlation id off by 1000.
    WrongCorrelation(ResponseKind),
    /// Never answer (but keep reading).
    Ignore,
    /// Close the connection.
    Close,
}

/// Decides the reply to a non-ApiVersions request.
pub type Handler = Arc<dyn Fn(&RequestHeader, &RequestKind) -> Reply + Send + Sync>;

/// One recorded request: api key, version, correlation id, client id.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// A listening test peer.
#[derive(Clone)]
pub struct TestBroker {
    pub addr: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestBroker {
    /// Starts a peer advertising `versions` (api, min, max); ApiVersions itself is answered
    /// at up to the max given for it (or 3 when absent).
    pub async fn start(versions: Vec<(ApiKey, i16, i16)>, handler: Handler) -> TestBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let broker = TestBroker {
            addr,
            seen: Arc::clone(&seen),
        };
        let versions = Arc::new(versions);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(
                    stream,
                    Arc::clone(&versions),
                    Arc::clone(&handler),
                    Arc::clone(&seen),
                ));
            }
        });
        broker
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn seen_versions(&self, api: ApiKey) -> Vec<i16> {
        self.seen()
            .into_iter()
            .filter(|s| s.api == api)
            .map(|s| s.version)
            .collect()
    }
}

/// The ApiVersions table Kafka 2.8 advertises for the admin APIs (plus the control APIs).
pub fn kafka_2_8_versions() -> Vec<(ApiKey, i16, i16)> {
    vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 11),
        (ApiKey::CreateTopics, 0, 7),
        (ApiKey::DeleteTopics, 0, 6),
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::DescribeConfigs, 0, 4),
        (ApiKey::AlterConfigs, 0, 2),
        (ApiKey::IncrementalAlterConfigs, 0, 1),
        (ApiKey::LeaderAndIsr, 0, 5),
        (ApiKey::UpdateMetadata, 0, 7),
        (ApiKey::StopReplica, 0, 3),
    ]
}

async fn serve(
    mut stream: TcpStream,
    versions: Arc<Vec<(ApiKey, i16, i16)>>,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    loop {
        let mut size = [0u8; 4];
        if stream.read_exact(&mut size).await.is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let api_versions_max = versions
            .iter()
            .find(|(key, _, _)| *key == ApiKey::ApiVersions)
            .map_or(3, |(_, _, max)| *max);
        if api == ApiKey::ApiVersions && version > api_versions_max {
            // Kafka's answer to an ApiVersions version it does not know: v0 body, header v0.
            seen.lock().unwrap().push(Seen {
                api,
                version,
                correlation_id,
                client_id: None,
            });
            let response = ApiVersionsResponse::default()
                .with_error_code(35)
                .with_api_keys(api_versions(&versions));
            write_response(
                &mut stream,
                correlation_id,
                0,
                &ResponseKind::ApiVersions(response),
                0,
            )
            .await;
            continue;
        }
        let mut bytes = Bytes::from(frame);
        let header =
            RequestHeader::decode(&mut bytes, api.request_header_version(version)).unwrap();
        let request = RequestKind::decode(api, &mut bytes, version).unwrap();
        seen.lock().unwrap().push(Seen {
            api,
            version,
            correlation_id,
            client_id: header.client_id.as_ref().map(|c| c.to_string()),
        });
        let header_version = api.response_header_version(version);
        let reply = if api == ApiKey::ApiVersions {
            Reply::Respond(ResponseKind::ApiVersions(
                ApiVersionsResponse::default().with_api_keys(api_versions(&versions)),
            ))
        } else {
            handler(&header, &request)
        };
        match reply {
            Reply::Respond(response) => {
                write_response(
                    &mut stream,
                    correlation_id,
                    header_version,
                    &response,
                    version,
                )
                .await
            }
            Reply::Delay(delay, response) => {
                tokio::time::sleep(delay).await;
                write_response(
                    &mut stream,
                    correlation_id,
                    header_version,
                    &response,
                    version,
                )
                .await
            }
            Reply::WrongCorrelation(response) => {
                write_response(
                    &mut stream,
                    correlation_id + 1000,
                    header_version,
                    &response,
                    version,
                )
                .await
            }
            Reply::Ignore => {}
            Reply::Close => return,
        }
    }
}

fn api_versions(versions: &[(ApiKey, i16, i16)]) -> Vec<ApiVersion> {
    versions
        .iter()
        .map(|(api, min, max)| {
            ApiVersion::default()
                .with_api_key(*api as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect()
}

async fn write_response(
    stream: &mut TcpStream,
    correlation_id: i32,
    header_version: i16,
    response: &ResponseKind,
    version: i16,
) {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, header_version)
        .unwrap();
    response.encode(&mut buf, version).unwrap();
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    let _ = stream.write_all(&buf).await;
}
