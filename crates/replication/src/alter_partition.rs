//! The leader's AlterPartition sender (Kafka's `AlterIsrManager`): ISR changes proposed by
//! partitions this broker leads go to the active controller in batches, one request in flight
//! at a time and at most one change per partition, retried until the controller answers.
//!
//! Where the controller is, this broker's epoch and the topics' ids come from the broker
//! through [`ControllerChannel`]. A request goes at the newest version both sides offer
//! (Kafka 3.9's v3 between Gregor brokers: topics by id, the ISR with broker epochs, here -1,
//! "not known", as Kafka 3.9's ZooKeeper-mode leaders send), or at v1, by name, when a topic's id
//! is not known yet, as Kafka's `AlterPartitionManager`. Each answer goes back to its partition, which commits the new ISR,
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
use tracing::{debug, error, info, warn};

use crate::ReplicaManager;

/// The newest AlterPartition version that names topics (v2+ name them by id).
pub const ALTER_PARTITION_BY_NAME_MAX: i16 = 1;
/// Pause before resending after a failed request or a top-level error (Kafka: 50 ms).
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
/// The pause after the controller refused our credentials or certificate.
const AUTH_RETRY_BACKOFF: Duration = Duration::from_secs(1);
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
    /// The topic's id as this broker's metadata knows it (`None` when not known).
    fn topic_id(&self, topic: &model::TopicName) -> Option<uuid::Uuid>;
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
    let mut warned_epoch: Option<i64> = None;
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
            let config = rm.config();
            let options = ConnectionOptions {
                client_id: format!("alter-partition-{local_id}"),
                request_timeout: REQUEST_TIMEOUT,
                ..ConnectionOptions::default()
            }
            .secured(&config.inter_broker_security);
            match Connection::connect_with(&addr, options).await {
                Ok(c) => connection = Some(c),
                Err(err) if err.is_authentication() => {
                    error!(%addr, listener = %config.inter_broker_listener, error = %err,
                        retry_in_ms = AUTH_RETRY_BACKOFF.as_millis() as u64,
                        "AlterPartition: connection to the controller ({addr}) on listener {} failed authentication; retrying",
                        config.inter_broker_listener);
                    tokio::time::sleep(AUTH_RETRY_BACKOFF).await;
                    continue;
                }
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
        let ids: BTreeMap<model::TopicName, uuid::Uuid> = items
            .iter()
            .filter_map(|i| Some((i.tp.topic.clone(), channel.topic_id(&i.tp.topic)?)))
            .filter(|(_, id)| !id.is_nil())
            .collect();
        let newest = match conn.negotiated_version::<AlterPartitionRequest>() {
            Ok(v) => v,
            Err(err) => {
                warn!(%addr, error = %err, "the controller offers no AlterPartition version we send; retrying");
                connection = None;
                tokio::time::sleep(RETRY_BACKOFF * 4).await;
                continue;
            }
        };
        let all_ids = items.iter().all(|i| ids.contains_key(&i.tp.topic));
        let version = if all_ids {
            newest
        } else {
            newest.min(ALTER_PARTITION_BY_NAME_MAX)
        };
        let request = build_request(local_id, broker_epoch, &items, &ids, version);
        let tags = channel.proof_tags(broker_epoch);
        let response = match conn.send_version_tagged(request, version, &tags).await {
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
                    // Until the controller has seen this broker's registration, every retry
                    // (each RETRY_BACKOFF) is refused: say so once per epoch, not each time.
                    if warned_epoch != Some(broker_epoch) {
                        warned_epoch = Some(broker_epoch);
                        warn!(
                            broker_epoch,
                            "the controller refused our broker epoch; retrying until it knows it"
                        );
                    } else {
                        debug!(
                            broker_epoch,
                            "the controller still refuses our broker epoch"
                        );
                    }
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
            let name = if version >= 2 {
                ids.iter()
                    .find(|(_, id)| **id == topic.topic_id)
                    .map(|(name, _)| name.clone())
            } else {
                topic.topic_name.0.parse::<model::TopicName>().ok()
            };
            let Some(name) = name else {
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
                    Err(answer_error(p.error_code))
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

/// Kafka's INELIGIBLE_REPLICA (KIP-841), newer than `kafka-protocol`'s error table.
const INELIGIBLE_REPLICA: i16 = 107;

/// A partition's error code as the partition reads it: INELIGIBLE_REPLICA (v2+) is what
/// OPERATION_NOT_ATTEMPTED was below v2, and UNKNOWN_TOPIC_ID (v2+) what
/// UNKNOWN_TOPIC_OR_PARTITION was (both wait for the next LeaderAndIsr, as Kafka's leader).
fn answer_error(code: i16) -> ResponseError {
    match code {
        INELIGIBLE_REPLICA => ResponseError::OperationNotAttempted,
        c if c == ResponseError::UnknownTopicId.code() => ResponseError::UnknownTopicOrPartition,
        c => ResponseError::try_from_code(c).unwrap_or(ResponseError::UnknownServerError),
    }
}

fn build_request(
    local_id: i32,
    broker_epoch: i64,
    items: &[AlterIsrItem],
    ids: &BTreeMap<model::TopicName, uuid::Uuid>,
    version: i16,
) -> AlterPartitionRequest {
    use kafka_protocol::messages::alter_partition_request::BrokerState;
    let mut topics: Vec<(model::TopicName, TopicData)> = Vec::new();
    for item in items {
        // A leader is RECOVERED from the moment it leads (Kafka 3.9's `Partition.makeLeader`
        // marks a RECOVERING partition recovered at once), so every change it proposes says
        // so: the first one after an unclean election clears RECOVERING at the controller.
        let mut data = PartitionData::default()
            .with_partition_index(item.tp.partition)
            .with_leader_epoch(item.leader_epoch)
            .with_leader_recovery_state(model::LeaderRecoveryState::Recovered.value())
            .with_partition_epoch(item.partition_epoch);
        if version >= 3 {
            data.new_isr_with_epochs = item
                .new_isr
                .iter()
                .map(|&b| {
                    BrokerState::default()
                        .with_broker_id(BrokerId(b))
                        .with_broker_epoch(-1)
                })
                .collect();
        } else {
            data.new_isr = item.new_isr.iter().map(|&b| BrokerId(b)).collect();
        }
        match topics.iter_mut().find(|(name, _)| *name == item.tp.topic) {
            Some((_, topic)) => topic.partitions.push(data),
            None => {
                let topic = if version >= 2 {
                    TopicData::default()
                        .with_topic_id(ids.get(&item.tp.topic).copied().unwrap_or_default())
                } else {
                    TopicData::default().with_topic_name(TopicName(StrBytes::from_string(
                        item.tp.topic.as_str().to_owned(),
                    )))
                };
                topics.push((item.tp.topic.clone(), topic.with_partitions(vec![data])));
            }
        }
    }
    let topics = topics.into_iter().map(|(_, t)| t).collect();
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(local_id))
        .with_broker_epoch(broker_epoch)
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(topic: &str, partition: i32) -> AlterIsrItem {
        AlterIsrItem {
            tp: TopicPartition::new(topic.parse().unwrap(), partition),
            leader_epoch: 3,
            new_isr: vec![1, 2],
            partition_epoch: 7,
            proposal: 1,
        }
    }

    #[test]
    fn requests_name_topics_by_name_below_v2_and_by_id_from_it() {
        use kafka_protocol::protocol::Encodable;
        let items = [item("a", 0), item("a", 1), item("b", 0)];
        let ids = BTreeMap::from([
            ("a".parse().unwrap(), uuid::Uuid::from_bytes([1; 16])),
            ("b".parse().unwrap(), uuid::Uuid::from_bytes([2; 16])),
        ]);
        for version in 0..=3 {
            let request = build_request(5, 100, &items, &ids, version);
            let mut buf = bytes::BytesMut::new();
            request
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
            assert_eq!(request.topics.len(), 2, "v{version}");
            assert_eq!(request.topics[0].partitions.len(), 2, "v{version}");
            let first = &request.topics[0];
            if version >= 2 {
                assert_eq!(first.topic_id, uuid::Uuid::from_bytes([1; 16]));
                assert!(first.topic_name.0.is_empty());
            } else {
                assert_eq!(first.topic_name.0.as_str(), "a");
            }
            let p = &first.partitions[1];
            assert_eq!(
                (p.partition_index, p.leader_epoch, p.partition_epoch),
                (1, 3, 7)
            );
            let isr: Vec<(i32, i64)> = if version >= 3 {
                assert!(p.new_isr.is_empty());
                p.new_isr_with_epochs
                    .iter()
                    .map(|b| (b.broker_id.0, b.broker_epoch))
                    .collect()
            } else {
                p.new_isr.iter().map(|b| (b.0, -1)).collect()
            };
            assert_eq!(isr, vec![(1, -1), (2, -1)], "v{version}");
        }
    }

    #[test]
    fn newer_codes_read_as_their_older_equivalents() {
        assert_eq!(
            answer_error(INELIGIBLE_REPLICA),
            ResponseError::OperationNotAttempted
        );
        assert_eq!(
            answer_error(ResponseError::UnknownTopicId.code()),
            ResponseError::UnknownTopicOrPartition
        );
        assert_eq!(
            answer_error(ResponseError::FencedLeaderEpoch.code()),
            ResponseError::FencedLeaderEpoch
        );
    }
}
