//! Random valid delegation token requests (KIP-48) for one version (see `requests_data.rs` for
//! the conventions).

use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, DescribeDelegationTokenRequest, ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
};
use proptest::prelude::*;

use super::gen::{blob, list, list_or_null, text, text_or_null, unknown_tags};

pub(super) fn create_delegation_token(v: i16) -> impl Strategy<Value = CreateDelegationTokenRequest> {
    let flexible = v >= 2;
    let renewer = (text(), text(), unknown_tags(flexible)).prop_map(|(principal_type, principal_name, tags)| {
        CreatableRenewers::default()
            .with_principal_type(principal_type)
            .with_principal_name(principal_name)
            .with_unknown_tagged_fields(tags)
    });
    (text_or_null(), text_or_null(), list(renewer), any::<i64>(), unknown_tags(flexible)).prop_map(
        move |(owner_type, owner_name, renewers, max_lifetime_ms, tags)| {
            let (owner_type, owner_name) =
                if v >= 3 { (owner_type, owner_name) } else { (Some(Default::default()), Some(Default::default())) };
            CreateDelegationTokenRequest::default()
                .with_owner_principal_type(owner_type)
                .with_owner_principal_name(owner_name)
                .with_renewers(renewers)
                .with_max_lifetime_ms(max_lifetime_ms)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn renew_delegation_token(v: i16) -> impl Strategy<Value = RenewDelegationTokenRequest> {
    (blob(), any::<i64>(), unknown_tags(v >= 2)).prop_map(|(hmac, renew_period_ms, tags)| {
        RenewDelegationTokenRequest::default()
            .with_hmac(hmac)
            .with_renew_period_ms(renew_period_ms)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn expire_delegation_token(v: i16) -> impl Strategy<Value = ExpireDelegationTokenRequest> {
    (blob(), any::<i64>(), unknown_tags(v >= 2)).prop_map(|(hmac, expiry_time_period_ms, tags)| {
        ExpireDelegationTokenRequest::default()
            .with_hmac(hmac)
            .with_expiry_time_period_ms(expiry_time_period_ms)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn describe_delegation_token(v: i16) -> impl Strategy<Value = DescribeDelegationTokenRequest> {
    let flexible = v >= 2;
    let owner = (text(), text(), unknown_tags(flexible)).prop_map(|(principal_type, principal_name, tags)| {
        DescribeDelegationTokenOwner::default()
            .with_principal_type(principal_type)
            .with_principal_name(principal_name)
            .with_unknown_tagged_fields(tags)
    });
    (list_or_null(owner), unknown_tags(flexible)).prop_map(|(owners, tags)| {
        DescribeDelegationTokenRequest::default().with_owners(owners).with_unknown_tagged_fields(tags)
    })
}
