//! Exact-string round trips against the SPEC's znode examples (section 2 and 6), and
//! lenient reading of older and extended versions.

use std::collections::BTreeMap;

use model::{LeaderRecoveryState, TopicId};
use znodes::json::*;

/// Parses `text`, checks the value, and checks that writing it back gives `text` exactly.
fn round_trip<T: ZnodeJson + PartialEq + std::fmt::Debug>(text: &str, expected: &T) {
    let parsed = T::from_json_bytes(text.as_bytes()).unwrap();
    assert_eq!(&parsed, expected);
    assert_eq!(String::from_utf8(expected.to_json_bytes()).unwrap(), text);
}

#[test]
fn broker_registration() {
    let text = r#"{"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,"rack":"r1","timestamp":"1633072800000"}"#;
    let expected = BrokerRegistration::plaintext("h", 9092, Some("r1".into()), 1_633_072_800_000);
    round_trip(text, &expected);
    assert_eq!(
        expected.parsed_endpoints(),
        vec![("PLAINTEXT".into(), "h".into(), 9092)]
    );
}

#[test]
fn broker_registration_without_rack_omits_it() {
    let reg = BrokerRegistration::plaintext("h", 9092, None, 1);
    let text = String::from_utf8(reg.to_json_bytes()).unwrap();
    assert!(!text.contains("rack"), "{text}");
    // Kafka's own v5 output: hash-map field order, a features object, no rack.
    let kafka = r#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1633072800000"}"#;
    let parsed = BrokerRegistration::from_json_bytes(kafka.as_bytes()).unwrap();
    assert_eq!(parsed.rack, None);
    assert_eq!(parsed.features, Some(BTreeMap::new()));
    assert_eq!(parsed.timestamp, 1_633_072_800_000);
    // A null rack and a numeric timestamp are read too.
    let older = r#"{"version":4,"host":null,"port":-1,"endpoints":["SSL://a:9093"],"jmx_port":9999,"rack":null,"timestamp":5}"#;
    let parsed = BrokerRegistration::from_json_bytes(older.as_bytes()).unwrap();
    assert_eq!(
        (parsed.host, parsed.port, parsed.rack, parsed.timestamp),
        (None, -1, None, 5)
    );
}

#[test]
fn topic_assignment() {
    let text = r#"{"version":3,"topic_id":"p2LFWddWSZqKRRB44d1UgA","partitions":{"0":[3,1,2],"1":[1,2,0]},"adding_replicas":{},"removing_replicas":{}}"#;
    let id: TopicId = "p2LFWddWSZqKRRB44d1UgA".parse().unwrap();
    let expected =
        TopicAssignment::new(id, BTreeMap::from([(0, vec![3, 1, 2]), (1, vec![1, 2, 0])]));
    round_trip(text, &expected);
}

#[test]
fn topic_assignment_partition_keys_are_numeric_order() {
    let partitions = (0..12).map(|p| (p, vec![p % 3])).collect();
    let text =
        String::from_utf8(TopicAssignment::new(TopicId::ZERO, partitions).to_json_bytes()).unwrap();
    assert!(text.contains(r#""9":[0],"10":[1],"11":[2]}"#), "{text}");
}

#[test]
fn topic_assignment_older_versions() {
    let v1 = r#"{"version":1,"partitions":{"0":[0,1],"1":[1,0]}}"#;
    let parsed = TopicAssignment::from_json_bytes(v1.as_bytes()).unwrap();
    assert_eq!(parsed.version, 1);
    assert_eq!(parsed.topic_id, None);
    assert!(parsed.adding_replicas.is_empty() && parsed.removing_replicas.is_empty());
    assert_eq!(parsed.partitions[&1], vec![1, 0]);
    // Writing an id-less assignment leaves topic_id out rather than writing null.
    assert_eq!(
        String::from_utf8(parsed.to_json_bytes()).unwrap(),
        r#"{"version":1,"partitions":{"0":[0,1],"1":[1,0]},"adding_replicas":{},"removing_replicas":{}}"#
    );
    let v2 = r#"{"version":2,"partitions":{"0":[0,1]},"adding_replicas":{"0":[1]},"removing_replicas":{},"extra":true}"#;
    let parsed = TopicAssignment::from_json_bytes(v2.as_bytes()).unwrap();
    assert_eq!(parsed.adding_replicas[&0], vec![1]);
}

#[test]
fn partition_state() {
    let text = r#"{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":0,"isr":[3,0,1]}"#;
    round_trip(text, &PartitionStateZNode::new(1, 3, 0, vec![3, 0, 1]));
    // Another field order, an explicit RECOVERED and an unknown field read the same.
    let other = r#"{"version":1,"leader":-1,"leader_epoch":4,"isr":[],"controller_epoch":2,"leader_recovery_state":0,"future":true}"#;
    assert_eq!(
        PartitionStateZNode::from_json_bytes(other.as_bytes()).unwrap(),
        PartitionStateZNode::new(2, -1, 4, vec![])
    );
}

#[test]
fn partition_state_recovering_is_kafka_3_9s() {
    // Kafka 3.9's TopicPartitionStateZNode.encode after an unclean election: the field is
    // added only when RECOVERING, in the order its Scala 2.13 HashMap iterates the keys.
    let text = r#"{"controller_epoch":3,"leader":1,"version":1,"leader_recovery_state":1,"leader_epoch":5,"isr":[1]}"#;
    let recovering = PartitionStateZNode::new(3, 1, 5, vec![1])
        .with_leader_recovery_state(LeaderRecoveryState::Recovering);
    round_trip(text, &recovering);
    // RECOVERED is left out, as Kafka writes it (and as Kafka 2.8 wrote every state).
    let recovered = r#"{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":5,"isr":[1,0]}"#;
    round_trip(recovered, &PartitionStateZNode::new(3, 1, 5, vec![1, 0]));
    // Kafka's LeaderRecoveryState.of refuses any other value.
    for bad in ["2", "-1", "\"1\"", "300"] {
        let text = format!(
            r#"{{"controller_epoch":3,"leader":1,"version":1,"leader_recovery_state":{bad},"leader_epoch":5,"isr":[1]}}"#
        );
        let err = PartitionStateZNode::from_json_bytes(text.as_bytes()).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid partition state JSON:"),
            "{bad}: {err}"
        );
    }
    let err = PartitionStateZNode::from_json_bytes(
        br#"{"controller_epoch":3,"leader":1,"version":1,"leader_recovery_state":2,"leader_epoch":5,"isr":[1]}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("leader_recovery_state 2 is not a leader recovery state"),
        "{err}"
    );
}

#[test]
fn controller() {
    round_trip(
        r#"{"version":1,"brokerid":0,"timestamp":"1633072800000"}"#,
        &ControllerZNode::new(0, 1_633_072_800_000),
    );
}

#[test]
fn controller_epoch_is_plain_text() {
    assert_eq!(ControllerEpochZNode(1).to_bytes(), b"1");
    assert_eq!(
        ControllerEpochZNode::from_bytes(b"17\n").unwrap(),
        ControllerEpochZNode(17)
    );
    let err = ControllerEpochZNode::from_bytes(b"x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid controller epoch: 'x' is not a number"
    );
}

#[test]
fn topic_config() {
    let text = r#"{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"600001"}}"#;
    let config = BTreeMap::from([
        ("retention.ms".into(), "600001".into()),
        ("cleanup.policy".into(), "compact".into()),
    ]);
    round_trip(text, &TopicConfigZNode::new(config));
    round_trip(
        r#"{"version":1,"config":{}}"#,
        &TopicConfigZNode::new(BTreeMap::new()),
    );
}

#[test]
fn config_change_notification() {
    let topic = "t".parse().unwrap();
    round_trip(
        r#"{"version":2,"entity_path":"topics/t"}"#,
        &ConfigChangeNotification::topic(&topic),
    );
    // Version 1 (entity_type + entity_name) is still read.
    let v1 = ConfigChangeNotification::from_json_bytes(
        br#"{"version":1,"entity_type":"clients","entity_name":"app"}"#,
    )
    .unwrap();
    assert_eq!(v1.changed_entity_path().as_deref(), Some("clients/app"));
    assert_eq!(
        ConfigChangeNotification::entity("users/alice/clients/app".into())
            .changed_entity_path()
            .as_deref(),
        Some("users/alice/clients/app")
    );
}

#[test]
fn reassign_partitions() {
    let text = r#"{"version":1,"partitions":[{"topic":"A","partition":1,"replicas":[0,2,3]}]}"#;
    let expected = ReassignPartitions {
        version: 1,
        partitions: vec![ReassignmentEntry {
            topic: "A".into(),
            partition: 1,
            replicas: vec![0, 2, 3],
        }],
    };
    round_trip(text, &expected);
    // kafka-reassign-partitions.sh also writes log_dirs; it is tolerated.
    let with_dirs = r#"{"version":1,"partitions":[{"topic":"A","partition":1,"replicas":[0,2,3],"log_dirs":["any","any","any"]}]}"#;
    assert_eq!(
        ReassignPartitions::from_json_bytes(with_dirs.as_bytes()).unwrap(),
        expected
    );
}

#[test]
fn preferred_replica_election() {
    let text = r#"{"version":1,"partitions":[{"topic":"B","partition":0}]}"#;
    let expected = PreferredReplicaElection {
        version: 1,
        partitions: vec![ElectionEntry {
            topic: "B".into(),
            partition: 0,
        }],
    };
    round_trip(text, &expected);
}

#[test]
fn consumer_member() {
    let text = r#"{"version":1,"subscription":{"t":1},"pattern":"white_list","timestamp":"1633072800000"}"#;
    let expected = ConsumerMemberZNode {
        version: 1,
        subscription: BTreeMap::from([("t".into(), 1)]),
        pattern: "white_list".into(),
        timestamp: 1_633_072_800_000,
    };
    round_trip(text, &expected);
}

#[test]
fn consumer_offset_is_plain_text() {
    assert_eq!(encode_consumer_offset(42), b"42");
    assert_eq!(decode_consumer_offset(b" 42 ").unwrap(), 42);
    assert!(decode_consumer_offset(b"").is_err());
}

#[test]
fn cluster_id() {
    round_trip(
        r#"{"version":"1","id":"Pn8kXs2oQm6o2i7Ow3kQ2g"}"#,
        &ClusterIdZNode::new("Pn8kXs2oQm6o2i7Ow3kQ2g"),
    );
}

#[test]
fn producer_id_block_is_kafkas() {
    // Kafka's ProducerIdBlockZNode: the bounds are decimal strings.
    round_trip(
        r#"{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}"#,
        &ProducerIdBlockZNode::new(2, 1000, 1999),
    );
    // A bare number reads too.
    let read = ProducerIdBlockZNode::from_json_bytes(
        br#"{"version":1,"broker":0,"block_start":0,"block_end":999}"#,
    )
    .unwrap();
    assert_eq!(read, ProducerIdBlockZNode::new(0, 0, 999));
    let err = ProducerIdBlockZNode::from_json_bytes(br#"{"version":1,"broker":0}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid producer id block JSON:"),
        "{err}"
    );
}

#[test]
fn malformed_json_names_the_format() {
    let err = TopicAssignment::from_json_bytes(b"{\"version\":3").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid topic assignment JSON:"),
        "{err}"
    );
    let err =
        TopicAssignment::from_json_bytes(br#"{"version":3,"topic_id":"bad","partitions":{}}"#)
            .unwrap_err();
    assert!(err.to_string().contains("invalid topic id"), "{err}");
}
