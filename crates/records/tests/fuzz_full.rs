//! Issue 14: the record-batch validator fuzzed with full-size inputs. Valid record sets (one
//! to a few v2 batches of up to ~1 MiB, every codec, keys, headers, idempotent and
//! transactional producers) are built, checked to pass, then mutated (bytes overwritten,
//! extreme ints planted in the header fields, cut, bytes inserted, magic changed to the
//! legacy formats) and given to `validate_record_set` and `validate_produce` under random
//! topic policies. Neither may panic; a refusal names a Kafka error.
//!
//! CI runs a smoke from `PROPTEST_RNG_SEED`; the long run is `cargo test -p records --test
//! fuzz_full -- --ignored` (docs/fuzzing.md). The check and the set builder live in
//! `records::fuzzing`, shared with the libFuzzer target `record_batch` (fuzz/).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use records::fuzzing::{build, check_record_set, policy, BatchPlan};
use records::{validate_record_set, ProducePolicy};

const SMOKE_CASES: u32 = 200;
const LONG_CASES: u32 = 10_000;

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

fn batch_plan() -> impl Strategy<Value = BatchPlan> {
    (
        0u8..5,
        proptest::option::of((0i64..1000, 0i16..5, 0i32..1000, any::<bool>())),
        proptest::collection::vec(
            (
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
                prop_oneof![4 => 0usize..200, 1 => 200usize..300_000],
                any::<u8>(),
                0u8..3,
            ),
            1..40,
        ),
    )
        .prop_map(|(codec, producer, records)| BatchPlan {
            codec,
            producer,
            records,
        })
}

#[derive(Debug, Clone)]
enum Mutation {
    Byte(u32, u8),
    /// An extreme i32 at one of the v2 header's fields (length, epoch, crc, last offset
    /// delta, sequence, count…) of the first batch, or anywhere.
    Int(u32, i32),
    /// An i64 (base offset, timestamps, producer id).
    Long(u32, i64),
    Magic(u8),
    Cut(u32),
    Insert(u32, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let extreme32 = prop_oneof![
        Just(-1i32),
        Just(0),
        Just(i32::MAX),
        Just(i32::MIN),
        any::<i32>()
    ];
    prop_oneof![
        4 => (any::<u32>(), any::<u8>()).prop_map(|(p, b)| Mutation::Byte(p, b)),
        3 => (any::<u32>(), extreme32).prop_map(|(p, v)| Mutation::Int(p, v)),
        2 => (any::<u32>(), prop_oneof![Just(-1i64), Just(i64::MAX), Just(i64::MIN), Just(1i64 << 33), any::<i64>()])
            .prop_map(|(p, v)| Mutation::Long(p, v)),
        1 => (0u8..4).prop_map(Mutation::Magic),
        1 => any::<u32>().prop_map(Mutation::Cut),
        1 => (any::<u32>(), proptest::collection::vec(any::<u8>(), 1..32)).prop_map(|(p, b)| Mutation::Insert(p, b)),
    ]
}

/// Where a mutation lands: half the time in the first batch's 61-byte header.
fn at(fraction: u32, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if fraction & 1 == 0 && len > 61 {
        (fraction as usize >> 1) % 61
    } else {
        ((u64::from(fraction) * len as u64) >> 32) as usize
    }
}

fn apply(set: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Byte(p, b) => {
            if !set.is_empty() {
                let i = at(*p, set.len());
                set[i] = *b;
            }
        }
        Mutation::Int(p, v) => {
            if set.len() >= 4 {
                let i = at(*p, set.len() - 3);
                set[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
        }
        Mutation::Long(p, v) => {
            if set.len() >= 8 {
                let i = at(*p, set.len() - 7);
                set[i..i + 8].copy_from_slice(&v.to_be_bytes());
            }
        }
        Mutation::Magic(m) => {
            if set.len() > 16 {
                set[16] = *m;
            }
        }
        Mutation::Cut(p) => {
            let i = ((u64::from(*p) * set.len() as u64) >> 32) as usize;
            set.truncate(i);
        }
        Mutation::Insert(p, bytes) => {
            let i = at(*p, set.len());
            set.splice(i..i, bytes.iter().copied());
        }
    }
}

fn any_policy() -> impl Strategy<Value = ProducePolicy> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(i64::MAX), 0i64..10_000_000],
        0u8..6,
    )
        .prop_map(|(compacted, log_append_time, max_ms, target)| {
            policy(compacted, log_append_time, max_ms, target)
        })
}

fn validator(cases: u32) {
    let strategy = (
        proptest::collection::vec(batch_plan(), 1..4),
        proptest::collection::vec(mutation(), 0..5),
        any_policy(),
    );
    run(cases, strategy, |(plans, mutations, policy)| {
        let mut set = build(&plans);
        if mutations.is_empty() {
            let batches = validate_record_set(&set);
            prop_assert!(batches.is_ok(), "a valid set is refused: {batches:?}");
            prop_assert_eq!(batches.unwrap().len(), plans.len());
        }
        for m in &mutations {
            apply(&mut set, m);
        }
        check_record_set(&set, &policy);
        Ok(())
    });
}

#[test]
fn valid_record_sets_mutated() {
    validator(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn valid_record_sets_mutated_long() {
    validator(LONG_CASES);
}

#[test]
fn random_bytes_full_size() {
    random_bytes(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn random_bytes_full_size_long() {
    random_bytes(LONG_CASES);
}

fn random_bytes(cases: u32) {
    let strategy = (
        prop_oneof![3 => proptest::collection::vec(any::<u8>(), 0..4096), 1 => proptest::collection::vec(any::<u8>(), 4096..(1 << 20))],
        any_policy(),
    );
    run(cases, strategy, |(bytes, policy)| {
        check_record_set(&bytes, &policy);
        Ok(())
    });
}

/// Writes the seed corpus of the libFuzzer target `record_batch` (fuzz/, docs/fuzzing.md):
/// valid record sets of every codec, idempotent and transactional ones among them, behind a
/// few policies, into the directory `GREGOR_FUZZ_CORPUS`.
#[test]
#[ignore = "writes a fuzz corpus; see docs/fuzzing.md"]
fn write_seed_corpus() {
    let dir = std::env::var("GREGOR_FUZZ_CORPUS").expect("GREGOR_FUZZ_CORPUS names the corpus dir");
    std::fs::create_dir_all(&dir).unwrap();
    for codec in 0..5u8 {
        // One batch per set: the validator wants a producer's batches at base offset 0.
        let plain = build(&[BatchPlan {
            codec,
            producer: None,
            records: vec![(Some(b"k".to_vec()), 40, b'a', 1), (None, 300, b'b', 0)],
        }]);
        let idempotent = build(&[BatchPlan {
            codec,
            producer: Some((7, 0, 0, codec % 2 == 0)),
            records: vec![(None, 12, b'c', 2), (Some(Vec::new()), 0, 0, 0)],
        }]);
        for (kind, set) in [("plain", plain), ("producer", idempotent)] {
            let policy = records::fuzzing::policy(false, false, 3_600_000, 5);
            let mut copy = set.clone();
            assert!(
                records::validate_produce(&mut copy, &policy).is_ok(),
                "seed {kind} codec {codec}"
            );
            for (flags, target) in [(0u8, 5u8), (1, 0), (2, 1), (4, 4)] {
                let input = records::fuzzing::join_input(flags, target, &set);
                std::fs::write(
                    format!("{dir}/codec{codec}-{kind}-policy{flags}{target}"),
                    input,
                )
                .unwrap();
            }
        }
    }
}
