use std::io::Write;

use records::testing::{decode_values as decode, encode_batch, tagged_values};

use super::*;

/// A producer's batch of `n` records with values `tag-i`, created from `timestamp` on.
fn batch(n: usize, tag: &str, timestamp: i64) -> Vec<u8> {
    encode_batch(&tagged_values(tag, n), timestamp, None)
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

#[test]
fn appends_get_contiguous_offsets_and_read_back_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
    let mut a = batch(3, "a", 10);
    let mut b = batch(2, "b", 20);
    assert_eq!(log.append(&mut a, 0, 1).unwrap().first_offset, 0);
    let info = log.append(&mut b, 0, 1).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(
        all,
        [a.clone(), b.clone()].concat(),
        "stored exactly as received, offsets assigned"
    );
    assert_eq!(
        decode(&all).iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    // A read starting inside a batch returns that whole batch; at the end it is empty.
    assert_eq!(log.read(4, usize::MAX).unwrap(), b);
    assert!(log.read(5, usize::MAX).unwrap().is_empty());
    assert!(matches!(
        log.read(6, 10),
        Err(LogError::OffsetOutOfRange { offset: 6, .. })
    ));
    // max_bytes returns at least one batch.
    assert_eq!(log.read(0, 1).unwrap(), a);
}

#[test]
fn an_invalid_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
    let mut good_then_bad = batch(1, "ok", 0);
    let mut bad = batch(1, "bad", 0);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    good_then_bad.extend(bad);
    assert!(matches!(
        log.append(&mut good_then_bad, 0, 0),
        Err(LogError::InvalidRecords(_))
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
    let config = LogConfig {
        max_message_bytes: 50,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0, 0).unwrap();
    assert!(matches!(
        log.append(&mut batch(5, "big", 0), 0, 0),
        Err(LogError::RecordTooLarge { .. })
    ));
}

#[test]
fn segments_roll_on_size_and_reads_cross_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    let mut expected = Vec::new();
    for i in 0..20 {
        log.append(&mut batch(2, &format!("m{i}"), i), 0, 0)
            .unwrap();
        expected.push((2 * i, format!("m{i}-0")));
        expected.push((2 * i + 1, format!("m{i}-1")));
    }
    assert!(log.segment_count() > 3, "{} segments", log.segment_count());
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.contains(&"00000000000000000000.log".to_string()));
    assert!(names.contains(&"00000000000000000000.index".to_string()));
    assert!(names.contains(&"00000000000000000000.timeindex".to_string()));
    let mut got = Vec::new();
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 150).unwrap();
        let records = decode(&bytes);
        offset = records.last().unwrap().0 + 1;
        got.extend(records);
    }
    assert_eq!(got, expected);
    assert!(
        log.segments.values().all(|s| s.index_entries() > 0),
        "sparse offset index entries every 100 bytes"
    );
    // Every offset is findable through the indexes.
    for o in 0..40 {
        assert!(
            decode(&log.read(o, 1).unwrap()).iter().any(|r| r.0 == o),
            "offset {o}"
        );
    }
}

#[test]
fn reopen_keeps_offsets_and_recovery_truncates_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
        for i in 0..10 {
            log.append(&mut batch(1, &format!("r{i}"), i), 0, 0)
                .unwrap();
        }
        log.flush().unwrap();
        assert_eq!(log.recovery_point(), 10);
    }
    let log = Log::open(dir.path(), small_segments(), 10, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    let active = log.segments.keys().next_back().copied().unwrap();
    drop(log);
    // A crash mid-write leaves half a batch at the end of the active segment.
    let half = batch(3, "torn", 0);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(format!("{active:020}.log")))
        .unwrap();
    f.write_all(&half[..half.len() / 2]).unwrap();
    drop(f);
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the torn batch is gone");
    assert_eq!(
        decode(&log.read(9, 1000).unwrap()),
        vec![(9, "r9-0".to_string())]
    );
    assert_eq!(
        log.append(&mut batch(1, "after", 0), 0, 0)
            .unwrap()
            .first_offset,
        10
    );
}

#[test]
fn recovery_drops_a_corrupt_batch_and_everything_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let sizes: Vec<usize>;
    {
        let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
        sizes = (0..3)
            .map(|i| {
                let mut b = batch(1, &format!("c{i}"), 0);
                log.append(&mut b, 0, 0).unwrap();
                b.len()
            })
            .collect();
    }
    let path = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let second_last_byte = sizes[0] + sizes[1] - 1;
    bytes[second_last_byte] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, sizes[0]);
}

/// A record whose value length is -2 (refused on produce now, stored by older versions) is
/// not corruption: a follower appends it, recovery keeps it, and it is served as it is.
#[test]
fn a_stored_batch_with_a_length_below_minus_one_recovers_and_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut old =
        records::testing::encode_batch_with_value_length(&tagged_values("old", 3), 10, 1, -2);
    {
        let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
        log.append(&mut batch(2, "before", 0), 0, 0).unwrap();
        // The follower's path: the batch as a leader serves it, at the log end.
        old[..8].copy_from_slice(&2i64.to_be_bytes());
        let info = log.append_replicated(&old, 0).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (2, 4));
        log.append(&mut batch(1, "after", 0), 0, 0).unwrap();
        // Not flushed: the reopen below recovers every segment from offset 0.
    }
    let log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 6, "recovery kept every batch");
    assert_eq!(log.read(2, 1).unwrap(), old, "served byte for byte");
    let header = records::BatchHeader::read(&old).unwrap();
    let section = records::records_section(&old).unwrap();
    let recs = records::record::records(&section, header.records_count).unwrap();
    let values: Vec<Option<&[u8]>> = recs.iter().map(|r| r.value).collect();
    assert_eq!(
        values,
        [Some(&b"old-0"[..]), None, Some(&b"old-2"[..])],
        "-2 reads as null"
    );
    assert_eq!(
        decode(&log.read(5, 1000).unwrap()),
        vec![(5, "after-0".to_string())]
    );
}

#[test]
fn retention_and_delete_records_move_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    for i in 0..20 {
        log.append(&mut batch(1, "x", 1_000 + i), 0, 0).unwrap();
    }
    let segments = log.segment_count();
    // Time: only segments whose newest record is older than retention.ms go.
    log.set_config(LogConfig {
        retention_ms: 1_000,
        ..small_segments()
    });
    assert_eq!(log.apply_retention(1_500, 20).unwrap(), 0);
    // Only segments wholly below the high watermark go.
    let active = *log.segments.keys().next_back().unwrap();
    assert!(log.apply_retention(1_000_000, active).unwrap() > 0);
    assert_eq!(
        log.segment_count(),
        1,
        "the active segment holds the high watermark"
    );
    assert!(log.log_start_offset() > 0);
    assert!(matches!(
        log.read(0, 100),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(segments > 1);

    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    for i in 0..20 {
        log.append(&mut batch(1, "y", i), 0, 0).unwrap();
    }
    assert_eq!(log.delete_records_before(7).unwrap(), 7);
    assert_eq!(log.log_start_offset(), 7);
    assert_eq!(decode(&log.read(7, 1).unwrap())[0].0, 7);
    assert!(matches!(
        log.delete_records_before(99),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn offsets_by_timestamp_use_the_time_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    for i in 0..20 {
        log.append(&mut batch(1, "t", 100 * i), 0, 0).unwrap();
    }
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 0, 0)));
    assert_eq!(log.offset_for_timestamp(450).unwrap(), Some((500, 5, 0)));
    assert_eq!(
        log.offset_for_timestamp(1_900).unwrap(),
        Some((1_900, 19, 0))
    );
    assert_eq!(log.offset_for_timestamp(1_901).unwrap(), None);
    assert_eq!(log.max_timestamp(), Some(1_900));
}

/// Issue 14: the time index is as sparse as the offset index (an entry every
/// `index.interval.bytes`, holding the largest timestamp so far), as Kafka's; it used to take
/// an entry, a write and 16 bytes of memory for every batch whose timestamp grew. Lookups by
/// time still find the first record at or after the target, timestamps out of order and after
/// a clean reopen or a recovery included.
#[test]
fn the_time_index_is_sparse_and_lookups_stay_exact() {
    let config = LogConfig {
        index_interval_bytes: 1_000,
        ..LogConfig::default()
    };
    // Mostly rising, with steps back (producers' clocks and batches interleave).
    let timestamps: Vec<i64> = (0..300i64)
        .map(|i| 100 * i - if i % 7 == 3 { 450 } else { 0 })
        .collect();
    let expect = |target: i64| {
        timestamps
            .iter()
            .position(|&ts| ts >= target)
            .map(|i| (timestamps[i], i as i64, 0))
    };
    let check = |log: &Log, when: &str| {
        for target in (-100..30_100).step_by(37) {
            assert_eq!(
                log.offset_for_timestamp(target).unwrap(),
                expect(target),
                "{when}: target {target}"
            );
        }
        assert_eq!(log.max_timestamp(), Some(29_900), "{when}");
    };
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config.clone(), 0, 0).unwrap();
    for (i, &ts) in timestamps.iter().enumerate() {
        log.append(&mut batch(1, &format!("s{i}"), ts), 0, 0)
            .unwrap();
    }
    check(&log, "written");
    log.flush().unwrap();
    drop(log);
    let index = std::fs::metadata(dir.path().join(format!("{:020}.index", 0)))
        .unwrap()
        .len();
    let time_index = std::fs::metadata(dir.path().join(format!("{:020}.timeindex", 0)))
        .unwrap()
        .len();
    let (index_entries, time_entries) = (index / 8, time_index / 12);
    assert!(
        (1..=index_entries).contains(&time_entries) && index_entries < 40,
        "{time_entries} time-index entries beside {index_entries} offset-index entries for 300 batches"
    );
    let log = Log::open(dir.path(), config.clone(), 300, 0).unwrap();
    check(&log, "reopened");
    drop(log);
    let log = Log::open(dir.path(), config, 0, 0).unwrap();
    check(&log, "recovered");
}

/// A batch of `n` keyed records with timestamps `first + 10 * i`, in `codec`.
fn timed_batch(n: i64, first: i64, codec: records::Compression) -> Vec<u8> {
    use records::builder::{BatchBuilder, BatchSpec, NewRecord};
    let mut spec = BatchSpec::new(0);
    spec.compression = codec;
    let mut b = BatchBuilder::new(spec);
    for i in 0..n {
        let key = format!("k{i}");
        b.push(&NewRecord {
            offset: i,
            timestamp: first + 10 * i,
            key: Some(key.as_bytes()),
            value: Some(b"v"),
            headers: &[],
        });
    }
    b.build()
}

#[test]
fn offsets_by_timestamp_are_the_exact_record_on_every_codec() {
    use records::Compression as C;
    for codec in [C::None, C::Gzip, C::Snappy, C::Lz4, C::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
        // Batches of 5 records: offsets 5b..5b+4 at times 1000b + 10i.
        for b in 0..6 {
            log.append(&mut timed_batch(5, 1000 * b, codec), 3, 0)
                .unwrap();
        }
        let at = |t| log.offset_for_timestamp(t).unwrap();
        assert_eq!(at(2_020), Some((2_020, 12, 3)), "{codec:?}: at a record");
        assert_eq!(
            at(2_015),
            Some((2_020, 12, 3)),
            "{codec:?}: between records"
        );
        assert_eq!(
            at(2_041),
            Some((3_000, 15, 3)),
            "{codec:?}: between batches"
        );
        assert_eq!(at(-5), Some((0, 0, 3)), "{codec:?}: before everything");
        assert_eq!(at(5_041), None, "{codec:?}: after everything");
        assert_eq!(
            log.max_timestamp_record().unwrap(),
            Some((5_040, 29, 3)),
            "{codec:?}"
        );
        // Below the log start offset nothing is answered.
        log.delete_records_before(13).unwrap();
        assert_eq!(
            log.offset_for_timestamp(2_000).unwrap(),
            Some((2_030, 13, 3))
        );
    }
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(
        dir.path(),
        LogConfig {
            log_append_time: true,
            ..LogConfig::default()
        },
        0,
        0,
    )
    .unwrap();
    let info = log.append(&mut batch(2, "lat", 5), 0, 123_456).unwrap();
    assert_eq!(info.log_append_time_ms, Some(123_456));
    let header = records::validate_record_set(&log.read(0, 1000).unwrap()).unwrap()[0].header;
    assert_eq!(header.max_timestamp, 123_456);
}

#[test]
fn truncate_to_removes_whole_batches_across_segments_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    for i in 0..10 {
        log.append(&mut batch(2, &format!("b{i}"), 10), 0, 1)
            .unwrap();
    }
    assert!(log.segment_count() > 2);
    // Offset 7 lies inside the batch 6..=7: that batch goes too.
    assert_eq!(log.truncate_to(7).unwrap(), 6);
    assert_eq!(log.log_end_offset(), 6);
    let all = log.read(0, usize::MAX).unwrap();
    let mut got: Vec<i64> = Vec::new();
    let mut offset = 0;
    let mut chunk = all;
    while !chunk.is_empty() {
        got.extend(decode(&chunk).iter().map(|r| r.0));
        offset = got.last().unwrap() + 1;
        chunk = log.read(offset, usize::MAX).unwrap();
    }
    assert_eq!(got, (0..6).collect::<Vec<_>>());
    assert_eq!(offset, 6);
    assert_eq!(
        log.append(&mut batch(1, "after", 10), 0, 1)
            .unwrap()
            .first_offset,
        6
    );
    // Reopening with recovery finds the same log.
    drop(log);
    let log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 7);
    // Truncating at or past the end changes nothing.
    let mut log = log;
    assert_eq!(log.truncate_to(100).unwrap(), 7);
}

#[test]
fn append_replicated_keeps_offsets_and_refuses_going_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = Log::open(&dir.path().join("a"), LogConfig::default(), 0, 0).unwrap();
    let mut follower = Log::open(&dir.path().join("b"), LogConfig::default(), 0, 0).unwrap();
    leader.append(&mut batch(3, "x", 10), 4, 1).unwrap();
    leader.append(&mut batch(2, "y", 10), 4, 1).unwrap();
    let bytes = leader.read(0, usize::MAX).unwrap();
    let info = follower.append_replicated(&bytes, 1).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(follower.read(0, usize::MAX).unwrap(), bytes);
    assert!(matches!(
        follower.append_replicated(&bytes, 1),
        Err(LogError::NotContiguous {
            expected: 5,
            found: 0
        })
    ));
    // A gap (batches the leader's cleaner removed) is taken, offsets kept.
    leader.append(&mut batch(1, "z", 10), 4, 1).unwrap();
    leader.append(&mut batch(1, "w", 10), 4, 1).unwrap();
    let last = leader.read(6, usize::MAX).unwrap();
    let info = follower.append_replicated(&last, 1).unwrap();
    assert_eq!(info.first_offset, 6);
    assert_eq!(follower.log_end_offset(), 7);
}

#[test]
fn retention_never_deletes_from_a_compact_only_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 1,
        retention_bytes: 1,
        compact: true,
        delete: false,
        ..small_segments()
    };
    let mut log = Log::open(dir.path(), config.clone(), 0, 0).unwrap();
    for i in 0..20 {
        log.append(&mut batch(1, "c", i), 0, 0).unwrap();
    }
    let segments = log.segment_count();
    assert!(segments > 2);
    assert_eq!(log.apply_retention(1_000_000, 20).unwrap(), 0);
    assert_eq!((log.segment_count(), log.log_start_offset()), (segments, 0));
    // compact,delete: retention applies again.
    log.set_config(LogConfig {
        delete: true,
        ..config
    });
    assert!(log.apply_retention(1_000_000, 20).unwrap() > 0);
}

/// Kafka rolls the active segment and deletes it once it is past retention (under `delete`
/// and `compact,delete` alike): the log then starts and ends at the old log end, and the next
/// record gets the next offset.
#[test]
fn retention_deletes_the_active_segment_once_past_retention() {
    for compact in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            retention_ms: 1_000,
            compact,
            delete: true,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path(), config, 0, 0).unwrap();
        for i in 0..3 {
            log.append(&mut batch(100, "r", 10_000 + i), 0, 0).unwrap();
        }
        assert_eq!(log.segment_count(), 1, "300 records in the active segment");
        assert_eq!(
            log.apply_retention(10_500, 300).unwrap(),
            0,
            "not yet expired"
        );
        assert_eq!(
            log.apply_retention(1_000_000, 299).unwrap(),
            0,
            "records above the high watermark stay"
        );
        assert_eq!(
            log.apply_retention(1_000_000, 300).unwrap(),
            1,
            "compact={compact}"
        );
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (300, 300));
        assert_eq!(log.segment_count(), 1);
        assert!(matches!(
            log.read(0, 100),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert!(log.read(300, 100).unwrap().is_empty());
        assert_eq!(
            log.apply_retention(2_000_000, 300).unwrap(),
            0,
            "an empty active segment stays"
        );
        // The new segment's .log exists, so a restart starts the log at 300 again.
        assert_eq!(file_names(dir.path()), ["00000000000000000300.log"]);
        // Offsets go on from the old end, after a restart too.
        let info = log.append(&mut batch(1, "next", 5), 0, 0).unwrap();
        assert_eq!(info.first_offset, 300);
        drop(log);
        let log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (300, 301));
        assert_eq!(
            decode(&log.read(300, 1000).unwrap()),
            vec![(300, "next-0".to_string())]
        );
    }
}

/// By `retention.bytes` the active segment goes too when the log is over it by the whole
/// segment (Kafka's size predicate over every segment below the high watermark).
#[test]
fn retention_bytes_can_delete_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: 0,
        compact: true,
        delete: true,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, 0, 0).unwrap();
    log.append(&mut batch(10, "b", 0), 0, 0).unwrap();
    assert_eq!(log.apply_retention(0, 10).unwrap(), 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
}

#[test]
fn truncate_fully_and_start_at_restarts_an_empty_log_past_the_old_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    for i in 0..6 {
        log.append(&mut batch(2, &format!("b{i}"), 10), 0, 1)
            .unwrap();
    }
    assert!(log.segment_count() > 1);
    log.truncate_fully_and_start_at(50).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(log.segment_count(), 1);
    assert!(log.read(0, 100).is_err(), "the old offsets are gone");
    // Replicated batches continue at the new start, and a reopen finds the same log.
    let mut next = batch(3, "leader", 10);
    let batches = records::validate_record_set(&next).unwrap();
    records::assign_offsets(&mut next, &batches, 50, 4, None);
    log.append_replicated(&next, 1).unwrap();
    drop(log);
    let log = Log::open(dir.path(), small_segments(), 0, 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 53));
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn an_empty_log_creates_its_segment_files_on_the_first_append() {
    for create_new in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = if create_new {
            Log::create_new(dir.path(), LogConfig::default())
        } else {
            Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap()
        };
        // Reading, flushing and truncating an empty log need no file.
        assert!(log.read(0, usize::MAX).unwrap().is_empty());
        log.flush().unwrap();
        log.truncate_to(0).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        assert!(file_names(dir.path()).is_empty(), "{create_new}");
        drop(log);
        // A restart finds no segment and starts empty again, still without files.
        let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
        assert_eq!(log.log_end_offset(), 0);
        assert!(file_names(dir.path()).is_empty());
        let mut a = batch(3, "a", 10);
        assert_eq!(log.append(&mut a, 0, 1).unwrap().first_offset, 0);
        assert_eq!(log.read(0, usize::MAX).unwrap(), a);
        assert!(file_names(dir.path()).contains(&"00000000000000000000.log".to_string()));
        log.flush().unwrap();
        drop(log);
        let log = Log::open_clean(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.read(0, usize::MAX).unwrap(), a);
    }
}

#[test]
fn an_empty_log_at_a_later_start_offset_starts_there_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default(), 7, 7).unwrap();
    assert_eq!(log.log_end_offset(), 7);
    drop(log);
    assert!(file_names(dir.path()).is_empty());
    let mut log = Log::open(dir.path(), LogConfig::default(), 7, 7).unwrap();
    let mut a = batch(1, "a", 10);
    assert_eq!(log.append(&mut a, 0, 1).unwrap().first_offset, 7);
    assert!(file_names(dir.path()).contains(&"00000000000000000007.log".to_string()));
}

#[test]
fn index_files_left_without_their_log_are_not_ignored() {
    // A segment's `.log` is gone but an index of it is there (a removal cut short): the log
    // opens that segment as before (checking the index against an empty `.log`).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000000.index"), [0u8; 8]).unwrap();
    let log = Log::open(dir.path(), LogConfig::default(), 0, 0);
    assert!(file_names(dir.path()).contains(&"00000000000000000000.log".to_string()));
    drop(log);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000000.timeindex"), []).unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0, 0).unwrap();
    let mut a = batch(2, "a", 10);
    log.append(&mut a, 0, 1).unwrap();
    assert_eq!(log.read(0, usize::MAX).unwrap(), a);
}
