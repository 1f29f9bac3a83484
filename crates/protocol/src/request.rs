//! Request decoding: the header at the version its API and version call for, then the body.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::api_versions::is_supported;

/// A request whose header was understood.
#[derive(Debug)]
pub struct DecodedRequest {
    /// The request header (api key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The API, already resolved from the header.
    pub api_key: ApiKey,
    /// What the body turned out to be.
    pub body: RequestBody,
}

impl DecodedRequest {
    /// The request's version.
    pub fn api_version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The request's correlation id.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// The body of a [`DecodedRequest`].
#[derive(Debug)]
pub enum RequestBody {
    /// An API and version listed in [`crate::SUPPORTED_APIS`], decoded.
    Supported(RequestKind),
    /// `ApiVersions` at a version above ours. As Kafka does, the body is not parsed and the
    /// broker answers in the v0 format with `UNSUPPORTED_VERSION` and the versions it knows,
    /// so the client can retry with one of them.
    UnsupportedApiVersions,
    /// An API or version we do not handle, decoded (leniently) at [`codec_version`] of its
    /// version, so the broker can answer with that API's own error response (UNSUPPORTED_VERSION)
    /// instead of closing the connection. A version newer than any this broker knows is read
    /// at the newest it knows: when the newer version only added tagged fields (or nothing),
    /// that is the request; otherwise the items echoed in the error answer may be off, which
    /// only matters for an answer that refuses them all anyway.
    Unsupported(RequestKind),
}

/// Why a frame could not be turned into a request. The connection closes after any of these
/// because no well-formed response can be addressed to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The frame is shorter than the fixed part of a request header.
    #[error("frame of {0} bytes is too short to hold a request header")]
    TooShort(usize),
    /// The api key is not one Kafka defines.
    #[error("unknown api key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey {
        /// The key sent.
        api_key: i16,
        /// The request's correlation id.
        correlation_id: i32,
    },
    /// The request header did not decode.
    #[error("malformed request header for api key {api_key} v{api_version}: {reason}")]
    Header {
        /// The key sent.
        api_key: i16,
        /// The version sent.
        api_version: i16,
        /// What the decoder said.
        reason: String,
    },
    /// The body did not decode at the version the header names.
    #[error("malformed {api_key:?} v{api_version} request body (correlation id {correlation_id}): {reason}")]
    Body {
        /// The API.
        api_key: ApiKey,
        /// The version sent.
        api_version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// What the decoder said.
        reason: String,
    },
}

/// Decodes one frame body (without its size prefix) into a request.
pub fn decode_request(frame: Bytes) -> Result<DecodedRequest, RequestError> {
    if frame.len() < 8 {
        return Err(RequestError::TooShort(frame.len()));
    }
    let mut peek = &frame[..8];
    let raw_key = peek.get_i16();
    let api_version = peek.get_i16();
    let correlation_id = peek.get_i32();
    let api_key = ApiKey::try_from(raw_key).map_err(|()| RequestError::UnknownApiKey {
        api_key: raw_key,
        correlation_id,
    })?;

    let mut buf = frame;
    let header_version = api_key.request_header_version(api_version);
    let header = decode_header_detached(&mut buf, header_version).map_err(|reason| {
        RequestError::Header {
            api_key: raw_key,
            api_version,
            reason,
        }
    })?;

    let body_error = |err: anyhow_like::Error| RequestError::Body {
        api_key,
        api_version,
        correlation_id,
        reason: err.0,
    };
    let body = if api_key == ApiKey::ConsumerGroupHeartbeat
        && api_version > crate::kip848::CODEC_VERSION
        && is_supported(api_key, api_version)
    {
        // v1 is v0 plus one field the codec does not know (see `kip848`).
        let mut v0 = crate::kip848::heartbeat_v1_to_v0(buf).map_err(|e| body_error(e.0.into()))?;
        RequestBody::Supported(
            RequestKind::decode(api_key, &mut v0, crate::kip848::CODEC_VERSION)
                .map_err(|e| body_error(e.into()))?,
        )
    } else if is_supported(api_key, api_version) {
        RequestBody::Supported(
            RequestKind::decode(api_key, &mut buf, api_version)
                .map_err(|e| body_error(e.into()))?,
        )
    } else if api_key == ApiKey::ApiVersions {
        RequestBody::UnsupportedApiVersions
    } else {
        RequestBody::Unsupported(
            RequestKind::decode(api_key, &mut buf, codec_version(api_key, api_version))
                .map_err(|e| body_error(e.into()))?,
        )
    };
    Ok(DecodedRequest {
        header,
        api_key,
        body,
    })
}

/// The version `kafka-protocol` reads and writes for a request of `api_key` at `version`:
/// `version` itself when the codec knows it, else the nearest it knows (a version from a
/// newer Kafka is read as the newest this broker knows; see [`RequestBody::Unsupported`]).
pub fn codec_version(api_key: ApiKey, version: i16) -> i16 {
    let known = api_key.valid_versions();
    version.clamp(known.min, known.max)
}

/// How much of a frame is copied to decode its header from (api key, version, correlation
/// id, client id, tagged fields); a longer header is decoded in place.
const HEADER_COPY_BYTES: usize = 512;

/// Decodes the request header from a copy of the frame's first bytes, so that nothing in the
/// header (its client id) shares the frame's buffer: a handler can then take a record set
/// over without copying it (Produce rewrites base offsets in place). A decode that succeeds
/// on the prefix is the decode of the whole frame, since a truncated field fails.
fn decode_header_detached(buf: &mut Bytes, version: i16) -> Result<RequestHeader, String> {
    let n = buf.len().min(HEADER_COPY_BYTES);
    let mut head = Bytes::copy_from_slice(&buf[..n]);
    match RequestHeader::decode(&mut head, version) {
        Ok(header) => {
            buf.advance(n - head.remaining());
            Ok(header)
        }
        Err(_) if n < buf.len() => RequestHeader::decode(buf, version).map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    }
}

/// Keeps `anyhow` out of our public types: the decoder's error becomes its message.
mod anyhow_like {
    pub(super) struct Error(pub(super) String);

    impl<E: std::fmt::Display> From<E> for Error {
        fn from(err: E) -> Self {
            Error(format!("{err:#}"))
        }
    }
}

#[cfg(test)]
mod header_tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    fn produce_frame(client_id: &str, records: &'static [u8]) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(8)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_string(client_id.to_owned())))
            .encode(&mut buf, ApiKey::Produce.request_header_version(8))
            .expect("header");
        ProduceRequest::default()
            .with_acks(1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from_static(records)))])])
            .encode(&mut buf, 8)
            .expect("body");
        buf.freeze()
    }

    fn records_of(body: RequestBody) -> Bytes {
        let RequestBody::Supported(RequestKind::Produce(p)) = body else {
            panic!("not a supported produce request");
        };
        let topic = p.topic_data.into_iter().next().expect("topic");
        topic
            .partition_data
            .into_iter()
            .next()
            .and_then(|d| d.records)
            .expect("records")
    }

    #[test]
    fn the_header_does_not_share_the_frame() {
        // Copy the frame into a fresh buffer so the static test data is not involved.
        let frame = Bytes::copy_from_slice(&produce_frame("rdkafka", b"0123456789"));
        let decoded = decode_request(frame).expect("decodes");
        assert_eq!(decoded.correlation_id(), 7);
        let header = decoded.header;
        let records = records_of(decoded.body);
        assert_eq!(header.client_id.as_deref(), Some("rdkafka"));
        // With the header alive, the records are the only holder of the frame's buffer.
        let records = records
            .try_into_mut()
            .expect("records own the request buffer");
        assert_eq!(&records[..], b"0123456789");
    }

    #[test]
    fn a_header_longer_than_the_copy_is_decoded_in_place() {
        let long = "c".repeat(HEADER_COPY_BYTES * 2);
        let frame = Bytes::copy_from_slice(&produce_frame(&long, b"xy"));
        let decoded = decode_request(frame).expect("decodes");
        assert_eq!(decoded.header.client_id.as_deref(), Some(long.as_str()));
        assert_eq!(&records_of(decoded.body)[..], b"xy");
    }

    #[test]
    fn a_truncated_header_is_still_refused() {
        let frame = produce_frame("rdkafka", b"x");
        let err = decode_request(frame.slice(..12)).expect_err("truncated client id");
        assert!(matches!(err, RequestError::Header { .. }), "{err:?}");
    }
}
