//! Topic-level configurations Kafka 4.x accepts, with their defaults.
//!
//! CreateTopics refuses any other name with INVALID_CONFIG, as Kafka does, and
//! stores values as given; AlterConfigs and IncrementalAlterConfigs also check
//! the values they set ([`validate_topic_config_value`]). Which configs the
//! broker acts on is listed in
//! docs/configuration.md (segment.bytes, and the produce-path settings read
//! into [`RecordPolicy`]; the rest are kept for DescribeConfigs and later
//! features).

/// The type of a config value, as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// A topic config: its name, Kafka 4.x's default, its type and the broker
/// config it defaults from.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: ConfigType,
    pub broker_synonym: BrokerSynonym,
}

/// The broker config a topic config defaults from, as Kafka's DescribeConfigs
/// lists it among the synonyms (`ConfigHelper.configSynonyms`: the broker
/// names that have a value, from the first name of the topic config's
/// synonym list on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerSynonym {
    /// A broker config with a default (listed as `name=default/DEFAULT_CONFIG`,
    /// after its static value when the broker sets one that differs).
    Default(&'static str),
    /// A broker config without a default of its own (`log.retention.ms`
    /// defaults from `log.retention.hours`, `log.roll.ms` from `log.roll.hours`…):
    /// listed only when it is set, and Kafgres sets none of these.
    Unset(&'static str),
    /// No broker config (the replication throttles, the tiered-storage
    /// switches): only the topic's own override is listed.
    None,
}

impl BrokerSynonym {
    pub fn name(&self) -> Option<&'static str> {
        match *self {
            BrokerSynonym::Default(n) | BrokerSynonym::Unset(n) => Some(n),
            BrokerSynonym::None => None,
        }
    }
}

const fn def(name: &'static str, default: &'static str, kind: ConfigType, broker: &'static str) -> TopicConfigDef {
    TopicConfigDef { name, default, kind, broker_synonym: BrokerSynonym::Default(broker) }
}

/// A topic config whose broker synonym has no default (see [`BrokerSynonym::Unset`]).
const fn def_unset(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    broker: &'static str,
) -> TopicConfigDef {
    TopicConfigDef { name, default, kind, broker_synonym: BrokerSynonym::Unset(broker) }
}

/// A topic config without a broker synonym.
const fn def_topic_only(name: &'static str, default: &'static str, kind: ConfigType) -> TopicConfigDef {
    TopicConfigDef { name, default, kind, broker_synonym: BrokerSynonym::None }
}

/// Every topic config of Kafka 4.x (`TopicConfig`, `LogConfig`), sorted by name.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", "delete", ConfigType::List, "log.cleanup.policy"),
    def("compression.gzip.level", "-1", ConfigType::Int, "compression.gzip.level"),
    def("compression.lz4.level", "9", ConfigType::Int, "compression.lz4.level"),
    def("compression.type", "producer", ConfigType::String, "compression.type"),
    def("compression.zstd.level", "3", ConfigType::Int, "compression.zstd.level"),
    def("delete.retention.ms", "86400000", ConfigType::Long, "log.cleaner.delete.retention.ms"),
    // Kafka 4.4: a topic that may take the records groups give up on (dead-letter queues).
    def_topic_only("errors.deadletterqueue.group.enable", "false", ConfigType::Boolean),
    def("file.delete.delay.ms", "60000", ConfigType::Long, "log.segment.delete.delay.ms"),
    def("flush.messages", "9223372036854775807", ConfigType::Long, "log.flush.interval.messages"),
    def_unset("flush.ms", "9223372036854775807", ConfigType::Long, "log.flush.interval.ms"),
    def_topic_only("follower.replication.throttled.replicas", "", ConfigType::List),
    def("index.interval.bytes", "4096", ConfigType::Int, "log.index.interval.bytes"),
    def_topic_only("leader.replication.throttled.replicas", "", ConfigType::List),
    def("local.retention.bytes", "-2", ConfigType::Long, "log.local.retention.bytes"),
    def("local.retention.ms", "-2", ConfigType::Long, "log.local.retention.ms"),
    def("max.compaction.lag.ms", "9223372036854775807", ConfigType::Long, "log.cleaner.max.compaction.lag.ms"),
    // Kafka 4.4: a bound on a batch's decompressed size.
    def("max.decompressed.message.bytes", "2147483639", ConfigType::Int, "max.decompressed.message.bytes"),
    def("max.message.bytes", "1048588", ConfigType::Int, "message.max.bytes"),
    def("message.timestamp.after.max.ms", "3600000", ConfigType::Long, "log.message.timestamp.after.max.ms"),
    def(
        "message.timestamp.before.max.ms",
        "9223372036854775807",
        ConfigType::Long,
        "log.message.timestamp.before.max.ms",
    ),
    def("message.timestamp.type", "CreateTime", ConfigType::String, "log.message.timestamp.type"),
    def("min.cleanable.dirty.ratio", "0.5", ConfigType::Double, "log.cleaner.min.cleanable.ratio"),
    def("min.compaction.lag.ms", "0", ConfigType::Long, "log.cleaner.min.compaction.lag.ms"),
    def("min.insync.replicas", "1", ConfigType::Int, "min.insync.replicas"),
    def("preallocate", "false", ConfigType::Boolean, "log.preallocate"),
    // Kafka 4.4: tiered storage's upload lag (Kafgres has no tiered storage).
    def("remote.copy.lag.bytes", "-1", ConfigType::Long, "log.remote.copy.lag.bytes"),
    def("remote.copy.lag.ms", "0", ConfigType::Long, "log.remote.copy.lag.ms"),
    def_topic_only("remote.log.copy.disable", "false", ConfigType::Boolean),
    def_topic_only("remote.log.delete.on.disable", "false", ConfigType::Boolean),
    def_topic_only("remote.storage.enable", "false", ConfigType::Boolean),
    def("retention.bytes", "-1", ConfigType::Long, "log.retention.bytes"),
    def_unset("retention.ms", "604800000", ConfigType::Long, "log.retention.ms"),
    def("segment.bytes", "1073741824", ConfigType::Int, "log.segment.bytes"),
    def("segment.index.bytes", "10485760", ConfigType::Int, "log.index.size.max.bytes"),
    def_unset("segment.jitter.ms", "0", ConfigType::Long, "log.roll.jitter.ms"),
    def_unset("segment.ms", "604800000", ConfigType::Long, "log.roll.ms"),
    def("unclean.leader.election.enable", "false", ConfigType::Boolean, "unclean.leader.election.enable"),
];

/// Kafka's default `message.max.bytes`, which `max.message.bytes` defaults
/// from: 1 MiB plus the offset and length a batch is stored with (the table's
/// entry says the same, checked by a test).
pub const MESSAGE_BYTES_MAX_DEFAULT: usize = (1 << 20) + kafgres_record::BATCH_LOG_OVERHEAD_BYTES;
/// Kafka's default `message.timestamp.after.max.ms` (the table's, as a number).
pub const MESSAGE_TIMESTAMP_AFTER_MS_MAX_DEFAULT: i64 = 3_600_000;

/// Kafka's default of a broker config that a topic config defaults from: the
/// table's default of that topic config (DescribeConfigs reports the broker's
/// settings under the same numbers).
pub fn broker_config_default(broker_name: &str) -> Option<&'static str> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| matches!(d.broker_synonym, BrokerSynonym::Default(n) if n == broker_name))
        .map(|d| d.default)
}

/// Kafka's `ConfigSource` values, as DescribeConfigs and CreateTopics report them.
pub mod source {
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    /// A dynamic broker config set on this broker (`crate::dynamic_config`).
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    /// A dynamic broker config set as the cluster-wide default.
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
    /// A group config set on the group (Kafka's GROUP_CONFIG).
    pub const GROUP_CONFIG: i8 = 8;
}

impl TopicConfigDef {
    /// The value a topic with `overrides` has for this config, and its source:
    /// the override, else the first of the broker's values of the synonym
    /// (`broker_layers`: dynamic for this broker, dynamic default, static
    /// when it differs from Kafka's default, as [`broker_topic_default`]
    /// gives them), else the default.
    pub fn effective(
        &self,
        overrides: &std::collections::BTreeMap<String, String>,
        broker_layers: impl Fn(&str) -> Vec<(String, i8)>,
    ) -> (String, i8) {
        if let Some(v) = overrides.get(self.name) {
            return (v.clone(), source::DYNAMIC_TOPIC_CONFIG);
        }
        match self.broker_synonym.name().and_then(|b| broker_layers(b).into_iter().next()) {
            Some(layer) => layer,
            None => (self.default.to_owned(), source::DEFAULT_CONFIG),
        }
    }

    /// The synonyms DescribeConfigs lists for this config, as Kafka does:
    /// the topic's override, then the broker's values of the synonym in
    /// precedence order, then the synonym's default; `(name, value, source)`.
    pub fn synonyms(
        &self,
        overrides: &std::collections::BTreeMap<String, String>,
        broker_layers: impl Fn(&str) -> Vec<(String, i8)>,
    ) -> Vec<(String, String, i8)> {
        let mut synonyms = Vec::new();
        if let Some(v) = overrides.get(self.name) {
            synonyms.push((self.name.to_owned(), v.clone(), source::DYNAMIC_TOPIC_CONFIG));
        }
        if let Some(broker) = self.broker_synonym.name() {
            synonyms.extend(broker_layers(broker).into_iter().map(|(v, s)| (broker.to_owned(), v, s)));
            if let BrokerSynonym::Default(_) = self.broker_synonym {
                synonyms.push((broker.to_owned(), self.default.to_owned(), source::DEFAULT_CONFIG));
            }
        }
        synonyms
    }
}

/// The broker's values of a broker config that topic configs default from,
/// in precedence order with their sources: the dynamic ones
/// (`crate::dynamic_config`), then the static setting when it differs from
/// Kafka's default (`log.segment.bytes` is `kafgres.segment_bytes`;
/// `message.max.bytes` is fixed at Kafka's default; a value equal to the
/// default reads as the default: the broker cannot tell whether a GUC was
/// set to it). For [`TopicConfigDef::effective`] and [`TopicConfigDef::synonyms`].
pub fn broker_topic_default(config: &crate::BrokerConfig, broker_name: &str) -> Vec<(String, i8)> {
    let mut layers = config.live.dynamic().layers_of(broker_name);
    let fixed = match broker_name {
        "log.segment.bytes" => Some(config.segment_bytes_max.to_string()),
        "message.max.bytes" => Some(config.message_bytes_max.to_string()),
        _ => None,
    };
    if let Some(v) = fixed.filter(|v| broker_config_default(broker_name) != Some(v.as_str())) {
        layers.push((v, source::STATIC_BROKER_CONFIG));
    }
    layers
}

/// How a topic's produce path treats record batches: Kafka's
/// `max.message.bytes` and `message.timestamp.*` topic configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordPolicy {
    /// The largest batch accepted (`max.message.bytes`; without an override,
    /// the broker's `message_bytes_max`, as Kafka defaults it from
    /// `message.max.bytes`).
    pub message_bytes_max: usize,
    /// `message.timestamp.type=LogAppendTime`: the broker stamps its time.
    pub log_append_time: bool,
    /// CreateTime only: how far in the past / future a record's timestamp
    /// may be, relative to the broker's clock.
    pub timestamp_before_ms_max: i64,
    pub timestamp_after_ms_max: i64,
}

impl RecordPolicy {
    /// Reads a topic's overrides; a value that does not parse (CreateTopics
    /// stores values as given) falls back to the default.
    pub fn from_configs(
        overrides: &std::collections::BTreeMap<String, String>,
        broker_message_bytes_max: usize,
    ) -> RecordPolicy {
        let long =
            |name: &str, default: i64| overrides.get(name).and_then(|v| v.trim().parse().ok()).unwrap_or(default);
        RecordPolicy {
            message_bytes_max: overrides
                .get("max.message.bytes")
                .and_then(|v| v.trim().parse::<i32>().ok())
                .map_or(broker_message_bytes_max, |v| v.max(0) as usize),
            log_append_time: overrides.get("message.timestamp.type").is_some_and(|v| v.trim() == "LogAppendTime"),
            timestamp_before_ms_max: long("message.timestamp.before.max.ms", i64::MAX),
            timestamp_after_ms_max: long("message.timestamp.after.max.ms", MESSAGE_TIMESTAMP_AFTER_MS_MAX_DEFAULT),
        }
    }

    /// The range CreateTime record timestamps must fall in at `now_ms`.
    pub fn timestamp_range(&self, now_ms: i64) -> (i64, i64) {
        (
            now_ms.saturating_sub(self.timestamp_before_ms_max.max(0)),
            now_ms.saturating_add(self.timestamp_after_ms_max.max(0)),
        )
    }
}

/// The definition of a topic config, if the name is one.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.binary_search_by(|d| d.name.cmp(name)).ok().map(|i| &TOPIC_CONFIGS[i])
}

/// Checks config names; the error is Kafka's message for an unknown name.
pub fn validate_topic_config_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    for name in names {
        if topic_config(name).is_none() {
            return Err(format!("Unknown topic config name: {name}"));
        }
    }
    Ok(())
}

/// Checks a value for a known topic config as Kafka's `ConfigDef` does
/// (AlterConfigs, IncrementalAlterConfigs): it must parse as the config's
/// type and pass the config's validator. The error is Kafka's message
/// (answered with INVALID_CONFIG). Unknown names pass: check them first with
/// [`validate_topic_config_names`].
pub fn validate_topic_config_value(name: &str, value: &str) -> Result<(), String> {
    let Some(def) = topic_config(name) else { return Ok(()) };
    let invalid = |why: &str| Err(format!("Invalid value {value} for configuration {name}: {why}"));
    let v = value.trim();
    let number = match def.kind {
        ConfigType::Int => match v.parse::<i32>() {
            Ok(n) => Some(f64::from(n)),
            Err(_) => return invalid("Not a number of type INT"),
        },
        ConfigType::Long => match v.parse::<i64>() {
            Ok(n) => Some(n as f64),
            Err(_) => return invalid("Not a number of type LONG"),
        },
        ConfigType::Double => match v.parse::<f64>() {
            Ok(n) if n.is_finite() => Some(n),
            _ => return invalid("Not a number of type DOUBLE"),
        },
        ConfigType::Boolean => {
            if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                None
            } else {
                return invalid("Expected value to be either true or false");
            }
        }
        ConfigType::String | ConfigType::List => None,
    };
    if let (Some(n), Some((min, max))) = (number, value_range(name)) {
        if n < min {
            return invalid(&format!("Value must be at least {min}"));
        }
        if n > max {
            return invalid(&format!("Value must be no more than {max}"));
        }
    }
    let allowed: &[&str] = match name {
        "message.timestamp.type" => &["CreateTime", "LogAppendTime"],
        "compression.type" => &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        "cleanup.policy" => &["compact", "delete"],
        _ => return Ok(()),
    };
    if def.kind == ConfigType::List {
        let items: Vec<&str> = v.split(',').map(str::trim).filter(|i| !i.is_empty()).collect();
        match items.iter().find(|i| !allowed.contains(i)) {
            Some(bad) => Err(format!(
                "Invalid value {bad} for configuration {name}: String must be one of: {}",
                allowed.join(", ")
            )),
            None => Ok(()),
        }
    } else if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
        Ok(())
    } else {
        invalid(&format!("String must be one of: {}", allowed.join(", ")))
    }
}

/// The bounds Kafka 4.x's `LogConfig` puts on numeric topic configs (as
/// floats: each bound is exact in an f64).
fn value_range(name: &str) -> Option<(f64, f64)> {
    const MAX: f64 = f64::MAX;
    Some(match name {
        "retention.ms" => (-1.0, MAX),
        "local.retention.ms" | "local.retention.bytes" => (-2.0, MAX),
        // KIP-1030 (Kafka 4.0): segments of at least 1 MiB.
        "segment.bytes" => (1_048_576.0, MAX),
        "segment.ms" | "flush.messages" => (1.0, MAX),
        "segment.index.bytes" => (4.0, MAX),
        "max.message.bytes"
        | "index.interval.bytes"
        | "segment.jitter.ms"
        | "flush.ms"
        | "delete.retention.ms"
        | "file.delete.delay.ms"
        | "min.compaction.lag.ms"
        | "message.timestamp.before.max.ms"
        | "message.timestamp.after.max.ms" => (0.0, MAX),
        "min.insync.replicas" | "max.compaction.lag.ms" => (1.0, MAX),
        "min.cleanable.dirty.ratio" => (0.0, 1.0),
        "max.decompressed.message.bytes" => (1.0, 2_147_483_639.0),
        "remote.copy.lag.bytes" | "remote.copy.lag.ms" => (-1.0, MAX),
        _ => return None,
    })
}

/// The items of a list config's value (APPEND and SUBTRACT work on these).
pub fn list_items(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_against_the_config_type_and_bounds() {
        assert!(validate_topic_config_value("retention.ms", "86400000").is_ok());
        assert!(validate_topic_config_value("retention.ms", "-1").is_ok());
        assert_eq!(
            validate_topic_config_value("retention.ms", "abc"),
            Err("Invalid value abc for configuration retention.ms: Not a number of type LONG".into())
        );
        assert!(validate_topic_config_value("max.message.bytes", "99999999999").is_err(), "not an INT");
        assert!(validate_topic_config_value("segment.bytes", "1000").is_err(), "below 1 MiB");
        assert!(validate_topic_config_value("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate_topic_config_value("preallocate", "TRUE").is_ok());
        assert!(validate_topic_config_value("preallocate", "yes").is_err());
        assert!(validate_topic_config_value("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate_topic_config_value("message.timestamp.type", "Later").is_err());
        assert!(validate_topic_config_value("cleanup.policy", "compact, delete").is_ok());
        assert!(validate_topic_config_value("cleanup.policy", "compact,shred").is_err());
        assert_eq!(list_items(" a, b,,c "), vec!["a", "b", "c"]);
    }

    #[test]
    fn the_table_is_sorted_so_lookups_find_every_entry() {
        assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for d in TOPIC_CONFIGS {
            assert_eq!(topic_config(d.name).map(|f| f.name), Some(d.name));
        }
    }

    #[test]
    fn defaults_the_code_uses_as_numbers_are_the_table_s() {
        let default = |name| topic_config(name).expect("a topic config").default;
        assert_eq!(default("max.message.bytes"), MESSAGE_BYTES_MAX_DEFAULT.to_string());
        assert_eq!(default("max.message.bytes"), "1048588", "Kafka's number");
        assert_eq!(default("message.timestamp.after.max.ms"), MESSAGE_TIMESTAMP_AFTER_MS_MAX_DEFAULT.to_string());
        assert_eq!(default("message.timestamp.before.max.ms"), i64::MAX.to_string());
        assert_eq!(default("segment.bytes"), kafgres_log::LogConfig::default().segment_bytes_max.to_string());
        assert_eq!(broker_config_default("message.max.bytes"), Some(default("max.message.bytes")));
        assert_eq!(broker_config_default("log.segment.bytes"), Some(default("segment.bytes")));
        assert_eq!(broker_config_default("log.retention.ms"), None, "a synonym without a default of its own");
    }

    #[test]
    fn record_policy_reads_overrides_and_falls_back_to_defaults() {
        let mut overrides = std::collections::BTreeMap::new();
        let p = RecordPolicy::from_configs(&overrides, 1000);
        assert_eq!(
            p,
            RecordPolicy {
                message_bytes_max: 1000,
                log_append_time: false,
                timestamp_before_ms_max: i64::MAX,
                timestamp_after_ms_max: 3_600_000,
            }
        );
        assert_eq!(p.timestamp_range(10), (10 - i64::MAX, 3_600_010));
        overrides.insert("max.message.bytes".into(), "500".into());
        overrides.insert("message.timestamp.type".into(), "LogAppendTime".into());
        overrides.insert("message.timestamp.before.max.ms".into(), "5".into());
        overrides.insert("message.timestamp.after.max.ms".into(), "junk".into());
        let p = RecordPolicy::from_configs(&overrides, 1000);
        assert_eq!((p.message_bytes_max, p.log_append_time, p.timestamp_range(10)), (500, true, (5, 3_600_010)));
    }

    #[test]
    fn synonyms_and_sources_follow_kafka() {
        let def = |name| topic_config(name).expect("a topic config");
        let mut overrides = std::collections::BTreeMap::new();
        let none = |_: &str| Vec::new();
        let set = |_: &str| vec![("2000000".to_owned(), source::STATIC_BROKER_CONFIG)];
        let dynamic = |_: &str| {
            vec![
                ("3000000".to_owned(), source::DYNAMIC_BROKER_CONFIG),
                ("4000000".to_owned(), source::DYNAMIC_DEFAULT_BROKER_CONFIG),
            ]
        };
        let names =
            |s: Vec<(String, String, i8)>| s.into_iter().map(|(n, v, s)| format!("{n}={v}/{s}")).collect::<Vec<_>>();
        // A broker config without a default of its own is not listed; one at its default is.
        assert!(def("retention.ms").synonyms(&overrides, none).is_empty());
        assert!(def("remote.storage.enable").synonyms(&overrides, none).is_empty());
        assert_eq!(names(def("segment.bytes").synonyms(&overrides, none)), ["log.segment.bytes=1073741824/5"]);
        assert_eq!(def("segment.bytes").effective(&overrides, none), ("1073741824".into(), source::DEFAULT_CONFIG));
        // A broker setting that differs from Kafka's default is static, listed before the default.
        assert_eq!(def("segment.bytes").effective(&overrides, set), ("2000000".into(), source::STATIC_BROKER_CONFIG));
        assert_eq!(
            names(def("segment.bytes").synonyms(&overrides, set)),
            ["log.segment.bytes=2000000/4", "log.segment.bytes=1073741824/5"]
        );
        // Dynamic values: this broker's, then the cluster default, before the default.
        assert_eq!(
            def("segment.bytes").effective(&overrides, dynamic),
            ("3000000".into(), source::DYNAMIC_BROKER_CONFIG)
        );
        assert_eq!(
            names(def("segment.bytes").synonyms(&overrides, dynamic)),
            ["log.segment.bytes=3000000/2", "log.segment.bytes=4000000/3", "log.segment.bytes=1073741824/5"]
        );
        // An override comes first.
        overrides.insert("retention.ms".to_owned(), "1000".to_owned());
        assert_eq!(names(def("retention.ms").synonyms(&overrides, none)), ["retention.ms=1000/1"]);
    }

    #[test]
    fn known_names_pass_and_unknown_fail() {
        assert!(validate_topic_config_names(["retention.ms", "segment.bytes"]).is_ok());
        assert_eq!(
            validate_topic_config_names(["retention.ms", "no.such.config"]),
            Err("Unknown topic config name: no.such.config".into())
        );
    }
}
