//! Resetting a group's committed offsets from outside the group, as kafka-consumer-groups.sh
//! `--reset-offsets` does: only while the group is inactive, each new offset kept inside the
//! partition's [earliest, latest] range (with Kafka's notice when it had to be moved), and
//! committed with one OffsetCommit carrying no generation and no member, which the
//! coordinator accepts only from outside a live group. `gregor consumer-groups` and the web
//! console's group page both reset through here.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Where a partition's committed offset goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The log start offset (`--to-earliest`).
    Earliest,
    /// The high watermark (`--to-latest`).
    Latest,
    /// This offset, moved into the partition's range (`--to-offset`).
    Offset(i64),
}

/// Why a group's offsets cannot be reset now: it has members (Kafka's message), or `None`.
pub fn refuse_active(group: &str, state: &str) -> Option<String> {
    (state != "Empty" && state != "Dead").then(|| {
        format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        )
    })
}

/// The new offset of `topic`-`partition` whose log runs from `earliest` to `latest`, and
/// Kafka's notice when a wanted offset was outside that range.
pub fn new_offset(
    to: ResetTo,
    topic: &str,
    partition: i32,
    earliest: i64,
    latest: i64,
) -> (i64, Option<String>) {
    match to {
        ResetTo::Earliest => (earliest, None),
        ResetTo::Latest => (latest, None),
        ResetTo::Offset(wanted) if wanted > latest => (
            latest,
            Some(format!(
                "New offset ({wanted}) is higher than latest offset for topic partition {topic}-{partition}. Value will be set to {latest}"
            )),
        ),
        ResetTo::Offset(wanted) if wanted < earliest => (
            earliest,
            Some(format!(
                "New offset ({wanted}) is lower than earliest offset for topic partition {topic}-{partition}. Value will be set to {earliest}"
            )),
        ),
        ResetTo::Offset(wanted) => (wanted, None),
    }
}

/// The OffsetCommit that writes `offsets` for `group` from outside it (generation -1, no
/// member id), one topic entry per topic.
pub fn commit_request(group: &str, offsets: &BTreeMap<(String, i32), i64>) -> OffsetCommitRequest {
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        topics.entry(topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset),
        );
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                        .with_partitions(ps)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_inactive_group_is_reset() {
        assert_eq!(refuse_active("g", "Empty"), None);
        assert_eq!(refuse_active("g", "Dead"), None);
        assert_eq!(
            refuse_active("g", "Stable").as_deref(),
            Some("Assignments can only be reset if the group 'g' is inactive, but the current state is Stable.")
        );
        assert!(refuse_active("g", "PreparingRebalance").is_some());
    }

    #[test]
    fn a_wanted_offset_is_kept_inside_the_log_with_kafkas_notice() {
        assert_eq!(new_offset(ResetTo::Earliest, "t", 0, 5, 9), (5, None));
        assert_eq!(new_offset(ResetTo::Latest, "t", 0, 5, 9), (9, None));
        assert_eq!(new_offset(ResetTo::Offset(7), "t", 0, 5, 9), (7, None));
        assert_eq!(new_offset(ResetTo::Offset(9), "t", 0, 5, 9), (9, None));
        let (high, notice) = new_offset(ResetTo::Offset(12), "t", 3, 5, 9);
        assert_eq!(high, 9);
        assert_eq!(
            notice.as_deref(),
            Some("New offset (12) is higher than latest offset for topic partition t-3. Value will be set to 9")
        );
        let (low, notice) = new_offset(ResetTo::Offset(1), "t", 3, 5, 9);
        assert_eq!(low, 5);
        assert!(notice.unwrap().contains("is lower than earliest offset"));
    }

    #[test]
    fn the_commit_comes_from_outside_the_group_one_entry_per_topic() {
        let offsets = BTreeMap::from([
            (("a".to_owned(), 0), 3),
            (("a".to_owned(), 1), 4),
            (("b".to_owned(), 0), 0),
        ]);
        let request = commit_request("g", &offsets);
        assert_eq!(request.group_id.0.as_str(), "g");
        assert_eq!(request.generation_id_or_member_epoch, -1);
        assert_eq!(request.member_id.as_str(), "");
        let topics: Vec<(&str, Vec<(i32, i64)>)> = request
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.0.as_str(),
                    t.partitions
                        .iter()
                        .map(|p| (p.partition_index, p.committed_offset))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            topics,
            vec![("a", vec![(0, 3), (1, 4)]), ("b", vec![(0, 0)])]
        );
    }
}
