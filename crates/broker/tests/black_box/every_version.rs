//! Every API at every version ApiVersions advertises, black-box: generated from the version
//! table (`protocol::SUPPORTED_APIS`), so a new row fails here until it has a case.
//!
//! For each (API, version) a minimal valid request is encoded at that version and sent over a
//! plain TCP connection; the response header must carry the request's correlation id, the
//! body must decode at that version with no byte left over, and its error codes must be the
//! ones a minimal valid request gets (no UNSUPPORTED_VERSION, no stray error). The test ends
//! by checking that every advertised (API, version) pair was really sent.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use client::Connection;
use common::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use protocol::SUPPORTED_APIS;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use uuid::Uuid;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_TOPIC_ID: i16 = 100;
const UNSUPPORTED_VERSION: i16 = 35;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const SECURITY_DISABLED: i16 = 54;
const MEMBER_ID_REQUIRED: i16 = 79;
const MISMATCHED_ENDPOINT_TYPE: i16 = 114;

/// The topic most cases read and write: one partition, records at offsets 0.. .
const TOPIC: &str = "ev";

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn group_id(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.to_owned()))
}

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A plain connection that checks each response's framing and records what it sent.
struct Wire {
    stream: TcpStream,
    next_correlation_id: i32,
    sent: BTreeSet<(i16, i16)>,
}

impl Wire {
    async fn connect(addr: std::net::SocketAddr) -> Wire {
        Wire {
            stream: TcpStream::connect(addr).await.unwrap(),
            next_correlation_id: 1,
            sent: BTreeSet::new(),
        }
    }

    /// Sends `body` (already encoded at `version`) and returns the response body after its
    /// header, whose correlation id must be the request's.
    async fn raw(&mut self, key: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut payload = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(str("every-version")))
            .encode(&mut payload, key.request_header_version(version))
            .unwrap();
        payload.put_slice(body);
        let mut frame = BytesMut::new();
        frame.put_i32(payload.len() as i32);
        frame.put_slice(&payload);
        self.stream.write_all(&frame).await.unwrap();
        let mut response =
            tokio::time::timeout(Duration::from_secs(30), read_frame(&mut self.stream))
                .await
                .unwrap_or_else(|_| panic!("{key:?} v{version}: no response within 30 s"));
        let header = ResponseHeader::decode(&mut response, key.response_header_version(version))
            .unwrap_or_else(|e| panic!("{key:?} v{version}: response header: {e}"));
        assert_eq!(
            header.correlation_id, correlation_id,
            "{key:?} v{version}: correlation id"
        );
        self.sent.insert((key as i16, version));
        response
    }

    /// Sends `request` at `version`; the response must decode at `version` exactly.
    async fn call<R: Request>(&mut self, request: R, version: i16) -> R::Response {
        let key = ApiKey::try_from(R::KEY).unwrap();
        let mut body = BytesMut::new();
        request
            .encode(&mut body, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: encoding the request: {e}"));
        let mut response = self.raw(key, version, &body).await;
        let decoded = R::Response::decode(&mut response, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: response body: {e}"));
        assert!(
            !response.has_remaining(),
            "{key:?} v{version}: {} bytes after the response body",
            response.remaining()
        );
        decoded
    }
}

/// A consumer-protocol subscription (v0) to `topics`, as JoinGroup carries it.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

/// A consumer-protocol assignment (v0) of `partitions` of `topic`.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(partitions.len() as i32);
    for p in partitions {
        b.put_i32(*p);
    }
    b.put_i32(-1);
    b.freeze()
}

/// What the cases share: the broker's id, the test topic's id, a committed group.
struct Fixture {
    broker_id: i32,
    topic_id: Uuid,
    /// Records in `TOPIC` before the cases run.
    records: i64,
    /// The idempotent producer (id, epoch) that wrote three records to `TOPIC`.
    producer: (i64, i16),
    /// The transactional producer of [`TXN_ID`] (id, current epoch), no transaction open.
    txn: (i64, i16),
}

/// The transactional id the transaction APIs' cases use.
const TXN_ID: &str = "ev-tx";
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

fn txn_id(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.to_owned()))
}

/// JoinGroup at `version` as the only member of a fresh group: (member id, generation).
async fn join(wire: &mut Wire, group: &str, version: i16) -> (String, i32) {
    let mut request = JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(30_000)
        .with_member_id(StrBytes::default())
        .with_protocol_type(str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(str("range"))
        .with_metadata(subscription(&[TOPIC]))]);
    if version >= 1 {
        request = request.with_rebalance_timeout_ms(30_000);
    }
    if version >= 8 {
        request = request.with_reason(Some(str("every-version test")));
    }
    let mut response = wire.call(request.clone(), version).await;
    if version >= 4 {
        // A dynamic member first learns its id (KIP-394), then joins with it.
        assert_eq!(
            response.error_code, MEMBER_ID_REQUIRED,
            "JoinGroup v{version}"
        );
        assert!(!response.member_id.is_empty(), "JoinGroup v{version}");
        let member_id = response.member_id.clone();
        response = wire.call(request.with_member_id(member_id), version).await;
    }
    assert_eq!(response.error_code, NONE, "JoinGroup v{version}");
    assert_eq!(response.leader, response.member_id, "JoinGroup v{version}");
    assert_eq!(response.members.len(), 1, "JoinGroup v{version}");
    assert_eq!(
        response.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range"),
        "JoinGroup v{version}"
    );
    if version >= 7 {
        assert_eq!(
            response.protocol_type.as_ref().map(|p| p.as_str()),
            Some("consumer"),
            "JoinGroup v{version}"
        );
    }
    assert!(!response.skip_assignment, "JoinGroup v{version}");
    (response.member_id.to_string(), response.generation_id)
}

/// SyncGroup at `version` of the leader of a one-member group, assigning it partition 0.
async fn sync(wire: &mut Wire, group: &str, member: &(String, i32), version: i16) {
    let mut request = SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(member.1)
        .with_member_id(str(&member.0))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(str(&member.0))
                .with_assignment(assignment(TOPIC, &[0])),
        ]);
    if version >= 5 {
        request = request
            .with_protocol_type(Some(str("consumer")))
            .with_protocol_name(Some(str("range")));
    }
    let response = wire.call(request, version).await;
    assert_eq!(response.error_code, NONE, "SyncGroup v{version}");
    assert_eq!(
        response.assignment,
        assignment(TOPIC, &[0]),
        "SyncGroup v{version}"
    );
    if version >= 5 {
        assert_eq!(
            response.protocol_type.as_ref().map(|p| p.as_str()),
            Some("consumer")
        );
    }
}

/// A simple (generation -1) commit of `offset` for `TOPIC`-0 at `version`.
async fn commit(wire: &mut Wire, group: &str, offset: i64, version: i16) {
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_metadata(Some(str("m"))),
                ]),
        ]);
    let response = wire.call(request, version).await;
    assert_eq!(
        response.topics[0].partitions[0].error_code, NONE,
        "OffsetCommit v{version}"
    );
}

/// The whole messages of an uncompressed legacy message set (offset, size, then a message
/// whose magic byte must be `magic`), and whether a partial one ends it: as Kafka's lazy
/// down-conversion, the converted set is cut at the original set's size, and clients skip
/// the partial message.
fn legacy_messages(mut set: &[u8], magic: u8) -> (usize, bool) {
    let mut count = 0;
    while set.len() >= 12 {
        let size = i32::from_be_bytes(set[8..12].try_into().unwrap()) as usize;
        if set.len() < 12 + size {
            return (count, true);
        }
        // After the entry header: crc (4 bytes), then the magic byte.
        assert_eq!(set[12 + 4], magic, "message format v{magic}");
        count += 1;
        set = &set[12 + size..];
    }
    (count, !set.is_empty())
}

/// A record batch of `n` records as a producer sends it.
fn batch(n: usize, tag: &str, producer: Option<(i64, i16, i32)>) -> Bytes {
    Bytes::from(records::testing::encode_batch(
        &records::testing::tagged_values(tag, n),
        1_700_000_000_000,
        producer,
    ))
}

fn produce_request(topic: &str, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records)),
            ])])
}

/// Exercises `api` at `version`. Every API of the table needs an arm.
async fn exercise(wire: &mut Wire, fx: &mut Fixture, api: ApiKey, version: i16) {
    match api {
        ApiKey::Produce => {
            let response = wire
                .call(
                    produce_request(TOPIC, batch(2, &format!("p{version}"), None)),
                    version,
                )
                .await;
            let p = &response.responses[0].partition_responses[0];
            assert_eq!(p.error_code, NONE, "Produce v{version}");
            assert_eq!(p.base_offset, fx.records, "Produce v{version}");
            fx.records += 2;
        }
        ApiKey::Fetch => {
            let mut topic = fetch_request::FetchTopic::default().with_partitions(vec![
                fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20),
            ]);
            topic = if version >= 13 {
                topic.with_topic_id(fx.topic_id)
            } else {
                topic.with_topic(topic_name(TOPIC))
            };
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![topic]);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "Fetch v{version}");
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, NONE, "Fetch v{version}");
            assert_eq!(p.high_watermark, fx.records, "Fetch v{version}");
            if version >= 13 {
                assert_eq!(
                    response.responses[0].topic_id, fx.topic_id,
                    "Fetch v{version}"
                );
                // An id no topic has.
                let request = FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(0)
                    .with_session_epoch(-1)
                    .with_topics(vec![fetch_request::FetchTopic::default()
                        .with_topic_id(Uuid::from_u128(42))
                        .with_partitions(vec![
                            fetch_request::FetchPartition::default().with_partition(0)
                        ])]);
                let unknown = wire.call(request, version).await;
                assert_eq!(
                    unknown.responses[0].partitions[0].error_code, UNKNOWN_TOPIC_ID,
                    "Fetch v{version}"
                );
            } else {
                assert_eq!(response.responses[0].topic.0.as_str(), TOPIC);
            }
            let records = p.records.as_deref().unwrap_or_default();
            if version >= 4 {
                let got = records::testing::decode_values(records);
                assert_eq!(got.len() as i64, fx.records, "Fetch v{version}");
            } else {
                // Down-converted: message format v0 for Fetch v0-1, v1 for v2-3.
                let (whole, partial) = legacy_messages(records, if version < 2 { 0 } else { 1 });
                assert!(whole >= 1, "Fetch v{version}: no whole message");
                let all = whole as i64 == fx.records && !partial;
                let cut = (whole as i64) < fx.records && partial;
                assert!(
                    all || cut,
                    "Fetch v{version}: {whole} messages of {}, partial: {partial}",
                    fx.records
                );
            }
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![
                        list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)
                            .with_max_num_offsets(1),
                    ])]);
            let response = wire.call(request, version).await;
            let p = &response.topics[0].partitions[0];
            assert_eq!(p.error_code, NONE, "ListOffsets v{version}");
            let offset = if version == 0 {
                p.old_style_offsets[0]
            } else {
                p.offset
            };
            assert_eq!(offset, fx.records, "ListOffsets v{version}");
            // The special timestamps, each from the version that introduced it, and
            // UNSUPPORTED_VERSION below it (Kafka 3.9): MAX_TIMESTAMP (-3, v7; the fixture's
            // largest timestamp is record 3's), EARLIEST_LOCAL_TIMESTAMP (-4, v8; the log
            // start), LATEST_TIERED_TIMESTAMP (-5, v9; nothing is tiered), and -6 never.
            let expected: [(i64, i16, i64, i64); 4] = [
                (-3, 7, 1_700_000_000_003, 3),
                (-4, 8, -1, 0),
                (-5, 9, -1, -1),
                (-6, i16::MAX, -1, -1),
            ];
            for (timestamp, since, ts, at) in expected {
                let request = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                        .with_name(topic_name(TOPIC))
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(timestamp)
                                .with_max_num_offsets(1),
                        ])]);
                let response = wire.call(request, version).await;
                let p = &response.topics[0].partitions[0];
                let what = format!("ListOffsets v{version} timestamp {timestamp}");
                if version < since {
                    assert_eq!(p.error_code, UNSUPPORTED_VERSION, "{what}");
                    continue;
                }
                assert_eq!(p.error_code, NONE, "{what}");
                assert_eq!((p.timestamp, p.offset), (ts, at), "{what}");
            }
        }
        ApiKey::Metadata => {
            let request = MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(topic_name(TOPIC)))]));
            let response = wire.call(request, version).await;
            assert_eq!(response.brokers.len(), 1, "Metadata v{version}");
            assert_eq!(response.brokers[0].node_id.0, fx.broker_id);
            let t = &response.topics[0];
            assert_eq!(t.error_code, NONE, "Metadata v{version}");
            assert_eq!(
                t.partitions[0].leader_id.0, fx.broker_id,
                "Metadata v{version}"
            );
            if version >= 1 {
                assert_eq!(
                    response.controller_id.0, fx.broker_id,
                    "Metadata v{version}"
                );
            }
            if version >= 10 {
                assert_eq!(t.topic_id, fx.topic_id, "Metadata v{version}");
            }
        }
        // Control requests from a client (no controller proof, here with the stale epoch 0)
        // change nothing and say why (control_plane.rs covers every refusal).
        ApiKey::LeaderAndIsr => {
            let request = LeaderAndIsrRequest::default()
                .with_controller_id(BrokerId(fx.broker_id))
                .with_controller_epoch(0);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, CLUSTER_AUTHORIZATION_FAILED,
                "LeaderAndIsr v{version}"
            );
        }
        ApiKey::StopReplica => {
            let request = StopReplicaRequest::default()
                .with_controller_id(BrokerId(fx.broker_id))
                .with_controller_epoch(0);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, CLUSTER_AUTHORIZATION_FAILED,
                "StopReplica v{version}"
            );
        }
        ApiKey::UpdateMetadata => {
            let request = UpdateMetadataRequest::default()
                .with_controller_id(BrokerId(fx.broker_id))
                .with_controller_epoch(0);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, CLUSTER_AUTHORIZATION_FAILED,
                "UpdateMetadata v{version}"
            );
        }
        ApiKey::ControlledShutdown => {
            // From a client (no broker proof) for a broker that is not registered: refused,
            // nothing moves.
            let request = ControlledShutdownRequest::default()
                .with_broker_id(BrokerId(9999))
                .with_broker_epoch(-1);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, CLUSTER_AUTHORIZATION_FAILED,
                "ControlledShutdown v{version}"
            );
            assert!(response.remaining_partitions.is_empty());
        }
        ApiKey::OffsetCommit => commit(wire, &format!("oc-v{version}"), 1, version).await,
        ApiKey::OffsetFetch => {
            let group = "fetched";
            let request = if version >= 8 {
                OffsetFetchRequest::default().with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group_id(group))
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(topic_name(TOPIC))
                                .with_partition_indexes(vec![0]),
                        ])),
                ])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(group_id(group))
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(topic_name(TOPIC))
                            .with_partition_indexes(vec![0]),
                    ]))
            };
            // v0 reads the metadata store's /consumers view (Kafka 2.8's ZooKeeper path),
            // which follows the coordinator's commits within about a second, without metadata.
            let mut attempts = 0;
            let (error, offset, metadata) = loop {
                let response = wire.call(request.clone(), version).await;
                let got = if version >= 8 {
                    let g = &response.groups[0];
                    let p = &g.topics[0].partitions[0];
                    assert_eq!(g.group_id.0.as_str(), group);
                    (
                        g.error_code.max(p.error_code),
                        p.committed_offset,
                        p.metadata.clone(),
                    )
                } else {
                    let p = &response.topics[0].partitions[0];
                    (
                        response.error_code.max(p.error_code),
                        p.committed_offset,
                        p.metadata.clone(),
                    )
                };
                if version == 0 && got.1 != 1 && attempts < 50 {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
                break got;
            };
            assert_eq!(error, NONE, "OffsetFetch v{version}");
            assert_eq!(offset, 1, "OffsetFetch v{version}");
            assert_eq!(
                metadata.as_ref().map(|m| m.as_str()),
                Some(if version == 0 { "" } else { "m" }),
                "OffsetFetch v{version}"
            );
        }
        ApiKey::FindCoordinator => {
            let keys = ["fc-a", "fc-b"];
            let request = if version >= 4 {
                FindCoordinatorRequest::default()
                    .with_coordinator_keys(keys.iter().map(|k| str(k)).collect())
            } else {
                FindCoordinatorRequest::default().with_key(str(keys[0]))
            };
            let response = wire.call(request, version).await;
            if version >= 4 {
                assert_eq!(response.coordinators.len(), 2, "FindCoordinator v{version}");
                for (c, key) in response.coordinators.iter().zip(keys) {
                    assert_eq!(c.key.as_str(), key);
                    assert_eq!(c.error_code, NONE, "FindCoordinator v{version}");
                    assert_eq!(c.node_id.0, fx.broker_id, "FindCoordinator v{version}");
                    assert!(c.port > 0);
                }
            } else {
                assert_eq!(response.error_code, NONE, "FindCoordinator v{version}");
                assert_eq!(
                    response.node_id.0, fx.broker_id,
                    "FindCoordinator v{version}"
                );
                assert!(response.port > 0);
            }
            if version >= 1 {
                // The transaction coordinator of "tx": this broker, the leader of every
                // partition of the transaction log.
                let request = if version >= 4 {
                    FindCoordinatorRequest::default().with_coordinator_keys(vec![str("tx")])
                } else {
                    FindCoordinatorRequest::default().with_key(str("tx"))
                };
                let response = wire.call(request.with_key_type(1), version).await;
                let code = response
                    .coordinators
                    .first()
                    .map_or(response.error_code, |c| c.error_code);
                assert_eq!(code, NONE, "FindCoordinator v{version}");
                let node = response
                    .coordinators
                    .first()
                    .map_or(response.node_id.0, |c| c.node_id.0);
                assert_eq!(node, fx.broker_id, "FindCoordinator v{version}");
            }
        }
        ApiKey::JoinGroup => {
            join(wire, &format!("join-v{version}"), version).await;
        }
        ApiKey::SyncGroup => {
            let group = format!("sync-v{version}");
            let member = join(wire, &group, 9).await;
            sync(wire, &group, &member, version).await;
        }
        ApiKey::Heartbeat => {
            let group = format!("hb-v{version}");
            let member = join(wire, &group, 9).await;
            sync(wire, &group, &member, 5).await;
            let request = HeartbeatRequest::default()
                .with_group_id(group_id(&group))
                .with_generation_id(member.1)
                .with_member_id(str(&member.0));
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "Heartbeat v{version}");
        }
        ApiKey::LeaveGroup => {
            let group = format!("leave-v{version}");
            let member = join(wire, &group, 9).await;
            sync(wire, &group, &member, 5).await;
            let request = if version >= 3 {
                let mut identity =
                    leave_group_request::MemberIdentity::default().with_member_id(str(&member.0));
                if version >= 5 {
                    identity = identity.with_reason(Some(str("test done")));
                }
                LeaveGroupRequest::default()
                    .with_group_id(group_id(&group))
                    .with_members(vec![identity])
            } else {
                LeaveGroupRequest::default()
                    .with_group_id(group_id(&group))
                    .with_member_id(str(&member.0))
            };
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "LeaveGroup v{version}");
            if version >= 3 {
                assert_eq!(response.members.len(), 1);
                assert_eq!(
                    response.members[0].error_code, NONE,
                    "LeaveGroup v{version}"
                );
            }
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::default()
                .with_groups(vec![group_id("fetched"), group_id("never-seen")]);
            let response = wire.call(request, version).await;
            let states: Vec<(i16, &str)> = response
                .groups
                .iter()
                .map(|g| (g.error_code, g.group_state.as_str()))
                .collect();
            assert_eq!(
                states,
                [(NONE, "Empty"), (NONE, "Dead")],
                "DescribeGroups v{version}"
            );
        }
        ApiKey::ListGroups => {
            let mut request = ListGroupsRequest::default();
            if version >= 4 {
                request = request.with_states_filter(vec![str("Empty")]);
            }
            if version >= 5 {
                request = request.with_types_filter(vec![str("classic")]);
            }
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "ListGroups v{version}");
            let listed = response
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == "fetched")
                .unwrap_or_else(|| panic!("ListGroups v{version} misses 'fetched'"));
            if version >= 4 {
                assert_eq!(listed.group_state.as_str(), "Empty");
                assert!(response
                    .groups
                    .iter()
                    .all(|g| g.group_state.as_str() == "Empty"));
            }
            if version >= 5 {
                assert_eq!(listed.group_type.as_str(), "classic");
            }
        }
        ApiKey::ApiVersions => {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request = request
                    .with_client_software_name(str("every-version"))
                    .with_client_software_version(str("1.0"));
            }
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "ApiVersions v{version}");
            let listed: Vec<(i16, i16, i16)> = response
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version))
                .collect();
            let table: Vec<(i16, i16, i16)> = SUPPORTED_APIS
                .iter()
                .map(|r| (r.api_key as i16, r.min_version, r.max_version))
                .collect();
            assert_eq!(listed, table, "ApiVersions v{version}");
            if version >= 3 {
                // KIP-511: names outside Kafka's pattern are refused.
                let bad = ApiVersionsRequest::default()
                    .with_client_software_name(str("no spaces"))
                    .with_client_software_version(str("1"));
                let response = wire.call(bad, version).await;
                assert_eq!(
                    response.error_code, INVALID_REQUEST,
                    "ApiVersions v{version}"
                );
            }
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic_name(&format!("ct-v{version}")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]);
            let response = wire.call(request, version).await;
            let t = &response.topics[0];
            assert_eq!(t.error_code, NONE, "CreateTopics v{version}");
            if version >= 5 {
                assert_eq!(t.num_partitions, 1, "CreateTopics v{version}");
                assert!(!t.configs.clone().unwrap_or_default().is_empty());
            }
            if version >= 7 {
                assert!(!t.topic_id.is_nil(), "CreateTopics v{version}");
            }
        }
        ApiKey::DeleteTopics => {
            let topic = format!("ct-v{version}");
            let request = if version >= 6 {
                // By topic id (the name left null).
                let metadata = wire
                    .call(
                        MetadataRequest::default().with_topics(Some(vec![
                            metadata_request::MetadataRequestTopic::default()
                                .with_name(Some(topic_name(&topic))),
                        ])),
                        12,
                    )
                    .await;
                let id = metadata.topics[0].topic_id;
                assert!(!id.is_nil(), "{topic} has a topic id");
                DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default()
                    .with_name(None)
                    .with_topic_id(id)])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![topic_name(&topic)])
            };
            let response = wire.call(request.with_timeout_ms(10_000), version).await;
            let r = &response.responses[0];
            assert_eq!(r.error_code, NONE, "DeleteTopics v{version}");
            if version >= 6 {
                assert_eq!(r.name.as_ref().map(|n| n.0.as_str()), Some(topic.as_str()));
            }
        }
        ApiKey::DeleteRecords => {
            let request = DeleteRecordsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                    .with_name(topic_name("dr"))
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(i64::from(version) + 1),
                    ])]);
            let response = wire.call(request, version).await;
            let p = &response.topics[0].partitions[0];
            assert_eq!(p.error_code, NONE, "DeleteRecords v{version}");
            assert_eq!(
                p.low_watermark,
                i64::from(version) + 1,
                "DeleteRecords v{version}"
            );
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "InitProducerId v{version}");
            assert!(response.producer_id.0 >= 0, "InitProducerId v{version}");
            assert_eq!(response.producer_epoch, 0);
            if version >= 3 {
                // An id without an epoch is malformed.
                let request = InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_producer_id(response.producer_id);
                let response = wire.call(request, version).await;
                assert_eq!(
                    response.error_code, INVALID_REQUEST,
                    "InitProducerId v{version}"
                );
            }
            // The transactional producer: the same id, the next epoch.
            let request = InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(TXN_ID)))
                .with_transaction_timeout_ms(60_000);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "InitProducerId v{version}");
            assert_eq!(
                (response.producer_id.0, response.producer_epoch),
                (fx.txn.0, fx.txn.1 + 1),
                "InitProducerId v{version}"
            );
            fx.txn.1 += 1;
            if version >= 3 {
                // KIP-360: a retry naming the previous epoch gets the same answer; an older
                // epoch is a fenced producer.
                let retry = InitProducerIdRequest::default()
                    .with_transactional_id(Some(txn_id(TXN_ID)))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(fx.txn.0))
                    .with_producer_epoch(fx.txn.1 - 1);
                let response = wire.call(retry.clone(), version).await;
                assert_eq!(response.error_code, NONE, "InitProducerId v{version} retry");
                assert_eq!((response.producer_id.0, response.producer_epoch), fx.txn);
                let stale = retry.with_producer_epoch(fx.txn.1 - 2);
                let response = wire.call(stale, version).await;
                // PRODUCER_FENCED (90) from v4, INVALID_PRODUCER_EPOCH (47) before.
                let fenced = if version >= 4 { 90 } else { 47 };
                assert_eq!(
                    response.error_code, fenced,
                    "InitProducerId v{version} stale"
                );
            }
            // Past transaction.max.timeout.ms (15 minutes).
            let request = InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(TXN_ID)))
                .with_transaction_timeout_ms(900_001);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, INVALID_TRANSACTION_TIMEOUT,
                "InitProducerId v{version}"
            );
        }
        ApiKey::AddPartitionsToTxn => {
            let topics = vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![0]),
            ];
            if version < 4 {
                // Not the id's producer.
                let request = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id(TXN_ID))
                    .with_v3_and_below_producer_id(ProducerId(fx.txn.0 + 1000))
                    .with_v3_and_below_producer_epoch(fx.txn.1)
                    .with_v3_and_below_topics(topics);
                let response = wire.call(request, version).await;
                let p = &response.results_by_topic_v3_and_below[0].results_by_partition[0];
                assert_eq!(
                    p.partition_error_code, INVALID_PRODUCER_ID_MAPPING,
                    "AddPartitionsToTxn v{version}"
                );
            } else {
                // KIP-890's VerifyOnly: the partition is in no open transaction.
                let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(txn_id(TXN_ID))
                        .with_producer_id(ProducerId(fx.txn.0))
                        .with_producer_epoch(fx.txn.1)
                        .with_verify_only(true)
                        .with_topics(topics),
                ]);
                let response = wire.call(request, version).await;
                assert_eq!(response.error_code, NONE, "AddPartitionsToTxn v{version}");
                let result = &response.results_by_transaction[0];
                assert_eq!(result.transactional_id.0.as_str(), TXN_ID);
                assert_eq!(
                    result.topic_results[0].results_by_partition[0].partition_error_code,
                    INVALID_TXN_STATE,
                    "AddPartitionsToTxn v{version}"
                );
            }
        }
        ApiKey::AddOffsetsToTxn => {
            let request = AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(TXN_ID))
                .with_producer_id(ProducerId(fx.txn.0 + 1000))
                .with_producer_epoch(fx.txn.1)
                .with_group_id(group_id("ev-txg"));
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, INVALID_PRODUCER_ID_MAPPING,
                "AddOffsetsToTxn v{version}"
            );
        }
        ApiKey::EndTxn => {
            // No transaction is open.
            let request = EndTxnRequest::default()
                .with_transactional_id(txn_id(TXN_ID))
                .with_producer_id(ProducerId(fx.txn.0))
                .with_producer_epoch(fx.txn.1)
                .with_committed(true);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, INVALID_TXN_STATE, "EndTxn v{version}");
        }
        ApiKey::WriteTxnMarkers => {
            // A marker for a partition this broker does not host.
            let request = WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(fx.txn.0))
                    .with_producer_epoch(fx.txn.1)
                    .with_transaction_result(false)
                    .with_coordinator_epoch(0)
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(topic_name("no-such-topic"))
                            .with_partition_indexes(vec![0]),
                    ]),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.markers[0].topics[0].partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
                "WriteTxnMarkers v{version}"
            );
        }
        ApiKey::TxnOffsetCommit => {
            let request = TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(TXN_ID))
                .with_group_id(group_id("ev-txg"))
                .with_producer_id(ProducerId(fx.txn.0))
                .with_producer_epoch(fx.txn.1)
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic_name(TOPIC))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(i64::from(version) + 1),
                        ]),
                ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.topics[0].partitions[0].error_code, NONE,
                "TxnOffsetCommit v{version}"
            );
        }
        ApiKey::DescribeTransactions => {
            let request = DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![txn_id(TXN_ID), txn_id("ev-none")]);
            let response = wire.call(request, version).await;
            let [known, unknown] = &response.transaction_states[..] else {
                panic!("{response:?}");
            };
            assert_eq!(known.error_code, NONE, "DescribeTransactions v{version}");
            assert_eq!(known.transaction_state.as_str(), "Empty");
            assert_eq!(
                (known.producer_id.0, known.producer_epoch),
                fx.txn,
                "DescribeTransactions v{version}"
            );
            assert_eq!(known.transaction_timeout_ms, 60_000);
            assert_eq!(unknown.error_code, TRANSACTIONAL_ID_NOT_FOUND);
        }
        ApiKey::ListTransactions => {
            let request = ListTransactionsRequest::default();
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "ListTransactions v{version}");
            let listed = response
                .transaction_states
                .iter()
                .find(|t| t.transactional_id.0.as_str() == TXN_ID)
                .unwrap_or_else(|| panic!("{response:?}"));
            assert_eq!(listed.producer_id.0, fx.txn.0);
            let filtered = ListTransactionsRequest::default()
                .with_state_filters(vec![str("Ongoing"), str("Bogus")]);
            let response = wire.call(filtered, version).await;
            assert!(response.transaction_states.is_empty(), "{response:?}");
            assert_eq!(response.unknown_state_filters, vec![str("Bogus")]);
        }
        ApiKey::OffsetForLeaderEpoch => {
            // The single broker leads at epoch 0: epoch 0 ends at the log end (fencing by the
            // current leader epoch is in replication.rs).
            let partition = |current| {
                offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(if version >= 2 { current } else { -1 })
                    .with_leader_epoch(0)
            };
            let request = OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(if version >= 3 { -1 } else { -2 }))
                .with_topics(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(topic_name(TOPIC))
                        .with_partitions(vec![partition(0), partition(-1)]),
                ]);
            let response = wire.call(request, version).await;
            let p = &response.topics[0].partitions[0];
            assert_eq!(p.error_code, NONE, "OffsetForLeaderEpoch v{version}");
            assert_eq!(p.end_offset, fx.records, "OffsetForLeaderEpoch v{version}");
            assert_eq!(
                p.leader_epoch,
                if version >= 1 { 0 } else { -1 },
                "OffsetForLeaderEpoch v{version}"
            );
            // The same answer without the current-epoch check.
            let q = &response.topics[0].partitions[1];
            assert_eq!((q.error_code, q.end_offset), (NONE, fx.records));
        }
        ApiKey::AlterPartition => {
            // An ISR change from a client (no broker proof), even naming this broker: refused
            // as a whole, nothing written.
            // v0-1 name the topic, v2+ give its id; v3 lists the ISR with broker epochs.
            let mut partition = alter_partition_request::PartitionData::default()
                .with_partition_index(0)
                .with_leader_epoch(0)
                .with_partition_epoch(0);
            if version >= 3 {
                partition.new_isr_with_epochs =
                    vec![alter_partition_request::BrokerState::default()
                        .with_broker_id(BrokerId(fx.broker_id))
                        .with_broker_epoch(-1)];
            } else {
                partition.new_isr = vec![BrokerId(fx.broker_id)];
            }
            let topic = if version >= 2 {
                alter_partition_request::TopicData::default().with_topic_id(fx.topic_id)
            } else {
                alter_partition_request::TopicData::default().with_topic_name(topic_name(TOPIC))
            };
            let request = AlterPartitionRequest::default()
                .with_broker_id(BrokerId(fx.broker_id))
                .with_broker_epoch(-1)
                .with_topics(vec![topic.with_partitions(vec![partition])]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, CLUSTER_AUTHORIZATION_FAILED,
                "AlterPartition v{version}"
            );
        }
        ApiKey::DescribeUserScramCredentials => {
            use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
            let request = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                UserName::default().with_name(StrBytes::from_static_str("nobody")),
            ]));
            let response = wire.call(request, version).await;
            assert_eq!(
                response.results.len(),
                1,
                "DescribeUserScramCredentials v{version}"
            );
            // RESOURCE_NOT_FOUND: the user has no credential.
            assert_eq!(
                response.results[0].error_code, 91,
                "DescribeUserScramCredentials v{version}"
            );
        }
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
            let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_static_str("every-version"))
                    .with_mechanism(1)
                    .with_iterations(4096)
                    .with_salt(Bytes::from_static(b"0123456789abcdef"))
                    .with_salted_password(Bytes::from_static(&[7; 32])),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.results.len(),
                1,
                "AlterUserScramCredentials v{version}"
            );
            assert_eq!(
                response.results[0].error_code, NONE,
                "AlterUserScramCredentials v{version}"
            );
        }
        ApiKey::SaslHandshake => {
            // A PLAINTEXT listener has no SASL: ILLEGAL_SASL_STATE, as Kafka's KafkaApis.
            let request =
                SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, 34, "SaslHandshake v{version}");
        }
        ApiKey::SaslAuthenticate => {
            let request = SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from_static(b"\0u\0p"));
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, 34, "SaslAuthenticate v{version}");
        }
        ApiKey::DescribeAcls => {
            let request = DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_operation(1)
                .with_permission_type(1);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, SECURITY_DISABLED,
                "DescribeAcls v{version}"
            );
        }
        ApiKey::CreateAcls => {
            let request = CreateAclsRequest::default().with_creations(vec![
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(str(TOPIC))
                    .with_principal(str("User:alice"))
                    .with_host(str("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(response.results.len(), 1, "CreateAcls v{version}");
            assert_eq!(
                response.results[0].error_code, SECURITY_DISABLED,
                "CreateAcls v{version}"
            );
        }
        ApiKey::DeleteAcls => {
            let request = DeleteAclsRequest::default().with_filters(vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(if version == 0 { 3 } else { 1 })
                    .with_operation(1)
                    .with_permission_type(1),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(response.filter_results.len(), 1, "DeleteAcls v{version}");
            assert_eq!(
                response.filter_results[0].error_code, SECURITY_DISABLED,
                "DeleteAcls v{version}"
            );
        }
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(str(TOPIC)),
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(str(&fx.broker_id.to_string())),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(response.results.len(), 2);
            for r in &response.results {
                assert_eq!(r.error_code, NONE, "DescribeConfigs v{version}");
                assert!(!r.configs.is_empty(), "DescribeConfigs v{version}");
            }
        }
        ApiKey::AlterConfigs => {
            let request = AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(str("cp"))
                    .with_configs(vec![alter_configs_request::AlterableConfig::default()
                        .with_name(str("retention.ms"))
                        .with_value(Some(str(&format!("60000{version}"))))]),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.responses[0].error_code, NONE,
                "AlterConfigs v{version}"
            );
        }
        ApiKey::DescribeLogDirs => {
            // Every partition (null topics), then one asked for by name.
            for topics in [
                None,
                Some(vec![
                    describe_log_dirs_request::DescribableLogDirTopic::default()
                        .with_topic(topic_name(TOPIC))
                        .with_partitions(vec![0]),
                ]),
            ] {
                let filtered = topics.is_some();
                let request = DescribeLogDirsRequest::default().with_topics(topics);
                let response = wire.call(request, version).await;
                assert_eq!(response.error_code, NONE, "DescribeLogDirs v{version}");
                assert_eq!(response.results.len(), 1, "one log dir");
                let dir = &response.results[0];
                assert_eq!(dir.error_code, NONE, "DescribeLogDirs v{version}");
                assert!(std::path::Path::new(dir.log_dir.as_str()).is_absolute());
                let names: BTreeSet<&str> = dir.topics.iter().map(|t| t.name.0.as_str()).collect();
                if filtered {
                    assert_eq!(names, BTreeSet::from([TOPIC]), "DescribeLogDirs v{version}");
                } else {
                    assert!(
                        names.is_superset(&BTreeSet::from([TOPIC, "dr", "cp"])),
                        "{names:?}"
                    );
                }
                let ev = dir
                    .topics
                    .iter()
                    .find(|t| t.name.0.as_str() == TOPIC)
                    .unwrap();
                assert_eq!(ev.partitions.len(), 1);
                let p = &ev.partitions[0];
                assert_eq!(p.partition_index, 0);
                assert!(p.partition_size > 0, "DescribeLogDirs v{version}: {p:?}");
                assert_eq!(p.offset_lag, 0);
                assert!(!p.is_future_key);
                if version >= 4 {
                    assert!(dir.total_bytes > 0 && dir.usable_bytes > 0, "{dir:?}");
                    assert!(dir.usable_bytes <= dir.total_bytes);
                }
            }
        }
        ApiKey::DescribeProducers => {
            let request = DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(topic_name(TOPIC))
                    .with_partition_indexes(vec![0, 7]),
                describe_producers_request::TopicRequest::default()
                    .with_name(topic_name("no-such-topic"))
                    .with_partition_indexes(vec![0]),
            ]);
            let response = wire.call(request, version).await;
            let ev = &response.topics[0].partitions;
            assert_eq!(ev[0].error_code, NONE, "DescribeProducers v{version}");
            let producer = ev[0]
                .active_producers
                .iter()
                .find(|p| p.producer_id.0 == fx.producer.0)
                .unwrap_or_else(|| panic!("{:?} misses the idempotent producer", ev[0]));
            assert_eq!(producer.producer_epoch, i32::from(fx.producer.1));
            assert_eq!(producer.last_sequence, 2, "three records from sequence 0");
            assert_eq!(producer.last_timestamp, 1_700_000_000_002);
            assert_eq!(
                (
                    producer.coordinator_epoch,
                    producer.current_txn_start_offset
                ),
                (-1, -1)
            );
            assert_eq!(ev[1].error_code, UNKNOWN_TOPIC_OR_PARTITION, "partition 7");
            assert_eq!(
                response.topics[1].partitions[0].error_code,
                UNKNOWN_TOPIC_OR_PARTITION
            );
        }
        ApiKey::CreatePartitions => {
            let request = CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(topic_name("cp"))
                        .with_count(2 + i32::from(version))
                        .with_assignments(None),
                ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.results[0].error_code, NONE,
                "CreatePartitions v{version}"
            );
        }
        ApiKey::ElectLeaders => {
            // One broker: its replica is the preferred one and leads already.
            let request = ElectLeadersRequest::default()
                .with_election_type(0)
                .with_timeout_ms(10_000)
                .with_topic_partitions(Some(vec![
                    elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic_name(TOPIC))
                        .with_partitions(vec![0, 9]),
                ]));
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "ElectLeaders v{version}");
            let results = &response.replica_election_results[0].partition_result;
            let code = |p: i32| {
                results
                    .iter()
                    .find(|r| r.partition_id == p)
                    .map(|r| r.error_code)
            };
            assert_eq!(code(0), Some(84), "ELECTION_NOT_NEEDED, v{version}");
            assert_eq!(code(9), Some(UNKNOWN_TOPIC_OR_PARTITION), "v{version}");
        }
        ApiKey::AlterPartitionReassignments => {
            // Onto the replicas it has: nothing moves, the reassignment completes at once.
            let request = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    alter_partition_reassignments_request::ReassignableTopic::default()
                        .with_name(topic_name(TOPIC))
                        .with_partitions(vec![
                            alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(Some(vec![BrokerId(fx.broker_id)])),
                        ]),
                ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, NONE,
                "AlterPartitionReassignments v{version}"
            );
            assert_eq!(
                response.responses[0].partitions[0].error_code, NONE,
                "AlterPartitionReassignments v{version}"
            );
        }
        ApiKey::ListPartitionReassignments => {
            let request = ListPartitionReassignmentsRequest::default().with_timeout_ms(10_000);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.error_code, NONE,
                "ListPartitionReassignments v{version}"
            );
            assert!(response.topics.is_empty(), "nothing is being moved");
        }
        ApiKey::DeleteGroups => {
            let group = format!("dg-v{version}");
            commit(wire, &group, 1, 8).await;
            let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(&group)]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.results[0].error_code, NONE,
                "DeleteGroups v{version}"
            );
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(str("cp"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(str("segment.ms"))
                            .with_config_operation(0)
                            .with_value(Some(str(&format!("60000{version}")))),
                    ]),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(
                response.responses[0].error_code, NONE,
                "IncrementalAlterConfigs v{version}"
            );
        }
        ApiKey::OffsetDelete => {
            let group = format!("od-v{version}");
            commit(wire, &group, 1, 8).await;
            let request = OffsetDeleteRequest::default()
                .with_group_id(group_id(&group))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(TOPIC))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(0),
                        ]),
                ]);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "OffsetDelete v{version}");
            assert_eq!(response.topics[0].partitions[0].error_code, NONE);
        }
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::{
                EntityData, EntryData, OpData,
            };
            let client = format!("every-version-{version}");
            let request =
                AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
                    .with_entity(vec![EntityData::default()
                        .with_entity_type(StrBytes::from_static_str("client-id"))
                        .with_entity_name(Some(StrBytes::from_string(client.clone())))])
                    .with_ops(vec![OpData::default()
                        .with_key(StrBytes::from_static_str("producer_byte_rate"))
                        .with_value(1_000_000_000.0)])]);
            let response = wire.call(request, version).await;
            assert_eq!(response.entries.len(), 1, "AlterClientQuotas v{version}");
            assert_eq!(
                response.entries[0].error_code, NONE,
                "AlterClientQuotas v{version}"
            );
            assert_eq!(
                response.entries[0].entity[0].entity_name.as_deref(),
                Some(client.as_str())
            );
        }
        ApiKey::DescribeClientQuotas => {
            use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
            let request = DescribeClientQuotasRequest::default().with_components(vec![
                ComponentData::default()
                    .with_entity_type(StrBytes::from_static_str("client-id"))
                    .with_match_type(2),
            ]);
            let response = wire.call(request, version).await;
            assert_eq!(response.error_code, NONE, "DescribeClientQuotas v{version}");
            assert!(
                response.entries.is_some(),
                "DescribeClientQuotas v{version}"
            );
        }
        ApiKey::DescribeCluster => {
            let response = wire.call(DescribeClusterRequest::default(), version).await;
            assert_eq!(response.error_code, NONE, "DescribeCluster v{version}");
            assert_eq!(response.brokers.len(), 1, "DescribeCluster v{version}");
            assert_eq!(
                response.controller_id.0, fx.broker_id,
                "DescribeCluster v{version}"
            );
            assert!(!response.cluster_id.is_empty());
            if version >= 1 {
                assert_eq!(response.endpoint_type, 1);
                // This is a broker endpoint, not a controller one (KIP-919).
                let request = DescribeClusterRequest::default().with_endpoint_type(2);
                let response = wire.call(request, version).await;
                assert_eq!(
                    response.error_code, MISMATCHED_ENDPOINT_TYPE,
                    "DescribeCluster v{version}"
                );
            }
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let request = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group_id(&format!("cgh-v{version}")))
                .with_member_id(str(&Uuid::new_v4().simple().to_string()))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![topic_name(TOPIC)]))
                .with_server_assignor(None)
                .with_topic_partitions(Some(vec![]));
            // The codec knows v0 only; v1 adds SubscribedTopicRegex (a compact nullable
            // string) after SubscribedTopicNames: here null, one 0x00 byte before the
            // server assignor (null), the topic partitions (empty) and the tagged fields.
            let mut body = BytesMut::new();
            request.encode(&mut body, 0).unwrap();
            if version >= 1 {
                let tail = body.split_off(body.len() - 3);
                body.put_u8(0);
                body.extend_from_slice(&tail);
            }
            let mut bytes = wire
                .raw(ApiKey::ConsumerGroupHeartbeat, version, &body)
                .await;
            let response = ConsumerGroupHeartbeatResponse::decode(&mut bytes, 0).unwrap();
            assert!(!bytes.has_remaining());
            assert_eq!(
                response.error_code, NONE,
                "ConsumerGroupHeartbeat v{version}: {:?}",
                response.error_message
            );
            assert!(
                response.member_epoch >= 1,
                "ConsumerGroupHeartbeat v{version}"
            );
        }
        ApiKey::ConsumerGroupDescribe => {
            let request =
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id("cgh-v0")]);
            let response = wire.call(request, version).await;
            let g = &response.groups[0];
            assert_eq!(g.error_code, NONE, "ConsumerGroupDescribe v{version}");
            assert_eq!(g.members.len(), 1, "ConsumerGroupDescribe v{version}");
        }
        other => {
            panic!("{other:?} is in SUPPORTED_APIS but has no case in every_version.rs: add one")
        }
    }
}

#[tokio::test]
async fn every_advertised_version_of_every_api() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(
        dir.path(),
        &[
            "file.delete.delay.ms=100",
            "group.initial.rebalance.delay.ms=0",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=3",
        ],
    )
    .await;
    eventually("controller", || broker.is_controller()).await;
    let addr = broker.local_addr();

    // Setup through the project's own client (not under test): the topics the cases use,
    // records in them, and a group with a committed offset.
    let mut admin = Connection::connect(&addr.to_string(), "every-version-setup")
        .await
        .unwrap();
    for topic in [TOPIC, "dr", "cp"] {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(topic))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
        let response = admin.send(request).await.unwrap();
        assert_eq!(response.topics[0].error_code, NONE, "{topic}");
        // Ready once the partition's log is open here.
        let mut ready = false;
        for _ in 0..500 {
            let response = admin
                .send(produce_request(topic, batch(4, topic, None)))
                .await
                .unwrap();
            if response.responses[0].partition_responses[0].error_code == NONE {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ready, "{topic} never got a leader");
    }
    let topic_id = topic_id(&mut admin, TOPIC).await;
    // An idempotent producer's three records (DescribeProducers shows it).
    let init = admin
        .send(InitProducerIdRequest::default().with_transactional_id(None))
        .await
        .unwrap();
    let producer = (init.producer_id.0, init.producer_epoch);
    let response = admin
        .send(produce_request(
            TOPIC,
            batch(3, "idem", Some((producer.0, producer.1, 0))),
        ))
        .await
        .unwrap();
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        NONE
    );
    let mut fx = Fixture {
        broker_id: broker.broker_id(),
        topic_id,
        records: 7,
        producer,
        txn: (-1, -1),
    };
    // The offsets topic: created by the first FindCoordinator (COORDINATOR_NOT_AVAILABLE
    // until it has a leader, as Kafka), then loaded here (ListGroups answers
    // COORDINATOR_LOAD_IN_PROGRESS until every offsets partition this broker leads is).
    let mut coordinated = false;
    for _ in 0..1500 {
        let found = admin
            .send_version(
                FindCoordinatorRequest::default().with_key(str("fetched")),
                3,
            )
            .await
            .unwrap();
        let listed = admin.send(ListGroupsRequest::default()).await.unwrap();
        if found.error_code == NONE && listed.error_code == NONE {
            coordinated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(coordinated, "the offsets topic never got loaded");
    // The transaction log likewise, then the transactional producer's first epoch.
    for _ in 0..1500 {
        let found = admin
            .send_version(
                FindCoordinatorRequest::default()
                    .with_key(str(TXN_ID))
                    .with_key_type(1),
                3,
            )
            .await
            .unwrap();
        if found.error_code == NONE {
            let init = admin
                .send(
                    InitProducerIdRequest::default()
                        .with_transactional_id(Some(txn_id(TXN_ID)))
                        .with_transaction_timeout_ms(60_000),
                )
                .await
                .unwrap();
            if init.error_code == NONE {
                fx.txn = (init.producer_id.0, init.producer_epoch);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fx.txn.1, 0, "the transaction log never got loaded");
    let mut wire = Wire::connect(addr).await;
    commit(&mut wire, "fetched", 1, 8).await;
    wire.sent.clear();

    for row in SUPPORTED_APIS {
        for version in row.min_version..=row.max_version {
            exercise(&mut wire, &mut fx, row.api_key, version).await;
        }
    }

    let missing: Vec<String> = SUPPORTED_APIS
        .iter()
        .flat_map(|r| (r.min_version..=r.max_version).map(move |v| (r.api_key, v)))
        .filter(|(k, v)| !wire.sent.contains(&(*k as i16, *v)))
        .map(|(k, v)| format!("{k:?} v{v}"))
        .collect();
    assert!(missing.is_empty(), "advertised but never sent: {missing:?}");
    broker.shutdown().await;
}

async fn topic_id(conn: &mut Connection, topic: &str) -> Uuid {
    let response = conn
        .send(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
        ])))
        .await
        .unwrap();
    response.topics[0].topic_id
}
