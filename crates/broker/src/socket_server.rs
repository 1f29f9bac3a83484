//! The Kafka listener: accepts connections and runs one [`crate::connection`] task for each,
//! until shutdown. At `max.connections` it stops accepting until one closes (they wait in the
//! OS backlog); a connection from an address that already has `max.connections.per.ip` (or
//! its override) is closed at once, as Kafka does.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::auth::sasl_session::SaslSession;
use crate::auth::{tls, ListenerSecurity, RequestContext};
use crate::connection;
use crate::context::BrokerContext;

/// Accepts connections until `shutdown` turns true, then waits for open connections to
/// finish the request they are handling.
pub(crate) async fn serve(
    ctx: Arc<BrokerContext>,
    listener: TcpListener,
    security: Arc<ListenerSecurity>,
    mut shutdown: watch::Receiver<bool>,
) {
    let limit = Arc::clone(&ctx.connection_limits.max_connections);
    let quotas = Arc::clone(&ctx.connection_limits.per_ip);
    let mut connections = JoinSet::new();
    debug!(listener = %security.name, protocol = %security.protocol, "serving listener");
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&limit).acquire_owned() => permit.expect("the semaphore is never closed"),
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let slot = match quotas.try_open(peer.ip()) {
                    Ok(slot) => slot,
                    Err(limit) => {
                        warn!(%peer, limit, "closing connection: too many connections from this address (max.connections.per.ip)");
                        drop(stream);
                        continue;
                    }
                };
                debug!(%peer, "accepted connection");
                let _ = stream.set_nodelay(true);
                let ctx = Arc::clone(&ctx);
                let shutdown = shutdown.clone();
                let security = Arc::clone(&security);
                connections.spawn(async move {
                    let rctx = RequestContext::anonymous(Arc::clone(&security.name), peer);
                    let sasl = security.sasl.clone().map(SaslSession::new);
                    match &security.tls {
                        None => connection::serve(ctx, stream, rctx, sasl, shutdown).await,
                        Some(tls) => {
                            if let Some((stream, rctx)) = tls::accept(tls, stream, rctx).await {
                                connection::serve(ctx, stream, rctx, sasl, shutdown).await;
                            }
                        }
                    }
                    drop((slot, permit));
                });
            }
            Err(err) => {
                // Usually EMFILE or a connection reset before accept: keep serving.
                warn!(error = %err, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
    info!(
        open = connections.len(),
        "listener stopped; finishing open connections"
    );
    while connections.join_next().await.is_some() {}
}
