//! The follower fetcher (Kafka's `ReplicaFetcherThread`, one task per followed partition):
//! fetches from the leader at the local log end offset with this broker's id as
//! `replica_id`, appends what comes back with the leader's offsets, and takes the leader's
//! high watermark. The leader learns the follower's log end offset from the fetch offset.
//!
//! Before fetching, a new follower truncates its log to its high watermark (Kafka's
//! behaviour before KIP-101; see `Partition::set_role`). Leader-epoch based truncation
//! (OffsetForLeaderEpoch) is not done: a follower whose log end is still past the leader's
//! gets OFFSET_OUT_OF_RANGE, logs it and retries.

use std::sync::Arc;
use std::time::Duration;

use client::Connection;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use tracing::{debug, info, warn};

use crate::{Partition, ReplicaManager};

/// How long a follower's fetch waits at the leader for new data.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Bytes per follower fetch (Kafka's `replica.fetch.max.bytes`).
const FETCH_MAX_BYTES: i32 = 1024 * 1024;
/// Pause after an error before trying again (Kafka's `replica.fetch.backoff.ms`).
const BACKOFF: Duration = Duration::from_secs(1);
/// The Fetch version followers use (Kafka 2.8's highest).
const FETCH_VERSION: i16 = 12;

/// Where the leader of a followed partition listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEndpoint {
    /// The leader's broker id.
    pub broker_id: i32,
    /// `host:port` of its listener.
    pub addr: String,
}

impl Partition {
    /// Stops the fetcher task, if any.
    pub(crate) fn stop_fetcher(&self) {
        if let Some(task) = self
            .fetcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl ReplicaManager {
    /// Starts (or restarts) fetching `tp` from `leader` as follower `local_id`. Must run
    /// inside a Tokio runtime.
    pub fn start_fetcher(&self, tp: &TopicPartition, local_id: i32, leader: LeaderEndpoint) {
        let Some(partition) = self.get(tp) else {
            return;
        };
        partition.stop_fetcher();
        let task = tokio::spawn(fetch_loop(
            self.clone(),
            Arc::clone(&partition),
            local_id,
            leader,
        ));
        *partition.fetcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
    }
}

async fn fetch_loop(
    rm: ReplicaManager,
    partition: Arc<Partition>,
    local_id: i32,
    leader: LeaderEndpoint,
) {
    let tp = partition.topic_partition().clone();
    info!(%tp, leader = leader.broker_id, addr = %leader.addr, "starting follower fetcher");
    let client_id = format!("replica-fetcher-{local_id}");
    loop {
        let mut conn = match Connection::connect(&leader.addr, &client_id).await {
            Ok(conn) => conn,
            Err(err) => {
                debug!(%tp, error = %err, "cannot reach the leader; retrying");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        loop {
            let offset = partition.log_end_offset();
            let request = fetch_request(&tp, local_id, offset, partition.role().leader_epoch());
            let response = match conn.send_version(request, FETCH_VERSION).await {
                Ok(response) => response,
                Err(err) => {
                    debug!(%tp, error = %err, "follower fetch failed; reconnecting");
                    tokio::time::sleep(BACKOFF).await;
                    break;
                }
            };
            let Some(data) = response
                .responses
                .first()
                .and_then(|t| t.partitions.first())
            else {
                tokio::time::sleep(BACKOFF).await;
                continue;
            };
            if data.error_code != 0 {
                let error = ResponseError::try_from_code(data.error_code);
                if data.error_code == ResponseError::OffsetOutOfRange.code() {
                    warn!(%tp, offset, "the leader's log does not hold this follower's log end; \
                        logs diverged (truncation is not implemented)");
                } else {
                    debug!(%tp, ?error, "follower fetch answered with an error");
                }
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
            let records = data.records.clone().unwrap_or_default();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            // The append writes the log: off the async workers (issue 14).
            let appended = {
                let (partition, high_watermark) = (Arc::clone(&partition), data.high_watermark);
                let records = records.clone();
                tokio::task::spawn_blocking(move || {
                    partition.append_as_follower(&records, high_watermark, now)
                })
                .await
            };
            let appended = match appended {
                Ok(appended) => appended,
                Err(err) => {
                    warn!(%tp, error = %err, "the follower append task failed; stopping the fetcher");
                    return;
                }
            };
            match appended {
                Ok(()) => {
                    if !records.is_empty() {
                        // Consumers never read from followers, but a waiting follower fetch
                        // of a replica further down a chain might; keep the signal uniform.
                        rm.notify_appended();
                    }
                }
                Err(err) => {
                    warn!(%tp, error = %err, "cannot append fetched batches; stopping the fetcher");
                    return;
                }
            }
        }
    }
}

fn fetch_request(tp: &TopicPartition, local_id: i32, offset: i64, epoch: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(local_id))
        .with_max_wait_ms(FETCH_MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(epoch)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(FETCH_MAX_BYTES)])])
}
