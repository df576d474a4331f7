//! Client quotas: byte rates and request time per user (a Postgres role),
//! client id, or both, as Kafka's `ClientQuotaManager` and
//! `ClientRequestQuotaManager` apply them. `request_percentage` bounds the
//! time a client's requests take on the broker's threads (their handlers'
//! polls, decoding and encoding; not the time they wait for data or a
//! flush), in percent of one thread: 50 is half a thread-second per second.
//!
//! Owns the quota vocabulary (entities, keys), the rules in force
//! ([`ClientQuotas`], replaced whole at start, after AlterClientQuotas and
//! at a reload), the rate each quota entity is measured at ([`rate`]) and
//! the throttle time a request earns. The rules are stored by the catalog
//! (`kafgres.client_quotas`); [`admin`] writes there first, then here. It
//! never delays anything itself: the connection sends the answer with the
//! throttle time and reads nothing more from the client until it has passed
//! (KIP-219), as Kafka does.
//!
//! A client's quota is the most specific of (Kafka's order):
//! `user+client-id`, `user+default client-id`, `user`, `default user+client-id`,
//! `default user+default client-id`, `default user`, `client-id`,
//! `default client-id`. Clients that match the same configured entity share
//! one rate (a `user` quota bounds all of that role's clients together); a
//! default entity gives each user or client id a rate of its own.
//!
//! An `ip` entity (alone: Kafka allows no combination) has one quota,
//! `connection_creation_rate`: new connections per second from that address,
//! or from each address for the default ip entity
//! ([`ClientQuotas::connection_rate_limit`], which the acceptor asks).

pub mod admin;
pub mod rate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rate::Rate;

/// The quota kinds Kafgres enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKey {
    /// Bytes per second of Produce requests.
    ProducerByteRate,
    /// Bytes per second of Fetch responses.
    ConsumerByteRate,
    /// Percent of one thread's time spent on the client's requests.
    RequestPercentage,
    /// New connections per second from a client address (ip entities only).
    ConnectionCreationRate,
}

impl QuotaKey {
    pub const ALL: [QuotaKey; 4] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ConnectionCreationRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    /// Whether the key is for ip entities (else for users and client ids).
    pub fn is_ip_quota(self) -> bool {
        self == QuotaKey::ConnectionCreationRate
    }

    pub fn parse(name: &str) -> Option<QuotaKey> {
        QuotaKey::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One component of a quota entity: a named user or client id, or the
/// default one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// Kafka's wire form: a name, or null for the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        name.map_or(EntityName::Default, |n| EntityName::Named(n.to_owned()))
    }

    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

/// What a quota is for: a user, a client id, or both (at least one); or a
/// client address alone (`ip`, written as `IpAddr` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    pub fn of_user_and_client(user: Option<EntityName>, client_id: Option<EntityName>) -> QuotaEntity {
        QuotaEntity { user, client_id, ip: None }
    }
}

/// The entity type names of the protocol.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// A configured quota.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRule {
    pub entity: QuotaEntity,
    pub key: QuotaKey,
    /// Bytes per second, or percent of a thread for `request_percentage`.
    pub value: f64,
}

/// Which clients share one measured rate: the configured entity a client
/// matched, with defaults replaced by the client's own names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SensorKey {
    key: QuotaKey,
    user: Option<String>,
    client_id: Option<String>,
}

/// How many sensors may exist before idle ones are swept (one per user or
/// client id that a default quota applies to).
const SENSOR_SWEEP_AT: usize = 4096;

/// The rules in force and the rates measured against them.
#[derive(Debug, Default)]
pub struct ClientQuotas {
    rules: RwLock<Arc<HashMap<(QuotaEntity, QuotaKey), f64>>>,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
    /// The ip quotas by parsed address: a name is kept as typed (Kafka's
    /// way), so `fd00:0:0::7` and `fd00::7` are one address.
    ip_limits: RwLock<IpLimits>,
}

/// `connection_creation_rate` by client address, and the default ip's.
#[derive(Debug, Default)]
struct IpLimits {
    by_address: HashMap<std::net::IpAddr, f64>,
    default: Option<f64>,
}

impl IpLimits {
    fn of(rules: &[QuotaRule]) -> IpLimits {
        let mut limits = IpLimits::default();
        for rule in rules.iter().filter(|r| r.key == QuotaKey::ConnectionCreationRate) {
            match &rule.entity.ip {
                Some(EntityName::Default) => limits.default = Some(rule.value),
                // A name that is no address (written by hand) matches no client.
                Some(EntityName::Named(name)) => {
                    if let Ok(address) = name.parse() {
                        limits.by_address.insert(address, rule.value);
                    }
                }
                None => {}
            }
        }
        limits
    }
}

impl ClientQuotas {
    pub fn new(rules: Vec<QuotaRule>) -> ClientQuotas {
        let quotas = ClientQuotas::default();
        quotas.replace(rules);
        quotas
    }

    /// Replaces every rule (the catalog's whole set). Rates measured so far stay.
    pub fn replace(&self, rules: Vec<QuotaRule>) {
        *self.ip_limits.write().unwrap_or_else(|p| p.into_inner()) = IpLimits::of(&rules);
        let index = rules.into_iter().map(|r| ((r.entity, r.key), r.value)).collect();
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(index);
    }

    /// Whether any quota is configured (else nothing is measured).
    pub fn active(&self) -> bool {
        !self.rules.read().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    pub fn rules(&self) -> Vec<QuotaRule> {
        let rules = Arc::clone(&self.rules.read().unwrap_or_else(|p| p.into_inner()));
        let mut all: Vec<QuotaRule> = rules
            .iter()
            .map(|((entity, key), value)| QuotaRule { entity: entity.clone(), key: *key, value: *value })
            .collect();
        all.sort_by(|a, b| (&a.entity, a.key).cmp(&(&b.entity, b.key)));
        all
    }

    /// The quota that applies to (`user`, `client_id`) for `key`, and which
    /// clients share its rate.
    fn resolve(&self, key: QuotaKey, user: &str, client_id: &str) -> Option<(f64, SensorKey)> {
        let rules = Arc::clone(&self.rules.read().unwrap_or_else(|p| p.into_inner()));
        if rules.is_empty() {
            return None;
        }
        let named = |n: &str| Some(EntityName::Named(n.to_owned()));
        let default = || Some(EntityName::Default);
        let both = || (Some(user.to_owned()), Some(client_id.to_owned()));
        let candidates = [
            (named(user), named(client_id), both()),
            (named(user), default(), both()),
            (named(user), None, (Some(user.to_owned()), None)),
            (default(), named(client_id), both()),
            (default(), default(), both()),
            (default(), None, (Some(user.to_owned()), None)),
            (None, named(client_id), (None, Some(client_id.to_owned()))),
            (None, default(), (None, Some(client_id.to_owned()))),
        ];
        candidates.into_iter().find_map(|(u, c, (sensor_user, sensor_client))| {
            let value = rules.get(&(QuotaEntity::of_user_and_client(u, c), key))?;
            Some((*value, SensorKey { key, user: sensor_user, client_id: sensor_client }))
        })
    }

    /// The `connection_creation_rate` for new connections from `address`:
    /// its own ip quota, else the default ip entity's; `None` when neither
    /// is set.
    pub fn connection_rate_limit(&self, address: std::net::IpAddr) -> Option<f64> {
        let limits = self.ip_limits.read().unwrap_or_else(|p| p.into_inner());
        limits.by_address.get(&address).copied().or(limits.default)
    }

    /// Records `bytes` against the client's `key` quota; the time it must
    /// be throttled for (zero when no quota applies or it is under it).
    pub fn record(&self, key: QuotaKey, user: &str, client_id: &str, bytes: usize) -> Duration {
        self.record_at(key, user, client_id, bytes as f64, rate::now_ms())
    }

    /// Records time a client's request took on the broker's threads against
    /// its `request_percentage` quota; the time it must be throttled for.
    pub fn record_request_time(&self, user: &str, client_id: &str, on_thread: Duration) -> Duration {
        // Kafka's unit: percent-seconds (100 is one thread for one second).
        let percent_seconds = on_thread.as_secs_f64() * 100.0;
        self.record_at(QuotaKey::RequestPercentage, user, client_id, percent_seconds, rate::now_ms())
    }

    fn record_at(&self, key: QuotaKey, user: &str, client_id: &str, amount: f64, now_ms: u64) -> Duration {
        let Some((quota, sensor)) = self.resolve(key, user, client_id) else {
            return Duration::ZERO;
        };
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if sensors.len() >= SENSOR_SWEEP_AT && !sensors.contains_key(&sensor) {
            sensors.retain(|_, rate| !rate.idle(now_ms));
        }
        let rate = sensors.entry(sensor).or_default();
        rate.record(now_ms, amount);
        rate.throttle(now_ms, quota)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(user: Option<EntityName>, client_id: Option<EntityName>, key: QuotaKey, value: f64) -> QuotaRule {
        QuotaRule { entity: QuotaEntity::of_user_and_client(user, client_id), key, value }
    }

    #[test]
    fn an_address_has_its_own_connection_rate_or_the_default_ip_one() {
        let ip = |name: EntityName, value: f64| QuotaRule {
            entity: QuotaEntity { ip: Some(name), ..QuotaEntity::default() },
            key: QuotaKey::ConnectionCreationRate,
            value,
        };
        let quotas = ClientQuotas::new(vec![ip(EntityName::Named("10.0.0.7".into()), 1.0)]);
        assert_eq!(quotas.connection_rate_limit("10.0.0.7".parse().unwrap()), Some(1.0));
        assert_eq!(quotas.connection_rate_limit("10.0.0.8".parse().unwrap()), None, "no default: the setting's");
        quotas.replace(vec![ip(EntityName::Named("0:0:0:0:0:0:0:1".into()), 5.0), ip(EntityName::Default, 20.0)]);
        assert_eq!(quotas.connection_rate_limit("::1".parse().unwrap()), Some(5.0), "a long form matches");
        assert_eq!(quotas.connection_rate_limit("10.0.0.7".parse().unwrap()), Some(20.0));
        // ip rules do not bound users or client ids.
        assert_eq!(quotas.resolve(P, "alice", "app"), None);
    }

    fn named(n: &str) -> Option<EntityName> {
        Some(EntityName::Named(n.into()))
    }

    const P: QuotaKey = QuotaKey::ProducerByteRate;

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        let quotas = ClientQuotas::new(vec![
            rule(None, Some(EntityName::Default), P, 1.0),
            rule(None, named("app"), P, 2.0),
            rule(Some(EntityName::Default), None, P, 3.0),
            rule(Some(EntityName::Default), Some(EntityName::Default), P, 4.0),
            rule(Some(EntityName::Default), named("app"), P, 5.0),
            rule(named("alice"), None, P, 6.0),
            rule(named("alice"), Some(EntityName::Default), P, 7.0),
            rule(named("alice"), named("app"), P, 8.0),
        ]);
        let value = |user: &str, client: &str| quotas.resolve(P, user, client).map(|(v, _)| v);
        assert_eq!(value("alice", "app"), Some(8.0));
        assert_eq!(value("alice", "other"), Some(7.0));
        assert_eq!(value("bob", "app"), Some(5.0));
        assert_eq!(value("bob", "other"), Some(4.0));
        assert_eq!(quotas.resolve(QuotaKey::ConsumerByteRate, "alice", "app"), None);

        let only_clients =
            ClientQuotas::new(vec![rule(None, named("app"), P, 2.0), rule(None, Some(EntityName::Default), P, 1.0)]);
        assert_eq!(only_clients.resolve(P, "anyone", "app").map(|(v, _)| v), Some(2.0));
        assert_eq!(only_clients.resolve(P, "anyone", "x").map(|(v, _)| v), Some(1.0));
        let user_only =
            ClientQuotas::new(vec![rule(named("alice"), None, P, 6.0), rule(Some(EntityName::Default), None, P, 3.0)]);
        assert_eq!(user_only.resolve(P, "alice", "x").map(|(v, _)| v), Some(6.0));
        assert_eq!(user_only.resolve(P, "bob", "x").map(|(v, _)| v), Some(3.0));
    }

    #[test]
    fn a_user_quota_is_shared_by_its_clients_a_default_one_is_per_user() {
        let quotas = ClientQuotas::new(vec![
            rule(named("alice"), None, P, 1000.0),
            rule(Some(EntityName::Default), None, P, 1000.0),
        ]);
        // alice's two client ids share one rate: 6,000 + 6,000 bytes is over 1,000/s.
        assert_eq!(quotas.record_at(P, "alice", "a", 6000.0, 0), Duration::ZERO);
        assert!(quotas.record_at(P, "alice", "b", 6000.0, 0) > Duration::ZERO);
        // Under the default, bob and carol each have their own rate.
        assert_eq!(quotas.record_at(P, "bob", "a", 6000.0, 0), Duration::ZERO);
        assert_eq!(quotas.record_at(P, "carol", "a", 6000.0, 0), Duration::ZERO);
    }

    #[test]
    fn request_time_is_measured_in_percent_of_a_thread() {
        let r = QuotaKey::RequestPercentage;
        let quotas = ClientQuotas::new(vec![rule(None, named("app"), r, 10.0)]);
        // 0.5 s on a thread in a 10 s window is 5% of one thread: under 10%.
        assert_eq!(quotas.record_at(r, "u", "app", 50.0, 0), Duration::ZERO);
        // 2 s in all (20%): twice the quota, throttled for a window.
        assert_eq!(quotas.record_at(r, "u", "app", 150.0, 0), Duration::from_secs(10));
        assert_eq!(quotas.record_at(r, "u", "other", 1e9, 0), Duration::ZERO, "no quota for this client id");
        assert_eq!(QuotaKey::parse("request_percentage"), Some(r));
    }

    #[test]
    fn without_rules_nothing_is_measured_or_throttled() {
        let quotas = ClientQuotas::default();
        assert_eq!(quotas.record_at(P, "alice", "a", (usize::MAX / 2) as f64, 0), Duration::ZERO);
        assert!(quotas.sensors.lock().unwrap().is_empty());
        quotas.replace(vec![rule(named("alice"), None, P, 10.0)]);
        assert!(quotas.record_at(P, "alice", "a", 1_000_000.0, 0) > Duration::ZERO);
        quotas.replace(Vec::new());
        assert_eq!(quotas.record_at(P, "alice", "a", 1_000_000.0, 0), Duration::ZERO);
    }
}
