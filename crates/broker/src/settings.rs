//! The broker settings a reload changes while it serves (`pg_reload_conf()`
//! in the extension): [`Reloadable`] is a full set of them, [`LiveSettings`]
//! the values in force, read where they act (an atomic load each), and
//! [`crate::Broker::reload`] applies a new set to them and to the services
//! that keep their own copy (the connection limits, the request memory
//! budget, the failed-login delay, the group coordinator).
//!
//! It owns no policy about which settings may change: the host decides what
//! it offers as reloadable; settings that shape what is bound or opened at
//! start (listeners, the log directory, threads) are not here.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{BrokerConfig, FlushPolicy};

/// One full set of reloadable settings, as the host read them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reloadable {
    pub flush_policy: FlushPolicy,
    /// See [`BrokerConfig::flush_delay`].
    pub flush_delay: Duration,
    pub frame_bytes_max: usize,
    pub connections_max: usize,
    pub connections_per_address_max: usize,
    pub connection_rate_per_address_max: f64,
    pub request_memory_bytes_max: usize,
    pub connection_idle_ms_max: u64,
    pub connections_max_reauth_ms: u64,
    pub transaction_version: i16,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub failed_authentication_delay_ms: u64,
    pub group_initial_rebalance_delay_ms: i32,
    pub group_consumer_session_timeout_ms: i32,
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `kafgres.archive_command`; `None` (or blank): archiving off.
    pub archive_command: Option<String>,
    /// `kafgres.client_telemetry_*`: what clients are asked to push (KIP-714).
    pub client_telemetry: crate::telemetry::TelemetrySettings,
}

impl From<&BrokerConfig> for Reloadable {
    fn from(c: &BrokerConfig) -> Reloadable {
        Reloadable {
            flush_policy: c.flush_policy,
            flush_delay: c.flush_delay,
            frame_bytes_max: c.frame_bytes_max,
            connections_max: c.connections_max,
            connections_per_address_max: c.connections_per_address_max,
            connection_rate_per_address_max: c.connection_rate_per_address_max,
            request_memory_bytes_max: c.request_memory_bytes_max,
            connection_idle_ms_max: c.connection_idle_ms_max,
            connections_max_reauth_ms: c.connections_max_reauth_ms,
            transaction_version: c.transaction_version,
            auto_create_topics: c.auto_create_topics,
            default_partitions: c.default_partitions,
            failed_authentication_delay_ms: c.failed_authentication_delay_ms,
            group_initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            group_consumer_session_timeout_ms: c.group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
            archive_command: c.archive_command.clone(),
            client_telemetry: c.client_telemetry.clone(),
        }
    }
}

/// The flush policy in force, shared by every partition of a broker (they
/// read it at each append).
#[derive(Debug, Clone)]
pub struct SharedFlushPolicy(Arc<AtomicU8>);

impl SharedFlushPolicy {
    pub fn new(policy: FlushPolicy) -> SharedFlushPolicy {
        SharedFlushPolicy(Arc::new(AtomicU8::new(encode(policy))))
    }

    pub fn get(&self) -> FlushPolicy {
        match self.0.load(Ordering::Acquire) {
            0 => FlushPolicy::Fsync,
            _ => FlushPolicy::PageCache,
        }
    }

    /// Sets the policy; returns whether it changed.
    pub fn set(&self, policy: FlushPolicy) -> bool {
        self.0.swap(encode(policy), Ordering::AcqRel) != encode(policy)
    }
}

/// The flush delay in force (`kafgres.flush_delay`), shared by every
/// partition of a broker (their flushers read it before each flush).
#[derive(Debug, Clone, Default)]
pub struct SharedFlushDelay(Arc<AtomicU64>);

impl SharedFlushDelay {
    pub fn new(delay: Duration) -> SharedFlushDelay {
        let shared = SharedFlushDelay::default();
        shared.set(delay);
        shared
    }

    pub fn get(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed))
    }

    pub fn set(&self, delay: Duration) {
        self.0.store(u64::try_from(delay.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

fn encode(policy: FlushPolicy) -> u8 {
    match policy {
        FlushPolicy::Fsync => 0,
        FlushPolicy::PageCache => 1,
    }
}

/// The reloadable values read on the request path. Built by
/// `Broker::start` from the config's initial values; a reload stores new ones.
#[derive(Debug)]
pub struct LiveSettings {
    pub flush_policy: SharedFlushPolicy,
    pub flush_delay: SharedFlushDelay,
    frame_bytes_max: AtomicUsize,
    connections_max: AtomicUsize,
    connection_idle_ms_max: AtomicU64,
    connections_max_reauth_ms: AtomicU64,
    /// The finalized `transaction.version`, and when it took effect (the
    /// finalized features' epoch: a client keeps the features of the
    /// highest epoch it saw, so a change must raise it).
    transaction_version: AtomicI32,
    features_epoch: AtomicI64,
    auto_create_topics: AtomicBool,
    default_partitions: AtomicI32,
    group_initial_rebalance_delay_ms: AtomicI32,
    group_consumer_session_timeout_ms: AtomicI32,
    group_consumer_heartbeat_interval_ms: AtomicI32,
    /// What clients are asked to push (KIP-714), replaced whole by a reload;
    /// its being empty closes the telemetry APIs' gate.
    client_telemetry: std::sync::RwLock<Arc<crate::telemetry::TelemetrySettings>>,
    /// The dynamic broker configs in force (`crate::dynamic_config`),
    /// replaced whole by an alteration; read without holding the lock.
    dynamic: std::sync::RwLock<Arc<crate::dynamic_config::DynamicLayers>>,
    /// The static settings (the host's, at start or at the last reload), so
    /// that removing a dynamic value brings the static one back.
    statics: std::sync::Mutex<Option<Reloadable>>,
}

impl LiveSettings {
    /// What a config holds until `Broker::start` builds the real one from
    /// its initial values.
    pub fn placeholder() -> LiveSettings {
        LiveSettings {
            flush_policy: SharedFlushPolicy::new(FlushPolicy::Fsync),
            flush_delay: SharedFlushDelay::default(),
            frame_bytes_max: AtomicUsize::new(0),
            connections_max: AtomicUsize::new(0),
            connection_idle_ms_max: AtomicU64::new(0),
            connections_max_reauth_ms: AtomicU64::new(0),
            transaction_version: AtomicI32::new(0),
            features_epoch: AtomicI64::new(0),
            auto_create_topics: AtomicBool::new(false),
            default_partitions: AtomicI32::new(1),
            group_initial_rebalance_delay_ms: AtomicI32::new(0),
            group_consumer_session_timeout_ms: AtomicI32::new(0),
            group_consumer_heartbeat_interval_ms: AtomicI32::new(0),
            client_telemetry: std::sync::RwLock::default(),
            dynamic: std::sync::RwLock::default(),
            statics: std::sync::Mutex::new(None),
        }
    }

    pub fn new(initial: &Reloadable) -> LiveSettings {
        let live = LiveSettings::placeholder();
        live.flush_policy.set(initial.flush_policy);
        live.store(initial);
        live
    }

    /// Stores every value of `settings` but the flush policy (which the
    /// broker switches partition by partition). Returns whether the flush
    /// policy differs from the one in force.
    pub(crate) fn store(&self, s: &Reloadable) -> bool {
        let relaxed = Ordering::Relaxed;
        self.flush_delay.set(s.flush_delay);
        self.frame_bytes_max.store(s.frame_bytes_max, relaxed);
        self.connections_max.store(s.connections_max, relaxed);
        self.connection_idle_ms_max.store(s.connection_idle_ms_max, relaxed);
        self.connections_max_reauth_ms.store(s.connections_max_reauth_ms, relaxed);
        if self.transaction_version.swap(i32::from(s.transaction_version), relaxed) != i32::from(s.transaction_version)
        {
            self.features_epoch.store(crate::now_ms(), relaxed);
        }
        self.auto_create_topics.store(s.auto_create_topics, relaxed);
        self.default_partitions.store(s.default_partitions, relaxed);
        self.group_initial_rebalance_delay_ms.store(s.group_initial_rebalance_delay_ms, relaxed);
        self.group_consumer_session_timeout_ms.store(s.group_consumer_session_timeout_ms, relaxed);
        self.group_consumer_heartbeat_interval_ms.store(s.group_consumer_heartbeat_interval_ms, relaxed);
        if *self.client_telemetry() != s.client_telemetry {
            *self.client_telemetry.write().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                Arc::new(s.client_telemetry.clone());
        }
        self.flush_policy.get() != s.flush_policy
    }

    /// What clients are asked to push (KIP-714) now.
    pub fn client_telemetry(&self) -> Arc<crate::telemetry::TelemetrySettings> {
        Arc::clone(&self.client_telemetry.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Which gated APIs the settings in force turn on.
    pub fn gates(&self) -> crate::api::Gates {
        let telemetry = self.client_telemetry.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        crate::api::Gates { client_telemetry: telemetry.enabled() }
    }

    /// The dynamic broker configs in force.
    pub fn dynamic(&self) -> Arc<crate::dynamic_config::DynamicLayers> {
        Arc::clone(&self.dynamic.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub(crate) fn set_dynamic(&self, layers: crate::dynamic_config::DynamicLayers) {
        *self.dynamic.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(layers);
    }

    /// The static settings last given (at start or by a reload); `None`
    /// before the broker started.
    pub fn statics(&self) -> Option<Reloadable> {
        self.statics.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub(crate) fn set_statics(&self, settings: &Reloadable) {
        *self.statics.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(settings.clone());
    }

    /// Kafka's `socket.request.max.bytes`: the largest request frame read.
    pub fn frame_bytes_max(&self) -> usize {
        self.frame_bytes_max.load(Ordering::Relaxed)
    }

    /// Connections served at once; more are refused at accept.
    pub fn connections_max(&self) -> usize {
        self.connections_max.load(Ordering::Relaxed)
    }

    pub fn connection_idle_ms_max(&self) -> u64 {
        self.connection_idle_ms_max.load(Ordering::Relaxed)
    }

    /// Kafka's `connections.max.reauth.ms` (0: sessions never end), read
    /// when a connection authenticates.
    pub fn connections_max_reauth_ms(&self) -> u64 {
        self.connections_max_reauth_ms.load(Ordering::Relaxed)
    }

    /// The `transaction.version` ApiVersions finalizes.
    pub fn transaction_version(&self) -> i16 {
        self.transaction_version.load(Ordering::Relaxed) as i16
    }

    /// The finalized features' epoch: when their levels last took effect
    /// (ms since the epoch), so it only grows.
    pub fn features_epoch(&self) -> i64 {
        self.features_epoch.load(Ordering::Relaxed)
    }

    pub fn auto_create_topics(&self) -> bool {
        self.auto_create_topics.load(Ordering::Relaxed)
    }

    pub fn default_partitions(&self) -> i32 {
        self.default_partitions.load(Ordering::Relaxed)
    }

    pub fn group_initial_rebalance_delay_ms(&self) -> i32 {
        self.group_initial_rebalance_delay_ms.load(Ordering::Relaxed)
    }

    pub fn group_consumer_session_timeout_ms(&self) -> i32 {
        self.group_consumer_session_timeout_ms.load(Ordering::Relaxed)
    }

    pub fn group_consumer_heartbeat_interval_ms(&self) -> i32 {
        self.group_consumer_heartbeat_interval_ms.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_keeps_the_flush_policy_for_the_broker_to_switch() {
        let config = BrokerConfig::for_tests(std::path::PathBuf::from("/nonexistent"));
        let initial = Reloadable::from(&config);
        let live = LiveSettings::new(&initial);
        assert_eq!(live.flush_policy.get(), FlushPolicy::Fsync);
        let changed = Reloadable {
            flush_policy: FlushPolicy::PageCache,
            flush_delay: Duration::from_micros(250),
            frame_bytes_max: 4096,
            auto_create_topics: false,
            default_partitions: 7,
            ..initial
        };
        let partitions_delay = live.flush_delay.clone();
        assert!(live.store(&changed), "the flush policy differs");
        assert_eq!(live.flush_policy.get(), FlushPolicy::Fsync, "not switched by store");
        assert_eq!(partitions_delay.get(), Duration::from_micros(250), "the partitions' copy sees the new delay");
        assert_eq!((live.frame_bytes_max(), live.auto_create_topics(), live.default_partitions()), (4096, false, 7));
        assert!(live.flush_policy.set(FlushPolicy::PageCache));
        assert!(!live.flush_policy.set(FlushPolicy::PageCache), "no change the second time");
    }
}
