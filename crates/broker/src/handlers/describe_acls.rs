//! DescribeAcls: Gregor has no authorizer, and a Kafka broker without one answers
//! SECURITY_DISABLED. Listed in ApiVersions so version-sniffing clients see a 2.8 broker.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

pub(super) fn handle(_request: DescribeAclsRequest) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(ResponseError::SecurityDisabled.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "No Authorizer is configured on the broker",
        )))
}
