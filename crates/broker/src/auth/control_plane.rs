//! The gate in front of LeaderAndIsr, UpdateMetadata and StopReplica: only the current
//! controller may drive a broker, whatever the listener, authorizer or epoch a sender claims.
//!
//! A control request is served only if all of these hold, checked in this order so that a
//! forgery costs no store read:
//! 1. it arrived on the control-plane listener (`control.plane.listener.name`), or on the
//!    inter-broker listener when there is none;
//! 2. its header carries the control-plane proof for the controller id and epoch it names
//!    (`security::control_plane`: made with the secret every broker reads from the store);
//! 3. that controller id and epoch are the ones the store records now (`/controller`,
//!    `/controller_epoch`). A higher epoch than the store's is refused, never adopted.
//!
//! With the single-listener default every connection arrives on the inter-broker listener,
//! so check 2 is what tells the controller from a client that copied its id and epoch.
//!
//! ControlledShutdown goes the other way (a broker asks the controller to move its
//! leaderships away) and is checked the same way with a broker proof over the broker's id
//! and epoch, so a client cannot empty a broker of its leaders.

use std::sync::Mutex;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::RequestHeader;
use model::BrokerId;
use security::control_plane::{ControlPlaneKey, PROOF_TAG};
use tracing::warn;

use super::RequestContext;
use crate::context::BrokerContext;

/// The control-plane secret and the controller last confirmed against the store.
#[derive(Debug)]
pub(crate) struct ControlPlaneGuard {
    key: ControlPlaneKey,
    /// The (controller id, epoch) the store recorded at the last read.
    confirmed: Mutex<Option<(BrokerId, i32)>>,
    /// Serializes store reads, so a burst of requests from a new controller reads once.
    refresh: tokio::sync::Mutex<()>,
}

/// Why a control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ControlRefusal {
    /// Not the listener control requests are served on.
    #[error("control requests are served only on listener {expected}, not {actual}")]
    WrongListener {
        /// The listener the request came on.
        actual: String,
        /// The control-plane (or inter-broker) listener.
        expected: String,
    },
    /// The header carries no proof (a client, or a request version without header tags).
    #[error("no controller proof in the request header (not sent by a broker of this cluster)")]
    NoProof,
    /// The proof does not match the claimed controller id and epoch.
    #[error("the controller proof does not match controller {controller_id} epoch {epoch}")]
    BadProof {
        /// The claimed controller.
        controller_id: BrokerId,
        /// The claimed epoch.
        epoch: i32,
    },
    /// The proof does not match the broker the request speaks for.
    #[error("the broker proof does not match broker {broker_id}")]
    BadBrokerProof {
        /// The claimed broker.
        broker_id: BrokerId,
    },
    /// The claimed controller or epoch is not the store's current one.
    #[error("controller {controller_id} epoch {epoch} is not the current controller ({current})")]
    NotCurrent {
        /// The claimed controller.
        controller_id: BrokerId,
        /// The claimed epoch.
        epoch: i32,
        /// What the store says.
        current: String,
    },
    /// The store could not be read.
    #[error("cannot read the current controller from the store: {0}")]
    Store(String),
}

impl ControlRefusal {
    /// Kafka's code for the refusal: an unauthenticated sender is not authorized for the
    /// cluster; an authenticated one with the wrong epoch is a stale controller.
    pub(crate) fn code(&self) -> ResponseError {
        match self {
            ControlRefusal::WrongListener { .. }
            | ControlRefusal::NoProof
            | ControlRefusal::BadProof { .. }
            | ControlRefusal::BadBrokerProof { .. } => ResponseError::ClusterAuthorizationFailed,
            ControlRefusal::NotCurrent { .. } => ResponseError::StaleControllerEpoch,
            ControlRefusal::Store(_) => ResponseError::NotController,
        }
    }
}

impl ControlPlaneGuard {
    pub(crate) fn new(key: ControlPlaneKey) -> Self {
        ControlPlaneGuard {
            key,
            confirmed: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// The secret (the controller running on this broker signs with it).
    pub(crate) fn key(&self) -> &ControlPlaneKey {
        &self.key
    }
}

/// Checks a control request; on refusal logs why and returns Kafka's code.
/// With an authorizer, control and inter-broker requests need CLUSTER_ACTION on the cluster
/// (Kafka's `authorizeClusterOperation(request, CLUSTER_ACTION)`), before any other check.
fn cluster_action(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    api: &'static str,
) -> Result<(), ResponseError> {
    if crate::handlers::authorized_cluster(ctx, rctx, security::acl::Operation::ClusterAction) {
        return Ok(());
    }
    warn!(api, peer = %rctx.peer, listener = %rctx.listener, principal = %rctx.principal,
        "control request refused: the principal has no CLUSTER_ACTION on the cluster; nothing changed");
    Err(ResponseError::ClusterAuthorizationFailed)
}

pub(crate) async fn check(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    api: &'static str,
    controller_id: BrokerId,
    epoch: i32,
) -> Result<(), ResponseError> {
    cluster_action(ctx, rctx, api)?;
    match verify(ctx, rctx, header, controller_id, epoch).await {
        Ok(()) => Ok(()),
        Err(refusal) => {
            warn!(api, peer = %rctx.peer, listener = %rctx.listener, principal = %rctx.principal,
                controller_id, epoch, reason = %refusal, "control request refused; nothing changed");
            Err(refusal.code())
        }
    }
}

async fn verify(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    controller_id: BrokerId,
    epoch: i32,
) -> Result<(), ControlRefusal> {
    let expected = ctx.config.control_plane_listener_name();
    if *rctx.listener != *expected {
        return Err(ControlRefusal::WrongListener {
            actual: rctx.listener.to_string(),
            expected: expected.to_owned(),
        });
    }
    let guard = &ctx.control_plane;
    let proof = header
        .unknown_tagged_fields
        .get(&PROOF_TAG)
        .ok_or(ControlRefusal::NoProof)?;
    if !guard.key.verify(proof, controller_id, epoch, ctx.broker_id) {
        return Err(ControlRefusal::BadProof {
            controller_id,
            epoch,
        });
    }
    let claimed = (controller_id, epoch);
    if confirmed(guard) == Some(claimed) {
        return Ok(());
    }
    // A new controller (or one this broker has not confirmed yet): ask the store, one
    // request at a time; a request that waited may find the answer already there.
    let _one_at_a_time = guard.refresh.lock().await;
    if confirmed(guard) == Some(claimed) {
        return Ok(());
    }
    let current = ctx
        .zk()
        .get_controller_identity()
        .await
        .map_err(|err| ControlRefusal::Store(err.to_string()))?;
    *guard.confirmed.lock().unwrap_or_else(|p| p.into_inner()) = current;
    if current == Some(claimed) {
        Ok(())
    } else {
        Err(ControlRefusal::NotCurrent {
            controller_id,
            epoch,
            current: match current {
                Some((id, e)) => format!("controller {id} at epoch {e}"),
                None => "no controller".to_owned(),
            },
        })
    }
}

/// Checks a request a broker sends the controller about itself (ControlledShutdown): it
/// came on the inter-broker listener with the broker's proof for `broker_id` and
/// `broker_epoch`. Whether that registration is current is the controller's check.
pub(crate) fn check_broker(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    header: &RequestHeader,
    api: &'static str,
    broker_id: BrokerId,
    broker_epoch: i64,
) -> Result<(), ResponseError> {
    cluster_action(ctx, rctx, api)?;
    let expected = ctx.config.inter_broker_listener_name();
    let refusal = if *rctx.listener != *expected {
        Some(ControlRefusal::WrongListener {
            actual: rctx.listener.to_string(),
            expected: expected.to_owned(),
        })
    } else {
        match header.unknown_tagged_fields.get(&PROOF_TAG) {
            None => Some(ControlRefusal::NoProof),
            Some(proof)
                if !ctx
                    .control_plane
                    .key
                    .verify_broker(proof, broker_id, broker_epoch) =>
            {
                Some(ControlRefusal::BadBrokerProof { broker_id })
            }
            Some(_) => None,
        }
    };
    match refusal {
        None => Ok(()),
        Some(refusal) => {
            warn!(api, peer = %rctx.peer, listener = %rctx.listener, principal = %rctx.principal,
                broker_id, broker_epoch, reason = %refusal, "broker request refused; nothing changed");
            Err(refusal.code())
        }
    }
}

fn confirmed(guard: &ControlPlaneGuard) -> Option<(BrokerId, i32)> {
    *guard.confirmed.lock().unwrap_or_else(|p| p.into_inner())
}
