//! DescribeConfigs for topics (every topic config with its value and source)
//! and for this broker (the settings that correspond to Kafka broker configs).

use kafgres_wire::error_code;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::authorized_operations::{CLUSTER_REFUSED, TOPIC_REFUSED};
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::topic_config::{broker_config_default, broker_topic_default, source, ConfigType, TOPIC_CONFIGS};
use crate::topics::Topics;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;
/// Config types and documentation are in the response from v3.
const CONFIG_TYPE_VERSION_MIN: i16 = 3;

struct Entry {
    name: String,
    value: String,
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
            Entry { name: d.name.into(), value, source, kind: d.kind, read_only: false, synonyms }
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
                value: config.value_of(name).unwrap_or_default(),
                source: if set { source::GROUP_CONFIG } else { source::DEFAULT_CONFIG },
                kind,
                read_only: false,
                synonyms: Vec::new(),
            }
        })
        .collect()
}

/// The broker's settings under their Kafka names, all read-only (they are
/// GUCs). As in Kafka, a setting at Kafka's default is a DEFAULT_CONFIG and
/// one that differs a STATIC_BROKER_CONFIG (listed before the default among
/// its synonyms); the broker cannot tell a GUC set to the default from one
/// left alone, so both read as the default.
fn broker_entries(c: &BrokerConfig, name: &str) -> Result<Vec<Entry>, (i16, Option<String>)> {
    if !name.is_empty() && name != c.node_id.to_string() {
        return Err((error_code::INVALID_REQUEST, Some(format!("this is broker {}, not {name}", c.node_id))));
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
        (
            "log.segment.bytes",
            c.segment_bytes_max.to_string(),
            ConfigType::Int,
            broker_config_default("log.segment.bytes"),
        ),
        ("max.connections", c.live.connections_max().to_string(), ConfigType::Int, Some("2147483647")),
        (
            "message.max.bytes",
            c.message_bytes_max.to_string(),
            ConfigType::Int,
            broker_config_default("message.max.bytes"),
        ),
        ("node.id", c.node_id.to_string(), ConfigType::Int, None),
        ("num.partitions", c.live.default_partitions().to_string(), ConfigType::Int, Some("1")),
        ("socket.request.max.bytes", c.live.frame_bytes_max().to_string(), ConfigType::Int, Some("104857600")),
    ];
    Ok(values
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
            Entry { name: name.into(), value, source, kind, read_only: true, synonyms }
        })
        .collect())
}

fn encode(e: Entry, version: i16, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let mut r = DescribeConfigsResourceResult::default();
    r.name = str_bytes(&e.name);
    r.value = Some(str_bytes(&e.value));
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
