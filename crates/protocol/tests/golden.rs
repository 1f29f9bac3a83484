//! Golden bytes: requests as real clients frame them, and our responses byte for byte.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, RequestHeader, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use protocol::frame::decode_frame;
use protocol::request::RequestBody;
use protocol::response::encode_unsupported_api_versions;
use protocol::{decode_request, encode_response, RequestError, SUPPORTED_APIS};

fn request_bytes(key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("golden")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// ApiVersions v0 as librdkafka's first probe sends it: key 18, version 0, correlation 1,
/// client id "rdkafka", empty body.
#[test]
fn decodes_librdkafka_api_versions_v0_probe() {
    let frame = Bytes::from_static(b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x07rdkafka");
    let req = decode_request(frame).unwrap();
    assert_eq!(req.api_key, ApiKey::ApiVersions);
    assert_eq!(req.correlation_id(), 1);
    assert_eq!(req.header.client_id.as_deref(), Some("rdkafka"));
    assert!(matches!(
        req.body,
        RequestBody::Supported(RequestKind::ApiVersions(_))
    ));
}

#[test]
fn api_versions_v3_round_trip_has_header_v0_and_no_tagged_fields() {
    let body = protocol::api_versions::api_versions_response();
    let frame = encode_response(
        ApiKey::ApiVersions,
        3,
        7,
        &ResponseKind::ApiVersions(body.clone()),
    )
    .unwrap();
    let mut wire = frame.clone();
    let payload = decode_frame(&mut wire, 1 << 20).unwrap().unwrap();
    // Header v0: just the correlation id, then the body's error code.
    assert_eq!(&payload[..6], b"\x00\x00\x00\x07\x00\x00");
    // Compact array length is count + 1, then 13 rows of key/min/max + an empty tag buffer.
    assert_eq!(payload[6] as usize, SUPPORTED_APIS.len() + 1);
    let rows_end = 7 + SUPPORTED_APIS.len() * 7;
    // throttle_time_ms then an empty top-level tag buffer: no optional tagged fields.
    assert_eq!(&payload[rows_end..], b"\x00\x00\x00\x00\x00");
    let mut rest = payload.slice(4..);
    let decoded = kafka_protocol::messages::ApiVersionsResponse::decode(&mut rest, 3).unwrap();
    assert_eq!(decoded, body);
}

#[test]
fn unsupported_api_versions_is_v0_format() {
    let frame = encode_unsupported_api_versions(9);
    let mut wire = frame.clone();
    let payload = decode_frame(&mut wire, 1 << 20).unwrap().unwrap();
    // Correlation id, UNSUPPORTED_VERSION, one row: ApiVersions 0..=4.
    assert_eq!(
        payload.as_ref(),
        b"\x00\x00\x00\x09\x00\x23\x00\x00\x00\x01\x00\x12\x00\x00\x00\x04"
    );
}

#[test]
fn api_versions_v4_is_ours_and_v5_is_recognised_as_unsupported() {
    let v4 = request_bytes(
        ApiKey::ApiVersions,
        4,
        3,
        &RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("kafka-python"))
                .with_client_software_version(StrBytes::from_static_str("3.0")),
        ),
    );
    let req = decode_request(v4).unwrap();
    assert!(matches!(
        req.body,
        RequestBody::Supported(RequestKind::ApiVersions(_))
    ));
    // v5 (no codec knows it yet): header v2 (key 18, version 5, correlation 3, client id,
    // no tagged fields), then a body that must not be parsed.
    let v5 = Bytes::from_static(b"\x00\x12\x00\x05\x00\x00\x00\x03\x00\x06golden\x00\x42\x42");
    let req = decode_request(v5).unwrap();
    assert!(matches!(req.body, RequestBody::UnsupportedApiVersions));
    assert_eq!(req.correlation_id(), 3);
}

#[test]
fn flexible_metadata_request_round_trips() {
    let body = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(true);
    let bytes = request_bytes(
        ApiKey::Metadata,
        9,
        42,
        &RequestKind::Metadata(body.clone()),
    );
    let req = decode_request(bytes).unwrap();
    assert_eq!(req.header.request_api_version, 9);
    match req.body {
        RequestBody::Supported(RequestKind::Metadata(decoded)) => assert_eq!(decoded, body),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unsupported_api_is_still_decoded_for_an_error_reply() {
    // AlterReplicaLogDirs (moving replicas between log dirs) is not served at all.
    assert!(!protocol::api_versions::is_supported(
        ApiKey::AlterReplicaLogDirs,
        1
    ));
    let bytes = request_bytes(
        ApiKey::AlterReplicaLogDirs,
        1,
        5,
        &RequestKind::AlterReplicaLogDirs(Default::default()),
    );
    let req = decode_request(bytes).unwrap();
    assert!(matches!(
        req.body,
        RequestBody::Unsupported(RequestKind::AlterReplicaLogDirs(_))
    ));
}

#[test]
fn garbage_is_refused_with_a_reason() {
    assert_eq!(
        decode_request(Bytes::from_static(b"\x00\x03")).unwrap_err(),
        RequestError::TooShort(2)
    );
    let err = decode_request(Bytes::from_static(b"\x7f\x00\x00\x00\x00\x00\x00\x01")).unwrap_err();
    assert_eq!(
        err,
        RequestError::UnknownApiKey {
            api_key: 0x7f00,
            correlation_id: 1
        }
    );
    // Metadata v1 whose topic array claims 5 entries but has none.
    let err = decode_request(Bytes::from_static(
        b"\x00\x03\x00\x01\x00\x00\x00\x02\xff\xff\x00\x00\x00\x05",
    ))
    .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::Body {
                api_key: ApiKey::Metadata,
                ..
            }
        ),
        "{err:?}"
    );
}
