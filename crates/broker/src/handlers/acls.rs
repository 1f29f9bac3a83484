//! CreateAcls, DescribeAcls and DeleteAcls (Kafka's `handleCreateAcls` and siblings).
//!
//! Without an authorizer each answers SECURITY_DISABLED ("No Authorizer is configured on the
//! broker"), as Kafka does. With one: CreateAcls and DeleteAcls need ALTER on the cluster,
//! DescribeAcls DESCRIBE on it (else CLUSTER_AUTHORIZATION_FAILED and nothing changes); a
//! filter or binding naming an element this version does not know is INVALID_REQUEST.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use security::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, EntryFilter, Operation, PatternType,
    Permission, ResourcePattern, ResourcePatternFilter, ResourceType,
};

use crate::auth::RequestContext;
use crate::context::BrokerContext;

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A filter from the wire's codes; `Err` names what is unknown.
#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type: i8,
    name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> Result<AclBindingFilter, String> {
    let f = AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(resource_type).unwrap_or(ResourceType::Unknown),
            name: name.map(str::to_string),
            pattern_type: PatternType::from_code(pattern_type).unwrap_or(PatternType::Unknown),
        },
        entry: EntryFilter {
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: Operation::from_code(operation).unwrap_or(Operation::Unknown),
            permission: Permission::from_code(permission).unwrap_or(Permission::Unknown),
        },
    };
    match f.unknown_element() {
        Some(why) => Err(format!("The filter contains UNKNOWN elements: {why}")),
        None => Ok(f),
    }
}

/// DescribeAcls.
pub(super) fn describe(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let Some(authorizer) = &ctx.authorizer else {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(text(NO_AUTHORIZER)));
    };
    if !super::authorized_cluster(ctx, rctx, Operation::Describe) {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(text(CLUSTER_DENIED)));
    }
    let filter = match filter(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => {
            return DescribeAclsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(text(&why)))
        }
    };
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    let mut last: Option<ResourcePattern> = None;
    for binding in authorizer.describe(&filter) {
        if last.as_ref() != Some(&binding.pattern) {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(binding.pattern.resource_type.code())
                    .with_resource_name(text(&binding.pattern.name))
                    .with_pattern_type(binding.pattern.pattern_type.code()),
            );
            last = Some(binding.pattern.clone());
        }
        if let Some(resource) = resources.last_mut() {
            resource.acls.push(
                AclDescription::default()
                    .with_principal(text(&binding.entry.principal))
                    .with_host(text(&binding.entry.host))
                    .with_operation(binding.entry.operation.code())
                    .with_permission_type(binding.entry.permission.code()),
            );
        }
    }
    DescribeAclsResponse::default().with_resources(resources)
}

/// CreateAcls.
pub(super) async fn create(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let all_failed = |code: ResponseError, message: &str| {
        CreateAclsResponse::default().with_results(
            request
                .creations
                .iter()
                .map(|_| {
                    AclCreationResult::default()
                        .with_error_code(code.code())
                        .with_error_message(Some(text(message)))
                })
                .collect(),
        )
    };
    let Some(authorizer) = &ctx.authorizer else {
        return all_failed(
            ResponseError::SecurityDisabled,
            &format!("{NO_AUTHORIZER}."),
        );
    };
    if !super::authorized_cluster(ctx, rctx, Operation::Alter) {
        return all_failed(ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED);
    }
    let bindings: Vec<AclBinding> = request
        .creations
        .iter()
        .map(|c| AclBinding {
            pattern: ResourcePattern::new(
                ResourceType::from_code(c.resource_type).unwrap_or(ResourceType::Unknown),
                c.resource_name.to_string(),
                PatternType::from_code(c.resource_pattern_type).unwrap_or(PatternType::Unknown),
            ),
            entry: AccessControlEntry {
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: Operation::from_code(c.operation).unwrap_or(Operation::Unknown),
                permission: Permission::from_code(c.permission_type).unwrap_or(Permission::Unknown),
            },
        })
        .collect();
    let results = authorizer.create(&ctx.zk(), &bindings).await;
    CreateAclsResponse::default().with_results(
        results
            .into_iter()
            .map(|r| match r {
                Ok(()) => AclCreationResult::default(),
                Err((code, message)) => AclCreationResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(text(&message))),
            })
            .collect(),
    )
}

/// DeleteAcls.
pub(super) async fn delete(
    ctx: &BrokerContext,
    rctx: &RequestContext,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let all_failed = |code: ResponseError, message: &str| {
        DeleteAclsResponse::default().with_filter_results(
            request
                .filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code.code())
                        .with_error_message(Some(text(message)))
                })
                .collect(),
        )
    };
    let Some(authorizer) = &ctx.authorizer else {
        return all_failed(
            ResponseError::SecurityDisabled,
            &format!("{NO_AUTHORIZER}."),
        );
    };
    if !super::authorized_cluster(ctx, rctx, Operation::Alter) {
        return all_failed(ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED);
    }
    let parsed: Vec<Result<AclBindingFilter, String>> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    // Invalid filters delete nothing; the valid ones run together, as Kafka's.
    let valid: Vec<AclBindingFilter> = parsed.iter().filter_map(|f| f.clone().ok()).collect();
    let mut deleted = authorizer.delete(&ctx.zk(), &valid).await.into_iter();
    let results = parsed
        .into_iter()
        .map(|f| match f {
            Err(why) => DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(text(&why))),
            Ok(_) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(binding, error)| {
                        let mut m = DeleteAclsMatchingAcl::default()
                            .with_resource_type(binding.pattern.resource_type.code())
                            .with_resource_name(text(&binding.pattern.name))
                            .with_pattern_type(binding.pattern.pattern_type.code())
                            .with_principal(text(&binding.entry.principal))
                            .with_host(text(&binding.entry.host))
                            .with_operation(binding.entry.operation.code())
                            .with_permission_type(binding.entry.permission.code());
                        if let Some((code, message)) = error {
                            m = m
                                .with_error_code(code.code())
                                .with_error_message(Some(text(&message)));
                        }
                        m
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
