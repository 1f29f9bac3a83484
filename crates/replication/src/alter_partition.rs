//! The leader's AlterPartition sender (Kafka's `AlterIsrManager`): ISR changes proposed by
//! partitions this broker leads go to the active controller in batches, one request in flight
//! at a time and at most one change per partition, retried until the controller answers.
//!
//! Where the controller is and this broker's epoch come from the broker through
//! [`ControllerChannel`]. Each answer goes back to its partition, which commits the new ISR,
//! resubmits after a retriable error, or stays pending until the next LeaderAndIsr.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{Connection, ConnectionOptions};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::ReplicaManager;

/// The AlterPartition version sent (Kafka 2.8's AlterIsr v0).
pub const ALTER_PARTITION_VERSION: i16 = 0;
/// Pause before resending after a failed request or a top-level error (Kafka: 50 ms).
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
/// How long to wait for the controller's answer before reconnecting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How the sender reaches the active controller; the broker implements it over its metadata
/// cache and registration.
pub trait ControllerChannel: Send + Sync + std::fmt::Debug + 'static {
    /// `host:port` of the active controller, if known.
    fn controller_addr(&self) -> Option<String>;
    /// This broker's current epoch (the czxid of its registration).
    fn broker_epoch(&self) -> i64;
    /// The request header's tagged fields that prove a broker of this cluster sends it, for
    /// `broker_epoch` (the controller refuses AlterPartition without them).
    fn proof_tags(&self, broker_epoch: i64) -> BTreeMap<i32, bytes::Bytes>;
}

/// One proposed ISR change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterIsrItem {
    /// The partition.
    pub tp: TopicPartition,
    /// The leader epoch it was proposed at.
    pub leader_epoch: i32,
    /// The ISR asked for.
    pub new_isr: Vec<i32>,
    /// The partition epoch (state znode version) the change applies to.
    pub partition_epoch: i32,
    /// The partition's proposal id, so a late answer to an older proposal is ignored.
    pub proposal: u64,
}

/// The controller's answer for one partition: its new state, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterIsrResult {
    /// The leader the controller has.
    pub leader: i32,
    /// The leader epoch the controller has.
    pub leader_epoch: i32,
    /// The ISR the controller has now.
    pub isr: Vec<i32>,
    /// The partition epoch after the change.
    pub partition_epoch: i32,
}

/// Pending ISR changes and the task that sends them.
#[derive(Debug, Default)]
pub(crate) struct AlterPartitionManager {
    unsent: Mutex<BTreeMap<TopicPartition, AlterIsrItem>>,
    wake: Notify,
}

impl AlterPartitionManager {
    /// Queues `item` unless its partition already has a change queued. Returns whether queued.
    pub(crate) fn submit(&self, item: AlterIsrItem) -> bool {
        let mut unsent = self.lock();
        if unsent.contains_key(&item.tp) {
            return false;
        }
        debug!(tp = %item.tp, isr = ?item.new_isr, "queued AlterPartition");
        unsent.insert(item.tp.clone(), item);
        drop(unsent);
        self.wake.notify_one();
        true
    }

    /// Forgets a partition's queued change (a LeaderAndIsr replaced its state).
    pub(crate) fn clear_pending(&self, tp: &TopicPartition) {
        self.lock().remove(tp);
    }

    /// The queued changes (tests and diagnostics).
    pub(crate) fn pending(&self) -> Vec<AlterIsrItem> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, AlterIsrItem>> {
        self.unsent.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends queued changes until aborted. Runs as one task per broker.
pub(crate) async fn send_loop(
    rm: ReplicaManager,
    manager: Arc<AlterPartitionManager>,
    channel: Arc<dyn ControllerChannel>,
    local_id: i32,
) {
    let mut connection: Option<Connection> = None;
    loop {
        let items: Vec<AlterIsrItem> = manager.pending();
        if items.is_empty() {
            manager.wake.notified().await;
            continue;
        }
        let Some(addr) = channel.controller_addr() else {
            debug!("no controller known yet; AlterPartition waits");
            tokio::time::sleep(RETRY_BACKOFF * 4).await;
            continue;
        };
        if connection.as_ref().is_none_or(|c| c.addr() != addr) {
            let options = ConnectionOptions {
                client_id: format!("alter-partition-{local_id}"),
                request_timeout: REQUEST_TIMEOUT,
                ..ConnectionOptions::default()
            };
            match Connection::connect_with(&addr, options).await {
                Ok(c) => connection = Some(c),
                Err(err) => {
                    debug!(%addr, error = %err, "cannot reach the controller; retrying");
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                }
            }
        }
        let Some(conn) = connection.as_mut() else {
            continue;
        };
        let broker_epoch = channel.broker_epoch();
        let request = build_request(local_id, broker_epoch, &items);
        let tags = channel.proof_tags(broker_epoch);
        let response = match conn
            .send_version_tagged(request, ALTER_PARTITION_VERSION, &tags)
            .await
        {
            Ok(response) => response,
            Err(err) => {
                debug!(%addr, error = %err, "AlterPartition failed; reconnecting");
                connection = None;
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            }
        };
        if response.error_code != 0 {
            let error = ResponseError::try_from_code(response.error_code);
            match error {
                Some(ResponseError::StaleBrokerEpoch) => {
                    warn!(
                        broker_epoch,
                        "the controller refused our broker epoch; retrying"
                    )
                }
                Some(ResponseError::NotController) => {
                    debug!(%addr, "the broker answering is not the controller; retrying");
                    connection = None;
                }
                _ => warn!(?error, "AlterPartition refused; retrying"),
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        }
        let mut answers: BTreeMap<TopicPartition, Result<AlterIsrResult, ResponseError>> =
            BTreeMap::new();
        for topic in &response.topics {
            let Ok(name) = topic.topic_name.0.parse::<model::TopicName>() else {
                continue;
            };
            for p in &topic.partitions {
                let tp = TopicPartition::new(name.clone(), p.partition_index);
                let answer = if p.error_code == 0 {
                    Ok(AlterIsrResult {
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        isr: p.isr.iter().map(|b| b.0).collect(),
                        partition_epoch: p.partition_epoch,
                    })
                } else {
                    Err(ResponseError::try_from_code(p.error_code)
                        .unwrap_or(ResponseError::UnknownServerError))
                };
                answers.insert(tp, answer);
            }
        }
        for item in items {
            let Some(answer) = answers.remove(&item.tp) else {
                // Left out of the answer: stays queued and goes again.
                warn!(tp = %item.tp, "the controller did not answer for a partition; resending");
                continue;
            };
            {
                let mut unsent = manager.lock();
                if unsent
                    .get(&item.tp)
                    .is_some_and(|i| i.proposal == item.proposal)
                {
                    unsent.remove(&item.tp);
                }
            }
            match &answer {
                Ok(state) => info!(tp = %item.tp, isr = ?state.isr,
                    partition_epoch = state.partition_epoch, "the controller accepted the ISR change"),
                Err(error) => info!(tp = %item.tp, ?error, "the controller refused the ISR change"),
            }
            rm.on_alter_partition_answer(&item, answer);
        }
    }
}

fn build_request(
    local_id: i32,
    broker_epoch: i64,
    items: &[AlterIsrItem],
) -> AlterPartitionRequest {
    let mut topics: Vec<TopicData> = Vec::new();
    for item in items {
        let data = PartitionData::default()
            .with_partition_index(item.tp.partition)
            .with_leader_epoch(item.leader_epoch)
            .with_new_isr(item.new_isr.iter().map(|&b| BrokerId(b)).collect())
            .with_partition_epoch(item.partition_epoch);
        match topics
            .iter_mut()
            .find(|t| t.topic_name.0.as_str() == item.tp.topic.as_str())
        {
            Some(topic) => topic.partitions.push(data),
            None => topics.push(
                TopicData::default()
                    .with_topic_name(TopicName(StrBytes::from_string(
                        item.tp.topic.as_str().to_owned(),
                    )))
                    .with_partitions(vec![data]),
            ),
        }
    }
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(local_id))
        .with_broker_epoch(broker_epoch)
        .with_topics(topics)
}
