//! The COMMIT/ABORT markers of a prepared transaction (Kafka's
//! `TransactionMarkerChannelManager`): one WriteTxnMarkers request per leader broker with
//! every partition of the transaction it leads, sent over the inter-broker listener (this
//! broker included), retried until each partition acknowledged, then Complete written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use tracing::{debug, info, warn};

use super::state::{TxnMetadata, TxnState};
use crate::context::BrokerContext;
use crate::data_plane::now_ms;

/// How long to wait before resending markers that did not all land.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// One connection per destination broker, reused by every transaction.
#[derive(Debug, Default)]
pub(crate) struct MarkerChannels {
    channels: std::sync::Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Option<client::Connection>>>>>,
}

impl MarkerChannels {
    fn channel(&self, broker: i32) -> Arc<tokio::sync::Mutex<Option<client::Connection>>> {
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(broker)
            .or_default()
            .clone()
    }
}

/// Sends the markers of `prepared` (PrepareCommit or PrepareAbort) in the background and
/// writes Complete once every partition has its marker.
pub(crate) fn complete(
    ctx: Arc<BrokerContext>,
    partition: i32,
    coordinator_epoch: i32,
    prepared: TxnMetadata,
) {
    tokio::spawn(async move {
        run(&ctx, partition, coordinator_epoch, prepared).await;
    });
}

async fn run(
    ctx: &Arc<BrokerContext>,
    partition: i32,
    coordinator_epoch: i32,
    prepared: TxnMetadata,
) {
    let commit = prepared.state == TxnState::PrepareCommit;
    let id = prepared.transactional_id.clone();
    let started = std::time::Instant::now();
    let mut pending: BTreeSet<(String, i32)> = prepared.partitions.clone();
    let mut attempts = 0u32;
    while !pending.is_empty() {
        if !ctx
            .transactions
            .still_coordinating(partition, coordinator_epoch)
        {
            info!(transactional_id = %id, "no longer the coordinator; the new one completes the transaction");
            return;
        }
        attempts += 1;
        let snapshot = ctx.metadata_cache.snapshot();
        let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        let mut gone = Vec::new();
        for (topic, p) in &pending {
            match snapshot.topics.get(topic.as_str()) {
                None => gone.push((topic.clone(), *p)),
                Some(t) => match t.partitions.get(p) {
                    None => gone.push((topic.clone(), *p)),
                    Some(info) if info.leader >= 0 => by_leader
                        .entry(info.leader)
                        .or_default()
                        .push((topic.clone(), *p)),
                    Some(_) => {}
                },
            }
        }
        for p in gone {
            // A deleted topic needs no marker (Kafka drops it the same way).
            info!(transactional_id = %id, topic = %p.0, partition = p.1, "partition gone; no marker needed");
            pending.remove(&p);
        }
        let sends = by_leader.into_iter().map(|(leader, partitions)| {
            let ctx = Arc::clone(ctx);
            let prepared = &prepared;
            async move {
                let done = send(
                    &ctx,
                    leader,
                    prepared,
                    commit,
                    coordinator_epoch,
                    &partitions,
                )
                .await;
                (leader, done)
            }
        });
        for (_, done) in futures::future::join_all(sends).await {
            for p in done {
                pending.remove(&p);
            }
        }
        if !pending.is_empty() {
            if attempts.is_multiple_of(50) {
                warn!(transactional_id = %id, pending = ?pending, attempts, "markers still not written; retrying");
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
    // Every partition has its marker: Complete.
    let Some(entry) = ctx.transactions.entry(&id) else {
        return;
    };
    let mut meta = entry.lock().await;
    if meta.state != prepared.state
        || meta.producer_id != prepared.producer_id
        || meta.producer_epoch != prepared.producer_epoch
    {
        return;
    }
    let to = if commit {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    let Ok(next) = meta.moved(to, now_ms()) else {
        return;
    };
    loop {
        match super::write(ctx, partition, coordinator_epoch, &id, Some(&next)).await {
            Ok(()) => {
                debug!(transactional_id = %id, commit, elapsed_ms = started.elapsed().as_millis() as u64,
                    "transaction completed");
                *meta = next;
                return;
            }
            Err(ResponseError::NotCoordinator) => return,
            Err(err) => {
                warn!(transactional_id = %id, %err, "cannot write the completed transaction; retrying");
                tokio::time::sleep(RETRY_BACKOFF * 5).await;
            }
        }
    }
}

/// One WriteTxnMarkers to `leader`; the partitions whose marker landed (or needs none).
async fn send(
    ctx: &BrokerContext,
    leader: i32,
    prepared: &TxnMetadata,
    commit: bool,
    coordinator_epoch: i32,
    partitions: &[(String, i32)],
) -> Vec<(String, i32)> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, p) in partitions {
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.partition_indexes.push(*p),
            _ => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*p]),
            ),
        }
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(prepared.producer_id))
            .with_producer_epoch(prepared.producer_epoch)
            .with_transaction_result(commit)
            .with_topics(topics)
            .with_coordinator_epoch(coordinator_epoch)]);
    let channel = ctx.transactions.markers.channel(leader);
    let mut connection = channel.lock().await;
    if connection.is_none() {
        let snapshot = ctx.metadata_cache.snapshot();
        let Some(addr) = snapshot
            .brokers
            .get(&leader)
            .and_then(|b| b.on_listener(ctx.config.inter_broker_listener_name()))
            .map(|b| format!("{}:{}", b.host, b.port))
        else {
            return Vec::new();
        };
        let options = client::ConnectionOptions {
            client_id: format!("gregor-broker-{}-txn-markers", ctx.broker_id),
            ..client::ConnectionOptions::default()
        }
        .secured(&ctx.config.inter_broker_security);
        match tokio::time::timeout(
            ctx.config.request_timeout,
            client::Connection::connect_with(&addr, options),
        )
        .await
        {
            Ok(Ok(c)) => *connection = Some(c),
            Ok(Err(err)) => {
                debug!(leader, %addr, %err, "cannot connect to send transaction markers");
                return Vec::new();
            }
            Err(_) => return Vec::new(),
        }
    }
    let Some(conn) = connection.as_mut() else {
        return Vec::new();
    };
    let response = match tokio::time::timeout(ctx.config.request_timeout, conn.send(request)).await
    {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => {
            debug!(leader, %err, "WriteTxnMarkers failed; reconnecting");
            *connection = None;
            return Vec::new();
        }
        Err(_) => {
            *connection = None;
            return Vec::new();
        }
    };
    let mut done = Vec::new();
    for marker in response.markers {
        for topic in marker.topics {
            for p in topic.partitions {
                let tp = (topic.name.0.to_string(), p.partition_index);
                match ResponseError::try_from_code(p.error_code) {
                    None => done.push(tp),
                    // Kafka gives up on these: the partition cannot take a marker.
                    Some(
                        ResponseError::UnsupportedForMessageFormat
                        | ResponseError::UnsupportedVersion,
                    ) => {
                        warn!(topic = %tp.0, partition = tp.1, code = p.error_code,
                            "partition cannot take a transaction marker; skipping it");
                        done.push(tp)
                    }
                    Some(err) => {
                        debug!(topic = %tp.0, partition = tp.1, %err, "marker not written; retrying")
                    }
                }
            }
        }
    }
    done
}
