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
    /// An API or version we do not handle that `kafka-protocol` could still decode, so the
    /// broker can answer with that API's own error response instead of closing the connection.
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
    let header =
        RequestHeader::decode(&mut buf, header_version).map_err(|err| RequestError::Header {
            api_key: raw_key,
            api_version,
            reason: err.to_string(),
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
            RequestKind::decode(api_key, &mut buf, api_version)
                .map_err(|e| body_error(e.into()))?,
        )
    };
    Ok(DecodedRequest {
        header,
        api_key,
        body,
    })
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
