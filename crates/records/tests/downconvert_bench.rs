//! Cost of down-conversion (a benchmark, not a check): CPU seconds per MB of stored v2
//! batches converted to message format v1, as a Fetch v2-v3 consumer's partition read
//! (1 MiB reads of 1 KiB records, 16 per batch).
//!
//! `cargo test --release -p records --test downconvert_bench -- --ignored --nocapture`

use std::time::Instant;

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
        let started = Instant::now();
        let mut out_bytes = 0;
        let mut peak = 0;
        for _ in 0..rounds {
            let out = down_convert(&stored, 1, 0, stored.len()).unwrap();
            out_bytes += out.bytes.len();
            peak = peak.max(out.bytes.capacity());
        }
        let secs = started.elapsed().as_secs_f64();
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
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(validate_record_set(&batch).unwrap());
        }
        let shallow = started.elapsed().as_secs_f64();
        let started = Instant::now();
        for _ in 0..rounds {
            let mut copy = batch.clone();
            std::hint::black_box(validate_produce(&mut copy, &policy).unwrap());
        }
        let full = started.elapsed().as_secs_f64();
        // The copy is not validation: time it apart and take it out.
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(batch.clone());
        }
        let copies = started.elapsed().as_secs_f64();
        let gb = (uncompressed_bytes * rounds) as f64 / 1e9;
        println!(
            "codec={codec:?} batch_bytes={} crc_only_s_per_gb={:.3} full_validation_s_per_gb={:.3} (per GB of record data)",
            batch.len(),
            shallow / gb,
            (full - copies).max(0.0) / gb
        );
    }
}
