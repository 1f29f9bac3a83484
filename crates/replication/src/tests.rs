use std::time::Duration;

use proptest::prelude::*;
use records::testing::{decode_values as values, encode_batch, tagged_values};

use super::*;
use crate::isr::IsrState;

/// A batch of `n` records; with `producer` = (id, epoch, base sequence) an idempotent one.
fn batch(n: usize, tag: &str, producer: Option<(i64, i16, i32)>) -> Vec<u8> {
    encode_batch(&tagged_values(tag, n), 1_000, producer)
}

fn tp() -> TopicPartition {
    TopicPartition::new("t".parse().unwrap(), 0)
}

/// `replica.lag.time.max.ms` of the managers built here.
const LAG: i64 = 10_000;

/// A manager for broker `id` over one log dir.
fn manager(id: i32, dir: &Path) -> ReplicaManager {
    ReplicaManager::new(
        &[dir.to_owned()],
        ReplicationConfig {
            broker_id: id,
            replica_lag_time_max_ms: LAG,
            ..ReplicationConfig::default()
        },
    )
    .unwrap()
}

fn leadership(leader: i32, epoch: i32, isr: &[i32], partition_epoch: i32) -> PartitionLeadership {
    PartitionLeadership {
        leader,
        leader_epoch: epoch,
        isr: isr.to_vec(),
        partition_epoch,
        replicas: vec![1, 2, 3],
    }
}

/// Applies a LeaderAndIsr for t-0 at `now` (followers get no fetcher: no leader endpoint).
fn apply(
    rm: &ReplicaManager,
    dir: &Path,
    l: &PartitionLeadership,
    now: i64,
) -> Result<Transition, ReplicationError> {
    rm.become_leader_or_follower(&tp(), &dir.join("t-0"), config(), l, None, now)
}

fn config() -> PartitionConfig {
    PartitionConfig {
        min_insync_replicas: 1,
        ..PartitionConfig::default()
    }
}

/// Broker 1 leading t-0 alone at epoch 1.
fn leader(rm: &ReplicaManager, dir: &Path) -> Arc<Partition> {
    apply(rm, dir, &leadership(1, 1, &[1], 0), 0).unwrap();
    rm.get(&tp()).unwrap()
}

/// Broker 1 leading t-0 at epoch 1 with ISR [1, 2, 3] at time 0.
fn leader_of_three(rm: &ReplicaManager, dir: &Path) -> Arc<Partition> {
    apply(rm, dir, &leadership(1, 1, &[1, 2, 3], 0), 0).unwrap();
    rm.get(&tp()).unwrap()
}

/// The controller accepts every pending ISR change (as the real one would, bumping the
/// partition epoch).
fn controller_accepts(rm: &ReplicaManager) {
    for item in rm.pending_isr_changes() {
        rm.inner.alter_partition.clear_pending(&item.tp);
        let answer = AlterIsrResult {
            leader: 1,
            leader_epoch: item.leader_epoch,
            isr: item.new_isr.clone(),
            partition_epoch: item.partition_epoch + 1,
        };
        rm.on_alter_partition_answer(&item, Ok(answer));
    }
}

fn read(p: &Partition, offset: i64) -> ReadResult {
    p.read(offset, 1 << 20, -1).unwrap()
}

#[test]
fn append_then_read_moves_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 0);
    let r = rm.append(&tp(), &mut batch(3, "a", None), 1, 5).unwrap();
    assert_eq!(r.base_offset, 0);
    assert_eq!(r.log_append_time_ms, -1);
    let r = rm.append(&tp(), &mut batch(2, "b", None), 1, 5).unwrap();
    assert_eq!(r.base_offset, 3);
    assert_eq!(p.high_watermark(), 5);
    let all = read(&p, 0);
    assert_eq!(all.high_watermark, 5);
    assert_eq!(all.last_stable_offset, 5);
    let got = values(&all.records);
    assert_eq!(got.len(), 5);
    assert_eq!(got[3], (3, "b-0".to_owned()));
    assert!(read(&p, 5).records.is_empty());
    let err = p.read(6, 100, -1).unwrap_err();
    assert_eq!(err.response_error(), ResponseError::OffsetOutOfRange);
    let epoch = Some(p.leader_epoch());
    assert_eq!(
        p.offset_for(-2, false, -1, OffsetsReader::Client).unwrap(),
        (-1, 0, epoch)
    );
    assert_eq!(
        p.offset_for(-1, false, -1, OffsetsReader::Client).unwrap(),
        (-1, 5, epoch)
    );
    assert_eq!(
        p.offset_for(-1, false, -1, OffsetsReader::Replica).unwrap(),
        (-1, 5, epoch)
    );
    // The exact record: batch "b" starts at offset 3 with timestamps 1000, 1001.
    assert_eq!(
        p.offset_for(1_001, false, -1, OffsetsReader::Client)
            .unwrap(),
        (1_001, 1, epoch)
    );
    assert_eq!(
        p.offset_for(99_999, false, -1, OffsetsReader::Client)
            .unwrap(),
        (-1, -1, None)
    );
    assert_eq!(
        p.offset_for(0, true, -1, OffsetsReader::Client).unwrap(),
        (1_002, 2, epoch)
    );
    assert_eq!(
        p.offset_for(-1, false, 0, OffsetsReader::Client)
            .unwrap_err()
            .response_error(),
        ResponseError::FencedLeaderEpoch
    );
    assert_eq!(p.delete_records_before(2).unwrap(), 2);
    assert_eq!(
        p.offset_for(-2, false, -1, OffsetsReader::Client).unwrap(),
        (-1, 2, epoch)
    );
    assert_eq!(
        p.read(1, 100, -1).unwrap_err().response_error(),
        ResponseError::OffsetOutOfRange
    );
    assert_eq!(
        p.leader_epoch_entries(),
        vec![(1, 2)],
        "the log start moved the first epoch"
    );
}

#[test]
fn errors_map_to_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let mut bad = batch(1, "x", None);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let code = |r: Result<AppendResult, ReplicationError>| r.unwrap_err().response_error();
    assert_eq!(
        code(rm.append(&tp(), &mut bad.clone(), 1, 0)),
        ResponseError::UnknownTopicOrPartition
    );
    let p = leader(&rm, dir.path());
    assert_eq!(
        code(rm.append(&tp(), &mut bad, 1, 0)),
        ResponseError::CorruptMessage
    );
    // A v2 batch relabelled magic 1 reads as a magic 1 message whose CRC-32 is wrong;
    // real magic 0/1 sets are converted up (records::validate tests them).
    let mut old = batch(1, "x", None);
    old[16] = 1; // magic
    assert_eq!(
        code(rm.append(&tp(), &mut old, 1, 0)),
        ResponseError::CorruptMessage
    );
    let small = PartitionConfig {
        log: storage::log::LogConfig {
            max_message_bytes: 10,
            ..Default::default()
        },
        ..config()
    };
    rm.set_topic_config(&tp().topic, &small);
    assert_eq!(
        code(rm.append(&tp(), &mut batch(1, "x", None), 1, 0)),
        ResponseError::MessageTooLarge
    );
    rm.set_topic_config(&tp().topic, &config());
    // Requests naming another leader epoch are fenced (older) or unknown (newer).
    assert_eq!(
        p.read(0, 100, 0).unwrap_err().response_error(),
        ResponseError::FencedLeaderEpoch
    );
    assert_eq!(
        p.read(0, 100, 2).unwrap_err().response_error(),
        ResponseError::UnknownLeaderEpoch
    );
    assert!(p.read(0, 100, 1).is_ok());
    apply(&rm, dir.path(), &leadership(2, 2, &[2], 1), 0).unwrap();
    assert_eq!(
        code(rm.append(&tp(), &mut batch(1, "x", None), 1, 0)),
        ResponseError::NotLeaderOrFollower
    );
}

#[test]
fn idempotent_retries_are_not_appended_twice_even_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = manager(1, dir.path());
        leader(&rm, dir.path());
        let first = batch(2, "a", Some((42, 0, 0)));
        assert_eq!(
            rm.append(&tp(), &mut first.clone(), 1, 0)
                .unwrap()
                .base_offset,
            0
        );
        let second = batch(2, "b", Some((42, 0, 2)));
        assert_eq!(
            rm.append(&tp(), &mut second.clone(), 1, 0)
                .unwrap()
                .base_offset,
            2
        );
        let dup = rm.append(&tp(), &mut first.clone(), 1, 0).unwrap();
        assert!(dup.duplicate);
        assert_eq!(dup.base_offset, 0);
        assert_eq!(
            rm.append(&tp(), &mut batch(1, "gap", Some((42, 0, 9))), 1, 0)
                .unwrap_err()
                .response_error(),
            ResponseError::OutOfOrderSequenceNumber
        );
        rm.shutdown(&dirs).unwrap();
    }
    // A new manager (a restart) rebuilds the producer state from the log.
    let rm = manager(1, dir.path());
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 4);
    let dup = rm
        .append(&tp(), &mut batch(2, "b", Some((42, 0, 2))), 1, 0)
        .unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.base_offset, 2);
    assert_eq!(p.high_watermark(), 4);
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "c", Some((42, 0, 4))), 1, 0)
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
    let rm = manager(1, dir.path());
    leader(&rm, dir.path());
    let mut rx = rm.subscribe_appends();
    rx.borrow_and_update();
    let rm2 = rm.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        rm2.append(&tp(), &mut batch(1, "x", None), 1, 0).unwrap();
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
        let rm = manager(1, dir.path());
        leader(&rm, dir.path());
        rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
        rm.shutdown(&dirs).unwrap();
    }
    assert!(marker.exists());
    let rm = manager(1, dir.path());
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
    {
        let rm = manager(1, dir.path());
        leader(&rm, dir.path());
        rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
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
    let rm = manager(1, dir.path());
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "b", None), 1, 0)
            .unwrap()
            .base_offset,
        3
    );
    let all = read(&p, 0);
    records::validate_record_set(&all.records).unwrap();
    assert_eq!(values(&all.records).len(), 4);
}

#[test]
fn flush_ms_fsyncs_on_the_scheduled_pass() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let rm = manager(1, dir.path());
    let flushing = PartitionConfig {
        flush_ms: Some(1_000),
        ..config()
    };
    rm.become_leader_or_follower(
        &tp(),
        &dir.path().join("t-0"),
        flushing,
        &leadership(1, 0, &[1], 0),
        None,
        0,
    )
    .unwrap();
    rm.append(&tp(), &mut batch(2, "a", None), 1, 0).unwrap();
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
    let rm = manager(1, dir.path());
    let p = leader_of_three(&rm, dir.path());
    rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
    // Nothing is visible to consumers until the followers have it.
    assert_eq!(p.high_watermark(), 0);
    assert!(read(&p, 0).records.is_empty());
    assert_eq!(
        p.offset_for(-1, false, -1, OffsetsReader::Client)
            .unwrap()
            .1,
        0
    );
    let r = rm.read_for_follower(&tp(), 2, 0, 1 << 20, 1, 1).unwrap();
    assert_eq!(
        values(&r.records).len(),
        3,
        "followers read up to the log end"
    );
    rm.read_for_follower(&tp(), 2, 3, 1 << 20, 1, 2).unwrap();
    assert_eq!(p.high_watermark(), 0, "broker 3 has nothing yet");
    rm.read_for_follower(&tp(), 3, 2, 1 << 20, 1, 3).unwrap();
    assert_eq!(p.high_watermark(), 2);
    assert_eq!(
        values(&read(&p, 0).records).len(),
        0,
        "whole batches below the HW only"
    );
    rm.read_for_follower(&tp(), 3, 3, 1 << 20, 1, 4).unwrap();
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(values(&read(&p, 0).records).len(), 3);
    // Fetches from a broker that is not a replica are refused.
    assert_eq!(
        rm.read_for_follower(&tp(), 7, 3, 1 << 20, 1, 4)
            .unwrap_err()
            .response_error(),
        ResponseError::NotLeaderOrFollower
    );
    assert!(rm.pending_isr_changes().is_empty(), "nobody left or joined");
}

#[test]
fn a_follower_that_lags_leaves_the_isr_once_the_controller_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let p = leader_of_three(&rm, dir.path());
    rm.append(&tp(), &mut batch(4, "a", None), 1, 100).unwrap();
    // Broker 2 keeps up; broker 3 never fetches: it holds the high watermark at 0.
    rm.read_for_follower(&tp(), 2, 4, 1 << 20, 1, 200).unwrap();
    assert_eq!(p.high_watermark(), 0);
    rm.maybe_shrink_isrs(LAG);
    assert!(
        rm.pending_isr_changes().is_empty(),
        "not lagging for long enough yet"
    );
    rm.maybe_shrink_isrs(LAG + 1);
    let pending = rm.pending_isr_changes();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (
            pending[0].new_isr.clone(),
            pending[0].leader_epoch,
            pending[0].partition_epoch
        ),
        (vec![1, 2], 1, 0)
    );
    // The leader keeps the old ISR until the controller accepts the shrink.
    assert_eq!(p.isr(), vec![1, 2, 3]);
    assert_eq!(p.high_watermark(), 0);
    rm.maybe_shrink_isrs(LAG * 5);
    assert_eq!(
        rm.pending_isr_changes().len(),
        1,
        "one change in flight at a time"
    );
    controller_accepts(&rm);
    assert_eq!(p.isr(), vec![1, 2]);
    assert_eq!(p.partition_epoch(), 1);
    assert_eq!(p.high_watermark(), 4, "the high watermark moves at once");
    assert_eq!(rm.stats().isr_shrinks, 1);
}

#[test]
fn a_follower_that_catches_up_rejoins_within_the_current_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    // Broker 1 wrote 3 records at epoch 1, then became leader again at epoch 2 with ISR [1, 2].
    apply(&rm, dir.path(), &leadership(1, 1, &[1], 0), 0).unwrap();
    rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
    apply(&rm, dir.path(), &leadership(1, 2, &[1, 2], 1), 0).unwrap();
    let p = rm.get(&tp()).unwrap();
    rm.append(&tp(), &mut batch(2, "b", None), 1, 0).unwrap();
    rm.read_for_follower(&tp(), 2, 5, 1 << 20, 2, 10).unwrap();
    assert_eq!(p.high_watermark(), 5);
    // Broker 3 reaches offset 3: the start of epoch 2, but below the high watermark.
    rm.read_for_follower(&tp(), 3, 3, 1 << 20, 2, 20).unwrap();
    assert!(rm.pending_isr_changes().is_empty());
    rm.read_for_follower(&tp(), 3, 5, 1 << 20, 2, 30).unwrap();
    let pending = rm.pending_isr_changes();
    assert_eq!(pending[0].new_isr, vec![1, 2, 3]);
    assert!(matches!(
        p.isr_state(),
        IsrState::PendingExpand { adding: 3, .. }
    ));
    // While the expansion is pending, the high watermark already waits for broker 3.
    rm.append(&tp(), &mut batch(1, "c", None), 1, 40).unwrap();
    rm.read_for_follower(&tp(), 2, 6, 1 << 20, 2, 50).unwrap();
    assert_eq!(p.high_watermark(), 5);
    assert_eq!(
        p.isr(),
        vec![1, 2],
        "committed only when the controller says so"
    );
    controller_accepts(&rm);
    assert_eq!(p.isr(), vec![1, 2, 3]);
    assert_eq!(rm.stats().isr_expands, 1);
    rm.read_for_follower(&tp(), 3, 6, 1 << 20, 2, 60).unwrap();
    assert_eq!(p.high_watermark(), 6);
}

#[test]
fn refused_isr_changes_follow_kafkas_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let p = leader_of_three(&rm, dir.path());
    rm.maybe_shrink_isrs(LAG + 1);
    let item = rm.pending_isr_changes().remove(0);
    rm.inner.alter_partition.clear_pending(&item.tp);
    // A retriable error sends the same change again.
    rm.on_alter_partition_answer(&item, Err(ResponseError::NotController));
    assert_eq!(rm.pending_isr_changes(), vec![item.clone()]);
    rm.inner.alter_partition.clear_pending(&item.tp);
    // OPERATION_NOT_ATTEMPTED (a member not live) goes back to the committed ISR.
    rm.on_alter_partition_answer(&item, Err(ResponseError::OperationNotAttempted));
    assert_eq!(p.isr_state(), IsrState::Committed { isr: vec![1, 2, 3] });
    // INVALID_UPDATE_VERSION stays pending until a LeaderAndIsr says what is true.
    rm.maybe_shrink_isrs(LAG + 2);
    let item = rm.pending_isr_changes().remove(0);
    rm.inner.alter_partition.clear_pending(&item.tp);
    rm.on_alter_partition_answer(&item, Err(ResponseError::InvalidUpdateVersion));
    assert!(p.isr_state().is_inflight());
    assert!(rm.pending_isr_changes().is_empty());
    assert_eq!(
        apply(&rm, dir.path(), &leadership(1, 1, &[1, 2], 5), 0).unwrap(),
        Transition::SameEpoch
    );
    assert_eq!(p.isr_state(), IsrState::Committed { isr: vec![1, 2] });
    // A late answer to a replaced proposal changes nothing.
    rm.on_alter_partition_answer(
        &item,
        Ok(AlterIsrResult {
            leader: 1,
            leader_epoch: 1,
            isr: vec![1],
            partition_epoch: 9,
        }),
    );
    assert_eq!(p.isr(), vec![1, 2]);
}

#[test]
fn leader_and_isr_epochs_decide_what_changes() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let p = leader_of_three(&rm, dir.path());
    rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
    // An older epoch, or the same one with no newer partition epoch: STALE_CONTROLLER_EPOCH.
    for stale in [leadership(1, 0, &[1], 9), leadership(1, 1, &[1], 0)] {
        assert_eq!(
            apply(&rm, dir.path(), &stale, 0)
                .unwrap_err()
                .response_error(),
            ResponseError::StaleControllerEpoch
        );
    }
    assert_eq!(p.isr(), vec![1, 2, 3]);
    // A new leader: broker 1 follows without truncating anything itself.
    assert_eq!(
        apply(&rm, dir.path(), &leadership(2, 2, &[2, 3], 1), 0).unwrap(),
        Transition::BecameFollower
    );
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(p.leader_id(), 2);
    assert!(p.isr().is_empty(), "a follower keeps no ISR");
    // Same leader, next epoch: the follower continues where it is.
    assert_eq!(
        p.make_follower(&leadership(2, 3, &[2, 3], 2)).unwrap(),
        FollowerStart::Continue
    );
    assert_eq!(
        p.make_follower(&leadership(2, 5, &[2, 3], 3)).unwrap(),
        FollowerStart::Truncate,
        "an epoch was missed"
    );
    assert_eq!(
        p.make_follower(&leadership(3, 6, &[3], 4)).unwrap(),
        FollowerStart::Truncate
    );
    // A follower's epoch cache only holds epochs of data it has.
    assert_eq!(p.leader_epoch_entries(), vec![(1, 0)]);
}

/// A follower learns the high watermark one fetch late, so a leader elected just then holds
/// records its high watermark has not reached. Until it does, a client's latest offset (and
/// a time lookup that finds nothing below it) is OFFSET_NOT_AVAILABLE, as Kafka's: the Java
/// Admin client retries it; answering the stale high watermark made the end of the log go
/// backwards (20 acked records, then "latest" 0 right after a preferred election).
#[test]
fn a_new_leader_whose_high_watermark_lags_its_epoch_start_refuses_client_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let old_rm = manager(1, &a);
    let new_rm = manager(2, &b);
    apply(&old_rm, &a, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    old_rm
        .append(&tp(), &mut batch(5, "a", None), 1, 0)
        .unwrap();
    apply(&new_rm, &b, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    let f = new_rm.get(&tp()).unwrap();
    let read = old_rm
        .read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0)
        .unwrap();
    f.append_as_follower(&read.records, read.high_watermark, 1, 0)
        .unwrap();
    assert_eq!((f.log_end_offset(), f.high_watermark()), (5, 0));

    // Broker 2 leads at epoch 2 from offset 5 with its high watermark still 0.
    apply(&new_rm, &b, &leadership(2, 2, &[1, 2], 1), 0).unwrap();
    let not_available = |r: Result<(i64, i64, Option<i32>), ReplicationError>| {
        r.unwrap_err().response_error() == ResponseError::OffsetNotAvailable
    };
    assert!(not_available(f.offset_for(
        -1,
        false,
        -1,
        OffsetsReader::Client
    )));
    assert!(not_available(f.offset_for(
        1_000,
        false,
        -1,
        OffsetsReader::Client
    )));
    assert!(not_available(f.offset_for(
        -3,
        true,
        -1,
        OffsetsReader::Client
    )));
    // The earliest offset, a follower's and a v0 client's latest are answered.
    assert_eq!(
        f.offset_for(-2, false, -1, OffsetsReader::Client)
            .unwrap()
            .1,
        0
    );
    assert_eq!(
        f.offset_for(-1, false, -1, OffsetsReader::Replica)
            .unwrap()
            .1,
        5
    );
    assert_eq!(
        f.offset_for(-1, false, -1, OffsetsReader::LegacyClient)
            .unwrap()
            .1,
        0
    );

    // Once broker 1 fetched from the new leader up to the end, the high watermark is there.
    new_rm
        .read_for_follower(&tp(), 1, 5, 1 << 20, 2, 0)
        .unwrap();
    assert_eq!(f.high_watermark(), 5);
    assert_eq!(
        f.offset_for(-1, false, -1, OffsetsReader::Client)
            .unwrap()
            .1,
        5
    );
    assert_eq!(
        f.offset_for(1_000, false, -1, OffsetsReader::Client)
            .unwrap()
            .1,
        0
    );
}

#[test]
fn a_follower_appends_the_leaders_batches_unchanged_and_learns_their_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let leader_rm = manager(1, &a);
    let follower_rm = manager(2, &b);
    apply(&leader_rm, &a, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    leader_rm
        .append(&tp(), &mut batch(2, "a", Some((9, 0, 0))), 1, 0)
        .unwrap();
    apply(&leader_rm, &a, &leadership(1, 2, &[1, 2], 1), 0).unwrap();
    leader_rm
        .append(&tp(), &mut batch(3, "b", None), 1, 0)
        .unwrap();
    apply(&follower_rm, &b, &leadership(1, 2, &[1, 2], 1), 0).unwrap();
    let f = follower_rm.get(&tp()).unwrap();
    let read = leader_rm
        .read_for_follower(&tp(), 2, f.log_end_offset(), 1 << 20, 2, 0)
        .unwrap();
    // Batches fetched at another epoch than the follower's are refused.
    assert_eq!(
        f.append_as_follower(&read.records, read.high_watermark, 1, 0)
            .unwrap_err()
            .response_error(),
        ResponseError::FencedLeaderEpoch
    );
    f.append_as_follower(&read.records, read.high_watermark, 2, 0)
        .unwrap();
    assert_eq!(f.log_end_offset(), 5);
    assert_eq!(
        f.high_watermark(),
        0,
        "the leader's high watermark was 0 when it answered"
    );
    f.append_as_follower(&[], 5, 2, 0).unwrap();
    assert_eq!(f.high_watermark(), 5);
    f.append_as_follower(&[], 3, 2, 0).unwrap();
    assert_eq!(
        f.high_watermark(),
        5,
        "a follower's high watermark never moves back either"
    );
    // Replicated bytes are identical, so the segment files are too, and so are the epochs.
    let seg = |d: &Path| std::fs::read(d.join("t-0/00000000000000000000.log")).unwrap();
    assert_eq!(seg(&a), seg(&b));
    let l = leader_rm.get(&tp()).unwrap();
    assert_eq!(l.leader_epoch_entries(), vec![(1, 0), (2, 2)]);
    assert_eq!(f.leader_epoch_entries(), l.leader_epoch_entries());
    assert_eq!(
        std::fs::read_to_string(b.join("t-0/leader-epoch-checkpoint")).unwrap(),
        "0\n2\n1 0\n2 2\n"
    );
    // A batch that does not start at the follower's end is refused; leaders refuse it too.
    assert!(f.append_as_follower(&read.records, 5, 2, 0).is_err());
    assert_eq!(
        l.append_as_follower(&read.records, 5, 2, 0)
            .unwrap_err()
            .response_error(),
        ResponseError::NotLeaderOrFollower
    );
    // The follower's producer state came along: it dedups after a failover.
    apply(&follower_rm, &b, &leadership(2, 3, &[2], 2), 0).unwrap();
    let dup = follower_rm
        .append(&tp(), &mut batch(2, "a", Some((9, 0, 0))), 1, 0)
        .unwrap();
    assert!(dup.duplicate);
    assert_eq!(f.leader_epoch_entries(), vec![(1, 0), (2, 2), (3, 5)]);
}

#[test]
fn offsets_for_leader_epoch_answers_from_the_leaders_cache() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    for (epoch, n) in [(1, 3), (4, 2)] {
        apply(&rm, dir.path(), &leadership(1, epoch, &[1], epoch), 0).unwrap();
        rm.append(&tp(), &mut batch(n, "x", None), 1, 0).unwrap();
    }
    apply(&rm, dir.path(), &leadership(1, 6, &[1], 6), 0).unwrap();
    let p = rm.get(&tp()).unwrap();
    assert_eq!(p.leader_epoch_entries(), vec![(1, 0), (4, 3), (6, 5)]);
    let answer = |epoch| p.last_offset_for_leader_epoch(6, epoch).unwrap();
    assert_eq!(answer(1), (1, 3));
    assert_eq!(
        answer(3),
        (1, 3),
        "epoch 3 never wrote: the one below and its end"
    );
    assert_eq!(answer(4), (4, 5));
    assert_eq!(answer(6), (6, 5), "the current epoch ends at the log end");
    assert_eq!(answer(9), (-1, -1));
    assert_eq!(
        p.last_offset_for_leader_epoch(5, 1)
            .unwrap_err()
            .response_error(),
        ResponseError::FencedLeaderEpoch
    );
    // Followers do not answer.
    apply(&rm, dir.path(), &leadership(2, 7, &[2], 7), 0).unwrap();
    assert_eq!(
        p.last_offset_for_leader_epoch(-1, 1)
            .unwrap_err()
            .response_error(),
        ResponseError::NotLeaderOrFollower
    );
}

/// Two brokers write different epochs past a shared prefix; the old leader, now a follower,
/// truncates exactly where they diverge (not to its high watermark) and then copies the new
/// leader's log.
#[test]
fn a_follower_truncates_exactly_at_the_divergence_point() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (rm1, rm2) = (manager(1, &a), manager(2, &b));
    // Epoch 1: broker 1 leads, broker 2 copies 4 records, the high watermark reaches 4.
    apply(&rm1, &a, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    apply(&rm2, &b, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    let (p1, p2) = (rm1.get(&tp()).unwrap(), rm2.get(&tp()).unwrap());
    rm1.append(&tp(), &mut batch(4, "shared", None), 1, 0)
        .unwrap();
    let r = rm1.read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0).unwrap();
    p2.append_as_follower(&r.records, r.high_watermark, 1, 0)
        .unwrap();
    rm1.read_for_follower(&tp(), 2, 4, 1 << 20, 1, 0).unwrap();
    // Broker 1 writes 3 more that nobody copies, and its high watermark is 4.
    rm1.append(&tp(), &mut batch(3, "lost", None), 1, 0)
        .unwrap();
    assert_eq!((p1.high_watermark(), p1.log_end_offset()), (4, 7));
    // Broker 2 becomes leader at epoch 2 and writes 2 records.
    apply(&rm2, &b, &leadership(2, 2, &[2], 1), 0).unwrap();
    rm2.append(&tp(), &mut batch(2, "new", None), 1, 0).unwrap();
    // Broker 1 follows broker 2: its latest epoch is 1, which ends at 4 on broker 2.
    assert_eq!(
        apply(&rm1, &a, &leadership(2, 2, &[2], 1), 0).unwrap(),
        Transition::BecameFollower
    );
    assert_eq!(
        p1.log_end_offset(),
        7,
        "nothing is truncated before asking the leader"
    );
    let (epoch, end) = p2
        .last_offset_for_leader_epoch(2, p1.latest_epoch().unwrap())
        .unwrap();
    assert_eq!((epoch, end), (1, 4));
    let t = truncation::truncation_offset(
        epoch,
        end,
        |e| p1.end_offset_for_epoch(e),
        p1.log_end_offset(),
        p1.high_watermark(),
    );
    assert_eq!(
        t,
        truncation::Truncation {
            offset: 4,
            complete: true
        }
    );
    p1.truncate_to(t.offset).unwrap();
    let r = rm2.read_for_follower(&tp(), 1, 4, 1 << 20, 2, 0).unwrap();
    p1.append_as_follower(&r.records, r.high_watermark, 2, 0)
        .unwrap();
    let all = |p: &Partition| {
        let state = p.lock();
        values(&state.log.read(0, 1 << 20).unwrap())
    };
    assert_eq!(all(&p1), all(&p2));
    assert_eq!(p1.leader_epoch_entries(), vec![(1, 0), (2, 4)]);
    assert_eq!(
        all(&p1).iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>(),
        vec!["shared-0", "shared-1", "shared-2", "shared-3", "new-0", "new-1"]
    );
}

#[tokio::test]
async fn acks_all_waits_for_the_isr_and_checks_min_insync_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let two = PartitionConfig {
        min_insync_replicas: 2,
        ..config()
    };
    rm.become_leader_or_follower(
        &tp(),
        &dir.path().join("t-0"),
        two,
        &leadership(1, 1, &[1, 2, 3], 0),
        None,
        0,
    )
    .unwrap();
    let r = rm.append(&tp(), &mut batch(2, "a", None), -1, 0).unwrap();
    let soon = tokio::time::Instant::now() + Duration::from_millis(50);
    assert_eq!(
        rm.wait_for_acks(&tp(), r.last_offset + 1, soon)
            .await
            .unwrap_err()
            .response_error(),
        ResponseError::RequestTimedOut
    );
    let rm2 = rm.clone();
    let followers = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        rm2.read_for_follower(&tp(), 2, 2, 1 << 20, 1, 1).unwrap();
        rm2.read_for_follower(&tp(), 3, 2, 1 << 20, 1, 1).unwrap();
    });
    let later = tokio::time::Instant::now() + Duration::from_secs(5);
    rm.wait_for_acks(&tp(), r.last_offset + 1, later)
        .await
        .unwrap();
    followers.await.unwrap();

    // Broker 3 stops; while an acks=all produce waits, the ISR shrinks to [1]: below
    // min.insync.replicas=2, the produce gets NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    let r = rm.append(&tp(), &mut batch(1, "b", None), -1, 2).unwrap();
    let waiting = {
        let rm = rm.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            rm.wait_for_acks(&tp(), r.last_offset + 1, deadline).await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    rm.maybe_shrink_isrs(LAG + 10);
    controller_accepts(&rm);
    assert_eq!(rm.get(&tp()).unwrap().isr(), vec![1]);
    assert_eq!(
        waiting.await.unwrap().unwrap_err().response_error(),
        ResponseError::NotEnoughReplicasAfterAppend
    );
    // Below min.insync.replicas nothing is written with acks=all; acks=1 still works.
    let end = rm.get(&tp()).unwrap().log_end_offset();
    assert_eq!(
        rm.append(&tp(), &mut batch(1, "c", None), -1, 3)
            .unwrap_err()
            .response_error(),
        ResponseError::NotEnoughReplicas
    );
    assert_eq!(rm.get(&tp()).unwrap().log_end_offset(), end);
    rm.append(&tp(), &mut batch(1, "d", None), 1, 3).unwrap();
    // Broker 2 catches up and rejoins: acks=all works again by itself.
    let end = rm.get(&tp()).unwrap().log_end_offset();
    rm.read_for_follower(&tp(), 2, end, 1 << 20, 1, LAG + 20)
        .unwrap();
    controller_accepts(&rm);
    assert_eq!(rm.get(&tp()).unwrap().isr(), vec![1, 2]);
    let r = rm
        .append(&tp(), &mut batch(1, "e", None), -1, LAG + 30)
        .unwrap();
    rm.read_for_follower(&tp(), 2, r.last_offset + 1, 1 << 20, 1, LAG + 40)
        .unwrap();
    let later = tokio::time::Instant::now() + Duration::from_secs(5);
    rm.wait_for_acks(&tp(), r.last_offset + 1, later)
        .await
        .unwrap();
}

#[test]
fn a_restarted_follower_keeps_its_log_until_the_leader_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = manager(2, dir.path());
        apply(&rm, dir.path(), &leadership(1, 1, &[1, 2], 0), 0).unwrap();
        let f = rm.get(&tp()).unwrap();
        let source_dir = tempfile::tempdir().unwrap();
        let source = manager(1, source_dir.path());
        apply(&source, source_dir.path(), &leadership(1, 1, &[1, 2], 0), 0).unwrap();
        source
            .append(&tp(), &mut batch(4, "a", None), 1, 0)
            .unwrap();
        let read = source
            .read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0)
            .unwrap();
        f.append_as_follower(&read.records, 2, 1, 0).unwrap();
        assert_eq!((f.log_end_offset(), f.high_watermark()), (4, 2));
        rm.shutdown(&dirs).unwrap();
    }
    let rm = manager(2, dir.path());
    apply(&rm, dir.path(), &leadership(1, 2, &[1, 2], 1), 0).unwrap();
    let f = rm.get(&tp()).unwrap();
    // Before KIP-101 this follower would have dropped offsets 2 and 3 here.
    assert_eq!((f.log_end_offset(), f.high_watermark()), (4, 2));
    assert_eq!(f.leader_epoch_entries(), vec![(1, 0)]);
}

/// One step of a random leader history for the high-watermark property.
#[derive(Debug, Clone)]
enum Step {
    Append(usize),
    /// Follower (2 or 3) fetches at the given fraction of the way to the leader's end.
    Fetch(i32, f64),
    /// Time passes; the ISR check runs.
    Tick(i64),
    /// The controller answers the pending change (accept or refuse).
    Answer(bool),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            (1..4usize).prop_map(Step::Append),
            (2..4i32, 0.0f64..=1.0).prop_map(|(r, f)| Step::Fetch(r, f)),
            (1..(LAG * 2)).prop_map(Step::Tick),
            any::<bool>().prop_map(Step::Answer),
        ],
        1..60,
    )
}

proptest! {
    /// Whatever follows, the leader's high watermark never moves backwards, never passes its
    /// log end, and never passes the log end of a member of the (maximal) ISR: what consumers
    /// see and acks=all confirms is on every in-sync replica.
    #[test]
    fn the_high_watermark_is_monotonic_and_covered_by_the_isr(steps in steps()) {
        let dir = tempfile::tempdir().unwrap();
        let rm = manager(1, dir.path());
        let p = leader_of_three(&rm, dir.path());
        let mut now = 0;
        let mut ends = BTreeMap::from([(2, -1i64), (3, -1i64)]);
        let mut last_hw = p.high_watermark();
        for step in steps {
            match step {
                Step::Append(n) => {
                    rm.append(&tp(), &mut batch(n, "x", None), 1, now).unwrap();
                }
                Step::Fetch(replica, fraction) => {
                    let from = ends[&replica].max(0);
                    let to = p.log_end_offset();
                    let offset = from + ((to - from) as f64 * fraction) as i64;
                    rm.read_for_follower(&tp(), replica, offset, 1 << 20, 1, now).unwrap();
                    ends.insert(replica, offset);
                }
                Step::Tick(ms) => {
                    now += ms;
                    rm.maybe_shrink_isrs(now);
                }
                Step::Answer(true) => controller_accepts(&rm),
                Step::Answer(false) => {
                    for item in rm.pending_isr_changes() {
                        rm.inner.alter_partition.clear_pending(&item.tp);
                        rm.on_alter_partition_answer(&item, Err(ResponseError::OperationNotAttempted));
                    }
                }
            }
            let hw = p.high_watermark();
            prop_assert!(hw >= last_hw, "moved back from {} to {}", last_hw, hw);
            prop_assert!(hw <= p.log_end_offset());
            for member in p.isr_state().maximal() {
                if member != 1 {
                    prop_assert!(hw <= ends[&member].max(0),
                        "hw {} passes member {} at {}", hw, member, ends[&member]);
                }
            }
            last_hw = hw;
        }
    }
}

/// The leader throttle (KIP-73): a follower outside the ISR of a throttled partition gets no
/// records while the leader quota is used up (its position still counts), one in the ISR
/// always gets them, and an unthrottled partition is never held.
#[test]
fn the_leader_throttle_holds_only_out_of_sync_followers_of_throttled_partitions() {
    use crate::quota::ThrottledPartitions;
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let rm1 = manager(1, &a);
    // Broker 2 is a replica outside the ISR.
    apply(&rm1, &a, &leadership(1, 1, &[1], 0), 0).unwrap();
    rm1.append(&tp(), &mut batch(4, "x", None), 1, 0).unwrap();
    let throttles = rm1.throttles();
    throttles.leader.set_rate(Some(1_000.0));
    // Not in the topic's list yet: served in full, nothing counted.
    let r = rm1.read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0).unwrap();
    assert!(!r.records.is_empty());
    assert!(!throttles.leader.is_exceeded());
    throttles.set_topic(tp().topic.as_str(), Some(ThrottledPartitions::All), None);
    // The first read goes out and uses the quota up; the next gets nothing.
    let r = rm1.read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0).unwrap();
    assert!(!r.records.is_empty());
    assert!(throttles.leader.is_exceeded());
    let held = rm1.read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0).unwrap();
    assert!(held.records.is_empty());
    assert_eq!(held.high_watermark, r.high_watermark);
    // Without a rate nothing is held.
    throttles.leader.set_rate(None);
    assert!(!rm1
        .read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0)
        .unwrap()
        .records
        .is_empty());
}

/// A broker that stops serving answers its waiting acks=-1 produces at once with
/// NOT_LEADER_OR_FOLLOWER (the producer goes to the new leader), and so do later ones:
/// before, they held their connections, and the broker's shutdown, until their timeout
/// (the bench's controlled shutdown of a broker leading 333 partitions took 30-63 s).
#[tokio::test]
async fn acks_all_waits_end_when_the_broker_stops_serving() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    rm.become_leader_or_follower(
        &tp(),
        &dir.path().join("t-0"),
        config(),
        &leadership(1, 1, &[1, 2, 3], 0),
        None,
        0,
    )
    .unwrap();
    let r = rm.append(&tp(), &mut batch(2, "a", None), -1, 0).unwrap();
    let waiting = {
        let rm = rm.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
            rm.wait_for_acks(&tp(), r.last_offset + 1, deadline).await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !waiting.is_finished(),
        "no follower fetched: the produce waits"
    );
    rm.stop_serving();
    let answer = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("answered long before its hour-long deadline")
        .unwrap();
    assert_eq!(
        answer.unwrap_err().response_error(),
        ResponseError::NotLeaderOrFollower
    );
    let r = rm.append(&tp(), &mut batch(1, "b", None), -1, 2).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
    assert_eq!(
        tokio::time::timeout(
            Duration::from_secs(60),
            rm.wait_for_acks(&tp(), r.last_offset + 1, deadline)
        )
        .await
        .expect("answered at once")
        .unwrap_err()
        .response_error(),
        ResponseError::NotLeaderOrFollower
    );
}

#[test]
fn a_log_in_a_fresh_directory_reads_nothing_and_creates_its_segment_on_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    let part = dir.path().join("t-0");
    std::fs::create_dir(&part).unwrap();
    let names = || {
        let mut n: Vec<String> = std::fs::read_dir(&part)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        n.sort();
        n
    };
    {
        let rm = manager(1, dir.path());
        let l = leadership(1, 1, &[1], 0);
        let t = rm
            .become_leader_or_follower_in(&tp(), &part, true, config(), &l, None, 0)
            .unwrap();
        assert_eq!(t, Transition::BecameLeader);
        let p = rm.get(&tp()).unwrap();
        assert_eq!((p.log_end_offset(), p.high_watermark()), (0, 0));
        assert!(
            !names().iter().any(|n| n.ends_with(".log")),
            "{:?}",
            names()
        );
        // An empty read needs no file either.
        assert!(read(&p, 0).records.is_empty());
        rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
        assert!(names().contains(&"00000000000000000000.log".to_string()));
        let epochs = std::fs::read_to_string(part.join("leader-epoch-checkpoint")).unwrap();
        assert_eq!(epochs, "0\n1\n1 0\n");
    }
    // A crash (no clean shutdown, no checkpoint): the next start recovers the records.
    let rm = manager(1, dir.path());
    let p = leader(&rm, dir.path());
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(read(&p, 0).records.len() as u64, p.size_in_bytes());
    rm.shutdown(&dirs).unwrap();
}

/// The text of t-0's `leader-epoch-checkpoint` under `dir`, `None` when there is no file.
fn epoch_file(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("t-0/leader-epoch-checkpoint")).ok()
}

/// Broker 1 leads `t-0` at `epoch` in a directory created just now (as the LogManager makes
/// it for a LeaderAndIsr: `fresh_dir`).
fn fresh_leader(rm: &ReplicaManager, dir: &Path, epoch: i32) -> Arc<Partition> {
    let part = dir.join("t-0");
    std::fs::create_dir(&part).unwrap();
    rm.become_leader_or_follower_in(
        &tp(),
        &part,
        true,
        config(),
        &leadership(1, epoch, &[1], 0),
        None,
        0,
    )
    .unwrap();
    rm.get(&tp()).unwrap()
}

#[test]
fn a_new_partition_writes_its_epoch_checkpoint_with_the_first_append_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let p = fresh_leader(&rm, dir.path(), 3);
    assert_eq!(
        epoch_file(dir.path()),
        None,
        "becoming leader of an empty new partition writes no checkpoint"
    );
    // The epoch is known in memory all the same.
    assert_eq!(p.leader_epoch_entries(), vec![(3, 0)]);
    assert_eq!(p.last_offset_for_leader_epoch(-1, 3).unwrap(), (3, 0));
    // A duplicate-free first append writes it, with the epoch starting at 0.
    let r = rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
    assert_eq!(r.base_offset, 0);
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n1\n3 0\n"));
    rm.append(&tp(), &mut batch(2, "b", None), 1, 0).unwrap();
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n1\n3 0\n"));
    // Once the file exists, a new epoch is written when it starts, as before.
    apply(&rm, dir.path(), &leadership(1, 4, &[1], 1), 0).unwrap();
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n2\n3 0\n4 5\n"));
}

#[test]
fn a_restart_before_the_first_append_starts_from_no_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = manager(1, dir.path());
        fresh_leader(&rm, dir.path(), 1);
        rm.shutdown(&dirs).unwrap();
    }
    assert_eq!(epoch_file(dir.path()), None, "a clean shutdown writes none");
    {
        // Reopened from disk (no file: no epochs); leading again writes nothing either.
        let rm = manager(1, dir.path());
        apply(&rm, dir.path(), &leadership(1, 2, &[1], 1), 0).unwrap();
        let p = rm.get(&tp()).unwrap();
        assert_eq!(p.leader_epoch_entries(), vec![(2, 0)]);
        assert_eq!(epoch_file(dir.path()), None);
        // A crash here (no shutdown) loses only the in-memory entry of the empty log.
    }
    let rm = manager(1, dir.path());
    apply(&rm, dir.path(), &leadership(1, 5, &[1], 2), 0).unwrap();
    let p = rm.get(&tp()).unwrap();
    assert_eq!(p.leader_epoch_entries(), vec![(5, 0)]);
    rm.append(&tp(), &mut batch(2, "a", None), 1, 0).unwrap();
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n1\n5 0\n"));
}

#[test]
fn a_crash_right_after_the_first_append_keeps_its_epoch() {
    let dir = tempfile::tempdir().unwrap();
    {
        let rm = manager(1, dir.path());
        fresh_leader(&rm, dir.path(), 7);
        rm.append(&tp(), &mut batch(3, "a", None), 1, 0).unwrap();
        // No shutdown: the manager is dropped as a crash would leave it (checkpoints of
        // recovery points and high watermarks not written).
    }
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n1\n7 0\n"));
    let rm = manager(1, dir.path());
    apply(&rm, dir.path(), &leadership(1, 8, &[1], 1), 0).unwrap();
    let p = rm.get(&tp()).unwrap();
    assert_eq!(p.log_end_offset(), 3, "recovery kept the appended batch");
    assert_eq!(p.leader_epoch_entries(), vec![(7, 0), (8, 3)]);
    assert_eq!(p.last_offset_for_leader_epoch(-1, 7).unwrap(), (7, 3));
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n2\n7 0\n8 3\n"));
}

#[test]
fn a_new_partition_that_follows_writes_the_leaders_epochs_with_its_first_fetched_batch() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    // Led here first (an entry kept in memory), then a follower of broker 2 at epoch 2.
    fresh_leader(&rm, dir.path(), 1);
    apply(&rm, dir.path(), &leadership(2, 2, &[1, 2], 1), 0).unwrap();
    let f = rm.get(&tp()).unwrap();
    assert_eq!(epoch_file(dir.path()), None);
    // Broker 2's batch, written at its epoch 2 from offset 0.
    let leader_dir = tempfile::tempdir().unwrap();
    let leader_rm = manager(2, leader_dir.path());
    apply(&leader_rm, leader_dir.path(), &leadership(2, 2, &[2], 1), 0).unwrap();
    leader_rm
        .append(&tp(), &mut batch(2, "x", None), 1, 0)
        .unwrap();
    let fetched = leader_rm.get(&tp()).unwrap().read(0, 1 << 20, -1).unwrap();
    f.append_as_follower(&fetched.records, 2, 2, 0).unwrap();
    assert_eq!(f.leader_epoch_entries(), vec![(2, 0)]);
    assert_eq!(epoch_file(dir.path()).as_deref(), Some("0\n1\n2 0\n"));
}

/// A transactional batch of `n` records from producer `pid` at `epoch`, sequence `seq`.
fn txn_batch(n: usize, tag: &str, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut spec = records::builder::BatchSpec::new(0);
    spec.transactional = true;
    spec.producer_id = pid;
    spec.producer_epoch = epoch;
    spec.base_sequence = seq;
    let mut b = records::builder::BatchBuilder::new(spec);
    for (i, v) in tagged_values(tag, n).iter().enumerate() {
        b.push(&records::builder::NewRecord {
            offset: i as i64,
            timestamp: 1_000,
            key: None,
            value: Some(v),
            headers: &[],
        });
    }
    b.build()
}

fn marker(commit: bool, coordinator_epoch: i32) -> records::control::EndTxnMarker {
    records::control::EndTxnMarker {
        commit,
        coordinator_epoch,
    }
}

#[test]
fn transactions_hold_the_last_stable_offset_until_their_marker_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_owned()];
    {
        let rm = manager(1, dir.path());
        let p = leader(&rm, dir.path());
        rm.append(&tp(), &mut batch(2, "plain", None), 1, 0)
            .unwrap();
        // Producer 7 opens a transaction at 2, producer 8 at 4.
        rm.append(&tp(), &mut txn_batch(2, "a", 7, 0, 0), 1, 0)
            .unwrap();
        rm.append(&tp(), &mut txn_batch(1, "b", 8, 0, 0), 1, 0)
            .unwrap();
        assert_eq!(p.high_watermark(), 5);
        let uncommitted = p.read_isolated(0, 1 << 20, -1, false).unwrap();
        assert_eq!(uncommitted.last_stable_offset, 2);
        assert_eq!(values(&uncommitted.records).len(), 5);
        assert_eq!(uncommitted.aborted_transactions, None);
        let committed = p.read_isolated(0, 1 << 20, -1, true).unwrap();
        assert_eq!(values(&committed.records).len(), 2);
        assert_eq!(committed.aborted_transactions, Some(vec![]));
        assert_eq!(
            p.offset_for(-1, false, -1, OffsetsReader::CommittedClient)
                .unwrap()
                .1,
            2
        );
        // A plain batch from producer 7 inside its transaction is refused.
        assert_eq!(
            rm.append(&tp(), &mut batch(1, "x", Some((7, 0, 2))), 1, 0)
                .unwrap_err()
                .response_error(),
            ResponseError::InvalidTxnState
        );
        // Producer 7 aborts (marker at 5): the LSO moves to producer 8's first offset.
        assert_eq!(
            rm.append_marker(&tp(), 7, 0, marker(false, 3), 0).unwrap(),
            5
        );
        assert_eq!(
            p.read_isolated(0, 1 << 20, -1, true)
                .unwrap()
                .last_stable_offset,
            4
        );
        // A stale coordinator and a stale producer epoch are fenced; nothing is written.
        assert_eq!(
            rm.append_marker(&tp(), 7, 0, marker(true, 2), 0)
                .unwrap_err()
                .response_error(),
            ResponseError::TransactionCoordinatorFenced
        );
        rm.append(&tp(), &mut txn_batch(1, "c", 9, 2, 0), 1, 0)
            .unwrap();
        assert_eq!(
            rm.append_marker(&tp(), 9, 1, marker(true, 3), 0)
                .unwrap_err()
                .response_error(),
            ResponseError::InvalidProducerEpoch
        );
        assert_eq!(p.log_end_offset(), 7);
        let txnindex = dir.path().join("t-0/00000000000000000000.txnindex");
        let bytes = std::fs::read(&txnindex).unwrap();
        assert_eq!(bytes.len(), 34);
        assert_eq!(
            storage::log::txn_index::read_entries(&txnindex).unwrap(),
            vec![storage::log::AbortedTxn {
                producer_id: 7,
                first_offset: 2,
                last_offset: 5,
                last_stable_offset: 4
            }]
        );
        // No clean shutdown: a crash.
        rm.stop_serving();
    }
    // A restart rebuilds the open transactions (8 at 4, 9 at 6) and the aborted one.
    let rm = manager(1, dir.path());
    let p = leader(&rm, dir.path());
    assert_eq!(p.high_watermark(), 7);
    assert_eq!(
        p.read_isolated(0, 1 << 20, -1, false)
            .unwrap()
            .last_stable_offset,
        4
    );
    let active = p.active_producers();
    let of = |pid| active.iter().find(|a| a.producer_id == pid).unwrap();
    assert_eq!(of(8).current_txn_start_offset, 4);
    assert_eq!(
        (of(7).current_txn_start_offset, of(7).coordinator_epoch),
        (-1, 3)
    );
    rm.append_marker(&tp(), 8, 0, marker(true, 3), 0).unwrap();
    rm.append_marker(&tp(), 9, 2, marker(true, 3), 0).unwrap();
    let all = p.read_isolated(0, 1 << 20, -1, true).unwrap();
    assert_eq!(all.last_stable_offset, 9);
    assert_eq!(all.high_watermark, 9);
    // The marker batches are in the log (as consumers skip them); producer 7's records come
    // with its aborted transaction, so a READ_COMMITTED consumer drops them.
    assert_eq!(
        all.aborted_transactions,
        Some(vec![storage::log::AbortedTxn {
            producer_id: 7,
            first_offset: 2,
            last_offset: 5,
            last_stable_offset: 4
        }])
    );
    // A read past the aborted transaction does not list it.
    assert_eq!(
        p.read_isolated(6, 1 << 20, -1, true)
            .unwrap()
            .aborted_transactions,
        Some(vec![])
    );
    let _ = dirs;
}

#[test]
fn a_follower_rebuilds_open_and_aborted_transactions_from_the_batches_it_fetches() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let old_rm = manager(1, &a);
    let new_rm = manager(2, &b);
    apply(&old_rm, &a, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    apply(&new_rm, &b, &leadership(1, 1, &[1, 2], 0), 0).unwrap();
    // Producer 5 aborts a transaction (0..=1, marker at 2); producer 6 opens one at 3.
    old_rm
        .append(&tp(), &mut txn_batch(2, "a", 5, 0, 0), 1, 0)
        .unwrap();
    old_rm
        .append_marker(&tp(), 5, 0, marker(false, 1), 0)
        .unwrap();
    old_rm
        .append(&tp(), &mut txn_batch(1, "b", 6, 0, 0), 1, 0)
        .unwrap();
    let f = new_rm.get(&tp()).unwrap();
    let read = old_rm
        .read_for_follower(&tp(), 2, 0, 1 << 20, 1, 0)
        .unwrap();
    f.append_as_follower(&read.records, read.high_watermark, 1, 0)
        .unwrap();
    assert_eq!(f.log_end_offset(), 4);
    // The follower takes over: the same open transaction bounds its LSO, the same aborted
    // transaction is in its index.
    apply(&new_rm, &b, &leadership(2, 2, &[2], 1), 0).unwrap();
    let r = f.read_isolated(0, 1 << 20, -1, true).unwrap();
    assert_eq!(r.last_stable_offset, 3);
    assert_eq!(
        r.aborted_transactions,
        Some(vec![storage::log::AbortedTxn {
            producer_id: 5,
            first_offset: 0,
            last_offset: 2,
            last_stable_offset: 3
        }])
    );
    assert_eq!(
        storage::log::txn_index::read_entries(&b.join("t-0/00000000000000000000.txnindex"))
            .unwrap()
            .len(),
        1
    );
    // Truncating below the marker drops the entry and reopens producer 5's transaction.
    apply(&new_rm, &b, &leadership(1, 3, &[1, 2], 2), 0).unwrap();
    f.truncate_to(2).unwrap();
    assert!(
        storage::log::txn_index::read_entries(&b.join("t-0/00000000000000000000.txnindex"))
            .unwrap()
            .is_empty()
    );
    let five = f
        .active_producers()
        .into_iter()
        .find(|p| p.producer_id == 5)
        .unwrap();
    assert_eq!(five.current_txn_start_offset, 0);
}

#[test]
fn the_cleaner_stops_at_the_first_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let rm = manager(1, dir.path());
    let mut cfg = config();
    cfg.log.compact = true;
    cfg.log.segment_bytes = 1; // every batch rolls a segment
    rm.become_leader_or_follower(
        &tp(),
        &dir.path().join("t-0"),
        cfg,
        &leadership(1, 1, &[1], 0),
        None,
        0,
    )
    .unwrap();
    let p = rm.get(&tp()).unwrap();
    let keyed_by = |tag: &str, pid: i64| {
        let mut spec = records::builder::BatchSpec::new(0);
        if pid >= 0 {
            spec.transactional = true;
            (spec.producer_id, spec.producer_epoch, spec.base_sequence) = (pid, 0, 0);
        }
        let mut b = records::builder::BatchBuilder::new(spec);
        b.push(&records::builder::NewRecord {
            offset: 0,
            timestamp: 1_000,
            key: Some(b"k"),
            value: Some(tag.as_bytes()),
            headers: &[],
        });
        b.build()
    };
    let keyed = |tag: &str| keyed_by(tag, -1);
    rm.append(&tp(), &mut keyed("a"), 1, 0).unwrap();
    let mut open = keyed_by("t", 3);
    rm.append(&tp(), &mut open, 1, 0).unwrap();
    rm.append(&tp(), &mut keyed("b"), 1, 0).unwrap();
    rm.append(&tp(), &mut keyed("c"), 1, 0).unwrap();
    let plan = p.clean_plan(None, 0).unwrap();
    assert_eq!(plan.first_uncleanable_offset, 1, "{plan:?}");
    rm.append_marker(&tp(), 3, 0, marker(true, 0), 0).unwrap();
    rm.append(&tp(), &mut keyed("d"), 1, 0).unwrap();
    let plan = p.clean_plan(None, 0).unwrap();
    assert!(plan.first_uncleanable_offset > 1, "{plan:?}");
}
