//! A byte rate over a sliding window of samples, as Kafka's quota sensors
//! measure it (`quota.window.num` = 11 samples of `quota.window.size.seconds`
//! = 1 s), and the throttle time that brings an observed rate back to its
//! quota. Pure: the caller passes the clock.

use std::time::Duration;

/// Samples in the window (Kafka's `quota.window.num`).
pub const SAMPLES: usize = 11;
/// One sample's span (Kafka's `quota.window.size.seconds`).
pub const SAMPLE_MS: u64 = 1000;

/// Wall-clock milliseconds, the samples' clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[derive(Debug, Clone)]
pub struct Rate {
    /// (sample start in ms, bytes), oldest first, at most [`SAMPLES`].
    samples: std::collections::VecDeque<(u64, f64)>,
}

impl Default for Rate {
    fn default() -> Self {
        Rate { samples: std::collections::VecDeque::with_capacity(SAMPLES) }
    }
}

impl Rate {
    /// Adds `bytes` at `now_ms`.
    pub fn record(&mut self, now_ms: u64, bytes: f64) {
        let start = now_ms - now_ms % SAMPLE_MS;
        self.expire(now_ms);
        match self.samples.back_mut() {
            Some((s, total)) if *s == start => *total += bytes,
            _ => {
                if self.samples.len() == SAMPLES {
                    self.samples.pop_front();
                }
                self.samples.push_back((start, bytes));
            }
        }
    }

    fn expire(&mut self, now_ms: u64) {
        let window = SAMPLES as u64 * SAMPLE_MS;
        while self.samples.front().is_some_and(|(s, _)| s + window <= now_ms) {
            self.samples.pop_front();
        }
    }

    /// The span the rate is taken over, as Kafka's `Rate.windowSize`: from
    /// the oldest sample kept to now, but at least the full window less one
    /// sample (so a first burst is not divided by a few milliseconds).
    fn window_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.samples.front().map_or(now_ms, |(s, _)| *s);
        (now_ms - oldest).max((SAMPLES as u64 - 1) * SAMPLE_MS)
    }

    /// Bytes per second over the window.
    pub fn per_second(&mut self, now_ms: u64) -> f64 {
        self.expire(now_ms);
        let total: f64 = self.samples.iter().map(|(_, b)| b).sum();
        total * 1000.0 / self.window_ms(now_ms) as f64
    }

    /// How long the client must wait for its rate to fall back to `quota`
    /// (Kafka's `ClientQuotaManager.throttleTime`): zero while under it,
    /// else `(rate - quota) / quota * window`, at most the window.
    pub fn throttle(&mut self, now_ms: u64, quota: f64) -> Duration {
        let rate = self.per_second(now_ms);
        if rate <= quota || quota <= 0.0 {
            return Duration::ZERO;
        }
        let window = self.window_ms(now_ms) as f64;
        let ms = ((rate - quota) / quota * window).min(SAMPLES as f64 * SAMPLE_MS as f64);
        Duration::from_millis(ms.round() as u64)
    }

    /// Whether nothing was recorded for a whole window (the sensor may go).
    pub fn idle(&mut self, now_ms: u64) -> bool {
        self.expire(now_ms);
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_the_quota_nothing_is_throttled() {
        let mut rate = Rate::default();
        for second in 0..20u64 {
            rate.record(second * 1000, 900.0);
            assert_eq!(rate.throttle(second * 1000 + 500, 1000.0), Duration::ZERO, "second {second}");
        }
    }

    #[test]
    fn a_burst_is_throttled_in_proportion_to_its_excess() {
        let mut rate = Rate::default();
        // 20,000 bytes at once against 1,000/s over a 10 s minimum window:
        // 2,000/s observed, twice the quota, so the client waits one window.
        rate.record(100, 20_000.0);
        assert_eq!(rate.per_second(100), 2000.0);
        assert_eq!(rate.throttle(100, 1000.0), Duration::from_millis(10_000));
        // 15,000: 1,500/s, half over: half a window.
        let mut rate = Rate::default();
        rate.record(100, 15_000.0);
        assert_eq!(rate.throttle(100, 1000.0), Duration::from_millis(5_000));
        // Never more than the window, however large the burst.
        let mut rate = Rate::default();
        rate.record(100, 1e12);
        assert_eq!(rate.throttle(100, 1.0), Duration::from_millis(11_000));
    }

    #[test]
    fn old_samples_leave_the_window() {
        let mut rate = Rate::default();
        rate.record(0, 50_000.0);
        assert!(rate.throttle(0, 1000.0) > Duration::ZERO);
        assert!(!rate.idle(10_999));
        assert!(rate.idle(11_000));
        assert_eq!(rate.throttle(11_000, 1000.0), Duration::ZERO);
        assert_eq!(rate.per_second(11_000), 0.0);
    }

    #[test]
    fn a_steady_rate_converges_on_what_was_sent() {
        let mut rate = Rate::default();
        for ms in (0..30_000u64).step_by(100) {
            rate.record(ms, 300.0); // 3,000 bytes/s
        }
        let observed = rate.per_second(30_000);
        assert!((2700.0..=3000.0).contains(&observed), "{observed}");
    }
}
