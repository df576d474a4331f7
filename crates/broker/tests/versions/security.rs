//! The version sweep's requests for one family of APIs. Logins, ACLs, quotas, SCRAM credentials and delegation tokens.

use crate::common::Client;
use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::check;

/// Whether `exchange` below has a request for `key`.
pub(super) fn covers(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::AlterClientQuotas
            | ApiKey::DescribeClientQuotas
            | ApiKey::DescribeAcls
            | ApiKey::CreateAcls
            | ApiKey::DeleteAcls
            | ApiKey::DescribeUserScramCredentials
            | ApiKey::AlterUserScramCredentials
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::CreateDelegationToken
            | ApiKey::RenewDelegationToken
            | ApiKey::ExpireDelegationToken
            | ApiKey::DescribeDelegationToken
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(client: &mut Client, key: ApiKey, version: i16) -> Result<(), String> {
    match key {
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
            let entry = EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(StrBytes::from_static_str("client-id"))
                    .with_entity_name(Some(StrBytes::from_string(format!("sweep-v{version}"))))])
                .with_ops(vec![OpData::default()
                    .with_key(StrBytes::from_static_str("producer_byte_rate"))
                    .with_value(1e9 + f64::from(version))]);
            let request = kafka_protocol::messages::AlterClientQuotasRequest::default().with_entries(vec![entry]);
            let r = client.try_call(version, &request).await?;
            check(r.entries.len() == 1 && r.entries[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::DescribeClientQuotas => {
            use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
            let component = ComponentData::default()
                .with_entity_type(StrBytes::from_static_str("client-id"))
                .with_match_type(0)
                .with_match(Some(StrBytes::from_string(format!("sweep-v{version}"))));
            let request =
                kafka_protocol::messages::DescribeClientQuotasRequest::default().with_components(vec![component]);
            let r = client.try_call(version, &request).await?;
            let values: Vec<f64> = r.entries.iter().flatten().flat_map(|e| e.values.iter().map(|v| v.value)).collect();
            check(r.error_code == 0 && values == vec![1e9 + f64::from(version)], format!("{r:?}"))
        }
        // The sweep's broker has no authorizer: SECURITY_DISABLED, as Kafka's.
        ApiKey::DescribeAcls => {
            let request = DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::SECURITY_DISABLED, format!("{r:?}"))
        }
        ApiKey::CreateAcls => {
            use kafka_protocol::messages::create_acls_request::AclCreation;
            let creation = AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("swept"))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:sweep"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(3)
                .with_permission_type(3);
            let r = client.try_call(version, &CreateAclsRequest::default().with_creations(vec![creation])).await?;
            check(r.results.len() == 1 && r.results[0].error_code == error_code::SECURITY_DISABLED, format!("{r:?}"))
        }
        ApiKey::DeleteAcls => {
            use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
            let filter = DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = client.try_call(version, &DeleteAclsRequest::default().with_filters(vec![filter])).await?;
            let ok = r.filter_results.len() == 1 && r.filter_results[0].error_code == error_code::SECURITY_DISABLED;
            check(ok, format!("{r:?}"))
        }
        ApiKey::DescribeUserScramCredentials => {
            use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
            let request = kafka_protocol::messages::DescribeUserScramCredentialsRequest::default()
                .with_users(Some(vec![UserName::default().with_name(StrBytes::from_static_str("nobody"))]));
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.results.iter().map(|u| u.error_code).collect();
            check(r.error_code == 0 && codes == [error_code::RESOURCE_NOT_FOUND], format!("{r:?}"))
        }
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
            let upsertion = |name: &'static str| {
                ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_mechanism(1)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"salt"))
                    .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
            };
            let request = kafka_protocol::messages::AlterUserScramCredentialsRequest::default()
                .with_upsertions(vec![upsertion("someone"), upsertion("")]);
            let r = client.try_call(version, &request).await?;
            let mut codes: Vec<(String, i16)> = r.results.iter().map(|u| (u.user.to_string(), u.error_code)).collect();
            codes.sort();
            // Unauthenticated: no role's password may be changed.
            let expected = [
                (String::new(), error_code::UNACCEPTABLE_CREDENTIAL),
                ("someone".to_owned(), error_code::CLUSTER_AUTHORIZATION_FAILED),
            ];
            check(codes == expected, format!("{r:?}"))
        }
        ApiKey::SaslHandshake => {
            let request = kafka_protocol::messages::SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::ILLEGAL_SASL_STATE, format!("{r:?}"))
        }
        ApiKey::SaslAuthenticate => {
            let request = kafka_protocol::messages::SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from_static(b"n,,n=user,r=abc"));
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::ILLEGAL_SASL_STATE, format!("{r:?}"))
        }
        // Without authentication, as on a Kafka PLAINTEXT listener: refused
        // (tests/delegation_tokens.rs covers them over SASL).
        ApiKey::CreateDelegationToken => {
            let request = kafka_protocol::messages::CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1);
            let r = client.try_call(version, &request).await?;
            let requester = if version >= 3 { "ANONYMOUS" } else { "" };
            check(
                (r.error_code, r.principal_name.as_str(), r.token_requester_principal_name.as_str())
                    == (error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "ANONYMOUS", requester),
                format!("{r:?}"),
            )
        }
        ApiKey::RenewDelegationToken => {
            let request = kafka_protocol::messages::RenewDelegationTokenRequest::default()
                .with_hmac(bytes::Bytes::from_static(b"hmac"))
                .with_renew_period_ms(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        ApiKey::ExpireDelegationToken => {
            let request = kafka_protocol::messages::ExpireDelegationTokenRequest::default()
                .with_hmac(bytes::Bytes::from_static(b"hmac"))
                .with_expiry_time_period_ms(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        ApiKey::DescribeDelegationToken => {
            let r =
                client.try_call(version, &kafka_protocol::messages::DescribeDelegationTokenRequest::default()).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        other => Err(format!("{other:?} is not in this family")),
    }
}
