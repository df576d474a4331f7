//! Log lines from the data plane reach the server log through the control
//! plane: data-plane threads may not call `elog`, so the `log` facade queues
//! each line on a bounded channel and wakes the main thread, which reports it
//! with `ereport`. A full queue drops lines and counts them, never blocks, and
//! a line repeated many times a second is logged once a second with a count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

use crate::control::EventFd;

const LOG_QUEUE_DEPTH: usize = 4096;

pub struct LogLine {
    pub level: log::Level,
    pub message: String,
}

struct QueueLogger {
    lines: SyncSender<LogLine>,
    waker: Arc<EventFd>,
    dropped: AtomicU64,
    /// Per call site (file and line): when it last logged, and how many of
    /// its lines were held back since. A line repeated faster than once per
    /// [`REPEAT_INTERVAL_MS`] (refused connections, failed appends under a
    /// flood) is logged once per interval with the count of the others.
    repeats: std::sync::Mutex<RepeatSites>,
}

/// Per call site (file, line): (ms of its last line logged, lines held back since).
type RepeatSites = std::collections::HashMap<(&'static str, u32), (i64, u64)>;

const REPEAT_INTERVAL_MS: i64 = 1000;
/// Call sites remembered at most (a bound on the map, never reached by the
/// broker's few hundred log statements).
const REPEAT_SITES_MAX: usize = 4096;

static LOGGER: OnceLock<QueueLogger> = OnceLock::new();

impl log::Log for QueueLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let site = (record.file_static().unwrap_or(""), record.line().unwrap_or(0));
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let held_back = {
            let mut repeats = self.repeats.lock().unwrap_or_else(|p| p.into_inner());
            if repeats.len() >= REPEAT_SITES_MAX && !repeats.contains_key(&site) {
                repeats.clear();
            }
            let entry = repeats.entry(site).or_insert((i64::MIN / 2, 0));
            if now - entry.0 < REPEAT_INTERVAL_MS {
                entry.1 += 1;
                return;
            }
            entry.0 = now;
            std::mem::take(&mut entry.1)
        };
        let message = match held_back {
            0 => format!("kafgres: {}", record.args()),
            n => format!("kafgres: {} ({n} more like it in the last {}s)", record.args(), REPEAT_INTERVAL_MS / 1000),
        };
        let line = LogLine { level: record.level(), message };
        match self.lines.try_send(line) {
            Ok(()) => self.waker.wake(),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn flush(&self) {}
}

/// Installs the queue logger for this process; returns the receiving end.
/// Only the first call in a process installs it (a restarted worker is a new
/// process, so this is once per worker).
pub fn install(waker: Arc<EventFd>) -> Option<Receiver<LogLine>> {
    let (lines, receiver) = sync_channel(LOG_QUEUE_DEPTH);
    LOGGER.set(QueueLogger { lines, waker, dropped: AtomicU64::new(0), repeats: std::sync::Mutex::default() }).ok()?;
    let logger = LOGGER.get()?;
    log::set_logger(logger).ok()?;
    log::set_max_level(crate::worker::config::log_level());
    Some(receiver)
}

/// `kafgres.log_level` after a reload: which of the broker's lines are queued.
pub fn set_level(level: log::LevelFilter) {
    log::set_max_level(level);
}

/// Lines dropped because the queue was full since the last call.
pub fn take_dropped() -> u64 {
    LOGGER.get().map(|l| l.dropped.swap(0, Ordering::Relaxed)).unwrap_or(0)
}

/// A warning repeated at most once per interval: the ones in between are
/// counted and the count is added to the next one that is logged, so a fault
/// that repeats every millisecond costs one line per interval, not a flood.
/// Main thread only (it calls `ereport`).
pub struct RateLimited {
    interval_ms: i64,
    last_ms: std::sync::atomic::AtomicI64,
    suppressed: AtomicU64,
}

impl RateLimited {
    pub const fn new(interval: std::time::Duration) -> RateLimited {
        RateLimited {
            interval_ms: interval.as_millis() as i64,
            last_ms: std::sync::atomic::AtomicI64::new(i64::MIN / 2),
            suppressed: AtomicU64::new(0),
        }
    }

    pub fn warn(&self, message: &str) {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        if now - self.last_ms.load(Ordering::Relaxed) < self.interval_ms {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.last_ms.store(now, Ordering::Relaxed);
        match self.suppressed.swap(0, Ordering::Relaxed) {
            0 => pgrx::warning!("{message}"),
            n => pgrx::warning!("{message} ({n} more like it since the last report)"),
        }
    }
}
