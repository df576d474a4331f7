//! The Prometheus text exposition format (version 0.0.4): `# HELP` and
//! `# TYPE` once per family, then its samples, label values escaped.

use std::collections::HashSet;
use std::fmt::Write;

/// What a family is, as `# TYPE` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A scrape's text, family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
    families: HashSet<String>,
    current: Option<(String, Kind)>,
}

impl Exposition {
    /// Starts the family `name`: its samples follow. A family started twice
    /// would be an invalid exposition, so a second start is a programming
    /// error (and its samples are dropped in release builds).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> bool {
        if !self.families.insert(name.to_owned()) {
            debug_assert!(false, "metric family {name} written twice");
            self.current = None;
            return false;
        }
        let _ = writeln!(self.text, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.name());
        self.current = Some((name.to_owned(), kind));
        true
    }

    /// One sample of the current family.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let Some((name, kind)) = &self.current else { return };
        debug_assert!(*kind != Kind::Histogram, "histogram samples go through `histogram`");
        let name = name.clone();
        self.line(&name, labels, None, value);
    }

    /// One histogram of the current family (a histogram family) from
    /// power-of-two microsecond buckets (`(upper bound µs, count)`, the last
    /// bound `u64::MAX` meaning +Inf) and the sum of the spans in µs, in seconds.
    pub fn histogram(&mut self, labels: &[(&str, &str)], buckets: &[(u64, u64)], sum_micros: u64) {
        let Some((name, Kind::Histogram)) = &self.current else { return };
        let name = name.clone();
        let mut cumulative = 0u64;
        let bucket_name = format!("{name}_bucket");
        for &(bound, count) in buckets {
            cumulative += count;
            let le = if bound == u64::MAX { "+Inf".to_owned() } else { format_value(bound as f64 / 1e6) };
            self.line(&bucket_name, labels, Some(&le), cumulative as f64);
        }
        if buckets.last().is_none_or(|&(bound, _)| bound != u64::MAX) {
            self.line(&bucket_name, labels, Some("+Inf"), cumulative as f64);
        }
        self.line(&format!("{name}_sum"), labels, None, sum_micros as f64 / 1e6);
        self.line(&format!("{name}_count"), labels, None, cumulative as f64);
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], le: Option<&str>, value: f64) {
        self.text.push_str(name);
        let mut pairs = labels.iter().map(|&(k, v)| (k, v)).chain(le.map(|le| ("le", le))).peekable();
        if pairs.peek().is_some() {
            self.text.push('{');
            for (i, (key, value)) in pairs.enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{key}=\"{}\"", escape_label_value(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", format_value(value));
    }

    pub fn into_text(self) -> String {
        self.text
    }
}

fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Integers without a fraction (counters up to 2^53 stay exact), others as
/// Rust's shortest round-trip form, infinities as Prometheus spells them.
fn format_value(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if value.is_nan() {
        return "NaN".into();
    }
    if value.fract() == 0.0 && value.abs() < 9.007_199_254_740_992e15 {
        return format!("{}", value as i64);
    }
    format!("{value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_help_and_type_once_and_labels_are_escaped() {
        let mut out = Exposition::default();
        out.family("kafka_x_total", Kind::Counter, "Things.\nMore");
        out.sample(&[("topic", "a\"b\\c\nd")], 3.0);
        out.sample(&[], 0.5);
        let text = out.into_text();
        assert_eq!(
            text,
            "# HELP kafka_x_total Things.\\nMore\n# TYPE kafka_x_total counter\n\
             kafka_x_total{topic=\"a\\\"b\\\\c\\nd\"} 3\nkafka_x_total 0.5\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_in_seconds_with_an_inf_bucket() {
        let mut out = Exposition::default();
        out.family("d_seconds", Kind::Histogram, "Spans.");
        out.histogram(&[("request", "Produce")], &[(1, 2), (2, 0), (4, 1), (u64::MAX, 1)], 1_500_000);
        let text = out.into_text();
        assert!(text.contains("d_seconds_bucket{request=\"Produce\",le=\"0.000001\"} 2\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{request=\"Produce\",le=\"0.000004\"} 3\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{request=\"Produce\",le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("d_seconds_sum{request=\"Produce\"} 1.5\n"), "{text}");
        assert!(text.contains("d_seconds_count{request=\"Produce\"} 4\n"), "{text}");
    }
}
