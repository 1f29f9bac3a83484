//! One client connection: read size-prefixed frames, decode, route to the handler, write the
//! response. Requests are handled one at a time, so pipelined requests are answered in the
//! order they arrived (as Kafka does by muting a channel while it has a request in flight).
//!
//! Reading is bounded (see [`crate::limits`]): a frame's body is read only once the request
//! pool has room for all of it, and a complete frame waits for a place among
//! `queued.max.requests` before it is handled; meanwhile the connection reads nothing more.
//! Beyond the frame being read a connection buffers at most [`READ_AHEAD_BYTES`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use protocol::frame::{decode_frame, peek_frame_size, SIZE_PREFIX_BYTES};
use protocol::request::RequestBody;
use protocol::response::encode_unsupported_api_versions;
use protocol::{decode_request, encode_response, DecodedRequest};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, info_span, warn, Instrument};

use crate::auth::sasl_session::{Admit, SaslSession};
use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::handlers;
use crate::limits::{self, PoolPermit};
use crate::metrics::{self, ClientSoftware, RequestTimes, TopicScan};
use crate::quotas;
use crate::zero_copy;

/// Bytes read ahead while no frame size is known (small pipelined requests arrive in one
/// read); the only request bytes a connection holds outside the pool.
pub(crate) const READ_AHEAD_BYTES: usize = 4096;

/// A connection's byte stream: a TCP socket, or TLS over one.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// The socket itself when nothing wraps it (zero-copy Fetch writes to it with sendfile).
    fn tcp(&mut self) -> Option<&mut TcpStream>;
}

impl Transport for TcpStream {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
}

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
}

/// Serves one connection until the peer closes it, it sends something unreadable, or the
/// broker shuts down (checked between requests).
///
/// On a SASL listener `sasl` holds the connection's authentication: nothing but ApiVersions
/// and the SASL exchange reaches the handlers until the client authenticated.
pub(crate) async fn serve<S: Transport>(
    ctx: Arc<BrokerContext>,
    stream: S,
    rctx: RequestContext,
    sasl: Option<SaslSession>,
    shutdown: watch::Receiver<bool>,
) {
    let metrics = Arc::clone(&ctx.metrics);
    metrics::connection_scope(metrics, serve_connection(ctx, stream, rctx, sasl, shutdown)).await
}

async fn serve_connection<S: Transport>(
    ctx: Arc<BrokerContext>,
    mut stream: S,
    mut rctx: RequestContext,
    mut sasl: Option<SaslSession>,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = rctx.peer;
    ctx.metrics.connection_opened();
    // What the client says it is (ApiVersions v3+, KIP-511), for the per-software metrics.
    let mut software = ClientSoftware::unknown();
    ctx.metrics.client_software_set(None, &software);
    let mut buf = BytesMut::new();
    loop {
        let Some((frame, permit)) =
            next_frame(&ctx, &mut stream, &mut buf, peer, &mut shutdown).await
        else {
            break;
        };
        let received = Instant::now();
        let slot = tokio::select! {
            slot = ctx.request_limiter.request_slot() => slot,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let request = match &mut sasl {
            Some(session) => match session.admit(&ctx, &mut rctx, frame).await {
                Admit::Serve(request) => request,
                Admit::Reply { frame, close } => {
                    let written = write_all_flush(&mut stream, &frame).await;
                    if written.is_err() || close {
                        drop((slot, permit));
                        session.delay_close().await;
                        break;
                    }
                    continue;
                }
                Admit::Close => {
                    drop((slot, permit));
                    session.delay_close().await;
                    break;
                }
            },
            None => match decode_request(frame) {
                Ok(request) => request,
                Err(err) => {
                    warn!(%peer, error = %err, "closing connection: cannot decode request");
                    ctx.metrics.request_error();
                    break;
                }
            },
        };
        if let RequestBody::Supported(RequestKind::ApiVersions(api_versions)) = &request.body {
            if let Some(named) =
                handlers::api_versions::client_software(api_versions, request.api_version())
            {
                if named != software {
                    debug!(%peer, name = %named.name, version = %named.version, "client software");
                    ctx.metrics.client_software_set(Some(&software), &named);
                    software = named;
                }
            }
        }
        let dequeued = Instant::now();
        let span = info_span!("request", api = ?request.api_key, version = request.api_version(),
            correlation_id = request.correlation_id(), client_id = request.header.client_id.as_deref().unwrap_or(""));
        // A Produce with acks=0 is never answered (the client does not read a response).
        let no_response = matches!(&request.body,
            RequestBody::Supported(RequestKind::Produce(p)) if p.acks == 0);
        // Fetch records may go out with sendfile on this (plaintext) connection.
        let fetch_version = matches!(&request.body, RequestBody::Supported(RequestKind::Fetch(_)))
            .then(|| request.api_version());
        // sendfile needs the socket itself: not on TLS connections.
        let zero_copy =
            fetch_version.is_some() && ctx.config.limits.fetch_zero_copy && stream.tcp().is_some();
        let api_key = request.api_key;
        let api_version = request.api_version();
        let ((((response, answered), held), regions), throttle_ms) =
            quotas::scope(zero_copy::scope(
                zero_copy,
                // Boxed: the handlers' state machines are large, and nested in these scopes
                // they overflowed a worker's stack in debug builds.
                limits::holding(
                    slot,
                    permit,
                    Box::pin(respond(&ctx, request, &rctx).instrument(span)),
                ),
            ))
            .await;
        let Some(response) = response else {
            break;
        };
        // Over its quota the client is muted: this connection reads nothing for
        // `throttle_time_ms`, after the response (KIP-219) or, for older clients, before it.
        // The request's queue place and pool bytes are given back first.
        let mute = (throttle_ms > 0).then(|| Duration::from_millis(u64::from(throttle_ms)));
        let answer_first = quotas::answer_then_mute(api_key, api_version) && !no_response;
        let mut held = Some(held);
        if let Some(mute) = mute.filter(|_| !answer_first) {
            drop(held.take());
            if !muted(mute, &mut shutdown).await {
                break;
            }
        }
        let send_started = Instant::now();
        if !no_response {
            let written = if regions.is_empty() {
                // A TLS stream holds what it encrypted until flushed; a TCP stream's flush is free.
                write_all_flush(&mut stream, &response).await
            } else {
                let flexible = fetch_version.is_some_and(|v| v >= 12);
                let tcp = stream
                    .tcp()
                    .expect("regions are attached on plain TCP connections only");
                match zero_copy::splice(response, regions, flexible) {
                    Ok(chunks) => zero_copy::write(tcp, &chunks).await,
                    Err(err) => {
                        tracing::error!(%peer, error = %err, "closing connection");
                        break;
                    }
                }
            };
            if let Err(err) = written {
                debug!(%peer, error = %err, "write failed");
                break;
            }
        }
        let times = RequestTimes {
            received,
            dequeued,
            parked: answered.parked,
            handled: answered.handled,
            send_started,
            sent: Instant::now(),
        };
        ctx.metrics.request_done(
            answered.api,
            answered.version,
            answered.follower_fetch,
            &times,
        );
        if let Some(mute) = mute.filter(|_| answer_first) {
            drop(held.take());
            if !muted(mute, &mut shutdown).await {
                break;
            }
        }
        // The request's queue place and pool bytes (if still held) are given back here,
        // after the response went out.
        drop(held);
    }
    ctx.metrics.client_software_closed(&software);
    ctx.metrics.connection_closed();
}

/// Waits out a quota's mute; false when the broker shuts down meanwhile.
async fn muted(mute: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(mute) => true,
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

/// Reads the next frame: its size first, then, once the pool has room for all of it, its
/// body. `None` when the connection must close (peer gone, idle, bad frame, shutdown).
async fn next_frame<S: AsyncRead + Unpin>(
    ctx: &BrokerContext,
    stream: &mut S,
    buf: &mut BytesMut,
    peer: SocketAddr,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<(Bytes, PoolPermit)> {
    let max_bytes = ctx.config.socket_request_max_bytes;
    let idle = ctx.config.connections_max_idle;
    let mut permit = None;
    loop {
        let size = match peek_frame_size(buf, max_bytes) {
            Ok(size) => size,
            Err(err) => {
                warn!(%peer, error = %err, "closing connection: bad frame");
                ctx.metrics.request_error();
                return None;
            }
        };
        let want = match size {
            Some(size) => {
                if permit.is_none() {
                    permit = Some(tokio::select! {
                        permit = ctx.request_limiter.reserve_bytes(size) => permit,
                        _ = shutdown.wait_for(|stop| *stop) => return None,
                    });
                }
                if let Ok(Some(frame)) = decode_frame(buf, max_bytes) {
                    if buf.is_empty() {
                        // Let go of the buffer the frame was split from, so a handler can own
                        // the frame's bytes (Produce then appends its batch without a copy).
                        *buf = BytesMut::new();
                    }
                    return Some((frame, permit.expect("reserved above")));
                }
                SIZE_PREFIX_BYTES + size - buf.len()
            }
            None => READ_AHEAD_BYTES - buf.len(),
        };
        buf.reserve(want);
        let mut room = (&mut *buf).limit(want);
        let read = tokio::select! {
            read = tokio::time::timeout(idle, stream.read_buf(&mut room)) => match read {
                Ok(read) => read,
                Err(_) => {
                    debug!(%peer, idle_ms = idle.as_millis() as u64, "closing idle connection");
                    return None;
                }
            },
            _ = shutdown.wait_for(|stop| *stop) => return None,
        };
        match read {
            Ok(0) => {
                if !buf.is_empty() {
                    debug!(%peer, pending = buf.len(), "peer closed mid-frame");
                }
                return None;
            }
            Ok(_) => {}
            Err(err) => {
                debug!(%peer, error = %err, "read failed");
                return None;
            }
        }
    }
}

async fn write_all_flush<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// How a request was answered, for its `RequestMetrics`.
struct Answered {
    api: ApiKey,
    version: i16,
    follower_fetch: bool,
    parked: Option<Instant>,
    handled: Instant,
}

/// The encoded response frame (`None` when the connection must close) and how it was
/// answered.
async fn respond(
    ctx: &Arc<BrokerContext>,
    request: DecodedRequest,
    rctx: &RequestContext,
) -> (Option<BytesMut>, Answered) {
    let peer = rctx.peer;
    let api_key = request.api_key;
    let version = request.api_version();
    let correlation_id = request.correlation_id();
    let mut answered = Answered {
        api: api_key,
        version,
        follower_fetch: false,
        parked: None,
        handled: Instant::now(),
    };
    let body = match request.body {
        RequestBody::Supported(kind) => {
            let scan = TopicScan::of(&kind);
            answered.follower_fetch = scan.is_follower_fetch();
            metrics::request_started(api_key);
            let body = crate::groups::PEER
                .scope(peer, handlers::handle(ctx, rctx, &request.header, kind))
                .await;
            answered.parked = metrics::request_finished();
            answered.handled = Instant::now();
            scan.account(&body, &ctx.metadata_cache);
            body
        }
        RequestBody::UnsupportedApiVersions => {
            debug!("ApiVersions version unsupported; answering in v0 with UNSUPPORTED_VERSION");
            return (
                Some(encode_unsupported_api_versions(correlation_id)),
                answered,
            );
        }
        RequestBody::Unsupported(kind) => {
            // The body is answered at the version the request was read at (see
            // `protocol::request::codec_version`), under the header of the version asked.
            let body_version = protocol::request::codec_version(api_key, version);
            let Some(body) = handlers::unsupported::error_response(&kind, body_version) else {
                warn!(%peer, ?api_key, version, "closing connection: API or version not supported and no error response exists for it");
                ctx.metrics.request_error();
                return (None, answered);
            };
            debug!(
                ?api_key,
                version, "unsupported API or version; answering UNSUPPORTED_VERSION"
            );
            return match protocol::encode_unsupported_response(
                api_key,
                version,
                correlation_id,
                &body,
            ) {
                Ok(frame) => (Some(frame), answered),
                Err(err) => {
                    tracing::error!(%peer, error = %err, "closing connection: cannot encode response");
                    (None, answered)
                }
            };
        }
    };
    match encode_response(api_key, version, correlation_id, &body) {
        Ok(frame) => {
            debug!(response_bytes = frame.len(), "request handled");
            (Some(frame), answered)
        }
        Err(err) => {
            tracing::error!(%peer, error = %err, "closing connection: cannot encode response");
            (None, answered)
        }
    }
}
