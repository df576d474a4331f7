//! The few OTLP messages a PushTelemetry payload is read for, decoded by
//! hand from the protobuf wire format (no codegen): `MetricsData` →
//! `ResourceMetrics` (field 2: scope metrics) → `ScopeMetrics` (field 2:
//! metrics) → `Metric` (1 name; 5 gauge, 7 sum, 9 histogram) → data points
//! (`NumberDataPoint`: 4 as_double, 6 as_int; `HistogramDataPoint`: 4 count,
//! 5 sum). Every other field is skipped by its wire type.
//!
//! Nothing is allocated from a length on the wire: a length-delimited field
//! is a slice of the input, checked against what is left before it is taken;
//! the only allocations are the names handed to the caller, each a copy of a
//! checked slice. The nesting is fixed (five levels), so hostile input cannot
//! recurse. A payload is at most `telemetry.max.bytes` before decompression
//! and the decompression cap after it.

use thiserror::Error;

/// Why a payload is not an OTLP `MetricsData`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OtlpError {
    #[error("truncated {what} at byte {at}")]
    Truncated { what: &'static str, at: usize },
    #[error("a varint longer than 10 bytes at byte {at}")]
    VarintTooLong { at: usize },
    #[error("wire type {wire_type} (field {field}) at byte {at} is not supported")]
    UnsupportedWireType { wire_type: u8, field: u64, at: usize },
    #[error("field {field} at byte {at} has the wrong wire type for its message")]
    WrongWireType { field: u64, at: usize },
    #[error("a metric name is not UTF-8")]
    NameNotUtf8,
}

/// One metric's latest value as pushed: a gauge's or sum's last data point,
/// or a histogram's count and sum (as `<name>.count`, `<name>.sum`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    pub name: String,
    pub value: f64,
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// A field's value, as its wire type carries it.
enum Value<'a> {
    Varint,
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Where `buf` starts in the whole payload, for error offsets.
    base: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], base: usize) -> Reader<'a> {
        Reader { buf, pos: 0, base }
    }

    fn at(&self) -> usize {
        self.base + self.pos
    }

    fn varint(&mut self) -> Result<u64, OtlpError> {
        let start = self.at();
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(OtlpError::Truncated { what: "varint", at: start });
            };
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(OtlpError::VarintTooLong { at: start })
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], OtlpError> {
        let at = self.at();
        // `n` came off the wire: compared with what is left, never allocated.
        if n > self.buf.len() - self.pos {
            return Err(OtlpError::Truncated { what, at });
        }
        let slice = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// The next field number and value, `None` at the end of the message.
    fn field(&mut self) -> Result<Option<(u64, Value<'a>, usize)>, OtlpError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let at = self.at();
        let key = self.varint()?;
        let (field, wire_type) = (key >> 3, (key & 7) as u8);
        let value = match wire_type {
            VARINT => {
                self.varint()?;
                Value::Varint
            }
            FIXED64 => {
                let bytes = self.take(8, "fixed64")?;
                let mut b = [0u8; 8];
                b.copy_from_slice(bytes);
                Value::Fixed64(u64::from_le_bytes(b))
            }
            LEN => {
                let len = self.varint()?;
                // Past usize (a 32-bit target) is past the input too.
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                Value::Len(self.take(len, "length-delimited field")?)
            }
            FIXED32 => {
                self.take(4, "fixed32")?;
                Value::Fixed32
            }
            // Groups (3, 4) are deprecated and never in OTLP.
            other => return Err(OtlpError::UnsupportedWireType { wire_type: other, field, at }),
        };
        Ok(Some((field, value, at)))
    }

    /// The embedded message of a length-delimited field.
    fn sub(&self, bytes: &'a [u8]) -> Reader<'a> {
        // `bytes` is a slice of `self.buf` just taken, so it ends at `pos`.
        Reader::new(bytes, self.at() - bytes.len())
    }
}

/// Reads `payload` as an OTLP `MetricsData` and calls `keep` for each
/// metric's latest value, in payload order.
pub fn decode_metrics(payload: &[u8], keep: &mut dyn FnMut(MetricValue)) -> Result<(), OtlpError> {
    let mut data = Reader::new(payload, 0);
    while let Some((field, value, at)) = data.field()? {
        if field == 1 {
            let resource = message_bytes(value, field, at)?;
            let mut resource_metrics = data.sub(resource);
            while let Some((field, value, at)) = resource_metrics.field()? {
                if field == 2 {
                    let scope = message_bytes(value, field, at)?;
                    let scope_metrics = resource_metrics.sub(scope);
                    decode_scope(scope_metrics, keep)?;
                }
            }
        }
    }
    Ok(())
}

fn message_bytes(value: Value<'_>, field: u64, at: usize) -> Result<&[u8], OtlpError> {
    match value {
        Value::Len(bytes) => Ok(bytes),
        _ => Err(OtlpError::WrongWireType { field, at }),
    }
}

fn decode_scope(mut scope: Reader<'_>, keep: &mut dyn FnMut(MetricValue)) -> Result<(), OtlpError> {
    while let Some((field, value, at)) = scope.field()? {
        if field == 2 {
            let metric = message_bytes(value, field, at)?;
            decode_metric(scope.sub(metric), keep)?;
        }
    }
    Ok(())
}

/// What a metric's data says, once read.
enum Data {
    None,
    Number(f64),
    Histogram { count: u64, sum: Option<f64> },
}

fn decode_metric(mut metric: Reader<'_>, keep: &mut dyn FnMut(MetricValue)) -> Result<(), OtlpError> {
    let mut name: &[u8] = &[];
    let mut data = Data::None;
    while let Some((field, value, at)) = metric.field()? {
        match field {
            1 => name = message_bytes(value, field, at)?,
            // Gauge and Sum: `repeated NumberDataPoint data_points = 1`.
            5 | 7 => {
                let mut points = metric.sub(message_bytes(value, field, at)?);
                while let Some((field, value, at)) = points.field()? {
                    if field == 1 {
                        let point = points.sub(message_bytes(value, field, at)?);
                        if let Some(v) = number_point(point)? {
                            data = Data::Number(v);
                        }
                    }
                }
            }
            // Histogram: `repeated HistogramDataPoint data_points = 1`.
            9 => {
                let mut points = metric.sub(message_bytes(value, field, at)?);
                while let Some((field, value, at)) = points.field()? {
                    if field == 1 {
                        let point = points.sub(message_bytes(value, field, at)?);
                        data = histogram_point(point)?;
                    }
                }
            }
            _ => {}
        }
    }
    let name = std::str::from_utf8(name).map_err(|_| OtlpError::NameNotUtf8)?;
    if name.is_empty() {
        return Ok(());
    }
    match data {
        Data::None => {}
        Data::Number(value) => keep(MetricValue { name: name.to_owned(), value }),
        Data::Histogram { count, sum } => {
            keep(MetricValue { name: format!("{name}.count"), value: count as f64 });
            if let Some(sum) = sum {
                keep(MetricValue { name: format!("{name}.sum"), value: sum });
            }
        }
    }
    Ok(())
}

/// A `NumberDataPoint`'s value: `double as_double = 4`, `sfixed64 as_int = 6`.
fn number_point(mut point: Reader<'_>) -> Result<Option<f64>, OtlpError> {
    let mut found = None;
    while let Some((field, value, at)) = point.field()? {
        match (field, value) {
            (4, Value::Fixed64(bits)) => found = Some(f64::from_bits(bits)),
            (6, Value::Fixed64(bits)) => found = Some(bits as i64 as f64),
            (4 | 6, _) => return Err(OtlpError::WrongWireType { field, at }),
            _ => {}
        }
    }
    Ok(found)
}

/// A `HistogramDataPoint`'s `fixed64 count = 4` and `optional double sum = 5`.
fn histogram_point(mut point: Reader<'_>) -> Result<Data, OtlpError> {
    let (mut count, mut sum) = (0, None);
    while let Some((field, value, at)) = point.field()? {
        match (field, value) {
            (4, Value::Fixed64(n)) => count = n,
            (5, Value::Fixed64(bits)) => sum = Some(f64::from_bits(bits)),
            (4 | 5, _) => return Err(OtlpError::WrongWireType { field, at }),
            _ => {}
        }
    }
    Ok(Data::Histogram { count, sum })
}

/// A protobuf writer for tests (this crate's and the integration tests'
/// payloads): just enough to build `MetricsData` by hand.
pub mod encode {
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub fn len_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    pub fn fixed64_field(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3 | 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    /// A metric with one number data point (`gauge`: field 5, else a sum, 7).
    pub fn number_metric(name: &str, value: f64, gauge: bool) -> Vec<u8> {
        let mut point = Vec::new();
        fixed64_field(&mut point, 3, 1_700_000_000_000_000_000); // time_unix_nano
        fixed64_field(&mut point, 4, value.to_bits());
        let mut data = Vec::new();
        len_field(&mut data, 1, &point);
        let mut metric = Vec::new();
        len_field(&mut metric, 1, name.as_bytes());
        len_field(&mut metric, 3, b"1"); // unit, skipped
        len_field(&mut metric, if gauge { 5 } else { 7 }, &data);
        metric
    }

    /// A histogram metric with one data point.
    pub fn histogram_metric(name: &str, count: u64, sum: f64) -> Vec<u8> {
        let mut point = Vec::new();
        fixed64_field(&mut point, 4, count);
        fixed64_field(&mut point, 5, sum.to_bits());
        let mut data = Vec::new();
        len_field(&mut data, 1, &point);
        let mut metric = Vec::new();
        len_field(&mut metric, 1, name.as_bytes());
        len_field(&mut metric, 9, &data);
        metric
    }

    /// `MetricsData` with one resource and one scope holding `metrics`.
    pub fn metrics_data(metrics: &[Vec<u8>]) -> Vec<u8> {
        let mut scope = Vec::new();
        len_field(&mut scope, 1, b"\x0a\x05kafka"); // InstrumentationScope, skipped
        for m in metrics {
            len_field(&mut scope, 2, m);
        }
        let mut resource = Vec::new();
        len_field(&mut resource, 1, b""); // Resource, skipped
        len_field(&mut resource, 2, &scope);
        let mut data = Vec::new();
        len_field(&mut data, 1, &resource);
        data
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    fn decode(payload: &[u8]) -> Result<Vec<MetricValue>, OtlpError> {
        let mut out = Vec::new();
        decode_metrics(payload, &mut |m| out.push(m))?;
        Ok(out)
    }

    fn sample() -> Vec<u8> {
        metrics_data(&[
            number_metric("org.apache.kafka.producer.record.send.rate", 12.5, true),
            number_metric("org.apache.kafka.producer.record.send.total", 40.0, false),
            histogram_metric("org.apache.kafka.client.request.latency", 3, 9.0),
        ])
    }

    #[test]
    fn gauges_sums_and_histograms_are_read() {
        let got = decode(&sample()).expect("valid");
        let names: Vec<(&str, f64)> = got.iter().map(|m| (m.name.as_str(), m.value)).collect();
        assert_eq!(
            names,
            vec![
                ("org.apache.kafka.producer.record.send.rate", 12.5),
                ("org.apache.kafka.producer.record.send.total", 40.0),
                ("org.apache.kafka.client.request.latency.count", 3.0),
                ("org.apache.kafka.client.request.latency.sum", 9.0),
            ]
        );
    }

    #[test]
    fn an_int_point_is_read_as_signed() {
        let mut point = Vec::new();
        fixed64_field(&mut point, 6, (-7i64) as u64);
        let mut gauge = Vec::new();
        len_field(&mut gauge, 1, &point);
        let mut metric = Vec::new();
        len_field(&mut metric, 1, b"m");
        len_field(&mut metric, 5, &gauge);
        assert_eq!(
            decode(&metrics_data(&[metric])).expect("valid"),
            vec![MetricValue { name: "m".into(), value: -7.0 }]
        );
    }

    #[test]
    fn empty_payload_has_no_metrics() {
        assert_eq!(decode(&[]), Ok(vec![]));
    }

    #[test]
    fn every_truncation_is_an_error_or_a_prefix_never_a_panic() {
        let full = sample();
        for cut in 0..full.len() {
            // A cut inside a nested message is always caught by its parent's length.
            assert!(decode(&full[..cut]).is_err() || cut == 0, "cut at {cut} decoded");
        }
    }

    #[test]
    fn a_huge_length_is_refused_without_allocating() {
        // Field 1 (ResourceMetrics), length 2^62: far past the input.
        let mut payload = Vec::new();
        varint(&mut payload, 1 << 3 | 2);
        varint(&mut payload, 1 << 62);
        payload.push(0);
        assert!(matches!(decode(&payload), Err(OtlpError::Truncated { what: "length-delimited field", .. })));
        // Length u64::MAX, which does not fit in usize on 32-bit targets either.
        let mut payload = Vec::new();
        varint(&mut payload, 1 << 3 | 2);
        varint(&mut payload, u64::MAX);
        assert!(matches!(decode(&payload), Err(OtlpError::Truncated { .. })));
    }

    #[test]
    fn hostile_varints_and_wire_types() {
        assert_eq!(decode(&[0x80; 11]), Err(OtlpError::VarintTooLong { at: 0 }));
        assert_eq!(decode(&[0x80]), Err(OtlpError::Truncated { what: "varint", at: 0 }));
        // Field 1 as a start-group (wire type 3).
        assert_eq!(decode(&[0x0b]), Err(OtlpError::UnsupportedWireType { wire_type: 3, field: 1, at: 0 }));
        // Field 1 as a varint where a message is expected.
        assert_eq!(decode(&[0x08, 0x01]), Err(OtlpError::WrongWireType { field: 1, at: 0 }));
        // A fixed64 cut short.
        assert_eq!(decode(&[0x09, 1, 2]), Err(OtlpError::Truncated { what: "fixed64", at: 1 }));
    }

    #[test]
    fn a_name_that_is_not_utf8_is_refused() {
        let mut metric = Vec::new();
        len_field(&mut metric, 1, &[0xff, 0xfe]);
        assert_eq!(decode(&metrics_data(&[metric])), Err(OtlpError::NameNotUtf8));
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut metric = number_metric("m", 1.0, true);
        varint(&mut metric, 99 << 3); // field 99, varint
        varint(&mut metric, 5);
        varint(&mut metric, 98 << 3 | 5); // field 98, fixed32
        metric.extend_from_slice(&[0; 4]);
        assert_eq!(decode(&metrics_data(&[metric])).expect("valid").len(), 1);
    }
}
