//! Shared by the fuzz targets (issue 14): the structured proptest runs in `tests/fuzz_json.rs`
//! and the coverage-guided libFuzzer target in `fuzz/` (outside the workspace; see
//! docs/fuzzing.md) call the same check on the same seeds. Not part of the crate's API.

use serde_json::Value;

use crate::json::*;
use crate::security::ControlPlaneSecretZNode;

/// (name, JSON as Kafka writes it) for each znode type: the seeds.
pub fn seeds() -> Vec<(&'static str, String)> {
    let big_partitions: serde_json::Map<String, Value> = (0..20_000)
        .map(|p| {
            (
                p.to_string(),
                serde_json::json!([p % 7, (p + 1) % 7, (p + 2) % 7]),
            )
        })
        .collect();
    vec![
        ("broker", r#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},"endpoints":["PLAINTEXT://127.0.0.1:9092","SSL://[::1]:9093"],"jmx_port":-1,"port":9092,"host":"127.0.0.1","version":5,"timestamp":"1633072800000","rack":"r1"}"#.to_owned()),
        ("topic", r#"{"version":3,"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"Zjaq1Hq9RXuZQqVbbAHtaA","adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}"#.to_owned()),
        ("topic", serde_json::json!({"version": 2, "partitions": big_partitions}).to_string()),
        ("partition", r#"{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}"#.to_owned()),
        ("partition", r#"{"controller_epoch":3,"leader":2,"version":1,"leader_recovery_state":1,"leader_epoch":8,"isr":[2]}"#.to_owned()),
        ("controller", r#"{"version":1,"brokerid":1,"timestamp":"1633072800000"}"#.to_owned()),
        ("config", r#"{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}"#.to_owned()),
        ("change", r#"{"version":2,"entity_path":"users/alice/clients/app"}"#.to_owned()),
        ("change", r#"{"version":1,"entity_type":"topics","entity_name":"t"}"#.to_owned()),
        ("reassign", r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}"#.to_owned()),
        ("election", r#"{"version":1,"partitions":[{"topic":"t","partition":0}]}"#.to_owned()),
        ("consumer", r#"{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1633072800000"}"#.to_owned()),
        ("cluster", r#"{"version":"1","id":"Zjaq1Hq9RXuZQqVbbAHtaA"}"#.to_owned()),
        ("secret", r#"{"version":1,"secret":"c2VjcmV0"}"#.to_owned()),
        ("producer_id_block", r#"{"version":1,"broker":0,"block_start":"0","block_end":"999"}"#.to_owned()),
    ]
}

/// The check: parses `bytes` as every znode type and runs what reads the parsed fields, the
/// plain-text parsers and the entity-name decoders; none may panic.
pub fn parse_everything(bytes: &[u8]) {
    if let Ok(b) = BrokerRegistration::from_json_bytes(bytes) {
        let _ = b.parsed_endpoints();
    }
    let _ = TopicAssignment::from_json_bytes(bytes);
    let _ = PartitionStateZNode::from_json_bytes(bytes);
    let _ = ControllerZNode::from_json_bytes(bytes);
    let _ = TopicConfigZNode::from_json_bytes(bytes);
    if let Ok(c) = ConfigChangeNotification::from_json_bytes(bytes) {
        let _ = c.changed_entity_path();
    }
    let _ = ReassignPartitions::from_json_bytes(bytes);
    let _ = PreferredReplicaElection::from_json_bytes(bytes);
    let _ = ConsumerMemberZNode::from_json_bytes(bytes);
    let _ = ClusterIdZNode::from_json_bytes(bytes);
    let _ = ProducerIdBlockZNode::from_json_bytes(bytes);
    let _ = ControlPlaneSecretZNode::from_json_bytes(bytes);
    let _ = ControllerEpochZNode::from_bytes(bytes);
    let _ = decode_consumer_offset(bytes);
    let text = String::from_utf8_lossy(bytes);
    let _ = crate::paths::desanitize_entity_name(&text);
    let _ = crate::paths::config_change_sequence(&text);
}

pub fn is_own_type(name: &str, bytes: &[u8]) -> bool {
    match name {
        "broker" => BrokerRegistration::from_json_bytes(bytes).is_ok(),
        "topic" => TopicAssignment::from_json_bytes(bytes).is_ok(),
        "partition" => PartitionStateZNode::from_json_bytes(bytes).is_ok(),
        "controller" => ControllerZNode::from_json_bytes(bytes).is_ok(),
        "config" => TopicConfigZNode::from_json_bytes(bytes).is_ok(),
        "change" => ConfigChangeNotification::from_json_bytes(bytes).is_ok(),
        "reassign" => ReassignPartitions::from_json_bytes(bytes).is_ok(),
        "election" => PreferredReplicaElection::from_json_bytes(bytes).is_ok(),
        "consumer" => ConsumerMemberZNode::from_json_bytes(bytes).is_ok(),
        "cluster" => ClusterIdZNode::from_json_bytes(bytes).is_ok(),
        "producer_id_block" => ProducerIdBlockZNode::from_json_bytes(bytes).is_ok(),
        "secret" => ControlPlaneSecretZNode::from_json_bytes(bytes).is_ok(),
        _ => false,
    }
}
