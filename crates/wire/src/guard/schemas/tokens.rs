//! Delegation token requests (KIP-48): CreateDelegationToken, RenewDelegationToken,
//! ExpireDelegationToken, DescribeDelegationToken. Kafka 4.0 removed version 0 of each (KIP-896);
//! version 2 is the first flexible one.

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// CreateDelegationToken (key 38): versions 1-3; v3 adds the owner principal.

pub(crate) static CREATE_DELEGATION_TOKEN: ApiSchema =
    ApiSchema { key: 38, versions: between(1, 3), flexible_since: 2, body: &CREATE_DELEGATION_TOKEN_REQUEST };

pub(crate) const CREATE_DELEGATION_TOKEN_REQUEST: StructSchema = StructSchema::new(
    "CreateDelegationTokenRequest",
    &[
        field("owner_principal_type", Kind::NullableString, since(3)),
        field("owner_principal_name", Kind::NullableString, since(3)),
        field("renewers", Kind::Array(&Kind::Struct(&CREATABLE_RENEWERS)), ALL),
        field("max_lifetime_ms", Kind::Int64, ALL),
    ],
);

pub(crate) const CREATABLE_RENEWERS: StructSchema = StructSchema::new(
    "CreatableRenewers",
    &[field("principal_type", Kind::String, ALL), field("principal_name", Kind::String, ALL)],
);

// ---------------------------------------------------------------------------------------------
// RenewDelegationToken (key 39) and ExpireDelegationToken (key 40): versions 1-2.

pub(crate) static RENEW_DELEGATION_TOKEN: ApiSchema =
    ApiSchema { key: 39, versions: between(1, 2), flexible_since: 2, body: &RENEW_DELEGATION_TOKEN_REQUEST };

pub(crate) const RENEW_DELEGATION_TOKEN_REQUEST: StructSchema = StructSchema::new(
    "RenewDelegationTokenRequest",
    &[field("hmac", Kind::Bytes, ALL), field("renew_period_ms", Kind::Int64, ALL)],
);

pub(crate) static EXPIRE_DELEGATION_TOKEN: ApiSchema =
    ApiSchema { key: 40, versions: between(1, 2), flexible_since: 2, body: &EXPIRE_DELEGATION_TOKEN_REQUEST };

pub(crate) const EXPIRE_DELEGATION_TOKEN_REQUEST: StructSchema = StructSchema::new(
    "ExpireDelegationTokenRequest",
    &[field("hmac", Kind::Bytes, ALL), field("expiry_time_period_ms", Kind::Int64, ALL)],
);

// ---------------------------------------------------------------------------------------------
// DescribeDelegationToken (key 41): versions 1-3; `owners` null means every owner.

pub(crate) static DESCRIBE_DELEGATION_TOKEN: ApiSchema =
    ApiSchema { key: 41, versions: between(1, 3), flexible_since: 2, body: &DESCRIBE_DELEGATION_TOKEN_REQUEST };

pub(crate) const DESCRIBE_DELEGATION_TOKEN_REQUEST: StructSchema = StructSchema::new(
    "DescribeDelegationTokenRequest",
    &[field("owners", Kind::NullableArray(&Kind::Struct(&DESCRIBE_DELEGATION_TOKEN_OWNER)), ALL)],
);

pub(crate) const DESCRIBE_DELEGATION_TOKEN_OWNER: StructSchema = StructSchema::new(
    "DescribeDelegationTokenOwner",
    &[field("principal_type", Kind::String, ALL), field("principal_name", Kind::String, ALL)],
);
