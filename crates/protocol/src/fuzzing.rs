//! Shared by the fuzz targets (issue 14): the structured proptest runs in `tests/fuzz_full.rs`
//! and the coverage-guided libFuzzer targets in `fuzz/` (outside the workspace; see
//! docs/fuzzing.md) call the same check and build seeds from the same valid requests. Not
//! part of the crate's API.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, HeaderVersion, Request, StrBytes};

use crate::decode_request;

/// The check: the broker's decode path (`decode_request`) answers `Ok` or `Err` for any frame
/// (size prefix stripped) without panicking. Returns whether it decoded.
pub fn check_decode(frame: &[u8]) -> bool {
    decode_request(Bytes::copy_from_slice(frame)).is_ok()
}

/// The request header of `api_key` at `version`, as a client encodes it.
pub fn header(api_key: ApiKey, version: i16, client_id: Option<&str>) -> BytesMut {
    let mut buf = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(client_id.map(|c| StrBytes::from_string(c.to_owned())));
    let header_version = api_key.request_header_version(version);
    header
        .encode(&mut buf, header_version)
        .expect("header encodes");
    buf
}

/// Valid requests with content, encoded at every version of their row.
pub fn seed_frames(records: &Bytes, names: &[String]) -> Vec<Vec<u8>> {
    fn frame<R: Request + Encodable + HeaderVersion + Clone>(out: &mut Vec<Vec<u8>>, request: &R) {
        let range =
            crate::supported_range(R::KEY.try_into().expect("known key")).expect("supported");
        for version in range.min_version..=range.max_version {
            let key: ApiKey = R::KEY.try_into().expect("known key");
            let mut buf = header(key, version, Some("fuzz"));
            if request.encode(&mut buf, version).is_ok() {
                out.push(buf.to_vec());
            }
        }
    }
    let s = |t: &str| StrBytes::from_string(t.to_owned());
    let mut out = Vec::new();
    let topics: Vec<TopicName> = names.iter().map(|n| TopicName(s(n))).collect();
    frame(
        &mut out,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(
                topics
                    .iter()
                    .take(3)
                    .map(|t| {
                        produce_request::TopicProduceData::default()
                            .with_name(t.clone())
                            .with_partition_data(vec![
                                produce_request::PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(records.clone())),
                            ])
                    })
                    .collect(),
            ),
    );
    frame(
        &mut out,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(500)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        fetch_request::FetchTopic::default()
                            .with_topic(t.clone())
                            .with_partitions(
                                (0..4)
                                    .map(|p| {
                                        fetch_request::FetchPartition::default()
                                            .with_partition(p)
                                            .with_fetch_offset(i64::from(p) * 1000)
                                            .with_partition_max_bytes(1 << 20)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
    );
    frame(
        &mut out,
        &MetadataRequest::default().with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    metadata_request::MetadataRequestTopic::default().with_name(Some(t.clone()))
                })
                .collect(),
        )),
    );
    frame(
        &mut out,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(s("fuzz-group")))
            .with_session_timeout_ms(10_000)
            .with_member_id(s(""))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(records.slice(..records.len().min(4096)))]),
    );
    frame(
        &mut out,
        &CreateTopicsRequest::default().with_topics(
            topics
                .iter()
                .map(|t| {
                    create_topics_request::CreatableTopic::default()
                        .with_name(t.clone())
                        .with_num_partitions(3)
                        .with_replication_factor(1)
                        .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("1000")))])
                })
                .collect(),
        ),
    );
    frame(
        &mut out,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(s("fuzz-group")))
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(t.clone())
                            .with_partitions(vec![
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(42),
                            ])
                    })
                    .collect(),
            ),
    );
    out
}
