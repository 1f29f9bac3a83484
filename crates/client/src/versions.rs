//! The request versions this client knows how to fill.
//!
//! [`Connection::send`](crate::Connection::send) picks the highest version inside both this
//! range and the broker's ApiVersions answer. For every API in Gregor's own table
//! ([`protocol::SUPPORTED_APIS`], Kafka 3.9's ZooKeeper-mode ranges) the client stays inside that table, so a
//! Gregor client never sends a version a Gregor broker would refuse; any other API may be sent
//! at any version the `kafka-protocol` crate can encode.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;

/// The ApiVersions version tried first on connect (v3 adds the client software name and
/// flexible fields); a broker that refuses it gets v0.
pub const API_VERSIONS_PREFERRED: i16 = 3;

/// The last Fetch version that names topics (v13+ name them by id).
pub const FETCH_BY_NAME_MAX: i16 = 12;

/// The versions of `api` this client can fill, before intersecting with the broker's.
pub fn client_versions(api: ApiKey) -> VersionRange {
    let mut known = api.valid_versions();
    if api == ApiKey::Fetch {
        // Requests built by name: v13+ name topics by id, so negotiation stops at v12, as
        // Kafka's Java client does when it lacks topic ids (send_version reaches v13+).
        known.max = known.max.min(FETCH_BY_NAME_MAX);
    }
    match protocol::api_versions::supported_range(api) {
        Some(range) => VersionRange {
            min: range.min_version.max(known.min),
            max: range.max_version.min(known.max),
        },
        None => known,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_follow_the_table_and_never_exceed_the_codec() {
        assert_eq!(
            client_versions(ApiKey::CreateTopics),
            VersionRange { min: 0, max: 7 }
        );
        assert_eq!(client_versions(ApiKey::LeaderAndIsr).max, 7);
        assert_eq!(client_versions(ApiKey::Fetch).max, FETCH_BY_NAME_MAX);
        for api in ApiKey::iter() {
            let range = client_versions(api);
            assert!(!range.is_empty(), "{api:?}");
            assert!(range.max <= api.valid_versions().max, "{api:?}");
        }
    }
}
