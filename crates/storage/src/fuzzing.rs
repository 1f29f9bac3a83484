//! Shared by the fuzz targets (issue 14, feature `fuzzing`): the structured proptest run in
//! `tests/fuzz_recovery.rs` and the coverage-guided libFuzzer target `segment_recovery` in
//! `fuzz/` (outside the workspace; see docs/fuzzing.md) call the same check with its oracle.
//! Not part of the crate's API.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use records::testing::{decode_values, encode_batch};

use crate::log::{Log, LogConfig};

/// Damage done to the active segment of a closed log.
#[derive(Debug, Clone)]
pub enum Damage {
    /// Bytes after the last batch (a torn write): random or zeros.
    Append(Vec<u8>),
    /// Bytes overwritten at a fraction (of 2^32) of the active segment.
    Overwrite(u32, Vec<u8>),
    /// An extreme value planted at one of a batch header's fields (0 base offset, 1 length,
    /// 2 attributes, 3 magic, 4 crc, 5 last offset delta, 6 count), in the n-th batch of the
    /// segment. (Not the partition leader epoch: outside the CRC, any value of it is a valid
    /// batch.)
    Header(u16, u8, i64),
    /// The segment cut at a fraction (of 2^32) of its length.
    Cut(u32),
}

/// One case: a log written, closed, damaged, opened again.
#[derive(Debug, Clone)]
pub struct RecoveryCase {
    /// The batches appended: (records, value size).
    pub plan: Vec<(usize, usize)>,
    pub segment_bytes: u64,
    pub index_interval_bytes: usize,
    /// Done to the active segment, in order.
    pub damages: Vec<Damage>,
    /// Bytes overwritten in every offset and time index: (position as a fraction of 2^32,
    /// bytes).
    pub index_damage: Option<(u32, Vec<u8>)>,
}

fn fail<E: Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn files_with(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(fail("listing the log dir"))? {
        let path = entry.map_err(fail("listing the log dir"))?.path();
        if path.extension().is_some_and(|e| e == ext) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// (position, end, next offset) of each batch of a valid segment file.
fn batches_of(bytes: &[u8]) -> Vec<(usize, usize, i64)> {
    let int =
        |at: usize| i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 61 <= bytes.len() {
        let mut base = [0u8; 8];
        base.copy_from_slice(&bytes[pos..pos + 8]);
        let base = i64::from_be_bytes(base);
        let len = int(pos + 8) as usize;
        let delta = int(pos + 23);
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

fn at(fraction: u32, len: usize) -> usize {
    ((u64::from(fraction) * len as u64) >> 32) as usize
}

/// The check, in the empty directory `dir`: the log of `case.plan` is written and closed, its
/// active segment damaged. `Log::open_clean` (a clean-shutdown marker that lies) must not
/// panic; `Log::open` must recover exactly the batches wholly before the first changed byte
/// (the log end right after the last of them, every record readable and unchanged) and take
/// the next append at that offset. `Err` says what differed.
pub fn check_recovery(dir: &Path, case: &RecoveryCase) -> Result<(), String> {
    let config = LogConfig {
        segment_bytes: case.segment_bytes,
        index_interval_bytes: case.index_interval_bytes,
        max_message_bytes: 8 << 20,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir, config.clone(), 0, 0).map_err(fail("creating the log"))?;
    for (i, (count, size)) in case.plan.iter().enumerate() {
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
        .map_err(fail("appending"))?;
    }
    let before = all_records(&log)?;
    log.flush().map_err(fail("flushing"))?;
    drop(log);

    let segment = files_with(dir, "log")?
        .pop()
        .ok_or("no segment was written")?;
    let original = std::fs::read(&segment).map_err(fail("reading the segment"))?;
    let segment_base: i64 = segment
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .ok_or("a segment named by its base offset")?;
    let batches = batches_of(&original);
    let mut bytes = original.clone();
    for d in &case.damages {
        match d {
            Damage::Append(tail) => bytes.extend_from_slice(tail),
            Damage::Overwrite(p, b) => {
                if !bytes.is_empty() {
                    let i = at(*p, bytes.len());
                    let end = (i + b.len()).min(bytes.len());
                    bytes[i..end].copy_from_slice(&b[..end - i]);
                }
            }
            Damage::Header(n, field, v) => {
                if !batches.is_empty() {
                    let pos = batches[*n as usize % batches.len()].0;
                    let (at, width) = [(0, 8), (8, 4), (21, 2), (16, 1), (17, 4), (23, 4), (57, 4)]
                        [*field as usize % 7];
                    let value = v.to_be_bytes();
                    if pos + at + width <= bytes.len() {
                        bytes[pos + at..pos + at + width].copy_from_slice(&value[8 - width..]);
                    }
                }
            }
            Damage::Cut(p) => {
                let i = at(*p, bytes.len());
                bytes.truncate(i);
            }
        }
    }
    std::fs::write(&segment, &bytes).map_err(fail("writing the segment"))?;
    if let Some((p, b)) = &case.index_damage {
        let mut indexes = files_with(dir, "index")?;
        indexes.extend(files_with(dir, "timeindex")?);
        for index in indexes {
            let mut data = std::fs::read(&index).map_err(fail("reading an index"))?;
            if !data.is_empty() {
                let i = at(*p, data.len());
                let end = (i + b.len()).min(data.len());
                data[i..end].copy_from_slice(&b[..end - i]);
                std::fs::write(&index, data).map_err(fail("writing an index"))?;
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
    if let Ok(log) = Log::open_clean(dir, config.clone(), 0) {
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
    let damages = &case.damages;
    let mut log = Log::open(dir, config, 0, 0)
        .map_err(|err| format!("cannot open after {damages:?}: {err}"))?;
    if log.log_end_offset() != expected_end {
        return Err(format!(
            "log end {} after {damages:?}, expected {expected_end}",
            log.log_end_offset()
        ));
    }
    let after = all_records(&log)?;
    let expected: Vec<(i64, String)> = before
        .iter()
        .filter(|(o, _)| *o < expected_end)
        .cloned()
        .collect();
    if after != expected {
        return Err(format!("records differ after {damages:?}"));
    }
    let appended = log
        .append(
            &mut encode_batch(&[b"after".to_vec()], 1_800_000_000_000, None),
            0,
            0,
        )
        .map_err(|e| e.to_string())?;
    if appended.first_offset != expected_end {
        return Err(format!(
            "the next append went to {}, expected {expected_end}",
            appended.first_offset
        ));
    }
    Ok(())
}
