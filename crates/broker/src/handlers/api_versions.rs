//! ApiVersions: the versions of [`protocol::SUPPORTED_APIS`]. Versions above ours never reach
//! this handler (the connection answers them in v0 with UNSUPPORTED_VERSION).

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

pub(super) fn handle(_request: ApiVersionsRequest) -> ApiVersionsResponse {
    protocol::api_versions::api_versions_response()
}
