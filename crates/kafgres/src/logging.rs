//! Log lines from the data plane reach the server log through the control
//! plane: data-plane threads may not call `elog`, so the `log` facade queues
//! each line on a bounded channel and wakes the main thread, which reports it
//! with `ereport`. A full queue drops lines and counts them, never blocks.

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
}

static LOGGER: OnceLock<QueueLogger> = OnceLock::new();

impl log::Log for QueueLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = LogLine { level: record.level(), message: format!("kafgres: {}", record.args()) };
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
    LOGGER.set(QueueLogger { lines, waker, dropped: AtomicU64::new(0) }).ok()?;
    let logger = LOGGER.get()?;
    log::set_logger(logger).ok()?;
    log::set_max_level(log::LevelFilter::Info);
    Some(receiver)
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
