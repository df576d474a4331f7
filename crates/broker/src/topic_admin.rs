//! Changes to the set of topics: creation (CreateTopics, Metadata's
//! auto-creation), more partitions, new configs, deletion.
//!
//! Changes are made one at a time, through a [`TopicChange`] that holds the
//! admin lock, so a check a handler makes under it (the name is free, the
//! partition count only grows) still holds when the change is applied; the
//! catalog's unique topic name is the backstop. Each change is stored in the
//! catalog before the logs and the registry follow: a crash in between leaves
//! a catalog row whose directories are created at the next start, never a
//! log the catalog does not know.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafgres_log::LogError;

use crate::catalog::{Catalog, CatalogError, TopicRecord};
use crate::config::BrokerConfig;
use crate::group_service::GroupService;
use crate::log_dir::deleted_dir_name;
use crate::partition::Housekeeping;
use crate::topics::{partition_dir, OfflineTopic, Topic, Topics};

pub struct TopicAdmin {
    topics: Arc<Topics>,
    catalog: Arc<dyn Catalog>,
    config: Arc<BrokerConfig>,
    housekeeping: Housekeeping,
    /// Told when a topic goes, so its committed offsets go too.
    groups: Arc<GroupService>,
    shares: Arc<crate::share::ShareService>,
    serial: tokio::sync::Mutex<()>,
}

/// Why a change did not happen, or happened only in the catalog.
#[derive(Debug, thiserror::Error)]
pub enum TopicChangeError {
    /// The catalog refused the change or could not store it: nothing changed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Stored in the catalog, but the new partitions' logs could not be
    /// created (the next start creates them).
    #[error(transparent)]
    Log(#[from] LogError),
}

impl TopicAdmin {
    pub fn new(
        topics: Arc<Topics>,
        catalog: Arc<dyn Catalog>,
        config: Arc<BrokerConfig>,
        housekeeping: Housekeeping,
        groups: Arc<GroupService>,
        shares: Arc<crate::share::ShareService>,
    ) -> TopicAdmin {
        TopicAdmin { topics, catalog, config, housekeeping, groups, shares, serial: tokio::sync::Mutex::new(()) }
    }

    /// Waits until no other change is in progress.
    pub async fn begin(&self) -> TopicChange<'_> {
        TopicChange { admin: self, _serial: self.serial.lock().await }
    }

    /// Tries to open each offline topic again; returns how many came back.
    /// It waits for any topic change in progress, which may wait for the
    /// catalog: never await it on the thread that serves the catalog.
    pub async fn reopen_offline(&self) -> usize {
        let _change = self.begin().await;
        let offline = self.topics.read().all_offline();
        let mut reopened = 0;
        for topic in offline {
            match Topic::open(&topic.record, &self.config, &self.housekeeping, crate::now_ms()) {
                Ok(opened) => {
                    let mut registry = self.topics.write();
                    registry.remove_offline(&topic.record.name);
                    registry.insert(opened);
                    log::info!("topic {} is online again", topic.record.name);
                    reopened += 1;
                }
                Err(e) => log::warn!("topic {} stays offline: its log still cannot be opened: {e}", topic.record.name),
            }
        }
        reopened
    }
}

/// The right to change topics, until dropped.
pub struct TopicChange<'a> {
    admin: &'a TopicAdmin,
    _serial: tokio::sync::MutexGuard<'a, ()>,
}

impl TopicChange<'_> {
    /// The registry as the change sees it: no other change moves it meanwhile.
    pub fn topics(&self) -> &Topics {
        &self.admin.topics
    }

    /// Records a topic in the catalog, opens its logs and registers it.
    pub async fn create(&self, record: TopicRecord) -> Result<Arc<Topic>, TopicChangeError> {
        let admin = self.admin;
        admin.catalog.create_topic(record.clone()).await?;
        let topic = Topic::open(&record, &admin.config, &admin.housekeeping, crate::now_ms()).map_err(|e| {
            log::error!("topic {} is in the catalog but its log could not be created: {e}", record.name);
            e
        })?;
        log::info!("created topic {} ({} partitions, id {})", record.name, record.partition_count, record.topic_id);
        Ok(admin.topics.write().insert(topic))
    }

    /// Raises a topic's partition count (the caller checked it grows).
    pub async fn set_partition_count(&self, topic: &Topic, count: i32) -> Result<(), TopicChangeError> {
        let admin = self.admin;
        let current = topic.partitions.len();
        admin.catalog.set_partition_count(topic.id, count).await?;
        let grown = topic.with_partitions(count, &admin.config, &admin.housekeeping, crate::now_ms()).map_err(|e| {
            log::error!(
                "topic {}: the catalog has {count} partitions but their logs could not be created: {e}",
                topic.name
            );
            e
        })?;
        admin.topics.write().replace(grown);
        log::info!("topic {} now has {count} partitions (was {current})", topic.name);
        Ok(())
    }

    /// Gives a topic a new set of config overrides (the caller validated
    /// them); its partitions take the settings they act on at once.
    pub async fn set_configs(&self, topic: &Topic, configs: BTreeMap<String, String>) -> Result<(), CatalogError> {
        let admin = self.admin;
        admin.catalog.set_topic_configs(topic.id, configs.clone()).await?;
        let altered = topic.with_configs(configs, &admin.config);
        admin.topics.write().replace(altered);
        log::info!("altered the configs of topic {}", topic.name);
        Ok(())
    }

    /// Deletes a topic. Order, so that a crash at any point leaves no topic
    /// half there: the catalog row goes first (the topic no longer exists for
    /// a restarted broker), then the topic leaves the registry, its partitions
    /// are flushed and closed, and their directories are renamed to
    /// `*-delete` and removed in the background. A crash before the rename
    /// leaves directories whose `partition.metadata` names a topic id the
    /// catalog no longer has; a topic re-created with the same name sets them
    /// aside instead of serving their records (see topics.rs).
    pub async fn delete(&self, topic: Arc<Topic>) -> Result<(), CatalogError> {
        let admin = self.admin;
        admin.catalog.delete_topic(topic.id).await?;
        admin.topics.write().remove(&topic.name);
        admin.groups.forget_topic(&topic.name);
        // The catalog deleted its share-partitions' states with it.
        admin.shares.forget_topic(topic.id);
        let log_dir = admin.config.log_dir.clone();
        let name = topic.name.clone();
        let partitions = topic.partitions.clone();
        // The directories are renamed aside while this change holds the lock:
        // a topic re-created under the same name must not have its new
        // directories renamed away by this deletion.
        let renamed = tokio::task::spawn_blocking(move || {
            let mut renamed = Vec::new();
            for p in &partitions {
                if let Err(e) = p.close() {
                    log::warn!("closing {}-{} for deletion: {e}", p.topic, p.index);
                }
                let dir = partition_dir(&log_dir, &name, p.index);
                let aside = deleted_dir_name(&dir, "deleted");
                match std::fs::rename(&dir, &aside) {
                    Ok(()) => renamed.push(aside),
                    Err(e) => log::warn!("cannot rename {} for deletion: {e}", dir.display()),
                }
            }
            if let Err(e) = kafgres_log::partition::sync_dir(&log_dir) {
                log::warn!("{e}");
            }
            renamed
        })
        .await
        .unwrap_or_default();
        // The topic is gone once the catalog says so; removing files can finish
        // after the answer (and is redone at startup if interrupted).
        drop(tokio::task::spawn_blocking(move || {
            for dir in renamed {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    log::warn!("cannot remove {}: {e} (removed at next start)", dir.display());
                }
            }
        }));
        log::info!("deleted topic {} (id {})", topic.name, topic.id);
        Ok(())
    }

    /// Deletes a topic whose log could not be opened: the catalog row, then
    /// whatever its directories hold, set aside and removed as for any
    /// deletion.
    pub async fn delete_offline(&self, topic: &OfflineTopic) -> Result<(), CatalogError> {
        let admin = self.admin;
        let record = &topic.record;
        admin.catalog.delete_topic(record.topic_id).await?;
        admin.topics.write().remove_offline(&record.name);
        admin.groups.forget_topic(&record.name);
        admin.shares.forget_topic(record.topic_id);
        let log_dir = admin.config.log_dir.clone();
        let (name, count) = (record.name.clone(), record.partition_count);
        drop(tokio::task::spawn_blocking(move || {
            for index in 0..count {
                let dir = partition_dir(&log_dir, &name, index);
                if !dir.exists() {
                    continue;
                }
                let aside = deleted_dir_name(&dir, "deleted");
                if let Err(e) = std::fs::rename(&dir, &aside).and_then(|()| std::fs::remove_dir_all(&aside)) {
                    log::warn!("cannot remove {}: {e} (removed at next start)", dir.display());
                }
            }
        }));
        log::info!("deleted offline topic {} (id {})", record.name, record.topic_id);
        Ok(())
    }
}
