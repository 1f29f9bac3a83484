//! Issue 14: the ZooKeeper-JSON parsers (`znodes::json`, the formats Kafka writes in
//! ZooKeeper) fuzzed. Seeds are the JSON Kafka writes for each znode (a topic assignment of
//! 20,000 partitions among them, ~0.5 MB); each case mutates one as JSON (any value replaced
//! by nulls, extreme numbers, odd strings, deep or long arrays and objects) and then perhaps
//! as bytes, and parses the result as EVERY znode type, then runs the methods that read
//! parsed fields (endpoints, entity paths), the plain-text parsers and the name decoders.
//! Nothing may panic; each unmutated seed parses as its own type.
//!
//! CI runs a smoke from `PROPTEST_RNG_SEED`; the long run is `cargo test -p znodes --test
//! fuzz_json -- --ignored` (docs/fuzzing.md).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;
use znodes::json::*;
use znodes::security::ControlPlaneSecretZNode;

const SMOKE_CASES: u32 = 300;
const LONG_CASES: u32 = 20_000;

fn run<S: Strategy>(cases: u32, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    if let Err(err) = TestRunner::new(config).run(&strategy, check) {
        panic!(
            "{err}\nPROPTEST_RNG_SEED={}",
            std::env::var("PROPTEST_RNG_SEED").unwrap_or_else(|_| "(unset: random)".into())
        );
    }
}

/// (name, JSON as Kafka writes it).
fn seeds() -> Vec<(&'static str, String)> {
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
        ("controller", r#"{"version":1,"brokerid":1,"timestamp":"1633072800000"}"#.to_owned()),
        ("config", r#"{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}"#.to_owned()),
        ("change", r#"{"version":2,"entity_path":"users/alice/clients/app"}"#.to_owned()),
        ("change", r#"{"version":1,"entity_type":"topics","entity_name":"t"}"#.to_owned()),
        ("reassign", r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}"#.to_owned()),
        ("election", r#"{"version":1,"partitions":[{"topic":"t","partition":0}]}"#.to_owned()),
        ("consumer", r#"{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1633072800000"}"#.to_owned()),
        ("cluster", r#"{"version":"1","id":"Zjaq1Hq9RXuZQqVbbAHtaA"}"#.to_owned()),
        ("secret", r#"{"version":1,"secret":"c2VjcmV0"}"#.to_owned()),
    ]
}

/// Parses `bytes` as every znode type and runs what reads the parsed fields.
fn parse_everything(bytes: &[u8]) {
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
    let _ = ControlPlaneSecretZNode::from_json_bytes(bytes);
    let _ = ControllerEpochZNode::from_bytes(bytes);
    let _ = decode_consumer_offset(bytes);
    let text = String::from_utf8_lossy(bytes);
    let _ = znodes::paths::desanitize_entity_name(&text);
    let _ = znodes::paths::config_change_sequence(&text);
}

fn is_own_type(name: &str, bytes: &[u8]) -> bool {
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
        "secret" => ControlPlaneSecretZNode::from_json_bytes(bytes).is_ok(),
        _ => false,
    }
}

fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            Just(i64::MAX),
            Just(i64::MIN),
            Just(-1i64),
            Just(0),
            Just(i64::from(i32::MAX) + 1),
            any::<i64>()
        ]
        .prop_map(|n| serde_json::json!(n)),
        Just(serde_json::json!(u64::MAX)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just(String::new()),
            Just("PLAINTEXT://:99999".to_owned()),
            Just("://".to_owned()),
            Just("X://[::1".to_owned()),
            Just("-1".to_owned()),
            Just("99999999999999999999".to_owned()),
            Just("%ZZ%".to_owned()),
            Just("AAAAAAAAAAAAAAAAAAAAAA==".to_owned()),
            "\\PC{0,40}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 2_000, 50, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..50).prop_map(Value::Array),
            (0usize..5_000, any::<i32>())
                .prop_map(|(n, v)| Value::Array(vec![serde_json::json!(v); n])),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("0".to_owned()),
                    Just("-1".to_owned()),
                    "[a-z_0-9]{0,12}"
                ],
                inner,
                0..10
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Replaces the `target`-th value (depth first) of `value` with `new`.
fn replace_nth(value: &mut Value, target: &mut usize, new: &Value) -> bool {
    if *target == 0 {
        *value = new.clone();
        return true;
    }
    *target -= 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| replace_nth(v, target, new)),
        Value::Object(map) => map.values_mut().any(|v| replace_nth(v, target, new)),
        _ => false,
    }
}

fn json_cases(cases: u32) {
    let strategy = (
        any::<prop::sample::Index>(),
        proptest::collection::vec((0usize..64, odd_value()), 0..4),
        proptest::option::of((any::<u32>(), proptest::collection::vec(any::<u8>(), 1..8))),
        any::<bool>(),
    );
    let seeds = seeds();
    run(
        cases,
        strategy,
        |(pick, replacements, byte_change, add_key)| {
            let (name, text) = pick.get(&seeds);
            if replacements.is_empty() && byte_change.is_none() && !add_key {
                prop_assert!(
                    is_own_type(name, text.as_bytes()),
                    "seed {name} does not parse"
                );
            }
            let mut value: Value = serde_json::from_str(text).unwrap();
            for (n, new) in &replacements {
                let mut target = *n;
                replace_nth(&mut value, &mut target, new);
            }
            if add_key {
                if let Value::Object(map) = &mut value {
                    map.insert("unknown_field".into(), serde_json::json!([1, {"a": null}]));
                }
            }
            let mut bytes = serde_json::to_vec(&value).unwrap();
            if let Some((at, new)) = &byte_change {
                let i = ((u64::from(*at) * bytes.len() as u64) >> 32) as usize;
                let end = (i + new.len()).min(bytes.len());
                bytes[i..end].copy_from_slice(&new[..end - i]);
            }
            parse_everything(&bytes);
            Ok(())
        },
    );
}

#[test]
fn kafka_znode_json_mutated() {
    json_cases(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn kafka_znode_json_mutated_long() {
    json_cases(LONG_CASES);
}

#[test]
fn arbitrary_bytes() {
    run(
        SMOKE_CASES,
        proptest::collection::vec(any::<u8>(), 0..4096),
        |bytes| {
            parse_everything(&bytes);
            Ok(())
        },
    );
}
