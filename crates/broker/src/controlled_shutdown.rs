//! The broker's side of controlled shutdown (Kafka's `KafkaServer.controlledShutdown`): on
//! SIGTERM, before it stops serving, the broker asks the active controller (found in
//! `/controller`, reached at its registered endpoint) with its broker epoch to move every
//! leadership it holds to another in-sync replica and to drop it from every ISR. The answer
//! lists the partitions it still leads; it asks again after `controlled.shutdown.retry.
//! backoff.ms`, at most `controlled.shutdown.max.retries` times, then stops either way.

use std::time::Duration;

use client::{Connection, ConnectionOptions};
use kafka_protocol::messages::{BrokerId as WireBrokerId, ControlledShutdownRequest};
use model::BrokerId;
use tracing::{info, warn};

use crate::context::BrokerContext;

/// The ControlledShutdown version sent (Kafka 2.8's, with the broker epoch).
const CONTROLLED_SHUTDOWN_VERSION: i16 = 3;
/// How many remaining partitions a log line names.
const LOGGED_PARTITIONS: usize = 5;

/// What one attempt achieved.
enum Attempt {
    /// The controller moved everything it could: nothing is left.
    Done,
    /// The controller answered; these partitions are still led here.
    Remaining(Vec<(String, i32)>),
}

/// Runs controlled shutdown; returns whether it completed (nothing left to move).
pub(crate) async fn run(ctx: &BrokerContext) -> bool {
    let retries = ctx.config.controlled_shutdown_max_retries;
    let backoff = ctx.config.controlled_shutdown_retry_backoff;
    let started = std::time::Instant::now();
    for attempt in 1..=retries {
        // Bounded even when the store or the controller does not answer.
        let outcome = tokio::time::timeout(ctx.config.request_timeout, attempt_once(ctx))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within request.timeout.ms ({} ms)",
                    ctx.config.request_timeout.as_millis()
                ))
            });
        match outcome {
            Ok(Attempt::Done) => {
                info!(
                    broker_id = ctx.broker_id,
                    attempt,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "controlled shutdown succeeded"
                );
                return true;
            }
            Ok(Attempt::Remaining(remaining)) => {
                let movable = remaining
                    .iter()
                    .any(|(topic, partition)| has_other_live_replica(ctx, topic, *partition));
                info!(
                    broker_id = ctx.broker_id, attempt, remaining = remaining.len(),
                    first = ?&remaining[..remaining.len().min(LOGGED_PARTITIONS)],
                    "partitions still led here after controlled shutdown"
                );
                if !movable {
                    // Every other replica of what is left is down: asking again cannot help.
                    warn!(
                        broker_id = ctx.broker_id,
                        remaining = remaining.len(),
                        "no other live replica can take over the remaining partitions; stopping"
                    );
                    return false;
                }
            }
            Err(reason) => {
                warn!(broker_id = ctx.broker_id, attempt, %reason, "controlled shutdown attempt failed")
            }
        }
        if attempt < retries {
            tokio::time::sleep(backoff).await;
        }
    }
    warn!(
        broker_id = ctx.broker_id,
        retries, "controlled shutdown did not complete; stopping anyway"
    );
    false
}

async fn attempt_once(ctx: &BrokerContext) -> Result<Attempt, String> {
    let zk = ctx.zk();
    let controller_id: BrokerId = zk
        .get_controller_id(false)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no controller is registered in /controller")?;
    let registered = zk
        .get_broker(controller_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("controller {controller_id} has no registration"))?;
    let endpoints = registered.registration.parsed_endpoints();
    let (host, port) = endpoints
        .iter()
        .find(|(name, _, _)| name == ctx.config.inter_broker_listener_name())
        .map(|(_, host, port)| (host.clone(), *port))
        .ok_or_else(|| format!("controller {controller_id} registered no endpoint"))?;
    let options = ConnectionOptions {
        client_id: format!("broker-{}-controlled-shutdown", ctx.broker_id),
        request_timeout: ctx.config.request_timeout,
        connect_timeout: ctx.config.request_timeout.min(Duration::from_secs(10)),
        ..ConnectionOptions::default()
    }
    .secured(&ctx.config.inter_broker_security);
    let addr = format!("{host}:{port}");
    let mut conn = Connection::connect_with(&addr, options)
        .await
        .map_err(|e| {
            format!(
                "connection to controller {controller_id} ({addr}) on listener {}: {e}",
                ctx.config.inter_broker_listener_name()
            )
        })?;
    let broker_epoch = ctx.broker_epoch.load(std::sync::atomic::Ordering::SeqCst);
    let request = ControlledShutdownRequest::default()
        .with_broker_id(WireBrokerId(ctx.broker_id))
        .with_broker_epoch(broker_epoch);
    // The proof that a broker of this cluster sends it (auth::control_plane::check_broker).
    let proof = ctx
        .control_plane
        .key()
        .broker_proof(ctx.broker_id, broker_epoch);
    let tags = std::collections::BTreeMap::from([(
        security::control_plane::PROOF_TAG,
        bytes::Bytes::copy_from_slice(&proof),
    )]);
    let response = conn
        .send_version_tagged(request, CONTROLLED_SHUTDOWN_VERSION, &tags)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Err(format!(
            "controller {controller_id} answered error code {}",
            response.error_code
        ));
    }
    if response.remaining_partitions.is_empty() {
        return Ok(Attempt::Done);
    }
    Ok(Attempt::Remaining(
        response
            .remaining_partitions
            .iter()
            .map(|p| (p.topic_name.0.to_string(), p.partition_index))
            .collect(),
    ))
}

/// Whether the metadata cache knows a live broker other than this one among the partition's
/// replicas.
fn has_other_live_replica(ctx: &BrokerContext, topic: &str, partition: i32) -> bool {
    let snapshot = ctx.metadata_cache.snapshot();
    snapshot
        .topics
        .get(topic)
        .and_then(|t| t.partitions.get(&partition))
        .is_some_and(|p| {
            p.replicas
                .iter()
                .any(|&b| b != ctx.broker_id && snapshot.brokers.contains_key(&b))
        })
}
