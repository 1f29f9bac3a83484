//! Issue 14: the request decoder (`decode_request`, the broker's decode path) fuzzed with
//! full-size inputs, structured so they get past the first bytes:
//!
//! - every row of `SUPPORTED_APIS` at every one of its versions (and a little past), with a
//!   header of the right version and a body of Kafka primitives (ints, varints, strings and
//!   byte fields with consistent or absurd length prefixes, arrays with huge counts, UUIDs,
//!   tagged-field sections, raw blocks of up to 256 KiB: bodies up to ~1 MiB);
//! - valid requests with real content (Produce with up to 1 MiB of records, Fetch over many
//!   topics, Metadata, JoinGroup, CreateTopics, OffsetCommit) encoded at every version, then
//!   mutated (bytes overwritten, extreme ints planted, cut short, bytes inserted).
//!
//! The decoder must answer `Ok` or `Err` without panicking, and every unmutated seed decodes.
//! CI runs a smoke from `PROPTEST_RNG_SEED` (set by scripts/test.sh); the `--ignored` long
//! run (`cargo test -p protocol --test fuzz_full -- --ignored`) is recorded in
//! docs/fuzzing.md. A failure prints the minimal input and the seed. The check and the seed
//! requests live in `protocol::fuzzing`, shared with the libFuzzer target `decode_request`
//! (fuzz/).

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use protocol::fuzzing::{check_decode, header, seed_frames};
use protocol::SUPPORTED_APIS;

/// Cases per target in CI (a few seconds in a debug build) and in the long run.
const SMOKE_CASES: u32 = 1_000;
const LONG_CASES: u32 = 30_000;

fn run<S: Strategy>(cases: u32, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        // The inputs are large: shrinking stops early rather than run for minutes.
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(err) = runner.run(&strategy, check) {
        panic!(
            "{err}\nPROPTEST_RNG_SEED={}",
            std::env::var("PROPTEST_RNG_SEED").unwrap_or_else(|_| "(unset: random)".into())
        );
    }
}

/// One piece of a generated body.
#[derive(Debug, Clone)]
enum Token {
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Varint(u32),
    /// A length-prefixed string/bytes field: (prefix as i16, i32 or varint, declared length,
    /// actual bytes).
    Sized(u8, i32, Vec<u8>),
    Uuid([u8; 16]),
    /// A tagged-field section: count, then (tag, size, bytes).
    Tagged(Vec<(u32, Vec<u8>)>),
    Raw(Vec<u8>),
}

fn token() -> impl Strategy<Value = Token> {
    let len = prop_oneof![
        Just(-1i32),
        0i32..64,
        Just(i32::MAX),
        Just(i32::MIN),
        any::<i32>()
    ];
    prop_oneof![
        any::<i8>().prop_map(Token::I8),
        prop_oneof![any::<i16>(), Just(-1i16), 0i16..20].prop_map(Token::I16),
        prop_oneof![any::<i32>(), Just(-1i32), 0i32..100, Just(i32::MAX)].prop_map(Token::I32),
        any::<i64>().prop_map(Token::I64),
        prop_oneof![0u32..130, any::<u32>()].prop_map(Token::Varint),
        (0u8..3, len, proptest::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(kind, declared, bytes)| Token::Sized(kind, declared, bytes)),
        any::<[u8; 16]>().prop_map(Token::Uuid),
        proptest::collection::vec(
            (0u32..8, proptest::collection::vec(any::<u8>(), 0..16)),
            0..3
        )
        .prop_map(Token::Tagged),
        prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), 0..512),
            1 => (1usize..256 * 1024, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        ]
        .prop_map(Token::Raw),
    ]
}

fn put_varint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn encode_tokens(buf: &mut BytesMut, tokens: &[Token]) {
    for t in tokens {
        match t {
            Token::I8(v) => buf.put_i8(*v),
            Token::I16(v) => buf.put_i16(*v),
            Token::I32(v) => buf.put_i32(*v),
            Token::I64(v) => buf.put_i64(*v),
            Token::Varint(v) => put_varint(buf, *v),
            Token::Sized(kind, declared, bytes) => {
                match kind {
                    0 => buf.put_i16(*declared as i16),
                    1 => buf.put_i32(*declared),
                    // Compact: length + 1 as an unsigned varint.
                    _ => put_varint(buf, (*declared as u32).wrapping_add(1)),
                }
                buf.extend_from_slice(bytes);
            }
            Token::Uuid(b) => buf.extend_from_slice(b),
            Token::Tagged(fields) => {
                put_varint(buf, fields.len() as u32);
                for (tag, bytes) in fields {
                    put_varint(buf, *tag);
                    put_varint(buf, bytes.len() as u32);
                    buf.extend_from_slice(bytes);
                }
            }
            Token::Raw(bytes) => buf.extend_from_slice(bytes),
        }
    }
}

#[test]
fn every_api_and_version_with_generated_bodies() {
    generated_bodies(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn every_api_and_version_with_generated_bodies_long() {
    generated_bodies(LONG_CASES);
}

fn generated_bodies(cases: u32) {
    let strategy = (
        0..SUPPORTED_APIS.len(),
        0i16..40,
        proptest::option::of("[a-z-]{0,40}"),
        proptest::collection::vec(token(), 0..400),
    );
    run(cases, strategy, |(row, version_pick, client_id, tokens)| {
        let api = SUPPORTED_APIS[row];
        // Every version in the range, and some past its end (the Unsupported decode path).
        let span = api.max_version - api.min_version + 3;
        let version = api.min_version + version_pick % span;
        let mut frame = header(api.api_key, version, client_id.as_deref());
        encode_tokens(&mut frame, &tokens);
        check_decode(&frame);
        Ok(())
    });
}

/// A change to a valid frame.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite the byte at (position as a fraction of the length).
    Byte(u32, u8),
    /// Plant an extreme i32 (a length or a count).
    Int(u32, i32),
    /// Cut the frame at this fraction.
    Cut(u32),
    /// Insert bytes.
    Insert(u32, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<u32>(), any::<u8>()).prop_map(|(p, b)| Mutation::Byte(p, b)),
        3 => (any::<u32>(), prop_oneof![Just(-1), Just(i32::MAX), Just(i32::MIN), Just(0x7f_ff_00), any::<i32>()])
            .prop_map(|(p, v)| Mutation::Int(p, v)),
        1 => any::<u32>().prop_map(Mutation::Cut),
        1 => (any::<u32>(), proptest::collection::vec(any::<u8>(), 1..32)).prop_map(|(p, b)| Mutation::Insert(p, b)),
    ]
}

fn at(fraction: u32, len: usize) -> usize {
    ((u64::from(fraction) * len as u64) >> 32) as usize
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    // The first 8 bytes (key, version, correlation id) are mutated less often: past them
    // the body decoder runs.
    match m {
        Mutation::Byte(p, b) => {
            if !frame.is_empty() {
                let i = at(*p, frame.len());
                frame[i] = *b;
            }
        }
        Mutation::Int(p, v) => {
            if frame.len() >= 4 {
                let i = at(*p, frame.len() - 3);
                frame[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
        }
        Mutation::Cut(p) => {
            let i = at(*p, frame.len());
            frame.truncate(i);
        }
        Mutation::Insert(p, bytes) => {
            let i = at(*p, frame.len());
            frame.splice(i..i, bytes.iter().copied());
        }
    }
}

#[test]
fn valid_requests_mutated() {
    mutated_requests(SMOKE_CASES);
}

#[test]
#[ignore = "long fuzz run; see docs/fuzzing.md"]
fn valid_requests_mutated_long() {
    mutated_requests(LONG_CASES);
}

fn mutated_requests(cases: u32) {
    let strategy = (
        prop_oneof![3 => 0usize..4096, 1 => 4096usize..(1 << 20)],
        any::<u8>(),
        proptest::collection::vec("[a-zA-Z0-9._-]{1,60}", 1..40),
        any::<prop::sample::Index>(),
        proptest::collection::vec(mutation(), 0..6),
    );
    run(
        cases,
        strategy,
        |(record_bytes, fill, names, pick, mutations)| {
            let records = Bytes::from(vec![fill; record_bytes]);
            let seeds = seed_frames(&records, &names);
            prop_assert!(!seeds.is_empty());
            let mut frame = pick.get(&seeds).clone();
            if mutations.is_empty() {
                let decoded = protocol::decode_request(Bytes::from(frame));
                prop_assert!(decoded.is_ok(), "a valid seed does not decode: {decoded:?}");
                return Ok(());
            }
            for m in &mutations {
                apply(&mut frame, m);
            }
            check_decode(&frame);
            Ok(())
        },
    );
}

/// Writes the seed corpus of the libFuzzer targets `decode_request` and `broker_dispatch`
/// (fuzz/, docs/fuzzing.md): every valid request the mutation run starts from, at every
/// version, into the directory `GREGOR_FUZZ_CORPUS`.
#[test]
#[ignore = "writes a fuzz corpus; see docs/fuzzing.md"]
fn write_seed_corpus() {
    let dir = std::env::var("GREGOR_FUZZ_CORPUS").expect("GREGOR_FUZZ_CORPUS names the corpus dir");
    std::fs::create_dir_all(&dir).unwrap();
    let records = Bytes::from(records_seed());
    let names: Vec<String> = ["t", "orders", "a.b_c-1"].map(String::from).to_vec();
    let frames = seed_frames(&records, &names);
    assert!(frames.len() > 50, "{} seeds", frames.len());
    for (i, frame) in frames.iter().enumerate() {
        std::fs::write(format!("{dir}/request-{i:03}"), frame).unwrap();
    }
}

/// A valid v2 record set (two batches: plain, and idempotent gzip), as the Produce seeds
/// carry (so a broker would take them).
fn records_seed() -> Vec<u8> {
    use records::fuzzing::{build, BatchPlan};
    build(&[
        BatchPlan {
            codec: 0,
            producer: None,
            records: vec![(Some(b"k".to_vec()), 40, b'a', 1), (None, 300, b'b', 0)],
        },
        BatchPlan {
            codec: 1,
            producer: Some((7, 0, 0, false)),
            records: vec![(None, 12, b'c', 2)],
        },
    ])
}
