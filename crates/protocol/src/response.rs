//! Response encoding: size prefix, the response header at the version its API and version
//! call for (always v0 for `ApiVersions`, which never carries tagged fields), then the body.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::api_versions::api_versions_response;
use crate::error_code::ResponseError;

/// A response that `kafka-protocol` refused to encode: a bug in a handler (a field that its
/// version cannot carry), never the client's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot encode {api_key:?} v{api_version} response: {reason}")]
pub struct ResponseEncodeError {
    /// The API.
    pub api_key: ApiKey,
    /// The version asked for.
    pub api_version: i16,
    /// What the encoder said.
    pub reason: String,
}

/// Encodes a complete frame (size prefix included) answering `correlation_id`.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<BytesMut, ResponseEncodeError> {
    // ConsumerGroupHeartbeat v1 responses are byte for byte v0's (see `kip848`).
    let body_version = if api_key == ApiKey::ConsumerGroupHeartbeat {
        api_version.min(crate::kip848::CODEC_VERSION)
    } else {
        api_version
    };
    encode_response_at(api_key, api_version, body_version, correlation_id, body)
}

/// The error answer to a request at a version outside the table
/// ([`crate::request::RequestBody::Unsupported`]):
/// the response header of the version asked for, the body at
/// [`crate::request::codec_version`] of it (the version itself when `kafka-protocol` knows
/// it; for a version from a newer Kafka, the newest this broker knows, which a client of
/// that version reads as long as the newer version added only tagged fields).
pub fn encode_unsupported_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<BytesMut, ResponseEncodeError> {
    let body_version = crate::request::codec_version(api_key, api_version);
    encode_response_at(api_key, api_version, body_version, correlation_id, body)
}

fn encode_response_at(
    api_key: ApiKey,
    api_version: i16,
    body_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<BytesMut, ResponseEncodeError> {
    let fail = |err: anyhow_msg::Msg| ResponseEncodeError {
        api_key,
        api_version,
        reason: err.0,
    };
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut out, api_key.response_header_version(api_version))
        .map_err(|e| fail(e.into()))?;
    body.encode(&mut out, body_version)
        .map_err(|e| fail(e.into()))?;
    let size = i32::try_from(out.len() - 4).map_err(|_| ResponseEncodeError {
        api_key,
        api_version,
        reason: "response larger than 2 GiB".to_string(),
    })?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}

/// Kafka's answer to an `ApiVersions` request at a version it does not know: the v0 format
/// (no throttle time) with `UNSUPPORTED_VERSION` and, as Kafka does since KIP-511, only the
/// `ApiVersions` row, so the client can retry at a version both sides know.
pub fn encode_unsupported_api_versions(correlation_id: i32) -> BytesMut {
    let own = api_versions_response()
        .api_keys
        .into_iter()
        .filter(|row| row.api_key == ApiKey::ApiVersions as i16)
        .collect();
    let body = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(own);
    encode_response(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        &ResponseKind::ApiVersions(body),
    )
    .expect("an ApiVersions v0 response always encodes")
}

mod anyhow_msg {
    pub(super) struct Msg(pub(super) String);

    impl<E: std::fmt::Display> From<E> for Msg {
        fn from(err: E) -> Self {
            Msg(format!("{err:#}"))
        }
    }
}
