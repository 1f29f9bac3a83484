//! Issue 14: a full disk loses nothing. `log.dirs` is a real, small filesystem: a 16 MiB tmpfs
//! mounted for this test (mounting needs CAP_SYS_ADMIN: root here and in CI). Where the
//! mount is not allowed the test says so and returns; the storage crate's fault-injection
//! tests (`log::fault_tests`, ENOSPC after a short write in the file layer) cover the same
//! path on every machine.
//!
//! Produce 64 KiB batches until the filesystem is full: every refused request answers
//! KAFKA_STORAGE_ERROR and leaves no byte behind; after space is freed production continues
//! at the next offset; after a clean restart and after an unclean one (no clean-shutdown
//! marker, so recovery rescans the segment) the partition opens with exactly the
//! acknowledged records at their offsets.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const KAFKA_STORAGE_ERROR: i16 = 56;
const TOPIC: &str = "full";
const BATCH_VALUE_BYTES: usize = 64 * 1024;

/// A tmpfs mounted on a temporary directory, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "gregor-disk-full",
            ])
            .arg(dir.path())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs here ({}); storage's fault-injection tests cover a full disk",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(SmallFs { dir })
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Record `i`'s value: 64 KiB, recognisable.
fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(BATCH_VALUE_BYTES, (i % 251) as u8);
    v
}

fn batch(i: u64) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(value(i))),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// Produces record `i`; returns (error code, base offset).
async fn produce(conn: &mut Connection, i: u64) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(i))),
            ])]);
    let response = conn.send_version(request, 8).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every record of the partition: (offset, value).
async fn read_all(conn: &mut Connection) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response = conn.send_version(request, 11).await.unwrap();
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch at {offset}");
        let mut records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        while !records.is_empty() {
            for r in RecordBatchDecoder::decode(&mut records).unwrap().records {
                offset = r.offset + 1;
                out.push((r.offset, r.value.unwrap().to_vec()));
            }
        }
    }
}

async fn wait_for_partition(conn: &mut Connection) {
    for _ in 0..500 {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1),
                ])]);
        let r = conn.send(request).await.unwrap();
        if r.topics[0].partitions[0].error_code == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{TOPIC}-0 never opened");
}

async fn connect(broker: &broker::Broker) -> Connection {
    Connection::connect(&broker.local_addr().to_string(), "disk-full")
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_full_disk_loses_no_acknowledged_record() {
    let Some(fs) = SmallFs::mount("16m") else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let log_dir: PathBuf = fs.path().join("logs");
    let overrides = [format!("log.dirs={}", log_dir.display())];
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let (mut broker, mut store) = start_broker_and_store(data.path(), &overrides).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = connect(&broker).await;
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(TOPIC))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    wait_for_partition(&mut conn).await;
    // Room to free later.
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0u8; 4 << 20]).unwrap();

    let mut acknowledged: Vec<(i64, u64)> = Vec::new();
    let mut refused = 0;
    let mut i = 0u64;
    while refused < 5 {
        let (code, base_offset) = produce(&mut conn, i).await;
        match code {
            0 => {
                assert_eq!(
                    base_offset,
                    acknowledged.len() as i64,
                    "offsets stay contiguous"
                );
                acknowledged.push((base_offset, i));
            }
            KAFKA_STORAGE_ERROR => refused += 1,
            other => panic!("produce {i} answered error {other}"),
        }
        i += 1;
        assert!(i < 1_000, "the 16 MiB filesystem never filled up");
    }
    let full_at = acknowledged.len();
    assert!(full_at > 50, "only {full_at} records fit");
    let segment = log_dir
        .join(format!("{TOPIC}-0"))
        .join("00000000000000000000.log");
    let segment_size = std::fs::metadata(&segment).unwrap().len();
    // No torn bytes: the segment holds exactly the acknowledged batches.
    assert_eq!(segment_size, full_at as u64 * batch(0).len() as u64);

    // Space is freed: production continues right after the acknowledged records.
    std::fs::remove_file(&filler).unwrap();
    for _ in 0..20 {
        let (code, base_offset) = produce(&mut conn, i).await;
        assert_eq!(code, 0, "after space was freed");
        assert_eq!(base_offset, acknowledged.len() as i64);
        acknowledged.push((base_offset, i));
        i += 1;
    }
    let expected: Vec<(i64, Vec<u8>)> = acknowledged.iter().map(|&(o, i)| (o, value(i))).collect();
    assert!(
        read_all(&mut conn).await == expected,
        "read back before a restart"
    );

    // A clean restart, then an unclean one (recovery rescans the segment).
    for clean in [true, false] {
        drop(conn);
        broker.shutdown().await;
        store.close().await;
        if !clean {
            std::fs::remove_file(log_dir.join(".kafka_cleanshutdown")).unwrap();
        }
        let (b, s) = start_broker_and_store(data.path(), &overrides).await;
        eventually("controller", || b.is_controller()).await;
        conn = connect(&b).await;
        wait_for_partition(&mut conn).await;
        let got = read_all(&mut conn).await;
        assert_eq!(got.len(), expected.len(), "clean restart {clean}");
        assert!(got == expected, "clean restart {clean}: records differ");
        (broker, store) = (b, s);
    }
    drop(conn);
    broker.shutdown().await;
    store.close().await;
}
