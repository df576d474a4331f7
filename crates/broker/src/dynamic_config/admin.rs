//! Altering the dynamic broker configs of one BROKER resource: the new set
//! is computed and checked as Kafka 4.x's `ConfigAdminManager` and
//! `DynamicBrokerConfig` check it, stored in the catalog, and only then put
//! in force (the connection limits at once for new connections, the topic
//! defaults on every partition, whose retention task is woken).
//!
//! Kafka answers a value its `ConfigDef` refuses with INVALID_REQUEST (the
//! `ConfigException` is wrapped, KAFKA-13609), and so does Kafgres.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafgres_wire::error_code;

use super::defs::{self, Target};
use super::{DynamicLayers, DEFAULT_NODE_ID};
use crate::api::alter_configs::{OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT};
use crate::catalog::Catalog;
use crate::config::BrokerConfig;
use crate::limits::ConnectionsPerAddress;
use crate::topic_admin::TopicAdmin;
use crate::topic_config::{list_items, ConfigType};
use crate::topics::Topics;

/// A refused alteration: the Kafka error code and its message.
pub type AlterError = (i16, String);

/// One requested change: config name, operation (Kafka's `OpType` id), value.
#[derive(Debug, Clone, Copy)]
pub struct ConfigChange<'a> {
    pub name: &'a str,
    pub op: i8,
    pub value: Option<&'a str>,
}

/// Alters the dynamic broker configs, one alteration at a time.
pub struct BrokerConfigAdmin {
    catalog: Arc<dyn Catalog>,
    config: Arc<BrokerConfig>,
    per_address: ConnectionsPerAddress,
    topics: Arc<Topics>,
    serial: tokio::sync::Mutex<()>,
}

impl BrokerConfigAdmin {
    pub fn new(
        catalog: Arc<dyn Catalog>,
        config: Arc<BrokerConfig>,
        per_address: ConnectionsPerAddress,
        topics: Arc<Topics>,
    ) -> BrokerConfigAdmin {
        BrokerConfigAdmin { catalog, config, per_address, topics, serial: tokio::sync::Mutex::new(()) }
    }

    /// The node id a resource name stands for: this broker's, or the
    /// default's for "". Kafka's texts for anything else.
    fn node_of(&self, resource_name: &str) -> Result<i32, AlterError> {
        if resource_name.is_empty() {
            return Ok(DEFAULT_NODE_ID);
        }
        let Ok(id) = resource_name.parse::<i32>() else {
            return Err((
                error_code::INVALID_REQUEST,
                format!("Node id must be an integer, but it is: {resource_name}"),
            ));
        };
        if id != self.config.node_id {
            return Err((
                error_code::INVALID_REQUEST,
                format!("Unexpected broker id, expected {}, but received {resource_name}", self.config.node_id),
            ));
        }
        Ok(id)
    }

    /// One resource's alteration. `replace`: AlterConfigs (the changes are
    /// the resource's whole new set), else IncrementalAlterConfigs. The
    /// caller has refused duplicate names and null values.
    pub async fn alter(
        &self,
        topic_admin: &TopicAdmin,
        resource_name: &str,
        changes: &[ConfigChange<'_>],
        replace: bool,
        validate_only: bool,
    ) -> Result<(), AlterError> {
        let node_id = self.node_of(resource_name)?;
        let _serial = self.serial.lock().await;
        let layers = self.config.live.dynamic();
        let current = if node_id == DEFAULT_NODE_ID { &layers.default } else { &layers.per_broker };
        let configs = if replace { replaced(changes) } else { incremented(current, changes)? };
        check(&configs, changes)?;
        let mut next = (*layers).clone();
        *(if node_id == DEFAULT_NODE_ID { &mut next.default } else { &mut next.per_broker }) = configs.clone();
        defs::validate_together(|name| next.value(name).map(str::to_owned))
            .map_err(|m| (error_code::INVALID_REQUEST, m))?;
        if validate_only || configs == *current {
            return Ok(());
        }
        self.catalog
            .set_broker_configs(node_id, configs.clone())
            .await
            .map_err(|e| (error_code::UNKNOWN_SERVER_ERROR, e.to_string()))?;
        let topic_defaults_changed = defs::dynamic_defs()
            .iter()
            .any(|d| matches!(d.target, Target::TopicDefault(_)) && layers.value(d.name) != next.value(d.name));
        // Serialized with topic changes, which also reconfigure partitions:
        // none of them works from the layers this one replaces.
        let _topics = if topic_defaults_changed { Some(topic_admin.begin().await) } else { None };
        self.config.live.set_dynamic(next);
        self.apply();
        if topic_defaults_changed {
            for topic in self.topics.all() {
                topic.reconfigure_partitions(&self.config);
            }
        }
        let shown: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let whose =
            if node_id == DEFAULT_NODE_ID { "the cluster default".to_owned() } else { format!("broker {node_id}") };
        log::info!("dynamic broker configs of {whose} are now {{{}}}", shown.join(", "));
        Ok(())
    }

    /// Puts the dynamic layers in force over the static settings: the
    /// connection limits (the topic defaults are read where topics use
    /// them). At start, after each alteration and after each reload.
    pub fn apply(&self) {
        let live = &self.config.live;
        let Some(statics) = live.statics() else { return };
        let layers = live.dynamic();
        live.store(&layers.over_statics(&statics));
        let (default, overrides) = layers.per_address_limits(&statics);
        self.per_address.set_limits(default, overrides);
    }
}

/// AlterConfigs: the request's configs are the new set.
fn replaced(changes: &[ConfigChange<'_>]) -> BTreeMap<String, String> {
    changes.iter().filter_map(|c| Some((c.name.to_owned(), c.value?.to_owned()))).collect()
}

/// IncrementalAlterConfigs: the current set with each change applied, as
/// Kafka's `prepareIncrementalConfigs` does (APPEND and SUBTRACT only on
/// list configs, starting from the default when the config is not set).
fn incremented(
    current: &BTreeMap<String, String>,
    changes: &[ConfigChange<'_>],
) -> Result<BTreeMap<String, String>, AlterError> {
    let mut configs = current.clone();
    for c in changes {
        let value = c.value.unwrap_or_default();
        match c.op {
            OP_SET => {
                configs.insert(c.name.to_owned(), value.to_owned());
            }
            OP_DELETE => {
                configs.remove(c.name);
            }
            OP_APPEND | OP_SUBTRACT => {
                let verb = if c.op == OP_APPEND { "append" } else { "subtract" };
                let Some(def) = defs::dynamic_def(c.name).filter(|d| d.kind == ConfigType::List) else {
                    return Err((
                        error_code::INVALID_CONFIG,
                        format!("Config value {verb} is not allowed for config key: {}", c.name),
                    ));
                };
                let mut items = list_items(configs.get(c.name).map_or(def.default.unwrap_or(""), String::as_str));
                for item in list_items(value) {
                    if c.op == OP_APPEND && !items.contains(&item) {
                        items.push(item);
                    } else if c.op == OP_SUBTRACT {
                        items.retain(|i| *i != item);
                    }
                }
                configs.insert(c.name.to_owned(), items.join(","));
            }
            other => {
                return Err((error_code::INVALID_REQUEST, format!("Unknown operations type {other}")));
            }
        }
    }
    Ok(configs)
}

/// Kafka's `DynamicBrokerConfig.validateConfigs` on the new set: names that
/// cannot change at runtime first (in the order the request named them),
/// then each value.
fn check(configs: &BTreeMap<String, String>, changes: &[ConfigChange<'_>]) -> Result<(), AlterError> {
    let mut fixed: Vec<&str> =
        changes.iter().map(|c| c.name).filter(|n| configs.contains_key(*n) && defs::dynamic_def(n).is_none()).collect();
    // Set before and kept by an AlterConfigs' or IncrementalAlterConfigs' new set.
    for name in configs.keys().map(String::as_str) {
        if defs::dynamic_def(name).is_none() && !fixed.contains(&name) {
            fixed.push(name);
        }
    }
    if !fixed.is_empty() {
        // A Java list, as Kafka 4.4 prints it (4.1 printed a Scala `Set(…)`).
        return Err((
            error_code::INVALID_REQUEST,
            format!("Cannot update these configs dynamically: [{}]", fixed.join(", ")),
        ));
    }
    for (name, value) in configs {
        if let Some(def) = defs::dynamic_def(name) {
            defs::validate_value(&def, value).map_err(|m| (error_code::INVALID_REQUEST, m))?;
        }
    }
    Ok(())
}

/// The layers a broker starts with, from the catalog's rows.
pub fn initial_layers(node_id: i32, records: &[crate::catalog::BrokerConfigRecord]) -> DynamicLayers {
    let layers = DynamicLayers::from_records(node_id, records);
    // A row edited by hand into something Kafgres cannot apply is skipped
    // (Kafka's `removeInvalidProps`), loudly: the rest still apply.
    let keep = |which: &str, map: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        map.iter()
            .filter(|(name, value)| match defs::dynamic_def(name) {
                Some(def) => match defs::validate_value(&def, value) {
                    Ok(()) => true,
                    Err(e) => {
                        log::warn!("the dynamic broker config {name} of {which} is ignored: {e}");
                        false
                    }
                },
                None => {
                    log::warn!("the dynamic broker config {name} of {which} is ignored: not dynamic in Kafgres");
                    false
                }
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    DynamicLayers {
        per_broker: keep(&format!("broker {node_id}"), &layers.per_broker),
        default: keep("the cluster default", &layers.default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change<'a>(name: &'a str, op: i8, value: Option<&'a str>) -> ConfigChange<'a> {
        ConfigChange { name, op, value }
    }

    #[test]
    fn list_configs_append_and_subtract_from_the_default() {
        let none = BTreeMap::new();
        let configs = incremented(&none, &[change("log.cleanup.policy", OP_APPEND, Some("compact"))]).expect("list");
        assert_eq!(configs["log.cleanup.policy"], "delete,compact");
        let configs = incremented(&configs, &[change("log.cleanup.policy", OP_SUBTRACT, Some("delete"))]).expect("ok");
        assert_eq!(configs["log.cleanup.policy"], "compact");
        let e = incremented(&none, &[change("max.connections", OP_APPEND, Some("1"))]).unwrap_err();
        assert_eq!(
            e,
            (error_code::INVALID_CONFIG, "Config value append is not allowed for config key: max.connections".into())
        );
    }

    #[test]
    fn static_names_come_first_then_values() {
        let set = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let changes = [change("num.partitions", OP_SET, Some("3")), change("max.connections", OP_SET, Some("x"))];
        let e = check(&set(&[("num.partitions", "3"), ("max.connections", "x")]), &changes).unwrap_err();
        assert_eq!(
            e,
            (error_code::INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]".into())
        );
        let e = check(&set(&[("max.connections", "x")]), &changes[1..]).unwrap_err();
        assert_eq!(e.0, error_code::INVALID_REQUEST);
        assert!(check(&set(&[("log.retention.ms", "1000")]), &[]).is_ok());
    }
}
