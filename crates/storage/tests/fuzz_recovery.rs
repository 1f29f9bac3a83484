//! Issue 14: segment recovery fuzzed. A log of random batches (up to ~1 MiB, several
//! segments, an index entry for many batches) is closed, then its active segment is damaged
//! (random bytes or zeros appended, bytes overwritten, extreme values planted in a batch
//! header, the file cut) and sometimes its offset and time indexes too. Opening it again
//! must never panic and must recover exactly the batches before the first damaged byte:
//! every one of them readable, the log end right after the last, appends continuing there.
//! With a clean-shutdown marker that lies (`open_clean`) it must not panic either.
//!
//! CI runs a smoke from `PROPTEST_RNG_SEED`; the long run is `cargo test -p storage --test
//! fuzz_recovery -- --ignored` (docs/fuzzing.md).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use records::testing::{decode_values, encode_batch};
use storage::log::{Log, LogConfig};

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

#[derive(Debug, Clone)]
enum Damage {
    /// Bytes after the last batch (a torn write): random or zeros.
    Append(Vec<u8>),
    /// Bytes overwritten at a fraction of the active segment.
    Overwrite(u32, Vec<u8>),
    /// An extreme value planted at one of a batch header's fields (base offset, length,
    /// attributes, magic, crc, last offset delta, count), in the n-th batch of the segment.
    /// (Not the partition leader epoch: outside the CRC, any value of it is a valid batch.)
    Header(u16, u8, i64),
    /// The segment cut at a fraction of its length.
    Cut(u32),
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

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// (position, end, next offset) of each batch of a valid segment file.
fn batches_of(bytes: &[u8]) -> Vec<(usize, usize, i64)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 61 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[pos..pos + 8].try_into().unwrap());
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let delta = i32::from_be_bytes(bytes[pos + 23..pos + 27].try_into().unwrap());
        let end = pos + 12 + len;
        out.push((pos, end, base + i64::from(delta) + 1));
        pos = end;
    }
    out
}

fn all_records(log: &Log) -> Result<Vec<(i64, String)>, String> {
    let mut got = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 1 << 22).map_err(|e| e.to_string())?;
        let records = decode_values(&bytes);
        let Some(last) = records.last() else {
            return Err(format!("nothing read at {offset}"));
        };
        offset = last.0 + 1;
        got.extend(records);
    }
    Ok(got)
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
            let config = LogConfig {
                segment_bytes,
                index_interval_bytes,
                max_message_bytes: 8 << 20,
                ..LogConfig::default()
            };
            let mut log = Log::open(dir.path(), config.clone(), 0, 0).unwrap();
            for (i, (count, size)) in plan.iter().enumerate() {
                let values: Vec<Vec<u8>> = (0..*count)
                    .map(|j| {
                        let mut v = format!("b{i}-r{j}-").into_bytes();
                        v.resize(*size, b'a' + (i % 26) as u8);
                        v
                    })
                    .collect();
                log.append(
                    &mut encode_batch(&values, 1_700_000_000_000 + i as i64, None),
                    0,
                    0,
                )
                .unwrap();
            }
            let before = all_records(&log).unwrap();
            log.flush().unwrap();
            drop(log);

            let segment = files_with(dir.path(), "log").pop().unwrap();
            let original = std::fs::read(&segment).unwrap();
            let segment_base: i64 = segment
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let batches = batches_of(&original);
            let mut bytes = original.clone();
            for d in &damages {
                match d {
                    Damage::Append(tail) => bytes.extend_from_slice(tail),
                    Damage::Overwrite(p, b) => {
                        if !bytes.is_empty() {
                            let i = ((u64::from(*p) * bytes.len() as u64) >> 32) as usize;
                            let end = (i + b.len()).min(bytes.len());
                            bytes[i..end].copy_from_slice(&b[..end - i]);
                        }
                    }
                    Damage::Header(n, field, v) => {
                        if !batches.is_empty() {
                            let pos = batches[*n as usize % batches.len()].0;
                            let (at, width) =
                                [(0, 8), (8, 4), (21, 2), (16, 1), (17, 4), (23, 4), (57, 4)]
                                    [*field as usize];
                            let value = v.to_be_bytes();
                            if pos + at + width <= bytes.len() {
                                bytes[pos + at..pos + at + width]
                                    .copy_from_slice(&value[8 - width..]);
                            }
                        }
                    }
                    Damage::Cut(p) => {
                        let i = ((u64::from(*p) * bytes.len() as u64) >> 32) as usize;
                        bytes.truncate(i);
                    }
                }
            }
            std::fs::write(&segment, &bytes).unwrap();
            if let Some((p, b)) = &index_damage {
                for index in files_with(dir.path(), "index")
                    .into_iter()
                    .chain(files_with(dir.path(), "timeindex"))
                {
                    let mut data = std::fs::read(&index).unwrap();
                    if !data.is_empty() {
                        let i = ((u64::from(*p) * data.len() as u64) >> 32) as usize;
                        let end = (i + b.len()).min(data.len());
                        data[i..end].copy_from_slice(&b[..end - i]);
                        std::fs::write(&index, data).unwrap();
                    }
                }
            }
            // The oracle: the batches wholly before the first changed byte survive.
            let first_change = original
                .iter()
                .zip(&bytes)
                .position(|(a, b)| a != b)
                .unwrap_or(original.len().min(bytes.len()));
            let expected_end = batches
                .iter()
                .take_while(|(_, end, _)| *end <= first_change)
                .last()
                .map_or(segment_base, |(_, _, next)| *next);

            // A lying clean-shutdown marker: no panic, whatever it answers.
            if let Ok(log) = Log::open_clean(dir.path(), config.clone(), 0) {
                // Reads only (what it serves is not trusted after a lying marker).
                let mut offset = log.log_start_offset();
                while offset < log.log_end_offset() {
                    if log.read(offset, 1 << 22).is_err() {
                        break;
                    }
                    offset += 1;
                    if offset > log.log_start_offset() + 50 {
                        break;
                    }
                }
                drop(log);
            }
            let mut log = match Log::open(dir.path(), config.clone(), 0, 0) {
                Ok(log) => log,
                Err(err) => {
                    return Err(TestCaseError::fail(format!(
                        "cannot open after {damages:?}: {err}"
                    )))
                }
            };
            prop_assert_eq!(log.log_end_offset(), expected_end, "after {:?}", damages);
            let after = all_records(&log).map_err(TestCaseError::fail)?;
            let expected: Vec<(i64, String)> = before
                .iter()
                .filter(|(o, _)| *o < expected_end)
                .cloned()
                .collect();
            prop_assert!(after == expected, "records differ after {:?}", damages);
            let appended = log
                .append(
                    &mut encode_batch(&[b"after".to_vec()], 1_800_000_000_000, None),
                    0,
                    0,
                )
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(appended.first_offset, expected_end);
            Ok(())
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
