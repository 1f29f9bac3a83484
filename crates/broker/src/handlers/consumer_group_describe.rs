//! ConsumerGroupDescribe (KIP-848).

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    // DESCRIBE on each group; refused groups answer GROUP_AUTHORIZATION_FAILED.
    let (allowed, denied): (Vec<_>, Vec<_>) = request
        .group_ids
        .iter()
        .cloned()
        .partition(|g| super::authorized_group(ctx, rctx, Operation::Describe, g));
    let mut response = if denied.is_empty() {
        describe(ctx, request).await
    } else {
        let mut only = request.clone();
        only.group_ids = allowed;
        describe(ctx, &only).await
    };
    response.groups.extend(denied.into_iter().map(|g| {
        DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(super::GROUP_AUTHORIZATION_FAILED)
            .with_authorized_operations(i32::MIN)
    }));
    response
}

async fn describe(
    ctx: &BrokerContext,
    request: &ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    if request.group_ids.is_empty() {
        return ConsumerGroupDescribeResponse::default();
    }
    let (coordinator, served, refused) = ctx
        .groups
        .split(ctx, request.group_ids.clone(), |g| g.0.as_str());
    let mut response = match coordinator {
        Some(groups) if !served.is_empty() => {
            let mut only = request.clone();
            only.group_ids = served;
            groups.consumer_group_describe(&only)
        }
        _ => ConsumerGroupDescribeResponse::default(),
    };
    response.groups.extend(refused.into_iter().map(|(g, code)| {
        DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(code)
            .with_authorized_operations(i32::MIN)
    }));
    response
}
