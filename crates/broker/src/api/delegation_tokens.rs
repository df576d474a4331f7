//! The delegation token APIs (KIP-48): CreateDelegationToken,
//! RenewDelegationToken, ExpireDelegationToken, DescribeDelegationToken,
//! answered as a single-node Kafka 4.4 answers them (its `KafkaApis` checks,
//! then its controller's `DelegationTokenControlManager`, whose rules
//! `crate::delegation` keeps).
//!
//! Each is refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a connection
//! that did not authenticate (Kafka: PLAINTEXT, or SSL without a client
//! certificate) or that authenticated with a token, then with
//! DELEGATION_TOKEN_AUTH_DISABLED while `kafgres.delegation_token_secret_key`
//! is not set. Principals are roles (type `User`); a token owned by a
//! principal of another type cannot be made (INVALID_PRINCIPAL_TYPE, where
//! Kafka accepts any owner type).

use std::sync::Arc;

use bytes::Bytes;
use kafgres_wire::{error_code, ApiKey};
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{Operation, ResourceType};
use crate::delegation::{user_principal, DelegationTokens, TokenError, TokenRecord, USER_TYPE};

/// Kafka's `DelegationTokenManager.ErrorTimestamp`: the expiry a refused
/// renewal or expiry answers before it reaches the controller.
const ERROR_TIMESTAMP: i64 = -1;

/// The role a token request acts as, or `None` where Kafka's
/// `allowTokenRequests` refuses it: a connection without an authenticated
/// principal, or one that logged in with a token.
fn token_requester<'a>(cx: &RequestContext<'a>) -> Option<&'a str> {
    cx.principal.filter(|_| !cx.identity.token_authenticated)
}

pub struct CreateDelegationToken;

impl Handler for CreateDelegationToken {
    const KEY: ApiKey = ApiKey::CreateDelegationToken;
    /// v1-3: Kafka 4.4's range (4.0 removed v0); v2 is flexible, v3 adds the
    /// owner principal and the requester in the response.
    const VERSIONS: Versions = Versions::new(1, 3);
    type Request = CreateDelegationTokenRequest;
    type Response = CreateDelegationTokenResponse;
    type Services<'a> = &'a Arc<DelegationTokens>;

    async fn handle(
        tokens: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: CreateDelegationTokenRequest,
    ) -> Answer<Self::Response> {
        let requester = token_requester(cx);
        // Unauthenticated: `User:ANONYMOUS`, as Kafka names the owner it refuses.
        let caller = cx.principal.unwrap_or(&cx.identity.role);
        let owner_given = req.owner_principal_name.as_deref().filter(|name| !name.is_empty());
        let (owner_type, owner) = match owner_given {
            Some(name) => (req.owner_principal_type.as_deref().unwrap_or_default().to_owned(), name.to_owned()),
            None => (USER_TYPE.to_owned(), caller.to_owned()),
        };
        let mut response = CreateDelegationTokenResponse::default()
            .with_principal_type(str_bytes(&owner_type))
            .with_principal_name(str_bytes(&owner));
        if cx.api_version >= 3 {
            response = response
                .with_token_requester_principal_type(str_bytes(USER_TYPE))
                .with_token_requester_principal_name(str_bytes(caller));
        }
        let Some(requester) = requester else {
            return response.with_error_code(error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).into();
        };
        let for_itself = owner_type == USER_TYPE && owner == requester;
        if !for_itself && !cx.may(Operation::CreateTokens, ResourceType::User, &format!("{owner_type}:{owner}")) {
            return response.with_error_code(error_code::DELEGATION_TOKEN_AUTHORIZATION_FAILED).into();
        }
        if owner_type != USER_TYPE || req.renewers.iter().any(|r| r.principal_type.as_str() != USER_TYPE) {
            return response.with_error_code(error_code::INVALID_PRINCIPAL_TYPE).into();
        }
        let renewers = req.renewers.iter().map(|r| r.principal_name.to_string()).collect();
        match tokens.create(&owner, requester, renewers, req.max_lifetime_ms, crate::now_ms()).await {
            Ok((token, hmac)) => response
                .with_issue_timestamp_ms(token.issue_ms)
                .with_expiry_timestamp_ms(token.expiry_ms)
                .with_max_timestamp_ms(token.max_ms)
                .with_token_id(str_bytes(&token.token_id))
                .with_hmac(Bytes::from(hmac))
                .into(),
            Err(e) => {
                if let TokenError::Catalog(e) = &e {
                    log::warn!("CreateDelegationToken for role {owner:?}: {e}");
                }
                response.with_error_code(e.code()).into()
            }
        }
    }
}

pub struct RenewDelegationToken;

impl Handler for RenewDelegationToken {
    const KEY: ApiKey = ApiKey::RenewDelegationToken;
    /// v1-2: Kafka 4.4's range (4.0 removed v0); v2 is flexible.
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = RenewDelegationTokenRequest;
    type Response = RenewDelegationTokenResponse;
    type Services<'a> = &'a Arc<DelegationTokens>;

    async fn handle(
        tokens: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: RenewDelegationTokenRequest,
    ) -> Answer<Self::Response> {
        let response = RenewDelegationTokenResponse::default();
        let Some(who) = token_requester(cx) else {
            return response
                .with_error_code(error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
                .with_expiry_timestamp_ms(ERROR_TIMESTAMP)
                .into();
        };
        match tokens.renew(&req.hmac, who, req.renew_period_ms, crate::now_ms()).await {
            Ok(expiry_ms) => response.with_expiry_timestamp_ms(expiry_ms).into(),
            Err(e) => response.with_error_code(logged("RenewDelegationToken", e)).into(),
        }
    }
}

pub struct ExpireDelegationToken;

impl Handler for ExpireDelegationToken {
    const KEY: ApiKey = ApiKey::ExpireDelegationToken;
    /// v1-2: Kafka 4.4's range (4.0 removed v0); v2 is flexible.
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = ExpireDelegationTokenRequest;
    type Response = ExpireDelegationTokenResponse;
    type Services<'a> = &'a Arc<DelegationTokens>;

    async fn handle(
        tokens: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ExpireDelegationTokenRequest,
    ) -> Answer<Self::Response> {
        let response = ExpireDelegationTokenResponse::default();
        let Some(who) = token_requester(cx) else {
            return response
                .with_error_code(error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
                .with_expiry_timestamp_ms(ERROR_TIMESTAMP)
                .into();
        };
        match tokens.expire(&req.hmac, who, req.expiry_time_period_ms, crate::now_ms()).await {
            Ok(expiry_ms) => response.with_expiry_timestamp_ms(expiry_ms).into(),
            Err(e) => response.with_error_code(logged("ExpireDelegationToken", e)).into(),
        }
    }
}

/// A refusal's code; a catalog failure is logged too.
fn logged(api: &str, e: TokenError) -> i16 {
    if let TokenError::Catalog(cause) = &e {
        log::warn!("{api}: {cause}");
    }
    e.code()
}

pub struct DescribeDelegationToken;

impl Handler for DescribeDelegationToken {
    const KEY: ApiKey = ApiKey::DescribeDelegationToken;
    /// v1-3: Kafka 4.4's range (4.0 removed v0); v2 is flexible, v3 adds
    /// each token's requester.
    const VERSIONS: Versions = Versions::new(1, 3);
    type Request = DescribeDelegationTokenRequest;
    type Response = DescribeDelegationTokenResponse;
    type Services<'a> = &'a Arc<DelegationTokens>;

    async fn handle(
        tokens: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeDelegationTokenRequest,
    ) -> Answer<Self::Response> {
        let response = DescribeDelegationTokenResponse::default();
        let Some(caller) = token_requester(cx) else {
            return response.with_error_code(error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).into();
        };
        if !tokens.enabled() {
            return response.with_error_code(error_code::DELEGATION_TOKEN_AUTH_DISABLED).into();
        }
        // Null: every owner; empty: none (Kafka's `ownersListEmpty`).
        let owners: Option<Vec<String>> = req.owners.map(|owners| {
            owners
                .into_iter()
                .filter(|o| o.principal_type.as_str() == USER_TYPE)
                .map(|o| o.principal_name.to_string())
                .collect()
        });
        if req_owners_empty(&owners) {
            return response.into();
        }
        // Kafka's `DelegationTokenManager.filterToken`.
        let eligible = |token: &TokenRecord| {
            if let Some(owners) = &owners {
                if !owners.iter().any(|o| token.owner_or_renewer(o)) {
                    return false;
                }
            }
            token.owner_or_renewer(caller)
                || cx.may(Operation::Describe, ResourceType::DelegationToken, &token.token_id)
                || cx.may(Operation::DescribeTokens, ResourceType::User, &user_principal(&token.owner))
        };
        let version = cx.api_version;
        let described = tokens.describe(eligible).into_iter().map(|(token, hmac)| described(token, hmac, version));
        response.with_tokens(described.collect()).into()
    }
}

/// An owners filter that selects nothing: given and empty, or naming only
/// principals of other types than `User` (whose tokens cannot exist).
fn req_owners_empty(owners: &Option<Vec<String>>) -> bool {
    owners.as_ref().is_some_and(Vec::is_empty)
}

fn described(token: TokenRecord, hmac: Vec<u8>, version: i16) -> DescribedDelegationToken {
    let user = || str_bytes(USER_TYPE);
    let renewers = token
        .renewers
        .iter()
        .map(|r| {
            DescribedDelegationTokenRenewer::default().with_principal_type(user()).with_principal_name(str_bytes(r))
        })
        .collect();
    let mut described = DescribedDelegationToken::default()
        .with_principal_type(user())
        .with_principal_name(str_bytes(&token.owner))
        .with_issue_timestamp(token.issue_ms)
        .with_expiry_timestamp(token.expiry_ms)
        .with_max_timestamp(token.max_ms)
        .with_token_id(str_bytes(&token.token_id))
        .with_hmac(Bytes::from(hmac))
        .with_renewers(renewers);
    if version >= 3 {
        described = described
            .with_token_requester_principal_type(user())
            .with_token_requester_principal_name(str_bytes(&token.requester));
    }
    described
}
