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
    #[error("no topic with id {0}")]
    UnknownTopic(Uuid),
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

    /// Durably removes a topic.
    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<'_, ()>;

    /// Durably raises a topic's partition count (CreatePartitions).
    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<'_, ()>;
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

    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<'_, ()> {
        Box::pin(async move {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let name = topics
                .values()
                .find(|t| t.topic_id == topic_id)
                .map(|t| t.name.clone())
                .ok_or(CatalogError::UnknownTopic(topic_id))?;
            topics.remove(&name);
            Ok(())
        })
    }

    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<'_, ()> {
        Box::pin(async move {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let topic =
                topics.values_mut().find(|t| t.topic_id == topic_id).ok_or(CatalogError::UnknownTopic(topic_id))?;
            topic.partition_count = partition_count;
            Ok(())
        })
    }
}
