//! Every znode path Kafka 2.8 uses, as functions (Kafka's `ZkData`).
//!
//! Topic names arrive as [`TopicName`], so a path can never contain `/` or `..` from a
//! caller's string.

use model::{BrokerId, TopicName};

/// `/brokers`.
pub fn brokers() -> &'static str {
    "/brokers"
}

/// `/brokers/ids`: one ephemeral child per live broker.
pub fn broker_ids() -> &'static str {
    "/brokers/ids"
}

/// `/brokers/ids/<id>`: a live broker's registration (ephemeral).
pub fn broker_id(id: BrokerId) -> String {
    format!("/brokers/ids/{id}")
}

/// `/brokers/seqid`: the counter for generated broker ids.
pub fn broker_seqid() -> &'static str {
    "/brokers/seqid"
}

/// `/brokers/topics`: one child per topic.
pub fn topics() -> &'static str {
    "/brokers/topics"
}

/// `/brokers/topics/<t>`: the topic's replica assignment.
pub fn topic(topic: &TopicName) -> String {
    format!("/brokers/topics/{topic}")
}

/// `/brokers/topics/<t>/partitions`.
pub fn topic_partitions(topic: &TopicName) -> String {
    format!("/brokers/topics/{topic}/partitions")
}

/// `/brokers/topics/<t>/partitions/<p>`.
pub fn topic_partition(topic: &TopicName, partition: i32) -> String {
    format!("/brokers/topics/{topic}/partitions/{partition}")
}

/// `/brokers/topics/<t>/partitions/<p>/state`: leader, ISR and epochs.
pub fn partition_state(topic: &TopicName, partition: i32) -> String {
    format!("/brokers/topics/{topic}/partitions/{partition}/state")
}

/// `/controller`: the active controller (ephemeral).
pub fn controller() -> &'static str {
    "/controller"
}

/// `/controller_epoch`: the number of controller elections so far.
pub fn controller_epoch() -> &'static str {
    "/controller_epoch"
}

/// `/config`.
pub fn config() -> &'static str {
    "/config"
}

/// `/config/topics`: one child per topic with config overrides.
pub fn config_topics() -> &'static str {
    "/config/topics"
}

/// `/config/topics/<t>`: the topic's config overrides.
pub fn config_topic(topic: &TopicName) -> String {
    format!("/config/topics/{topic}")
}

/// `/config/<entity_path>`: an entity's config (`clients/<c>`, `users/<u>`,
/// `users/<u>/clients/<c>`, names sanitized; `<default>` for the defaults).
pub fn config_entity(entity_path: &str) -> String {
    format!("/config/{entity_path}")
}

/// `/config/<entity type>` for each entity type Kafka 2.8 stores configs for.
pub fn config_entity_types() -> [&'static str; 4] {
    [
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
    ]
}

/// `users/<sanitized user>`: a user's entity path under `/config` (its SCRAM credentials and
/// quotas).
pub fn user_entity_path(user: &str) -> String {
    format!("users/{}", sanitize_entity_name(user))
}

/// A user or client name as Kafka's `Sanitizer.sanitize` writes it in a znode path: URL
/// encoded (UTF-8) as Java's `URLEncoder` does (letters, digits, `.`, `-`, `_` kept; `~` is
/// `%7E`), a space as `%20`, `*` as `%2A`.
pub fn sanitize_entity_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => out.push(byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The inverse of [`sanitize_entity_name`] (Kafka's `Sanitizer.desanitize`); `None` for text
/// that is not URL encoded UTF-8.
pub fn desanitize_entity_name(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `/config/changes`: sequential config change notifications.
pub fn config_changes() -> &'static str {
    "/config/changes"
}

/// The prefix of each persistent sequential notification, `/config/changes/config_change_`
/// (the store appends a 10-digit sequence number).
pub fn config_change_prefix() -> &'static str {
    "/config/changes/config_change_"
}

/// The sequence number of a notification child name (`config_change_0000000007` -> 7).
pub fn config_change_sequence(child_name: &str) -> Option<u64> {
    child_name.strip_prefix("config_change_")?.parse().ok()
}

/// `/admin`.
pub fn admin() -> &'static str {
    "/admin"
}

/// `/admin/delete_topics`: one child per topic marked for deletion.
pub fn delete_topics() -> &'static str {
    "/admin/delete_topics"
}

/// `/admin/delete_topics/<t>`: the deletion mark (empty data).
pub fn delete_topic(topic: &TopicName) -> String {
    format!("/admin/delete_topics/{topic}")
}

/// `/admin/reassign_partitions`: a pending partition reassignment.
pub fn reassign_partitions() -> &'static str {
    "/admin/reassign_partitions"
}

/// `/admin/preferred_replica_election`: a pending preferred leader election.
pub fn preferred_replica_election() -> &'static str {
    "/admin/preferred_replica_election"
}

/// `/isr_change_notification`: sequential ISR change notifications from brokers.
pub fn isr_change_notification() -> &'static str {
    "/isr_change_notification"
}

/// `/log_dir_event_notification`: sequential log directory failure notifications.
pub fn log_dir_event_notification() -> &'static str {
    "/log_dir_event_notification"
}

/// `/latest_producer_id_block`: the last producer id block handed out.
pub fn latest_producer_id_block() -> &'static str {
    "/latest_producer_id_block"
}

/// `/consumers`: the old (ZooKeeper-based) consumer groups.
pub fn consumers() -> &'static str {
    "/consumers"
}

/// A group id or member id as one znode name: URL encoded as [`sanitize_entity_name`] does,
/// with the names ZooKeeper refuses (`.` and `..`) written `%2E` by `%2E`. Any string is a
/// legal group id in Kafka (`a/b`, `..`, `a/../../brokers`); encoded, each stays one node
/// under `/consumers` and nothing is written outside it. Ids made of letters, digits, `.`,
/// `-` and `_` (other than `.` and `..`) are unchanged, so existing groups keep their nodes.
pub fn group_segment(id: &str) -> String {
    if id == "." || id == ".." {
        return "%2E".repeat(id.len());
    }
    sanitize_entity_name(id)
}

/// The id a [`group_segment`] names; `None` for a name that is not one (foreign data).
pub fn group_from_segment(segment: &str) -> Option<String> {
    desanitize_entity_name(segment)
}

/// `/consumers/<group>`.
pub fn consumer_group(group: &str) -> String {
    format!("/consumers/{}", group_segment(group))
}

/// `/consumers/<group>/ids`: one ephemeral child per group member.
pub fn consumer_ids(group: &str) -> String {
    format!("{}/ids", consumer_group(group))
}

/// `/consumers/<group>/ids/<member>`: a member's registration (ephemeral).
pub fn consumer_member(group: &str, member: &str) -> String {
    format!("{}/ids/{}", consumer_group(group), group_segment(member))
}

/// `/consumers/<group>/owners/<t>`.
pub fn consumer_owners(group: &str, topic: &TopicName) -> String {
    format!("{}/owners/{topic}", consumer_group(group))
}

/// `/consumers/<group>/owners/<t>/<p>`: the member that owns a partition (ephemeral).
pub fn consumer_owner(group: &str, topic: &TopicName, partition: i32) -> String {
    format!("{}/owners/{topic}/{partition}", consumer_group(group))
}

/// `/consumers/<group>/offsets/<t>`.
pub fn consumer_offsets(group: &str, topic: &TopicName) -> String {
    format!("{}/offsets/{topic}", consumer_group(group))
}

/// `/consumers/<group>/offsets/<t>/<p>`: a committed offset (decimal text).
pub fn consumer_offset(group: &str, topic: &TopicName, partition: i32) -> String {
    format!("{}/offsets/{topic}/{partition}", consumer_group(group))
}

/// `/cluster`.
pub fn cluster() -> &'static str {
    "/cluster"
}

/// `/cluster/id`: the cluster id.
pub fn cluster_id() -> &'static str {
    "/cluster/id"
}

/// The persistent paths Kafka 2.8 creates at broker startup (`ZkData.PersistentZkPaths`),
/// parents before children.
pub fn persistent_paths() -> Vec<&'static str> {
    let mut paths = vec![
        consumers(),
        broker_ids(),
        topics(),
        config_changes(),
        delete_topics(),
        broker_seqid(),
        isr_change_notification(),
        latest_producer_id_block(),
        log_dir_event_notification(),
    ];
    paths.extend(config_entity_types());
    paths
}

#[cfg(test)]
mod tests {

    #[test]
    fn entity_names_sanitize_as_kafka() {
        assert_eq!(sanitize_entity_name("alice"), "alice");
        assert_eq!(
            sanitize_entity_name("CN=a b,O=x*~"),
            "CN%3Da%20b%2CO%3Dx%2A%7E"
        );
        assert_eq!(sanitize_entity_name("é"), "%C3%A9");
        for name in ["alice", "CN=a b,O=x*~", "é", "%"] {
            assert_eq!(
                desanitize_entity_name(&sanitize_entity_name(name)).as_deref(),
                Some(name)
            );
        }
        assert_eq!(desanitize_entity_name("a%2"), None);
        assert_eq!(
            config_entity(&user_entity_path("a b")),
            "/config/users/a%20b"
        );
    }
    use super::*;

    fn t(name: &str) -> TopicName {
        name.parse().unwrap()
    }

    #[test]
    fn topic_paths() {
        let tp = t("orders");
        assert_eq!(topic(&tp), "/brokers/topics/orders");
        assert_eq!(topic_partitions(&tp), "/brokers/topics/orders/partitions");
        assert_eq!(
            topic_partition(&tp, 2),
            "/brokers/topics/orders/partitions/2"
        );
        assert_eq!(
            partition_state(&tp, 2),
            "/brokers/topics/orders/partitions/2/state"
        );
        assert_eq!(config_topic(&tp), "/config/topics/orders");
        assert_eq!(delete_topic(&tp), "/admin/delete_topics/orders");
        assert_eq!(broker_id(3), "/brokers/ids/3");
    }

    #[test]
    fn consumer_paths() {
        let tp = t("orders");
        assert_eq!(consumer_member("g", "m1"), "/consumers/g/ids/m1");
        assert_eq!(consumer_owner("g", &tp, 0), "/consumers/g/owners/orders/0");
        assert_eq!(
            consumer_offset("g", &tp, 0),
            "/consumers/g/offsets/orders/0"
        );
    }

    #[test]
    fn config_change_names() {
        assert_eq!(config_change_sequence("config_change_0000000007"), Some(7));
        assert_eq!(config_change_sequence("other_0000000007"), None);
        let child = "config_change_0000000012";
        assert_eq!(
            format!("{}/{child}", config_changes()),
            format!("{}0000000012", config_change_prefix())
        );
    }

    #[test]
    fn persistent_paths_are_absolute_and_parents_first() {
        let paths = persistent_paths();
        assert_eq!(paths.len(), 13);
        for (i, p) in paths.iter().enumerate() {
            assert!(p.starts_with('/') && !p.ends_with('/'), "{p}");
            for later in &paths[i + 1..] {
                assert!(
                    !p.starts_with(&format!("{later}/")),
                    "{later} must come before its child {p}"
                );
            }
        }
        assert!(paths.contains(&"/config/topics"));
        assert!(paths.contains(&"/admin/delete_topics"));
    }
}
