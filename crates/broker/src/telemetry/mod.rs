//! Client telemetry (KIP-714): what clients are asked to push
//! ([`TelemetrySettings`], from `kafgres.client_telemetry_*`), and what they
//! pushed ([`ClientTelemetry`]: per client instance, the latest value of each
//! metric, in memory and bounded; see [`store`] for Kafka's rules).
//!
//! Off (no requested metrics) by default, as a Kafka broker without a
//! telemetry reporter: GetTelemetrySubscriptions and PushTelemetry are then
//! neither advertised nor served (`crate::api::Gate`). Nothing here is
//! persisted: a restart forgets every instance, and clients subscribe again
//! (an unknown subscription id tells them to).

pub mod otlp;
pub mod status_file;
pub mod store;

use std::sync::Mutex;

use kafgres_record::compression::{self, DecompressLimit};
use thiserror::Error;
use uuid::Uuid;

pub use store::{Granted, Limits, MetricRow, Push, Sender};

/// The compression types clients may use: the ones the record crate
/// decompresses, in Kafka's order of preference (zstd, lz4, gzip, snappy).
pub const ACCEPTED_COMPRESSION_TYPES: [i8; 4] = [
    compression::CODEC_ZSTD as i8,
    compression::CODEC_LZ4 as i8,
    compression::CODEC_GZIP as i8,
    compression::CODEC_SNAPPY as i8,
];
/// An uncompressed push, always accepted (Kafka's `CompressionType.NONE`).
pub const COMPRESSION_NONE: i8 = compression::CODEC_NONE as i8;

/// A compressed payload may grow to this many times `telemetry.max.bytes`
/// (OTLP compresses well; a bomb is cut here).
const DECOMPRESSED_RATIO_MAX: usize = 16;

/// Kafka's defaults: `telemetry.max.bytes` 1 MiB, a 5-minute interval.
pub const PUSH_INTERVAL_MS_DEFAULT: i32 = 300_000;
pub const METRICS_BYTES_MAX_DEFAULT: i32 = 1 << 20;

/// What clients are asked to push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// Metric name prefixes (KIP-714's requested metrics); `*` asks for
    /// all; empty: telemetry off.
    pub requested_metrics: Vec<String>,
    pub push_interval_ms: i32,
    /// Kafka's `telemetry.max.bytes`: the largest payload a push may carry.
    pub metrics_bytes_max: i32,
}

impl Default for TelemetrySettings {
    fn default() -> TelemetrySettings {
        TelemetrySettings {
            requested_metrics: Vec::new(),
            push_interval_ms: PUSH_INTERVAL_MS_DEFAULT,
            metrics_bytes_max: METRICS_BYTES_MAX_DEFAULT,
        }
    }
}

impl TelemetrySettings {
    /// `kafgres.client_telemetry_metrics`: a comma-separated list of
    /// prefixes; blanks ignored; `*` anywhere means all.
    pub fn parse_metrics(list: &str) -> Vec<String> {
        let prefixes: Vec<String> =
            list.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect();
        if prefixes.iter().any(|p| p == "*") {
            return vec!["*".to_owned()];
        }
        prefixes
    }

    pub fn enabled(&self) -> bool {
        !self.requested_metrics.is_empty()
    }

    /// Whether a pushed metric is one the settings ask for.
    pub fn requests(&self, name: &str) -> bool {
        self.requested_metrics.iter().any(|p| p == "*" || name.starts_with(p.as_str()))
    }

    /// A digest of what a subscription says (CRC32C of the metrics, the
    /// interval and the size limit): a change gives new subscription ids.
    pub fn digest(&self) -> u32 {
        let text = format!("{:?}/{}/{}", self.requested_metrics, self.push_interval_ms, self.metrics_bytes_max);
        crc32c::crc32c(text.as_bytes())
    }
}

/// Why a checked push's payload was not kept (answered INVALID_RECORD).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PayloadError {
    #[error("cannot decompress the metrics: {0}")]
    Decompress(String),
    #[error("the metrics are not OTLP: {0}")]
    Otlp(#[from] otlp::OtlpError),
}

/// Decompresses (if need be) and decodes a push's OTLP payload.
pub fn read_payload(
    compression_type: i8,
    payload: &[u8],
    settings: &TelemetrySettings,
) -> Result<Vec<otlp::MetricValue>, PayloadError> {
    let decompressed;
    let bytes = if compression_type == COMPRESSION_NONE {
        payload
    } else {
        let bytes_max = (settings.metrics_bytes_max.max(0) as usize).saturating_mul(DECOMPRESSED_RATIO_MAX);
        decompressed = compression::decompress(compression_type as u8, payload, DecompressLimit { bytes_max })
            .map_err(|e| PayloadError::Decompress(e.to_string()))?;
        &decompressed[..]
    };
    let mut metrics = Vec::new();
    otlp::decode_metrics(bytes, &mut |m| metrics.push(m))?;
    Ok(metrics)
}

/// The broker's client telemetry: the store behind a lock (each request
/// holds it for a few map operations; decoding happens outside it).
#[derive(Debug, Default)]
pub struct ClientTelemetry {
    store: Mutex<store::TelemetryStore>,
}

impl ClientTelemetry {
    pub fn new(limits: Limits) -> ClientTelemetry {
        ClientTelemetry { store: Mutex::new(store::TelemetryStore::new(limits)) }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, store::TelemetryStore> {
        // The store's state is consistent after any panic mid-call (plain
        // map updates), so a poisoned lock is used as is.
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn subscribe(
        &self,
        now_ms: i64,
        requested: Uuid,
        settings: &TelemetrySettings,
        sender: Sender<'_>,
    ) -> Result<Granted, i16> {
        self.store().subscribe(now_ms, requested, settings, sender, &mut Uuid::new_v4)
    }

    pub fn check_push(&self, now_ms: i64, push: &Push<'_>, settings: &TelemetrySettings) -> Result<(), i16> {
        self.store().check_push(now_ms, push, settings)
    }

    pub fn keep(&self, now_ms: i64, id: Uuid, settings: &TelemetrySettings, metrics: Vec<otlp::MetricValue>) {
        self.store().keep(now_ms, id, settings, metrics);
    }

    pub fn payload_refused(&self, id: Uuid) {
        self.store().payload_refused(id);
    }

    /// Every kept metric (instances past their expiry dropped first).
    pub fn rows(&self, now_ms: i64, settings: &TelemetrySettings) -> Vec<MetricRow> {
        let mut store = self.store();
        store.expire(now_ms, settings);
        store.rows()
    }

    /// Client instances known (subscribed or pushing, not expired).
    pub fn instances(&self, now_ms: i64, settings: &TelemetrySettings) -> usize {
        let mut store = self.store();
        store.expire(now_ms, settings);
        store.instances()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_list_is_parsed() {
        assert!(TelemetrySettings::parse_metrics("").is_empty());
        assert!(TelemetrySettings::parse_metrics(" , ").is_empty());
        assert_eq!(TelemetrySettings::parse_metrics("a., b."), vec!["a.", "b."]);
        assert_eq!(TelemetrySettings::parse_metrics("a., *"), vec!["*"]);
    }

    #[test]
    fn a_zstd_payload_is_read_and_a_bomb_is_cut() {
        let settings = TelemetrySettings { requested_metrics: vec!["*".into()], ..TelemetrySettings::default() };
        let data = otlp::encode::metrics_data(&[otlp::encode::number_metric("m", 2.0, true)]);
        let zstd = compression::encode::compress(compression::CODEC_ZSTD, &data);
        let metrics = read_payload(compression::CODEC_ZSTD as i8, &zstd, &settings).expect("decoded");
        assert_eq!(metrics, vec![otlp::MetricValue { name: "m".into(), value: 2.0 }]);
        let small = TelemetrySettings { metrics_bytes_max: 4, ..settings };
        let bomb = compression::encode::compress(compression::CODEC_ZSTD, &[0u8; 1000]);
        assert!(matches!(read_payload(4, &bomb, &small), Err(PayloadError::Decompress(_))));
        assert!(matches!(read_payload(0, &[0x80], &small), Err(PayloadError::Otlp(_))));
    }
}
