//! `kafgres.share_consume(group_id, topic, max_records, wait)`: a share
//! group's queue (KIP-932) consumed from SQL, settled with the caller's
//! transaction.
//!
//! The backend is one member of the share group, next to any Kafka share
//! consumers (KafkaShareConsumer): each call heartbeats (joining the first
//! time, or again after the group fenced an idle member) and acquires up to
//! `max_records` records of the partitions the group assigned it, through one
//! share session on the backend's broker connection. What a transaction
//! acquired is acknowledged when it ends: ACCEPT after COMMIT, RELEASE after
//! ROLLBACK (delivered again at once, to any member), and RELEASE for what a
//! subtransaction rolled back to a savepoint had acquired, so a record
//! counts as processed exactly when the writes made for it commit.
//!
//! Delivery is at least once, as for any share consumer: the broker takes a
//! record back when its acquisition lock expires
//! (`share.record.lock.duration.ms`, 30 s by default) before the transaction
//! ends, or when the acknowledgement after COMMIT cannot be sent (a WARNING
//! says so); the record is then delivered again. `delivery_count` tells a
//! redelivery from a first one. PREPARE TRANSACTION is refused after a call:
//! the records would stay acquired past the lock.

// pgrx reads each function's SQL result columns from the literal
// `TableIterator<(name!(..), ..)>` in its signature; an alias would hide them.
#![allow(clippy::type_complexity)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use kafgres_client::{AcknowledgeType, AcquiredRecord, ShareAcknowledgement, ShareMember, Uuid};
use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::Spi;
use pgrx::{pg_sys, PgSqlErrorCode};

use super::broker_link::{require_broker_database, with_broker, with_open_link};
use super::consume::interval_duration;
use super::read::check_max_records;
use super::rows::{headers_json, timestamp};
use super::send::fail;

/// Acquired in the current transaction, to settle at its end.
struct Pending {
    group_id: String,
    acknowledgement: ShareAcknowledgement,
    /// The subtransaction that acquired it: a rollback to it or to an
    /// enclosing one releases it.
    subtransaction: pg_sys::SubTransactionId,
}

thread_local! {
    /// This backend's membership of each share group it consumed from.
    static MEMBERS: RefCell<HashMap<String, ShareMember>> = RefCell::new(HashMap::new());
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

#[pg_extern(name = "share_consume", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn share_consume_bytes(
    group_id: &str,
    topic: &str,
    max_records: default!(i32, 100),
    wait: default!(Interval, "'0'"),
) -> TableIterator<
    'static,
    (
        name!(partition, i32),
        name!(offset, i64),
        name!(timestamp, Option<TimestampWithTimeZone>),
        name!(key, Option<Vec<u8>>),
        name!(value, Option<Vec<u8>>),
        name!(headers, pgrx::JsonB),
        name!(delivery_count, i32),
    ),
> {
    let acquired = share_consume(group_id, topic, max_records, wait);
    TableIterator::new(
        acquired
            .into_iter()
            .map(|a| {
                let r = &a.record;
                (
                    a.partition,
                    r.offset,
                    timestamp(r.timestamp),
                    r.key.as_ref().map(|k| k.to_vec()),
                    r.value.as_ref().map(|v| v.to_vec()),
                    headers_json(r),
                    i32::from(a.delivery_count),
                )
            })
            .collect::<Vec<_>>(),
    )
}

#[pg_extern(name = "share_consume_text", volatile, parallel_unsafe, security_definer)]
#[search_path(pg_catalog, kafgres)]
fn share_consume_text(
    group_id: &str,
    topic: &str,
    max_records: default!(i32, 100),
    wait: default!(Interval, "'0'"),
) -> TableIterator<
    'static,
    (
        name!(partition, i32),
        name!(offset, i64),
        name!(timestamp, Option<TimestampWithTimeZone>),
        name!(key, Option<String>),
        name!(value, Option<String>),
        name!(headers, pgrx::JsonB),
        name!(delivery_count, i32),
    ),
> {
    let acquired = share_consume(group_id, topic, max_records, wait);
    let text = |b: &bytes::Bytes| String::from_utf8_lossy(b).into_owned();
    TableIterator::new(
        acquired
            .into_iter()
            .map(|a| {
                let r = &a.record;
                (
                    a.partition,
                    r.offset,
                    timestamp(r.timestamp),
                    r.key.as_ref().map(text),
                    r.value.as_ref().map(text),
                    headers_json(r),
                    i32::from(a.delivery_count),
                )
            })
            .collect::<Vec<_>>(),
    )
}

fn share_consume(group_id: &str, topic: &str, max_records: i32, wait: Interval) -> Vec<AcquiredRecord> {
    const WHAT: &str = "kafgres.share_consume";
    super::txn_state::require_own_sends(WHAT);
    require_broker_database(WHAT);
    check_max_records(max_records);
    if group_id.is_empty() || group_id.len() > 255 {
        fail(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "a group id must be 1 to 255 bytes".into(),
            "pass the share group's name",
        );
    }
    let wait = interval_duration(wait);
    let topic_id = topic_id(topic);
    ensure_callbacks();
    let mut member = MEMBERS.with(|m| m.borrow_mut().remove(group_id)).unwrap_or_else(|| new_member(group_id));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_broker(WHAT, |client| {
            client.share_heartbeat(&mut member, &[topic])?;
            let partitions = member.assigned(topic_id);
            if partitions.is_empty() {
                return Ok(Vec::new());
            }
            client.share_fetch(&mut member, topic_id, &partitions, max_records, wait)
        })
    }));
    // The membership is kept whatever happened: its session may hold records
    // acquired earlier in this transaction.
    MEMBERS.with(|m| m.borrow_mut().insert(group_id.to_owned(), member));
    let acquired = match outcome {
        Ok(acquired) => acquired,
        Err(error) => std::panic::resume_unwind(error),
    };
    // SAFETY: a plain read of the current subtransaction's id, inside the
    // transaction this SQL function runs in, on the backend's only thread.
    let subtransaction = unsafe { pg_sys::GetCurrentSubTransactionId() };
    PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        for a in &acquired {
            let offset = a.record.offset;
            // Consecutive offsets of one partition are one acknowledgement range.
            let extends = pending.last_mut().filter(|last| {
                last.group_id == group_id
                    && last.subtransaction == subtransaction
                    && last.acknowledgement.topic_id == topic_id
                    && last.acknowledgement.partition == a.partition
                    && last.acknowledgement.last_offset + 1 == offset
            });
            match extends {
                Some(last) => last.acknowledgement.last_offset = offset,
                None => pending.push(Pending {
                    group_id: group_id.to_owned(),
                    acknowledgement: ShareAcknowledgement {
                        topic_id,
                        partition: a.partition,
                        first_offset: offset,
                        last_offset: offset,
                        kind: AcknowledgeType::Accept,
                    },
                    subtransaction,
                }),
            }
        }
    });
    acquired
}

/// A member id unique to this backend and group: Kafka's share consumers
/// choose their own (ShareGroupHeartbeat v1), as a random UUID.
fn new_member(group_id: &str) -> ShareMember {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = now ^ (u128::from(std::process::id()) << 96);
    ShareMember::new(group_id, &Uuid::from_u128(seed).to_string())
}

fn topic_id(topic: &str) -> Uuid {
    let found =
        Spi::get_one_with_args::<String>("SELECT topic_id::text FROM kafgres.topics WHERE name = $1", &[topic.into()]);
    match found {
        Ok(Some(id)) => match Uuid::parse_str(&id) {
            Ok(id) => id,
            Err(e) => error!("kafgres: topic \"{topic}\" has an invalid id {id}: {e}"),
        },
        Ok(None) | Err(pgrx::spi::SpiError::InvalidPosition) => fail(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("topic \"{topic}\" does not exist"),
            "create it first: SELECT kafgres.create_topic(name, partitions)",
        ),
        Err(e) => error!("kafgres: cannot read topic \"{topic}\": {e}"),
    }
}

fn ensure_callbacks() {
    if !CALLBACKS_REGISTERED.get() {
        // SAFETY: registering callbacks is allowed at any time in a backend;
        // they live as long as the process (never unregistered).
        unsafe {
            pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(at_subtransaction_abort), std::ptr::null_mut());
            pg_sys::before_shmem_exit(Some(at_backend_exit), pg_sys::Datum::from(0));
        }
        CALLBACKS_REGISTERED.set(true);
    }
}

/// A rollback to a savepoint releases what was acquired since: ids of
/// subtransactions nested in the one rolled back are larger than its own.
///
/// # Safety
///
/// Only Postgres calls this, as the subtransaction callback registered by
/// `ensure_callbacks`, on the backend's only thread.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_subtransaction_abort(
    event: pg_sys::SubXactEvent::Type,
    subid: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        PENDING.with(|p| {
            for pending in p.borrow_mut().iter_mut().filter(|p| p.subtransaction >= subid) {
                pending.acknowledgement.kind = AcknowledgeType::Release;
            }
        });
    }
}

/// How long the end of a transaction waits for the broker to take its
/// acknowledgements.
const SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a leaving backend waits for the broker before it exits anyway.
const LEAVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The backend is exiting: it leaves each share group it joined, so the
/// group gives its partitions to the other members at once instead of after
/// the session timeout (`group.share.session.timeout.ms`, 45 s). Leaving
/// releases what the member still holds, i.e. what an open transaction
/// acquired, as its abort would. Runs before the open transaction is aborted
/// (callbacks run in reverse order of registration), so nothing is left to
/// settle afterwards.
///
/// # Safety
///
/// Only Postgres calls this, as the exit callback registered by
/// `ensure_callbacks`, on the backend's only thread.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_backend_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    PENDING.with(|p| p.borrow_mut().clear());
    let members = MEMBERS.with(|m| std::mem::take(&mut *m.borrow_mut()));
    if members.is_empty() {
        return;
    }
    with_open_link(|client| {
        if client.set_request_timeout(LEAVE_TIMEOUT).is_err() {
            return;
        }
        for (group_id, mut member) in members {
            if let Err(e) = client.share_leave(&mut member) {
                // A log line only: the client is gone, and the group fences
                // the member after its session timeout anyway.
                log!("kafgres.share_consume: leaving share group \"{group_id}\" at exit failed: {e}");
            }
        }
    });
}

/// Settles what the transaction acquired once it has ended; refuses to
/// prepare a transaction that acquired records.
///
/// # Safety
///
/// Only Postgres calls this, as the transaction callback registered by
/// `ensure_callbacks`, on the backend's only thread: inside the transaction
/// at pre-prepare, after it at commit and abort.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    match event {
        // Still inside the transaction: the error aborts it, and the abort
        // releases the records.
        pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE if PENDING.with(|p| !p.borrow().is_empty()) => fail(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "cannot PREPARE a transaction that acquired records with kafgres.share_consume".into(),
            "commit or roll back instead; records stay acquired only for share.record.lock.duration.ms",
        ),
        pg_sys::XactEvent::XACT_EVENT_COMMIT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT => settle(false),
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => settle(true),
        _ => {}
    }
}

/// Sends the acknowledgements of the transaction that just ended, each
/// group's in one request. Nothing here may raise an error (the transaction
/// is over): a failure is a WARNING after a commit, and the broker delivers
/// those records again when their locks expire.
fn settle(aborted: bool) {
    let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if pending.is_empty() {
        return;
    }
    let mut by_group: Vec<(String, Vec<ShareAcknowledgement>)> = Vec::new();
    for p in pending {
        let mut acknowledgement = p.acknowledgement;
        if aborted {
            acknowledgement.kind = AcknowledgeType::Release;
        }
        match by_group.iter_mut().find(|(g, _)| *g == p.group_id) {
            Some((_, acks)) => acks.push(acknowledgement),
            None => by_group.push((p.group_id, vec![acknowledgement])),
        }
    }
    for (group_id, acknowledgements) in by_group {
        let outcome = MEMBERS.with(|members| {
            let mut members = members.borrow_mut();
            let member = members.get_mut(&group_id)?;
            with_open_link(|client| {
                // The transaction is over and the session waits on this: a
                // hung broker must not hold a COMMIT for the full request
                // timeout, when the records come back anyway.
                let usual = client.request_timeout();
                let bounded = client.set_request_timeout(SETTLE_TIMEOUT.min(usual)).is_ok();
                let outcome = client.share_acknowledge(member, &acknowledgements);
                if bounded {
                    let _ = client.set_request_timeout(usual); // it was accepted before
                }
                outcome
            })
        });
        let records: i64 = acknowledgements.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
        let problem = match outcome {
            Some(Ok(refused)) if refused.is_empty() => continue,
            Some(Ok(refused)) => format!("the broker refused {} partition(s) of it: {refused:?}", refused.len()),
            Some(Err(e)) => e.to_string(),
            None => "the broker connection is gone".to_string(),
        };
        if aborted {
            // The records come again either way: at once if released, else when their locks expire.
            continue;
        }
        warning!(
            "kafgres.share_consume: the acceptance of {records} record(s) of share group \"{group_id}\" was not \
             delivered ({problem}); the broker will deliver them again when their acquisition locks expire"
        );
    }
}
