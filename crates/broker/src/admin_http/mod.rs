//! The HTTP admin listener (`admin.listener`): `GET /v1/health`, Prometheus `GET /metrics`,
//! read-only access to the metadata tree at `GET /v1/meta/<znode path>`, and the web
//! console on every other path ([`console`]). With an authorizer configured, every path but
//! `/v1/health` needs HTTP Basic authentication against the user's SCRAM credentials
//! ([`basic_auth`]), and the user is the principal of every Kafka request the path sends.
//!
//! A deliberately tiny HTTP/1.1 server (one request per connection, bounded request head
//! and body) rather than a framework: the console's pages are server-rendered and its
//! actions are form posts, so nothing more is needed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;

use crate::context::BrokerContext;
use crate::error::BrokerError;

mod basic_auth;
mod console;
mod kafka;
mod scrape;
mod views;

use kafka::{Caller, Cluster};

/// Largest request head accepted.
const MAX_REQUEST_HEAD_BYTES: usize = 8192;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the admin listener can see of one broker.
#[derive(Debug, Clone)]
pub struct BrokerView {
    ctx: Arc<BrokerContext>,
}

impl BrokerView {
    pub(crate) fn new(ctx: Arc<BrokerContext>) -> Self {
        BrokerView { ctx }
    }
}

/// A running admin listener.
#[derive(Debug)]
pub struct AdminServer {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl AdminServer {
    /// Binds `addr` and serves `brokers` (the first one's store session answers `/v1/meta`).
    pub async fn bind(
        addr: SocketAddr,
        brokers: Vec<BrokerView>,
    ) -> Result<AdminServer, BrokerError> {
        let bind_error = |source| BrokerError::Bind {
            what: "admin",
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        let (shutdown, mut stop) = watch::channel(false);
        let cluster = Arc::new(Cluster::new(brokers.into_iter().map(|b| b.ctx).collect()));
        let console = Arc::new(console::Console::new());
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stop.wait_for(|s| *s) => return,
                };
                if let Ok((stream, peer)) = accepted {
                    let cluster = Arc::clone(&cluster);
                    let console = Arc::clone(&console);
                    tokio::spawn(async move {
                        if let Err(err) = serve(stream, peer, &cluster, &console).await {
                            debug!(error = %err, "admin request failed");
                        }
                    });
                }
            }
        });
        Ok(AdminServer {
            local_addr,
            shutdown,
            task,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Largest request body accepted (the console's forms).
const MAX_BODY_BYTES: usize = 64 * 1024;

/// One HTTP request, as the routes see it.
#[derive(Debug)]
pub(crate) struct HttpRequest {
    pub method: String,
    /// The path, still percent-encoded.
    pub path: String,
    /// The query string (after `?`), still encoded.
    pub query: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP response.
#[derive(Debug)]
pub(crate) struct HttpResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// `Location` of a redirect.
    pub location: Option<String>,
    /// The `WWW-Authenticate` challenge of a 401.
    pub www_authenticate: Option<&'static str>,
}

impl HttpResponse {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<String>) -> Self {
        HttpResponse {
            status,
            content_type,
            body: body.into(),
            location: None,
            www_authenticate: None,
        }
    }

    pub(crate) fn text(status: u16, body: impl Into<String>) -> Self {
        HttpResponse::new(status, "text/plain; charset=utf-8", body)
    }

    pub(crate) fn redirect(location: String) -> Self {
        HttpResponse {
            location: Some(location),
            ..HttpResponse::text(303, "see other\n")
        }
    }
}

/// Reads one request (head, then a body of `Content-Length` bytes), or `None` when it is
/// malformed or too large.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<HttpRequest>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if let Some(i) = buf.windows(2).position(|w| w == b"\n\n") {
            break i + 2;
        }
        if buf.len() > MAX_REQUEST_HEAD_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut parts = lines.next().unwrap_or_default().split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length = match headers.iter().find(|(n, _)| n == "content-length") {
        Some((_, v)) => match v.parse::<usize>() {
            Ok(n) if n <= MAX_BODY_BYTES => n,
            _ => return Ok(None),
        },
        None => 0,
    };
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target, String::new()),
    };
    Ok(Some(HttpRequest {
        method,
        path,
        query,
        headers,
        body,
    }))
}

async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    cluster: &Cluster,
    console: &console::Console,
) -> std::io::Result<()> {
    let read = tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await;
    let response = match read {
        Ok(Ok(Some(request))) => route(&request, peer, cluster, console).await,
        Ok(Ok(None)) | Err(_) => HttpResponse::text(400, "bad request\n"),
        Ok(Err(err)) => return Err(err),
    };
    let reason = match response.status {
        200 => "OK",
        303 => "See Other",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Bad Request",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    if response.content_type.starts_with("text/html") {
        // The console's pages: no framing (clickjacking), scripts only from this listener.
        head.push_str("X-Frame-Options: DENY\r\nContent-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'\r\n");
    }
    if let Some(location) = &response.location {
        head.push_str(&format!("Location: {location}\r\n"));
    }
    if let Some(challenge) = response.www_authenticate {
        head.push_str(&format!("WWW-Authenticate: {challenge}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(response.body.as_bytes()).await?;
    stream.shutdown().await
}

async fn route(
    request: &HttpRequest,
    peer: SocketAddr,
    cluster: &Cluster,
    console: &console::Console,
) -> HttpResponse {
    let path = request.path.as_str();
    if path == "/v1/health" {
        return if request.method != "GET" {
            HttpResponse::text(405, "only GET is supported\n")
        } else if cluster.any().is_err() {
            HttpResponse::text(503, "no broker\n")
        } else {
            HttpResponse::text(200, "ok\n")
        };
    }
    let Ok(any) = cluster.any() else {
        return HttpResponse::text(503, "no broker\n");
    };
    let principal = match basic_auth::principal(any, request, peer).await {
        Ok(principal) => principal,
        Err(refused) => return refused,
    };
    let caller = Caller { principal, peer };
    let is_api = path == "/metrics" || path.starts_with("/v1/");
    if !is_api {
        return console.route(request, cluster, &caller).await;
    }
    if request.method != "GET" {
        return HttpResponse::text(405, "only GET is supported\n");
    }
    if path == "/metrics" {
        return HttpResponse::new(
            200,
            "text/plain; version=0.0.4",
            scrape::metrics(cluster, &caller).await,
        );
    }
    if let Some(rest) = path.strip_prefix("/v1/meta") {
        let Ok(first) = cluster.any() else {
            return HttpResponse::text(503, "no broker\n");
        };
        let znode = match percent_decode(rest.trim_end_matches('/')) {
            Some(p) if p.is_empty() => "/".to_string(),
            Some(p) if p.starts_with('/') => p,
            _ => return HttpResponse::text(400, "bad path\n"),
        };
        let json = |status, value: Value| {
            HttpResponse::new(status, "application/json", format!("{value}\n"))
        };
        return match describe_znode(first, &znode).await {
            Ok(Some(value)) => json(200, value),
            Ok(None) => json(404, json!({"error": "no node", "path": znode})),
            // A path the store refuses is the caller's mistake; anything else is ours.
            Err(err @ metastore::Error::BadArguments(_)) => {
                json(400, json!({"error": err.to_string()}))
            }
            Err(err) => json(503, json!({"error": err.to_string()})),
        };
    }
    HttpResponse::text(404, "not found\n")
}

pub(crate) async fn describe_znode(
    ctx: &BrokerContext,
    path: &str,
) -> Result<Option<Value>, metastore::Error> {
    let zk = ctx.zk();
    let client = zk.client();
    let (data, stat) = match client.get_data(path, false).await {
        Ok(found) => found,
        Err(metastore::Error::NoNode(_)) => return Ok(None),
        Err(err) => return Err(err),
    };
    let children = match client.get_children(path, false).await {
        Ok(children) => children,
        Err(metastore::Error::NoNode(_)) => return Ok(None),
        Err(err) => return Err(err),
    };
    let data = if data.is_empty() {
        Value::Null
    } else if znodes::security::is_secret(path) {
        // Secrets stay in the store: whoever reaches this listener is not thereby a broker.
        Value::String("<redacted>".to_owned())
    } else {
        serde_json::from_slice(&data)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&data).into_owned()))
    };
    Ok(Some(json!({
        "path": path,
        "data": data,
        "children": children,
        "stat": {
            "czxid": stat.czxid,
            "mzxid": stat.mzxid,
            "pzxid": stat.pzxid,
            "ctime": stat.ctime,
            "mtime": stat.mtime,
            "version": stat.version,
            "cversion": stat.cversion,
            "ephemeral_owner": stat.ephemeral_owner,
            "data_length": stat.data_length,
            "num_children": stat.num_children,
        },
    })))
}

pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decodes_percent_escapes() {
        assert_eq!(
            percent_decode("/brokers/topics/a%2Eb").as_deref(),
            Some("/brokers/topics/a.b")
        );
        assert_eq!(percent_decode("/x%2"), None);
    }
}
