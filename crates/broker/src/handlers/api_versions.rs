//! ApiVersions (v0-4): the versions of [`protocol::SUPPORTED_APIS`]. Versions above ours never
//! reach this handler (the connection answers them in v0 with UNSUPPORTED_VERSION). From v3
//! the client names its software (KIP-511); a name or version Kafka's pattern refuses is
//! INVALID_REQUEST, a valid pair is recorded for the connection (see `crate::connection`).

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::metrics::ClientSoftware;

/// Kafka's INVALID_REQUEST error code.
const INVALID_REQUEST: i16 = 42;

pub(super) fn handle(request: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    if version >= 3 && client_software(request, version).is_none() {
        return ApiVersionsResponse::default().with_error_code(INVALID_REQUEST);
    }
    protocol::api_versions::api_versions_response()
}

/// The client software a v3+ request names, if both parts match Kafka's
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`; `None` below v3 or for an invalid pair.
pub(crate) fn client_software(
    request: &ApiVersionsRequest,
    version: i16,
) -> Option<ClientSoftware> {
    let name = request.client_software_name.as_str();
    let software_version = request.client_software_version.as_str();
    (version >= 3 && valid(name) && valid(software_version)).then(|| ClientSoftware {
        name: name.to_owned(),
        version: software_version.to_owned(),
    })
}

fn valid(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.';
    match bytes {
        [] => false,
        [only] => edge(only),
        [first, middle @ .., last] => edge(first) && edge(last) && middle.iter().all(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for ok in [
            "a",
            "librdkafka",
            "apache-kafka-java",
            "2.16.1",
            "v1.0-rc1",
            "A9",
        ] {
            assert!(valid(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", ".1", "1.", "a b", "a_b", "ü", "a/b"] {
            assert!(!valid(bad), "{bad}");
        }
    }
}
