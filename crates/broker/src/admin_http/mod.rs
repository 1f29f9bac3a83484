//! The HTTP admin listener (`admin.listener`): `GET /v1/health`, Prometheus `GET /metrics`,
//! and read-only access to the metadata tree at `GET /v1/meta/<znode path>`.
//!
//! A deliberately tiny HTTP/1.1 server (GET only, one request per connection, bounded
//! request head) rather than a framework: it serves operators and scripts, not browsers.

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
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stop.wait_for(|s| *s) => return,
                };
                if let Ok((stream, peer)) = accepted {
                    let cluster = Arc::clone(&cluster);
                    tokio::spawn(async move {
                        if let Err(err) = serve(stream, peer, &cluster).await {
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

async fn serve(mut stream: TcpStream, peer: SocketAddr, cluster: &Cluster) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let read = tokio::time::timeout(READ_TIMEOUT, async {
        let mut chunk = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
            if head.len() > MAX_REQUEST_HEAD_BYTES {
                return Ok(false);
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(false);
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(true)
    })
    .await;
    let (status, content_type, body) = match read {
        Ok(Ok(true)) => route(&String::from_utf8_lossy(&head), peer, cluster).await,
        Ok(Ok(false)) | Err(_) => (400, "text/plain", "bad request\n".to_string()),
        Ok(Err(err)) => return Err(err),
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Bad Request",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

async fn route(head: &str, peer: SocketAddr, cluster: &Cluster) -> (u16, &'static str, String) {
    let mut parts = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if method != "GET" {
        return (405, "text/plain", "only GET is supported\n".to_string());
    }
    let caller = Caller {
        principal: Arc::from(crate::auth::ANONYMOUS),
        peer,
    };
    let path = target.split('?').next().unwrap_or_default();
    if path == "/v1/health" {
        return if cluster.any().is_err() {
            (503, "text/plain", "no broker\n".into())
        } else {
            (200, "text/plain", "ok\n".into())
        };
    }
    if path == "/metrics" {
        return (
            200,
            "text/plain; version=0.0.4",
            scrape::metrics(cluster, &caller).await,
        );
    }
    if let Some(rest) = path.strip_prefix("/v1/meta") {
        let Ok(first) = cluster.any() else {
            return (503, "text/plain", "no broker\n".into());
        };
        let znode = match percent_decode(rest.trim_end_matches('/')) {
            Some(p) if p.is_empty() => "/".to_string(),
            Some(p) if p.starts_with('/') => p,
            _ => return (400, "text/plain", "bad path\n".into()),
        };
        return match describe_znode(first, &znode).await {
            Ok(Some(value)) => (200, "application/json", format!("{value}\n")),
            Ok(None) => (
                404,
                "application/json",
                format!("{}\n", json!({"error": "no node", "path": znode})),
            ),
            // A path the store refuses is the caller's mistake; anything else is ours.
            Err(err @ metastore::Error::BadArguments(_)) => (
                400,
                "application/json",
                format!("{}\n", json!({"error": err.to_string()})),
            ),
            Err(err) => (
                503,
                "application/json",
                format!("{}\n", json!({"error": err.to_string()})),
            ),
        };
    }
    (404, "text/plain", "not found\n".into())
}

async fn describe_znode(
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

fn percent_decode(s: &str) -> Option<String> {
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
