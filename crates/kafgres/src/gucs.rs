//! The `kafgres.*` settings. All are read by the worker's main thread only
//! (pgrx forbids GUC reads elsewhere) and handed to the data plane as a
//! `BrokerConfig`. Settings marked postmaster need a restart; the others are
//! reloaded on SIGHUP.

use std::ffi::CString;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};

#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum LogLevelGuc {
    #[name = c"error"]
    Error,
    #[name = c"warning"]
    Warning,
    #[name = c"info"]
    Info,
    #[name = c"debug"]
    Debug,
}

#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum FlushPolicyGuc {
    /// fdatasync before acknowledging acks=all and before consumers see records.
    #[name = c"fsync"]
    Fsync,
    /// Acknowledge once written to the OS page cache (like synchronous_commit = off).
    #[name = c"page_cache"]
    PageCache,
}

/// `kafgres.authentication`: how Kafka clients authenticate.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum AuthenticationGuc {
    /// None: any client may do anything (Kafka's PLAINTEXT listener).
    #[name = c"none"]
    None,
    /// SASL/SCRAM-SHA-256 as a PostgreSQL login role, with its password.
    #[name = c"scram-sha-256"]
    ScramSha256,
}

/// `kafgres.ssl_client_name`: PostgreSQL's `clientname` option of `cert` authentication.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SslClientNameGuc {
    /// The subject's common name.
    #[name = c"CN"]
    Cn,
    /// The whole subject, in RFC 2253 form (CN=app,O=Example,C=DE).
    #[name = c"DN"]
    Dn,
}

/// `kafgres.authorizer`: whether Kafka requests are checked against ACLs.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum AuthorizerGuc {
    /// No authorizer: every client may do everything; the ACL APIs answer SECURITY_DISABLED.
    #[name = c"none"]
    None,
    /// Kafka's ACLs, stored in kafgres.acls, with Postgres roles as principals.
    #[name = c"acl"]
    Acl,
}

/// `kafgres.ssl_client_auth`: Kafka's `ssl.client.auth`.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SslClientAuthGuc {
    /// No client certificate is asked for.
    #[name = c"none"]
    None,
    /// Asked for; a client without one connects as User:ANONYMOUS.
    #[name = c"requested"]
    Requested,
    /// A client without a certificate signed by kafgres.ssl_ca_file fails the handshake.
    #[name = c"required"]
    Required,
}

pub static LISTENERS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static SSL_CERT_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static SSL_KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static SSL_CA_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static SSL_CLIENT_AUTH: GucSetting<SslClientAuthGuc> = GucSetting::<SslClientAuthGuc>::new(SslClientAuthGuc::None);
pub static SSL_CLIENT_NAME: GucSetting<SslClientNameGuc> = GucSetting::<SslClientNameGuc>::new(SslClientNameGuc::Cn);
pub static SSL_IDENT_MAP: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static OAUTHBEARER_JWKS_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static OAUTHBEARER_EXPECTED_ISSUER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static OAUTHBEARER_EXPECTED_AUDIENCE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static OAUTHBEARER_SUB_CLAIM_NAME: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"sub"));
pub static OAUTHBEARER_SCOPE_CLAIM_NAME: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"scope"));
pub static OAUTHBEARER_CLOCK_SKEW_S: GucSetting<i32> = GucSetting::<i32>::new(30);
pub static OAUTHBEARER_IDENT_MAP: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static AUTHORIZER: GucSetting<AuthorizerGuc> = GucSetting::<AuthorizerGuc>::new(AuthorizerGuc::None);
pub static AUTHENTICATION: GucSetting<AuthenticationGuc> =
    GucSetting::<AuthenticationGuc>::new(AuthenticationGuc::None);
pub static LISTEN_ADDRESS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"127.0.0.1"));
pub static PORT: GucSetting<i32> = GucSetting::<i32>::new(9092);
pub static ADVERTISED_HOST: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static ADVERTISED_PORT: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));
pub static LOG_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static DATA_PLANE_THREADS: GucSetting<i32> = GucSetting::<i32>::new(2);
pub static FLUSH_POLICY: GucSetting<FlushPolicyGuc> = GucSetting::<FlushPolicyGuc>::new(FlushPolicyGuc::Fsync);
pub static FLUSH_DELAY_US: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static MAX_FRAME_BYTES: GucSetting<i32> = GucSetting::<i32>::new(100 * 1024 * 1024);
pub static MAX_CONNECTIONS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static MAX_CONNECTIONS_PER_IP: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static MAX_CONNECTION_RATE_PER_IP: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static ARCHIVE_COMMAND: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static CLIENT_TELEMETRY_METRICS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static CLIENT_TELEMETRY_PUSH_INTERVAL_MS: GucSetting<i32> =
    GucSetting::<i32>::new(kafgres_broker::telemetry::PUSH_INTERVAL_MS_DEFAULT);
pub static CLIENT_TELEMETRY_MAX_BYTES: GucSetting<i32> =
    GucSetting::<i32>::new(kafgres_broker::telemetry::METRICS_BYTES_MAX_DEFAULT);
pub static LOG_LEVEL: GucSetting<LogLevelGuc> = GucSetting::<LogLevelGuc>::new(LogLevelGuc::Info);
pub static METRICS_PORT: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static METRICS_LISTEN_ADDRESS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"127.0.0.1"));
pub static REQUEST_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(512);
pub static FAILED_AUTHENTICATION_DELAY_MS: GucSetting<i32> = GucSetting::<i32>::new(100);
pub static CONNECTIONS_MAX_REAUTH_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static TRANSACTION_VERSION: GucSetting<i32> = GucSetting::<i32>::new(2);
pub static AUTO_CREATE_TOPICS: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static DEFAULT_PARTITIONS: GucSetting<i32> = GucSetting::<i32>::new(1);
pub static SEGMENT_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1 << 30);
/// In kB (the GUC's unit).
pub static SEGMENT_RESERVE_AHEAD_KB: GucSetting<i32> =
    GucSetting::<i32>::new((kafgres_broker::config::SEGMENT_RESERVE_AHEAD_BYTES_DEFAULT >> 10) as i32);
pub static GROUP_INITIAL_REBALANCE_DELAY_MS: GucSetting<i32> = GucSetting::<i32>::new(3000);
pub static GROUP_CONSUMER_SESSION_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(45_000);
/// Kafka's `transactional.id.expiration.ms` (7 days), in seconds.
pub static TRANSACTIONAL_ID_EXPIRATION_S: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 3600);
pub static GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(5_000);
pub static CONNECTIONS_MAX_IDLE_MS: GucSetting<i32> = GucSetting::<i32>::new(600_000);
pub static SQL_BRIDGE_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
pub static READ_YOUR_WRITES_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(1);
pub static PRIMARY_KAFKA_ADDRESS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static DELEGATION_TOKEN_SECRET_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static DELEGATION_TOKEN_MAX_LIFETIME_MS: GucSetting<i32> =
    GucSetting::<i32>::new(kafgres_broker::delegation::MAX_LIFETIME_MS_DEFAULT as i32);
pub static DELEGATION_TOKEN_EXPIRY_TIME_MS: GucSetting<i32> =
    GucSetting::<i32>::new(kafgres_broker::delegation::EXPIRY_TIME_MS_DEFAULT as i32);

pub fn register() {
    register_group_settings();
    register_connection_settings();
    register_authentication_setting();
    register_tls_settings();
    register_sql_bridge_settings();
    register_replication_settings();
    register_delegation_token_settings();
    GucRegistry::define_string_guc(
        c"kafgres.listen_address",
        c"Address the Kafka listener binds to.",
        c"An IP address; 127.0.0.1 by default so only local clients can connect.",
        &LISTEN_ADDRESS,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.port",
        c"TCP port of the Kafka listener.",
        c"",
        &PORT,
        1,
        65535,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.advertised_host",
        c"Host name clients are told to connect to.",
        c"Empty means kafgres.listen_address.",
        &ADVERTISED_HOST,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.advertised_port",
        c"Port clients are told to connect to.",
        c"0 means kafgres.port.",
        &ADVERTISED_PORT,
        0,
        65535,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.database",
        c"Database whose kafgres schema holds the broker's metadata.",
        c"The broker worker connects to it; run CREATE EXTENSION kafgres there.",
        &DATABASE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.log_dir",
        c"Directory for topic segment files.",
        c"Empty means the kafgres directory inside the data directory.",
        &LOG_DIR,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.data_plane_threads",
        c"Threads serving Kafka connections.",
        c"",
        &DATA_PLANE_THREADS,
        1,
        256,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"kafgres.flush_policy",
        c"When produced records are acknowledged and made visible.",
        c"fsync: after fdatasync (durable, the default); page_cache: after the write reaches the OS.",
        &FLUSH_POLICY,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.flush_delay",
        c"Least time between two flushes of a partition under continuous appends, in microseconds.",
        c"Like commit_delay: appends made meanwhile join the next fdatasync. 0 (the default) flushes at once.",
        &FLUSH_DELAY_US,
        0,
        100_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.max_frame_bytes",
        c"Largest Kafka request accepted, in bytes.",
        c"Larger requests close the connection (Kafka's socket.request.max.bytes).",
        &MAX_FRAME_BYTES,
        1024,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.max_connections",
        c"Most Kafka client connections served at once.",
        c"",
        &MAX_CONNECTIONS,
        1,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.max_connections_per_ip",
        c"Most Kafka client connections from one address at once (0: no limit).",
        c"Kafka's max.connections.per.ip: one address cannot take every slot of kafgres.max_connections.",
        &MAX_CONNECTIONS_PER_IP,
        0,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.max_connection_rate_per_ip",
        c"New Kafka connections per second from one client address; 0 means no limit.",
        c"Kafka's ip quota connection_creation_rate, measured over 11 one-second samples (a burst of ten seconds' \
          worth passes); a connection over it is closed at once.",
        &MAX_CONNECTION_RATE_PER_IP,
        0,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.archive_command",
        c"Shell command run for each closed segment file of every partition; empty means off.",
        c"As archive_command: %p is the file's path, %f its path under kafgres.log_dir (partition directory/file). \
          A segment is kept from retention until its files are archived.",
        &ARCHIVE_COMMAND,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.client_telemetry_metrics",
        c"Metric name prefixes Kafka clients are asked to push (KIP-714); * for all; empty means off.",
        c"A comma-separated list. While empty, GetTelemetrySubscriptions and PushTelemetry are neither advertised \
          nor served (as Kafka without a telemetry reporter); what clients push is in kafgres.client_metrics.",
        &CLIENT_TELEMETRY_METRICS,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.client_telemetry_push_interval_ms",
        c"How often Kafka clients push their telemetry, in milliseconds.",
        c"KIP-714's push interval (Kafka's client-metrics interval.ms); an earlier push is throttled.",
        &CLIENT_TELEMETRY_PUSH_INTERVAL_MS,
        100,
        3_600_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.client_telemetry_max_bytes",
        c"The largest telemetry payload a Kafka client may push, in bytes.",
        c"Kafka's telemetry.max.bytes; a larger push is refused with TELEMETRY_TOO_LARGE.",
        &CLIENT_TELEMETRY_MAX_BYTES,
        1,
        64 << 20,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"kafgres.log_level",
        c"The least severe of the broker's own lines written to the server log.",
        c"error, warning, info (the default) or debug; debug lines are written at LOG.",
        &LOG_LEVEL,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.metrics_port",
        c"TCP port of the Prometheus endpoint (GET /metrics); 0 means off.",
        c"Served by the broker from its own counters, with no SQL (docs/operations.md lists the metrics).",
        &METRICS_PORT,
        0,
        65535,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.metrics_listen_address",
        c"IP address the Prometheus endpoint listens on.",
        c"127.0.0.1 unless set: the figures name topics, groups and roles.",
        &METRICS_LISTEN_ADDRESS,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.request_memory_mb",
        c"Memory for Kafka request frames being read or handled, all connections together.",
        c"Kafka's queued.max.request.bytes: while it is spent, connections read nothing more until requests finish.",
        &REQUEST_MEMORY_MB,
        1,
        1_048_576,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"kafgres.auto_create_topics",
        c"Create unknown topics on Metadata requests that allow it.",
        c"Kafka's auto.create.topics.enable.",
        &AUTO_CREATE_TOPICS,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.default_partitions",
        c"Partitions of auto-created topics and of CreateTopics with -1.",
        c"Kafka's num.partitions.",
        &DEFAULT_PARTITIONS,
        1,
        10_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.segment_bytes",
        c"Size at which a partition's active segment is rolled.",
        c"Kafka's log.segment.bytes.",
        &SEGMENT_BYTES,
        1024 * 1024,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.segment_reserve_ahead",
        c"How far ahead of its end a busy partition's active segment keeps its disk blocks allocated.",
        c"Allocated with fallocate, the file's length unchanged; only once the segment holds this much, \
          and freed when it rolls. Saves the file system's per-block work on every write. 0 turns it off.",
        &SEGMENT_RESERVE_AHEAD_KB,
        0,
        1024 * 1024,
        GucContext::Postmaster,
        GucFlags::UNIT_KB,
    );
}

pub fn register_connection_settings() {
    GucRegistry::define_int_guc(
        c"kafgres.connections_max_idle_ms",
        c"Close Kafka connections idle (or stalled mid-request) for this long.",
        c"Kafka's connections.max.idle.ms.",
        &CONNECTIONS_MAX_IDLE_MS,
        1_000,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

pub fn register_sql_bridge_settings() {
    GucRegistry::define_int_guc(
        c"kafgres.sql_bridge_memory_mb",
        c"Memory the SQL bridge may hold for the sends of transactions still open.",
        c"A transaction that sends more waits in the WAL, not lost, until this is raised (reloadable).",
        &SQL_BRIDGE_MEMORY_MB,
        1,
        1 << 20,
        GucContext::Sighup,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_int_guc(
        c"kafgres.read_your_writes_timeout",
        c"How long kafgres.read and kafgres.consume wait for the session's own committed sends.",
        c"0 reads without waiting.",
        &READ_YOUR_WRITES_TIMEOUT_MS,
        0,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
}

pub fn register_replication_settings() {
    GucRegistry::define_int_guc(
        c"kafgres.node_id",
        c"This server's Kafka node id.",
        c"Give a primary and each of its standbys different ids: clients tell brokers apart by them.",
        &NODE_ID,
        0,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.primary_kafka_address",
        c"On a standby: host:port of the primary's Kafka listener, to copy topic data from.",
        c"Empty means the address the primary's broker recorded in kafgres.leader_epochs (its advertised listener).",
        &PRIMARY_KAFKA_ADDRESS,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

fn register_tls_settings() {
    GucRegistry::define_string_guc(
        c"kafgres.listeners",
        c"Kafka listeners besides the one on kafgres.listen_address and kafgres.port.",
        c"Comma-separated PROTOCOL://address:port, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (as \
          Kafka's listeners), e.g. 'SASL_SSL://0.0.0.0:9093'. SASL listeners take SCRAM-SHA-256 (and PLAIN on \
          SASL_SSL); SSL and SASL_SSL need kafgres.ssl_cert_file and kafgres.ssl_key_file (or ssl = on). Clients \
          are told kafgres.advertised_host and the listener's port when its address is a wildcard.",
        &LISTENERS,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.ssl_cert_file",
        c"PEM certificate chain of the TLS listeners.",
        c"Empty means PostgreSQL's ssl_cert_file when ssl = on. Relative to the data directory. Reloaded on \
          SIGHUP without dropping connections.",
        &SSL_CERT_FILE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.ssl_key_file",
        c"PEM private key of the TLS listeners (unencrypted).",
        c"Empty means PostgreSQL's ssl_key_file when ssl = on.",
        &SSL_KEY_FILE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.ssl_ca_file",
        c"PEM certificates of the CAs client certificates must chain to.",
        c"Empty means PostgreSQL's ssl_ca_file when ssl = on. Needed unless kafgres.ssl_client_auth = none.",
        &SSL_CA_FILE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"kafgres.ssl_client_auth",
        c"Whether TLS clients must present a certificate (Kafka's ssl.client.auth).",
        c"none, requested or required. On an SSL listener a certificate's CN is the PostgreSQL role the client \
          logs in as (it must exist and have LOGIN, as with PostgreSQL's cert authentication).",
        &SSL_CLIENT_AUTH,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"kafgres.ssl_client_name",
        c"Which name of a client certificate is looked up as the role (PostgreSQL's clientname).",
        c"CN (the subject's common name) or DN (the whole subject in RFC 2253 form, for a map).",
        &SSL_CLIENT_NAME,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.ssl_ident_map",
        c"The user name map of pg_ident.conf that client certificate names go through.",
        c"Empty: the name is the role. As PostgreSQL's map option of cert authentication; the first line of the \
          map that matches gives the role.",
        &SSL_IDENT_MAP,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_jwks_file",
        c"JSON Web Key Set of the identity provider whose tokens SASL/OAUTHBEARER accepts.",
        c"Empty: OAUTHBEARER is off. Offered on SASL_SSL listeners only. Read again when the file changes. Kafka's \
          sasl.oauthbearer.jwks.endpoint.url as a file.",
        &OAUTHBEARER_JWKS_FILE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_expected_issuer",
        c"The iss claim OAUTHBEARER tokens must carry (Kafka's sasl.oauthbearer.expected.issuer).",
        c"Empty: not checked.",
        &OAUTHBEARER_EXPECTED_ISSUER,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_expected_audience",
        c"Comma-separated audiences, one of which the aud claim of OAUTHBEARER tokens must hold.",
        c"Empty: not checked. Kafka's sasl.oauthbearer.expected.audience.",
        &OAUTHBEARER_EXPECTED_AUDIENCE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_sub_claim_name",
        c"The claim of an OAUTHBEARER token that names its principal (Kafka's sasl.oauthbearer.sub.claim.name).",
        c"The principal is the role, or goes through kafgres.oauthbearer_ident_map.",
        &OAUTHBEARER_SUB_CLAIM_NAME,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_scope_claim_name",
        c"The claim of an OAUTHBEARER token that holds its scopes (Kafka's sasl.oauthbearer.scope.claim.name).",
        c"Checked for form only.",
        &OAUTHBEARER_SCOPE_CLAIM_NAME,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.oauthbearer_clock_skew",
        c"Seconds of difference allowed between this server's clock and the token issuer's.",
        c"Kafka's sasl.oauthbearer.clock.skew.seconds.",
        &OAUTHBEARER_CLOCK_SKEW_S,
        0,
        3600,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_string_guc(
        c"kafgres.oauthbearer_ident_map",
        c"The user name map of pg_ident.conf that OAUTHBEARER token subjects go through.",
        c"Empty: the subject is the role. With a map, a client's authorization id must be a role the map gives \
          the subject (PostgreSQL's rule); without, it must be the subject (Kafka's).",
        &OAUTHBEARER_IDENT_MAP,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// A PostgreSQL setting's value (`ssl`, `ssl_cert_file`…), read on the main thread.
pub fn postgres_setting(name: &std::ffi::CStr) -> Option<String> {
    // SAFETY: GetConfigOption with missing_ok returns NULL or a string owned
    // by the GUC machinery, copied at once; called on the main thread.
    let value = unsafe { pgrx::pg_sys::GetConfigOption(name.as_ptr(), true, false) };
    if value.is_null() {
        return None;
    }
    // SAFETY: a non-NULL result is a NUL-terminated string (see above).
    Some(unsafe { std::ffi::CStr::from_ptr(value) }.to_string_lossy().into_owned())
}

/// A path as PostgreSQL reads its file settings: relative to the data directory.
pub fn data_dir_path(path: &str) -> std::path::PathBuf {
    let path = std::path::PathBuf::from(path);
    if path.is_absolute() {
        return path;
    }
    // SAFETY: DataDir is set before any extension code runs and never
    // changes; read on the process's main thread.
    let data_dir = unsafe { std::ffi::CStr::from_ptr(pgrx::pg_sys::DataDir) }.to_string_lossy().into_owned();
    std::path::PathBuf::from(data_dir).join(path)
}

/// Kafka's `delegation.token.*` (KIP-48), read at start as Kafka reads them.
pub fn register_delegation_token_settings() {
    GucRegistry::define_string_guc(
        c"kafgres.delegation_token_secret_key",
        c"The secret delegation tokens' HMACs are made with (Kafka's delegation.token.secret.key); empty: tokens off.",
        c"A token's HMAC, its password, is HmacSHA512 of its id under this secret: keep it secret, and the same across \
          restarts and on standbys, or every token stops working. Only superusers can see it.",
        &DELEGATION_TOKEN_SECRET_KEY,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_int_guc(
        c"kafgres.delegation_token_max_lifetime_ms",
        c"The longest a delegation token lives, renewals included (Kafka's delegation.token.max.lifetime.ms).",
        c"A token asked for with a shorter lifetime gets that one.",
        &DELEGATION_TOKEN_MAX_LIFETIME_MS,
        1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"kafgres.delegation_token_expiry_time_ms",
        c"How long a delegation token is valid before it must be renewed (Kafka's delegation.token.expiry.time.ms).",
        c"Also the longest a renewal extends it by; never past its maximum lifetime.",
        &DELEGATION_TOKEN_EXPIRY_TIME_MS,
        1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::UNIT_MS,
    );
}

pub fn register_authentication_setting() {
    GucRegistry::define_enum_guc(
        c"kafgres.authentication",
        c"How Kafka clients authenticate.",
        c"none: no authentication (PLAINTEXT); scram-sha-256: SASL/SCRAM-SHA-256 as a PostgreSQL login role \
          with its password (SASL_PLAINTEXT).",
        &AUTHENTICATION,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.failed_authentication_delay_ms",
        c"How long a failed Kafka login waits for its answer, doubled for each recent failure of its address or role.",
        c"Kafka's connection.failed.authentication.delay.ms; the doubling (within a minute, at most 1 s) slows \
          password guessing from one address or against one role.",
        &FAILED_AUTHENTICATION_DELAY_MS,
        0,
        5_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.connections_max_reauth_ms",
        c"How long an authenticated Kafka connection's session lasts before it must re-authenticate (0: for ever).",
        c"Kafka's connections.max.reauth.ms (KIP-368): SaslAuthenticate tells the client the session's lifetime, at \
          most until its bearer token expires; a request after the end closes the connection. For connections \
          accepted after a change.",
        &CONNECTIONS_MAX_REAUTH_MS,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.transaction_version",
        c"The transaction.version feature level ApiVersions finalizes: 2 (KIP-890 part 2) or 1.",
        c"Kafka 4's default is 2: clients that know it bump the producer epoch at every commit and add partitions \
          with their produces. 1 makes every client use the version 1 protocol (kafka-features downgrade on \
          Kafka). Clients read it when they connect.",
        &TRANSACTION_VERSION,
        1,
        2,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"kafgres.authorizer",
        c"Whether Kafka requests are checked against the ACLs of kafgres.acls.",
        c"none: every client may do everything (the ACL APIs answer SECURITY_DISABLED); acl: Kafka's ACLs, \
          principals User:<role>, bindings of a group role applying to its members, superusers allowed everything. \
          A reload (SELECT pg_reload_conf()) applies a change and rereads kafgres.acls.",
        &AUTHORIZER,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

pub fn register_group_settings() {
    GucRegistry::define_int_guc(
        c"kafgres.group_initial_rebalance_delay_ms",
        c"How long a new consumer group waits for more members before its first rebalance.",
        c"Kafka's group.initial.rebalance.delay.ms.",
        &GROUP_INITIAL_REBALANCE_DELAY_MS,
        0,
        300_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.group_consumer_session_timeout_ms",
        c"How long a member of a KIP-848 consumer group stays without a heartbeat before it is fenced.",
        c"Kafka's group.consumer.session.timeout.ms.",
        &GROUP_CONSUMER_SESSION_TIMEOUT_MS,
        1_000,
        3_600_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"kafgres.transactional_id_expiration",
        c"How long a transactional id with no transaction open is kept after its last change.",
        c"Kafka's transactional.id.expiration.ms; then its row in kafgres.transactions is deleted and its next \
          InitProducerId gets a new producer id.",
        &TRANSACTIONAL_ID_EXPIRATION_S,
        1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"kafgres.group_consumer_heartbeat_interval_ms",
        c"How often members of KIP-848 consumer groups heartbeat (they learn of new assignments then).",
        c"Kafka's group.consumer.heartbeat.interval.ms.",
        &GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
        100,
        600_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// Where partition directories live: `kafgres.log_dir`, or `$PGDATA/kafgres`.
pub fn log_dir() -> std::path::PathBuf {
    match string_or(&LOG_DIR, "") {
        dir if dir.is_empty() => {
            // SAFETY: DataDir is set before any extension code runs and never
            // changes; read on the process's main thread.
            let data_dir = unsafe { std::ffi::CStr::from_ptr(pgrx::pg_sys::DataDir) }.to_string_lossy().into_owned();
            std::path::PathBuf::from(data_dir).join("kafgres")
        }
        dir => std::path::PathBuf::from(dir),
    }
}

/// A GUC string, or `default` when unset or empty.
pub fn string_or(setting: &GucSetting<Option<CString>>, default: &str) -> String {
    setting.get().and_then(|c| c.into_string().ok()).filter(|s| !s.is_empty()).unwrap_or_else(|| default.to_owned())
}
