//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) as Kafka 2.8's
//! `ZkAdminManager` serves them: credentials live in `/config/users/<user>` as
//! `SCRAM-SHA-256=salt=...,stored_key=...,server_key=...,iterations=...`, the same strings the
//! SASL listeners check ([`crate::auth::sasl`]). Alter is served by the controller only
//! (NOT_CONTROLLER elsewhere, as Kafka) and tells every broker through `/config/changes`.
//! Describe never shows a salt or key, only each mechanism's iteration count.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use security::scram::{ScramCredential, ScramMechanism};
use tracing::info;
use znodes::paths;

use crate::context::BrokerContext;

const EMPTY_USER: &str = "Username must not be empty";

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// A user's mechanisms and iterations, `None` when it has no SCRAM credential.
fn credential_infos(
    config: &BTreeMap<String, String>,
) -> Option<Result<Vec<CredentialInfo>, String>> {
    let present: Vec<(ScramMechanism, &String)> = ScramMechanism::ALL
        .into_iter()
        .filter_map(|m| config.get(m.name()).map(|v| (m, v)))
        .collect();
    if present.is_empty() {
        return None;
    }
    Some(
        present
            .into_iter()
            .map(|(m, v)| {
                ScramCredential::from_config_string(v)
                    .map(|c| {
                        CredentialInfo::default()
                            .with_mechanism(m.id())
                            .with_iterations(c.iterations as i32)
                    })
                    .map_err(|e| e.to_string())
            })
            .collect(),
    )
}

fn describe_result(
    user: &str,
    code: i16,
    message: Option<String>,
) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(text(user))
        .with_error_code(code)
        .with_error_message(message.map(text))
}

pub(super) async fn describe(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // DESCRIBE on the cluster, as Kafka's handleDescribeUserScramCredentialsRequest.
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Describe) {
        let error = ResponseError::ClusterAuthorizationFailed;
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(error.to_string())));
    }
    let zk = ctx.zk();
    let users: Vec<String> = request
        .users
        .iter()
        .flatten()
        .map(|u| u.name.to_string())
        .collect();
    let mut response = DescribeUserScramCredentialsResponse::default();
    if users.is_empty() {
        // Every user with a credential, in name order.
        let children = match zk.get_config_entity_children("users").await {
            Ok(children) => children,
            Err(err) => {
                return response
                    .with_error_code(ResponseError::UnknownServerError.code())
                    .with_error_message(Some(text(err.to_string())))
            }
        };
        let mut results = BTreeMap::new();
        for child in children {
            let Some(user) = paths::desanitize_entity_name(&child) else {
                continue;
            };
            let config = match zk.get_entity_config(&paths::user_entity_path(&user)).await {
                Ok(config) => config,
                Err(err) => {
                    return response
                        .with_error_code(ResponseError::UnknownServerError.code())
                        .with_error_message(Some(text(err.to_string())))
                }
            };
            let result = match credential_infos(&config) {
                None => continue,
                Some(Ok(infos)) => describe_result(&user, 0, None).with_credential_infos(infos),
                Some(Err(e)) => {
                    describe_result(&user, ResponseError::UnknownServerError.code(), Some(e))
                }
            };
            results.insert(user, result);
        }
        response.results = results.into_values().collect();
        return response;
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for u in &users {
        *counts.entry(u.as_str()).or_default() += 1;
    }
    let mut seen = BTreeSet::new();
    for user in &users {
        if !seen.insert(user.as_str()) {
            continue;
        }
        let result = if user.is_empty() {
            describe_result(
                user,
                ResponseError::ResourceNotFound.code(),
                Some(EMPTY_USER.into()),
            )
        } else if counts[user.as_str()] > 1 {
            describe_result(
                user,
                ResponseError::DuplicateResource.code(),
                Some(format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}")),
            )
        } else {
            match zk.get_entity_config(&paths::user_entity_path(user)).await {
                Err(err) => describe_result(
                    user,
                    ResponseError::UnknownServerError.code(),
                    Some(err.to_string()),
                ),
                Ok(config) => match credential_infos(&config) {
                    None => describe_result(
                        user,
                        ResponseError::ResourceNotFound.code(),
                        Some(format!(
                            "Attempt to describe a user credential that does not exist: {user}"
                        )),
                    ),
                    Some(Ok(infos)) => describe_result(user, 0, None).with_credential_infos(infos),
                    Some(Err(e)) => {
                        describe_result(user, ResponseError::UnknownServerError.code(), Some(e))
                    }
                },
            }
        };
        response.results.push(result);
    }
    response
}

fn alter_result(user: &str, code: i16, message: Option<&str>) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult::default()
        .with_user(text(user))
        .with_error_code(code)
        .with_error_message(message.map(text))
}

pub(super) async fn alter(
    ctx: &BrokerContext,
    rctx: &crate::auth::RequestContext,
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut response = AlterUserScramCredentialsResponse::default();
    let named: Vec<String> = request
        .upsertions
        .iter()
        .map(|u| u.name.to_string())
        .chain(request.deletions.iter().map(|d| d.name.to_string()))
        .collect();
    // ALTER on the cluster, as Kafka's handleAlterUserScramCredentialsRequest: every user
    // answers CLUSTER_AUTHORIZATION_FAILED and nothing changes.
    if !super::authorized_cluster(ctx, rctx, security::acl::Operation::Alter) {
        let mut seen = BTreeSet::new();
        for user in named.iter().filter(|u| seen.insert(u.as_str())) {
            response.results.push(alter_result(
                user,
                ResponseError::ClusterAuthorizationFailed.code(),
                None,
            ));
        }
        return response;
    }
    if !ctx.controller().is_active() {
        let mut seen = BTreeSet::new();
        for user in named.iter().filter(|u| seen.insert(u.as_str())) {
            response.results.push(alter_result(
                user,
                ResponseError::NotController.code(),
                None,
            ));
        }
        return response;
    }
    // Refusals by user, Kafka's order: empty names, unknown mechanisms, bad iterations.
    let mut refused: BTreeMap<String, (i16, &str)> = BTreeMap::new();
    let unknown = (
        ResponseError::UnsupportedSaslMechanism.code(),
        "Unknown SCRAM mechanism",
    );
    let unacceptable = ResponseError::UnacceptableCredential.code();
    for d in &request.deletions {
        let user = d.name.to_string();
        if user.is_empty() {
            refused.insert(user, (unacceptable, EMPTY_USER));
        } else if ScramMechanism::from_id(d.mechanism).is_none() {
            refused.insert(user, unknown);
        }
    }
    for u in &request.upsertions {
        let user = u.name.to_string();
        if user.is_empty() {
            refused.insert(user, (unacceptable, EMPTY_USER));
        } else if ScramMechanism::from_id(u.mechanism).is_none() {
            refused.insert(user, unknown);
        } else if u.iterations < ScramMechanism::MIN_ITERATIONS as i32 {
            refused.insert(user, (unacceptable, "Too few iterations"));
        } else if u.iterations > ScramMechanism::MAX_ITERATIONS as i32 {
            refused.insert(user, (unacceptable, "Too many iterations"));
        }
    }
    for (user, (code, message)) in &refused {
        response
            .results
            .push(alter_result(user, *code, Some(message)));
    }
    // The same (user, mechanism) twice refuses the user.
    let pairs: Vec<(String, i8)> = request
        .upsertions
        .iter()
        .map(|u| (u.name.to_string(), u.mechanism))
        .chain(
            request
                .deletions
                .iter()
                .map(|d| (d.name.to_string(), d.mechanism)),
        )
        .filter(|(user, _)| !refused.contains_key(user))
        .collect();
    let mut pair_counts: HashMap<&(String, i8), usize> = HashMap::new();
    for pair in &pairs {
        *pair_counts.entry(pair).or_default() += 1;
    }
    let duplicated: BTreeSet<String> = pair_counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((user, _), _)| user.clone())
        .collect();
    for user in &duplicated {
        response.results.push(alter_result(
            user,
            ResponseError::DuplicateResource.code(),
            Some("A user credential cannot be altered twice in the same request"),
        ));
    }
    let users: BTreeSet<String> = pairs
        .iter()
        .map(|(user, _)| user.clone())
        .filter(|user| !duplicated.contains(user))
        .collect();
    let zk = ctx.zk();
    for user in users {
        let entity = paths::user_entity_path(&user);
        let mut config = match zk.get_entity_config(&entity).await {
            Ok(config) => config,
            Err(err) => {
                response.results.push(alter_result(
                    &user,
                    ResponseError::UnknownServerError.code(),
                    Some(&err.to_string()),
                ));
                continue;
            }
        };
        let deletions: Vec<ScramMechanism> = request
            .deletions
            .iter()
            .filter(|d| *d.name == *user)
            .filter_map(|d| ScramMechanism::from_id(d.mechanism))
            .collect();
        if deletions.iter().any(|m| !config.contains_key(m.name())) {
            response.results.push(alter_result(
                &user,
                ResponseError::ResourceNotFound.code(),
                Some("Attempt to delete a user credential that does not exist"),
            ));
            continue;
        }
        for m in &deletions {
            config.remove(m.name());
        }
        for u in request.upsertions.iter().filter(|u| *u.name == *user) {
            let Some(m) = ScramMechanism::from_id(u.mechanism) else {
                continue;
            };
            let credential =
                m.credential_from_salted(&u.salt, &u.salted_password, u.iterations as u32);
            config.insert(m.name().to_owned(), credential.to_config_string());
        }
        match zk.set_entity_config_and_notify(&entity, &config).await {
            Ok(()) => {
                info!(%user, upserted = request.upsertions.iter().filter(|u| *u.name == *user).count(),
                    deleted = deletions.len(), "altered SCRAM credentials");
                response.results.push(alter_result(&user, 0, None));
            }
            Err(err) => response.results.push(alter_result(
                &user,
                ResponseError::UnknownServerError.code(),
                Some(&err.to_string()),
            )),
        }
    }
    response
}
