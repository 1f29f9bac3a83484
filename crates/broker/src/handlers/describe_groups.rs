//! DescribeGroups.

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    // DESCRIBE on each group (Kafka's handleDescribeGroupRequest); refused groups answer
    // GROUP_AUTHORIZATION_FAILED.
    let (allowed, denied): (Vec<_>, Vec<_>) = request
        .groups
        .iter()
        .cloned()
        .partition(|g| super::authorized_group(ctx, rctx, Operation::Describe, g));
    let mut response = if denied.is_empty() {
        describe(ctx, request).await
    } else {
        let mut only = request.clone();
        only.groups = allowed;
        describe(ctx, &only).await
    };
    // KIP-430 (v3+): what the principal may do on each group it may describe.
    if request.include_authorized_operations {
        for group in response.groups.iter_mut().filter(|g| g.error_code == 0) {
            group.authorized_operations = super::authorized_operations(
                ctx,
                rctx,
                security::acl::ResourceType::Group,
                &group.group_id,
            );
        }
    }
    response.groups.extend(denied.into_iter().map(|g| {
        DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(super::GROUP_AUTHORIZATION_FAILED)
            .with_authorized_operations(i32::MIN)
    }));
    response
}

async fn describe(ctx: &BrokerContext, request: &DescribeGroupsRequest) -> DescribeGroupsResponse {
    if request.groups.is_empty() {
        return DescribeGroupsResponse::default();
    }
    let (coordinator, served, refused) = ctx
        .groups
        .split(ctx, request.groups.clone(), |g| g.0.as_str());
    let mut response = match coordinator {
        Some(groups) if !served.is_empty() => {
            let mut only = request.clone();
            only.groups = served;
            groups.describe_groups(&only)
        }
        _ => DescribeGroupsResponse::default(),
    };
    response.groups.extend(refused.into_iter().map(|(g, code)| {
        DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(code)
            .with_authorized_operations(i32::MIN)
    }));
    response
}
