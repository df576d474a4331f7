//! Random valid DescribeAcls, CreateAcls and DeleteAcls requests for one version (see
//! `requests_data.rs` for the conventions).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use proptest::prelude::*;

use super::gen::{list, text, text_or_null, unknown_tags};

pub(super) fn describe_acls(v: i16) -> impl Strategy<Value = DescribeAclsRequest> {
    let flexible = v >= 2;
    (
        any::<i8>(),
        text_or_null(),
        any::<i8>(),
        text_or_null(),
        text_or_null(),
        any::<i8>(),
        any::<i8>(),
        unknown_tags(flexible),
    )
        .prop_map(
            |(resource_type, resource_name, pattern_type, principal, host, operation, permission_type, tags)| {
                DescribeAclsRequest::default()
                    .with_resource_type_filter(resource_type)
                    .with_resource_name_filter(resource_name)
                    .with_pattern_type_filter(pattern_type)
                    .with_principal_filter(principal)
                    .with_host_filter(host)
                    .with_operation(operation)
                    .with_permission_type(permission_type)
                    .with_unknown_tagged_fields(tags)
            },
        )
}

pub(super) fn create_acls(v: i16) -> impl Strategy<Value = CreateAclsRequest> {
    let flexible = v >= 2;
    let creation = (any::<i8>(), text(), any::<i8>(), text(), text(), any::<i8>(), any::<i8>(), unknown_tags(flexible))
        .prop_map(|(resource_type, resource_name, pattern_type, principal, host, operation, permission_type, tags)| {
            AclCreation::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_resource_pattern_type(pattern_type)
                .with_principal(principal)
                .with_host(host)
                .with_operation(operation)
                .with_permission_type(permission_type)
                .with_unknown_tagged_fields(tags)
        });
    (list(creation), unknown_tags(flexible)).prop_map(|(creations, tags)| {
        CreateAclsRequest::default().with_creations(creations).with_unknown_tagged_fields(tags)
    })
}

pub(super) fn delete_acls(v: i16) -> impl Strategy<Value = DeleteAclsRequest> {
    let flexible = v >= 2;
    let filter = (
        any::<i8>(),
        text_or_null(),
        any::<i8>(),
        text_or_null(),
        text_or_null(),
        any::<i8>(),
        any::<i8>(),
        unknown_tags(flexible),
    )
        .prop_map(
            |(resource_type, resource_name, pattern_type, principal, host, operation, permission_type, tags)| {
                DeleteAclsFilter::default()
                    .with_resource_type_filter(resource_type)
                    .with_resource_name_filter(resource_name)
                    .with_pattern_type_filter(pattern_type)
                    .with_principal_filter(principal)
                    .with_host_filter(host)
                    .with_operation(operation)
                    .with_permission_type(permission_type)
                    .with_unknown_tagged_fields(tags)
            },
        );
    (list(filter), unknown_tags(flexible))
        .prop_map(|(filters, tags)| DeleteAclsRequest::default().with_filters(filters).with_unknown_tagged_fields(tags))
}
