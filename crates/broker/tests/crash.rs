//! Crash safety of the data plane: a child process (this test binary, re-executed) runs a
//! broker with `log.flush.interval.messages=1` and produces with acks=-1, printing every
//! acknowledged offset; the parent SIGKILLs it mid-stream, starts a broker on the same data
//! directory and checks that every acknowledged record is there, byte-identical, at its
//! offset, and that everything served passes the CRC check.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
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

const CHILD_ENV: &str = "GREGOR_CRASH_CHILD_DIR";
const TOPIC: &str = "crash";
const OVERRIDES: &[&str] = &["log.flush.interval.messages=1"];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// The value of record `i`: distinct and of varying length.
fn value(i: u64) -> Vec<u8> {
    let mut v = format!("record-{i}-").into_bytes();
    v.extend((0..(i % 97) * 13).map(|j| (i.wrapping_mul(31).wrapping_add(j) % 251) as u8));
    v
}

fn batch(values: &[Vec<u8>]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(v.clone())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// The child: produce until killed, printing `ACK <first offset> <first index> <count>`.
#[tokio::test]
#[ignore = "run by crash_keeps_every_acknowledged_record as a child process"]
async fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let broker = start_broker(std::path::Path::new(&dir), OVERRIDES).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "crash-child")
        .await
        .unwrap();
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
    let mut i = 0u64;
    loop {
        let count = 1 + (i % 5);
        let values: Vec<Vec<u8>> = (i..i + count).map(value).collect();
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(name(TOPIC))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(&values))),
                ])]);
        let response = conn.send(request).await.unwrap();
        let p = &response.responses[0].partition_responses[0];
        if p.error_code != 0 {
            // The partition is not led yet; try again.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        println!("ACK {} {i} {count}", p.base_offset);
        i += count;
    }
}

#[tokio::test]
async fn crash_keeps_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.first() == Some(&"ACK") {
                let offset: i64 = fields[1].parse().unwrap();
                let first: u64 = fields[2].parse().unwrap();
                let count: u64 = fields[3].parse().unwrap();
                acked.push((offset, first, count));
                if acked.len() == 400 {
                    return (acked, true);
                }
            }
        }
        (acked, false)
    });
    let (acked, reached) = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    // SIGKILL while the child is still producing (it never stops by itself).
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(reached, "the child stopped after {} acks", acked.len());

    let broker = start_broker(dir.path(), OVERRIDES).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "crash-check")
        .await
        .unwrap();
    let mut served: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut offset = 0;
    for _ in 0..2000 {
        let response = conn
            .send(
                FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(0)
                    .with_max_bytes(1 << 20)
                    .with_session_epoch(-1)
                    .with_topics(vec![fetch_request::FetchTopic::default()
                        .with_topic(name(TOPIC))
                        .with_partitions(vec![fetch_request::FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20)])]),
            )
            .await
            .unwrap();
        let p = &response.responses[0].partitions[0];
        if p.error_code != 0 {
            // The log opens once the controller's LeaderAndIsr arrives.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            break;
        }
        // Everything served is whole, CRC-valid batches.
        records::validate_record_set(&records).expect("served batches pass validation");
        let mut buf = records;
        while !buf.is_empty() {
            for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
                served.push((r.offset, r.value.unwrap().to_vec()));
            }
        }
        offset = served.last().unwrap().0 + 1;
    }
    for (i, (o, _)) in served.iter().enumerate() {
        assert_eq!(*o, i as i64, "offsets are contiguous from 0");
    }
    for &(base, first, count) in &acked {
        for k in 0..count {
            let at = (base + k as i64) as usize;
            assert!(
                at < served.len(),
                "acknowledged offset {at} lost ({} served)",
                served.len()
            );
            assert_eq!(served[at].1, value(first + k), "record at offset {at}");
        }
    }
    drop(conn);
    broker.shutdown().await;
}
