//! THE table of API versions Gregor implements, and the `ApiVersions` response built from it.
//!
//! The target is Apache Kafka 3.9 in ZooKeeper mode ([`KAFKA_3_9_ZK`], read off Kafka 3.9's
//! message definitions and its ZooKeeper broker's `ApiVersionManager`): for every API Gregor
//! serves, the same range, unless [`DIFFERENCES`] says why not. `docs/protocol-versions.md` is
//! the same table for people, with Kafka 2.8's ranges beside it; a test keeps the three in step.
//! Clients that infer the broker release from these ranges (kafka-python does) must see one
//! consistent release: `DescribeAcls` is listed because a broker without an authorizer
//! answers it (with `SECURITY_DISABLED`), and kafka-python needs its v2 to infer a release of
//! at least 2.5 (below 2.4 it refuses to send CreateTopics with `-1` defaults).

use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiKey;

/// One row of [`SUPPORTED_APIS`]: an API and the inclusive range of versions we handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionRange {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest version handled.
    pub min_version: i16,
    /// Highest version handled.
    pub max_version: i16,
}

impl ApiVersionRange {
    /// Whether `version` lies inside this range.
    pub fn contains(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }
}

const fn row(api_key: ApiKey, min_version: i16, max_version: i16) -> ApiVersionRange {
    ApiVersionRange {
        api_key,
        min_version,
        max_version,
    }
}

/// Every API the broker answers, with the versions it answers, in api-key order.
///
/// The broker's request router has one handler per row, and the `client` crate never sends
/// a version outside these ranges.
pub const SUPPORTED_APIS: &[ApiVersionRange] = &[
    row(ApiKey::Produce, 0, 11),
    row(ApiKey::Fetch, 0, 17),
    row(ApiKey::ListOffsets, 0, 9),
    // v12 (topics looked up by id) is also what librdkafka needs to resolve a KIP-848
    // assignment, which names topics by id.
    row(ApiKey::Metadata, 0, 12),
    row(ApiKey::LeaderAndIsr, 0, 7),
    row(ApiKey::StopReplica, 0, 4),
    row(ApiKey::UpdateMetadata, 0, 8),
    row(ApiKey::ControlledShutdown, 0, 3),
    row(ApiKey::OffsetCommit, 0, 9),
    row(ApiKey::OffsetFetch, 0, 9),
    row(ApiKey::FindCoordinator, 0, 6),
    row(ApiKey::JoinGroup, 0, 9),
    row(ApiKey::Heartbeat, 0, 4),
    row(ApiKey::LeaveGroup, 0, 5),
    row(ApiKey::SyncGroup, 0, 5),
    row(ApiKey::DescribeGroups, 0, 5),
    row(ApiKey::ListGroups, 0, 5),
    row(ApiKey::SaslHandshake, 0, 1),
    row(ApiKey::ApiVersions, 0, 4),
    row(ApiKey::CreateTopics, 0, 7),
    row(ApiKey::DeleteTopics, 0, 6),
    row(ApiKey::DeleteRecords, 0, 2),
    row(ApiKey::InitProducerId, 0, 5),
    row(ApiKey::OffsetForLeaderEpoch, 0, 4),
    row(ApiKey::AddPartitionsToTxn, 0, 5),
    row(ApiKey::AddOffsetsToTxn, 0, 4),
    row(ApiKey::EndTxn, 0, 4),
    row(ApiKey::WriteTxnMarkers, 0, 1),
    row(ApiKey::TxnOffsetCommit, 0, 4),
    row(ApiKey::DescribeAcls, 0, 3),
    row(ApiKey::CreateAcls, 0, 3),
    row(ApiKey::DeleteAcls, 0, 3),
    row(ApiKey::DescribeConfigs, 0, 4),
    row(ApiKey::AlterConfigs, 0, 2),
    row(ApiKey::DescribeLogDirs, 0, 4),
    row(ApiKey::SaslAuthenticate, 0, 2),
    row(ApiKey::CreatePartitions, 0, 3),
    row(ApiKey::DeleteGroups, 0, 2),
    row(ApiKey::ElectLeaders, 0, 2),
    row(ApiKey::IncrementalAlterConfigs, 0, 1),
    row(ApiKey::AlterPartitionReassignments, 0, 0),
    row(ApiKey::ListPartitionReassignments, 0, 0),
    row(ApiKey::OffsetDelete, 0, 0),
    row(ApiKey::DescribeClientQuotas, 0, 1),
    row(ApiKey::AlterClientQuotas, 0, 1),
    row(ApiKey::DescribeUserScramCredentials, 0, 0),
    row(ApiKey::AlterUserScramCredentials, 0, 0),
    row(ApiKey::AlterPartition, 0, 3),
    row(ApiKey::DescribeCluster, 0, 1),
    row(ApiKey::DescribeProducers, 0, 0),
    row(ApiKey::DescribeTransactions, 0, 0),
    row(ApiKey::ListTransactions, 0, 1),
    row(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    row(ApiKey::ConsumerGroupDescribe, 0, 0),
];

/// What Apache Kafka 2.8's ZooKeeper-mode broker advertises: every API whose message
/// definition lists the `zkBroker` listener, from its lowest to its highest version (2.8.2's
/// `clients/src/main/resources/common/message/*Request.json`). Reference data for the docs
/// and tests; the broker serves [`SUPPORTED_APIS`].
pub const KAFKA_2_8_ZK: &[ApiVersionRange] = &[
    row(ApiKey::Produce, 0, 9),
    row(ApiKey::Fetch, 0, 12),
    row(ApiKey::ListOffsets, 0, 6),
    row(ApiKey::Metadata, 0, 11),
    row(ApiKey::LeaderAndIsr, 0, 5),
    row(ApiKey::StopReplica, 0, 3),
    row(ApiKey::UpdateMetadata, 0, 7),
    row(ApiKey::ControlledShutdown, 0, 3),
    row(ApiKey::OffsetCommit, 0, 8),
    row(ApiKey::OffsetFetch, 0, 7),
    row(ApiKey::FindCoordinator, 0, 3),
    row(ApiKey::JoinGroup, 0, 7),
    row(ApiKey::Heartbeat, 0, 4),
    row(ApiKey::LeaveGroup, 0, 4),
    row(ApiKey::SyncGroup, 0, 5),
    row(ApiKey::DescribeGroups, 0, 5),
    row(ApiKey::ListGroups, 0, 4),
    row(ApiKey::SaslHandshake, 0, 1),
    row(ApiKey::ApiVersions, 0, 3),
    row(ApiKey::CreateTopics, 0, 7),
    row(ApiKey::DeleteTopics, 0, 6),
    row(ApiKey::DeleteRecords, 0, 2),
    row(ApiKey::InitProducerId, 0, 4),
    row(ApiKey::OffsetForLeaderEpoch, 0, 4),
    row(ApiKey::AddPartitionsToTxn, 0, 3),
    row(ApiKey::AddOffsetsToTxn, 0, 3),
    row(ApiKey::EndTxn, 0, 3),
    row(ApiKey::WriteTxnMarkers, 0, 1),
    row(ApiKey::TxnOffsetCommit, 0, 3),
    row(ApiKey::DescribeAcls, 0, 2),
    row(ApiKey::CreateAcls, 0, 2),
    row(ApiKey::DeleteAcls, 0, 2),
    row(ApiKey::DescribeConfigs, 0, 4),
    row(ApiKey::AlterConfigs, 0, 2),
    row(ApiKey::AlterReplicaLogDirs, 0, 2),
    row(ApiKey::DescribeLogDirs, 0, 2),
    row(ApiKey::SaslAuthenticate, 0, 2),
    row(ApiKey::CreatePartitions, 0, 3),
    row(ApiKey::CreateDelegationToken, 0, 2),
    row(ApiKey::RenewDelegationToken, 0, 2),
    row(ApiKey::ExpireDelegationToken, 0, 2),
    row(ApiKey::DescribeDelegationToken, 0, 2),
    row(ApiKey::DeleteGroups, 0, 2),
    row(ApiKey::ElectLeaders, 0, 2),
    row(ApiKey::IncrementalAlterConfigs, 0, 1),
    row(ApiKey::AlterPartitionReassignments, 0, 0),
    row(ApiKey::ListPartitionReassignments, 0, 0),
    row(ApiKey::OffsetDelete, 0, 0),
    row(ApiKey::DescribeClientQuotas, 0, 1),
    row(ApiKey::AlterClientQuotas, 0, 1),
    row(ApiKey::DescribeUserScramCredentials, 0, 0),
    row(ApiKey::AlterUserScramCredentials, 0, 0),
    row(ApiKey::AlterPartition, 0, 0),
    row(ApiKey::UpdateFeatures, 0, 0),
    row(ApiKey::DescribeCluster, 0, 0),
    row(ApiKey::DescribeProducers, 0, 0),
];

/// What Apache Kafka 3.9's ZooKeeper-mode broker advertises: `ApiVersionManager` with the
/// `ZK_BROKER` listener lists every API whose message definition names `zkBroker`, from its
/// lowest to its highest stable version (`unstable.api.versions.enable` is off by default;
/// no zkBroker API has an unstable last version in 3.9). Reference data for the docs and
/// tests; the broker serves [`SUPPORTED_APIS`].
pub const KAFKA_3_9_ZK: &[ApiVersionRange] = &[
    row(ApiKey::Produce, 0, 11),
    row(ApiKey::Fetch, 0, 17),
    row(ApiKey::ListOffsets, 0, 9),
    row(ApiKey::Metadata, 0, 12),
    row(ApiKey::LeaderAndIsr, 0, 7),
    row(ApiKey::StopReplica, 0, 4),
    row(ApiKey::UpdateMetadata, 0, 8),
    row(ApiKey::ControlledShutdown, 0, 3),
    row(ApiKey::OffsetCommit, 0, 9),
    row(ApiKey::OffsetFetch, 0, 9),
    row(ApiKey::FindCoordinator, 0, 6),
    row(ApiKey::JoinGroup, 0, 9),
    row(ApiKey::Heartbeat, 0, 4),
    row(ApiKey::LeaveGroup, 0, 5),
    row(ApiKey::SyncGroup, 0, 5),
    row(ApiKey::DescribeGroups, 0, 5),
    row(ApiKey::ListGroups, 0, 5),
    row(ApiKey::SaslHandshake, 0, 1),
    row(ApiKey::ApiVersions, 0, 4),
    row(ApiKey::CreateTopics, 0, 7),
    row(ApiKey::DeleteTopics, 0, 6),
    row(ApiKey::DeleteRecords, 0, 2),
    row(ApiKey::InitProducerId, 0, 5),
    row(ApiKey::OffsetForLeaderEpoch, 0, 4),
    row(ApiKey::AddPartitionsToTxn, 0, 5),
    row(ApiKey::AddOffsetsToTxn, 0, 4),
    row(ApiKey::EndTxn, 0, 4),
    row(ApiKey::WriteTxnMarkers, 0, 1),
    row(ApiKey::TxnOffsetCommit, 0, 4),
    row(ApiKey::DescribeAcls, 0, 3),
    row(ApiKey::CreateAcls, 0, 3),
    row(ApiKey::DeleteAcls, 0, 3),
    row(ApiKey::DescribeConfigs, 0, 4),
    row(ApiKey::AlterConfigs, 0, 2),
    row(ApiKey::AlterReplicaLogDirs, 0, 2),
    row(ApiKey::DescribeLogDirs, 0, 4),
    row(ApiKey::SaslAuthenticate, 0, 2),
    row(ApiKey::CreatePartitions, 0, 3),
    row(ApiKey::CreateDelegationToken, 0, 3),
    row(ApiKey::RenewDelegationToken, 0, 2),
    row(ApiKey::ExpireDelegationToken, 0, 2),
    row(ApiKey::DescribeDelegationToken, 0, 3),
    row(ApiKey::DeleteGroups, 0, 2),
    row(ApiKey::ElectLeaders, 0, 2),
    row(ApiKey::IncrementalAlterConfigs, 0, 1),
    row(ApiKey::AlterPartitionReassignments, 0, 0),
    row(ApiKey::ListPartitionReassignments, 0, 0),
    row(ApiKey::OffsetDelete, 0, 0),
    row(ApiKey::DescribeClientQuotas, 0, 1),
    row(ApiKey::AlterClientQuotas, 0, 1),
    row(ApiKey::DescribeUserScramCredentials, 0, 0),
    row(ApiKey::AlterUserScramCredentials, 0, 0),
    row(ApiKey::AlterPartition, 0, 3),
    row(ApiKey::UpdateFeatures, 0, 1),
    row(ApiKey::Envelope, 0, 0),
    row(ApiKey::DescribeCluster, 0, 1),
    row(ApiKey::DescribeProducers, 0, 0),
    row(ApiKey::DescribeTransactions, 0, 0),
    row(ApiKey::ListTransactions, 0, 1),
    row(ApiKey::AllocateProducerIds, 0, 0),
    row(ApiKey::ConsumerGroupHeartbeat, 0, 0),
    row(ApiKey::ConsumerGroupDescribe, 0, 0),
];

/// A row of [`SUPPORTED_APIS`] that is not Kafka 3.9's ZooKeeper-mode range, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Difference {
    /// The API.
    pub api_key: ApiKey,
    /// Why its range differs.
    pub reason: &'static str,
}

/// Every API Gregor serves at a range other than [`KAFKA_3_9_ZK`]'s (a test checks that no
/// other row differs, and that each of these does).
pub const DIFFERENCES: &[Difference] = &[
    Difference {
        api_key: ApiKey::ConsumerGroupHeartbeat,
        reason: "v1 is Kafka 4.0's (KIP-848 generally available): librdkafka 2.10+ refuses a broker with v0 only",
    },
];

/// The range we support for `api_key`, or `None` if we do not implement it.
pub fn supported_range(api_key: ApiKey) -> Option<ApiVersionRange> {
    SUPPORTED_APIS
        .iter()
        .copied()
        .find(|r| r.api_key == api_key)
}

/// Whether we handle `api_key` at `version`.
pub fn is_supported(api_key: ApiKey, version: i16) -> bool {
    supported_range(api_key).is_some_and(|r| r.contains(version))
}

/// The `api_keys` list of an `ApiVersions` response.
pub fn api_version_list() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|r| {
            ApiVersion::default()
                .with_api_key(r.api_key as i16)
                .with_min_version(r.min_version)
                .with_max_version(r.max_version)
        })
        .collect()
}

/// A successful `ApiVersions` response listing [`SUPPORTED_APIS`]. Tagged fields keep their
/// defaults, so `kafka-protocol` omits them on the wire (old librdkafka cannot skip them).
pub fn api_versions_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(api_version_list())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_within_kafka_protocol() {
        for pair in SUPPORTED_APIS.windows(2) {
            assert!(
                (pair[0].api_key as i16) < (pair[1].api_key as i16),
                "{pair:?}"
            );
        }
        for r in SUPPORTED_APIS {
            let mut valid = r.api_key.valid_versions();
            if r.api_key == ApiKey::ConsumerGroupHeartbeat {
                // v1 is rewritten to the codec's v0 (crate::kip848).
                valid.max = 1;
            }
            assert!(r.min_version <= r.max_version, "{r:?}");
            assert!(
                valid.min <= r.min_version && r.max_version <= valid.max,
                "{r:?}"
            );
        }
    }

    fn find(table: &[ApiVersionRange], api_key: ApiKey) -> Option<ApiVersionRange> {
        table.iter().copied().find(|r| r.api_key == api_key)
    }

    #[test]
    fn kafka_reference_tables_are_sorted_and_unique() {
        for table in [KAFKA_2_8_ZK, KAFKA_3_9_ZK] {
            for pair in table.windows(2) {
                assert!(
                    (pair[0].api_key as i16) < (pair[1].api_key as i16),
                    "{pair:?}"
                );
            }
        }
    }

    #[test]
    fn every_row_is_kafka_3_9_zookeeper_mode_or_a_listed_difference() {
        for r in SUPPORTED_APIS {
            let kafka = find(KAFKA_3_9_ZK, r.api_key).unwrap_or_else(|| {
                panic!(
                    "{:?}: Kafka 3.9's ZooKeeper broker does not serve it",
                    r.api_key
                )
            });
            let listed = DIFFERENCES.iter().any(|d| d.api_key == r.api_key);
            if listed {
                assert_ne!(
                    *r, kafka,
                    "{:?} is listed as a difference but matches Kafka 3.9",
                    r.api_key
                );
            } else {
                assert_eq!(
                    *r, kafka,
                    "{:?} differs from Kafka 3.9 without a reason in DIFFERENCES",
                    r.api_key
                );
            }
        }
        for d in DIFFERENCES {
            assert!(
                supported_range(d.api_key).is_some(),
                "{:?} is not served",
                d.api_key
            );
            assert!(!d.reason.is_empty());
        }
    }

    #[test]
    fn ranges_clients_rely_on() {
        // Batched FindCoordinator (KIP-699) and OffsetFetch (KIP-709): clients written for
        // Kafka 3.x offer nothing older.
        assert!(is_supported(ApiKey::FindCoordinator, 4));
        assert!(is_supported(ApiKey::OffsetFetch, 8));
        // kafka-python infers at least 2.5 from DescribeAcls v2 (see the module docs).
        assert!(is_supported(ApiKey::DescribeAcls, 2));
        assert!(is_supported(ApiKey::ApiVersions, 4));
        assert!(!is_supported(ApiKey::ApiVersions, 5));
    }
}
