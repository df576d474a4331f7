//! Dynamic broker configs: Kafka's configs of a BROKER resource set with
//! IncrementalAlterConfigs or AlterConfigs, per broker (the resource named
//! by this node's id) or as the cluster-wide default (the resource named
//! ""), stored in the catalog (`kafgres.broker_configs`) and applied live.
//!
//! Precedence is Kafka's: a per-broker value, else the cluster default, else
//! the static setting (the `kafgres.*` GUC, what Kafka reads from
//! server.properties), else Kafka's default. A reload (SIGHUP) replaces the
//! static layer only, so it never undoes a dynamic value.
//!
//! - [`defs`]: which configs are dynamic here, what each acts on, how a
//!   value is checked;
//! - [`DynamicLayers`]: the two dynamic layers in force, and what they make
//!   of the static settings and of a topic's configs;
//! - [`admin`]: an alteration, checked, stored, then applied.

pub mod admin;
pub mod defs;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use crate::settings::Reloadable;
use crate::topic_config::source;
use defs::{Target, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, MAX_CONNECTIONS_PER_IP_OVERRIDES};

/// The node id `kafgres.broker_configs` stores the cluster-wide default under.
pub const DEFAULT_NODE_ID: i32 = -1;

/// The dynamic broker configs in force for this broker: its own and the
/// cluster-wide defaults, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicLayers {
    /// DYNAMIC_BROKER_CONFIG: set on the resource named by this node's id.
    pub per_broker: BTreeMap<String, String>,
    /// DYNAMIC_DEFAULT_BROKER_CONFIG: set on the resource named "".
    pub default: BTreeMap<String, String>,
}

impl DynamicLayers {
    /// This broker's layers among the stored rows of every node (a standby
    /// replicates its primary's rows, which name another node).
    pub fn from_records(node_id: i32, records: &[crate::catalog::BrokerConfigRecord]) -> DynamicLayers {
        let mut layers = DynamicLayers::default();
        for (node, configs) in records {
            if *node == node_id {
                layers.per_broker = configs.clone();
            } else if *node == DEFAULT_NODE_ID {
                layers.default = configs.clone();
            }
        }
        layers
    }

    pub fn is_empty(&self) -> bool {
        self.per_broker.is_empty() && self.default.is_empty()
    }

    /// The dynamic value of `name` in force: this broker's, else the default.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.per_broker.get(name).or_else(|| self.default.get(name)).map(String::as_str)
    }

    /// `name`'s dynamic values in precedence order, with their sources
    /// (DescribeConfigs' synonyms list them so).
    pub fn layers_of(&self, name: &str) -> Vec<(String, i8)> {
        let mut out = Vec::new();
        if let Some(v) = self.per_broker.get(name) {
            out.push((v.clone(), source::DYNAMIC_BROKER_CONFIG));
        }
        if let Some(v) = self.default.get(name) {
            out.push((v.clone(), source::DYNAMIC_DEFAULT_BROKER_CONFIG));
        }
        out
    }

    /// A topic's configs as its partitions and its produce path act on them:
    /// its own overrides, over the dynamic defaults of the topic configs
    /// (`log.retention.ms` for `retention.ms`...). Borrowed when no such
    /// default is set (the common case: no copy per produce).
    pub fn effective_topic_configs<'a>(
        &self,
        overrides: &'a BTreeMap<String, String>,
    ) -> Cow<'a, BTreeMap<String, String>> {
        let defaults: Vec<(&'static str, &str)> = defs::dynamic_defs()
            .into_iter()
            .filter_map(|d| match d.target {
                Target::TopicDefault(topic) if !overrides.contains_key(topic) => Some((topic, self.value(d.name)?)),
                _ => None,
            })
            .collect();
        if defaults.is_empty() {
            return Cow::Borrowed(overrides);
        }
        let mut configs = overrides.clone();
        configs.extend(defaults.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())));
        Cow::Owned(configs)
    }

    /// The reloadable settings in force: the static ones (the GUCs) with
    /// the dynamic `max.connections` over them.
    pub fn over_statics(&self, statics: &Reloadable) -> Reloadable {
        let mut settings = statics.clone();
        if let Some(n) = self.value(MAX_CONNECTIONS).and_then(|v| v.trim().parse::<i32>().ok()) {
            settings.connections_max = n.max(0) as usize;
        }
        settings
    }

    /// The per-address connection limits in force: a dynamic
    /// `max.connections.per.ip` (Kafka's meaning: 0 admits only the
    /// overridden addresses) over `kafgres.max_connections_per_ip` (0: no
    /// limit), and the dynamic overrides. `None`: no limit.
    pub fn per_address_limits(&self, statics: &Reloadable) -> (Option<usize>, HashMap<IpAddr, usize>) {
        let default = match self.value(MAX_CONNECTIONS_PER_IP).and_then(|v| v.trim().parse::<i32>().ok()) {
            Some(n) => Some(n.max(0) as usize),
            None if statics.connections_per_address_max == 0 => None,
            None => Some(statics.connections_per_address_max),
        };
        let overrides = self
            .value(MAX_CONNECTIONS_PER_IP_OVERRIDES)
            .and_then(|v| defs::parse_overrides(v).ok())
            .unwrap_or_default()
            .into_iter()
            .collect();
        (default, overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_per_broker_value_beats_the_default_and_a_topic_override_beats_both() {
        let layers = DynamicLayers {
            per_broker: map(&[("log.retention.ms", "1000")]),
            default: map(&[("log.retention.ms", "2000"), ("log.retention.bytes", "5")]),
        };
        assert_eq!(layers.value("log.retention.ms"), Some("1000"));
        assert_eq!(
            layers.layers_of("log.retention.ms"),
            vec![
                ("1000".into(), source::DYNAMIC_BROKER_CONFIG),
                ("2000".into(), source::DYNAMIC_DEFAULT_BROKER_CONFIG)
            ]
        );
        let topic = map(&[("retention.bytes", "7")]);
        let effective = layers.effective_topic_configs(&topic);
        assert_eq!(*effective, map(&[("retention.bytes", "7"), ("retention.ms", "1000")]));
        let none = DynamicLayers::default();
        assert!(matches!(none.effective_topic_configs(&topic), Cow::Borrowed(_)));
    }

    #[test]
    fn connection_limits_follow_kafkas_meaning_over_the_gucs() {
        let config = crate::BrokerConfig::for_tests(std::path::PathBuf::from("/nonexistent"));
        let statics = Reloadable::from(&config);
        let none = DynamicLayers::default();
        assert_eq!(none.per_address_limits(&statics).0, None, "the GUC's 0: no limit");
        assert_eq!(none.over_statics(&statics).connections_max, statics.connections_max);
        let layers = DynamicLayers {
            per_broker: map(&[("max.connections", "5")]),
            default: map(&[("max.connections.per.ip", "0"), ("max.connections.per.ip.overrides", "10.0.0.1:3")]),
        };
        assert_eq!(layers.over_statics(&statics).connections_max, 5);
        let (default, overrides) = layers.per_address_limits(&statics);
        assert_eq!(default, Some(0), "Kafka's 0: only the overridden addresses");
        assert_eq!(overrides.get(&"10.0.0.1".parse::<IpAddr>().expect("ip")), Some(&3));
        assert_eq!(
            DynamicLayers::from_records(1, &[(1, map(&[("a", "1")])), (2, map(&[("b", "2")]))]).per_broker.len(),
            1
        );
    }
}
