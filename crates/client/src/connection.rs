//! One TCP connection to one broker.
//!
//! Requests are written in the caller's order and a background reader task hands each response
//! frame to the request with the same correlation id. Kafka answers in order on a connection, so
//! the reader checks that each response carries the correlation id of the oldest outstanding
//! request; anything else breaks the protocol and closes the connection.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::ClientError;
use crate::versions::{client_versions, API_VERSIONS_PREFERRED};

/// Kafka's `UNSUPPORTED_VERSION` error code.
const UNSUPPORTED_VERSION: i16 = 35;

/// The software name sent in ApiVersions v3+ (must match Kafka's `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`).
const CLIENT_SOFTWARE_NAME: &str = "gregor-client";

/// Settings for one connection.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// Sent in every request header (`client.id`).
    pub client_id: String,
    /// How long to wait for the TCP connection (Kafka's `socket.connection.setup.timeout.ms`).
    pub connect_timeout: Duration,
    /// How long to wait for each response (Kafka's `request.timeout.ms`).
    pub request_timeout: Duration,
    /// The largest response frame accepted; a bigger one closes the connection.
    pub max_response_bytes: usize,
    /// SASL credentials for SASL_PLAINTEXT and SASL_SSL listeners (`None`: no
    /// authentication).
    pub sasl: Option<SaslCredentials>,
    /// TLS for SSL and SASL_SSL listeners (`None`: plaintext).
    pub tls: Option<crate::tls::TlsSettings>,
}

/// A SASL login: `sasl.mechanism` with `username` and `password` (what Kafka clients read
/// from `sasl.jaas.config`'s PlainLoginModule or ScramLoginModule line).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// How connections to one listener are secured: TLS and SASL, each optional (PLAINTEXT is
/// neither). A broker builds one for its inter-broker listener and hands it to everything
/// that connects to another broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// TLS for SSL and SASL_SSL.
    pub tls: Option<crate::tls::TlsSettings>,
    /// SASL for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslCredentials>,
}

impl Security {
    /// The security protocol these settings speak (`SASL_SSL`, ...).
    pub fn protocol_name(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

impl ConnectionOptions {
    /// These options with `security`'s TLS and SASL settings.
    pub fn secured(mut self, security: &Security) -> Self {
        self.tls.clone_from(&security.tls);
        self.sasl.clone_from(&security.sasl);
        self
    }
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            client_id: "gregor".to_string(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 100 * 1024 * 1024,
            sasl: None,
            tls: None,
        }
    }
}

/// One TCP connection to a broker: size-prefixed frames, correlation ids, in-order responses,
/// and the version ranges the broker advertised in the ApiVersions handshake.
#[derive(Debug)]
pub struct Connection {
    addr: String,
    options: ConnectionOptions,
    writer: Writer,
    shared: Arc<Mutex<Shared>>,
    reader: JoinHandle<()>,
    next_correlation_id: i32,
    broker_versions: HashMap<i16, (i16, i16)>,
}

/// The sending half of the socket, plain or TLS.
struct Writer(Box<dyn AsyncWrite + Send + Sync + Unpin>);

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writer")
    }
}

/// The receiving half of the socket, plain or TLS.
type Reader = Box<dyn AsyncRead + Send + Sync + Unpin>;

/// State shared between the writer (the [`Connection`]) and the reader task.
#[derive(Debug, Default)]
struct Shared {
    pending: VecDeque<Pending>,
    /// Why the connection stopped working; once set, nothing new is queued.
    closed: Option<(io::ErrorKind, String)>,
}

/// A request that has been (or is being) written and awaits its response.
#[derive(Debug)]
struct Pending {
    correlation_id: i32,
    response_header_version: i16,
    reply: oneshot::Sender<Result<Bytes, ClientError>>,
}

impl Connection {
    /// Connects to `addr` (`host:port`) with default timeouts and performs the ApiVersions
    /// handshake (v3, falling back to v0 when the broker answers `UNSUPPORTED_VERSION`).
    pub async fn connect(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        let options = ConnectionOptions {
            client_id: client_id.to_string(),
            ..ConnectionOptions::default()
        };
        Connection::connect_with(addr, options).await
    }

    /// Like [`Connection::connect`], with explicit options.
    pub async fn connect_with(
        addr: &str,
        options: ConnectionOptions,
    ) -> Result<Connection, ClientError> {
        let stream = tokio::time::timeout(options.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.to_string(),
                what: "connection".to_string(),
                after: options.connect_timeout,
            })?
            .map_err(|source| ClientError::Io {
                addr: addr.to_string(),
                source,
            })?;
        // Requests are small and latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let (read_half, writer): (Reader, Writer) = match &options.tls {
            None => {
                let (read, write) = stream.into_split();
                (Box::new(read), Writer(Box::new(write)))
            }
            Some(settings) => {
                let tls = tokio::time::timeout(
                    options.connect_timeout,
                    crate::tls::connect(stream, addr, settings),
                )
                .await
                .map_err(|_| ClientError::Timeout {
                    addr: addr.to_string(),
                    what: "TLS handshake".to_string(),
                    after: options.connect_timeout,
                })??;
                let (read, write) = tokio::io::split(tls);
                (Box::new(read), Writer(Box::new(write)))
            }
        };
        let shared = Arc::new(Mutex::new(Shared::default()));
        let reader = tokio::spawn(read_responses(
            read_half,
            Arc::clone(&shared),
            addr.to_string(),
            options.max_response_bytes,
        ));
        let mut connection = Connection {
            addr: addr.to_string(),
            options,
            writer,
            shared,
            reader,
            next_correlation_id: 0,
            broker_versions: HashMap::new(),
        };
        connection.handshake().await?;
        if let Some(sasl) = connection.options.sasl.clone() {
            connection.authenticate(&sasl).await?;
        }
        Ok(connection)
    }

    /// The peer's `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The broker's advertised `(min, max)` versions of `api`, `None` if it does not support it.
    pub fn broker_versions(&self, api: ApiKey) -> Option<(i16, i16)> {
        self.broker_versions.get(&(api as i16)).copied()
    }

    /// The version [`Connection::send`] would use for `R`: the highest one both this client
    /// and the broker support.
    pub fn negotiated_version<R: Request>(&self) -> Result<i16, ClientError> {
        let api = api_key(R::KEY);
        let ours = client_versions(api).intersect(&R::VERSIONS);
        let unsupported = |broker| ClientError::UnsupportedVersion {
            api,
            client: ours.to_string(),
            broker,
        };
        let Some((min, max)) = self.broker_versions(api) else {
            return Err(unsupported(None));
        };
        let both = ours.intersect(&kafka_protocol::protocol::VersionRange { min, max });
        if both.is_empty() {
            return Err(unsupported(Some((min, max))));
        }
        Ok(both.max)
    }

    /// Sends `request` at the highest version both sides support and awaits its response.
    pub async fn send<R: Request>(&mut self, request: R) -> Result<R::Response, ClientError> {
        let version = self.negotiated_version::<R>()?;
        self.send_version(request, version).await
    }

    /// Sends `request` at exactly `version` (refused up front when the broker does not
    /// advertise it) and awaits its response.
    pub async fn send_version<R: Request>(
        &mut self,
        request: R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.send_version_tagged(request, version, &BTreeMap::new())
            .await
    }

    /// Like [`Connection::send_version`], with tagged fields in the request header (header
    /// version 2, so only flexible request versions can carry them). The controller sends
    /// its control-plane proof this way.
    pub async fn send_version_tagged<R: Request>(
        &mut self,
        request: R,
        version: i16,
        header_tags: &BTreeMap<i32, Bytes>,
    ) -> Result<R::Response, ClientError> {
        self.check_version::<R>(version)?;
        if !header_tags.is_empty() && R::header_version(version) < 2 {
            return Err(ClientError::Protocol {
                addr: self.addr.clone(),
                message: format!(
                    "{:?} v{version} has no header tagged fields (not a flexible version)",
                    api_key(R::KEY)
                ),
            });
        }
        let reply = self.dispatch_tagged(&request, version, header_tags).await?;
        self.await_response::<R>(reply, version).await
    }

    /// Pipelines `requests`: writes them all, then awaits their responses in order. Each
    /// response gets the full request timeout, counted from when all requests were written.
    pub async fn send_all<R: Request>(
        &mut self,
        requests: Vec<R>,
    ) -> Result<Vec<R::Response>, ClientError> {
        let version = self.negotiated_version::<R>()?;
        let mut replies = Vec::with_capacity(requests.len());
        for request in &requests {
            replies.push(self.dispatch(request, version).await?);
        }
        let mut responses = Vec::with_capacity(replies.len());
        for reply in replies {
            responses.push(self.await_response::<R>(reply, version).await?);
        }
        Ok(responses)
    }

    /// Sends ApiVersions (v3, then v0 if refused) and records the broker's ranges.
    async fn handshake(&mut self) -> Result<(), ClientError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_SOFTWARE_NAME))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = self
            .api_versions(request.clone(), API_VERSIONS_PREFERRED)
            .await?;
        let response = if response.error_code == UNSUPPORTED_VERSION {
            tracing::debug!(addr = %self.addr, "broker refused ApiVersions v3, retrying with v0");
            self.api_versions(ApiVersionsRequest::default(), 0).await?
        } else {
            response
        };
        if response.error_code != 0 {
            return Err(ClientError::server(response.error_code, None));
        }
        self.broker_versions = response
            .api_keys
            .iter()
            .map(|v| (v.api_key, (v.min_version, v.max_version)))
            .collect();
        Ok(())
    }

    /// SaslHandshake v1 and SaslAuthenticate, as Kafka's `SaslClientAuthenticator` runs them.
    /// A refusal (wrong credentials, a mechanism not offered, a server proof that does not
    /// verify) is a [`ClientError::Authentication`]; a broken connection stays what it is.
    async fn authenticate(&mut self, sasl: &SaslCredentials) -> Result<(), ClientError> {
        let addr = self.addr.clone();
        self.exchange(sasl).await.map_err(|err| match err {
            ClientError::Server { code, message } => ClientError::Authentication {
                addr,
                code: Some(code),
                message,
            },
            other => other,
        })
    }

    async fn exchange(&mut self, sasl: &SaslCredentials) -> Result<(), ClientError> {
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        use security::scram::{ScramClient, ScramMechanism};

        let handshake = self
            .send_version(
                SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_string(sasl.mechanism.clone())),
                1,
            )
            .await?;
        if handshake.error_code != 0 {
            let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| &**m).collect();
            return Err(ClientError::server(
                handshake.error_code,
                Some(&format!(
                    "Client SASL mechanism '{}' not enabled in the server, enabled mechanisms are {offered:?}",
                    sasl.mechanism
                )),
            ));
        }
        let version = self.negotiated_version::<SaslAuthenticateRequest>()?;
        let exchange =
            |token: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let check = |response: &kafka_protocol::messages::SaslAuthenticateResponse| {
            if response.error_code != 0 {
                Err(ClientError::server(
                    response.error_code,
                    response.error_message.as_deref(),
                ))
            } else {
                Ok(())
            }
        };
        match ScramMechanism::from_name(&sasl.mechanism) {
            None if sasl.mechanism == "PLAIN" => {
                let token = security::plain::client_message(&sasl.username, &sasl.password);
                let response = self.send_version(exchange(token), version).await?;
                check(&response)
            }
            None => Err(ClientError::Config(format!(
                "sasl.mechanism={} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
                sasl.mechanism
            ))),
            Some(mechanism) => {
                let nonce = uuid::Uuid::new_v4().simple().to_string();
                let (mut client, first) =
                    ScramClient::start(mechanism, &sasl.username, &sasl.password, &nonce);
                let response = self.send_version(exchange(first), version).await?;
                check(&response)?;
                let protocol = |e: security::scram::ScramError| ClientError::Authentication {
                    addr: self.addr.clone(),
                    code: None,
                    message: e.to_string(),
                };
                let last = client
                    .server_first(&response.auth_bytes)
                    .map_err(protocol)?;
                let response = self.send_version(exchange(last), version).await?;
                check(&response)?;
                client
                    .server_final(&response.auth_bytes)
                    .map_err(|e| ClientError::Authentication {
                        addr: self.addr.clone(),
                        code: None,
                        message: e.to_string(),
                    })
            }
        }
    }

    /// One ApiVersions exchange. A broker that does not know the requested version answers in
    /// the v0 format with `UNSUPPORTED_VERSION`, so an error code of 35 means "decode as v0".
    async fn api_versions(
        &mut self,
        request: ApiVersionsRequest,
        version: i16,
    ) -> Result<ApiVersionsResponse, ClientError> {
        let reply = self.dispatch(&request, version).await?;
        let mut body = self.await_body(reply, ApiKey::ApiVersions).await?;
        let decode_version =
            if body.len() >= 2 && i16::from_be_bytes([body[0], body[1]]) == UNSUPPORTED_VERSION {
                0
            } else {
                version
            };
        ApiVersionsResponse::decode(&mut body, decode_version).map_err(|err| ClientError::Decode {
            api: ApiKey::ApiVersions,
            version: decode_version,
            addr: self.addr.clone(),
            message: err.to_string(),
        })
    }

    fn check_version<R: Request>(&self, version: i16) -> Result<(), ClientError> {
        let api = api_key(R::KEY);
        let broker = self.broker_versions(api);
        let codec_ok = R::VERSIONS.min <= version && version <= R::VERSIONS.max;
        let broker_ok = broker.is_some_and(|(min, max)| min <= version && version <= max);
        if codec_ok && broker_ok {
            Ok(())
        } else {
            Err(ClientError::UnsupportedVersion {
                api,
                client: format!("{version}..{version}"),
                broker,
            })
        }
    }

    /// Encodes and writes one request frame, registering it as pending first so the reader can
    /// never see its response before it is expected.
    async fn dispatch<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<oneshot::Receiver<Result<Bytes, ClientError>>, ClientError> {
        self.dispatch_tagged(request, version, &BTreeMap::new())
            .await
    }

    async fn dispatch_tagged<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        header_tags: &BTreeMap<i32, Bytes>,
    ) -> Result<oneshot::Receiver<Result<Bytes, ClientError>>, ClientError> {
        let api = api_key(R::KEY);
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = self.encode(request, version, correlation_id, header_tags)?;
        let (reply, receiver) = oneshot::channel();
        {
            let mut shared = lock(&self.shared);
            if let Some((kind, reason)) = &shared.closed {
                return Err(self.closed_error(*kind, reason));
            }
            shared.pending.push_back(Pending {
                correlation_id,
                response_header_version: api.response_header_version(version),
                reply,
            });
        }
        tracing::trace!(addr = %self.addr, ?api, version, correlation_id, "sending request");
        let written = match self.writer.0.write_all(&frame).await {
            // TLS buffers what it encrypts: flush sends it (a no-op on plain TCP).
            Ok(()) => self.writer.0.flush().await,
            Err(err) => Err(err),
        };
        if let Err(source) = written {
            close(
                &self.shared,
                source.kind(),
                &format!("write failed: {source}"),
                &self.addr,
            );
            return Err(ClientError::Io {
                addr: self.addr.clone(),
                source,
            });
        }
        Ok(receiver)
    }

    fn encode<R: Request>(
        &self,
        request: &R,
        version: i16,
        correlation_id: i32,
        header_tags: &BTreeMap<i32, Bytes>,
    ) -> Result<BytesMut, ClientError> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.options.client_id.clone())))
            .with_unknown_tagged_fields(header_tags.clone());
        let mut frame = BytesMut::with_capacity(64);
        frame.extend_from_slice(&[0; 4]);
        let encoded = header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| request.encode(&mut frame, version));
        if let Err(err) = encoded {
            return Err(ClientError::Protocol {
                addr: self.addr.clone(),
                message: format!(
                    "cannot encode {:?} v{version} request: {err}",
                    api_key(R::KEY)
                ),
            });
        }
        let size = i32::try_from(frame.len() - 4).map_err(|_| ClientError::Protocol {
            addr: self.addr.clone(),
            message: "request larger than 2 GiB".to_string(),
        })?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        Ok(frame)
    }

    async fn await_response<R: Request>(
        &self,
        reply: oneshot::Receiver<Result<Bytes, ClientError>>,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let api = api_key(R::KEY);
        let mut body = self.await_body(reply, api).await?;
        let response =
            R::Response::decode(&mut body, version).map_err(|err| ClientError::Decode {
                api,
                version,
                addr: self.addr.clone(),
                message: err.to_string(),
            })?;
        Ok(response)
    }

    async fn await_body(
        &self,
        reply: oneshot::Receiver<Result<Bytes, ClientError>>,
        api: ApiKey,
    ) -> Result<Bytes, ClientError> {
        match tokio::time::timeout(self.options.request_timeout, reply).await {
            Err(_) => Err(ClientError::Timeout {
                addr: self.addr.clone(),
                what: format!("{api:?} response"),
                after: self.options.request_timeout,
            }),
            Ok(Ok(result)) => result,
            // The reader task dropped the sender without answering: it has closed the
            // connection, and `closed` says why.
            Ok(Err(_)) => {
                let shared = lock(&self.shared);
                let (kind, reason) = shared
                    .closed
                    .clone()
                    .unwrap_or((io::ErrorKind::ConnectionAborted, "connection closed".into()));
                Err(self.closed_error(kind, &reason))
            }
        }
    }

    fn closed_error(&self, kind: io::ErrorKind, reason: &str) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source: io::Error::new(kind, reason.to_string()),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The reader task: reads response frames until the socket fails, handing each body to the
/// oldest pending request after checking its correlation id.
async fn read_responses(
    mut read_half: Reader,
    shared: Arc<Mutex<Shared>>,
    addr: String,
    max_response_bytes: usize,
) {
    let (kind, reason) = loop {
        let mut size = [0u8; 4];
        if let Err(err) = read_half.read_exact(&mut size).await {
            let reason = if err.kind() == io::ErrorKind::UnexpectedEof {
                "connection closed by the broker".to_string()
            } else {
                format!("read failed: {err}")
            };
            break (err.kind(), reason);
        }
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > max_response_bytes {
            break (
                io::ErrorKind::InvalidData,
                format!("invalid response frame size {size} (limit {max_response_bytes})"),
            );
        }
        let mut frame = vec![0u8; size as usize];
        if let Err(err) = read_half.read_exact(&mut frame).await {
            break (err.kind(), format!("read failed mid-frame: {err}"));
        }
        if let Err(reason) = deliver(&shared, Bytes::from(frame), &addr) {
            break (io::ErrorKind::InvalidData, reason);
        }
    };
    close(&shared, kind, &reason, &addr);
}

/// Hands one response frame to its pending request. An error return closes the connection.
fn deliver(shared: &Mutex<Shared>, mut frame: Bytes, addr: &str) -> Result<(), String> {
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let pending = lock(shared).pending.pop_front();
    let Some(pending) = pending else {
        return Err(format!(
            "response with correlation id {correlation_id} but no request outstanding"
        ));
    };
    if pending.correlation_id != correlation_id {
        let message = format!(
            "correlation id for response ({correlation_id}) does not match request ({})",
            pending.correlation_id
        );
        let _ = pending.reply.send(Err(ClientError::Protocol {
            addr: addr.to_string(),
            message: message.clone(),
        }));
        return Err(message);
    }
    let result = ResponseHeader::decode(&mut frame, pending.response_header_version)
        .map(|_| frame.copy_to_bytes(frame.remaining()))
        .map_err(|err| ClientError::Protocol {
            addr: addr.to_string(),
            message: format!("bad response header: {err}"),
        });
    // The receiver is gone when the request timed out; the late answer is simply dropped.
    let _ = pending.reply.send(result);
    Ok(())
}

/// Marks the connection closed and fails every outstanding request with `reason`.
fn close(shared: &Mutex<Shared>, kind: io::ErrorKind, reason: &str, addr: &str) {
    let pending = {
        let mut shared = lock(shared);
        if shared.closed.is_none() {
            shared.closed = Some((kind, reason.to_string()));
        }
        std::mem::take(&mut shared.pending)
    };
    if !pending.is_empty() {
        tracing::debug!(%addr, reason, outstanding = pending.len(), "connection closed");
    }
    for pending in pending {
        let _ = pending.reply.send(Err(ClientError::Io {
            addr: addr.to_string(),
            source: io::Error::new(kind, reason.to_string()),
        }));
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    // A panic while holding this lock cannot leave `Shared` half-updated (each critical
    // section is a single push, pop or take), so a poisoned lock is still usable.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn api_key(key: i16) -> ApiKey {
    // `R::KEY` always comes from the kafka-protocol crate's own message types.
    ApiKey::try_from(key)
        .unwrap_or_else(|()| panic!("kafka-protocol request with unknown key {key}"))
}
