//! InitProducerId (v0–v5) for idempotent producers: a fresh producer id, epoch 0, as Kafka
//! answers a request without a transactional id (v3+ may name the producer's current id and
//! epoch; both or neither, else INVALID_REQUEST; an idempotent producer gets a new id either
//! way; v4's PRODUCER_FENCED and v5's TRANSACTION_ABORTABLE concern transactions only). Ids are handed out from blocks of
//! [`BLOCK_SIZE`] claimed on `/latest_producer_id_block` with a versioned write, so every
//! broker's ids are unique cluster-wide (Kafka's `ProducerIdManager`). Transactions are not
//! supported: a request with a transactional id is refused.

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
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: InitProducerIdRequest,
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
    if request.transactional_id.is_some() {
        warn!("InitProducerId with a transactional id: transactions are not supported");
        return refuse(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster (Kafka 2.8's
    // handleInitProducerIdRequest).
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::IdempotentWrite) {
        return refuse(ResponseError::ClusterAuthorizationFailed);
    }
    let mut block = ctx.producer_ids.lock().await;
    if !block.claimed || block.next > block.end {
        match claim_block(ctx).await {
            Ok((start, end)) => {
                *block = ProducerIdBlock {
                    next: start,
                    end,
                    claimed: true,
                }
            }
            Err(err) => {
                warn!(error = %err, "cannot claim a producer id block");
                return refuse(ResponseError::CoordinatorNotAvailable);
            }
        }
    }
    let id = block.next;
    block.next += 1;
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(0)
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
