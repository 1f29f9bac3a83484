//! Crash safety of the log cleaner: a child process (this test binary, re-executed) cleans a
//! compacted log slowly (its I/O throttled, many small groups); the parent SIGKILLs it at a
//! random moment (seeded, printed), reopens the log with full recovery and checks that it
//! passes every check and holds every record that must survive: each record read is the
//! original record at its original offset, every key's latest record is there, and the log
//! end is unchanged. Then a cleaning runs to the end and the log is exactly compacted.
//!
//! Seeds: `GREGOR_CLEANER_CRASH_SEEDS=1,2,3` (default: six fixed seeds).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::{BatchHeader, Compression};
use storage::log::cleaner::{clean, Throttle};
use storage::log::{Log, LogConfig};

const CHILD_ENV: &str = "GREGOR_CLEANER_CRASH_DIR";

type Contents = BTreeMap<i64, (String, Option<Vec<u8>>)>;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 1024,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 0,
        ..LogConfig::default()
    }
}

/// A small deterministic generator (xorshift), so a seed names one run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn codec_for(seed: u64) -> Compression {
    [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ][(seed % 5) as usize]
}

/// Writes the seed's log: 500 batches of 10 records over 300 keys, 1 in 20 a tombstone.
fn write_log(dir: &Path, seed: u64) {
    let mut log = Log::open(dir, config(), 0, 0).unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for _ in 0..500 {
        let mut spec = BatchSpec::new(0);
        spec.compression = codec_for(seed);
        let mut b = BatchBuilder::new(spec);
        for i in 0..10 {
            let key = format!("key-{}", rng.next() % 300);
            let value: Option<Vec<u8>> = (!rng.next().is_multiple_of(20))
                .then(|| (0..150).map(|j| (rng.next() as u8) ^ j as u8).collect());
            b.push(&NewRecord {
                offset: i,
                timestamp: 1_000,
                key: Some(key.as_bytes()),
                value: value.as_deref(),
                headers: &[],
            });
        }
        log.append(&mut b.build(), 0, 0).unwrap();
    }
    log.flush().unwrap();
}

fn contents(log: &Log) -> Contents {
    let mut out = BTreeMap::new();
    let mut offset = log.log_start_offset();
    let mut last = -1;
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 1 << 20).unwrap();
        if bytes.is_empty() {
            break;
        }
        let mut pos = 0;
        while let Some(h) = bytes.get(pos..).and_then(BatchHeader::read) {
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            records::validate_record_set(batch).expect("every stored batch passes its checks");
            let section = records::records_section(batch).unwrap();
            for r in records::record::records(&section, h.records_count).unwrap() {
                let o = h.base_offset + i64::from(r.offset_delta);
                assert!(o > last, "offsets increase: {o} after {last}");
                last = o;
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                out.insert(o, (key, r.value.map(<[u8]>::to_vec)));
            }
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
    }
    out
}

fn clean_all(log: &mut Log, throttle: &mut Throttle) {
    let mut checkpoint = None;
    loop {
        let plan = log
            .clean_plan(checkpoint, log.log_end_offset(), 1 << 50)
            .unwrap();
        if !plan.is_due() {
            return;
        }
        let stats = clean(&plan, 1 << 20, throttle, 0, |g| log.install_cleaned(g)).unwrap();
        if stats.end_offset == plan.first_dirty_offset {
            return;
        }
        checkpoint = Some(stats.end_offset);
    }
}

/// The child: cleans the log at `$GREGOR_CLEANER_CRASH_DIR` slowly, until killed.
#[test]
#[ignore = "run by a_kill_at_any_point_of_a_cleaning_loses_nothing as a child process"]
fn cleaner_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut log = Log::open(Path::new(&dir), config(), 0, 0).unwrap();
    // About 1 MB of log at 2 MB/s of I/O: a cleaning takes a little under a second.
    let mut throttle = Throttle::new(2.0e6);
    println!("CLEANING");
    clean_all(&mut log, &mut throttle);
    println!("CLEANED");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_kill_at_any_point_of_a_cleaning_loses_nothing() {
    let seeds: Vec<u64> = std::env::var("GREGOR_CLEANER_CRASH_SEEDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![11, 12, 13, 14, 15, 16]);
    let exe = std::env::current_exe().unwrap();
    for seed in seeds {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), seed);
        let before = {
            let log = Log::open(dir.path(), config(), i64::MAX, 0).unwrap();
            (contents(&log), log.log_end_offset())
        };
        let mut rng = Rng(seed | 1);
        // The map phase takes about 0.5 s, the rewrite about 0.7 s more: most kills land in
        // the rewrite and its swaps, some before it.
        let kill_after = Duration::from_millis(300 + rng.next() % 1100);
        println!(
            "seed {seed}: codec {:?}, kill -9 after {kill_after:?}",
            codec_for(seed)
        );
        let mut child = Command::new(&exe)
            .args(["--exact", "cleaner_crash_child", "--ignored", "--nocapture"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(kill_after);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut log = Log::open(dir.path(), config(), 0, 0)
            .unwrap_or_else(|e| panic!("seed {seed}: the log does not open: {e}"));
        let after = contents(&log);
        assert_eq!(
            log.log_end_offset(),
            before.1,
            "seed {seed}: the log end moved"
        );
        for (o, v) in &after {
            assert_eq!(
                before.0.get(o),
                Some(v),
                "seed {seed}: offset {o} is not the original record"
            );
        }
        let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
        for (o, (k, _)) in &before.0 {
            latest.insert(k, *o);
        }
        for (k, o) in &latest {
            // Tombstones may go (delete.retention.ms=0 once cleaned twice); values never.
            if before.0[o].1.is_some() {
                assert_eq!(
                    after.get(o),
                    before.0.get(o),
                    "seed {seed}: key {k}'s latest record is gone"
                );
            }
        }
        println!(
            "seed {seed}: {} of {} records after the crash, log end {}",
            after.len(),
            before.0.len(),
            before.1
        );
        // Cleaning again finishes the job: the latest value of each key, below the active segment.
        clean_all(&mut log, &mut Throttle::new(f64::MAX));
        let done = contents(&log);
        let active_base = log
            .clean_plan(None, log.log_end_offset(), 1 << 50)
            .unwrap()
            .first_uncleanable_offset;
        let mut keys = std::collections::HashSet::new();
        for (o, (k, _)) in done.range(..active_base) {
            assert!(
                keys.insert(k.clone()),
                "seed {seed}: key {k} twice below the active segment (offset {o})"
            );
        }
    }
}
