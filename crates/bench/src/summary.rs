//! Latency summaries and throughput figures, formatted as `key=value` pairs.
//!
//! Percentiles are computed exactly from every sample, never estimated from a
//! histogram or a reservoir: the samples are sorted and the nearest-rank
//! method picks the value. For a quantile `q` in (0, 1] over `n` sorted
//! samples, the result is the sample at 1-based rank `ceil(q * n)`, that is
//! the smallest sample such that at least `q * n` samples are less than or
//! equal to it. No interpolation, so every reported value is a latency that
//! was actually observed; with 200 samples p99 is the 198th smallest and
//! p99.9 is the largest. A workload keeps at most a few million samples
//! (its count or rate times duration bounds them), so sorting is cheap.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// The value at quantile `q` (0 < q <= 1) of `sorted`, by nearest rank.
/// `sorted` must be in ascending order; returns `None` when it is empty.
pub fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // ceil(q * n) as a 1-based rank, clamped to [1, n]; the clamp absorbs
    // q <= 0 and the floating-point error of q * n landing just above an
    // integer.
    let rank = (q * n as f64).ceil() as usize;
    let rank = rank.clamp(1, n);
    Some(sorted[rank - 1])
}

/// Minimum, mean, chosen percentiles and maximum of a set of latencies.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySummary {
    pub sample_count: usize,
    pub min: Duration,
    pub avg: Duration,
    pub max: Duration,
    /// (label, value), e.g. ("p99", 4.2 ms), in the order asked for.
    pub percentiles: Vec<(&'static str, Duration)>,
}

impl LatencySummary {
    /// Summarises `samples` (any order; sorted in place). `quantiles` pairs a
    /// label with its quantile, e.g. `("p50", 0.50)`. Returns `None` when
    /// there are no samples, so a caller cannot print a made-up zero.
    pub fn from_samples(samples: &mut [Duration], quantiles: &[(&'static str, f64)]) -> Option<LatencySummary> {
        samples.sort_unstable();
        let (&min, &max) = (samples.first()?, samples.last()?);
        let total: Duration = samples.iter().sum();
        // u32 division is enough: more than 4 billion samples never fit.
        let avg = total / u32::try_from(samples.len()).unwrap_or(u32::MAX);
        let percentiles = quantiles.iter().map(|&(label, q)| (label, percentile(samples, q).unwrap_or(max))).collect();
        Some(LatencySummary { sample_count: samples.len(), min, avg, max, percentiles })
    }
}

/// Milliseconds with microsecond resolution, the unit every line uses.
pub struct Millis(pub Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.0.as_secs_f64() * 1e3)
    }
}

impl fmt::Display for LatencySummary {
    /// `min=..ms avg=..ms p50=..ms ... max=..ms`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "min={} avg={}", Millis(self.min), Millis(self.avg))?;
        for (label, value) in &self.percentiles {
            write!(f, " {label}={}", Millis(*value))?;
        }
        write!(f, " max={}", Millis(self.max))
    }
}

/// Writes the latency fields of a result line: the summary, or every field
/// as `nan` when no sample was taken (all sends failed), so the line keeps
/// the same keys and a parser sees the gap instead of a zero.
pub fn latency_fields(summary: Option<&LatencySummary>, quantiles: &[(&'static str, f64)]) -> String {
    match summary {
        Some(s) => s.to_string(),
        None => {
            let mut out = String::from("min=nan avg=nan");
            for (label, _) in quantiles {
                out.push_str(&format!(" {label}=nan"));
            }
            out.push_str(" max=nan");
            out
        }
    }
}

/// Writes raw samples for plotting: a header line `at_s latency_ms`, then one
/// line per sample in the order taken, `at` being seconds since the
/// workload's own origin (see each workload) and the latency in milliseconds.
pub fn write_samples(path: &Path, samples: &[(Duration, Duration)]) -> io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "at_s latency_ms")?;
    for (at, latency) in samples {
        writeln!(out, "{:.6} {:.3}", at.as_secs_f64(), latency.as_secs_f64() * 1e3)?;
    }
    out.flush()
}

/// Records and bytes moved in an elapsed time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    pub record_count: u64,
    pub byte_count: u64,
    pub elapsed: Duration,
}

impl Throughput {
    pub fn records_per_s(&self) -> f64 {
        per_second(self.record_count as f64, self.elapsed)
    }

    /// MB/s with MB = 10^6 bytes (not MiB), counting record values only.
    pub fn mb_per_s(&self) -> f64 {
        per_second(self.byte_count as f64 / 1e6, self.elapsed)
    }
}

impl fmt::Display for Throughput {
    /// `seconds=.. records_per_s=.. mb_per_s=..`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seconds={:.3} records_per_s={:.1} mb_per_s={:.3}",
            self.elapsed.as_secs_f64(),
            self.records_per_s(),
            self.mb_per_s()
        )
    }
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        amount / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn percentile_uses_nearest_rank() {
        // 1..=100 ms: the q-quantile is exactly q * 100 ms.
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 0.50), Some(ms(50)));
        assert_eq!(percentile(&sorted, 0.95), Some(ms(95)));
        assert_eq!(percentile(&sorted, 0.99), Some(ms(99)));
        assert_eq!(percentile(&sorted, 0.999), Some(ms(100)));
        assert_eq!(percentile(&sorted, 1.0), Some(ms(100)));
        // Rank rounds up: over 4 samples p50 is the 2nd, p51 the 3rd.
        let four = [ms(10), ms(20), ms(30), ms(40)];
        assert_eq!(percentile(&four, 0.50), Some(ms(20)));
        assert_eq!(percentile(&four, 0.51), Some(ms(30)));
        // Degenerate quantiles stay inside the samples.
        assert_eq!(percentile(&four, 0.0), Some(ms(10)));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn summary_sorts_and_reports_every_field() {
        let mut samples = vec![ms(5), ms(1), ms(3), ms(2), ms(4)];
        let quantiles = [("p50", 0.50), ("p99", 0.99)];
        let s = LatencySummary::from_samples(&mut samples, &quantiles).expect("samples");
        assert_eq!(s.sample_count, 5);
        assert_eq!((s.min, s.avg, s.max), (ms(1), ms(3), ms(5)));
        assert_eq!(s.percentiles, vec![("p50", ms(3)), ("p99", ms(5))]);
        assert_eq!(s.to_string(), "min=1.000ms avg=3.000ms p50=3.000ms p99=5.000ms max=5.000ms");
    }

    #[test]
    fn summary_of_nothing_is_none_and_prints_nan() {
        let quantiles = [("p50", 0.50)];
        let s = LatencySummary::from_samples(&mut [], &quantiles);
        assert!(s.is_none());
        assert_eq!(latency_fields(s.as_ref(), &quantiles), "min=nan avg=nan p50=nan max=nan");
    }

    #[test]
    fn sub_millisecond_latencies_keep_microseconds() {
        assert_eq!(Millis(Duration::from_micros(1234)).to_string(), "1.234ms");
        assert_eq!(Millis(Duration::from_nanos(250_400)).to_string(), "0.250ms");
    }

    #[test]
    fn samples_file_has_a_header_and_one_line_per_sample() {
        let dir = std::env::temp_dir().join(format!("kafgres-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("samples.txt");
        write_samples(&path, &[(ms(0), Duration::from_micros(1500)), (ms(1250), ms(2))]).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(text, "at_s latency_ms\n0.000000 1.500\n1.250000 2.000\n");
    }

    #[test]
    fn throughput_uses_decimal_megabytes() {
        let t = Throughput { record_count: 2000, byte_count: 2_000_000, elapsed: Duration::from_secs(2) };
        assert_eq!(t.records_per_s(), 1000.0);
        assert_eq!(t.mb_per_s(), 1.0);
        assert_eq!(t.to_string(), "seconds=2.000 records_per_s=1000.0 mb_per_s=1.000");
        let zero = Throughput { record_count: 1, byte_count: 1, elapsed: Duration::ZERO };
        assert_eq!(zero.records_per_s(), 0.0);
    }
}
