//! Issue 14: segment recovery fuzzed. A log of random batches (up to ~1 MiB, several
//! segments, an index entry for many batches) is closed, then its active segment is damaged
//! (random bytes or zeros appended, bytes overwritten, extreme values planted in a batch
//! header, the file cut) and sometimes its offset and time indexes too. Opening it again
//! must never panic and must recover exactly the batches before the first damaged byte:
//! every one of them readable, the log end right after the last, appends continuing there.
//! With a clean-shutdown marker that lies (`open_clean`) it must not panic either.
//!
//! CI runs a smoke from `PROPTEST_RNG_SEED`; the long run is `cargo test -p storage --test
//! fuzz_recovery -- --ignored` (docs/fuzzing.md). The check and its oracle live in
//! `storage::fuzzing` (feature `fuzzing`), shared with the libFuzzer target
//! `segment_recovery` (fuzz/).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use storage::fuzzing::{check_recovery, Damage, RecoveryCase};

const SMOKE_CASES: u32 = 40;
const LONG_CASES: u32 = 2_000;

fn run<S: Strategy>(cases: u32, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 500,
        ..Config::default()
    };
    if let Err(err) = TestRunner::new(config).run(&strategy, check) {
        panic!(
            "{err}\nPROPTEST_RNG_SEED={}",
            std::env::var("PROPTEST_RNG_SEED").unwrap_or_else(|_| "(unset: random)".into())
        );
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        2 => (prop_oneof![1usize..100, 100usize..70_000], any::<bool>(), any::<u8>())
            .prop_map(|(n, zeros, b)| {
                let bytes = if zeros { vec![0; n] } else { (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(b)).collect() };
                Damage::Append(bytes)
            }),
        2 => (any::<u32>(), proptest::collection::vec(any::<u8>(), 1..64)).prop_map(|(p, b)| Damage::Overwrite(p, b)),
        2 => (any::<u16>(), 0u8..7, prop_oneof![Just(-1i64), Just(0), Just(i64::MAX), Just(1i64 << 33), any::<i64>()])
            .prop_map(|(n, field, v)| Damage::Header(n, field, v)),
        1 => any::<u32>().prop_map(Damage::Cut),
    ]
}

fn recovery(cases: u32) {
    let strategy = (
        proptest::collection::vec(
            (
                1usize..20,
                prop_oneof![3 => 1usize..200, 1 => 200usize..60_000],
            ),
            1..30,
        ),
        prop_oneof![Just(4_096u64), Just(100_000), Just(1 << 30)],
        prop_oneof![Just(1usize), Just(4_096)],
        proptest::collection::vec(damage(), 1..4),
        proptest::option::of((any::<u32>(), proptest::collection::vec(any::<u8>(), 1..16))),
    );
    run(
        cases,
        strategy,
        |(plan, segment_bytes, index_interval_bytes, damages, index_damage)| {
            let dir = tempfile::tempdir().unwrap();
            let case = RecoveryCase {
                plan,
                segment_bytes,
                index_interval_bytes,
                damages,
                index_damage,
            };
            check_recovery(dir.path(), &case).map_err(TestCaseError::fail)
        },
    );
}

#[test]
fn damaged_segments_recover_to_the_last_good_batch() {
    recovery(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn damaged_segments_recover_to_the_last_good_batch_long() {
    recovery(LONG_CASES);
}
