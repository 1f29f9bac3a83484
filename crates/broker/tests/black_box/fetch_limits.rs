//! Issue 14: a Fetch never makes the broker read more than `fetch.max.bytes` (consumers) or
//! `replica.fetch.response.max.bytes` (followers), whatever the request asks, except one
//! first batch larger than the limit (KIP-74).

use crate::common;

use bytes::Bytes;
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "limits";
const FETCH_MAX_BYTES: usize = 1 << 20;
const REPLICA_MAX_BYTES: usize = 2 << 20;

async fn produce(conn: &mut Connection, partition: i32, value_bytes: usize) -> i64 {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(one_record_batch(value_bytes, b'v'))),
            ])]);
    let response = conn.send(request).await.unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    p.base_offset
}

/// A Fetch asking for everything: max_bytes = partition_max_bytes = 2^31-1.
async fn fetch(
    conn: &mut Connection,
    replica_id: i32,
    offsets: &[(i32, i64)],
    version: i16,
) -> Vec<fetch_response::PartitionData> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(0)
        .with_min_bytes(i32::MAX)
        .with_max_bytes(i32::MAX)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(
                offsets
                    .iter()
                    .map(|&(partition, offset)| {
                        fetch_request::FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(i32::MAX)
                    })
                    .collect(),
            )]);
    let response = conn.send_version(request, version).await.unwrap();
    assert_eq!(response.error_code, 0);
    response.responses[0].partitions.clone()
}

fn records_len(p: &fetch_response::PartitionData) -> usize {
    p.records.as_ref().map_or(0, Bytes::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_fetch_responses_are_capped_by_the_broker() {
    let overrides = [
        format!("fetch.max.bytes={FETCH_MAX_BYTES}"),
        format!("replica.fetch.response.max.bytes={REPLICA_MAX_BYTES}"),
    ];
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path(), &overrides).await;
    eventually("controller", || broker.is_controller()).await;
    let mut conn = Connection::connect(&broker.local_addr().to_string(), "limits")
        .await
        .unwrap();
    let created = conn
        .send(
            CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(name(TOPIC))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    // Broker 1 (never started) is a replica, so its follower fetch is served.
                    .with_assignments(
                        (0..2)
                            .map(|p| {
                                CreatableReplicaAssignment::default()
                                    .with_partition_index(p)
                                    .with_broker_ids(vec![BrokerId(0), BrokerId(1)])
                            })
                            .collect(),
                    )
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str("max.message.bytes"))
                        .with_value(Some(StrBytes::from_static_str("4000000")))])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    for partition in 0..2 {
        eventually_async(&mut conn, partition).await;
    }
    // 40 batches of 100 KiB (4 MB), a 1.5 MiB one, and more small ones after it.
    for _ in 0..40 {
        produce(&mut conn, 0, 100 * 1024).await;
    }
    let big = produce(&mut conn, 0, 1536 * 1024).await;
    for _ in 0..5 {
        produce(&mut conn, 0, 100 * 1024).await;
    }
    for _ in 0..5 {
        produce(&mut conn, 1, 100 * 1024).await;
    }
    let small = one_record_batch(100 * 1024, b'v').len();

    // A consumer asking for 2 GiB gets fetch.max.bytes, in whole batches, at every version.
    for version in [2, 4, 11] {
        let got = fetch(&mut conn, -1, &[(0, 0), (1, 0)], version).await;
        let len = records_len(&got[0]);
        assert!(len <= FETCH_MAX_BYTES, "v{version}: {len} bytes");
        if version >= 4 {
            // (Fetch v2 reads message format v1, down-converted: other sizes.)
            assert_eq!(len, FETCH_MAX_BYTES / small * small, "v{version}");
        }
        // The second partition had no room left: no records, but its offsets and no error.
        assert_eq!(got[1].error_code, 0);
        assert_eq!(records_len(&got[1]), 0, "v{version}");
        assert_eq!(got[1].high_watermark, 5);
    }
    // A first batch larger than the limit comes back whole (KIP-74), alone.
    let got = fetch(&mut conn, -1, &[(0, big)], 11).await;
    assert_eq!(
        records_len(&got[0]),
        one_record_batch(1536 * 1024, b'v').len()
    );
    // A follower's fetch is capped by replica.fetch.response.max.bytes instead.
    let got = fetch(&mut conn, 1, &[(0, 0)], 11).await;
    let len = records_len(&got[0]);
    assert_eq!(
        len,
        REPLICA_MAX_BYTES / small * small,
        "follower: {len} bytes"
    );
    drop(conn);
    broker.shutdown().await;
}

/// Waits until the partition's log is open here (ListOffsets answers without error).
async fn eventually_async(conn: &mut Connection, partition: i32) {
    for _ in 0..500 {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(-1),
                ])]);
        let r = conn.send(request).await.unwrap();
        if r.topics[0].partitions[0].error_code == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{TOPIC}-{partition} never opened");
}
