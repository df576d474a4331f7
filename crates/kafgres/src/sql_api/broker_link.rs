//! A backend's connection to the broker, for the SQL functions that read
//! (`read`, `consume`) or administer (`create_topic`...): the broker's own
//! Kafka listener on loopback, through `kafgres-client`.
//!
//! Going through the listener, rather than opening segment files from the
//! backend, gives SQL exactly what Kafka consumers see (durable records up to
//! the high watermark, retention and deletion handled by their owner) and
//! keeps the log single-writer, single-owner. The connection is kept for the
//! backend's life and reopened when broken. Waits go through the backend's
//! latch, so a statement cancel or a postmaster death ends a long poll.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use kafgres_client::{error_code, Client, ClientConfig, ClientError, Interest, Ready, Wait};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};

use super::send::fail;
use crate::gucs;

/// Waits on the backend's latch and the socket; returns `Interrupted` when
/// an interrupt is pending so the caller can raise it outside the client.
pub struct LatchWait;

impl Wait for LatchWait {
    fn wait(&mut self, fd: i32, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError> {
        loop {
            // SAFETY: a read of Postgres's sig_atomic_t flag, which only this
            // process's signal handlers write; this runs on the backend's
            // only thread (SQL functions), the way CHECK_FOR_INTERRUPTS reads
            // it, and the WaitLatchOrSocket call below is opaque to the
            // compiler, so the flag is read afresh on every turn.
            if unsafe { pg_sys::InterruptPending } != 0 {
                return Err(ClientError::Interrupted("an interrupt is pending (statement cancel?)".into()));
            }
            let timeout_ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(Ready::TimedOut);
                    }
                    (deadline - now).as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long
                }
            };
            let socket_event = match interest {
                Interest::Readable => pg_sys::WL_SOCKET_READABLE,
                Interest::Writable => pg_sys::WL_SOCKET_WRITEABLE,
            };
            let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_EXIT_ON_PM_DEATH | socket_event;
            if deadline.is_some() {
                events |= pg_sys::WL_TIMEOUT;
            }
            // SAFETY: MyLatch is this backend's own latch, set up before any
            // SQL function runs; `fd` is the client's socket, open for the
            // whole call; and this is the backend's only thread, the one
            // Postgres's wait functions must run on.
            let fired = unsafe {
                pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as i32, fd, timeout_ms, pg_sys::PG_WAIT_EXTENSION)
            } as u32;
            if fired & pg_sys::WL_LATCH_SET != 0 {
                // SAFETY: our own latch, on the backend's thread, as above.
                unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            }
            if fired & socket_event != 0 {
                return Ok(Ready::Ready);
            }
            if fired & pg_sys::WL_TIMEOUT != 0 {
                return Ok(Ready::TimedOut);
            }
        }
    }
}

/// The backend's connection, and the role it logged in to act for.
struct Link {
    role: String,
    client: Client<LatchWait>,
}

thread_local! {
    static LINK: RefCell<Option<Link>> = const { RefCell::new(None) };
    /// `kafgres.cluster.internal_secret`, read once per backend.
    static SECRET: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Where the broker listens, as seen from this host.
fn broker_address() -> SocketAddr {
    match broker_address_or_err() {
        Ok(address) => address,
        Err(message) => fail(
            PgSqlErrorCode::ERRCODE_CONFIG_FILE_ERROR,
            message,
            "set kafgres.listen_address to the address the broker listens on",
        ),
    }
}

/// Where the broker listens, as seen from this host, or why that is unknown.
pub fn broker_address_or_err() -> Result<SocketAddr, String> {
    let address = gucs::string_or(&gucs::LISTEN_ADDRESS, "127.0.0.1");
    let ip: IpAddr = match address.parse() {
        Ok(IpAddr::V4(v4)) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Ok(IpAddr::V6(v6)) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        Ok(ip) => ip,
        Err(_) => return Err(format!("kafgres.listen_address = '{address}' is not an IP address")),
    };
    Ok(SocketAddr::new(ip, gucs::PORT.get() as u16))
}

/// The internal secret, read on first use (the SQL functions run as their
/// owner, a superuser, who may read `kafgres.cluster`).
fn internal_secret(what: &str) -> String {
    if let Some(secret) = SECRET.with(|s| s.borrow().clone()) {
        return secret;
    }
    match crate::internal_login::read_secret() {
        Ok(secret) => {
            SECRET.with(|s| *s.borrow_mut() = Some(secret.clone()));
            secret
        }
        Err(e) => error!("kafgres: {what}: {e}"),
    }
}

/// Runs `f` with the backend's broker connection, connecting first if
/// needed. The connection logs in (SASL `KAFGRES-INTERNAL`) as the calling
/// role, so the broker holds it to that role's ACLs, whatever
/// `kafgres.authentication` says; a call for another role (after `SET ROLE`)
/// connects again. A connection that breaks is dropped; when a kept one
/// turns out stale (the broker restarted), `f` is tried once more on a new
/// one. Errors become SQL errors.
pub fn with_broker<T>(what: &str, mut f: impl FnMut(&mut Client<LatchWait>) -> Result<T, ClientError>) -> T {
    let role = match crate::internal_login::calling_role() {
        Ok(role) => role,
        Err(e) => fail(PgSqlErrorCode::ERRCODE_INVALID_ROLE_SPECIFICATION, format!("{what}: {e}"), "reconnect"),
    };
    for attempt in 0..2 {
        let reused = LINK.with(|l| l.borrow().as_ref().is_some_and(|link| link.role == role));
        let outcome = LINK.with(|link| {
            let mut link = link.borrow_mut();
            if link.as_ref().is_none_or(|l| l.role != role) {
                *link = None;
                let config = ClientConfig {
                    internal_login: Some(kafgres_client::InternalLogin {
                        secret: internal_secret(what),
                        role: role.clone(),
                    }),
                    ..ClientConfig::default()
                };
                let client = Client::connect_with(broker_address(), "kafgres-sql", LatchWait, config)?;
                *link = Some(Link { role: role.clone(), client });
            }
            let client = &mut link.as_mut().ok_or(ClientError::Broken)?.client;
            let result = f(client);
            if client.is_broken() {
                *link = None;
            }
            result
        });
        match outcome {
            Ok(value) => return value,
            Err(ClientError::Interrupted(_)) => {
                LINK.with(|l| *l.borrow_mut() = None);
                check_for_interrupts!();
                error!("kafgres: {what} was interrupted");
            }
            Err(ClientError::Io { .. } | ClientError::Broken) if reused && attempt == 0 => {
                LINK.with(|l| *l.borrow_mut() = None);
                continue;
            }
            Err(e) => raise(what, e),
        }
    }
    error!("kafgres: {what}: the broker connection failed twice")
}

/// Runs `f` on the backend's open broker connection, if there is one, and
/// never opens one: for transaction callbacks, which must not read the
/// catalog (the calling role) and whose work belongs to the connection that
/// is open (a share session lives and dies with its connection). `None`
/// when no connection is open; a connection that breaks is dropped.
pub fn with_open_link<T>(f: impl FnOnce(&mut Client<LatchWait>) -> T) -> Option<T> {
    LINK.with(|link| {
        let mut link = link.borrow_mut();
        let client = &mut link.as_mut()?.client;
        let result = f(client);
        if client.is_broken() {
            *link = None;
        }
        Some(result)
    })
}

/// Refuses unless the Kafka ACLs let the calling role do `operation`
/// given `authorized` (KIP-430's bit field the broker computed for it);
/// nothing to check while `kafgres.authorizer = none`.
pub fn require_operation(what: &str, authorized: i32, operation: kafgres_broker::acl::Operation, resource: &str) {
    if crate::gucs::AUTHORIZER.get() == crate::gucs::AuthorizerGuc::None {
        return;
    }
    if authorized != i32::MIN && authorized & (1 << operation.code()) != 0 {
        return;
    }
    let name = operation.name();
    fail(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("{what}: the Kafka ACLs do not allow {name} on {resource} for this role"),
        "grant it with kafka-acls.sh or INSERT INTO kafgres.acls, then SELECT pg_reload_conf() (docs/security.md)",
    );
}

/// The SQL error for a client error: Kafka's error name in the message.
pub fn raise(what: &str, e: ClientError) -> ! {
    let (code, hint) = match &e {
        ClientError::Io { .. } | ClientError::Timeout { .. } | ClientError::Broken => (
            PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            "is the broker running? see the server log and kafgres.port / kafgres.listen_address",
        ),
        ClientError::Kafka { code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. } => {
            (PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, "list topics with SELECT name FROM kafgres.topics")
        }
        ClientError::Kafka { code: error_code::TOPIC_ALREADY_EXISTS, .. } => {
            (PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT, "choose another name")
        }
        ClientError::Kafka {
            code:
                error_code::TOPIC_AUTHORIZATION_FAILED
                | error_code::GROUP_AUTHORIZATION_FAILED
                | error_code::CLUSTER_AUTHORIZATION_FAILED
                | error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ..
        } => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "the Kafka ACLs (kafgres.authorizer = acl) do not allow it for this role: grant it with kafka-acls.sh \
             or INSERT INTO kafgres.acls, then SELECT pg_reload_conf() (docs/security.md)",
        ),
        ClientError::Kafka { .. } | ClientError::InvalidArgument(_) => {
            (PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "the Kafka error name says why")
        }
        _ => (PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "see the server log"),
    };
    fail(code, format!("{what}: {e}"), hint)
}

/// Refuses to run outside the database the broker serves: the slot decodes
/// only that database's WAL, and its catalog is the one the broker reads.
pub fn require_broker_database(function: &str) {
    let broker_db = gucs::string_or(&gucs::DATABASE, "postgres");
    // SAFETY: SQL functions run inside a transaction on the backend's only
    // thread, so the catalog lookup get_database_name makes is allowed;
    // MyDatabaseId is fixed once the backend is connected; the name it returns
    // is NULL or a NUL-terminated palloc'd copy that lives until the function's
    // memory context is reset, well after it is copied here.
    let current = unsafe {
        let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        if name.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    };
    if current != broker_db {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("{function} works only in database \"{broker_db}\" (kafgres.database), not \"{current}\""),
            &format!("connect to database \"{broker_db}\", or set kafgres.database and restart PostgreSQL"),
        );
    }
}
