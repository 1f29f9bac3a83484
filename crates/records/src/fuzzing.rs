//! Shared by the fuzz targets (issue 14): the structured proptest runs in
//! `tests/fuzz_full.rs` and the coverage-guided libFuzzer target in `fuzz/` (outside the
//! workspace; see docs/fuzzing.md) call the same check and build valid record sets the same
//! way. Not part of the crate's API.

use crate::builder::{BatchBuilder, BatchSpec, NewRecord};
use crate::{validate_produce, validate_record_set, Compression, ProducePolicy};

/// The check: `validate_record_set` and `validate_produce` (on a copy, which it may rewrite)
/// answer for any bytes under any policy without panicking. Returns the batch count when the
/// set validates.
pub fn check_record_set(set: &[u8], policy: &ProducePolicy) -> Option<usize> {
    let batches = validate_record_set(set).ok().map(|b| b.len());
    let mut copy = set.to_vec();
    let _ = validate_produce(&mut copy, policy);
    batches
}

/// A v2 batch to build: codec, producer, records.
#[derive(Debug, Clone)]
pub struct BatchPlan {
    /// 0 none, 1 gzip, 2 snappy, 3 lz4, else zstd.
    pub codec: u8,
    /// (producer id, epoch, base sequence, transactional)
    pub producer: Option<(i64, i16, i32, bool)>,
    /// (key, value size, fill, headers)
    pub records: Vec<(Option<Vec<u8>>, usize, u8, u8)>,
}

/// The record set of `plans`: one v2 batch per plan, offsets from 0.
pub fn build(plans: &[BatchPlan]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    for plan in plans {
        let mut spec = BatchSpec::new(offset);
        spec.compression = match plan.codec {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            _ => Compression::Zstd,
        };
        if let Some((id, epoch, sequence, transactional)) = plan.producer {
            spec.producer_id = id;
            spec.producer_epoch = epoch;
            spec.base_sequence = sequence;
            spec.transactional = transactional;
        }
        let mut builder = BatchBuilder::new(spec);
        for (i, (key, size, fill, headers)) in plan.records.iter().enumerate() {
            let value = vec![*fill; *size];
            let header_list: Vec<(&[u8], Option<&[u8]>)> = (0..*headers)
                .map(|_| (&b"h"[..], Some(&b"v"[..])))
                .collect();
            builder.push(&NewRecord {
                offset: offset + i as i64,
                timestamp: 1_700_000_000_000 + i as i64,
                key: key.as_deref(),
                value: Some(&value),
                headers: &header_list,
            });
        }
        offset += plan.records.len() as i64;
        out.extend_from_slice(&builder.build());
    }
    out
}

/// A topic's produce policy: compacted or not, LogAppendTime or CreateTime, the timestamp
/// bound, and the target codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd, else the producer's).
pub fn policy(
    compacted: bool,
    log_append_time: bool,
    timestamp_difference_max_ms: i64,
    target: u8,
) -> ProducePolicy {
    ProducePolicy {
        compacted,
        log_append_time,
        timestamp_difference_max_ms,
        target_compression: match target {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        },
        now_ms: 1_700_000_000_000,
    }
}

/// The libFuzzer target's input: 10 bytes of policy (flags: 1 compacted, 2 LogAppendTime,
/// 4 no timestamp bound; the target codec; the bound as a big-endian i64), then the record
/// set. `None` when shorter than the policy.
pub fn split_input(data: &[u8]) -> Option<(ProducePolicy, &[u8])> {
    if data.len() < 10 {
        return None;
    }
    let (head, set) = data.split_at(10);
    let mut bound = [0u8; 8];
    bound.copy_from_slice(&head[2..10]);
    let bound = if head[0] & 4 == 4 {
        i64::MAX
    } else {
        i64::from_be_bytes(bound)
    };
    Some((
        policy(head[0] & 1 == 1, head[0] & 2 == 2, bound, head[1] % 6),
        set,
    ))
}

/// A seed of the libFuzzer target: `set` behind the policy `flags` and `target` codec (see
/// [`split_input`]) with a one-hour timestamp bound.
pub fn join_input(flags: u8, target: u8, set: &[u8]) -> Vec<u8> {
    let mut input = vec![flags, target];
    input.extend_from_slice(&3_600_000i64.to_be_bytes());
    input.extend_from_slice(set);
    input
}
