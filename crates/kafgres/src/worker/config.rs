//! The broker's settings, read from the `kafgres.*` GUCs on the worker's
//! main thread (`crate::gucs`).

use std::net::{IpAddr, SocketAddr};

use kafgres_broker::settings::Reloadable;
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

/// `kafgres.metrics_port` and `kafgres.metrics_listen_address`. A bad
/// address leaves the endpoint off with a warning: monitoring never keeps
/// the broker from serving (as a port that cannot be bound does not).
fn metrics_endpoint() -> Option<kafgres_broker::prometheus::MetricsEndpoint> {
    let port = gucs::METRICS_PORT.get();
    if port == 0 {
        return None;
    }
    let address = gucs::string_or(&gucs::METRICS_LISTEN_ADDRESS, "127.0.0.1");
    let Ok(ip) = address.parse::<IpAddr>() else {
        warning!(
            "kafgres: kafgres.metrics_listen_address = '{address}' is not an IP address; the metrics endpoint is \
             not opened (Kafka clients are served)"
        );
        return None;
    };
    Some(kafgres_broker::prometheus::MetricsEndpoint {
        listen: SocketAddr::new(ip, port as u16),
        host: Some(std::sync::Arc::new(crate::bridge::prometheus::BridgeMetrics)),
    })
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
    let advertised_host = gucs::string_or(&gucs::ADVERTISED_HOST, &address);
    let extra_listeners = extra_listeners(&advertised_host, port)?;
    let metrics_endpoint = metrics_endpoint();
    let live = reloadable();
    Ok(BrokerConfig {
        listen: SocketAddr::new(ip, port),
        extra_listeners,
        tls: tls_settings(),
        advertised_host,
        advertised_port,
        node_id: gucs::NODE_ID.get(),
        cluster_id,
        log_dir,
        log_dir_owner,
        flush_policy: live.flush_policy,
        flush_delay: live.flush_delay,
        frame_bytes_max: live.frame_bytes_max,
        connections_max: live.connections_max,
        connections_per_address_max: live.connections_per_address_max,
        connection_rate_per_address_max: live.connection_rate_per_address_max,
        request_memory_bytes_max: live.request_memory_bytes_max,
        connection_idle_ms_max: live.connection_idle_ms_max,
        connections_max_reauth_ms: live.connections_max_reauth_ms,
        transaction_version: live.transaction_version,
        auto_create_topics: live.auto_create_topics,
        default_partitions: live.default_partitions,
        message_bytes_max: kafgres_broker::topic_config::MESSAGE_BYTES_MAX_DEFAULT,
        segment_bytes_max: gucs::SEGMENT_BYTES.get() as u64,
        segment_reserve_ahead_bytes: u64::try_from(gucs::SEGMENT_RESERVE_AHEAD_KB.get()).unwrap_or(0) << 10,
        group_initial_rebalance_delay_ms: live.group_initial_rebalance_delay_ms,
        group_consumer_session_timeout_ms: live.group_consumer_session_timeout_ms,
        group_consumer_heartbeat_interval_ms: live.group_consumer_heartbeat_interval_ms,
        // Kafka's defaults; no kafgres.* settings for streams groups yet.
        group_streams: kafgres_broker::group::StreamsGroupConfig::default(),
        // Kafka's defaults; no kafgres.* settings for share groups yet.
        share: kafgres_broker::share::ShareConfig::default(),
        transactional_id_expiration_ms: i64::from(gucs::TRANSACTIONAL_ID_EXPIRATION_S.get()) * 1_000,
        archive_command: live.archive_command.clone(),
        client_telemetry: live.client_telemetry.clone(),
        delegation_tokens: kafgres_broker::delegation::TokenSettings {
            secret_key: gucs::DELEGATION_TOKEN_SECRET_KEY
                .get()
                .and_then(|c| c.into_string().ok())
                .filter(|s| !s.is_empty()),
            max_lifetime_ms: i64::from(gucs::DELEGATION_TOKEN_MAX_LIFETIME_MS.get()),
            expiry_time_ms: i64::from(gucs::DELEGATION_TOKEN_EXPIRY_TIME_MS.get()),
        },
        timeline: insert_timeline(),
        authentication: authentication(),
        // Set by the role's own start (`super::leader`, `super::standby`), from the catalog.
        internal_secret: None,
        failed_authentication_delay_ms: live.failed_authentication_delay_ms,
        authorizer_enabled: authorizer_enabled(),
        identities: std::sync::Arc::new(super::identities::identity_rules(None)),
        metrics: crate::shared_metrics::metrics().unwrap_or_else(kafgres_broker::metrics::BrokerMetrics::leaked),
        // The role's own (`super::leader`, `super::standby`) replace these.
        replication: std::sync::Arc::new(kafgres_broker::replication::ReplicationState::new(
            0,
            None,
            kafgres_broker::replication::state::LAG_TIME_MAX_DEFAULT,
        )),
        follow: None,
        leader: None,
        metrics_endpoint,
        live: std::sync::Arc::new(kafgres_broker::settings::LiveSettings::placeholder()),
    })
}

/// The settings a reload applies to a running broker, as the GUCs say now.
pub fn reloadable() -> Reloadable {
    Reloadable {
        flush_policy: match gucs::FLUSH_POLICY.get() {
            gucs::FlushPolicyGuc::Fsync => FlushPolicy::Fsync,
            gucs::FlushPolicyGuc::PageCache => FlushPolicy::PageCache,
        },
        flush_delay: std::time::Duration::from_micros(gucs::FLUSH_DELAY_US.get().max(0) as u64),
        frame_bytes_max: gucs::MAX_FRAME_BYTES.get() as usize,
        connections_max: gucs::MAX_CONNECTIONS.get() as usize,
        connections_per_address_max: gucs::MAX_CONNECTIONS_PER_IP.get().max(0) as usize,
        connection_rate_per_address_max: f64::from(gucs::MAX_CONNECTION_RATE_PER_IP.get().max(0)),
        request_memory_bytes_max: gucs::REQUEST_MEMORY_MB.get().max(1) as usize * (1 << 20),
        connection_idle_ms_max: gucs::CONNECTIONS_MAX_IDLE_MS.get() as u64,
        connections_max_reauth_ms: gucs::CONNECTIONS_MAX_REAUTH_MS.get().max(0) as u64,
        transaction_version: gucs::TRANSACTION_VERSION.get().clamp(1, 2) as i16,
        auto_create_topics: gucs::AUTO_CREATE_TOPICS.get(),
        default_partitions: gucs::DEFAULT_PARTITIONS.get(),
        failed_authentication_delay_ms: gucs::FAILED_AUTHENTICATION_DELAY_MS.get().max(0) as u64,
        group_initial_rebalance_delay_ms: gucs::GROUP_INITIAL_REBALANCE_DELAY_MS.get(),
        group_consumer_session_timeout_ms: gucs::GROUP_CONSUMER_SESSION_TIMEOUT_MS.get(),
        group_consumer_heartbeat_interval_ms: gucs::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS.get(),
        archive_command: gucs::ARCHIVE_COMMAND
            .get()
            .map(|c| c.to_string_lossy().into_owned())
            .filter(|c| !c.is_empty()),
        client_telemetry: kafgres_broker::telemetry::TelemetrySettings {
            requested_metrics: kafgres_broker::telemetry::TelemetrySettings::parse_metrics(
                &gucs::CLIENT_TELEMETRY_METRICS.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default(),
            ),
            push_interval_ms: gucs::CLIENT_TELEMETRY_PUSH_INTERVAL_MS.get(),
            metrics_bytes_max: gucs::CLIENT_TELEMETRY_MAX_BYTES.get(),
        },
    }
}

/// The `kafgres.*` settings a reload may change (context `sighup`), for the
/// worker's "is now" lines; `reloadable` reads the broker's share of them.
pub const RELOADABLE_SETTINGS: &[&std::ffi::CStr] = &[
    c"kafgres.flush_policy",
    c"kafgres.flush_delay",
    c"kafgres.max_frame_bytes",
    c"kafgres.max_connections",
    c"kafgres.max_connections_per_ip",
    c"kafgres.max_connection_rate_per_ip",
    c"kafgres.request_memory_mb",
    c"kafgres.connections_max_idle_ms",
    c"kafgres.connections_max_reauth_ms",
    c"kafgres.transaction_version",
    c"kafgres.auto_create_topics",
    c"kafgres.default_partitions",
    c"kafgres.failed_authentication_delay_ms",
    c"kafgres.group_initial_rebalance_delay_ms",
    c"kafgres.group_consumer_session_timeout_ms",
    c"kafgres.group_consumer_heartbeat_interval_ms",
    c"kafgres.log_level",
    c"kafgres.archive_command",
    c"kafgres.client_telemetry_metrics",
    c"kafgres.client_telemetry_push_interval_ms",
    c"kafgres.client_telemetry_max_bytes",
    c"kafgres.authorizer",
    c"kafgres.ssl_cert_file",
    c"kafgres.ssl_key_file",
    c"kafgres.ssl_ca_file",
    c"kafgres.ssl_client_auth",
    c"kafgres.ssl_client_name",
    c"kafgres.ssl_ident_map",
    c"kafgres.oauthbearer_jwks_file",
    c"kafgres.oauthbearer_expected_issuer",
    c"kafgres.oauthbearer_expected_audience",
    c"kafgres.oauthbearer_sub_claim_name",
    c"kafgres.oauthbearer_scope_claim_name",
    c"kafgres.oauthbearer_clock_skew",
    c"kafgres.oauthbearer_ident_map",
    c"kafgres.primary_kafka_address",
    c"kafgres.sql_bridge_memory_mb",
];

/// Each reloadable setting's value as `SHOW` prints it.
pub fn reloadable_values() -> Vec<Option<String>> {
    RELOADABLE_SETTINGS.iter().map(|name| gucs::postgres_setting(name)).collect()
}

/// A reload: the broker takes the new settings and identity rules, the log
/// level follows `kafgres.log_level`.
pub fn reload_settings(broker: &kafgres_broker::Broker) {
    crate::logging::set_level(log_level());
    broker.reload(&reloadable());
    super::identities::reload_identities(broker);
}

/// `kafgres.log_level` as the `log` crate filters.
pub fn log_level() -> log::LevelFilter {
    match gucs::LOG_LEVEL.get() {
        gucs::LogLevelGuc::Error => log::LevelFilter::Error,
        gucs::LogLevelGuc::Warning => log::LevelFilter::Warn,
        gucs::LogLevelGuc::Info => log::LevelFilter::Info,
        gucs::LogLevelGuc::Debug => log::LevelFilter::Debug,
    }
}

/// `kafgres.listeners`: each with its own port, advertised under its own
/// address unless that is a wildcard (then `kafgres.advertised_host`).
fn extra_listeners(
    advertised_host: &str,
    primary_port: u16,
) -> Result<Vec<kafgres_broker::listener::ListenerConfig>, String> {
    let specs = kafgres_broker::listener::parse_listeners(&gucs::string_or(&gucs::LISTENERS, ""))
        .map_err(|e| format!("kafgres.listeners: {e}"))?;
    let mut listeners = Vec::new();
    for spec in specs {
        if spec.port == primary_port {
            return Err(format!(
                "kafgres.listeners: port {} is kafgres.port's (the primary listener); give the listener another port",
                spec.port
            ));
        }
        let listen = spec.bind_address()?;
        let host = if spec.is_wildcard() { advertised_host.to_owned() } else { listen.ip().to_string() };
        let authentication =
            if spec.security.is_sasl() { scram_authentication() } else { kafgres_broker::sasl::Authentication::None };
        listeners.push(kafgres_broker::listener::ListenerConfig {
            security: spec.security,
            listen,
            advertised_host: host,
            advertised_port: spec.port,
            authentication,
        });
    }
    Ok(listeners)
}

/// The TLS listeners' files: `kafgres.ssl_*`, each defaulting to
/// PostgreSQL's own setting when `ssl = on` (one certificate for both).
/// `None` (with a warning naming what is missing) when only half is set:
/// the TLS listeners then stay closed, never plain text.
pub fn tls_settings() -> Option<kafgres_broker::tls::TlsSettings> {
    let postgres_ssl = gucs::postgres_setting(c"ssl").as_deref() == Some("on");
    let pick = |ours: &pgrx::GucSetting<Option<std::ffi::CString>>, theirs: &std::ffi::CStr| {
        Some(gucs::string_or(ours, ""))
            .filter(|s| !s.is_empty())
            .or_else(|| postgres_ssl.then(|| gucs::postgres_setting(theirs)).flatten().filter(|s| !s.is_empty()))
            .map(|p| gucs::data_dir_path(&p))
    };
    let cert = pick(&gucs::SSL_CERT_FILE, c"ssl_cert_file");
    let key = pick(&gucs::SSL_KEY_FILE, c"ssl_key_file");
    let client_auth = match gucs::SSL_CLIENT_AUTH.get() {
        gucs::SslClientAuthGuc::None => kafgres_broker::tls::ClientAuth::None,
        gucs::SslClientAuthGuc::Requested => kafgres_broker::tls::ClientAuth::Requested,
        gucs::SslClientAuthGuc::Required => kafgres_broker::tls::ClientAuth::Required,
    };
    match (cert, key) {
        (Some(cert_file), Some(key_file)) => Some(kafgres_broker::tls::TlsSettings {
            cert_file,
            key_file,
            ca_file: pick(&gucs::SSL_CA_FILE, c"ssl_ca_file"),
            client_auth,
        }),
        (None, None) => None,
        (cert, _) => {
            let missing = if cert.is_none() { "kafgres.ssl_cert_file" } else { "kafgres.ssl_key_file" };
            warning!("kafgres: TLS is half configured: {missing} is not set (nor ssl = on with PostgreSQL's own)");
            None
        }
    }
}

/// A reload loads the TLS files again (a renewed certificate, another
/// client-certificate policy); an error keeps the ones in use.
pub fn reload_tls(broker: &kafgres_broker::Broker) {
    let Some(settings) = tls_settings() else { return };
    match broker.reload_tls(settings) {
        Ok(true) => log!("kafgres: TLS certificate and settings reloaded"),
        Ok(false) => {}
        Err(e) => warning!("kafgres: the TLS settings could not be reloaded: {e}; the ones loaded before stay in use"),
    }
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
        gucs::AuthenticationGuc::ScramSha256 => scram_authentication(),
    }
}

fn scram_authentication() -> kafgres_broker::sasl::Authentication {
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

/// The timeline this server writes WAL on, or 0 while it is in recovery (a
/// standby, which does not archive).
fn insert_timeline() -> u32 {
    // SAFETY: RecoveryInProgress reads shared state any process may read;
    // GetWALInsertionTimeLine is valid once recovery has ended, which the
    // first call checked (a server never goes back into recovery).
    unsafe {
        if pg_sys::RecoveryInProgress() {
            0
        } else {
            pg_sys::GetWALInsertionTimeLine()
        }
    }
}
