//! Kafka wire-protocol glue: size-prefixed frames, request-header decoding, response
//! encoding with the right header version, error codes, and THE table of API versions
//! Gregor implements ([`SUPPORTED_APIS`]).
//!
//! Message types come from the `kafka-protocol` crate; this crate writes no codecs of its
//! own apart from the tiny v0 `ApiVersions` error reply Kafka sends to clients that open
//! with a version it does not know. It owns no sockets, no tokio and no files: every function
//! is deterministic over bytes, so it can be unit-tested and fuzzed. The broker's socket
//! server reads frames with [`frame`], turns them into [`request::DecodedRequest`]s and
//! writes what [`response`] encodes.

pub mod api_versions;
pub mod error_code;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod kip848;
pub mod request;
pub mod response;

pub use api_versions::{supported_range, ApiVersionRange, SUPPORTED_APIS};
pub use error_code::ErrorCode;
pub use frame::{FrameError, DEFAULT_MAX_REQUEST_BYTES};
pub use request::{decode_request, DecodedRequest, RequestError};
pub use response::{encode_response, encode_unsupported_response, ResponseEncodeError};

/// Re-exported so dependants use the exact `kafka-protocol` version this crate glues.
pub use kafka_protocol;
