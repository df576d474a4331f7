//! Waiting for delivery reports by blocking on a producer's event queue.
//!
//! Why not `BaseProducer::poll` / `flush`: in rdkafka 0.37 and later (0.38 is
//! used here) `poll(timeout)` keeps serving events until the whole timeout has
//! passed, and `flush` waits in steps of `poll(100 ms)`. A benchmark that
//! waits for one record's report with either measures the timeout, not the
//! broker: a 1 ms acknowledgement shows up as 100 ms. So this module does what
//! `rd_kafka_poll` does in C: one blocking `rd_kafka_queue_poll` on the
//! producer's main queue, which returns as soon as *one* event is there (or the
//! timeout passes), then serves that event. No sleeping and no spinning.
//!
//! The producer is created by the `rdkafka` crate with the event API, so its
//! delivery reports, errors and logs all arrive on that main queue. Only this
//! module reads the queue; the workloads never call `BaseProducer::poll` or
//! `flush` (the crate's `Drop` still calls `flush`, which is harmless once the
//! queue is drained). Delivery opaques are not used (`()`), so destroying the
//! event after reading its messages leaks nothing.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, Producer};
use rdkafka_sys as rdsys;

/// What one served event said about the records in flight.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Served {
    /// Records the broker acknowledged.
    pub delivered_count: u64,
    /// Records that failed (after librdkafka's own retries).
    pub failed_count: u64,
    /// The first failure's reason, for the diagnostics on stderr.
    pub first_failure: Option<String>,
    /// A fatal client error: the producer cannot be used any more.
    pub fatal: Option<String>,
}

/// A reference to one producer's main event queue.
pub struct DeliveryQueue<'p> {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    // The queue must not outlive the producer it belongs to.
    _producer: PhantomData<&'p BaseProducer>,
}

impl<'p> DeliveryQueue<'p> {
    pub fn of(producer: &'p BaseProducer) -> DeliveryQueue<'p> {
        // SAFETY: native_ptr is the live rd_kafka_t of `producer`, which the
        // borrow keeps alive; rd_kafka_queue_get_main returns a new reference
        // to its main queue (never NULL for a valid handle), released in Drop.
        let raw = unsafe { rdsys::rd_kafka_queue_get_main(producer.client().native_ptr()) };
        let queue = NonNull::new(raw).expect("librdkafka returned no main queue for a live producer");
        DeliveryQueue { queue, _producer: PhantomData }
    }

    /// Blocks until the next event arrives or `timeout` passes (a zero
    /// timeout only looks), serves that one event and says what it reported.
    pub fn serve_one(&self, timeout: Duration) -> Served {
        // Round up, so a wait of 0.3 ms is a 1 ms wait and not a busy loop.
        let timeout_ms = c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(c_int::MAX);
        // SAFETY: the queue reference is valid until Drop.
        let event = unsafe { rdsys::rd_kafka_queue_poll(self.queue.as_ptr(), timeout_ms) };
        let Some(event) = NonNull::new(event) else {
            return Served::default();
        };
        // SAFETY: `event` is a live event that rd_kafka_queue_poll handed to
        // us, and it is destroyed only after this call returns (just below),
        // as serve_event requires.
        let served = unsafe { serve_event(event.as_ptr()) };
        // SAFETY: we own `event` (queue_poll transferred it) and destroy it
        // exactly once; serve_event copied out every string it read from it,
        // so nothing borrowed from the event outlives it.
        unsafe { rdsys::rd_kafka_event_destroy(event.as_ptr()) };
        served
    }

    /// Serves events until `done(&totals)` holds or `deadline` passes,
    /// blocking on the queue in between. Returns the totals served.
    pub fn serve_until(&self, deadline: Instant, mut done: impl FnMut(&Served) -> bool) -> Served {
        let mut totals = Served::default();
        while !done(&totals) && totals.fatal.is_none() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            totals.add(self.serve_one(deadline - now));
        }
        totals
    }
}

impl Served {
    pub fn add(&mut self, other: Served) {
        self.delivered_count += other.delivered_count;
        self.failed_count += other.failed_count;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
        if self.fatal.is_none() {
            self.fatal = other.fatal;
        }
    }
}

impl Drop for DeliveryQueue<'_> {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `of`, once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) };
    }
}

/// Serves one event: counts a delivery report's messages, prints errors and
/// logs to stderr, ignores the rest.
///
/// # Safety
///
/// `event` must be a live event that the caller owns and destroys only after
/// this returns: the delivery reports and strings read here belong to it.
unsafe fn serve_event(event: *mut rdsys::rd_kafka_event_t) -> Served {
    let mut served = Served::default();
    match rdsys::rd_kafka_event_type(event) {
        rdsys::RD_KAFKA_EVENT_DR => loop {
            let message = rdsys::rd_kafka_event_message_next(event);
            if message.is_null() {
                break;
            }
            let err = (*message).err;
            if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                served.delivered_count += 1;
            } else {
                served.failed_count += 1;
                if served.first_failure.is_none() {
                    served.first_failure = Some(c_text(rdsys::rd_kafka_err2str(err)));
                }
            }
        },
        rdsys::RD_KAFKA_EVENT_ERROR => {
            let reason = c_text(rdsys::rd_kafka_event_error_string(event));
            if rdsys::rd_kafka_event_error_is_fatal(event) != 0 {
                eprintln!("kafgres-bench: fatal client error: {reason}");
                served.fatal = Some(reason);
            } else {
                // Transient (a dropped connection, a broker going away):
                // librdkafka retries; a record it gives up on arrives as a
                // failed delivery report and is counted there.
                eprintln!("kafgres-bench: client error: {reason}");
            }
        }
        rdsys::RD_KAFKA_EVENT_LOG => {
            let mut facility: *const c_char = std::ptr::null();
            let mut text: *const c_char = std::ptr::null();
            let mut level: c_int = 0;
            if rdsys::rd_kafka_event_log(event, &mut facility, &mut text, &mut level) == 0 {
                eprintln!("librdkafka {level} {}: {}", c_text(facility), c_text(text));
            }
        }
        _ => {}
    }
    served
}

/// Copies a C string that librdkafka owns; NULL reads as empty.
///
/// # Safety
///
/// `text` is NULL or a NUL-terminated string that stays valid for this call.
unsafe fn c_text(text: *const c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}
