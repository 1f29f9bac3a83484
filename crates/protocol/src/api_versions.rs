//! THE table of API versions Gregor implements, and the `ApiVersions` response built from it.
//!
//! The ranges follow Apache Kafka 2.8's, capped to what each of our handlers really supports,
//! so that clients which infer the broker release from these ranges (kafka-python does) see
//! one consistent release. `DescribeAcls` is listed because a 2.8 broker without an
//! authorizer answers it (with `SECURITY_DISABLED`), and kafka-python needs its v2 to infer a
//! release of at least 2.5 (below 2.4 it refuses to send CreateTopics with `-1` defaults).

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
    row(ApiKey::Produce, 0, 8),
    row(ApiKey::Fetch, 0, 12),
    row(ApiKey::ListOffsets, 0, 6),
    // Kafka 2.8 stops at v11; v12 (topic ids in the request) is what librdkafka needs to
    // resolve a KIP-848 assignment, which names topics by id.
    row(ApiKey::Metadata, 0, 12),
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
    row(ApiKey::ApiVersions, 0, 3),
    row(ApiKey::CreateTopics, 0, 7),
    row(ApiKey::DeleteTopics, 0, 6),
    row(ApiKey::DeleteRecords, 0, 2),
    row(ApiKey::InitProducerId, 0, 4),
    row(ApiKey::DescribeAcls, 0, 2),
    row(ApiKey::DescribeConfigs, 0, 4),
    row(ApiKey::AlterConfigs, 0, 2),
    row(ApiKey::CreatePartitions, 0, 3),
    row(ApiKey::DeleteGroups, 0, 2),
    row(ApiKey::IncrementalAlterConfigs, 0, 1),
    row(ApiKey::OffsetDelete, 0, 0),
    row(ApiKey::DescribeCluster, 0, 0),
    row(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    row(ApiKey::ConsumerGroupDescribe, 0, 0),
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

    #[test]
    fn kafka_28_ranges() {
        assert_eq!(
            supported_range(ApiKey::ApiVersions).map(|r| r.max_version),
            Some(3)
        );
        assert_eq!(
            supported_range(ApiKey::Metadata).map(|r| r.max_version),
            Some(12)
        );
        assert!(is_supported(ApiKey::DescribeAcls, 2));
        assert!(is_supported(ApiKey::Produce, 8));
        assert!(!is_supported(ApiKey::Produce, 9));
        assert!(is_supported(ApiKey::Fetch, 12));
        assert!(!is_supported(ApiKey::Fetch, 13));
        assert!(!is_supported(ApiKey::ApiVersions, 4));
    }
}
