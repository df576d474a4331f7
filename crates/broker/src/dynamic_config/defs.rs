//! Which Kafka broker configs can be set dynamically here, what each one
//! acts on, and how a value is checked.
//!
//! The set is Kafka 4.x's dynamic broker configs (`DynamicBrokerConfig`'s
//! reconfigurables) that have a live counterpart in Kafgres: the connection
//! limits of the accept loops, and the `log.*` defaults of the topic configs
//! the broker acts on (docs/configuration.md, "Topic configs"). Kafka's other
//! dynamic configs (threads, SSL per listener, log cleaner buffers,
//! replication throttles...) have nothing to change here and are refused as
//! a static config is.

use crate::topic_config::{topic_config, validate_topic_config_value, ConfigType, TopicConfigDef};

/// What a dynamic broker config changes when it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `max.connections`: the connections served at once.
    ConnectionsMax,
    /// `max.connections.per.ip`: connections from one address.
    ConnectionsPerIp,
    /// `max.connections.per.ip.overrides`: `address:count` exceptions.
    ConnectionsPerIpOverrides,
    /// The default of this topic config for topics that do not set it.
    TopicDefault(&'static str),
}

pub const MAX_CONNECTIONS: &str = "max.connections";
pub const MAX_CONNECTIONS_PER_IP: &str = "max.connections.per.ip";
pub const MAX_CONNECTIONS_PER_IP_OVERRIDES: &str = "max.connections.per.ip.overrides";

/// Kafka's default of `max.connections` and `max.connections.per.ip`
/// (`Integer.MAX_VALUE`: no limit).
pub const CONNECTIONS_DEFAULT: &str = "2147483647";

/// The topic configs whose broker synonym may be set dynamically: those the
/// broker acts on. Their Kafka names, types and defaults come from
/// [`crate::topic_config::TOPIC_CONFIGS`] (one home for each fact).
const TOPIC_DEFAULTS: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
];

/// A dynamic broker config.
#[derive(Debug, Clone, Copy)]
pub struct DynamicDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Kafka's default, `None` for a config without one of its own
    /// (`log.retention.ms` defaults from `log.retention.hours`).
    pub default: Option<&'static str>,
    pub target: Target,
}

/// Every dynamic broker config Kafgres applies, sorted by name.
pub fn dynamic_defs() -> Vec<DynamicDef> {
    let mut defs = vec![
        DynamicDef {
            name: MAX_CONNECTIONS,
            kind: ConfigType::Int,
            default: Some(CONNECTIONS_DEFAULT),
            target: Target::ConnectionsMax,
        },
        DynamicDef {
            name: MAX_CONNECTIONS_PER_IP,
            kind: ConfigType::Int,
            default: Some(CONNECTIONS_DEFAULT),
            target: Target::ConnectionsPerIp,
        },
        DynamicDef {
            name: MAX_CONNECTIONS_PER_IP_OVERRIDES,
            kind: ConfigType::String,
            default: Some(""),
            target: Target::ConnectionsPerIpOverrides,
        },
    ];
    defs.extend(TOPIC_DEFAULTS.iter().filter_map(|t| topic_config(t)).filter_map(topic_default_def));
    defs.sort_by_key(|d| d.name);
    defs
}

fn topic_default_def(topic: &'static TopicConfigDef) -> Option<DynamicDef> {
    use crate::topic_config::BrokerSynonym;
    let (name, default) = match topic.broker_synonym {
        BrokerSynonym::Default(name) => (name, Some(topic.default)),
        BrokerSynonym::Unset(name) => (name, None),
        BrokerSynonym::None => return None,
    };
    Some(DynamicDef { name, kind: topic.kind, default, target: Target::TopicDefault(topic.name) })
}

/// The definition of a dynamic broker config Kafgres applies, if `name` is one.
pub fn dynamic_def(name: &str) -> Option<DynamicDef> {
    dynamic_defs().into_iter().find(|d| d.name == name)
}

/// The broker config a topic config defaults from, when that one is dynamic here.
pub fn broker_name_of_topic_config(topic: &str) -> Option<&'static str> {
    dynamic_defs().into_iter().find(|d| matches!(d.target, Target::TopicDefault(t) if t == topic)).map(|d| d.name)
}

/// Checks one value as Kafka's `ConfigDef` parses it; the error is Kafka's
/// message ("Invalid value abc for configuration max.connections: Not a
/// number of type INT").
pub fn validate_value(def: &DynamicDef, value: &str) -> Result<(), String> {
    match def.target {
        // The topic config's type, range and allowed values, named as the broker config.
        Target::TopicDefault(topic) => validate_topic_config_value(topic, value).map_err(|m| {
            m.replacen(&format!("for configuration {topic}:"), &format!("for configuration {}:", def.name), 1)
        }),
        Target::ConnectionsMax | Target::ConnectionsPerIp => {
            let invalid = |why: &str| Err(format!("Invalid value {value} for configuration {}: {why}", def.name));
            match value.trim().parse::<i32>() {
                Err(_) => invalid("Not a number of type INT"),
                Ok(n) if n < 0 => invalid("Value must be at least 0"),
                Ok(_) => Ok(()),
            }
        }
        Target::ConnectionsPerIpOverrides => parse_overrides(value).map(|_| ()),
    }
}

/// `max.connections.per.ip.overrides`: comma-separated `address:count`
/// (Kafka's CSV map, split at the last colon so IPv6 addresses work).
/// Kafka also takes host names, resolved when the value is applied; Kafgres
/// takes IP addresses only, as it does for ip quota entities (no DNS lookups
/// on the accept path, no answer that changes with the resolver).
pub fn parse_overrides(value: &str) -> Result<Vec<(std::net::IpAddr, usize)>, String> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.rsplit_once(':').and_then(|(host, count)| {
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            Some((host, count.trim().parse::<i32>().ok()?))
        });
        let Some((host, count)) = parsed else {
            return Err(format!(
                "Error parsing configuration property '{MAX_CONNECTIONS_PER_IP_OVERRIDES}': \
                 entry {entry} is not address:count"
            ));
        };
        let Ok(address) = host.parse::<std::net::IpAddr>() else {
            return Err(format!("{MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : {host}"));
        };
        out.push((address, count.max(0) as usize));
    }
    Ok(out)
}

/// The rules that involve several configs, checked on the whole set a
/// resource would have (Kafka builds a `KafkaConfig` from the static, the
/// default and the per-broker layers and checks it): `max.connections.per.ip`
/// may be 0 only with overrides (Kafka's `require`, hence its prefix).
pub fn validate_together(value_of: impl Fn(&str) -> Option<String>) -> Result<(), String> {
    let per_ip_zero = value_of(MAX_CONNECTIONS_PER_IP).is_some_and(|v| v.trim() == "0");
    let overrides = value_of(MAX_CONNECTIONS_PER_IP_OVERRIDES).unwrap_or_default();
    if per_ip_zero && overrides.trim().is_empty() {
        return Err(format!(
            "requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero only if \
             {MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set."
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_is_sorted_and_named_as_kafka_names_the_broker_configs() {
        let names: Vec<&str> = dynamic_defs().iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for expected in ["log.retention.ms", "log.segment.bytes", "message.max.bytes", "log.cleanup.policy"] {
            assert!(names.contains(&expected), "{expected} in {names:?}");
        }
        assert_eq!(broker_name_of_topic_config("retention.ms"), Some("log.retention.ms"));
        assert_eq!(dynamic_def("log.retention.ms").and_then(|d| d.default), None);
        assert_eq!(dynamic_def("log.cleanup.policy").map(|d| d.kind), Some(ConfigType::List));
    }

    #[test]
    fn values_get_kafkas_messages() {
        let def = |n| dynamic_def(n).expect("dynamic");
        assert_eq!(
            validate_value(&def("max.connections"), "many"),
            Err("Invalid value many for configuration max.connections: Not a number of type INT".into())
        );
        assert_eq!(
            validate_value(&def("max.connections.per.ip"), "-1"),
            Err("Invalid value -1 for configuration max.connections.per.ip: Value must be at least 0".into())
        );
        assert_eq!(
            validate_value(&def("log.retention.ms"), "soon"),
            Err("Invalid value soon for configuration log.retention.ms: Not a number of type LONG".into())
        );
        assert!(validate_value(&def("log.cleanup.policy"), "compact,delete").is_ok());
        assert_eq!(
            parse_overrides("127.0.0.1:2, [::1]:3").expect("valid"),
            vec![("127.0.0.1".parse().expect("ip"), 2), ("::1".parse().expect("ip"), 3)]
        );
        assert!(parse_overrides("localhost:2").is_err_and(|m| m.contains("invalid addresses : localhost")));
        assert!(validate_together(|n| (n == MAX_CONNECTIONS_PER_IP).then(|| "0".to_owned())).is_err());
    }
}
