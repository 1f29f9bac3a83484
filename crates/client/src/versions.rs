//! The request versions this client knows how to fill.
//!
//! [`Connection::send`](crate::Connection::send) picks the highest version inside both this
//! table and the broker's ApiVersions answer. The caps follow Kafka 2.8's clients, so a request
//! built against Kafka 2.8's field set always encodes; an API missing here may be sent at any
//! version the `kafka-protocol` crate knows.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;

/// The ApiVersions version tried first on connect (v3 adds the client software name and
/// flexible fields); a broker that refuses it gets v0.
pub const API_VERSIONS_PREFERRED: i16 = 3;

/// The versions of `api` this client can fill, before intersecting with the broker's.
pub fn client_versions(api: ApiKey) -> VersionRange {
    let max = match api {
        ApiKey::ApiVersions => API_VERSIONS_PREFERRED,
        ApiKey::Metadata => 11,
        ApiKey::CreateTopics => 7,
        ApiKey::DeleteTopics => 6,
        ApiKey::CreatePartitions => 3,
        ApiKey::DescribeConfigs => 4,
        ApiKey::AlterConfigs => 2,
        ApiKey::IncrementalAlterConfigs => 1,
        ApiKey::DescribeCluster => 0,
        ApiKey::LeaderAndIsr => 5,
        ApiKey::UpdateMetadata => 7,
        ApiKey::StopReplica => 3,
        other => other.valid_versions().max,
    };
    let known = api.valid_versions();
    VersionRange {
        min: known.min,
        max: max.min(known.max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_follow_kafka_2_8_and_never_exceed_the_codec() {
        assert_eq!(
            client_versions(ApiKey::CreateTopics),
            VersionRange { min: 0, max: 7 }
        );
        assert_eq!(client_versions(ApiKey::LeaderAndIsr).max, 5);
        for api in ApiKey::iter() {
            let range = client_versions(api);
            assert!(!range.is_empty(), "{api:?}");
            assert!(range.max <= api.valid_versions().max, "{api:?}");
        }
    }
}
