use std::time::Duration;

use records::testing::{decode_values as values, encode_batch, tagged_values};

use super::*;

/// A batch of `n` records; with `producer` = (id, epoch, base sequence) an idempotent one.
fn batch(n: usize, tag: &str, producer: Option<(i64, i16, i32)>) -> Vec<u8> {
    encode_batch(&tagged_values(tag, n), 1_000, producer)
}

fn tp() -> TopicPartition {
    TopicPartition::new("t".parse().unwrap(), 0)
}

fn leader(rm: &ReplicaManager, dir: &Path) -> Arc<Partition> {
    rm.become_replica(
        &tp(),
        &dir.join("t-0"),
        PartitionConfig::default(),
        Role::Leader { leader_epoch: 1 },
        0,
    )
    .unwrap()
}

#[test]
fn append_then_read_moves_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::new(&[dir.path().to_owned()]).unwrap();
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 0);
    let r = rm.append(&tp(), &mut batch(3, "a", None), 5).unwrap();
    assert_eq!(r.base_offset, 0);
    assert_eq!(r.log_append_time_ms, -1);
    let r = rm.append(&tp(), &mut batch(2, "b", None), 5).unwrap();
    assert_eq!(r.base_offset, 3);
    assert_eq!(p.high_watermark(), 5);
    let read = p.read(0, 1 << 20).unwrap();
    assert_eq!(read.high_watermark, 5);
    assert_eq!(read.last_stable_offset, 5);
    let got = values(&read.records);
    assert_eq!(got.len(), 5);
    assert_eq!(got[3], (3, "b-0".to_owned()));
    assert!(p.read(5, 100).unwrap().records.is_empty());
    let err = p.read(6, 100).unwrap_err();
    assert_eq!(err.response_error(), ResponseError::OffsetOutOfRange);
    let epoch = Some(p.role().leader_epoch());
    assert_eq!(p.offset_for(-2, false).unwrap(), (-1, 0, epoch));
    assert_eq!(p.offset_for(-1, false).unwrap(), (-1, 5, epoch));
    // The exact record: batch "b" starts at offset 3 with timestamps 1000, 1001.
    assert_eq!(p.offset_for(1_001, false).unwrap(), (1_001, 1, epoch));
    assert_eq!(p.offset_for(99_999, false).unwrap(), (-1, -1, None));
    assert_eq!(p.offset_for(0, true).unwrap(), (1_002, 2, epoch));
    assert_eq!(p.delete_records_before(2).unwrap(), 2);
    assert_eq!(p.offset_for(-2, false).unwrap(), (-1, 2, epoch));
    assert_eq!(
        p.read(1, 100).unwrap_err().response_error(),
        ResponseError::OffsetOutOfRange
    );
}

#[test]
fn errors_map_to_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::new(&[dir.path().to_owned()]).unwrap();
    let mut bad = batch(1, "x", None);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert_eq!(
        rm.append(&tp(), &mut bad.clone(), 0)
            .unwrap_err()
            .response_error(),
        ResponseError::UnknownTopicOrPartition
    );
    leader(&rm, dir.path());
    assert_eq!(
        rm.append(&tp(), &mut bad, 0).unwrap_err().response_error(),
        ResponseError::CorruptMessage
    );
    // A v2 batch relabelled magic 1 reads as a magic 1 message whose CRC-32 is wrong;
    // real magic 0/1 sets are converted up (records::validate tests them).
    let mut old = batch(1, "x", None);
    old[16] = 1; // magic
    assert_eq!(
        rm.append(&tp(), &mut old, 0).unwrap_err().response_error(),
        ResponseError::CorruptMessage
    );
    let small = PartitionConfig {
        log: storage::log::LogConfig {
            max_message_bytes: 10,
            ..Default::default()
        },
        ..PartitionConfig::default()
    };
    rm.set_topic_config(&tp().topic, &small);
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "x", None), 0)
            .unwrap_err()
            .response_error(),
        ResponseError::MessageTooLarge
    );
    rm.become_replica(
        &tp(),
        &dir.path().join("t-0"),
        PartitionConfig::default(),
        Role::Follower { leader_epoch: 2 },
        0,
    )
    .unwrap();
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "x", None), 0)
            .unwrap_err()
            .response_error(),
        ResponseError::NotLeaderOrFollower
    );
}

#[test]
fn idempotent_retries_are_not_appended_twice_even_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = ReplicaManager::new(&dirs).unwrap();
        leader(&rm, dir.path());
        let first = batch(2, "a", Some((42, 0, 0)));
        assert_eq!(
            rm.append(&tp(), &mut first.clone(), 0).unwrap().base_offset,
            0
        );
        let second = batch(2, "b", Some((42, 0, 2)));
        assert_eq!(
            rm.append(&tp(), &mut second.clone(), 0)
                .unwrap()
                .base_offset,
            2
        );
        let dup = rm.append(&tp(), &mut first.clone(), 0).unwrap();
        assert!(dup.duplicate);
        assert_eq!(dup.base_offset, 0);
        assert_eq!(
            rm.append(&tp(), &mut batch(1, "gap", Some((42, 0, 9))), 0)
                .unwrap_err()
                .response_error(),
            ResponseError::OutOfOrderSequenceNumber
        );
        rm.shutdown(&dirs).unwrap();
    }
    // A new manager (a restart) rebuilds the producer state from the log.
    let rm = ReplicaManager::new(&dirs).unwrap();
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 4);
    let dup = rm
        .append(&tp(), &mut batch(2, "b", Some((42, 0, 2))), 0)
        .unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.base_offset, 2);
    assert_eq!(p.high_watermark(), 4);
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "c", Some((42, 0, 4))), 0)
            .unwrap()
            .base_offset,
        4
    );
    let epochs = std::fs::read_to_string(dir.path().join("t-0/leader-epoch-checkpoint")).unwrap();
    assert_eq!(epochs, "0\n1\n1 0\n");
    let rp = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(rp, "0\n1\nt 0 4\n");
}

#[tokio::test]
async fn appends_wake_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::new(&[dir.path().to_owned()]).unwrap();
    leader(&rm, dir.path());
    let mut rx = rm.subscribe_appends();
    rx.borrow_and_update();
    let rm2 = rm.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        rm2.append(&tp(), &mut batch(1, "x", None), 0).unwrap();
    });
    tokio::time::timeout(Duration::from_secs(5), rx.changed())
        .await
        .expect("woken by the append")
        .unwrap();
    writer.await.unwrap();
    // A duplicate or a failed append does not wake anyone.
    assert!(!rx.has_changed().unwrap());
}

#[test]
fn clean_shutdown_marker_is_written_and_consumed_by_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let marker = dir.path().join(CLEAN_SHUTDOWN_FILE);
    {
        let rm = ReplicaManager::new(&dirs).unwrap();
        leader(&rm, dir.path());
        rm.append(&tp(), &mut batch(3, "a", None), 0).unwrap();
        rm.shutdown(&dirs).unwrap();
    }
    assert!(marker.exists());
    let rm = ReplicaManager::new(&dirs).unwrap();
    assert!(
        !marker.exists(),
        "only the first start after a clean shutdown trusts it"
    );
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 3);
    rm.checkpoint(&dirs).unwrap();
    let rp = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(
        rp, "0\n1\nt 0 3\n",
        "a clean open starts with everything flushed"
    );
}

#[test]
fn a_start_after_a_crash_truncates_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = ReplicaManager::new(&dirs).unwrap();
        leader(&rm, dir.path());
        rm.append(&tp(), &mut batch(3, "a", None), 0).unwrap();
        // No shutdown: a crash. Half a batch was written after the last append.
    }
    let segment = dir.path().join("t-0/00000000000000000000.log");
    let torn = batch(2, "torn", None);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut file, &torn[..torn.len() / 2]).unwrap();
    drop(file);
    let rm = ReplicaManager::new(&dirs).unwrap();
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "b", None), 0)
            .unwrap()
            .base_offset,
        3
    );
    let all = p.read(0, 1 << 20).unwrap();
    records::validate_record_set(&all.records).unwrap();
    assert_eq!(values(&all.records).len(), 4);
}

#[test]
fn flush_ms_fsyncs_on_the_scheduled_pass() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let rm = ReplicaManager::new(&dirs).unwrap();
    let config = PartitionConfig {
        flush_ms: Some(1_000),
        ..PartitionConfig::default()
    };
    rm.become_replica(
        &tp(),
        &dir.path().join("t-0"),
        config,
        Role::Leader { leader_epoch: 0 },
        0,
    )
    .unwrap();
    rm.append(&tp(), &mut batch(2, "a", None), 0).unwrap();
    let recovery_point = || {
        rm.checkpoint(&dirs).unwrap();
        std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap()
    };
    rm.flush_due(500);
    assert_eq!(recovery_point(), "0\n1\nt 0 0\n", "not due yet");
    rm.flush_due(1_000);
    assert_eq!(recovery_point(), "0\n1\nt 0 2\n");
}

#[test]
fn the_high_watermark_waits_for_every_in_sync_follower() {
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::new(&[dir.path().to_owned()]).unwrap();
    let p = leader(&rm, dir.path());
    p.set_isr(1, vec![1, 2, 3]);
    rm.append(&tp(), &mut batch(3, "a", None), 0).unwrap();
    // Nothing is visible to consumers until the followers have it.
    assert_eq!(p.high_watermark(), 0);
    assert!(p.read(0, 1 << 20).unwrap().records.is_empty());
    assert_eq!(p.offset_for(-1, false).unwrap().1, 0);
    let (read, moved) = p.read_for_follower(2, 0, 1 << 20).unwrap();
    assert!(!moved);
    assert_eq!(
        values(&read.records).len(),
        3,
        "followers read up to the log end"
    );
    rm.read_for_follower(&tp(), 2, 3, 1 << 20).unwrap();
    assert_eq!(p.high_watermark(), 0, "broker 3 has nothing yet");
    let (_, moved) = p.read_for_follower(3, 2, 1 << 20).unwrap();
    assert!(moved);
    assert_eq!(p.high_watermark(), 2);
    assert_eq!(
        values(&p.read(0, 1 << 20).unwrap().records).len(),
        0,
        "whole batches below the HW only"
    );
    p.read_for_follower(3, 3, 1 << 20).unwrap();
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(values(&p.read(0, 1 << 20).unwrap().records).len(), 3);
    // A follower that left the ISR no longer holds the high watermark back.
    rm.append(&tp(), &mut batch(1, "b", None), 0).unwrap();
    p.read_for_follower(2, 4, 1 << 20).unwrap();
    assert_eq!(p.high_watermark(), 3);
    assert!(p.set_isr(1, vec![1, 2]));
    assert_eq!(p.high_watermark(), 4);
}

#[test]
fn a_follower_appends_the_leaders_batches_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let leader_rm = ReplicaManager::new(&[dir.path().join("a")]).unwrap();
    let follower_rm = ReplicaManager::new(&[dir.path().join("b")]).unwrap();
    let l = leader(&leader_rm, &dir.path().join("a"));
    let f = follower_rm
        .become_replica(
            &tp(),
            &dir.path().join("b/t-0"),
            PartitionConfig::default(),
            Role::Follower { leader_epoch: 1 },
            0,
        )
        .unwrap();
    leader_rm
        .append(&tp(), &mut batch(2, "a", Some((9, 0, 0))), 0)
        .unwrap();
    leader_rm
        .append(&tp(), &mut batch(3, "b", None), 0)
        .unwrap();
    let read = l
        .read_for_follower(2, f.log_end_offset(), 1 << 20)
        .unwrap()
        .0;
    f.append_as_follower(&read.records, read.high_watermark, 0)
        .unwrap();
    assert_eq!(f.log_end_offset(), 5);
    assert_eq!(f.high_watermark(), 5);
    // Replicated bytes are identical, so the segment files are too.
    let a = std::fs::read(dir.path().join("a/t-0/00000000000000000000.log")).unwrap();
    let b = std::fs::read(dir.path().join("b/t-0/00000000000000000000.log")).unwrap();
    assert_eq!(a, b);
    // A batch that does not start at the follower's end is refused; leaders refuse it too.
    assert!(f.append_as_follower(&read.records, 5, 0).is_err());
    assert_eq!(
        l.append_as_follower(&read.records, 5, 0)
            .unwrap_err()
            .response_error(),
        ResponseError::NotLeaderOrFollower
    );
    // The follower's producer state came along: it dedups after a failover.
    f.set_role(Role::Leader { leader_epoch: 2 }).unwrap();
    let dup = f.append(&mut batch(2, "a", Some((9, 0, 0))), 0).unwrap();
    assert!(dup.duplicate);
}

#[tokio::test]
async fn acks_all_waits_for_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::new(&[dir.path().to_owned()]).unwrap();
    let p = leader(&rm, dir.path());
    p.set_isr(1, vec![1, 2]);
    let r = rm.append(&tp(), &mut batch(2, "a", None), 0).unwrap();
    let soon = tokio::time::Instant::now() + Duration::from_millis(50);
    assert!(
        !rm.wait_for_high_watermark(&tp(), r.last_offset + 1, soon)
            .await
    );
    let rm2 = rm.clone();
    let follower = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        rm2.read_for_follower(&tp(), 2, 2, 1 << 20).unwrap();
    });
    let later = tokio::time::Instant::now() + Duration::from_secs(5);
    assert!(
        rm.wait_for_high_watermark(&tp(), r.last_offset + 1, later)
            .await
    );
    follower.await.unwrap();
}

#[test]
fn a_demoted_leader_truncates_to_its_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let rm = ReplicaManager::new(&dirs).unwrap();
    let p = leader(&rm, dir.path());
    p.set_isr(1, vec![1, 2]);
    rm.append(&tp(), &mut batch(2, "a", Some((5, 0, 0))), 0)
        .unwrap();
    rm.read_for_follower(&tp(), 2, 2, 1 << 20).unwrap();
    rm.append(&tp(), &mut batch(3, "b", Some((5, 0, 2))), 0)
        .unwrap();
    assert_eq!((p.high_watermark(), p.log_end_offset()), (2, 5));
    rm.checkpoint(&dirs).unwrap();
    let hw = std::fs::read_to_string(dir.path().join(REPLICATION_OFFSET_CHECKPOINT)).unwrap();
    assert_eq!(hw, "0\n1\nt 0 2\n");
    // The controller makes broker 2 the leader: what only this broker had goes.
    let f = rm
        .become_replica(
            &tp(),
            &dir.path().join("t-0"),
            PartitionConfig::default(),
            Role::Follower { leader_epoch: 2 },
            0,
        )
        .unwrap();
    assert_eq!(f.log_end_offset(), 2);
    // The producer state was rebuilt: the truncated batch may be written again.
    f.set_role(Role::Leader { leader_epoch: 3 }).unwrap();
    let again = f.append(&mut batch(3, "b", Some((5, 0, 2))), 0).unwrap();
    assert!(!again.duplicate);
    assert_eq!(again.base_offset, 2);
}

#[test]
fn a_follower_restarts_from_its_checkpointed_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let follower = |rm: &ReplicaManager| {
        rm.become_replica(
            &tp(),
            &dir.path().join("t-0"),
            PartitionConfig::default(),
            Role::Follower { leader_epoch: 1 },
            0,
        )
        .unwrap()
    };
    {
        let source_dir = tempfile::tempdir().unwrap();
        let source = ReplicaManager::new(&[source_dir.path().to_owned()]).unwrap();
        let l = leader(&source, source_dir.path());
        source.append(&tp(), &mut batch(4, "a", None), 0).unwrap();
        let rm = ReplicaManager::new(&dirs).unwrap();
        let f = follower(&rm);
        let read = l.read_for_follower(2, 0, 1 << 20).unwrap().0;
        // The leader's high watermark was 4 when it answered, but say it was 0: nothing of
        // what was fetched is known to be committed.
        f.append_as_follower(&read.records, 0, 0).unwrap();
        assert_eq!((f.log_end_offset(), f.high_watermark()), (4, 0));
        f.append_as_follower(&[], 3, 0).unwrap();
        rm.shutdown(&dirs).unwrap();
    }
    let rm = ReplicaManager::new(&dirs).unwrap();
    let f = follower(&rm);
    // Restarted as a follower: truncated to the checkpointed high watermark (a whole batch
    // holding offset 3 goes).
    assert_eq!(f.high_watermark(), 0);
    assert_eq!(f.log_end_offset(), 0);
}
