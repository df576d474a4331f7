//! Requests about brokers and their configuration: AlterConfigs, IncrementalAlterConfigs,
//! DescribeLogDirs, DescribeCluster, UpdateFeatures, ListConfigResources. (DescribeConfigs is in
//! `admin.rs`.)
//!
//! AlterConfigs and IncrementalAlterConfigs both name their structs `AlterConfigsResource` and
//! `AlterableConfig` (as Kafka's message definitions do); the tables are distinct constants.

use crate::guard::schema::{between, field, since, until, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// AlterConfigs (key 33): versions 0-2, flexible from 2. A config's `value` is nullable.

pub(crate) static ALTER_CONFIGS: ApiSchema =
    ApiSchema { key: 33, versions: between(0, 2), flexible_since: 2, body: &ALTER_CONFIGS_REQUEST };

pub(crate) const ALTER_CONFIGS_REQUEST: StructSchema = StructSchema::new(
    "AlterConfigsRequest",
    &[
        field("resources", Kind::Array(&Kind::Struct(&ALTER_CONFIGS_RESOURCE)), ALL),
        field("validate_only", Kind::Bool, ALL),
    ],
);

pub(crate) const ALTER_CONFIGS_RESOURCE: StructSchema = StructSchema::new(
    "AlterConfigsResource",
    &[
        field("resource_type", Kind::Int8, ALL),
        field("resource_name", Kind::String, ALL),
        field("configs", Kind::Array(&Kind::Struct(&ALTERABLE_CONFIG)), ALL),
    ],
);

pub(crate) const ALTERABLE_CONFIG: StructSchema = StructSchema::new(
    "AlterableConfig",
    &[field("name", Kind::String, ALL), field("value", Kind::NullableString, ALL)],
);

// ---------------------------------------------------------------------------------------------
// IncrementalAlterConfigs (key 44): versions 0-1, flexible from 1. Each config adds an operation.

pub(crate) static INCREMENTAL_ALTER_CONFIGS: ApiSchema =
    ApiSchema { key: 44, versions: between(0, 1), flexible_since: 1, body: &INCREMENTAL_ALTER_CONFIGS_REQUEST };

pub(crate) const INCREMENTAL_ALTER_CONFIGS_REQUEST: StructSchema = StructSchema::new(
    "IncrementalAlterConfigsRequest",
    &[
        field("resources", Kind::Array(&Kind::Struct(&INCREMENTAL_ALTER_CONFIGS_RESOURCE)), ALL),
        field("validate_only", Kind::Bool, ALL),
    ],
);

pub(crate) const INCREMENTAL_ALTER_CONFIGS_RESOURCE: StructSchema = StructSchema::new(
    "AlterConfigsResource",
    &[
        field("resource_type", Kind::Int8, ALL),
        field("resource_name", Kind::String, ALL),
        field("configs", Kind::Array(&Kind::Struct(&INCREMENTAL_ALTERABLE_CONFIG)), ALL),
    ],
);

pub(crate) const INCREMENTAL_ALTERABLE_CONFIG: StructSchema = StructSchema::new(
    "AlterableConfig",
    &[
        field("name", Kind::String, ALL),
        field("config_operation", Kind::Int8, ALL),
        field("value", Kind::NullableString, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeLogDirs (key 35): versions 1-5 (v5, Kafka 4.4, is laid out as v4), flexible from 2. (v0 is not in kafka-protocol 0.18.0's
// decoder.) `topics` null means "all".

pub(crate) static DESCRIBE_LOG_DIRS: ApiSchema =
    ApiSchema { key: 35, versions: between(1, 5), flexible_since: 2, body: &DESCRIBE_LOG_DIRS_REQUEST };

pub(crate) const DESCRIBE_LOG_DIRS_REQUEST: StructSchema = StructSchema::new(
    "DescribeLogDirsRequest",
    &[field("topics", Kind::NullableArray(&Kind::Struct(&DESCRIBABLE_LOG_DIR_TOPIC)), ALL)],
);

pub(crate) const DESCRIBABLE_LOG_DIR_TOPIC: StructSchema = StructSchema::new(
    "DescribableLogDirTopic",
    &[field("topic", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// DescribeCluster (key 60): versions 0-2, flexible at all of them. No arrays.

pub(crate) static DESCRIBE_CLUSTER: ApiSchema =
    ApiSchema { key: 60, versions: between(0, 2), flexible_since: 0, body: &DESCRIBE_CLUSTER_REQUEST };

pub(crate) const DESCRIBE_CLUSTER_REQUEST: StructSchema = StructSchema::new(
    "DescribeClusterRequest",
    &[
        field("include_cluster_authorized_operations", Kind::Bool, ALL),
        field("endpoint_type", Kind::Int8, since(1)),
        field("include_fenced_brokers", Kind::Bool, since(2)),
    ],
);

// ---------------------------------------------------------------------------------------------
// UpdateFeatures (key 57): versions 0-2, flexible at all of them. v1 replaced allow_downgrade with
// upgrade_type and added validate_only.

pub(crate) static UPDATE_FEATURES: ApiSchema =
    ApiSchema { key: 57, versions: between(0, 2), flexible_since: 0, body: &UPDATE_FEATURES_REQUEST };

pub(crate) const UPDATE_FEATURES_REQUEST: StructSchema = StructSchema::new(
    "UpdateFeaturesRequest",
    &[
        field("timeout_ms", Kind::Int32, ALL),
        field("feature_updates", Kind::Array(&Kind::Struct(&FEATURE_UPDATE_KEY)), ALL),
        field("validate_only", Kind::Bool, since(1)),
    ],
);

pub(crate) const FEATURE_UPDATE_KEY: StructSchema = StructSchema::new(
    "FeatureUpdateKey",
    &[
        field("feature", Kind::String, ALL),
        field("max_version_level", Kind::Int16, ALL),
        field("allow_downgrade", Kind::Bool, until(0)),
        field("upgrade_type", Kind::Int8, since(1)),
    ],
);

// ---------------------------------------------------------------------------------------------
// ListConfigResources (key 74): versions 0-1, flexible at all of them. v0 (ListClientMetricsResources)
// has an empty body.

pub(crate) static LIST_CONFIG_RESOURCES: ApiSchema =
    ApiSchema { key: 74, versions: between(0, 1), flexible_since: 0, body: &LIST_CONFIG_RESOURCES_REQUEST };

pub(crate) const LIST_CONFIG_RESOURCES_REQUEST: StructSchema =
    StructSchema::new("ListConfigResourcesRequest", &[field("resource_types", Kind::Array(&Kind::Int8), since(1))]);
