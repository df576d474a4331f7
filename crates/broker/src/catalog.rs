//! The port to persistent metadata.
//!
//! The broker never stores topic definitions itself: it asks the catalog to
//! record them durably, and only then creates their logs. In production the
//! catalog is the extension's control plane, which writes Postgres tables on
//! the background worker's main thread; tests use [`MemoryCatalog`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use uuid::Uuid;

/// A topic as the catalog stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    pub topic_id: Uuid,
    pub name: String,
    pub partition_count: i32,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("the catalog is unavailable: {0}")]
    Unavailable(String),
    #[error("catalog error: {0}")]
    Failed(String),
}

pub type CatalogFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CatalogError>> + Send + 'a>>;

/// Persistent metadata operations the data plane needs.
pub trait Catalog: Send + Sync + 'static {
    /// Durably records a new topic. Fails with [`CatalogError::TopicExists`]
    /// if a topic of that name is already recorded.
    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<'_, ()>;
}

/// A catalog in memory, for tests and for running the broker without Postgres.
#[derive(Debug, Default)]
pub struct MemoryCatalog {
    topics: Mutex<BTreeMap<String, TopicRecord>>,
}

impl MemoryCatalog {
    pub fn topics(&self) -> Vec<TopicRecord> {
        self.topics.lock().map(|t| t.values().cloned().collect()).unwrap_or_default()
    }
}

impl Catalog for MemoryCatalog {
    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<'_, ()> {
        Box::pin(async move {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            if topics.contains_key(&topic.name) {
                return Err(CatalogError::TopicExists(topic.name));
            }
            topics.insert(topic.name.clone(), topic);
            Ok(())
        })
    }
}
