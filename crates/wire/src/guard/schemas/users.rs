//! User credential requests: DescribeUserScramCredentials, AlterUserScramCredentials.

use crate::guard::schema::{between, field, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// DescribeUserScramCredentials (key 50): version 0, flexible. `users` null means "all".

pub(crate) static DESCRIBE_USER_SCRAM_CREDENTIALS: ApiSchema =
    ApiSchema { key: 50, versions: between(0, 0), flexible_since: 0, body: &DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST };

pub(crate) const DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST: StructSchema = StructSchema::new(
    "DescribeUserScramCredentialsRequest",
    &[field("users", Kind::NullableArray(&Kind::Struct(&USER_NAME)), ALL)],
);

pub(crate) const USER_NAME: StructSchema = StructSchema::new("UserName", &[field("name", Kind::String, ALL)]);

// ---------------------------------------------------------------------------------------------
// AlterUserScramCredentials (key 51): version 0, flexible.

pub(crate) static ALTER_USER_SCRAM_CREDENTIALS: ApiSchema =
    ApiSchema { key: 51, versions: between(0, 0), flexible_since: 0, body: &ALTER_USER_SCRAM_CREDENTIALS_REQUEST };

pub(crate) const ALTER_USER_SCRAM_CREDENTIALS_REQUEST: StructSchema = StructSchema::new(
    "AlterUserScramCredentialsRequest",
    &[
        field("deletions", Kind::Array(&Kind::Struct(&SCRAM_CREDENTIAL_DELETION)), ALL),
        field("upsertions", Kind::Array(&Kind::Struct(&SCRAM_CREDENTIAL_UPSERTION)), ALL),
    ],
);

pub(crate) const SCRAM_CREDENTIAL_DELETION: StructSchema = StructSchema::new(
    "ScramCredentialDeletion",
    &[field("name", Kind::String, ALL), field("mechanism", Kind::Int8, ALL)],
);

pub(crate) const SCRAM_CREDENTIAL_UPSERTION: StructSchema = StructSchema::new(
    "ScramCredentialUpsertion",
    &[
        field("name", Kind::String, ALL),
        field("mechanism", Kind::Int8, ALL),
        field("iterations", Kind::Int32, ALL),
        field("salt", Kind::Bytes, ALL),
        field("salted_password", Kind::Bytes, ALL),
    ],
);
