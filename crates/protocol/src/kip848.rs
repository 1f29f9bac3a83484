//! ConsumerGroupHeartbeat v1 on top of the codec's v0.
//!
//! Kafka 4.0 made KIP-848 generally available as ConsumerGroupHeartbeat v1, and current
//! clients (librdkafka 2.10+) refuse a broker that advertises only v0. The `kafka-protocol`
//! crate knows v0 only. The two differ in one request field: v1 carries
//! `SubscribedTopicRegex` (a compact nullable string) right after `SubscribedTopicNames`;
//! the responses are identical. So a v1 request body is rewritten into v0 by dropping that
//! field, and a v1 response is encoded as v0.
//!
//! Regex subscriptions are not supported: a v1 request with a non-empty regex is refused
//! while decoding, which closes the connection the way any undecodable request does.

use bytes::{Buf, Bytes, BytesMut};

/// The highest ConsumerGroupHeartbeat version the codec encodes and decodes itself.
pub(crate) const CODEC_VERSION: i16 = 0;

/// Why a v1 body could not be rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RewriteError(pub(crate) String);

/// Rewrites a ConsumerGroupHeartbeat v1 request body (after the header) into v0.
pub(crate) fn heartbeat_v1_to_v0(body: Bytes) -> Result<Bytes, RewriteError> {
    let mut cursor = &body[..];
    let start_len = cursor.len();
    skip_compact_string(&mut cursor, "GroupId")?; // GroupId
    skip_compact_string(&mut cursor, "MemberId")?; // MemberId
    skip(&mut cursor, 4, "MemberEpoch")?;
    skip_compact_string(&mut cursor, "InstanceId")?;
    skip_compact_string(&mut cursor, "RackId")?;
    skip(&mut cursor, 4, "RebalanceTimeoutMs")?;
    // SubscribedTopicNames: compact nullable array of compact strings.
    let count = read_unsigned_varint(&mut cursor, "SubscribedTopicNames")?;
    for _ in 0..count.saturating_sub(1) {
        skip_compact_string(&mut cursor, "SubscribedTopicNames")?;
    }
    let regex_at = start_len - cursor.len();
    // Null (0) or empty (1, what librdkafka sends when subscribing by name) means no regex.
    let regex_len = read_unsigned_varint(&mut cursor, "SubscribedTopicRegex")?;
    if regex_len > 1 {
        return Err(RewriteError(
            "regex subscriptions (SubscribedTopicRegex) are not supported".to_owned(),
        ));
    }
    let rest_at = start_len - cursor.len();
    let mut out = BytesMut::with_capacity(body.len());
    out.extend_from_slice(&body[..regex_at]);
    out.extend_from_slice(&body[rest_at..]);
    Ok(out.freeze())
}

fn skip(cursor: &mut &[u8], n: usize, field: &str) -> Result<(), RewriteError> {
    if cursor.remaining() < n {
        return Err(RewriteError(format!(
            "{field} runs past the end of the request"
        )));
    }
    cursor.advance(n);
    Ok(())
}

fn skip_compact_string(cursor: &mut &[u8], field: &str) -> Result<(), RewriteError> {
    let len = read_unsigned_varint(cursor, field)?;
    // 0 is null, N+1 is N bytes.
    skip(cursor, len.saturating_sub(1) as usize, field)
}

fn read_unsigned_varint(cursor: &mut &[u8], field: &str) -> Result<u32, RewriteError> {
    let mut value: u32 = 0;
    for shift in (0..35).step_by(7) {
        if !cursor.has_remaining() {
            return Err(RewriteError(format!(
                "{field} runs past the end of the request"
            )));
        }
        let byte = cursor.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RewriteError(format!("{field}: varint longer than 5 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    fn v0_body(request: &ConsumerGroupHeartbeatRequest) -> Vec<u8> {
        let mut buf = BytesMut::new();
        request.encode(&mut buf, 0).unwrap();
        buf.to_vec()
    }

    /// Builds the v1 body by inserting the regex after the topic names of the v0 body. The
    /// sample's v0 tail after the names is ServerAssignor "range" (6 bytes), null
    /// TopicPartitions (1) and no tagged fields (1).
    fn v1_body(request: &ConsumerGroupHeartbeatRequest, regex: Option<&str>) -> Bytes {
        let v0 = v0_body(request);
        let split = v0.len() - 8;
        let mut out = BytesMut::new();
        out.extend_from_slice(&v0[..split]);
        match regex {
            None => out.extend_from_slice(&[0]),
            Some(r) => {
                out.extend_from_slice(&[(r.len() + 1) as u8]);
                out.extend_from_slice(r.as_bytes());
            }
        }
        out.extend_from_slice(&v0[split..]);
        out.freeze()
    }

    fn sample() -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m-1"))
            .with_member_epoch(3)
            .with_rack_id(Some(StrBytes::from_static_str("r")))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![
                TopicName(StrBytes::from_static_str("a")),
                TopicName(StrBytes::from_static_str("bb")),
            ]))
            .with_server_assignor(Some(StrBytes::from_static_str("range")))
    }

    #[test]
    fn a_v1_body_without_regex_decodes_as_the_same_v0_request() {
        let request = sample();
        for regex in [None, Some("")] {
            let rewritten = heartbeat_v1_to_v0(v1_body(&request, regex)).unwrap();
            let decoded = ConsumerGroupHeartbeatRequest::decode(&mut rewritten.clone(), 0).unwrap();
            assert_eq!(decoded, request);
        }
    }

    #[test]
    fn a_regex_or_a_truncated_body_is_refused() {
        let request = sample();
        assert!(heartbeat_v1_to_v0(v1_body(&request, Some("a.*"))).is_err());
        let full = v1_body(&request, None);
        assert!(heartbeat_v1_to_v0(full.slice(..5)).is_err());
    }
}
