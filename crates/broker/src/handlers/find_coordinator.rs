//! FindCoordinator (v0-3): the active controller coordinates every consumer group (see
//! `crate::groups`), so the answer is the controller of the metadata cache. Transaction
//! coordinators do not exist here: `key_type` 1 reads COORDINATOR_NOT_AVAILABLE.

use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::context::BrokerContext;
use crate::groups::COORDINATOR_NOT_AVAILABLE;

/// Kafka's INVALID_REQUEST error code.
const INVALID_REQUEST: i16 = 42;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let unavailable = |code: i16, message: &str| {
        FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1)
    };
    if request.key_type != 0 {
        return unavailable(
            COORDINATOR_NOT_AVAILABLE,
            "transactions are not supported by this broker",
        );
    }
    if request.key.is_empty() {
        return unavailable(INVALID_REQUEST, "the group id must not be empty");
    }
    let (id, host, port) = if ctx.controller().is_active() {
        (
            ctx.broker_id,
            ctx.advertised.0.clone(),
            i32::from(ctx.advertised.1),
        )
    } else {
        let snapshot = ctx.metadata_cache.snapshot();
        match snapshot.brokers.get(&snapshot.controller_id) {
            Some(b) => (b.id, b.host.clone(), b.port),
            None => {
                return unavailable(
                    COORDINATOR_NOT_AVAILABLE,
                    "no controller is known yet to coordinate groups",
                )
            }
        }
    };
    FindCoordinatorResponse::default()
        .with_error_code(0)
        .with_error_message(None)
        .with_node_id(BrokerId(id))
        .with_host(StrBytes::from_string(host))
        .with_port(port)
}
