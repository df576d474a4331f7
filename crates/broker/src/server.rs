//! Starting and stopping the data plane: open every partition log, bind the
//! listener, accept connections under a limit, and on shutdown stop accepting,
//! let connections go and flush every log.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::catalog::{Catalog, CatalogSnapshot};
use crate::config::BrokerConfig;
use crate::connection::serve_connection;
use crate::topics::{Topic, TopicRegistry};

/// Everything a request handler can reach.
pub struct BrokerContext {
    pub config: BrokerConfig,
    pub catalog: Arc<dyn Catalog>,
    pub topics: RwLock<TopicRegistry>,
    /// Serializes topic creation so two CreateTopics for one name cannot both
    /// pass the existence check (the catalog's unique name is the backstop).
    pub topic_creation: tokio::sync::Mutex<()>,
    /// The advertised port, resolved after binding (tests bind port 0).
    pub advertised_port: u16,
    /// The retention service every partition reports rolls to.
    pub housekeeping: crate::partition::Housekeeping,
    /// The consumer-group coordinator (this broker coordinates every group).
    pub groups: Arc<crate::group_service::GroupService>,
    /// Producer ids for InitProducerId, reserved from the catalog in blocks.
    pub producer_ids: crate::producer_ids::ProducerIdAllocator,
    /// The transaction coordinator.
    pub txns: Arc<crate::txn::TxnService>,
}

impl BrokerContext {
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner()).get(name)
    }

    pub fn topic_by_id(&self, id: &uuid::Uuid) -> Option<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner()).get_by_id(id)
    }
}

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
    accept_loop: tokio::task::JoinHandle<()>,
}

impl Broker {
    /// Opens the logs of `topics` and starts serving. Must run on a tokio runtime.
    pub async fn start(
        config: BrokerConfig,
        catalog: Arc<dyn Catalog>,
        snapshot: impl Into<CatalogSnapshot>,
    ) -> Result<Broker, StartError> {
        let CatalogSnapshot { topics, offsets, transactions } = snapshot.into();
        let mut registry = TopicRegistry::default();
        let housekeeping = crate::partition::Housekeeping::default();
        let now = crate::now_ms();
        std::fs::create_dir_all(&config.log_dir).map_err(|source| StartError::Log {
            topic: String::new(),
            source: kafgres_log::LogError::Io { path: config.log_dir.clone(), source },
        })?;
        crate::log_dir::claim_owner(&config.log_dir, &config.log_dir_owner)?;
        for record in &topics {
            let topic = Topic::open(record, &config, &housekeeping, now)
                .map_err(|source| StartError::Log { topic: record.name.clone(), source })?;
            registry.insert(topic);
        }
        // Only once every topic of the catalog has claimed its directories:
        // what is left unclaimed then is unreachable.
        crate::log_dir::set_strays_aside(&config.log_dir, &registry.partition_dir_names());
        crate::topics::remove_deleted_dirs(&config.log_dir);
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Bind { addr: config.listen, source })?;
        let local_addr = listener.local_addr().map_err(|source| StartError::Bind { addr: config.listen, source })?;
        let advertised_port = if config.advertised_port == 0 { local_addr.port() } else { config.advertised_port };
        let connections = Arc::new(Semaphore::new(config.connections_max));
        let groups = crate::group_service::GroupService::start(
            crate::group::GroupConfig {
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                consumer_session_timeout_ms: config.group_consumer_session_timeout_ms,
                consumer_heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                ..crate::group::GroupConfig::default()
            },
            Arc::clone(&catalog),
            offsets,
        );
        let ctx = Arc::new(BrokerContext {
            housekeeping: housekeeping.clone(),
            groups,
            config,
            catalog,
            topics: RwLock::new(registry),
            topic_creation: tokio::sync::Mutex::new(()),
            advertised_port,
            producer_ids: crate::producer_ids::ProducerIdAllocator::default(),
            txns: Arc::new(crate::txn::TxnService::new(crate::txn::TxnServiceConfig::default(), &transactions)),
        });
        tokio::spawn(crate::partition::run_cleaner(Arc::downgrade(&ctx), housekeeping.clone()));
        tokio::spawn(crate::partition::run_retention(Arc::downgrade(&ctx), housekeeping));
        tokio::spawn(Arc::clone(&ctx.txns).run_timeouts(Arc::downgrade(&ctx)));
        {
            // Transactions a crash left half-ended are finished before long;
            // their ids answer CONCURRENT_TRANSACTIONS-free once done.
            let ctx = Arc::clone(&ctx);
            tokio::spawn(async move { ctx.txns.recover(&ctx).await });
        }
        let (shutdown, shutdown_rx) = watch::channel(false);
        let accept_loop = tokio::spawn(accept_loop(listener, Arc::clone(&ctx), connections, shutdown_rx));
        log::info!(
            "listening for Kafka clients on {local_addr} ({} topics, log directory {})",
            topics.len(),
            ctx.config.log_dir.display()
        );
        Ok(Broker { ctx, local_addr, shutdown, accept_loop })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn context(&self) -> &Arc<BrokerContext> {
        &self.ctx
    }

    /// Stops accepting, closes connections and flushes every partition.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.accept_loop.await;
        let topics = self.ctx.topics.read().unwrap_or_else(|p| p.into_inner()).all();
        for topic in topics {
            for p in &topic.partitions {
                if let Err(e) = p.close() {
                    log::error!("flushing {}-{} at shutdown failed: {e}", p.topic, p.index);
                }
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    ctx: Arc<BrokerContext>,
    connections: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: report and keep serving the others.
                log::warn!("accept failed: {e}");
                tokio::task::yield_now().await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            ctx.config.metrics.connections_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            log::warn!(
                "refusing connection from {peer}: {} connections open (kafgres.max_connections)",
                ctx.config.connections_max
            );
            continue;
        };
        let ctx = Arc::clone(&ctx);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, ctx, shutdown).await;
            drop(permit);
        });
    }
}
