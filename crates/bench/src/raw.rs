//! The two per-record calls of the throughput workloads, made on librdkafka's
//! C API directly instead of through the `rdkafka` crate's wrappers.
//!
//! Why: client and broker share this machine's two cores, so whatever the
//! client spends per record is taken from the broker and caps what a
//! benchmark can show about it. Profiled (perf, 100-byte produce), the
//! crate's `BaseProducer::send` builds a `CString` of the topic and looks the
//! topic up by name for every record, and always passes
//! `RD_KAFKA_MSG_F_COPY` (a malloc and a copy of each value, which the
//! librdkafka broker thread then copies again into the request); its
//! `BaseConsumer::poll` serves one record per queue poll. A C program written
//! for throughput does neither, and neither does this module:
//!
//! - [`TopicProducer::send_group`] and [`TopicProducer::send_spread`]
//!   enqueue a group of records per call (`rd_kafka_produce_batch`: one
//!   clock read per group, and one partition lock when the group goes to
//!   one partition) on a topic handle made once, in librdkafka's no-copy
//!   mode on a value that lives until the process exits, which that mode
//!   requires;
//! - [`ConsumerQueue::consume_batch`] takes up to N records per call with
//!   `rd_kafka_consume_batch_queue`.
//!
//! Both are the same for every broker; they change what the client costs,
//! not what it asks of the broker (the requests on the wire are the same).

use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as rdsys;

use crate::error::BenchError;

/// librdkafka's "no partition" (`RD_KAFKA_PARTITION_UA`), passed to
/// `rd_kafka_produce_batch` when each message names its own.
const PARTITION_UNASSIGNED: i32 = -1;

/// A producer's handle on one topic.
pub struct TopicProducer<'p> {
    topic: NonNull<rdsys::rd_kafka_topic_t>,
    _producer: PhantomData<&'p BaseProducer>,
}

impl<'p> TopicProducer<'p> {
    pub fn new(producer: &'p BaseProducer, topic: &str) -> Result<TopicProducer<'p>, BenchError> {
        let name = CString::new(topic).map_err(|_| BenchError::Usage(format!("topic {topic:?} contains a NUL")))?;
        // SAFETY: the producer's handle is live for 'p; a NULL config makes
        // librdkafka use the topic defaults; the name is copied.
        let raw =
            unsafe { rdsys::rd_kafka_topic_new(producer.client().native_ptr(), name.as_ptr(), std::ptr::null_mut()) };
        let topic = NonNull::new(raw).ok_or_else(|| BenchError::Topic {
            topic: topic.to_string(),
            reason: format!("librdkafka refused a topic handle: {}", last_error()),
        })?;
        Ok(TopicProducer { topic, _producer: PhantomData })
    }

    /// Enqueues `count` records with `value` (no key), all to `partition`,
    /// with one `rd_kafka_produce_batch`: one clock read and one partition
    /// lock for the group. See [`Self::enqueue`] for the result.
    pub fn send_group(
        &self,
        partition: i32,
        count: usize,
        value: &'static [u8],
        slots: &mut Vec<rdsys::rd_kafka_message_t>,
    ) -> (usize, Option<RDKafkaErrorCode>) {
        fill(slots, std::iter::repeat_n(partition, count), value);
        self.enqueue(partition, 0, slots)
    }

    /// Enqueues one record with `value` per entry of `partitions`, each to
    /// its own partition, with one `rd_kafka_produce_batch`.
    pub fn send_spread(
        &self,
        partitions: &[i32],
        value: &'static [u8],
        slots: &mut Vec<rdsys::rd_kafka_message_t>,
    ) -> (usize, Option<RDKafkaErrorCode>) {
        fill(slots, partitions.iter().copied(), value);
        // F_PARTITION: each message's own partition field is used.
        self.enqueue(PARTITION_UNASSIGNED, rdsys::RD_KAFKA_MSG_F_PARTITION, slots)
    }

    /// Enqueues the records of `chunks` whose indexes are in `pending`, each
    /// chunk of `values` (`values.len() / chunks` bytes) a record's own value
    /// (no key), all to `partition` (the caller's sticky choice: librdkafka's
    /// partitioner would take the partition lock once per record), with one
    /// `rd_kafka_produce_batch` in copy mode: librdkafka copies each value
    /// before it returns, so the caller may rewrite `values` for the next
    /// group. `pending` keeps the indexes of the refused records (in order),
    /// for the caller to send again or give up; returns how many were
    /// enqueued and the first refusal's error.
    pub fn send_copies(
        &self,
        partition: i32,
        values: &[u8],
        chunks: usize,
        pending: &mut Vec<usize>,
        slots: &mut Vec<rdsys::rd_kafka_message_t>,
    ) -> (usize, Option<RDKafkaErrorCode>) {
        let size = values.len().checked_div(chunks).unwrap_or(0);
        slots.clear();
        slots.extend(pending.iter().filter(|&&i| i < chunks).map(|&i| rdsys::rd_kafka_message_t {
            payload: values[i * size..].as_ptr() as *mut c_void,
            len: size,
            ..empty_message(partition)
        }));
        let (enqueued, first_error) = self.enqueue(partition, rdsys::RD_KAFKA_MSG_F_COPY, slots);
        let mut outcome = slots.iter().map(|m| m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
        pending.retain(|&i| i < chunks && outcome.next().unwrap_or(false));
        (enqueued, first_error)
    }

    /// Returns how many of `slots` were enqueued and the error of the first
    /// refused one, if any; refused records are simply not sent (the caller
    /// counts only enqueued ones). Values are not copied unless `flags` says
    /// `RD_KAFKA_MSG_F_COPY`: librdkafka reads them until each record's
    /// delivery report, which a `'static` borrow outlives.
    fn enqueue(
        &self,
        partition: i32,
        flags: i32,
        slots: &mut [rdsys::rd_kafka_message_t],
    ) -> (usize, Option<RDKafkaErrorCode>) {
        let count = i32::try_from(slots.len()).unwrap_or(i32::MAX);
        // SAFETY: the topic handle is live; `slots` holds `count` initialised
        // messages whose payloads are either 'static and never freed, or
        // copied by librdkafka before this call returns (F_COPY); never
        // F_FREE.
        let enqueued =
            unsafe { rdsys::rd_kafka_produce_batch(self.topic.as_ptr(), partition, flags, slots.as_mut_ptr(), count) };
        let first_error = slots
            .iter()
            .find(|m| m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
            .map(|m| RDKafkaErrorCode::from(m.err));
        (usize::try_from(enqueued).unwrap_or(0), first_error)
    }
}

/// Fills `slots` with one keyless message of `value` per partition given.
fn fill(slots: &mut Vec<rdsys::rd_kafka_message_t>, partitions: impl Iterator<Item = i32>, value: &'static [u8]) {
    slots.clear();
    slots.extend(partitions.map(|partition| rdsys::rd_kafka_message_t {
        payload: value.as_ptr() as *mut c_void,
        len: value.len(),
        ..empty_message(partition)
    }));
}

/// A keyless message without a value, for `partition`.
fn empty_message(partition: i32) -> rdsys::rd_kafka_message_t {
    rdsys::rd_kafka_message_t {
        err: rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
        rkt: std::ptr::null_mut(),
        partition,
        payload: std::ptr::null_mut(),
        len: 0,
        key: std::ptr::null_mut(),
        key_len: 0,
        offset: 0,
        _private: std::ptr::null_mut(),
    }
}

impl Drop for TopicProducer<'_> {
    fn drop(&mut self) {
        // SAFETY: releases the handle taken in `new`, once; records already
        // enqueued keep their own reference to the topic.
        unsafe { rdsys::rd_kafka_topic_destroy(self.topic.as_ptr()) };
    }
}

/// The error of the last failed librdkafka call on this thread.
fn last_error() -> RDKafkaErrorCode {
    // SAFETY: reads a thread-local error code.
    RDKafkaErrorCode::from(unsafe { rdsys::rd_kafka_last_error() })
}

/// What [`ConsumerQueue::consume_batch`] hands to its visitor per record.
pub struct ConsumedRecord<'m> {
    pub partition: i32,
    pub offset: i64,
    /// The value, valid during the visitor's call only (empty when null).
    pub value: &'m [u8],
}

/// A consumer's queue of fetched records (the consumer group queue, where
/// `BaseConsumer` routes everything).
pub struct ConsumerQueue<'c> {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    consumer: &'c BaseConsumer,
    /// Room for the messages of one batch.
    slots: Vec<*mut rdsys::rd_kafka_message_t>,
}

/// Records one [`ConsumerQueue::consume_batch`] takes at most: one queue poll
/// per record would make the client, not the broker, the measured bound.
pub const CONSUME_BATCH_RECORDS: usize = 1024;

impl<'c> ConsumerQueue<'c> {
    pub fn of(consumer: &'c BaseConsumer) -> Result<ConsumerQueue<'c>, BenchError> {
        // SAFETY: the consumer's handle is live for 'c; the returned queue
        // reference is released in Drop.
        let raw = unsafe { rdsys::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        let queue = NonNull::new(raw).ok_or_else(|| BenchError::Usage("the consumer has no group queue".into()))?;
        Ok(ConsumerQueue { queue, consumer, slots: vec![std::ptr::null_mut(); CONSUME_BATCH_RECORDS] })
    }

    /// Takes the records already fetched, up to [`CONSUME_BATCH_RECORDS`], or when there
    /// are none waits up to `timeout` for the first one; calls `on_record`
    /// for each. A consumer error travels as a message with `err` set: each
    /// is printed and counted in `client_errors`, and a fatal one ends the
    /// workload (the error returned). Returns how many messages (records and
    /// errors) it took.
    ///
    /// Two calls because `rd_kafka_consume_batch_queue` blocks until the
    /// batch is full or the timeout passes: asked for many with a timeout,
    /// it would hold the last records of a topic for the whole timeout.
    pub fn consume_batch(
        &mut self,
        timeout: Duration,
        mut on_record: impl FnMut(ConsumedRecord<'_>),
        client_errors: &mut u64,
    ) -> Result<usize, BenchError> {
        let errors_before = *client_errors;
        let mut slots = std::mem::take(&mut self.slots);
        let mut taken = self.take(0, &mut slots);
        if taken == 0 {
            let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
            taken = self.take(timeout_ms, &mut slots[..1]);
        }
        for &message in &slots[..taken] {
            // SAFETY: each of the first `taken` slots is a live message,
            // read here and destroyed exactly once; its payload (`len`
            // bytes) lives until that destroy, after the visitor returned.
            unsafe {
                let m = &*message;
                if m.err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    let value = if m.payload.is_null() {
                        &[][..]
                    } else {
                        std::slice::from_raw_parts(m.payload as *const u8, m.len)
                    };
                    on_record(ConsumedRecord { partition: m.partition, offset: m.offset, value });
                } else {
                    let text = std::ffi::CStr::from_ptr(rdsys::rd_kafka_message_errstr(message))
                        .to_string_lossy()
                        .into_owned();
                    *client_errors += 1;
                    eprintln!("kafgres-bench: consumer error: {}: {text}", RDKafkaErrorCode::from(m.err));
                }
                rdsys::rd_kafka_message_destroy(message);
            }
        }
        self.slots = slots;
        if *client_errors > errors_before {
            if let Some((code, reason)) = self.consumer.client().fatal_error() {
                return Err(BenchError::Fatal(format!("{code}: {reason}")));
            }
        }
        Ok(taken)
    }

    /// One `rd_kafka_consume_batch_queue`: the number of messages it put
    /// into the first slots, which the caller now owns.
    fn take(&self, timeout_ms: i32, slots: &mut [*mut rdsys::rd_kafka_message_t]) -> usize {
        // SAFETY: `slots` has room for `slots.len()` pointers.
        let taken = unsafe {
            rdsys::rd_kafka_consume_batch_queue(self.queue.as_ptr(), timeout_ms, slots.as_mut_ptr(), slots.len())
        };
        usize::try_from(taken).unwrap_or(0)
    }
}

impl Drop for ConsumerQueue<'_> {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `of`, once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) };
    }
}
