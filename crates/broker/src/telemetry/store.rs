//! Client telemetry as a pure state machine: per client instance, its
//! subscription, when it last asked and pushed, and the latest value of each
//! metric it pushed. Time comes in with each call (no clock, no locks, no
//! I/O), so every rule is tested without sleeping.
//!
//! Kafka's rules (KIP-714, `ClientMetricsManager`):
//! - a subscription id is per instance: a digest of the settings XOR the
//!   instance id's, so a settings change gives every client a new one;
//! - GetTelemetrySubscriptions is throttled when it comes before the push
//!   interval has passed since the last one, unless a push came in between
//!   or the last push failed for its subscription or compression;
//! - PushTelemetry checks, in order: not after a terminating push
//!   (INVALID_REQUEST), not earlier than the interval allows unless
//!   terminating (THROTTLING_QUOTA_EXCEEDED), its subscription id
//!   (UNKNOWN_SUBSCRIPTION_ID), its compression (UNSUPPORTED_COMPRESSION_TYPE),
//!   its size (TELEMETRY_TOO_LARGE); a payload that does not decode is
//!   INVALID_RECORD.
//!
//! Bounds: at most [`Limits::instances_max`] instances (the one seen longest
//! ago is dropped for a new one) and [`Limits::metrics_per_instance_max`]
//! metrics each (the one pushed longest ago is dropped); an instance not seen
//! for three push intervals is dropped.

use std::collections::HashMap;
use std::net::SocketAddr;

use kafgres_wire::error_code;
use uuid::Uuid;

use super::otlp::MetricValue;
use super::TelemetrySettings;

/// How much the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub instances_max: usize,
    pub metrics_per_instance_max: usize,
    /// Longer metric names are dropped (a name is a key, not data).
    pub metric_name_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { instances_max: 1024, metrics_per_instance_max: 512, metric_name_bytes_max: 256 }
    }
}

/// An instance is dropped once it has not been seen for this many intervals
/// (Kafka's expiry).
const EXPIRY_INTERVALS: i64 = 3;

#[derive(Debug, Clone)]
struct Instance {
    /// The settings' digest it was subscribed under.
    settings_digest: u32,
    subscription_id: i32,
    last_get_ms: Option<i64>,
    last_push_ms: Option<i64>,
    /// Which came last of a get and a push (by order, not by time: both may
    /// fall in the same millisecond).
    last_was_push: bool,
    last_seen_ms: i64,
    last_error: i16,
    terminating: bool,
    client_id: String,
    address: SocketAddr,
    /// Metric name → (value, pushed at ms).
    metrics: HashMap<String, (f64, i64)>,
}

/// One kept metric, for the SQL view.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub client_instance_id: Uuid,
    pub client_id: String,
    pub address: SocketAddr,
    pub name: String,
    pub value: f64,
    pub pushed_at_ms: i64,
}

/// What GetTelemetrySubscriptions answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
}

/// Who sent a request.
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    pub client_id: &'a str,
    pub address: SocketAddr,
}

/// A PushTelemetry request, as the store checks it.
#[derive(Debug, Clone, Copy)]
pub struct Push<'a> {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression_type: i8,
    pub payload_bytes: usize,
    pub sender: Sender<'a>,
}

#[derive(Debug, Default)]
pub struct TelemetryStore {
    limits: Limits,
    instances: HashMap<Uuid, Instance>,
}

/// The subscription id of `instance` under settings whose digest is `digest`.
pub fn subscription_id(digest: u32, instance: Uuid) -> i32 {
    let (high, low) = instance.as_u64_pair();
    let folded = high ^ low;
    (digest ^ (folded as u32) ^ ((folded >> 32) as u32)) as i32
}

impl TelemetryStore {
    pub fn new(limits: Limits) -> TelemetryStore {
        TelemetryStore { limits, instances: HashMap::new() }
    }

    pub fn instances(&self) -> usize {
        self.instances.len()
    }

    /// GetTelemetrySubscriptions: `requested` is the request's id (nil: a new
    /// one is drawn by `fresh`).
    pub fn subscribe(
        &mut self,
        now_ms: i64,
        requested: Uuid,
        settings: &TelemetrySettings,
        sender: Sender<'_>,
        fresh: &mut dyn FnMut() -> Uuid,
    ) -> Result<Granted, i16> {
        self.expire(now_ms, settings);
        let id = if requested.is_nil() {
            let mut id = fresh();
            while id.is_nil() || self.instances.contains_key(&id) {
                id = fresh();
            }
            id
        } else {
            requested
        };
        let interval = i64::from(settings.push_interval_ms);
        let instance = self.instance(now_ms, id, settings, sender);
        // A push since the last get, or a full interval: else too early,
        // unless the client was told to re-subscribe.
        let may = match instance.last_get_ms {
            None => true,
            Some(_) if instance.last_was_push => true,
            Some(get) => now_ms - get >= interval,
        };
        if !may
            && instance.last_error != error_code::UNKNOWN_SUBSCRIPTION_ID
            && instance.last_error != error_code::UNSUPPORTED_COMPRESSION_TYPE
        {
            return Err(error_code::THROTTLING_QUOTA_EXCEEDED);
        }
        instance.last_get_ms = Some(now_ms);
        instance.last_was_push = false;
        instance.last_error = error_code::NONE;
        Ok(Granted { client_instance_id: id, subscription_id: instance.subscription_id })
    }

    /// PushTelemetry's checks, before its payload is read. On success the
    /// caller decodes the payload and calls [`TelemetryStore::keep`].
    pub fn check_push(&mut self, now_ms: i64, push: &Push<'_>, settings: &TelemetrySettings) -> Result<(), i16> {
        if push.client_instance_id.is_nil() || is_reserved(push.client_instance_id) {
            return Err(error_code::INVALID_REQUEST);
        }
        self.expire(now_ms, settings);
        let interval = i64::from(settings.push_interval_ms);
        let instance = self.instance(now_ms, push.client_instance_id, settings, push.sender);
        let verdict = (|| {
            if instance.terminating {
                return Err(error_code::INVALID_REQUEST);
            }
            let on_time = match instance.last_push_ms {
                None => true,
                Some(_) if !instance.last_was_push => true,
                Some(push) => now_ms - push >= interval,
            };
            if !on_time && !push.terminating {
                return Err(error_code::THROTTLING_QUOTA_EXCEEDED);
            }
            instance.last_push_ms = Some(now_ms);
            instance.last_was_push = true;
            if push.subscription_id != instance.subscription_id {
                return Err(error_code::UNKNOWN_SUBSCRIPTION_ID);
            }
            if !super::ACCEPTED_COMPRESSION_TYPES.contains(&push.compression_type)
                && push.compression_type != super::COMPRESSION_NONE
            {
                return Err(error_code::UNSUPPORTED_COMPRESSION_TYPE);
            }
            if push.payload_bytes > settings.metrics_bytes_max as usize {
                return Err(error_code::TELEMETRY_TOO_LARGE);
            }
            Ok(())
        })();
        // As Kafka: the terminating flag is kept whatever the verdict.
        instance.terminating = push.terminating;
        instance.last_error = verdict.err().unwrap_or(error_code::NONE);
        verdict
    }

    /// Records that a checked push's payload did not decode (INVALID_RECORD).
    pub fn payload_refused(&mut self, id: Uuid) {
        if let Some(instance) = self.instances.get_mut(&id) {
            instance.last_error = error_code::INVALID_RECORD;
        }
    }

    /// Keeps a checked push's metrics: those the settings ask for, latest
    /// value each, within the limits.
    pub fn keep(&mut self, now_ms: i64, id: Uuid, settings: &TelemetrySettings, metrics: Vec<MetricValue>) {
        let limits = self.limits;
        let Some(instance) = self.instances.get_mut(&id) else { return };
        for m in metrics {
            if m.name.len() > limits.metric_name_bytes_max || !settings.requests(&m.name) {
                continue;
            }
            if !instance.metrics.contains_key(&m.name) && instance.metrics.len() >= limits.metrics_per_instance_max {
                let oldest = instance.metrics.iter().min_by_key(|(_, (_, at))| *at).map(|(name, _)| name.clone());
                if let Some(oldest) = oldest {
                    instance.metrics.remove(&oldest);
                }
            }
            instance.metrics.insert(m.name, (m.value, now_ms));
        }
    }

    /// Every kept metric, by instance and name.
    pub fn rows(&self) -> Vec<MetricRow> {
        let mut rows: Vec<MetricRow> = self
            .instances
            .iter()
            .flat_map(|(id, i)| {
                i.metrics.iter().map(move |(name, (value, at))| MetricRow {
                    client_instance_id: *id,
                    client_id: i.client_id.clone(),
                    address: i.address,
                    name: name.clone(),
                    value: *value,
                    pushed_at_ms: *at,
                })
            })
            .collect();
        rows.sort_by(|a, b| (a.client_instance_id, &a.name).cmp(&(b.client_instance_id, &b.name)));
        rows
    }

    /// The instance, made (or made again, under new settings) if need be.
    fn instance(&mut self, now_ms: i64, id: Uuid, settings: &TelemetrySettings, sender: Sender<'_>) -> &mut Instance {
        let digest = settings.digest();
        let stale = self.instances.get(&id).is_some_and(|i| i.settings_digest != digest);
        if stale {
            // Kafka makes the instance anew when the subscriptions change:
            // fresh timestamps, so the client may re-subscribe at once.
            self.instances.remove(&id);
        }
        if !self.instances.contains_key(&id) && self.instances.len() >= self.limits.instances_max {
            let oldest = self.instances.iter().min_by_key(|(_, i)| i.last_seen_ms).map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                self.instances.remove(&oldest);
            }
        }
        let instance = self.instances.entry(id).or_insert_with(|| Instance {
            settings_digest: digest,
            subscription_id: subscription_id(digest, id),
            last_get_ms: None,
            last_push_ms: None,
            last_was_push: false,
            last_seen_ms: now_ms,
            last_error: error_code::NONE,
            terminating: false,
            client_id: String::new(),
            address: sender.address,
            metrics: HashMap::new(),
        });
        instance.last_seen_ms = now_ms;
        sender.client_id.clone_into(&mut instance.client_id);
        instance.address = sender.address;
        instance
    }

    /// Drops the instances not seen for three intervals.
    pub fn expire(&mut self, now_ms: i64, settings: &TelemetrySettings) {
        let horizon = i64::from(settings.push_interval_ms).saturating_mul(EXPIRY_INTERVALS);
        self.instances.retain(|_, i| now_ms - i.last_seen_ms <= horizon);
    }
}

/// Kafka's reserved UUIDs (`Uuid.RESERVED`): nil and the metadata topic's (1).
fn is_reserved(id: Uuid) -> bool {
    id.as_u128() <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: i32 = 1000;

    fn settings(metrics: &[&str]) -> TelemetrySettings {
        TelemetrySettings {
            requested_metrics: metrics.iter().map(|s| s.to_string()).collect(),
            push_interval_ms: INTERVAL,
            metrics_bytes_max: 100,
        }
    }

    fn sender() -> Sender<'static> {
        Sender { client_id: "app", address: "127.0.0.1:5000".parse().expect("address") }
    }

    fn push(id: Uuid, subscription_id: i32) -> Push<'static> {
        Push {
            client_instance_id: id,
            subscription_id,
            terminating: false,
            compression_type: 0,
            payload_bytes: 10,
            sender: sender(),
        }
    }

    fn subscribe(store: &mut TelemetryStore, now: i64, id: Uuid, s: &TelemetrySettings) -> Result<Granted, i16> {
        store.subscribe(now, id, s, sender(), &mut || Uuid::from_u128(0xabc))
    }

    #[test]
    fn a_nil_id_gets_a_new_one_and_pushes_follow_the_interval() {
        let s = settings(&["org.apache.kafka."]);
        let mut store = TelemetryStore::new(Limits::default());
        let g = subscribe(&mut store, 0, Uuid::nil(), &s).expect("granted");
        assert_eq!(g.client_instance_id, Uuid::from_u128(0xabc));
        let id = g.client_instance_id;
        assert_eq!(store.check_push(10, &push(id, g.subscription_id), &s), Ok(()), "first push after a get");
        let early = store.check_push(20, &push(id, g.subscription_id), &s);
        assert_eq!(early, Err(error_code::THROTTLING_QUOTA_EXCEEDED));
        assert_eq!(store.check_push(10 + 1000, &push(id, g.subscription_id), &s), Ok(()));
        // An early get is throttled, one after a push is not.
        assert_eq!(subscribe(&mut store, 1020, id, &s).map(|g| g.subscription_id), Ok(g.subscription_id));
        assert_eq!(subscribe(&mut store, 1030, id, &s), Err(error_code::THROTTLING_QUOTA_EXCEEDED));
    }

    #[test]
    fn push_errors_in_kafkas_order() {
        let s = settings(&["*"]);
        let mut store = TelemetryStore::new(Limits::default());
        let id = Uuid::from_u128(77);
        let g = subscribe(&mut store, 0, id, &s).expect("granted");
        let sub = g.subscription_id;
        assert_eq!(store.check_push(1, &push(Uuid::nil(), sub), &s), Err(error_code::INVALID_REQUEST));
        assert_eq!(store.check_push(1, &push(Uuid::from_u128(1), sub), &s), Err(error_code::INVALID_REQUEST));
        assert_eq!(store.check_push(1, &push(id, sub ^ 1), &s), Err(error_code::UNKNOWN_SUBSCRIPTION_ID));
        // After an unknown subscription, a get at once is allowed.
        assert!(subscribe(&mut store, 2, id, &s).is_ok());
        let bad_codec = Push { compression_type: 9, ..push(id, sub) };
        assert_eq!(store.check_push(3, &bad_codec, &s), Err(error_code::UNSUPPORTED_COMPRESSION_TYPE));
        assert!(subscribe(&mut store, 4, id, &s).is_ok());
        let big = Push { payload_bytes: 101, ..push(id, sub) };
        assert_eq!(store.check_push(5, &big, &s), Err(error_code::TELEMETRY_TOO_LARGE));
        // Early, but terminating: accepted; anything after it is not.
        let last = Push { terminating: true, ..push(id, sub) };
        assert_eq!(store.check_push(6, &last, &s), Ok(()));
        assert_eq!(store.check_push(1500, &push(id, sub), &s), Err(error_code::INVALID_REQUEST));
    }

    #[test]
    fn new_settings_give_a_new_subscription_id() {
        let a = settings(&["org.apache.kafka.producer."]);
        let b = settings(&["org.apache.kafka.consumer."]);
        let mut store = TelemetryStore::new(Limits::default());
        let id = Uuid::from_u128(5);
        let old = subscribe(&mut store, 0, id, &a).expect("granted").subscription_id;
        assert_eq!(store.check_push(1, &push(id, old), &b), Err(error_code::UNKNOWN_SUBSCRIPTION_ID));
        let new = subscribe(&mut store, 2, id, &b).expect("re-subscribing at once").subscription_id;
        assert_ne!(old, new);
        assert_eq!(store.check_push(3, &push(id, new), &b), Ok(()));
    }

    #[test]
    fn metrics_are_filtered_bounded_and_expire() {
        let s = settings(&["a."]);
        let limits = Limits { instances_max: 2, metrics_per_instance_max: 2, metric_name_bytes_max: 8 };
        let mut store = TelemetryStore::new(limits);
        let id = Uuid::from_u128(9);
        subscribe(&mut store, 0, id, &s).expect("granted");
        let m = |name: &str, value: f64| MetricValue { name: name.into(), value };
        store.keep(1, id, &s, vec![m("a.x", 1.0), m("b.y", 2.0), m("a.toolongname", 3.0)]);
        store.keep(2, id, &s, vec![m("a.y", 4.0)]);
        store.keep(3, id, &s, vec![m("a.z", 5.0), m("a.y", 6.0)]);
        let kept: Vec<(String, f64)> = store.rows().into_iter().map(|r| (r.name, r.value)).collect();
        assert_eq!(kept, vec![("a.y".into(), 6.0), ("a.z".into(), 5.0)], "a.x was the oldest");
        // A third instance drops the one seen longest ago.
        subscribe(&mut store, 10, Uuid::from_u128(10), &s).expect("granted");
        subscribe(&mut store, 20, Uuid::from_u128(11), &s).expect("granted");
        assert_eq!(store.instances(), 2);
        assert!(store.rows().is_empty(), "instance 9 was dropped");
        store.expire(20 + 3 * i64::from(INTERVAL) + 1, &s);
        assert_eq!(store.instances(), 0);
    }
}
