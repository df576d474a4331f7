//! The broker's settings, read from the `kafgres.*` GUCs on the worker's
//! main thread (`crate::gucs`).

use std::net::{IpAddr, SocketAddr};

use kafgres_broker::{BrokerConfig, FlushPolicy};
use pgrx::prelude::*;

use crate::gucs;

/// This database, as the log directory's owner file records it.
pub fn log_dir_owner(database: &str) -> kafgres_broker::log_dir::LogDirOwner {
    // SAFETY: both are plain reads of values fixed once the worker is
    // connected to its database (before this is called).
    let (system_identifier, database_oid) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::MyDatabaseId) };
    kafgres_broker::log_dir::LogDirOwner {
        system_identifier,
        database_oid: database_oid.to_u32(),
        database: database.to_string(),
    }
}

pub fn broker_config(
    cluster_id: String,
    log_dir_owner: kafgres_broker::log_dir::LogDirOwner,
) -> Result<BrokerConfig, String> {
    let address = gucs::string_or(&gucs::LISTEN_ADDRESS, "127.0.0.1");
    let Ok(ip) = address.parse::<IpAddr>() else {
        return Err(format!("kafgres.listen_address = '{address}' is not an IP address"));
    };
    let port = gucs::PORT.get() as u16;
    let advertised_port = match gucs::ADVERTISED_PORT.get() {
        0 => port,
        p => p as u16,
    };
    let log_dir = gucs::log_dir();
    Ok(BrokerConfig {
        listen: SocketAddr::new(ip, port),
        advertised_host: gucs::string_or(&gucs::ADVERTISED_HOST, &address),
        advertised_port,
        node_id: gucs::NODE_ID.get(),
        cluster_id,
        log_dir,
        log_dir_owner,
        flush_policy: match gucs::FLUSH_POLICY.get() {
            gucs::FlushPolicyGuc::Fsync => FlushPolicy::Fsync,
            gucs::FlushPolicyGuc::PageCache => FlushPolicy::PageCache,
        },
        frame_bytes_max: gucs::MAX_FRAME_BYTES.get() as usize,
        connections_max: gucs::MAX_CONNECTIONS.get() as usize,
        connections_per_address_max: gucs::MAX_CONNECTIONS_PER_IP.get().max(0) as usize,
        request_memory_bytes_max: gucs::REQUEST_MEMORY_MB.get().max(1) as usize * (1 << 20),
        connection_idle_ms_max: gucs::CONNECTIONS_MAX_IDLE_MS.get() as u64,
        auto_create_topics: gucs::AUTO_CREATE_TOPICS.get(),
        default_partitions: gucs::DEFAULT_PARTITIONS.get(),
        message_bytes_max: kafgres_broker::topic_config::MESSAGE_BYTES_MAX_DEFAULT,
        segment_bytes_max: gucs::SEGMENT_BYTES.get() as u64,
        group_initial_rebalance_delay_ms: gucs::GROUP_INITIAL_REBALANCE_DELAY_MS.get(),
        group_consumer_session_timeout_ms: gucs::GROUP_CONSUMER_SESSION_TIMEOUT_MS.get(),
        group_consumer_heartbeat_interval_ms: gucs::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS.get(),
        authentication: authentication(),
        // Set by the role's own start (`super::leader`, `super::standby`), from the catalog.
        internal_secret: None,
        failed_authentication_delay_ms: gucs::FAILED_AUTHENTICATION_DELAY_MS.get().max(0) as u64,
        authorizer_enabled: authorizer_enabled(),
        metrics: crate::shared_metrics::metrics().unwrap_or_else(kafgres_broker::metrics::BrokerMetrics::leaked),
        // The role's own (`super::leader`, `super::standby`) replace these.
        replication: std::sync::Arc::new(kafgres_broker::replication::ReplicationState::new(
            0,
            None,
            kafgres_broker::replication::state::LAG_TIME_MAX_DEFAULT,
        )),
        follow: None,
        leader: None,
    })
}

/// `kafgres.authorizer` (read again at each reload).
pub fn authorizer_enabled() -> bool {
    gucs::AUTHORIZER.get() == gucs::AuthorizerGuc::Acl
}

/// `kafgres.authentication`. Unknown users' mock salts derive from
/// PostgreSQL's own mock authentication nonce (random per cluster, kept in
/// pg_control), so they stay the same across restarts, as PostgreSQL's do.
fn authentication() -> kafgres_broker::sasl::Authentication {
    match gucs::AUTHENTICATION.get() {
        gucs::AuthenticationGuc::None => kafgres_broker::sasl::Authentication::None,
        gucs::AuthenticationGuc::ScramSha256 => {
            let mut mock_secret = [0u8; pg_sys::MOCK_AUTH_NONCE_LEN as usize];
            // SAFETY: pg_control's nonce is MOCK_AUTH_NONCE_LEN bytes, read on the main thread.
            let nonce = unsafe { pg_sys::GetMockAuthenticationNonce() };
            if nonce.is_null() {
                return kafgres_broker::sasl::Authentication::scram_sha_256_random();
            }
            // SAFETY: a non-NULL nonce points at pg_control's
            // mock_authentication_nonce, MOCK_AUTH_NONCE_LEN bytes in shared
            // memory that no one writes after startup; `mock_secret` is a local
            // array of that length, so the two cannot overlap.
            unsafe { std::ptr::copy_nonoverlapping(nonce.cast::<u8>(), mock_secret.as_mut_ptr(), mock_secret.len()) };
            kafgres_broker::sasl::Authentication::ScramSha256 { mock_secret }
        }
    }
}
