//! AlterConfigs (replace a resource's whole override set) and
//! IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT per config).
//!
//! Topics: the new override set is checked as Kafka 4.x checks it (known
//! names, values of the config's type and range), stored in the catalog, and
//! only then applied in memory: the registry's topic gets the new configs
//! (Produce reads `max.message.bytes` and the timestamp policy from them per
//! request, DescribeConfigs reports them) and each partition its retention
//! and segment settings (the retention task is woken). `validate_only` checks
//! and writes nothing. A BROKER resource (this node's id, or "" for the
//! cluster-wide default) holds the dynamic broker configs
//! (`crate::dynamic_config`): those Kafgres can apply live are checked,
//! stored and applied; any other is refused as Kafka refuses a static broker
//! config. Deleting a config that is not set is the no-op it is in Kafka, so
//! tools that clear dynamic configs they may have set, such as
//! `kafka-reassign-partitions.sh --verify` clearing replication throttles,
//! succeed.

use std::collections::{BTreeMap, HashSet};

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::catalog::CatalogError;
use crate::config::BrokerConfig;
use crate::dynamic_config::admin::{BrokerConfigAdmin, ConfigChange};
use crate::topic_admin::TopicAdmin;
use crate::topic_config::{
    list_items, topic_config, validate_topic_config_names, validate_topic_config_value, ConfigType,
};
use crate::topics::validate_topic_name;

/// IncrementalAlterConfigs operations (Kafka's `AlterConfigOp.OpType` ids).
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

/// A refused resource: the Kafka error code and its message.
type AlterError = (i16, String);

/// One requested change: config name, operation, value.
struct Change {
    name: String,
    op: i8,
    value: Option<String>,
}

pub struct IncrementalAlterConfigs;

impl Handler for IncrementalAlterConfigs {
    const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
    /// v0-v1: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = IncrementalAlterConfigsRequest;
    type Response = IncrementalAlterConfigsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a TopicAdmin, &'a crate::share::ShareService, &'a BrokerConfigAdmin);

    async fn handle(
        services: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: IncrementalAlterConfigsRequest,
    ) -> Answer<IncrementalAlterConfigsResponse> {
        use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
        let duplicated = duplicated_resources(request.resources.iter().map(|r| (r.resource_type, &r.resource_name)));
        let mut response = IncrementalAlterConfigsResponse::default();
        for resource in request.resources {
            let changes: Vec<Change> = resource
                .configs
                .iter()
                .map(|c| Change {
                    name: c.name.to_string(),
                    op: c.config_operation,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect();
            let outcome = if duplicated.contains(&(resource.resource_type, resource.resource_name.to_string())) {
                Err(duplicate_resource())
            } else if let Some(refused) = refused(cx, resource.resource_type, &resource.resource_name) {
                Err(refused)
            } else {
                alter(services, resource.resource_type, &resource.resource_name, changes, false, request.validate_only)
                    .await
            };
            let (error_code, error_message) = answer(outcome);
            let mut result = AlterConfigsResourceResponse::default();
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name;
            result.error_code = error_code;
            result.error_message = error_message;
            response.responses.push(result);
        }
        response.into()
    }
}

pub struct AlterConfigs;

impl Handler for AlterConfigs {
    const KEY: ApiKey = ApiKey::AlterConfigs;
    /// v0-v2: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = AlterConfigsRequest;
    type Response = AlterConfigsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a TopicAdmin, &'a crate::share::ShareService, &'a BrokerConfigAdmin);

    async fn handle(
        services: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: AlterConfigsRequest,
    ) -> Answer<AlterConfigsResponse> {
        use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
        let duplicated = duplicated_resources(request.resources.iter().map(|r| (r.resource_type, &r.resource_name)));
        let mut response = AlterConfigsResponse::default();
        for resource in request.resources {
            let changes: Vec<Change> = resource
                .configs
                .iter()
                .map(|c| Change {
                    name: c.name.to_string(),
                    op: OP_SET,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect();
            let outcome = if duplicated.contains(&(resource.resource_type, resource.resource_name.to_string())) {
                Err(duplicate_resource())
            } else if let Some(refused) = refused(cx, resource.resource_type, &resource.resource_name) {
                Err(refused)
            } else {
                alter(services, resource.resource_type, &resource.resource_name, changes, true, request.validate_only)
                    .await
            };
            let (error_code, error_message) = answer(outcome);
            let mut result = AlterConfigsResourceResponse::default();
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name;
            result.error_code = error_code;
            result.error_message = error_message;
            response.responses.push(result);
        }
        response.into()
    }
}

/// ALTER_CONFIGS on the topic, or on the cluster for the broker's configs;
/// refused without a message, as Kafka's `configsAuthorizationApiError`.
fn refused(cx: &RequestContext<'_>, resource_type: i8, name: &str) -> Option<AlterError> {
    let allowed = match resource_type {
        RESOURCE_TOPIC => cx.may_on_topic(Operation::AlterConfigs, name),
        RESOURCE_BROKER => cx.may_on_cluster(Operation::AlterConfigs),
        RESOURCE_GROUP => cx.may_on_group(Operation::AlterConfigs, name),
        _ => true,
    };
    match (allowed, resource_type) {
        (true, _) => None,
        (false, RESOURCE_TOPIC) => Some((error_code::TOPIC_AUTHORIZATION_FAILED, String::new())),
        (false, RESOURCE_GROUP) => Some((error_code::GROUP_AUTHORIZATION_FAILED, String::new())),
        (false, _) => Some((error_code::CLUSTER_AUTHORIZATION_FAILED, String::new())),
    }
}

fn answer(outcome: Result<(), AlterError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (error_code::NONE, None),
        Err((code, message)) if message.is_empty() => (code, None),
        Err((code, message)) => (code, Some(str_bytes(&message))),
    }
}

fn duplicate_resource() -> AlterError {
    (error_code::INVALID_REQUEST, "Each resource must appear at most once.".into())
}

/// Resources named more than once in one request (each of them is refused).
fn duplicated_resources<'a>(resources: impl Iterator<Item = (i8, &'a StrBytes)>) -> HashSet<(i8, String)> {
    let mut seen = HashSet::new();
    let mut duplicated = HashSet::new();
    for (kind, name) in resources {
        let key = (kind, name.to_string());
        if !seen.insert(key.clone()) {
            duplicated.insert(key);
        }
    }
    duplicated
}

/// One resource's alteration. `replace`: AlterConfigs (the changes are the
/// whole new set), else IncrementalAlterConfigs.
async fn alter(
    (_config, admin, shares, broker_configs): (
        &BrokerConfig,
        &TopicAdmin,
        &crate::share::ShareService,
        &BrokerConfigAdmin,
    ),
    resource_type: i8,
    name: &str,
    changes: Vec<Change>,
    replace: bool,
    validate_only: bool,
) -> Result<(), AlterError> {
    // Checked before the resource, as Kafka's ConfigAdminManager does.
    let mut names = HashSet::new();
    if !changes.iter().all(|c| names.insert(c.name.as_str())) {
        return Err((error_code::INVALID_REQUEST, "Error due to duplicate config keys".into()));
    }
    let nulls: Vec<&str> =
        changes.iter().filter(|c| c.op != OP_DELETE && c.value.is_none()).map(|c| c.name.as_str()).collect();
    if !nulls.is_empty() {
        return Err((error_code::INVALID_REQUEST, format!("Null value not supported for : {}", nulls.join(", "))));
    }
    match resource_type {
        RESOURCE_TOPIC => alter_topic(admin, name, &changes, replace, validate_only).await,
        RESOURCE_BROKER => {
            let changes: Vec<ConfigChange<'_>> =
                changes.iter().map(|c| ConfigChange { name: &c.name, op: c.op, value: c.value.as_deref() }).collect();
            broker_configs.alter(admin, name, &changes, replace, validate_only).await
        }
        RESOURCE_GROUP if !replace => alter_group(shares, name, &changes, validate_only).await,
        other => Err((
            error_code::INVALID_REQUEST,
            format!("Kafgres has no configs to alter for resource type {other} (topics only)"),
        )),
    }
}

async fn alter_topic(
    admin: &TopicAdmin,
    name: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Result<(), AlterError> {
    if name.is_empty() {
        return Err((error_code::INVALID_REQUEST, "Default topic resources are not allowed.".into()));
    }
    validate_topic_name(name).map_err(|m| (error_code::INVALID_TOPIC_EXCEPTION, m))?;
    // Serialized with creation, deletion and CreatePartitions, which also
    // replace the registry's topic: no alteration is lost to a race.
    let change = admin.begin().await;
    let topic = change
        .topics()
        .get(name)
        .ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, format!("The topic '{name}' does not exist.")))?;
    let configs = if replace { replaced(changes) } else { incremented(&topic.configs, changes)? };
    let written: Vec<&str> = changes.iter().filter(|c| c.op != OP_DELETE).map(|c| c.name.as_str()).collect();
    validate_topic_config_names(written.iter().copied()).map_err(|m| (error_code::INVALID_CONFIG, m))?;
    for name in written {
        if let Some(value) = configs.get(name) {
            validate_topic_config_value(name, value).map_err(|m| (error_code::INVALID_CONFIG, m))?;
        }
    }
    if validate_only || configs == topic.configs {
        return Ok(());
    }
    change.set_configs(&topic, configs).await.map_err(|e| match e {
        CatalogError::UnknownTopic(_) => {
            (error_code::UNKNOWN_TOPIC_OR_PARTITION, format!("The topic '{name}' does not exist."))
        }
        other => (error_code::UNKNOWN_SERVER_ERROR, other.to_string()),
    })
}

/// IncrementalAlterConfigs on a group: its share configs (SET, DELETE),
/// stored before the answer.
async fn alter_group(
    shares: &crate::share::ShareService,
    group_id: &str,
    changes: &[Change],
    validate_only: bool,
) -> Result<(), AlterError> {
    if group_id.is_empty() {
        return Err((error_code::INVALID_REQUEST, "Group name must not be empty".into()));
    }
    let mut set = Vec::with_capacity(changes.len());
    for c in changes {
        match c.op {
            OP_SET => set.push((c.name.clone(), c.value.clone())),
            OP_DELETE => set.push((c.name.clone(), None)),
            _ => return Err((error_code::INVALID_CONFIG, format!("Can't APPEND or SUBTRACT group config {}", c.name))),
        }
    }
    let write = shares
        .alter_group_configs(group_id, &set, validate_only)
        .map_err(|e| (error_code::INVALID_CONFIG, e.to_string()))?;
    match write {
        Some(write) => write.await.map_err(|e| (error_code::UNKNOWN_SERVER_ERROR, e.to_string())),
        None => Ok(()),
    }
}

/// AlterConfigs: the request's configs are the new override set.
fn replaced(changes: &[Change]) -> BTreeMap<String, String> {
    changes.iter().filter_map(|c| c.value.as_ref().map(|v| (c.name.clone(), v.clone()))).collect()
}

/// IncrementalAlterConfigs: the current overrides with each change applied.
fn incremented(current: &BTreeMap<String, String>, changes: &[Change]) -> Result<BTreeMap<String, String>, AlterError> {
    let mut configs = current.clone();
    for c in changes {
        let value = c.value.clone().unwrap_or_default();
        match c.op {
            OP_SET => {
                configs.insert(c.name.clone(), value);
            }
            OP_DELETE => {
                configs.remove(&c.name);
            }
            OP_APPEND | OP_SUBTRACT => {
                let op = if c.op == OP_APPEND { "APPEND" } else { "SUBTRACT" };
                let Some(def) = topic_config(&c.name).filter(|d| d.kind == ConfigType::List) else {
                    return Err((
                        error_code::INVALID_CONFIG,
                        format!("Can't {op} to key {} because its type is not LIST.", c.name),
                    ));
                };
                let mut items = list_items(configs.get(&c.name).map_or(def.default, String::as_str));
                for item in list_items(&value) {
                    if c.op == OP_APPEND && !items.contains(&item) {
                        items.push(item);
                    } else if c.op == OP_SUBTRACT {
                        items.retain(|i| *i != item);
                    }
                }
                configs.insert(c.name.clone(), items.join(","));
            }
            other => {
                return Err((error_code::INVALID_REQUEST, format!("Unknown alter config operation type {other}")));
            }
        }
    }
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, op: i8, value: Option<&str>) -> Change {
        Change { name: name.into(), op, value: value.map(str::to_owned) }
    }

    #[test]
    fn incremental_operations_apply_in_order() {
        let mut current = BTreeMap::new();
        current.insert("retention.ms".to_owned(), "1000".to_owned());
        current.insert("segment.ms".to_owned(), "5000".to_owned());
        let changes = [
            change("retention.ms", OP_SET, Some("2000")),
            change("segment.ms", OP_DELETE, None),
            change("cleanup.policy", OP_APPEND, Some("compact")),
            change("leader.replication.throttled.replicas", OP_APPEND, Some("0:1,1:1")),
        ];
        let configs = incremented(&current, &changes).expect("valid");
        let expected: BTreeMap<String, String> = [
            ("cleanup.policy", "delete,compact"),
            ("leader.replication.throttled.replicas", "0:1,1:1"),
            ("retention.ms", "2000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(configs, expected);
        let configs = incremented(&configs, &[change("cleanup.policy", OP_SUBTRACT, Some("delete"))]).expect("ok");
        assert_eq!(configs["cleanup.policy"], "compact");
    }

    #[test]
    fn append_to_a_non_list_config_and_unknown_operations_are_refused() {
        let current = BTreeMap::new();
        let e = incremented(&current, &[change("retention.ms", OP_APPEND, Some("1"))]).unwrap_err();
        assert_eq!(
            e,
            (error_code::INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.".into())
        );
        let e = incremented(&current, &[change("retention.ms", 9, Some("1"))]).unwrap_err();
        assert_eq!(e.0, error_code::INVALID_REQUEST);
    }
}
