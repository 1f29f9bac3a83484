//! Cost of down-conversion (a benchmark, not a check): CPU seconds (of the converting thread) per MB of stored v2
//! batches converted to message format v1, as a Fetch v2-v3 consumer's partition read
//! (1 MiB reads of 1 KiB records, 16 per batch).
//!
//! `cargo test --release -p records --test downconvert_bench -- --ignored --nocapture`

use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::legacy::down_convert;
use records::Compression;

#[test]
#[ignore = "benchmark"]
fn downconversion_cost() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Lz4,
        Compression::Snappy,
    ] {
        // One 1 MiB partition read.
        let mut stored = Vec::new();
        let mut offset = 0i64;
        let value: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        while stored.len() < 1 << 20 {
            let mut spec = BatchSpec::new(offset);
            spec.compression = codec;
            let mut b = BatchBuilder::new(spec);
            for i in 0..16 {
                let key = format!("key-{}", offset + i);
                b.push(&NewRecord {
                    offset: offset + i,
                    timestamp: 1_700_000_000_000 + i,
                    key: Some(key.as_bytes()),
                    value: Some(&value),
                    headers: &[],
                });
            }
            offset += 16;
            stored.extend(b.build());
        }
        let rounds = 200;
        let started = thread_cpu_seconds();
        let mut out_bytes = 0;
        let mut peak = 0;
        for _ in 0..rounds {
            let out = down_convert(&stored, 1, 0, stored.len()).unwrap();
            out_bytes += out.bytes.len();
            peak = peak.max(out.bytes.capacity());
        }
        let secs = thread_cpu_seconds() - started;
        let mb = (stored.len() * rounds) as f64 / 1e6;
        println!(
            "codec={codec:?} stored_mb={mb:.0} converted_mb={:.0} s_per_mb={:.5} mb_per_s={:.0} output_buffer_bytes={peak} (read {} bytes)",
            out_bytes as f64 / 1e6,
            secs / mb,
            mb / secs,
            stored.len()
        );
    }
}

/// Cost of the leader's produce validation (a benchmark, not a check): CPU seconds per GB
/// of produced batches for the shallow check alone (header + CRC, what the broker did
/// before) and for the full check (every record; compressed batches decoded), per codec.
/// Batches like librdkafka's in `gregor bench produce`: 1 KiB records, about 1 MB a batch.
///
/// `cargo test --release -p records --test downconvert_bench validation -- --ignored --nocapture`
#[test]
#[ignore = "benchmark"]
fn validation_cost() {
    use records::{validate_produce, validate_record_set, ProducePolicy};
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut spec = BatchSpec::new(0);
        spec.compression = codec;
        let mut b = BatchBuilder::new(spec);
        let mut seed = 88172645463325252u64;
        for i in 0..1000 {
            // Half random bytes, half text: compresses about 2:1.
            let value: Vec<u8> = (0..1024)
                .map(|j| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if j % 2 == 0 {
                        seed as u8
                    } else {
                        b"abcdefgh"[j % 8]
                    }
                })
                .collect();
            b.push(&NewRecord {
                offset: i,
                timestamp: 1_700_000_000_000 + i,
                key: None,
                value: Some(&value),
                headers: &[],
            });
        }
        let batch = b.build();
        let uncompressed_bytes = 1000 * 1024;
        let rounds = if codec == Compression::None {
            2000
        } else {
            200
        };
        let policy = ProducePolicy::default();
        // Thread CPU time, so that other jobs on the machine do not count.
        let started = thread_cpu_seconds();
        for _ in 0..rounds {
            std::hint::black_box(validate_record_set(&batch).unwrap());
        }
        let shallow = thread_cpu_seconds() - started;
        let started = thread_cpu_seconds();
        for _ in 0..rounds {
            let mut copy = batch.clone();
            std::hint::black_box(validate_produce(&mut copy, &policy).unwrap());
        }
        let full = thread_cpu_seconds() - started;
        // The copy is not validation: time it apart and take it out.
        let started = thread_cpu_seconds();
        for _ in 0..rounds {
            std::hint::black_box(batch.clone());
        }
        let copies = thread_cpu_seconds() - started;
        let gb = (uncompressed_bytes * rounds) as f64 / 1e9;
        println!(
            "codec={codec:?} batch_bytes={} crc_only_s_per_gb={:.3} full_validation_s_per_gb={:.3} (per GB of record data)",
            batch.len(),
            shallow / gb,
            (full - copies).max(0.0) / gb
        );
    }
}

/// CPU time of the calling thread (user + system), from /proc.
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
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
