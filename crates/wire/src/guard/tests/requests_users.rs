//! Random valid DescribeUserScramCredentials and AlterUserScramCredentials requests for one
//! version (see `requests_data.rs` for the conventions).

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest};
use proptest::prelude::*;

use super::gen::{blob, list, list_or_null, text, unknown_tags};

pub(super) fn describe_user_scram_credentials(_v: i16) -> impl Strategy<Value = DescribeUserScramCredentialsRequest> {
    let user = (text(), unknown_tags(true))
        .prop_map(|(name, tags)| UserName::default().with_name(name).with_unknown_tagged_fields(tags));
    (list_or_null(user), unknown_tags(true)).prop_map(|(users, tags)| {
        DescribeUserScramCredentialsRequest::default().with_users(users).with_unknown_tagged_fields(tags)
    })
}

pub(super) fn alter_user_scram_credentials(_v: i16) -> impl Strategy<Value = AlterUserScramCredentialsRequest> {
    let deletion = (text(), any::<i8>(), unknown_tags(true)).prop_map(|(name, mechanism, tags)| {
        ScramCredentialDeletion::default().with_name(name).with_mechanism(mechanism).with_unknown_tagged_fields(tags)
    });
    let upsertion = (text(), any::<i8>(), any::<i32>(), blob(), blob(), unknown_tags(true)).prop_map(
        |(name, mechanism, iterations, salt, salted_password, tags)| {
            ScramCredentialUpsertion::default()
                .with_name(name)
                .with_mechanism(mechanism)
                .with_iterations(iterations)
                .with_salt(salt)
                .with_salted_password(salted_password)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(deletion), list(upsertion), unknown_tags(true)).prop_map(|(deletions, upsertions, tags)| {
        AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions)
            .with_upsertions(upsertions)
            .with_unknown_tagged_fields(tags)
    })
}
