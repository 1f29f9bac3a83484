//! DescribeLogDirs (v0-4, `kafka-log-dirs.sh`): per configured log directory, its partitions
//! with their size and offset lag, as Kafka's `ReplicaManager.describeLogDirs`. v3 adds a
//! top-level error code, v4 the file system's total and usable bytes. A directory whose file
//! system cannot be read answers KAFKA_STORAGE_ERROR. The disk reads (statvfs, sizes of logs
//! that are not open) run on the blocking pool.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::TopicPartition;
use replication::ReplicaManager;
use storage::LogManager;
use tracing::warn;

use crate::context::BrokerContext;

/// Kafka's KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;

/// Kafka's `DescribeLogDirsResponse.INVALID_OFFSET_LAG`: the replica is not open here.
const INVALID_OFFSET_LAG: i64 = -1;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    // DESCRIBE on the cluster, as Kafka's handleDescribeLogDirsRequest: without it the
    // answer lists nothing (v3+ also says CLUSTER_AUTHORIZATION_FAILED).
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Describe) {
        let response = DescribeLogDirsResponse::default();
        return if version >= 3 {
            response.with_error_code(super::CLUSTER_AUTHORIZATION_FAILED)
        } else {
            response
        };
    }
    let logs = ctx.log_manager.clone();
    let replicas = ctx.replica_manager.clone();
    match tokio::task::spawn_blocking(move || describe(&logs, &replicas, &request, version)).await {
        Ok(response) => response,
        Err(err) => {
            warn!(error = %err, "describing the log directories failed");
            DescribeLogDirsResponse::default()
                .with_error_code(kafka_protocol::error::ResponseError::UnknownServerError.code())
        }
    }
}

fn describe(
    logs: &LogManager,
    replicas: &ReplicaManager,
    request: &DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let hosted = logs.partitions();
    // A null topic list (v0+) asks for every partition.
    let wanted = |tp: &TopicPartition| match &request.topics {
        None => true,
        Some(topics) => topics.iter().any(|t| {
            t.topic.0.as_str() == tp.topic.as_str() && t.partitions.contains(&tp.partition)
        }),
    };
    let mut by_dir: BTreeMap<PathBuf, BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        BTreeMap::new();
    for tp in hosted.iter().filter(|tp| wanted(tp)) {
        let Some(dir) = logs.partition_dir(tp) else {
            continue;
        };
        let Some(parent) = dir.parent() else {
            continue;
        };
        let (size, lag) = match replicas.get(tp) {
            Some(partition) => (
                i64::try_from(partition.size_in_bytes()).unwrap_or(i64::MAX),
                (partition.high_watermark() - partition.log_end_offset()).max(0),
            ),
            // On disk but not opened (no LeaderAndIsr yet): the segment files' size.
            None => (
                i64::try_from(LogManager::segment_bytes(&dir)).unwrap_or(i64::MAX),
                INVALID_OFFSET_LAG,
            ),
        };
        by_dir
            .entry(parent.to_path_buf())
            .or_default()
            .entry(tp.topic.as_str().to_owned())
            .or_default()
            .push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_partition_size(size)
                    .with_offset_lag(lag)
                    .with_is_future_key(false),
            );
    }
    let results = logs
        .log_dirs()
        .iter()
        .map(|dir| {
            let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(absolute.display().to_string()));
            let (total, usable) = match LogManager::dir_space(dir) {
                Ok(space) => space,
                Err(err) => {
                    warn!(dir = %dir.display(), error = %err, "cannot read the log directory's file system");
                    return result.with_error_code(KAFKA_STORAGE_ERROR);
                }
            };
            let topics = by_dir
                .remove(dir)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| {
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect();
            let result = result.with_topics(topics);
            if version >= 4 {
                let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                result
                    .with_total_bytes(bytes(total))
                    .with_usable_bytes(bytes(usable))
            } else {
                result
            }
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}
