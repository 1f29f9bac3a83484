//! DeleteGroups.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use security::acl::Operation;

pub(super) async fn handle(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: &DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    // DELETE on each group (Kafka's handleDeleteGroupsRequest); refused groups answer
    // GROUP_AUTHORIZATION_FAILED and are left alone.
    let (allowed, denied): (Vec<_>, Vec<_>) = request
        .groups_names
        .iter()
        .cloned()
        .partition(|g| super::authorized_group(ctx, rctx, Operation::Delete, g));
    let mut response = if denied.is_empty() {
        delete(ctx, request).await
    } else {
        let mut only = request.clone();
        only.groups_names = allowed;
        delete(ctx, &only).await
    };
    response.results.extend(denied.into_iter().map(|g| {
        DeletableGroupResult::default()
            .with_group_id(g)
            .with_error_code(super::GROUP_AUTHORIZATION_FAILED)
    }));
    response
}

async fn delete(ctx: &BrokerContext, request: &DeleteGroupsRequest) -> DeleteGroupsResponse {
    if request.groups_names.is_empty() {
        return DeleteGroupsResponse::default();
    }
    let (coordinator, served, refused) = ctx
        .groups
        .split(ctx, request.groups_names.clone(), |g| g.0.as_str());
    let mut response = match coordinator {
        Some(groups) if !served.is_empty() => {
            let mut only = request.clone();
            only.groups_names = served;
            groups.delete_groups(&only).await
        }
        _ => DeleteGroupsResponse::default(),
    };
    response
        .results
        .extend(refused.into_iter().map(|(g, code)| {
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code)
        }));
    response
}
