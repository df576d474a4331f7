//! The settings of share groups: the broker's defaults and limits, and the
//! group configs Kafka lets each share group override (KIP-932).

/// `share.auto.offset.reset`: where a share-partition starts when the group
/// first reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// Kafka's default: only records produced after the first read.
    #[default]
    Latest,
    Earliest,
}

/// `share.isolation.level`: which transactional records a share group delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Kafka 4.1's default: every record up to the high watermark.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset; records of aborted transactions are
    /// archived, never delivered.
    ReadCommitted,
}

/// Kafka's defaults (`share.record.lock.duration.ms` and the others), each
/// defined once here.
pub const RECORD_LOCK_DURATION_MS_DEFAULT: i32 = 30_000;
/// `group.share.min.record.lock.duration.ms` and `...max...`: the range a
/// group may set (Kafka's broker defaults).
pub const RECORD_LOCK_DURATION_MS_MIN: i32 = 15_000;
pub const RECORD_LOCK_DURATION_MS_MAX: i32 = 60_000;
pub const DELIVERY_COUNT_LIMIT_DEFAULT: i16 = 5;
pub const PARTITION_MAX_RECORD_LOCKS_DEFAULT: i32 = 2000;
pub const SESSION_TIMEOUT_MS_DEFAULT: i32 = 45_000;
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 5_000;
/// `group.share.max.size`: members per share group.
pub const GROUP_MAX_SIZE_DEFAULT: usize = 200;
/// `max.share.session.cache.size`-like bound on open share sessions.
pub const SESSIONS_MAX_DEFAULT: usize = 1000;

/// The broker-wide share-group settings (`group.share.*` in Kafka's broker
/// config); each group's [`ShareGroupConfig`] starts from `group_defaults`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareConfig {
    pub group_defaults: ShareGroupConfig,
    /// `share.partition.max.record.locks`: records in flight per
    /// share-partition (from the start offset to the end offset).
    pub partition_record_locks_max: i32,
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub group_members_max: usize,
    pub sessions_max: usize,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            group_defaults: ShareGroupConfig::default(),
            partition_record_locks_max: PARTITION_MAX_RECORD_LOCKS_DEFAULT,
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            group_members_max: GROUP_MAX_SIZE_DEFAULT,
            sessions_max: SESSIONS_MAX_DEFAULT,
        }
    }
}

/// One share group's configs (Kafka's group configs of that name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// `share.record.lock.duration.ms`.
    pub record_lock_duration_ms: i32,
    /// `share.delivery.count.limit`: deliveries after which a record that is
    /// released or whose lock expires is archived instead of redelivered.
    pub delivery_count_limit: i16,
    pub auto_offset_reset: AutoOffsetReset,
    pub isolation_level: IsolationLevel,
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        ShareGroupConfig {
            record_lock_duration_ms: RECORD_LOCK_DURATION_MS_DEFAULT,
            delivery_count_limit: DELIVERY_COUNT_LIMIT_DEFAULT,
            auto_offset_reset: AutoOffsetReset::Latest,
            isolation_level: IsolationLevel::ReadUncommitted,
        }
    }
}

/// Why a group config was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupConfigError {
    #[error("Unknown group config name: {0}")]
    UnknownName(String),
    #[error("Invalid value {value} for configuration {name}")]
    InvalidValue { name: String, value: String },
}

/// The group configs Kafgres serves, in name order (DescribeConfigs lists them).
pub const GROUP_CONFIG_NAMES: &[&str] = &[
    "share.auto.offset.reset",
    "share.delivery.count.limit",
    "share.isolation.level",
    "share.record.lock.duration.ms",
];

impl ShareGroupConfig {
    /// A config's value as Kafka writes it.
    pub fn value_of(&self, name: &str) -> Option<String> {
        Some(match name {
            "share.auto.offset.reset" => match self.auto_offset_reset {
                AutoOffsetReset::Latest => "latest".into(),
                AutoOffsetReset::Earliest => "earliest".into(),
            },
            "share.delivery.count.limit" => self.delivery_count_limit.to_string(),
            "share.isolation.level" => match self.isolation_level {
                IsolationLevel::ReadUncommitted => "read_uncommitted".into(),
                IsolationLevel::ReadCommitted => "read_committed".into(),
            },
            "share.record.lock.duration.ms" => self.record_lock_duration_ms.to_string(),
            _ => return None,
        })
    }

    /// The defaults with `overrides` applied (stored or requested ones).
    pub fn with_overrides(
        defaults: &ShareGroupConfig,
        overrides: &std::collections::BTreeMap<String, String>,
    ) -> Result<ShareGroupConfig, GroupConfigError> {
        let mut config = *defaults;
        for (name, value) in overrides {
            config.set(name, Some(value), defaults)?;
        }
        Ok(config)
    }

    /// Applies one `name=value` group config (IncrementalAlterConfigs on a
    /// GROUP resource); `None` restores the broker's default.
    pub fn set(
        &mut self,
        name: &str,
        value: Option<&str>,
        defaults: &ShareGroupConfig,
    ) -> Result<(), GroupConfigError> {
        let invalid =
            || GroupConfigError::InvalidValue { name: name.to_owned(), value: value.unwrap_or("").to_owned() };
        match name {
            "share.record.lock.duration.ms" => {
                self.record_lock_duration_ms = match value {
                    None => defaults.record_lock_duration_ms,
                    Some(v) => v
                        .parse()
                        .ok()
                        .filter(|ms| (RECORD_LOCK_DURATION_MS_MIN..=RECORD_LOCK_DURATION_MS_MAX).contains(ms))
                        .ok_or_else(invalid)?,
                }
            }
            "share.delivery.count.limit" => {
                self.delivery_count_limit = match value {
                    None => defaults.delivery_count_limit,
                    Some(v) => v.parse().ok().filter(|n| (2..=10).contains(n)).ok_or_else(invalid)?,
                }
            }
            "share.auto.offset.reset" => {
                self.auto_offset_reset = match value {
                    None => defaults.auto_offset_reset,
                    Some("latest") => AutoOffsetReset::Latest,
                    Some("earliest") => AutoOffsetReset::Earliest,
                    Some(_) => return Err(invalid()),
                }
            }
            "share.isolation.level" => {
                self.isolation_level = match value {
                    None => defaults.isolation_level,
                    Some("read_uncommitted") => IsolationLevel::ReadUncommitted,
                    Some("read_committed") => IsolationLevel::ReadCommitted,
                    Some(_) => return Err(invalid()),
                }
            }
            _ => return Err(GroupConfigError::UnknownName(name.to_owned())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_configs_parse_and_reset_to_the_defaults() {
        let defaults = ShareGroupConfig::default();
        let mut c = defaults;
        c.set("share.auto.offset.reset", Some("earliest"), &defaults).expect("earliest");
        c.set("share.isolation.level", Some("read_committed"), &defaults).expect("read_committed");
        c.set("share.record.lock.duration.ms", Some("20000"), &defaults).expect("lock");
        assert!(c.set("share.record.lock.duration.ms", Some("1500"), &defaults).is_err(), "below Kafka's minimum");
        assert_eq!(c.auto_offset_reset, AutoOffsetReset::Earliest);
        assert_eq!(c.isolation_level, IsolationLevel::ReadCommitted);
        assert_eq!(c.record_lock_duration_ms, 20_000);
        assert!(c.set("share.auto.offset.reset", Some("sometimes"), &defaults).is_err());
        assert!(c.set("share.delivery.count.limit", Some("1"), &defaults).is_err());
        assert!(matches!(c.set("nope", Some("1"), &defaults), Err(GroupConfigError::UnknownName(_))));
        c.set("share.record.lock.duration.ms", None, &defaults).expect("reset");
        assert_eq!(c.record_lock_duration_ms, RECORD_LOCK_DURATION_MS_DEFAULT);
    }
}
