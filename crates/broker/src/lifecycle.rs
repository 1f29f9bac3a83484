//! Registration in `/brokers/ids/<id>` and keeping it: when the store session expires, the
//! ephemeral registration (and the controller's election) are gone, so the broker opens a new
//! session, registers again with the same endpoint and restarts its controller on it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metastore::SessionState;
use model::TopicPartition;
use tokio::sync::watch;
use tracing::{info, warn};
use znodes::json::BrokerRegistration;
use znodes::zk_client::{KafkaZkClient, ZkClientError};

use crate::config::{AdvertisedEndpoint, BrokerConfig};
use crate::context::{BrokerContext, ReplicaRole, Session};
use crate::error::BrokerError;
use crate::server::{session_options, MetadataStore};

/// Wait between attempts to re-register after a session expiry.
const REREGISTER_BACKOFF: Duration = Duration::from_millis(500);

/// Writes this broker's ephemeral registration with its advertised endpoint; returns the
/// broker epoch.
pub(crate) async fn register(
    zk: &KafkaZkClient,
    config: &BrokerConfig,
    advertised: &[AdvertisedEndpoint],
) -> Result<i64, BrokerError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let endpoints: Vec<(String, String, u16, String)> = advertised
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                e.host.clone(),
                e.port,
                e.protocol.name().to_owned(),
            )
        })
        .collect();
    let registration = BrokerRegistration::new(&endpoints, config.rack.clone(), now_ms);
    match zk.register_broker(config.broker_id, &registration).await {
        Ok(epoch) => {
            info!(
                broker_id = config.broker_id,
                epoch, "registered in /brokers/ids"
            );
            Ok(epoch)
        }
        Err(ZkClientError::NodeExists(_)) => Err(BrokerError::DuplicateBrokerId(config.broker_id)),
        Err(err) => Err(err.into()),
    }
}

/// Watches the session; after an expiry, registers again on a new session and restarts the
/// controller there. Runs until `shutdown` turns true.
pub(crate) async fn keep_registered(
    ctx: Arc<BrokerContext>,
    store: MetadataStore,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let mut state = ctx.zk().subscribe_session_state();
        let ended = tokio::select! {
            ended = state.wait_for(|s| matches!(s, SessionState::Expired | SessionState::Closed)) => ended.map(|s| *s),
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match ended {
            Ok(SessionState::Expired) | Err(_) => {}
            // Closed by us: the broker is shutting down.
            Ok(_) => return,
        }
        warn!(
            broker_id = ctx.broker_id,
            "store session expired; registering again"
        );
        fence_leaderships(&ctx).await;
        ctx.controller().shutdown().await;
        loop {
            match reconnect(&ctx, &store).await {
                Ok((session, broker_epoch)) => {
                    ctx.broker_epoch
                        .store(broker_epoch, std::sync::atomic::Ordering::SeqCst);
                    ctx.set_session(session);
                    break;
                }
                Err(err) => {
                    warn!(error = %err, "re-registration failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(REREGISTER_BACKOFF) => {}
                        _ = shutdown.wait_for(|stop| *stop) => return,
                    }
                }
            }
        }
    }
}

/// The session ended (the broker was paused or cut off past `zookeeper.session.timeout.ms`):
/// the controller has counted this broker dead and may have elected other leaders for its
/// partitions, so it stops acting as leader at once (better than Kafka, which waits for the
/// controller's LeaderAndIsr): every partition it leads is closed, its log kept, so produce
/// and fetch are refused and acks=all requests waiting here fail. The controller's
/// LeaderAndIsr after the new registration opens them again in whatever role it says.
async fn fence_leaderships(ctx: &Arc<BrokerContext>) {
    let led: Vec<TopicPartition> = {
        let mut replicas = ctx.replicas();
        let led: Vec<_> = replicas
            .iter()
            .filter(|(_, role)| matches!(role, ReplicaRole::Leader { .. }))
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &led {
            replicas.remove(tp);
        }
        led
    };
    if led.is_empty() {
        return;
    }
    let rm = ctx.replica_manager.clone();
    let closing = led.clone();
    // Closing flushes the logs: off the async workers.
    crate::blocking::run(move || {
        for tp in &closing {
            rm.stop_replica(tp, false);
        }
    })
    .await;
    // acks=all produce requests and fetches waiting on these partitions look again and fail.
    ctx.replica_manager.notify_appended();
    warn!(
        broker_id = ctx.broker_id,
        partitions = led.len(),
        "session expired: stopped acting as leader until the controller says otherwise"
    );
}

async fn reconnect(
    ctx: &BrokerContext,
    store: &MetadataStore,
) -> Result<(Session, i64), BrokerError> {
    let (client, events) = store.connect(session_options(&ctx.config)).await?;
    let zk = KafkaZkClient::new(client, events);
    let broker_epoch = match register(&zk, &ctx.config, &ctx.advertised).await {
        Ok(epoch) => epoch,
        Err(err) => {
            zk.close().await;
            return Err(err);
        }
    };
    let controller = controller::start(
        zk.clone(),
        crate::server::controller_config(&ctx.config, ctx.control_plane.key(), &ctx.metrics),
    )
    .await;
    Ok((Session { zk, controller }, broker_epoch))
}
