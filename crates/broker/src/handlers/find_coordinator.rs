//! FindCoordinator (v0-6): the active controller coordinates every consumer group (see
//! `crate::groups`), so the answer is the controller of the metadata cache. v0-3 ask for one
//! key; v4+ for a batch (`coordinator_keys`, KIP-699), answered key by key in `coordinators`.
//! Transaction coordinators do not exist here: `key_type` 1 reads COORDINATOR_NOT_AVAILABLE,
//! and so does `key_type` 2 (share groups, v6+), as in Kafka 3.9; a share key below v6 is
//! INVALID_REQUEST.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::context::BrokerContext;
use crate::groups::COORDINATOR_NOT_AVAILABLE;

/// Kafka's INVALID_REQUEST error code.
const INVALID_REQUEST: i16 = 42;

/// Kafka's `CoordinatorType` ids.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// The answer for one key: the coordinator's id, host and port, or an error and its message.
type Lookup = Result<(i32, String, i32), (i16, String)>;

pub(super) fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let entry = Coordinator::default().with_key(key.clone());
                match authorize(ctx, rctx, request.key_type, key.as_str()).and_then(|()| {
                    lookup(ctx, &rctx.listener, request.key_type, key.as_str(), version)
                }) {
                    Ok((id, host, port)) => entry
                        .with_node_id(BrokerId(id))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port),
                    Err((code, message)) => entry
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(message)))
                        .with_node_id(BrokerId(-1))
                        .with_port(-1),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match authorize(ctx, rctx, request.key_type, request.key.as_str()).and_then(|()| {
        lookup(
            ctx,
            &rctx.listener,
            request.key_type,
            request.key.as_str(),
            version,
        )
    }) {
        Ok((id, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

/// DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka's handleFindCoordinatorRequest.
fn authorize(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    key_type: i8,
    key: &str,
) -> Result<(), (i16, String)> {
    use security::acl::{Operation, ResourceType};
    let (resource_type, error) = match key_type {
        TRANSACTION => (
            ResourceType::TransactionalId,
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed,
        ),
        SHARE => return Ok(()),
        _ => (
            ResourceType::Group,
            kafka_protocol::error::ResponseError::GroupAuthorizationFailed,
        ),
    };
    if super::authorized(ctx, rctx, Operation::Describe, resource_type, key) {
        Ok(())
    } else {
        Err((error.code(), error.to_string()))
    }
}

/// Kafka's `getCoordinator` for one key.
fn lookup(ctx: &BrokerContext, listener: &str, key_type: i8, key: &str, version: i16) -> Lookup {
    let unavailable = |why: &str| Err((COORDINATOR_NOT_AVAILABLE, why.to_owned()));
    match key_type {
        GROUP => {}
        TRANSACTION => return unavailable("transactions are not supported by this broker"),
        SHARE if version < 6 => {
            return Err((
                INVALID_REQUEST,
                "share group coordinators need FindCoordinator v6 or later".to_owned(),
            ))
        }
        SHARE => return unavailable("share groups are not supported by this broker"),
        other => {
            return Err((
                INVALID_REQUEST,
                format!(
                    "unknown coordinator key type {other} (0 = group, 1 = transaction, 2 = share)"
                ),
            ))
        }
    }
    if key.is_empty() {
        return Err((INVALID_REQUEST, "the group id must not be empty".to_owned()));
    }
    // The coordinator's endpoint on the listener the client came in on.
    if ctx.controller().is_active() {
        if let Some((host, port)) = ctx.advertised_on(listener) {
            return Ok((ctx.broker_id, host, i32::from(port)));
        }
    }
    let snapshot = ctx.metadata_cache.snapshot();
    match snapshot
        .brokers
        .get(&snapshot.controller_id)
        .and_then(|b| b.on_listener(listener))
    {
        Some(b) => Ok((b.id, b.host, b.port)),
        None => unavailable("no controller is known yet to coordinate groups"),
    }
}
