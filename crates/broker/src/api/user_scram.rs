//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554):
//! Kafka's user SCRAM credentials are the Postgres roles' SCRAM-SHA-256
//! passwords (one password store, docs/security.md). Describe lists the
//! roles holding a SCRAM-SHA-256 verifier; Alter sets one with `ALTER ROLE
//! … PASSWORD` from the salted password the client sends (the password
//! itself never travels) or removes it.
//!
//! Kafka's validation, messages and quirks are kept (an alteration of a user
//! already refused in the same request is ignored; a second one of a user
//! is DUPLICATE_RESOURCE and neither applies). Where Postgres differs:
//! SCRAM-SHA-512 cannot be stored (UNSUPPORTED_SASL_MECHANISM), a role must
//! exist before it gets a credential (RESOURCE_NOT_FOUND: roles are made
//! with CREATE ROLE), and since a credential is a database password, only a
//! Postgres superuser, or a role for itself, may change one (as ALTER ROLE
//! allows), whatever the ACLs say.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::catalog::Catalog;
use crate::sasl::scram::ScramCredential;

/// Kafka's `ScramMechanism` codes.
const SCRAM_SHA_256: i8 = 1;
const SCRAM_SHA_512: i8 = 2;
/// Kafka's bounds on a credential's iterations, for both mechanisms.
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;
const DUPLICATE_MESSAGE: &str = "A user credential cannot be altered twice in the same request";
const NOT_FOUND_MESSAGE: &str = "Attempt to delete a user credential that does not exist";

pub struct DescribeUserScramCredentials;

impl Handler for DescribeUserScramCredentials {
    const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
    /// v0: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = DescribeUserScramCredentialsRequest;
    type Response = DescribeUserScramCredentialsResponse;
    type Services<'a> = &'a Arc<dyn Catalog>;

    async fn handle(
        catalog: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeUserScramCredentialsRequest,
    ) -> Answer<Self::Response> {
        let mut response = DescribeUserScramCredentialsResponse::default();
        if !cx.may_on_cluster(Operation::Describe) {
            response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
            return response.into();
        }
        let verifiers: BTreeMap<String, u32> = match catalog.scram_verifiers().await {
            Ok(v) => v.into_iter().collect(),
            Err(e) => {
                log::warn!("DescribeUserScramCredentials: {e}");
                response.error_code = error_code::UNKNOWN_SERVER_ERROR;
                response.error_message = Some(str_bytes(&format!("reading the roles' credentials: {e}")));
                return response.into();
            }
        };
        let credential = |user: &str, iterations: u32| {
            let mut result = DescribeUserScramCredentialsResult::default();
            result.user = str_bytes(user);
            let mut info = CredentialInfo::default();
            info.mechanism = SCRAM_SHA_256;
            info.iterations = i32::try_from(iterations).unwrap_or(i32::MAX);
            result.credential_infos.push(info);
            result
        };
        let asked: Vec<String> = req.users.unwrap_or_default().into_iter().map(|u| u.name.to_string()).collect();
        if asked.is_empty() {
            // Null or empty: every user that has a credential.
            response.results = verifiers.iter().map(|(user, iterations)| credential(user, *iterations)).collect();
            return response.into();
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for user in &asked {
            *counts.entry(user).or_default() += 1;
        }
        let mut answered = BTreeSet::new();
        for user in &asked {
            if !answered.insert(user.as_str()) {
                continue;
            }
            let result = if counts[user.as_str()] > 1 {
                failed_describe(
                    user,
                    error_code::DUPLICATE_RESOURCE,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                )
            } else {
                match verifiers.get(user) {
                    Some(iterations) => credential(user, *iterations),
                    None => failed_describe(
                        user,
                        error_code::RESOURCE_NOT_FOUND,
                        format!("Attempt to describe a user credential that does not exist: {user}"),
                    ),
                }
            };
            response.results.push(result);
        }
        response.into()
    }
}

fn failed_describe(user: &str, code: i16, message: String) -> DescribeUserScramCredentialsResult {
    let mut result = DescribeUserScramCredentialsResult::default();
    result.user = str_bytes(user);
    result.error_code = code;
    result.error_message = Some(str_bytes(&message));
    result
}

pub struct AlterUserScramCredentials;

/// One user's alteration once validated: what to store for its role.
enum Change {
    Remove,
    Set(String),
}

impl Handler for AlterUserScramCredentials {
    const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
    /// v0: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = AlterUserScramCredentialsRequest;
    type Response = AlterUserScramCredentialsResponse;
    type Services<'a> = &'a Arc<dyn Catalog>;

    async fn handle(
        catalog: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AlterUserScramCredentialsRequest,
    ) -> Answer<Self::Response> {
        let mut response = AlterUserScramCredentialsResponse::default();
        let result = |user: &str, code: i16, message: Option<&str>| {
            let mut r = AlterUserScramCredentialsResult::default();
            r.user = str_bytes(user);
            r.error_code = code;
            r.error_message = message.map(str_bytes);
            r
        };
        if !cx.may_on_cluster(Operation::Alter) {
            response.results =
                every_user(&req).iter().map(|u| result(u, error_code::CLUSTER_AUTHORIZATION_FAILED, None)).collect();
            return response.into();
        }
        let existing: BTreeSet<String> = match catalog.scram_verifiers().await {
            Ok(v) => v.into_iter().map(|(role, _)| role).collect(),
            Err(e) => {
                log::warn!("AlterUserScramCredentials: {e}");
                let message = format!("reading the roles' credentials: {e}");
                response.results = every_user(&req)
                    .iter()
                    .map(|u| result(u, error_code::UNKNOWN_SERVER_ERROR, Some(&message)))
                    .collect();
                return response.into();
            }
        };
        // As Kafka's controller: the first refusal of a user is its answer and
        // later alterations of it are ignored; a second valid one is a duplicate.
        let mut refused: BTreeMap<String, (i16, String)> = BTreeMap::new();
        let mut changes: BTreeMap<String, Change> = BTreeMap::new();
        for deletion in req.deletions {
            let user = deletion.name.to_string();
            if refused.contains_key(&user) {
                continue;
            }
            if changes.remove(&user).is_some() {
                refused.insert(user, (error_code::DUPLICATE_RESOURCE, DUPLICATE_MESSAGE.to_owned()));
                continue;
            }
            let checked = check_name_and_mechanism(&user, deletion.mechanism).and_then(|()| {
                if deletion.mechanism == SCRAM_SHA_256 && existing.contains(&user) {
                    Ok(())
                } else {
                    Err((error_code::RESOURCE_NOT_FOUND, NOT_FOUND_MESSAGE.to_owned()))
                }
            });
            match checked {
                Ok(()) => {
                    changes.insert(user, Change::Remove);
                }
                Err(refusal) => {
                    refused.insert(user, refusal);
                }
            }
        }
        for upsertion in req.upsertions {
            let user = upsertion.name.to_string();
            if refused.contains_key(&user) {
                continue;
            }
            if changes.remove(&user).is_some() {
                refused.insert(user, (error_code::DUPLICATE_RESOURCE, DUPLICATE_MESSAGE.to_owned()));
                continue;
            }
            let checked = check_name_and_mechanism(&user, upsertion.mechanism)
                .and_then(|()| check_iterations(upsertion.iterations))
                .and_then(|()| {
                    if upsertion.mechanism == SCRAM_SHA_512 {
                        return Err((
                            error_code::UNSUPPORTED_SASL_MECHANISM,
                            "Kafgres keeps credentials as PostgreSQL role passwords, which are SCRAM-SHA-256 only: \
                             set a SCRAM-SHA-256 credential instead"
                                .to_owned(),
                        ));
                    }
                    let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
                    ScramCredential::from_salted_password(&upsertion.salt, iterations, &upsertion.salted_password)
                        .ok_or_else(|| {
                            (
                                error_code::UNACCEPTABLE_CREDENTIAL,
                                "A SCRAM-SHA-256 credential needs a non-empty salt and a 32-byte salted password"
                                    .to_owned(),
                            )
                        })
                });
            match checked {
                Ok(credential) => {
                    changes.insert(user, Change::Set(credential.to_verifier()));
                }
                Err(refusal) => {
                    refused.insert(user, refusal);
                }
            }
        }
        for (user, change) in changes {
            let outcome = if !may_change_password(cx, &user) {
                Err((
                    error_code::CLUSTER_AUTHORIZATION_FAILED,
                    format!(
                        "a credential is the PostgreSQL password of role {user:?}: only a superuser or {user:?} itself \
                         may change it (authenticate as one)"
                    ),
                ))
            } else {
                let removing = matches!(change, Change::Remove);
                let verifier = match change {
                    Change::Remove => None,
                    Change::Set(v) => Some(v),
                };
                match catalog.set_scram_verifier(user.clone(), verifier).await {
                    Ok(true) => Ok(()),
                    Ok(false) if removing => Err((error_code::RESOURCE_NOT_FOUND, NOT_FOUND_MESSAGE.to_owned())),
                    Ok(false) => Err((
                        error_code::RESOURCE_NOT_FOUND,
                        format!("no PostgreSQL role {user:?}: create it first (CREATE ROLE … LOGIN)"),
                    )),
                    Err(e) => {
                        log::warn!("AlterUserScramCredentials for {user:?}: {e}");
                        Err((error_code::UNKNOWN_SERVER_ERROR, format!("altering role {user:?}: {e}")))
                    }
                }
            };
            response.results.push(match outcome {
                Ok(()) => result(&user, error_code::NONE, None),
                Err((code, message)) => result(&user, code, Some(&message)),
            });
        }
        for (user, (code, message)) in refused {
            response.results.push(result(&user, code, Some(&message)));
        }
        response.into()
    }
}

/// Every user a request alters, once each (a refusal of the whole request answers each).
fn every_user(req: &AlterUserScramCredentialsRequest) -> BTreeSet<String> {
    req.deletions.iter().map(|d| d.name.to_string()).chain(req.upsertions.iter().map(|u| u.name.to_string())).collect()
}

fn check_name_and_mechanism(user: &str, mechanism: i8) -> Result<(), (i16, String)> {
    if user.is_empty() {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Username must not be empty".to_owned()));
    }
    if mechanism != SCRAM_SHA_256 && mechanism != SCRAM_SHA_512 {
        return Err((error_code::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism".to_owned()));
    }
    Ok(())
}

fn check_iterations(iterations: i32) -> Result<(), (i16, String)> {
    if iterations < MIN_ITERATIONS {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Too few iterations".to_owned()));
    }
    if iterations > MAX_ITERATIONS {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Too many iterations".to_owned()));
    }
    Ok(())
}

/// A superuser may change any role's password, a role its own (ALTER ROLE's
/// rule); an unauthenticated client none.
fn may_change_password(cx: &RequestContext<'_>, user: &str) -> bool {
    cx.principal.is_some() && (cx.identity.superuser || cx.identity.role == user)
}
