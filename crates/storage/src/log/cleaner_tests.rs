use std::collections::BTreeMap;

use records::builder::{BatchBuilder, BatchSpec, NewRecord};
use records::Compression;

use super::*;

/// One batch: (key, value) records, value `None` a tombstone.
fn batch(
    records: &[(&str, Option<&str>)],
    codec: Compression,
    producer: Option<(i64, i32)>,
) -> Vec<u8> {
    let mut spec = BatchSpec::new(0);
    spec.compression = codec;
    if let Some((pid, seq)) = producer {
        spec.producer_id = pid;
        spec.producer_epoch = 0;
        spec.base_sequence = seq;
    }
    let mut b = BatchBuilder::new(spec);
    for (i, (k, v)) in records.iter().enumerate() {
        b.push(&NewRecord {
            offset: i as i64,
            timestamp: 1_000 + i as i64,
            key: Some(k.as_bytes()),
            value: v.map(str::as_bytes),
            headers: &[],
        });
    }
    b.build()
}

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 64,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// offset -> (key, value) of every record a consumer reads.
fn contents(log: &Log) -> BTreeMap<i64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 1 << 20).unwrap();
        if bytes.is_empty() {
            break;
        }
        let mut pos = 0;
        while let Some(h) = bytes.get(pos..).and_then(BatchHeader::read) {
            let batch = &bytes[pos..pos + h.size_in_bytes()];
            let section = records::records_section(batch).unwrap();
            for r in records::record::records(&section, h.records_count).unwrap() {
                let k = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let v = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
                out.insert(h.base_offset + i64::from(r.offset_delta), (k, v));
            }
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
    }
    out
}

fn clean_once(log: &mut Log, checkpoint: Option<i64>, capacity: usize) -> CleanStats {
    let plan = log
        .clean_plan(checkpoint, log.log_end_offset(), 10_000)
        .expect("a compacted log");
    let mut throttle = Throttle::new(f64::MAX);
    clean(&plan, capacity, &mut throttle, 10_000, |g| {
        log.install_cleaned(g)
    })
    .unwrap()
}

/// What a correct compaction keeps: the latest record of each key.
fn latest(
    all: &BTreeMap<i64, (String, Option<String>)>,
) -> BTreeMap<i64, (String, Option<String>)> {
    let mut by_key: BTreeMap<&str, i64> = BTreeMap::new();
    for (o, (k, _)) in all {
        by_key.insert(k, *o);
    }
    by_key.values().map(|o| (*o, all[o].clone())).collect()
}

fn fill(log: &mut Log, codec: Compression, rounds: usize) {
    for round in 0..rounds {
        let values: Vec<String> = (0..4).map(|k| format!("v{round}-{k}")).collect();
        let recs: Vec<(String, Option<&str>)> = (0..4)
            .map(|k| (format!("k{}", (round + k) % 6), Some(values[k].as_str())))
            .collect();
        let refs: Vec<(&str, Option<&str>)> = recs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        log.append(&mut batch(&refs, codec, None), 0, 0).unwrap();
    }
}

#[test]
fn cleaning_keeps_the_latest_value_of_each_key_at_its_offset() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
        fill(&mut log, codec, 40);
        let before = contents(&log);
        let active_base = *log.segments.keys().next_back().unwrap();
        let stats = clean_once(&mut log, None, 1000);
        assert_eq!(
            stats.end_offset, active_base,
            "{codec:?}: cleaned up to the active segment"
        );
        let after = contents(&log);
        // Below the active segment: exactly the latest record per key (latest over the
        // whole cleaned range); the active segment is untouched.
        let cleaned_before: BTreeMap<_, _> = before
            .range(..active_base)
            .map(|(o, v)| (*o, v.clone()))
            .collect();
        let mut expected = latest(&cleaned_before);
        // A key rewritten in the active segment still has its latest cleaned record removed
        // only if the map saw a later one: the map covers the dirty part below the active
        // segment, so its latest there stays.
        expected.extend(before.range(active_base..).map(|(o, v)| (*o, v.clone())));
        assert_eq!(after, expected, "{codec:?}");
        assert!(
            stats.bytes_written < stats.bytes_read,
            "{codec:?}: {stats:?}"
        );
        // Re-encoded batches keep the codec.
        let bytes = log.read(0, 1 << 20).unwrap();
        assert_eq!(
            BatchHeader::read(&bytes).unwrap().compression(),
            Some(codec)
        );
        // A reopened log (clean shutdown or not) reads the same.
        drop(log);
        let log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
        assert_eq!(contents(&log), expected, "{codec:?} after reopening");
    }
}

#[test]
fn tombstones_survive_one_cleaning_and_go_after_delete_retention() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        delete_retention_ms: 0,
        ..compact_config()
    };
    let mut log = Log::open(dir.path(), config, 0, 0).unwrap();
    log.append(
        &mut batch(
            &[("a", Some("1")), ("b", Some("1"))],
            Compression::None,
            None,
        ),
        0,
        0,
    )
    .unwrap();
    log.append(&mut batch(&[("a", None)], Compression::None, None), 0, 0)
        .unwrap();
    fill(&mut log, Compression::None, 30);
    let first = clean_once(&mut log, None, 1000);
    let c = contents(&log);
    assert_eq!(
        c.get(&2),
        Some(&("a".to_owned(), None)),
        "the tombstone is kept by the first cleaning"
    );
    assert!(!c.contains_key(&0), "the value it deletes is gone");
    // More dirty data, and a second cleaning: the delete horizon is now the last cleaned
    // segment's time minus delete.retention.ms (0), so the tombstone goes.
    std::thread::sleep(Duration::from_millis(20));
    fill(&mut log, Compression::None, 30);
    clean_once(&mut log, Some(first.end_offset), 1000);
    let c = contents(&log);
    assert!(!c.contains_key(&2), "the tombstone is removed: {c:?}");
    assert!(c.values().all(|(k, _)| k != "a"));
    assert!(c.values().any(|(k, _)| k == "b"), "b stays");
}

#[test]
fn a_full_offset_map_cleans_part_of_the_log_and_the_next_cleaning_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    fill(&mut log, Compression::None, 40);
    let before = contents(&log);
    let stats = clean_once(&mut log, None, 3);
    let active_base = *log.segments.keys().next_back().unwrap();
    assert!(
        stats.end_offset < active_base,
        "stopped where the map filled: {stats:?}"
    );
    let mut checkpoint = stats.end_offset;
    for _ in 0..50 {
        let s = clean_once(&mut log, Some(checkpoint), 3);
        if s.end_offset == checkpoint {
            break;
        }
        checkpoint = s.end_offset;
    }
    assert_eq!(checkpoint, active_base);
    // Every surviving record is an original one at its original offset, and every key's
    // latest record is still there.
    let after = contents(&log);
    for (o, v) in &after {
        assert_eq!(before.get(o), Some(v));
    }
    for (o, v) in latest(&before) {
        assert_eq!(after.get(&o), Some(&v));
    }
}

#[test]
fn the_last_batch_of_a_producer_stays_as_an_empty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    log.append(
        &mut batch(
            &[("p", Some("1")), ("q", Some("1"))],
            Compression::None,
            Some((7, 0)),
        ),
        0,
        0,
    )
    .unwrap();
    // Overwritten by a non-idempotent producer; then enough data to roll segments.
    fill(&mut log, Compression::None, 2);
    log.append(
        &mut batch(
            &[("p", Some("2")), ("q", Some("2"))],
            Compression::None,
            None,
        ),
        0,
        0,
    )
    .unwrap();
    fill(&mut log, Compression::None, 20);
    clean_once(&mut log, None, 1000);
    let bytes = log.read(0, 1 << 20).unwrap();
    let h = BatchHeader::read(&bytes).unwrap();
    assert_eq!(
        (
            h.base_offset,
            h.last_offset(),
            h.records_count,
            h.producer_id
        ),
        (0, 1, 0, 7)
    );
}

#[test]
fn an_interrupted_swap_recovers_to_the_old_or_the_new_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    fill(&mut log, Compression::Gzip, 40);
    log.flush().unwrap();
    let before = contents(&log);
    // Crash before the commit point: only .cleaned/ exists -> the old segments stay.
    let plan = log.clean_plan(None, log.log_end_offset(), 10_000).unwrap();
    let mut throttle = Throttle::new(f64::MAX);
    let mut groups = Vec::new();
    clean(&plan, 1000, &mut throttle, 0, |g| {
        groups.push(g.clone());
        Ok(false) // "crash": nothing is installed
    })
    .unwrap();
    let group = groups.pop().unwrap();
    // clean() stops at the first refused group; rebuild its scratch state as a crash left it.
    let scratch = dir.path().join(CLEANED_DIR);
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("00000000000000000000.log"), b"partial").unwrap();
    drop(log);
    let log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    assert_eq!(contents(&log), before);
    assert!(!scratch.exists());
    // Crash after the commit point, with one old segment already removed: the swap completes.
    let plan = log.clean_plan(None, log.log_end_offset(), 10_000).unwrap();
    let mut installed = None;
    clean(&plan, 1000, &mut throttle, 0, |g| {
        // Do the commit rename and remove the first old segment, then "crash".
        let [new_log, _, _] = Segment::paths(&dir.path().join(CLEANED_DIR), g.base_offset);
        std::fs::rename(
            new_log,
            dir.path().join(swap_name(g.base_offset, g.end_offset)),
        )
        .unwrap();
        Segment::delete_files_of(dir.path(), g.old_bases[0]).unwrap();
        installed = Some(g.clone());
        Ok(false)
    })
    .unwrap();
    let g = installed.unwrap();
    assert_eq!(g.base_offset, group.base_offset);
    drop(log);
    let log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    let after = contents(&log);
    let in_group = |o: &i64| *o >= g.base_offset && *o < g.end_offset;
    let old_group: BTreeMap<_, _> = before
        .iter()
        .filter(|(o, _)| in_group(o))
        .map(|(o, v)| (*o, v.clone()))
        .collect();
    let new_group: BTreeMap<_, _> = after
        .iter()
        .filter(|(o, _)| in_group(o))
        .map(|(o, v)| (*o, v.clone()))
        .collect();
    assert!(new_group.len() < old_group.len(), "the new group is in");
    for (o, v) in &new_group {
        assert_eq!(old_group.get(o), Some(v));
    }
    let rest_before: Vec<_> = before.iter().filter(|(o, _)| !in_group(o)).collect();
    let rest_after: Vec<_> = after.iter().filter(|(o, _)| !in_group(o)).collect();
    assert_eq!(rest_before, rest_after, "the other segments are untouched");
}

#[test]
fn nothing_is_cleaned_below_the_ratio_past_the_stable_offset_or_younger_than_the_lag() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.5,
            ..compact_config()
        },
        0,
        0,
    )
    .unwrap();
    fill(&mut log, Compression::None, 40);
    let plan = log.clean_plan(None, log.log_end_offset(), 10_000).unwrap();
    assert!(plan.is_due(), "all dirty: ratio 1");
    let active = *log.segments.keys().next_back().unwrap();
    assert_eq!(plan.first_uncleanable_offset, active);
    let plan = log
        .clean_plan(Some(active - 1), log.log_end_offset(), 10_000)
        .unwrap();
    assert!(!plan.is_due(), "almost all clean: {}", plan.dirty_ratio());
    let plan = log.clean_plan(None, 10, 10_000).unwrap();
    assert_eq!(
        plan.first_uncleanable_offset, 10,
        "bounded by the high watermark"
    );
    log.set_config(LogConfig {
        min_compaction_lag_ms: 5_000,
        ..compact_config()
    });
    // Records are stamped 1000..1003; at now=5500 the first segment is too young.
    let plan = log.clean_plan(None, log.log_end_offset(), 5_500).unwrap();
    assert_eq!(plan.first_uncleanable_offset, 0);
    assert!(!plan.is_due());
    log.set_config(LogConfig {
        compact: false,
        delete: true,
        ..compact_config()
    });
    assert!(
        log.clean_plan(None, 0, 0).is_none(),
        "delete-only logs are not cleaned"
    );
}

#[test]
fn an_idle_throttle_builds_up_no_credit() {
    // 1 MB/s. After 1.5 s of idling, 3 MB must still take about 2 s (the first megabyte
    // closes the idle period; the next two are each held to the rate of their own period).
    // A throttle counting from its start would let them through in 1.5 s. Only lower bounds
    // of sleeps are asserted, which a busy machine cannot break.
    let mut throttle = Throttle::new(1.0e6);
    std::thread::sleep(Duration::from_millis(1_500));
    let started = Instant::now();
    for _ in 0..3 {
        throttle.consume(1_000_000);
        std::thread::sleep(THROTTLE_PERIOD + Duration::from_millis(10));
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1_900), "3 MB in {took:?}");
}

#[test]
fn merged_segments_keep_their_aborted_transactions_in_the_new_txnindex() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), compact_config(), 0, 0).unwrap();
    let mut entries = Vec::new();
    for i in 0..12 {
        let key = format!("k{}", i % 3);
        let info = log
            .append(
                &mut batch(&[(&key, Some("v"))], Compression::None, None),
                0,
                0,
            )
            .unwrap();
        if i % 4 == 3 {
            // As if a marker there ended an aborted transaction.
            let txn = crate::log::AbortedTxn {
                producer_id: i,
                first_offset: info.first_offset,
                last_offset: info.first_offset,
                last_stable_offset: info.first_offset + 1,
            };
            log.append_aborted_txn(&txn).unwrap();
            entries.push(txn);
        }
    }
    assert!(log.segment_count() > 2, "{}", log.segment_count());
    let before = log.read_txn_indexes().unwrap();
    assert_eq!(before, entries);
    clean_once(&mut log, None, 1024);
    assert_eq!(log.read_txn_indexes().unwrap(), entries);
    // No `.txnindex` of a merged-away segment is left behind.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".txnindex") {
            assert!(dir.path().join(format!("{stem}.log")).exists(), "{name}");
        }
    }
}
