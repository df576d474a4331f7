//! Client quota requests: DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), both
//! versions 0-1, flexible from 1.

use crate::guard::schema::{between, field, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// DescribeClientQuotas (key 48): a filter of entity components, and strict.

pub(crate) static DESCRIBE_CLIENT_QUOTAS: ApiSchema =
    ApiSchema { key: 48, versions: between(0, 1), flexible_since: 1, body: &DESCRIBE_CLIENT_QUOTAS_REQUEST };

pub(crate) const DESCRIBE_CLIENT_QUOTAS_REQUEST: StructSchema = StructSchema::new(
    "DescribeClientQuotasRequest",
    &[field("components", Kind::Array(&Kind::Struct(&COMPONENT_DATA)), ALL), field("strict", Kind::Bool, ALL)],
);

pub(crate) const COMPONENT_DATA: StructSchema = StructSchema::new(
    "ComponentData",
    &[
        field("entity_type", Kind::String, ALL),
        field("match_type", Kind::Int8, ALL),
        field("_match", Kind::NullableString, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// AlterClientQuotas (key 49): entries of an entity and the operations on its quotas.

pub(crate) static ALTER_CLIENT_QUOTAS: ApiSchema =
    ApiSchema { key: 49, versions: between(0, 1), flexible_since: 1, body: &ALTER_CLIENT_QUOTAS_REQUEST };

pub(crate) const ALTER_CLIENT_QUOTAS_REQUEST: StructSchema = StructSchema::new(
    "AlterClientQuotasRequest",
    &[field("entries", Kind::Array(&Kind::Struct(&ENTRY_DATA)), ALL), field("validate_only", Kind::Bool, ALL)],
);

pub(crate) const ENTRY_DATA: StructSchema = StructSchema::new(
    "EntryData",
    &[
        field("entity", Kind::Array(&Kind::Struct(&ENTITY_DATA)), ALL),
        field("ops", Kind::Array(&Kind::Struct(&OP_DATA)), ALL),
    ],
);

pub(crate) const ENTITY_DATA: StructSchema = StructSchema::new(
    "EntityData",
    &[field("entity_type", Kind::String, ALL), field("entity_name", Kind::NullableString, ALL)],
);

pub(crate) const OP_DATA: StructSchema = StructSchema::new(
    "OpData",
    &[field("key", Kind::String, ALL), field("value", Kind::Float64, ALL), field("remove", Kind::Bool, ALL)],
);
