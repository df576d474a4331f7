//! DescribeConfigs for topics (every topic config with its value and source)
//! and for this broker (the settings that correspond to Kafka broker configs).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::str_bytes;
use crate::errors;
use crate::server::BrokerContext;
use crate::topic_config::{source, ConfigType, TOPIC_CONFIGS};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
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

pub fn handle(ctx: &BrokerContext, version: i16, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let entries = match resource.resource_type {
            RESOURCE_TOPIC => topic_entries(ctx, &resource.resource_name),
            RESOURCE_BROKER => broker_entries(ctx, &resource.resource_name),
            other => Err((errors::INVALID_REQUEST, format!("resource type {other} has no configs here"))),
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
                result.error_message = Some(str_bytes(&message));
            }
        }
        response.results.push(result);
    }
    response
}

fn topic_entries(ctx: &BrokerContext, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    let topic =
        ctx.topic(name).ok_or((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("Topic '{name}' does not exist.")))?;
    Ok(TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let (value, source) = d.effective(&topic.configs);
            let mut synonyms = vec![(d.broker_synonym.to_owned(), d.default.to_owned(), source::DEFAULT_CONFIG)];
            if source == source::DYNAMIC_TOPIC_CONFIG {
                synonyms.insert(0, (d.name.to_owned(), value.to_owned(), source));
            }
            Entry { name: d.name.into(), value: value.into(), source, kind: d.kind, read_only: false, synonyms }
        })
        .collect())
}

/// The broker's settings under their Kafka names (all set by GUCs, so static).
fn broker_entries(ctx: &BrokerContext, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    if !name.is_empty() && name != ctx.config.node_id.to_string() {
        return Err((errors::INVALID_REQUEST, format!("this is broker {}, not {name}", ctx.config.node_id)));
    }
    let c = &ctx.config;
    let listener = format!("PLAINTEXT://{}:{}", c.advertised_host, ctx.advertised_port);
    let values: Vec<(&str, String, ConfigType)> = vec![
        ("advertised.listeners", listener, ConfigType::List),
        ("auto.create.topics.enable", c.auto_create_topics.to_string(), ConfigType::Boolean),
        ("log.dirs", c.log_dir.display().to_string(), ConfigType::List),
        ("log.segment.bytes", c.segment_bytes_max.to_string(), ConfigType::Int),
        ("max.connections", c.connections_max.to_string(), ConfigType::Int),
        ("message.max.bytes", c.message_bytes_max.to_string(), ConfigType::Int),
        ("node.id", c.node_id.to_string(), ConfigType::Int),
        ("num.partitions", c.default_partitions.to_string(), ConfigType::Int),
        ("socket.request.max.bytes", c.frame_bytes_max.to_string(), ConfigType::Int),
    ];
    Ok(values
        .into_iter()
        .map(|(name, value, kind)| Entry {
            name: name.into(),
            synonyms: vec![(name.into(), value.clone(), source::STATIC_BROKER_CONFIG)],
            value,
            source: source::STATIC_BROKER_CONFIG,
            kind,
            read_only: true,
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
