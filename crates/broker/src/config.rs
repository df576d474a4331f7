//! Broker settings, filled from GUCs by the extension or directly by tests.

use std::net::SocketAddr;
use std::path::PathBuf;

/// `kafgres.segment_reserve_ahead`'s default (the log's own).
pub const SEGMENT_RESERVE_AHEAD_BYTES_DEFAULT: u64 = kafgres_log::RESERVE_AHEAD_BYTES;

/// When an `acks=all` produce is acknowledged and when records become visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// fdatasync before acknowledging `acks=all` and before exposing records to
    /// consumers (the high watermark is the durable end). The default.
    Fsync,
    /// Acknowledge after the write reaches the page cache; the OS flushes later.
    /// Like `synchronous_commit = off`: a crash can lose acknowledged records.
    PageCache,
}

/// How clients must authenticate (`kafgres.authentication`).
#[derive(Clone, PartialEq, Eq)]
pub enum Authentication {
    /// No authentication: every connection may do everything (a PLAINTEXT listener).
    None,
    /// SASL/SCRAM-SHA-256 against PostgreSQL login roles (a SASL_PLAINTEXT listener).
    ScramSha256 {
        /// Secret from which unknown users' mock salts are derived; stable across
        /// restarts in production (PostgreSQL's mock authentication nonce), so
        /// repeated attempts cannot tell a missing role from an existing one.
        mock_secret: [u8; 32],
    },
}

impl Authentication {
    /// SCRAM-SHA-256 with a random mock secret (tests; hosts without a stable secret).
    pub fn scram_sha_256_random() -> Authentication {
        let mut mock_secret = [0u8; 32];
        mock_secret[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        mock_secret[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Authentication::ScramSha256 { mock_secret }
    }
}

impl std::fmt::Debug for Authentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authentication::None => f.write_str("none"),
            Authentication::ScramSha256 { .. } => f.write_str("scram-sha-256"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The primary listener: PLAINTEXT, or SASL_PLAINTEXT when
    /// `authentication` asks for SASL.
    pub listen: SocketAddr,
    /// Listeners besides the primary one (`kafgres.listeners`), any of
    /// Kafka's four security protocols.
    pub extra_listeners: Vec<crate::listener::ListenerConfig>,
    /// The certificate, key and client-certificate policy of the TLS
    /// listeners; `None` when there are none, or TLS is not configured
    /// (then TLS listeners are not opened).
    pub tls: Option<crate::tls::TlsSettings>,
    /// Host and port clients are told to connect to (Metadata, FindCoordinator).
    pub advertised_host: String,
    pub advertised_port: u16,
    pub node_id: i32,
    pub cluster_id: String,
    /// Directory holding one sub-directory per topic-partition.
    pub log_dir: PathBuf,
    /// The database whose catalog this broker serves; the log directory
    /// must belong to it ([`crate::log_dir`]).
    pub log_dir_owner: crate::log_dir::LogDirOwner,
    pub flush_policy: FlushPolicy,
    /// `kafgres.flush_delay`: the least time between the starts of two
    /// flushes of a partition (0: each flush starts as soon as it is wanted).
    pub flush_delay: std::time::Duration,
    pub frame_bytes_max: usize,
    /// Kafka's `queued.max.request.bytes`: the bytes of request frames being
    /// read or handled at once, for all connections together.
    pub request_memory_bytes_max: usize,
    pub connections_max: usize,
    /// Kafka's `max.connections.per.ip` (0: no limit).
    pub connections_per_address_max: usize,
    /// Kafka's ip quota `connection_creation_rate`: new connections per
    /// second from one address (0: no limit).
    pub connection_rate_per_address_max: f64,
    /// Kafka's `connections.max.idle.ms`: a connection with no request (or
    /// with a request that stops arriving half way) for this long is closed.
    pub connection_idle_ms_max: u64,
    /// Kafka's `connections.max.reauth.ms`: an authenticated connection's
    /// session lasts this long (a bearer token's: at most until it expires)
    /// and must re-authenticate before it ends (KIP-368); 0: sessions never
    /// end.
    pub connections_max_reauth_ms: u64,
    /// The `transaction.version` ApiVersions finalizes: 2 (KIP-890 part 2,
    /// Kafka 4's default) or 1, for clients that must not use version 2.
    pub transaction_version: i16,
    /// Kafka's `auto.create.topics.enable` and `num.partitions`.
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    /// Kafka's `message.max.bytes`: the largest record batch accepted (each
    /// batch of a produce is checked on its own).
    pub message_bytes_max: usize,
    pub segment_bytes_max: u64,
    /// `kafgres.segment_reserve_ahead`: how far ahead of its end a busy
    /// active segment keeps its blocks allocated (`LogConfig::reserve_ahead_bytes`).
    pub segment_reserve_ahead_bytes: u64,
    /// Kafka's `group.initial.rebalance.delay.ms`: how long a new group waits
    /// for more members before its first rebalance completes.
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.consumer.session.timeout.ms` (KIP-848 groups).
    pub group_consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (KIP-848 groups).
    pub group_consumer_heartbeat_interval_ms: i32,
    /// Streams groups (KIP-1071): Kafka's `group.streams.*` settings.
    pub group_streams: crate::group::StreamsGroupConfig,
    /// Share groups (KIP-932): Kafka's `group.share.*` settings and the
    /// defaults of each group's `share.*` configs.
    pub share: crate::share::ShareConfig,
    /// `transactional.id.expiration.ms`: how long a transactional id with no
    /// transaction open is kept after its last change.
    pub transactional_id_expiration_ms: i64,
    /// How clients authenticate (`kafgres.authentication`).
    pub authentication: Authentication,
    /// `kafgres.cluster.internal_secret`: with it, Kafgres's own clients
    /// log in with `KAFGRES-INTERNAL` (`crate::sasl::internal`).
    pub internal_secret: Option<String>,
    /// Kafka's `connection.failed.authentication.delay.ms`: a failed login
    /// is answered after this, doubled for each earlier failure of its
    /// address or role in the last minute (at most 1 s).
    pub failed_authentication_delay_ms: u64,
    /// Whether requests are checked against the ACLs (`kafgres.authorizer =
    /// acl`); off, everyone may do everything and the ACL APIs answer
    /// SECURITY_DISABLED, as Kafka without an authorizer does.
    pub authorizer_enabled: bool,
    /// How certificate and bearer-token subjects become roles, and whether
    /// SASL/OAUTHBEARER is on (its token validator), at start.
    pub identities: std::sync::Arc<crate::ident::IdentityRules>,
    /// Where the counters and the connection table live (shared memory in
    /// the extension, so SQL can read them).
    pub metrics: &'static crate::metrics::BrokerMetrics,
    /// Replication: this broker's leader epoch, the synchronous policy, the
    /// followers seen (shared by every partition).
    pub replication: std::sync::Arc<crate::replication::ReplicationState>,
    /// Set on a standby: the leader this broker copies from. A standby
    /// serves no client data; its Metadata, FindCoordinator and
    /// DescribeCluster send clients to the leader.
    pub follow: Option<crate::replication::follower::FollowerConfig>,
    /// On a standby, the leader as clients reach it (node id, host, port).
    pub leader: Option<LeaderAddress>,
    /// `kafgres.archive_command` at start (a reload may change it).
    pub archive_command: Option<String>,
    /// `kafgres.client_telemetry_*` at start (a reload may change them).
    pub client_telemetry: crate::telemetry::TelemetrySettings,
    /// `kafgres.delegation_token_*` (static, as Kafka's `delegation.token.*`).
    pub delegation_tokens: crate::delegation::TokenSettings,
    /// The PostgreSQL timeline a primary writes its WAL on (0 on a standby
    /// and in tests): `%t` in the archive command.
    pub timeline: u32,
    /// The Prometheus endpoint (`kafgres.metrics_port`), if on.
    pub metrics_endpoint: Option<crate::prometheus::MetricsEndpoint>,
    /// The reloadable settings in force: built by `Broker::start` from the
    /// initial values above (`flush_policy`, `frame_bytes_max`, ...), changed
    /// by `Broker::reload`. Read these, not the initial values, once started.
    pub live: std::sync::Arc<crate::settings::LiveSettings>,
}

/// Where clients find the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAddress {
    pub node_id: i32,
    /// Its primary listener, as advertised.
    pub host: String,
    pub port: u16,
    /// Every listener it advertises (Kafka's `advertised.listeners`), so a
    /// standby sends a client to the leader's listener of the protocol the
    /// client came in on; empty when the leader did not record them.
    pub listeners: Vec<crate::listener::ListenerSpec>,
}

impl LeaderAddress {
    /// The leader's listener for clients of `security`: the first one it
    /// advertises with that protocol, else its primary listener.
    pub fn endpoint_for(&self, security: crate::listener::SecurityProtocol) -> (&str, u16) {
        match self.listeners.iter().find(|l| l.security == security && !l.host.is_empty()) {
            Some(listener) => (&listener.host, listener.port),
            None => (&self.host, self.port),
        }
    }
}

impl BrokerConfig {
    /// Whether this broker is a standby's follower.
    pub fn is_follower(&self) -> bool {
        self.follow.is_some()
    }

    /// The primary listener's security protocol: SASL_PLAINTEXT when it
    /// authenticates, else PLAINTEXT.
    pub fn primary_security(&self) -> crate::listener::SecurityProtocol {
        match self.authentication {
            Authentication::None => crate::listener::SecurityProtocol::Plaintext,
            Authentication::ScramSha256 { .. } => crate::listener::SecurityProtocol::SaslPlaintext,
        }
    }

    /// Kafka's `advertised.listeners`: every listener as its clients reach it.
    pub fn advertised_listeners(&self) -> String {
        let primary = format!("{}://{}:{}", self.primary_security().name(), self.advertised_host, self.advertised_port);
        let extra = self
            .extra_listeners
            .iter()
            .map(|l| format!("{}://{}:{}", l.security.name(), l.advertised_host, l.advertised_port));
        std::iter::once(primary).chain(extra).collect::<Vec<_>>().join(",")
    }

    /// The node clients are sent to (Metadata, FindCoordinator,
    /// DescribeCluster): this broker, or on a standby its leader.
    pub fn serving_node(&self) -> (i32, &str, u16) {
        match &self.leader {
            Some(l) if self.is_follower() => (l.node_id, &l.host, l.port),
            _ => (self.node_id, &self.advertised_host, self.advertised_port),
        }
    }
}

impl BrokerConfig {
    /// Settings for tests: an ephemeral port on loopback and a given log dir.
    pub fn for_tests(log_dir: PathBuf) -> BrokerConfig {
        BrokerConfig {
            listen: "127.0.0.1:0".parse().expect("literal address"),
            extra_listeners: Vec::new(),
            tls: None,
            advertised_host: "127.0.0.1".into(),
            advertised_port: 0,
            node_id: 1,
            cluster_id: "kafgres-test-cluster".into(),
            log_dir,
            log_dir_owner: crate::log_dir::LogDirOwner::for_tests(),
            flush_policy: FlushPolicy::Fsync,
            flush_delay: std::time::Duration::ZERO,
            frame_bytes_max: 100 << 20,
            request_memory_bytes_max: 512 << 20,
            connections_max: 1000,
            connections_per_address_max: 0,
            connection_rate_per_address_max: 0.0,
            connection_idle_ms_max: 600_000,
            connections_max_reauth_ms: 0,
            transaction_version: 2,
            auto_create_topics: true,
            default_partitions: 1,
            message_bytes_max: crate::topic_config::MESSAGE_BYTES_MAX_DEFAULT,
            segment_bytes_max: 1 << 30,
            segment_reserve_ahead_bytes: SEGMENT_RESERVE_AHEAD_BYTES_DEFAULT,
            // Tests join groups one member at a time; waiting helps nothing.
            group_initial_rebalance_delay_ms: 0,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_streams: crate::group::StreamsGroupConfig::default(),
            share: crate::share::ShareConfig::default(),
            transactional_id_expiration_ms: crate::txn::TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
            authentication: Authentication::None,
            internal_secret: None,
            failed_authentication_delay_ms: 100,
            authorizer_enabled: false,
            identities: std::sync::Arc::default(),
            metrics: crate::metrics::BrokerMetrics::leaked(),
            replication: std::sync::Arc::new(crate::replication::ReplicationState::new(
                0,
                None,
                crate::replication::state::LAG_TIME_MAX_DEFAULT,
            )),
            follow: None,
            leader: None,
            metrics_endpoint: None,
            archive_command: None,
            client_telemetry: crate::telemetry::TelemetrySettings::default(),
            delegation_tokens: crate::delegation::TokenSettings::default(),
            timeline: 0,
            live: std::sync::Arc::new(crate::settings::LiveSettings::placeholder()),
        }
    }
}
