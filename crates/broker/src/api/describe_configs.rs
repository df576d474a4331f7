//! DescribeConfigs for topics (every topic config with its value and source)
//! and for this broker (the settings that correspond to Kafka broker configs,
//! with the dynamic ones of `crate::dynamic_config` over them), or for the
//! cluster-wide default of the dynamic broker configs.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::authorized_operations::{CLUSTER_REFUSED, TOPIC_REFUSED};
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::dynamic_config::defs::{dynamic_def, dynamic_defs, DynamicDef, Target};
use crate::topic_config::{broker_topic_default, source, ConfigType, TOPIC_CONFIGS};
use crate::topics::Topics;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;
/// Config types and documentation are in the response from v3.
const CONFIG_TYPE_VERSION_MIN: i16 = 3;

struct Entry {
    name: String,
    /// Null for a config without a value (`log.retention.ms` when unset:
    /// Kafka's default comes from `log.retention.hours`).
    value: Option<String>,
    source: i8,
    kind: ConfigType,
    read_only: bool,
    synonyms: Vec<(String, String, i8)>,
}

pub struct DescribeConfigs;

impl Handler for DescribeConfigs {
    const KEY: ApiKey = ApiKey::DescribeConfigs;
    /// v1-v4; config types and documentation are in the response from v3.
    const VERSIONS: Versions = Versions::new(1, 4);
    type Request = DescribeConfigsRequest;
    type Response = DescribeConfigsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics, &'a crate::share::ShareService);

    async fn handle(
        (config, topics, shares): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DescribeConfigsRequest,
    ) -> Answer<DescribeConfigsResponse> {
        let version = cx.api_version;
        let mut response = DescribeConfigsResponse::default();
        for resource in request.resources {
            let mut result = DescribeConfigsResult::default();
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name.clone();
            let entries = match resource.resource_type {
                RESOURCE_TOPIC if !cx.may_on_topic(Operation::DescribeConfigs, &resource.resource_name) => {
                    Err((error_code::TOPIC_AUTHORIZATION_FAILED, Some(TOPIC_REFUSED.to_owned())))
                }
                RESOURCE_BROKER if !cx.may_on_cluster(Operation::DescribeConfigs) => {
                    Err((error_code::CLUSTER_AUTHORIZATION_FAILED, Some(CLUSTER_REFUSED.to_owned())))
                }
                RESOURCE_GROUP if !cx.may_on_group(Operation::DescribeConfigs, &resource.resource_name) => {
                    Err((error_code::GROUP_AUTHORIZATION_FAILED, None))
                }
                RESOURCE_TOPIC => topic_entries(config, topics, &resource.resource_name),
                RESOURCE_GROUP => Ok(group_entries(shares, &resource.resource_name)),
                RESOURCE_BROKER => broker_entries(config, &resource.resource_name),
                other => Err((error_code::INVALID_REQUEST, Some(format!("resource type {other} has no configs here")))),
            };
            match entries {
                Ok(entries) => {
                    result.error_message = None;
                    // Null asks for every config; so does an empty list (what
                    // kafka-protocol's default encodes), rather than for none.
                    let keys = resource.configuration_keys.as_ref().filter(|k| !k.is_empty());
                    result.configs = entries
                        .into_iter()
                        .filter(|e| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == e.name)))
                        .map(|e| encode(e, version, request.include_synonyms))
                        .collect();
                }
                Err((code, message)) => {
                    result.error_code = code;
                    result.error_message = message.as_deref().map(str_bytes);
                }
            }
            response.results.push(result);
        }
        response.into()
    }
}

fn topic_entries(config: &BrokerConfig, topics: &Topics, name: &str) -> Result<Vec<Entry>, (i16, Option<String>)> {
    // Kafka answers an unknown topic without a message.
    let topic = topics.get(name).ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, None))?;
    let broker_value = |b: &str| broker_topic_default(config, b);
    Ok(TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let (value, source) = d.effective(&topic.configs, broker_value);
            let synonyms = d.synonyms(&topic.configs, broker_value);
            Entry { name: d.name.into(), value: Some(value), source, kind: d.kind, read_only: false, synonyms }
        })
        .collect())
}

/// A group's share configs (Kafka lists its consumer.* group configs too):
/// GROUP_CONFIG when set on the group, else the default.
fn group_entries(shares: &crate::share::ShareService, group_id: &str) -> Vec<Entry> {
    let overrides = shares.group_overrides(group_id);
    let config = shares.group_config(group_id);
    crate::share::config::GROUP_CONFIG_NAMES
        .iter()
        .map(|name| {
            let set = overrides.contains_key(*name);
            let kind = match *name {
                "share.auto.offset.reset" | "share.isolation.level" => ConfigType::String,
                _ => ConfigType::Int,
            };
            Entry {
                name: (*name).to_owned(),
                value: Some(config.value_of(name).unwrap_or_default()),
                source: if set { source::GROUP_CONFIG } else { source::DEFAULT_CONFIG },
                kind,
                read_only: false,
                synonyms: Vec::new(),
            }
        })
        .collect()
}

/// The broker's settings under their Kafka names. Those Kafka can change
/// dynamically and Kafgres applies (`crate::dynamic_config::defs`) are
/// writable and sourced as Kafka sources them: this broker's dynamic value,
/// else the cluster default's, else the static setting (a GUC) when it
/// differs from Kafka's default, else the default; their synonyms list those
/// in that order. The others are read-only GUCs: at Kafka's default a
/// DEFAULT_CONFIG, else a STATIC_BROKER_CONFIG (the broker cannot tell a GUC
/// set to the default from one left alone). The resource named "" is the
/// cluster default: only the configs set there, as Kafka answers it.
fn broker_entries(c: &BrokerConfig, name: &str) -> Result<Vec<Entry>, (i16, Option<String>)> {
    let layers = c.live.dynamic();
    if name.is_empty() {
        return Ok(layers
            .default
            .iter()
            .map(|(name, value)| Entry {
                name: name.clone(),
                value: Some(value.clone()),
                source: source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                kind: dynamic_def(name).map_or(ConfigType::String, |d| d.kind),
                read_only: false,
                synonyms: vec![(name.clone(), value.clone(), source::DYNAMIC_DEFAULT_BROKER_CONFIG)],
            })
            .collect());
    }
    if name != c.node_id.to_string() {
        return Err((
            error_code::INVALID_REQUEST,
            Some(format!("Unexpected broker id, expected {} or empty string, but received {name}", c.node_id)),
        ));
    }
    let listener = c.advertised_listeners();
    // (name, value, type, Kafka 4.x's default)
    let values: Vec<(&str, String, ConfigType, Option<&str>)> = vec![
        ("advertised.listeners", listener, ConfigType::List, None),
        ("auto.create.topics.enable", c.live.auto_create_topics().to_string(), ConfigType::Boolean, Some("true")),
        ("connections.max.idle.ms", c.live.connection_idle_ms_max().to_string(), ConfigType::Long, Some("600000")),
        (
            "group.consumer.heartbeat.interval.ms",
            c.live.group_consumer_heartbeat_interval_ms().to_string(),
            ConfigType::Int,
            Some("5000"),
        ),
        (
            "group.consumer.session.timeout.ms",
            c.live.group_consumer_session_timeout_ms().to_string(),
            ConfigType::Int,
            Some("45000"),
        ),
        (
            "group.initial.rebalance.delay.ms",
            c.live.group_initial_rebalance_delay_ms().to_string(),
            ConfigType::Int,
            Some("3000"),
        ),
        ("log.dirs", c.log_dir.display().to_string(), ConfigType::List, None),
        ("node.id", c.node_id.to_string(), ConfigType::Int, None),
        ("num.partitions", c.live.default_partitions().to_string(), ConfigType::Int, Some("1")),
        ("socket.request.max.bytes", c.live.frame_bytes_max().to_string(), ConfigType::Int, Some("104857600")),
    ];
    let mut entries: Vec<Entry> = values
        .into_iter()
        .map(|(name, value, kind, default)| {
            let (source, synonyms) = match default {
                Some(d) if d == value => {
                    (source::DEFAULT_CONFIG, vec![(name.into(), value.clone(), source::DEFAULT_CONFIG)])
                }
                _ => {
                    let mut synonyms = vec![(name.into(), value.clone(), source::STATIC_BROKER_CONFIG)];
                    synonyms.extend(default.map(|d| (name.into(), d.into(), source::DEFAULT_CONFIG)));
                    (source::STATIC_BROKER_CONFIG, synonyms)
                }
            };
            Entry { name: name.into(), value: Some(value), source, kind, read_only: true, synonyms }
        })
        .collect();
    for def in dynamic_defs() {
        let mut synonyms: Vec<(String, String, i8)> =
            layers.layers_of(def.name).into_iter().map(|(v, s)| (def.name.to_owned(), v, s)).collect();
        if let Some(v) = static_value(c, &def).filter(|v| def.default != Some(v.as_str())) {
            synonyms.push((def.name.to_owned(), v, source::STATIC_BROKER_CONFIG));
        }
        if let Some(d) = def.default {
            synonyms.push((def.name.to_owned(), d.to_owned(), source::DEFAULT_CONFIG));
        }
        let (value, source) =
            synonyms.first().map_or((None, source::DEFAULT_CONFIG), |(_, v, s)| (Some(v.clone()), *s));
        entries.push(Entry { name: def.name.to_owned(), value, source, kind: def.kind, read_only: false, synonyms });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// The static setting (a GUC, as last loaded) behind a dynamic broker config,
/// when there is one.
fn static_value(c: &BrokerConfig, def: &DynamicDef) -> Option<String> {
    let statics = c.live.statics().unwrap_or_else(|| crate::settings::Reloadable::from(c));
    match def.target {
        Target::ConnectionsMax => Some(statics.connections_max.to_string()),
        // The GUC's 0 is "no limit", Kafka's default.
        Target::ConnectionsPerIp => Some(statics.connections_per_address_max).filter(|n| *n > 0).map(|n| n.to_string()),
        Target::ConnectionsPerIpOverrides => None,
        Target::TopicDefault(_) => match def.name {
            "log.segment.bytes" => Some(c.segment_bytes_max.to_string()),
            "message.max.bytes" => Some(c.message_bytes_max.to_string()),
            _ => None,
        },
    }
}

fn encode(e: Entry, version: i16, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let mut r = DescribeConfigsResourceResult::default();
    r.name = str_bytes(&e.name);
    r.value = e.value.as_deref().map(str_bytes);
    r.read_only = e.read_only;
    r.config_source = e.source;
    if include_synonyms {
        r.synonyms = e
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let mut s = DescribeConfigsSynonym::default();
                s.name = str_bytes(&name);
                s.value = Some(str_bytes(&value));
                s.source = source;
                s
            })
            .collect();
    }
    if version >= CONFIG_TYPE_VERSION_MIN {
        r.config_type = e.kind as i8;
    }
    r
}
