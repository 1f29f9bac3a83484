//! The "consumer" embedded protocol of classic groups: the subscription a member sends in
//! JoinGroup's protocol metadata and the assignment the leader sends in SyncGroup.
//!
//! Both start with an `i16` version followed by the message body (Kafka's `ConsumerProtocol`).
//! Newer versions only append fields, so a version above what `kafka-protocol` knows is read at
//! the highest known one, as Kafka does.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The protocol type of Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

const HIGHEST_KNOWN_VERSION: i16 = 3;

/// The topics a member subscribes to, read from its JoinGroup protocol metadata, or `None`
/// if the bytes are not a consumer subscription.
pub fn subscribed_topics(metadata: &[u8]) -> Option<BTreeSet<String>> {
    let (version, mut body) = split_version(metadata)?;
    let subscription = ConsumerProtocolSubscription::decode(&mut body, version).ok()?;
    Some(
        subscription
            .topics
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect(),
    )
}

/// The partitions in a SyncGroup assignment, topic -> partitions, or `None` if the bytes are
/// not a consumer assignment. Empty bytes (a member the leader left out) are no partitions.
pub fn assigned_partitions(assignment: &[u8]) -> Option<BTreeMap<String, Vec<i32>>> {
    if assignment.is_empty() {
        return Some(BTreeMap::new());
    }
    let (version, mut body) = split_version(assignment)?;
    let decoded = ConsumerProtocolAssignment::decode(&mut body, version).ok()?;
    let mut result: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for topic in decoded.assigned_partitions {
        result
            .entry(topic.topic.0.as_str().to_owned())
            .or_default()
            .extend(topic.partitions);
    }
    Some(result)
}

/// Encodes a version-0 consumer assignment (what DescribeGroups shows for KIP-848 members).
pub fn encode_assignment(partitions: &BTreeMap<String, Vec<i32>>) -> Bytes {
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        partitions
            .iter()
            .map(|(topic, ps)| {
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(ps.clone())
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    assignment
        .encode(&mut buf, 0)
        .expect("a version-0 assignment always encodes");
    buf.freeze()
}

/// Encodes a version-0 consumer subscription (used by tests and by DescribeGroups for KIP-848
/// members).
pub fn encode_subscription(topics: &BTreeSet<String>) -> Bytes {
    let subscription = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.clone()))
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    subscription
        .encode(&mut buf, 0)
        .expect("a version-0 subscription always encodes");
    buf.freeze()
}

fn split_version(bytes: &[u8]) -> Option<(i16, Bytes)> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    Some((version.min(HIGHEST_KNOWN_VERSION), buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_round_trip() {
        let topics: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        assert_eq!(
            subscribed_topics(&encode_subscription(&topics)),
            Some(topics)
        );
        assert_eq!(subscribed_topics(b"\x00"), None);
        assert_eq!(subscribed_topics(b"\xff\xff"), None);
    }

    #[test]
    fn assignment_round_trip() {
        let parts: BTreeMap<String, Vec<i32>> = [("t".to_string(), vec![0, 2])].into();
        assert_eq!(assigned_partitions(&encode_assignment(&parts)), Some(parts));
        assert_eq!(assigned_partitions(b""), Some(BTreeMap::new()));
    }
}
