//! Cleaner throughput (a benchmark, not a check): a compacted log of 1 KiB records with 10 %
//! unique keys, cleaned once; prints MB/s of dirty log cleaned.
//!
//! `cargo test --release -p storage --test cleaner_bench -- --ignored --nocapture`
//! (`GREGOR_CLEANER_BENCH_MB=256` sets the log size; `GREGOR_CLEANER_BENCH_CODEC=lz4` the codec).

use std::time::Instant;

use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::Compression;
use storage::log::cleaner::{clean, Throttle};
use storage::log::{Log, LogConfig};

#[test]
#[ignore = "benchmark"]
fn cleaner_throughput() {
    let mb: usize = std::env::var("GREGOR_CLEANER_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let codec = match std::env::var("GREGOR_CLEANER_BENCH_CODEC").as_deref() {
        Ok("gzip") => Compression::Gzip,
        Ok("snappy") => Compression::Snappy,
        Ok("lz4") => Compression::Lz4,
        Ok("zstd") => Compression::Zstd,
        _ => Compression::None,
    };
    let records = mb * 1024;
    let unique = records / 10;
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 64 * 1024 * 1024,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0, 0).unwrap();
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut value = vec![0u8; 1024 - 16];
    for b in 0..records / 16 {
        let mut spec = BatchSpec::new(0);
        spec.compression = codec;
        let mut builder = BatchBuilder::new(spec);
        for i in 0..16 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let key = format!("key-{:010}", seed % unique as u64);
            for (j, v) in value.iter_mut().enumerate().step_by(64) {
                *v = (seed >> (j % 56)) as u8;
            }
            builder.push(&NewRecord {
                offset: i,
                timestamp: (b * 16) as i64 + i,
                key: Some(key.as_bytes()),
                value: Some(&value),
                headers: &[],
            });
        }
        log.append(&mut builder.build(), 0, 0).unwrap();
    }
    // Roll, so that everything written is below the active segment.
    log.set_config(LogConfig {
        segment_ms: 1,
        ..log.config().clone()
    });
    let mut one = BatchBuilder::new(BatchSpec::new(0));
    one.push(&NewRecord {
        offset: 0,
        timestamp: 0,
        key: Some(b"roll"),
        value: None,
        headers: &[],
    });
    log.append(&mut one.build(), 0, 10).unwrap();
    log.flush().unwrap();
    let plan = log.clean_plan(None, log.log_end_offset(), 1 << 50).unwrap();
    let dirty = plan.dirty_bytes;
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let stats = clean(&plan, 1 << 22, &mut Throttle::new(f64::MAX), 0, |g| {
        log.install_cleaned(g)
    })
    .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    println!(
        "codec={codec:?} dirty_mb={:.1} written_mb={:.1} records_read={} records_kept={} elapsed_s={elapsed:.2} cpu_s={cpu:.2} mb_per_s={:.1}",
        dirty as f64 / 1e6,
        stats.bytes_written as f64 / 1e6,
        stats.records_read,
        stats.records_kept,
        dirty as f64 / 1e6 / elapsed
    );
}

/// This process's user + system CPU time, from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split(' ').collect())
        .unwrap_or_default();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|x| x.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks / 100.0
}
