//! Issue 14: the ZooKeeper-JSON parsers (`znodes::json`, the formats Kafka writes in
//! ZooKeeper) fuzzed. Seeds are the JSON Kafka writes for each znode (a topic assignment of
//! 20,000 partitions among them, ~0.5 MB); each case mutates one as JSON (any value replaced
//! by nulls, extreme numbers, odd strings, deep or long arrays and objects) and then perhaps
//! as bytes, and parses the result as EVERY znode type, then runs the methods that read
//! parsed fields (endpoints, entity paths), the plain-text parsers and the name decoders.
//! Nothing may panic; each unmutated seed parses as its own type.
//!
//! CI runs a smoke from `PROPTEST_RNG_SEED`; the long run is `cargo test -p znodes --test
//! fuzz_json -- --ignored` (docs/fuzzing.md). The check and the seeds live in
//! `znodes::fuzzing`, shared with the libFuzzer target `znode_json` (fuzz/).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;
use znodes::fuzzing::{is_own_type, parse_everything, seeds};

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

/// Writes the seed corpus of the libFuzzer target `znode_json` (fuzz/, docs/fuzzing.md): the
/// JSON Kafka writes for each znode type, into the directory `GREGOR_FUZZ_CORPUS`.
#[test]
#[ignore = "writes a fuzz corpus; see docs/fuzzing.md"]
fn write_seed_corpus() {
    let dir = std::env::var("GREGOR_FUZZ_CORPUS").expect("GREGOR_FUZZ_CORPUS names the corpus dir");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (name, text)) in seeds().iter().enumerate() {
        assert!(is_own_type(name, text.as_bytes()), "seed {name}");
        std::fs::write(format!("{dir}/{i:02}-{name}"), text).unwrap();
    }
}
