//! ACL requests: DescribeAcls, CreateAcls, DeleteAcls. All three are versions 1-3, flexible from 2.
//! (v0, before resource pattern types, is not in kafka-protocol 0.18.0's decoder.)
//!
//! DescribeAcls' request and DeleteAcls' `DeleteAclsFilter` have the same fields (a filter); the
//! tables are distinct constants because Kafka's message definitions name them apart.

use crate::guard::schema::{between, field, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// DescribeAcls (key 29): versions 1-3, flexible from 2. No arrays. A null string matches any.

pub(crate) static DESCRIBE_ACLS: ApiSchema =
    ApiSchema { key: 29, versions: between(1, 3), flexible_since: 2, body: &DESCRIBE_ACLS_REQUEST };

pub(crate) const DESCRIBE_ACLS_REQUEST: StructSchema = StructSchema::new(
    "DescribeAclsRequest",
    &[
        field("resource_type_filter", Kind::Int8, ALL),
        field("resource_name_filter", Kind::NullableString, ALL),
        field("pattern_type_filter", Kind::Int8, ALL),
        field("principal_filter", Kind::NullableString, ALL),
        field("host_filter", Kind::NullableString, ALL),
        field("operation", Kind::Int8, ALL),
        field("permission_type", Kind::Int8, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// CreateAcls (key 30): versions 1-3, flexible from 2.

pub(crate) static CREATE_ACLS: ApiSchema =
    ApiSchema { key: 30, versions: between(1, 3), flexible_since: 2, body: &CREATE_ACLS_REQUEST };

pub(crate) const CREATE_ACLS_REQUEST: StructSchema =
    StructSchema::new("CreateAclsRequest", &[field("creations", Kind::Array(&Kind::Struct(&ACL_CREATION)), ALL)]);

pub(crate) const ACL_CREATION: StructSchema = StructSchema::new(
    "AclCreation",
    &[
        field("resource_type", Kind::Int8, ALL),
        field("resource_name", Kind::String, ALL),
        field("resource_pattern_type", Kind::Int8, ALL),
        field("principal", Kind::String, ALL),
        field("host", Kind::String, ALL),
        field("operation", Kind::Int8, ALL),
        field("permission_type", Kind::Int8, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// DeleteAcls (key 31): versions 1-3, flexible from 2. Each filter is laid out as DescribeAcls'
// request; a null string matches any.

pub(crate) static DELETE_ACLS: ApiSchema =
    ApiSchema { key: 31, versions: between(1, 3), flexible_since: 2, body: &DELETE_ACLS_REQUEST };

pub(crate) const DELETE_ACLS_REQUEST: StructSchema =
    StructSchema::new("DeleteAclsRequest", &[field("filters", Kind::Array(&Kind::Struct(&DELETE_ACLS_FILTER)), ALL)]);

pub(crate) const DELETE_ACLS_FILTER: StructSchema = StructSchema::new(
    "DeleteAclsFilter",
    &[
        field("resource_type_filter", Kind::Int8, ALL),
        field("resource_name_filter", Kind::NullableString, ALL),
        field("pattern_type_filter", Kind::Int8, ALL),
        field("principal_filter", Kind::NullableString, ALL),
        field("host_filter", Kind::NullableString, ALL),
        field("operation", Kind::Int8, ALL),
        field("permission_type", Kind::Int8, ALL),
    ],
);
