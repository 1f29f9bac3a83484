//! InitProducerId (v0–v5). Without a transactional id (an idempotent producer): a fresh
//! producer id, epoch 0 (v3+ may name the producer's current id and epoch; both or neither,
//! else INVALID_REQUEST; an idempotent producer gets a new id either way). With one: the
//! transaction coordinator's answer (`crate::txn::init_producer_id`: the id's producer id
//! with its epoch bumped, KIP-360). Ids are handed out from blocks of [`BLOCK_SIZE`] claimed
//! on `/latest_producer_id_block` with a versioned write, so every broker's ids are unique
//! cluster-wide (Kafka's `ProducerIdManager`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use metastore::CreateMode;
use tracing::{info, warn};
use znodes::json::{ProducerIdBlockZNode, ZnodeJson};
use znodes::paths;

use crate::context::BrokerContext;

/// How many ids one broker claims at a time (Kafka's `PidBlockSize`).
pub(crate) const BLOCK_SIZE: i64 = 1000;

/// The ids this broker may still hand out: `next..=end`.
#[derive(Debug, Default)]
pub(crate) struct ProducerIdBlock {
    next: i64,
    end: i64,
    claimed: bool,
}

pub(super) async fn handle(
    ctx: &std::sync::Arc<BrokerContext>,
    rctx: &crate::auth::RequestContext,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let refuse = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| id.0.is_empty())
    {
        return refuse(ResponseError::InvalidRequest);
    }
    // Kafka's NO_PRODUCER_ID / NO_PRODUCER_EPOCH: one without the other is malformed.
    if (request.producer_id.0 == -1) != (request.producer_epoch == -1) {
        return refuse(ResponseError::InvalidRequest);
    }
    if let Some(id) = &request.transactional_id {
        // Kafka's handleInitProducerIdRequest: WRITE on the transactional id.
        if !super::authorized(
            ctx,
            rctx,
            security::acl::Operation::Write,
            security::acl::ResourceType::TransactionalId,
            id.0.as_str(),
        ) {
            return refuse(ResponseError::TransactionalIdAuthorizationFailed);
        }
        let expected = (request.producer_id.0 != -1)
            .then_some((request.producer_id.0, request.producer_epoch));
        return match crate::txn::init_producer_id(
            ctx,
            id.0.as_str(),
            request.transaction_timeout_ms,
            expected,
        )
        .await
        {
            Ok(done) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(done.producer_id))
                .with_producer_epoch(done.producer_epoch),
            // PRODUCER_FENCED is v4+; older clients know INVALID_PRODUCER_EPOCH.
            Err(ResponseError::ProducerFenced) if version < 4 => {
                refuse(ResponseError::InvalidProducerEpoch)
            }
            Err(err) => refuse(err),
        };
    }
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster (Kafka 2.8's
    // handleInitProducerIdRequest).
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::IdempotentWrite) {
        return refuse(ResponseError::ClusterAuthorizationFailed);
    }
    match next_producer_id(ctx).await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(err) => {
            warn!(error = %err, "cannot claim a producer id block");
            refuse(ResponseError::CoordinatorNotAvailable)
        }
    }
}

/// The next producer id of this broker's block (claiming a new block when it is used up).
pub(crate) async fn next_producer_id(ctx: &BrokerContext) -> Result<i64, metastore::Error> {
    let mut block = ctx.producer_ids.lock().await;
    if !block.claimed || block.next > block.end {
        let (start, end) = claim_block(ctx).await?;
        *block = ProducerIdBlock {
            next: start,
            end,
            claimed: true,
        }
    }
    let id = block.next;
    block.next += 1;
    Ok(id)
}

/// Claims the next block after the one recorded in `/latest_producer_id_block`, retrying
/// when another broker wrote it first.
async fn claim_block(ctx: &BrokerContext) -> Result<(i64, i64), metastore::Error> {
    let zk = ctx.zk();
    let client = zk.client();
    let path = paths::latest_producer_id_block();
    loop {
        let (data, version) = match client.get_data(path, false).await {
            Ok((data, stat)) => (data, Some(stat.version)),
            Err(metastore::Error::NoNode(_)) => (Vec::new(), None),
            Err(err) => return Err(err),
        };
        let start = if data.is_empty() {
            0
        } else {
            ProducerIdBlockZNode::from_json_bytes(&data)
                .map_err(|e| metastore::Error::Backend(format!("{path}: {e}")))?
                .block_end
                + 1
        };
        let end = start + BLOCK_SIZE - 1;
        let body = ProducerIdBlockZNode::new(ctx.broker_id, start, end).to_json_bytes();
        let written = match version {
            Some(v) => client.set_data(path, &body, Some(v)).await.map(drop),
            None => client
                .create(path, &body, CreateMode::Persistent)
                .await
                .map(drop),
        };
        match written {
            Ok(()) => {
                info!(start, end, "claimed producer id block");
                return Ok((start, end));
            }
            Err(metastore::Error::BadVersion { .. } | metastore::Error::NodeExists(_)) => continue,
            Err(err) => return Err(err),
        }
    }
}
