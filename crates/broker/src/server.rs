//! Starting and stopping the data plane: open every partition log, bind the
//! listeners, accept connections under a limit (shaking hands first on TLS
//! listeners), and on shutdown stop accepting, let connections go and flush
//! every log.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::catalog::{Catalog, CatalogSnapshot};
use crate::config::Authentication;
use crate::config::BrokerConfig;
use crate::connection::{serve_connection, Accepted, Transport};
use crate::context::BrokerContext;
use crate::group_service::GroupService;
use crate::listener::{Endpoint, SecurityProtocol};
use crate::partition::Partition;
use crate::producer_ids::ProducerIds;
use crate::replication::board::Role;
use crate::tls::TlsContext;
use crate::topic_admin::TopicAdmin;
use crate::topics::{Topic, TopicRegistry, Topics};
use crate::txn::{TxnService, TxnServiceConfig};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot open the log of topic {topic}: {source}")]
    Log { topic: String, source: kafgres_log::LogError },
    #[error(transparent)]
    LogDir(#[from] crate::log_dir::LogDirError),
}

/// A running data plane.
pub struct Broker {
    ctx: Arc<BrokerContext>,
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    accept_loops: Vec<tokio::task::JoinHandle<()>>,
    /// The bound address of every listener opened, the primary first.
    listener_addrs: Vec<(SecurityProtocol, SocketAddr)>,
    /// The TLS listeners' certificates, when any is open.
    tls: Option<Arc<TlsContext>>,
    /// One permit per open connection: all of them back means every
    /// connection has ended.
    connections: Arc<Semaphore>,
    /// A standby's follower: how the copy goes.
    follower: Arc<crate::replication::follower::FollowerState>,
    /// The Prometheus endpoint's bound address, when it is open.
    metrics_addr: Option<SocketAddr>,
    /// The connection rate limit the accept loops share (a reload changes
    /// it; the per-address counts are the dynamic configs' admin's).
    rates: Arc<crate::limits::ConnectionRates>,
    /// The runtime the broker runs on (a reload may start a task on it).
    runtime: tokio::runtime::Handle,
    /// Segment archiving's command (a reload changes it).
    archive: Arc<crate::archive::Archive>,
}

/// Permits of the semaphore that counts open connections (one each): far
/// above any `connections_max`, which is checked against the count so that a
/// reload can change it. A shutdown takes them all back to know every
/// connection has ended.
const CONNECTION_PERMITS: u32 = 1 << 24;

/// How long a shutdown lets requests in flight finish before it closes the
/// partitions anyway.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a TLS client may take over its handshake before the connection
/// is dropped (it holds a connection slot meanwhile).
pub const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A bound listener and what its connections are.
struct BoundListener {
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    authentication: Authentication,
    tls: Option<Arc<TlsContext>>,
}

impl Broker {
    /// Opens the logs of `topics` and starts serving. Must run on a tokio runtime.
    pub async fn start(
        mut config: BrokerConfig,
        catalog: Arc<dyn Catalog>,
        snapshot: impl Into<CatalogSnapshot>,
    ) -> Result<Broker, StartError> {
        let CatalogSnapshot {
            topics: records,
            offsets,
            transactions,
            acls,
            client_quotas,
            share_states,
            group_configs,
            broker_configs,
            delegation_tokens,
        } = snapshot.into();
        let statics = crate::settings::Reloadable::from(&config);
        // The dynamic broker configs before anything reads the settings in
        // force: the topics opened below take their dynamic defaults.
        let layers = crate::dynamic_config::admin::initial_layers(config.node_id, &broker_configs);
        let live = crate::settings::LiveSettings::new(&layers.over_statics(&statics));
        live.set_statics(&statics);
        live.set_dynamic(layers);
        config.live = Arc::new(live);
        let mut registry = TopicRegistry::default();
        let housekeeping = crate::partition::Housekeeping::default();
        // Before the partitions open: each reads its archive checkpoint against it.
        housekeeping.archive.set_timeline(config.timeline);
        let now = crate::now_ms();
        std::fs::create_dir_all(&config.log_dir).map_err(|source| StartError::Log {
            topic: String::new(),
            source: kafgres_log::LogError::Io { path: config.log_dir.clone(), source },
        })?;
        crate::log_dir::claim_owner(&config.log_dir, &config.log_dir_owner)?;
        for record in &records {
            match Topic::open(record, &config, &housekeeping, now) {
                Ok(topic) => {
                    registry.insert(topic);
                }
                // One topic's log cannot take the broker down: it is offline
                // (its clients get KAFKA_STORAGE_ERROR), the rest serve.
                Err(e) => {
                    log::error!(
                        "topic {} is offline: its log cannot be opened: {e}; the other topics are served. \
                         Fix the cause, then SELECT pg_reload_conf() to open it again",
                        record.name
                    );
                    registry.insert_offline(record.clone(), e.to_string());
                }
            }
        }
        // Only once every topic of the catalog has claimed its directories:
        // what is left unclaimed then is unreachable. Not on a standby: its
        // catalog replays behind (or ahead of) the copy, whose topics are the
        // leader's, reconciled by the follower once it connects.
        if !config.is_follower() {
            crate::log_dir::set_strays_aside(&config.log_dir, &registry.partition_dir_names());
        }
        let (listeners, tls) = bind_listeners(&mut config).await?;
        let local_addr = listeners[0].1;
        // Directories set aside for deletion go in the background: a large
        // deleted topic must not hold up the start (a promotion waits for it).
        let deleted_in = config.log_dir.clone();
        tokio::task::spawn_blocking(move || crate::log_dir::remove_deleted_dirs(&deleted_in));
        let config = Arc::new(config);
        let connections = Arc::new(Semaphore::new(CONNECTION_PERMITS as usize));
        let groups = GroupService::start(
            crate::group::GroupConfig {
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                consumer_session_timeout_ms: config.group_consumer_session_timeout_ms,
                consumer_heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                streams: config.group_streams.clone(),
                ..crate::group::GroupConfig::default()
            },
            Arc::clone(&catalog),
            offsets,
        );
        let topics = Arc::new(Topics::new(registry));
        let producer_ids = Arc::new(ProducerIds::new(Arc::clone(&catalog)));
        let txns = Arc::new(TxnService::new(
            TxnServiceConfig {
                transactional_id_expiration_ms: config.transactional_id_expiration_ms,
                ..TxnServiceConfig::default()
            },
            &transactions,
            Arc::clone(&catalog),
            Arc::clone(&producer_ids),
            Arc::clone(&topics),
            Arc::clone(&groups),
        ));
        let shares = crate::share::ShareService::start(
            config.share.clone(),
            Arc::clone(&catalog),
            Arc::clone(&topics),
            share_states,
            group_configs,
        );
        let topic_admin = TopicAdmin::new(
            Arc::clone(&topics),
            Arc::clone(&catalog),
            Arc::clone(&config),
            housekeeping.clone(),
            Arc::clone(&groups),
            Arc::clone(&shares),
        );
        let acls = Arc::new(crate::acl::Authorizer::new(config.authorizer_enabled, acls));
        let config_request_memory = config.request_memory_bytes_max;
        let config_identities = Arc::clone(&config.identities);
        let failed_login_delay = std::time::Duration::from_millis(config.failed_authentication_delay_ms);
        let acl_admin = crate::acl::AclAdmin::new(Arc::clone(&acls), Arc::clone(&catalog));
        let quotas = Arc::new(crate::quota::ClientQuotas::new(client_quotas));
        let quota_admin = crate::quota::admin::QuotaAdmin::new(Arc::clone(&quotas), Arc::clone(&catalog));
        let per_address = crate::limits::ConnectionsPerAddress::new(config.connections_per_address_max);
        let broker_configs = crate::dynamic_config::admin::BrokerConfigAdmin::new(
            Arc::clone(&catalog),
            Arc::clone(&config),
            per_address.clone(),
            Arc::clone(&topics),
        );
        // The dynamic per-address limits over the static one.
        broker_configs.apply();
        let delegation_tokens = Arc::new(crate::delegation::DelegationTokens::new(
            config.delegation_tokens.clone(),
            Arc::clone(&catalog),
            delegation_tokens,
        ));
        let ctx = Arc::new(BrokerContext {
            config,
            catalog,
            topics,
            topic_admin,
            groups,
            producer_ids,
            txns,
            shares,
            acls,
            acl_admin,
            quotas,
            quota_admin,
            identities: crate::ident::SharedIdentityRules::new(std::sync::Arc::clone(&config_identities)),
            request_memory: crate::limits::RequestMemory::new(config_request_memory),
            failed_logins: crate::limits::FailedLogins::new(failed_login_delay),
            broker_configs,
            telemetry: crate::telemetry::ClientTelemetry::new(crate::telemetry::Limits::default()),
            delegation_tokens,
        });
        tokio::spawn(crate::partition::run_cleaner(partitions_of(&ctx.topics), housekeeping.clone()));
        housekeeping.archive.attach_board(&ctx.config.metrics.archive);
        // A standby's copy is not archived: its segments roll where its own
        // appends do, so its files would not match the primary's of the same
        // names (PostgreSQL's archive_mode = on, not always).
        let follower = ctx.config.is_follower();
        housekeeping.archive.set_command(ctx.config.archive_command.clone().filter(|_| !follower));
        tokio::spawn(crate::archive::run(
            Arc::clone(&housekeeping.archive),
            ctx.config.log_dir.clone(),
            partitions_of(&ctx.topics),
        ));
        let archive = Arc::clone(&housekeeping.archive);
        tokio::spawn(crate::partition::run_retention(partitions_of(&ctx.topics), housekeeping));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let board = &ctx.config.metrics.replication;
        let role = if ctx.config.is_follower() { Role::Follower } else { Role::Leader };
        board.reset(role, ctx.config.node_id, ctx.config.replication.leader_epoch());
        ctx.config.replication.attach_board(board);
        let follower = Arc::new(crate::replication::follower::FollowerState::with_board(board));
        match ctx.config.follow.clone() {
            // A standby's copy: the leader's coordinators decide transactions
            // and their markers; this broker only copies the batches.
            Some(follow) => {
                tokio::spawn(crate::replication::follower::run(
                    Arc::clone(&ctx),
                    follow,
                    Arc::clone(&follower),
                    shutdown_rx.clone(),
                ));
            }
            None => {
                tokio::spawn(TxnService::run_timeouts(Arc::downgrade(&ctx.txns)));
                // A standby's database is read-only: the leader removes them.
                tokio::spawn(crate::delegation::run_expiry(Arc::downgrade(&ctx.delegation_tokens)));
                // Transactions a crash left half-ended are finished before
                // long; their ids answer CONCURRENT_TRANSACTIONS-free once done.
                let txns = Arc::clone(&ctx.txns);
                tokio::spawn(async move { txns.recover().await });
            }
        }
        let rates = Arc::new(crate::limits::ConnectionRates::new(ctx.config.connection_rate_per_address_max));
        let listener_addrs: Vec<(SecurityProtocol, SocketAddr)> =
            listeners.iter().map(|(l, addr)| (l.endpoint.security, *addr)).collect();
        let accept_loops = listeners
            .into_iter()
            .map(|(listener, _)| {
                tokio::spawn(accept_loop(
                    listener,
                    Arc::clone(&ctx),
                    Arc::clone(&connections),
                    per_address.clone(),
                    Arc::clone(&rates),
                    shutdown_rx.clone(),
                ))
            })
            .collect();
        let metrics_addr = match ctx.config.metrics_endpoint.clone() {
            Some(endpoint) => open_metrics_endpoint(endpoint, &ctx, &listener_addrs, shutdown_rx.clone()).await,
            None => None,
        };
        let described: Vec<String> =
            listener_addrs.iter().map(|(security, addr)| format!("{}://{addr}", security.name())).collect();
        log::info!(
            "listening for Kafka clients on {} ({} topics, log directory {})",
            described.join(", "),
            records.len(),
            ctx.config.log_dir.display()
        );
        Ok(Broker {
            ctx,
            local_addr,
            shutdown,
            accept_loops,
            listener_addrs,
            tls,
            connections,
            follower,
            metrics_addr,
            rates,
            runtime: tokio::runtime::Handle::current(),
            archive,
        })
    }

    /// Applies a reload's settings to a running broker, under the dynamic
    /// broker configs (which a reload keeps): what requests read
    /// (frame limit, idle timeout, topic auto-creation), the connection
    /// limits, the request memory budget, the failed-login delay, the group
    /// timings and the flush policy of every partition. Established
    /// connections stay; a limit lowered below what is open refuses new
    /// connections until enough have closed. Callable from any thread.
    pub fn reload(&self, statics: &crate::settings::Reloadable) {
        let _runtime = self.runtime.enter();
        let live = &self.ctx.config.live;
        // The GUCs are the static layer: dynamic broker configs stay over them.
        live.set_statics(statics);
        let settings = &live.dynamic().over_statics(statics);
        let policy_changed = live.store(settings);
        self.ctx.broker_configs.apply();
        self.rates.set_limit(settings.connection_rate_per_address_max);
        self.ctx.request_memory.resize(settings.request_memory_bytes_max);
        self.ctx
            .failed_logins
            .set_base_delay(std::time::Duration::from_millis(settings.failed_authentication_delay_ms));
        self.ctx.groups.call(|c| {
            c.set_timings(
                settings.group_initial_rebalance_delay_ms,
                settings.group_consumer_session_timeout_ms,
                settings.group_consumer_heartbeat_interval_ms,
            );
            ((), Vec::new())
        });
        self.archive.set_command(settings.archive_command.clone().filter(|_| !self.ctx.config.is_follower()));
        if policy_changed && live.flush_policy.set(settings.flush_policy) {
            for partition in self.ctx.topics.all_partitions() {
                partition.flush_policy_changed();
            }
        }
    }

    /// The Prometheus endpoint's bound address, if it is open.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The primary listener's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound address of the first open listener of `security`.
    pub fn listener_addr(&self, security: SecurityProtocol) -> Option<SocketAddr> {
        self.listener_addrs.iter().find(|(s, _)| *s == security).map(|(_, addr)| *addr)
    }

    /// Replaces how certificate and token subjects become roles (a reload
    /// of the ident file, `kafgres.ssl_ident_map`, `kafgres.oauthbearer_*`):
    /// connections accepted from now on use the new rules.
    pub fn reload_identities(&self, rules: crate::ident::IdentityRules) {
        self.ctx.identities.set(Arc::new(rules));
    }

    /// Loads the TLS listeners' certificate, key and client CA again (a
    /// SIGHUP): new handshakes use them, established connections keep
    /// theirs. On an error the files in use stay, and the error says why;
    /// TLS listeners that had none loaded start serving once this loads.
    /// `false`: no TLS listener is configured.
    pub fn reload_tls(&self, settings: crate::tls::TlsSettings) -> Result<bool, crate::tls::TlsError> {
        let Some(tls) = &self.tls else { return Ok(false) };
        // Loaded even under the same names: they may hold renewed files.
        tls.reload(settings)?;
        Ok(true)
    }

    pub fn context(&self) -> &Arc<BrokerContext> {
        &self.ctx
    }

    /// Bytes of request frames being read or handled now (the budget of
    /// `request_memory_bytes_max`).
    pub fn request_bytes_reserved(&self) -> usize {
        self.ctx.request_memory.reserved_bytes()
    }

    /// A standby's follower's progress (all defaults on a leader).
    pub fn follower_progress(&self) -> crate::replication::follower::FollowerProgress {
        self.follower.progress()
    }

    /// Replaces the synchronous policy (a reload of
    /// `synchronous_standby_names`) and recomputes what every partition holds.
    pub fn set_sync_policy(&self, policy: Option<crate::replication::SyncPolicy>) {
        if self.ctx.config.replication.sync_policy() == policy {
            return;
        }
        log::info!("synchronous standbys for acks=all: {policy:?}");
        self.ctx.config.replication.set_sync_policy(policy);
        for p in self.ctx.topics.all_partitions() {
            p.recompute_replicated();
        }
    }

    /// Stops in order, so that no request is cut: stop accepting; tell every
    /// connection to close once its request in flight is answered (idle ones
    /// close at once, long-polling fetches answer now with what they have,
    /// produces finish their append and are answered when durable); wait for
    /// them, at most [`DRAIN_TIMEOUT`]; then flush and close every partition
    /// (a produce still waiting for durability is answered by that flush,
    /// an append arriving after it is refused).
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.archive.stop();
        for accept_loop in self.accept_loops {
            let _ = accept_loop.await;
        }
        self.ctx.topics.begin_draining();
        let all = CONNECTION_PERMITS;
        match tokio::time::timeout(DRAIN_TIMEOUT, self.connections.acquire_many(all)).await {
            Ok(_) => {}
            Err(_) => log::warn!(
                "{} connection(s) still had a request in flight {DRAIN_TIMEOUT:?} into the shutdown; closing the \
                 partitions under them",
                all as usize - self.connections.available_permits()
            ),
        }
        for topic in self.ctx.topics.all() {
            for p in &topic.partitions {
                if let Err(e) = p.close() {
                    log::error!("flushing {}-{} at shutdown failed: {e}", p.topic, p.index);
                }
            }
        }
        self.ctx.config.metrics.replication.set_role(Role::Stopped);
    }
}

/// Binds the primary listener and the extra ones; a TLS listener only if
/// the TLS settings load (never as plain text). Returns them with their
/// bound addresses, the primary first, and the TLS context they share.
/// The next connection on `listener`, or `None` once `shutdown` fires. A
/// failed accept (EMFILE and friends) is logged and retried after a yield,
/// so the other listeners and connections keep being served.
pub(crate) async fn next_connection(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    what: &str,
) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return None,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok(a) => return Some(a),
            Err(e) => {
                log::warn!("{what}: accept failed: {e}");
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Binds and serves the Prometheus endpoint. A port that cannot be bound
/// leaves the endpoint closed with a log line: monitoring never stops the
/// broker from serving clients.
async fn open_metrics_endpoint(
    endpoint: crate::prometheus::MetricsEndpoint,
    ctx: &Arc<BrokerContext>,
    listeners: &[(SecurityProtocol, SocketAddr)],
    shutdown: watch::Receiver<bool>,
) -> Option<SocketAddr> {
    let listener = match TcpListener::bind(endpoint.listen).await {
        Ok(l) => l,
        Err(e) => {
            log::error!(
                "the metrics endpoint is not opened: cannot listen on {}: {e} (kafgres.metrics_port); \
                 Kafka clients are served",
                endpoint.listen
            );
            return None;
        }
    };
    let addr = listener.local_addr().ok()?;
    let scraped =
        crate::prometheus::Scraped { ctx: Arc::clone(ctx), listeners: listeners.to_vec(), host: endpoint.host };
    tokio::spawn(crate::prometheus::serve(listener, scraped, shutdown));
    log::info!("serving Prometheus metrics on http://{addr}/metrics");
    Some(addr)
}

async fn bind_listeners(
    config: &mut BrokerConfig,
) -> Result<(Vec<(BoundListener, SocketAddr)>, Option<Arc<TlsContext>>), StartError> {
    let bind = |addr: SocketAddr| async move {
        let listener = TcpListener::bind(addr).await.map_err(|source| StartError::Bind { addr, source })?;
        let bound = listener.local_addr().map_err(|source| StartError::Bind { addr, source })?;
        Ok::<_, StartError>((listener, bound))
    };
    let (primary, primary_addr) = bind(config.listen).await?;
    if config.advertised_port == 0 {
        config.advertised_port = primary_addr.port();
    }
    let mut bound = vec![(
        BoundListener {
            listener: primary,
            endpoint: Arc::new(Endpoint {
                security: config.primary_security(),
                host: config.advertised_host.clone(),
                port: config.advertised_port,
            }),
            authentication: config.authentication.clone(),
            tls: None,
        },
        primary_addr,
    )];
    let wants_tls = config.extra_listeners.iter().any(|l| l.security.is_tls());
    // TLS that cannot be loaded leaves its listeners bound but refusing
    // every connection (never plain text) until a reload loads it.
    let tls = match (&config.tls, wants_tls) {
        (_, false) => None,
        (None, true) => {
            log::error!(
                "the TLS listeners refuse every connection: no certificate is configured (kafgres.ssl_cert_file \
                 and kafgres.ssl_key_file, or ssl = on with PostgreSQL's ssl_cert_file and ssl_key_file); fix it \
                 and reload"
            );
            Some(Arc::new(TlsContext::unloaded()))
        }
        (Some(settings), true) => match TlsContext::load(settings.clone()) {
            Ok(tls) => Some(Arc::new(tls)),
            Err(e) => {
                log::error!("the TLS listeners refuse every connection: {e}; fix it and reload");
                Some(Arc::new(TlsContext::unloaded()))
            }
        },
    };
    let mut opened = Vec::new();
    for listener in &config.extra_listeners {
        let (socket, addr) = bind(listener.listen).await?;
        let port = match listener.advertised_port {
            0 => addr.port(),
            p => p,
        };
        opened.push((listener.security, listener.advertised_host.clone(), port));
        bound.push((
            BoundListener {
                listener: socket,
                endpoint: Arc::new(Endpoint {
                    security: listener.security,
                    host: listener.advertised_host.clone(),
                    port,
                }),
                authentication: listener.authentication.clone(),
                tls: listener.security.is_tls().then(|| tls.clone()).flatten(),
            },
            addr,
        ));
    }
    for (listener, (_, _, port)) in config.extra_listeners.iter_mut().zip(opened) {
        listener.advertised_port = port;
    }
    Ok((bound, tls))
}

async fn accept_loop(
    bound: BoundListener,
    ctx: Arc<BrokerContext>,
    connections: Arc<Semaphore>,
    per_address: crate::limits::ConnectionsPerAddress,
    rates: Arc<crate::limits::ConnectionRates>,
    mut shutdown: watch::Receiver<bool>,
) {
    let BoundListener { listener, endpoint, authentication, tls } = bound;
    let listener_port = listener.local_addr().map_or(0, |a| a.port());
    // A flood of refused connections would write a log line each.
    let mut refusals = RateLimitedLog::new(std::time::Duration::from_secs(10));
    while let Some((stream, peer)) = next_connection(&listener, &mut shutdown, "Kafka listener").await {
        // Per address first: a flood from one address must not use up the
        // broker-wide slots before it is stopped.
        let quota = ctx.quotas.connection_rate_limit(peer.ip());
        if !rates.admit(peer.ip(), quota) {
            ctx.config.metrics.connections_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (limit, source) = match quota {
                Some(quota) => (quota, "its ip quota connection_creation_rate"),
                None => (rates.limit(), "kafgres.max_connection_rate_per_ip"),
            };
            refusals.note(|repeated| {
                log::warn!(
                    "refusing connection from {peer}: {} opens more than {limit} connections per second \
                     ({source}){repeated}",
                    peer.ip(),
                )
            });
            continue;
        }
        let Some(slot) = per_address.admit(peer.ip()) else {
            ctx.config.metrics.connections_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            refusals.note(|repeated| {
                log::warn!(
                    "refusing connection from {peer}: {} connections open from {} \
                     (max.connections.per.ip, or kafgres.max_connections_per_ip){repeated}",
                    per_address.limit_of(peer.ip()).unwrap_or(0),
                    peer.ip()
                )
            });
            continue;
        };
        // Counted by taking a permit first, then checked against the limit in
        // force (a reload may lower it): racing accepts can only undershoot.
        let max = ctx.config.live.connections_max();
        let permit = Arc::clone(&connections)
            .try_acquire_owned()
            .ok()
            .filter(|_| CONNECTION_PERMITS as usize - connections.available_permits() <= max);
        let Some(permit) = permit else {
            ctx.config.metrics.connections_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            refusals.note(|repeated| {
                log::warn!(
                    "refusing connection from {peer}: {max} connections open (kafgres.max_connections){repeated}"
                )
            });
            continue;
        };
        let ctx = Arc::clone(&ctx);
        let shutdown = shutdown.clone();
        let endpoint = Arc::clone(&endpoint);
        let authentication = authentication.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let accepted = Accepted { peer, listener_port, endpoint, authentication, certificate_identity: None };
            match tls {
                None => serve_connection(Transport::Plain(stream), accepted, ctx, shutdown).await,
                Some(tls) => {
                    if let Some((transport, accepted)) = shake_hands(&tls, stream, accepted, &ctx).await {
                        serve_connection(transport, accepted, ctx, shutdown).await;
                    }
                }
            }
            drop((permit, slot));
        });
    }
}

/// The TLS handshake of an accepted connection and, on an SSL listener, the
/// role its client certificate names. `None`: the connection is dropped
/// (the reason logged at info: failed handshakes are a scanner's noise).
async fn shake_hands(
    tls: &TlsContext,
    stream: tokio::net::TcpStream,
    mut accepted: Accepted,
    ctx: &BrokerContext,
) -> Option<(Transport, Accepted)> {
    let peer = accepted.peer;
    let sasl = accepted.endpoint.security == SecurityProtocol::SaslSsl;
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.accept(stream, sasl)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            log::info!("TLS handshake with {peer} failed: {e}");
            return None;
        }
        Err(_) => {
            log::info!("TLS handshake with {peer} did not finish within {TLS_HANDSHAKE_TIMEOUT:?}");
            return None;
        }
    };
    // On SASL_SSL, SASL decides who the client is; the certificate (if
    // asked for) only had to verify.
    if accepted.endpoint.security == SecurityProtocol::Ssl {
        if let Some(der) = crate::tls::peer_certificate(&stream) {
            let role = match ctx.identities.get().certificate_role(der) {
                Ok(role) => role,
                Err(e) => {
                    log::warn!("closing TLS connection from {peer}: its client certificate names no role: {e}");
                    return None;
                }
            };
            match ctx.catalog.external_login(role.clone()).await {
                Ok(Some(identity)) => {
                    log::debug!("{peer} authenticated as role {role:?} (TLS client certificate)");
                    accepted.certificate_identity = Some(identity);
                }
                Ok(None) => {
                    log::warn!(
                        "closing TLS connection from {peer}: its client certificate names role {role:?}, which \
                         does not exist or may not log in"
                    );
                    return None;
                }
                Err(e) => {
                    log::warn!("closing TLS connection from {peer}: role {role:?} could not be read: {e}");
                    return None;
                }
            }
        }
    }
    Some((Transport::Tls(Box::new(stream)), accepted))
}

/// A log line at most once per period, saying how many were left out.
struct RateLimitedLog {
    period: std::time::Duration,
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    fn new(period: std::time::Duration) -> RateLimitedLog {
        RateLimitedLog { period, last: None, suppressed: 0 }
    }

    /// Calls `log` with a suffix naming the lines suppressed since the last
    /// one, or counts this one as suppressed.
    fn note(&mut self, log: impl FnOnce(&str)) {
        let now = std::time::Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < self.period) {
            self.suppressed += 1;
            return;
        }
        let repeated = match self.suppressed {
            0 => String::new(),
            n => format!(" ({n} more refused since the last such line)"),
        };
        log(&repeated);
        self.last = Some(now);
        self.suppressed = 0;
    }
}

/// The partitions for the housekeeping tasks: `None` once the broker is gone,
/// which ends them.
fn partitions_of(topics: &Arc<Topics>) -> impl Fn() -> Option<Vec<Arc<Partition>>> + Send + 'static {
    let topics = Arc::downgrade(topics);
    move || topics.upgrade().map(|t| t.all_partitions())
}
