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

/// A consumer group's committed offset for one partition (OffsetCommit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_timestamp_ms: i64,
}

/// A transactional id's state as the transaction coordinator stores it
/// (Kafka's `__transaction_state` record). Written before the coordinator
/// answers any request that changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionRecord {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// Kafka's state names: Empty, Ongoing, PrepareCommit, PrepareAbort,
    /// CompleteCommit, CompleteAbort.
    pub state: String,
    /// The partitions of the open transaction.
    pub partitions: Vec<(String, i32)>,
    /// The groups of AddOffsetsToTxn.
    pub groups: Vec<String>,
    /// TxnOffsetCommit's offsets, committed with the transaction.
    pub pending_offsets: Vec<CommittedOffset>,
    /// When the open transaction started (its timeout counts from here).
    pub started_ms: i64,
    /// When this state was stored (an idle id expires
    /// `transactional.id.expiration.ms` after it).
    pub updated_ms: i64,
}

/// One share-partition's state as stored (Kafka's share coordinator's
/// ShareSnapshot): the start offset and every in-flight record as runs of
/// one state and delivery count. A write replaces the partition's whole
/// state if its `version` is higher than the stored one's (writes of
/// several partitions are batched, so they may arrive out of order).
/// A `start_offset` of [`UNSET_START_OFFSET`] (no batches) is a tombstone:
/// the group's offsets for the partition were deleted (DeleteShareGroupOffsets),
/// and the version it carries keeps an older write from bringing them back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStateRecord {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub version: i64,
    pub start_offset: i64,
    pub batches: Vec<crate::share::StateBatch>,
}

/// The start offset of a share-partition with no state: the group reads it
/// from `share.auto.offset.reset` next time (Kafka's share coordinator's
/// `UNINITIALIZED_START_OFFSET`).
pub const UNSET_START_OFFSET: i64 = -1;

/// A group's configs as stored: its id and the configs set on it.
pub type GroupConfigRecord = (String, BTreeMap<String, String>);

/// One resource's dynamic broker configs as stored: the node id
/// (`crate::dynamic_config::DEFAULT_NODE_ID` for the cluster-wide default)
/// and the configs set on it.
pub type BrokerConfigRecord = (i32, BTreeMap<String, String>);

/// What the broker loads from the catalog at startup.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogSnapshot {
    pub topics: Vec<TopicRecord>,
    pub offsets: Vec<CommittedOffset>,
    pub transactions: Vec<TransactionRecord>,
    /// The ACL bindings (`kafgres.acls`).
    pub acls: Vec<crate::acl::AclBinding>,
    /// The client quotas (`kafgres.client_quotas`).
    pub client_quotas: Vec<crate::quota::QuotaRule>,
    /// Every share-partition's stored state (`kafgres.share_partitions`).
    pub share_states: Vec<ShareStateRecord>,
    /// Each group's configs set by IncrementalAlterConfigs (`kafgres.group_configs`).
    pub group_configs: Vec<GroupConfigRecord>,
    /// Dynamic broker configs, every node's and the default
    /// (`kafgres.broker_configs`); the broker keeps its own and the default.
    pub broker_configs: Vec<BrokerConfigRecord>,
    /// The delegation tokens (`kafgres.delegation_tokens`).
    pub delegation_tokens: Vec<crate::delegation::TokenRecord>,
}

impl From<Vec<TopicRecord>> for CatalogSnapshot {
    fn from(topics: Vec<TopicRecord>) -> Self {
        CatalogSnapshot { topics, ..Default::default() }
    }
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

/// The durability of one catalog operation. Implementations *enqueue the
/// operation when the method is called* (not when the future is first polled),
/// so operations are applied in the order the methods were called; the future
/// only waits for the operation to be durable.
pub type CatalogFuture<T> = Pin<Box<dyn Future<Output = Result<T, CatalogError>> + Send + 'static>>;

fn ready<T: Send + 'static>(result: Result<T, CatalogError>) -> CatalogFuture<T> {
    Box::pin(std::future::ready(result))
}

/// Persistent metadata operations the data plane needs.
pub trait Catalog: Send + Sync + 'static {
    /// Durably records a new topic. Fails with [`CatalogError::TopicExists`]
    /// if a topic of that name is already recorded.
    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<()>;

    /// Durably removes a topic, with its committed offsets and share-partition states.
    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<()>;

    /// Durably raises a topic's partition count (CreatePartitions).
    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<()>;

    /// Durably replaces a topic's config overrides (AlterConfigs,
    /// IncrementalAlterConfigs): `configs` is the whole new set.
    fn set_topic_configs(&self, topic_id: Uuid, configs: BTreeMap<String, String>) -> CatalogFuture<()>;

    /// Durably stores committed offsets (one OffsetCommit's worth); the
    /// implementation may batch concurrent calls into one transaction.
    fn commit_offsets(&self, offsets: Vec<CommittedOffset>) -> CatalogFuture<()>;

    /// Durably forgets a group's offsets: all of them (DeleteGroups) or those of
    /// the given partitions (OffsetDelete).
    fn delete_offsets(&self, group_id: String, partitions: Option<Vec<(String, i32)>>) -> CatalogFuture<()>;

    /// Reads one group's committed offsets as stored: after a failed write the
    /// coordinator reloads them, so its view matches what is durable.
    fn load_group_offsets(&self, group_id: String) -> CatalogFuture<Vec<CommittedOffset>>;

    /// Durably reserves `count` producer ids (InitProducerId) and returns the
    /// first: the block is `first..first + count`, never handed out again,
    /// even after a restart.
    fn allocate_producer_ids(&self, count: i64) -> CatalogFuture<i64>;

    /// Durably stores a transactional id's state (insert or replace).
    fn store_transaction(&self, record: TransactionRecord) -> CatalogFuture<()>;

    /// Durably forgets a transactional id (expired: idle for
    /// `transactional.id.expiration.ms`).
    fn delete_transaction(&self, transactional_id: String) -> CatalogFuture<()>;

    /// Durably completes a commit: stores `record` (in CompleteCommit) and
    /// the committed offsets of its TxnOffsetCommits, in one transaction.
    fn complete_transaction(&self, record: TransactionRecord, offsets: Vec<CommittedOffset>) -> CatalogFuture<()>;

    /// The SCRAM-SHA-256 credential of a user (SASL authentication), read
    /// afresh at every call. `None` when no such user may log in with one:
    /// no such role, NOLOGIN, an expired password (VALID UNTIL), no password,
    /// or a password not stored as a SCRAM-SHA-256 verifier (md5).
    fn scram_credential(&self, username: String) -> CatalogFuture<Option<crate::sasl::scram::ScramCredential>>;

    /// Every SCRAM-SHA-256 verifier the roles hold, as (role, iterations) by
    /// role name (DescribeUserScramCredentials): a credential exists whether
    /// or not its role may log in with it today.
    fn scram_verifiers(&self) -> CatalogFuture<Vec<(String, u32)>>;

    /// Sets a role's password to `verifier` (a SCRAM-SHA-256 verifier), or
    /// with `None` removes its SCRAM-SHA-256 password, as `ALTER ROLE …
    /// PASSWORD` does (AlterUserScramCredentials). `Ok(false)`, nothing
    /// changed: no such role, or (removing) its password is not a SCRAM one.
    fn set_scram_verifier(&self, role: String, verifier: Option<String>) -> CatalogFuture<bool>;

    /// What an authenticated role is for the authorizer: the roles it is a
    /// member of and whether it is a superuser, read when it authenticates.
    fn identity(&self, role: String) -> CatalogFuture<crate::acl::Identity>;

    /// A role whose holder proved who they are outside the catalog (a TLS
    /// client certificate, a bearer token), if it may log in: it exists and
    /// has LOGIN (as Postgres's `cert` authentication requires; a password's
    /// VALID UNTIL does not apply).
    fn external_login(&self, role: String) -> CatalogFuture<Option<crate::acl::Identity>>;

    /// Durably adds ACL bindings; one already stored is not an error.
    fn create_acls(&self, bindings: Vec<crate::acl::AclBinding>) -> CatalogFuture<()>;

    /// Durably removes ACL bindings (those a DeleteAcls filter matched).
    fn delete_acls(&self, bindings: Vec<crate::acl::AclBinding>) -> CatalogFuture<()>;

    /// Durably sets and removes client quotas (one AlterClientQuotas), all or none.
    fn alter_client_quotas(&self, changes: Vec<crate::quota::admin::QuotaChange>) -> CatalogFuture<()>;

    /// Durably replaces the state of each share-partition named, all in one
    /// transaction (a ShareFetch or ShareAcknowledge that touched several
    /// partitions writes them together).
    fn write_share_states(&self, states: Vec<ShareStateRecord>) -> CatalogFuture<()>;

    /// Durably removes every share-partition state of a group (DeleteGroups).
    fn delete_share_group(&self, group_id: String) -> CatalogFuture<()>;

    /// Durably replaces a group's configs (IncrementalAlterConfigs on a
    /// GROUP resource): `configs` is the whole set, empty to remove them.
    fn set_group_configs(&self, group_id: String, configs: BTreeMap<String, String>) -> CatalogFuture<()>;

    /// Durably replaces the dynamic broker configs of one resource
    /// (IncrementalAlterConfigs, AlterConfigs on a BROKER resource): a node's,
    /// or with `crate::dynamic_config::DEFAULT_NODE_ID` the cluster-wide
    /// default; `configs` is the whole set, empty to remove them.
    fn set_broker_configs(&self, node_id: i32, configs: BTreeMap<String, String>) -> CatalogFuture<()>;

    /// Stores a delegation token, new or changed (`kafgres.delegation_tokens`),
    /// before the broker hands it out or answers its renewal.
    fn store_delegation_token(&self, token: crate::delegation::TokenRecord) -> CatalogFuture<()>;

    /// Removes a delegation token (expired); removing one already gone is fine.
    fn delete_delegation_token(&self, token_id: String) -> CatalogFuture<()>;
}

/// A catalog in memory, for tests and for running the broker without Postgres.
#[derive(Debug, Default)]
pub struct MemoryCatalog {
    topics: Mutex<BTreeMap<String, TopicRecord>>,
    offsets: Mutex<BTreeMap<(String, String, i32), CommittedOffset>>,
    next_producer_id: Mutex<i64>,
    transactions: Mutex<BTreeMap<String, TransactionRecord>>,
    /// Tests: offset commits fail while set (a database error).
    failing_commits: std::sync::atomic::AtomicBool,
    /// SCRAM credentials by user name (SASL tests).
    scram_credentials: Mutex<BTreeMap<String, crate::sasl::scram::ScramCredential>>,
    /// Role memberships and superusers by role (authorization tests); a
    /// role not here is a member of nothing.
    identities: Mutex<BTreeMap<String, crate::acl::Identity>>,
    client_quotas: Mutex<BTreeMap<(crate::quota::QuotaEntity, crate::quota::QuotaKey), f64>>,
    acls: Mutex<std::collections::BTreeSet<crate::acl::AclBinding>>,
    share_states: Mutex<BTreeMap<(String, Uuid, i32), ShareStateRecord>>,
    group_configs: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    broker_configs: Mutex<BTreeMap<i32, BTreeMap<String, String>>>,
    delegation_tokens: Mutex<BTreeMap<String, crate::delegation::TokenRecord>>,
}

impl MemoryCatalog {
    /// A catalog that starts with `topics` (a standby's broker: its topics
    /// are the leader's, kept in memory, while its database is read-only).
    pub fn with_topics(topics: impl IntoIterator<Item = TopicRecord>) -> MemoryCatalog {
        let catalog = MemoryCatalog::default();
        if let Ok(mut map) = catalog.topics.lock() {
            map.extend(topics.into_iter().map(|t| (t.name.clone(), t)));
        }
        catalog
    }

    pub fn topics(&self) -> Vec<TopicRecord> {
        self.topics.lock().map(|t| t.values().cloned().collect()).unwrap_or_default()
    }

    pub fn offsets(&self) -> Vec<CommittedOffset> {
        self.offsets.lock().map(|o| o.values().cloned().collect()).unwrap_or_default()
    }

    /// Makes offset commits fail (or succeed again), as a failing database would.
    pub fn set_failing_commits(&self, failing: bool) {
        self.failing_commits.store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn transactions(&self) -> Vec<TransactionRecord> {
        self.transactions.lock().map(|t| t.values().cloned().collect()).unwrap_or_default()
    }

    /// Sets (or with `None` removes) a user's SCRAM-SHA-256 credential, as
    /// `CREATE ROLE … LOGIN PASSWORD` (or `DROP ROLE`) would.
    pub fn set_scram_credential(&self, username: &str, credential: Option<crate::sasl::scram::ScramCredential>) {
        if let Ok(mut credentials) = self.scram_credentials.lock() {
            match credential {
                Some(c) => credentials.insert(username.to_owned(), c),
                None => credentials.remove(username),
            };
        }
    }

    /// Sets what a role is a member of and whether it is a superuser, as
    /// `GRANT … TO` and `ALTER ROLE … SUPERUSER` would.
    pub fn set_identity(&self, identity: crate::acl::Identity) {
        if let Ok(mut identities) = self.identities.lock() {
            identities.insert(identity.role.clone(), identity);
        }
    }

    pub fn client_quotas(&self) -> Vec<crate::quota::QuotaRule> {
        self.client_quotas
            .lock()
            .map(|q| {
                q.iter()
                    .map(|((entity, key), value)| crate::quota::QuotaRule {
                        entity: entity.clone(),
                        key: *key,
                        value: *value,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn acls(&self) -> Vec<crate::acl::AclBinding> {
        self.acls.lock().map(|a| a.iter().cloned().collect()).unwrap_or_default()
    }

    pub fn share_states(&self) -> Vec<ShareStateRecord> {
        self.share_states.lock().map(|s| s.values().cloned().collect()).unwrap_or_default()
    }

    /// The dynamic broker configs stored, by node id (-1: the default).
    pub fn broker_configs(&self) -> Vec<BrokerConfigRecord> {
        self.broker_configs.lock().map(|b| b.iter().map(|(k, v)| (*k, v.clone())).collect()).unwrap_or_default()
    }

    /// The delegation tokens stored, by token id.
    pub fn delegation_tokens(&self) -> Vec<crate::delegation::TokenRecord> {
        self.delegation_tokens.lock().map(|t| t.values().cloned().collect()).unwrap_or_default()
    }

    /// Everything a restarted broker would load.
    pub fn snapshot(&self) -> CatalogSnapshot {
        CatalogSnapshot {
            topics: self.topics(),
            offsets: self.offsets(),
            transactions: self.transactions(),
            acls: self.acls(),
            client_quotas: self.client_quotas(),
            share_states: self.share_states(),
            group_configs: self
                .group_configs
                .lock()
                .map(|g| g.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
            broker_configs: self.broker_configs(),
            delegation_tokens: self.delegation_tokens(),
        }
    }
}

impl Catalog for MemoryCatalog {
    fn store_delegation_token(&self, token: crate::delegation::TokenRecord) -> CatalogFuture<()> {
        ready(
            self.delegation_tokens
                .lock()
                .map(|mut t| {
                    t.insert(token.token_id.clone(), token);
                })
                .map_err(|_| CatalogError::Failed("delegation token lock poisoned".into())),
        )
    }

    fn delete_delegation_token(&self, token_id: String) -> CatalogFuture<()> {
        ready(
            self.delegation_tokens
                .lock()
                .map(|mut t| {
                    t.remove(&token_id);
                })
                .map_err(|_| CatalogError::Failed("delegation token lock poisoned".into())),
        )
    }

    fn set_broker_configs(&self, node_id: i32, configs: BTreeMap<String, String>) -> CatalogFuture<()> {
        let Ok(mut stored) = self.broker_configs.lock() else {
            return ready(Err(CatalogError::Failed("broker config lock poisoned".into())));
        };
        if configs.is_empty() {
            stored.remove(&node_id);
        } else {
            stored.insert(node_id, configs);
        }
        ready(Ok(()))
    }

    fn delete_share_group(&self, group_id: String) -> CatalogFuture<()> {
        if let Ok(mut stored) = self.share_states.lock() {
            stored.retain(|(group, _, _), _| *group != group_id);
        }
        ready(Ok(()))
    }

    fn set_group_configs(&self, group_id: String, configs: BTreeMap<String, String>) -> CatalogFuture<()> {
        let Ok(mut stored) = self.group_configs.lock() else {
            return ready(Err(CatalogError::Failed("group config lock poisoned".into())));
        };
        if configs.is_empty() {
            stored.remove(&group_id);
        } else {
            stored.insert(group_id, configs);
        }
        ready(Ok(()))
    }

    fn write_share_states(&self, states: Vec<ShareStateRecord>) -> CatalogFuture<()> {
        let Ok(mut stored) = self.share_states.lock() else {
            return ready(Err(CatalogError::Failed("share state lock poisoned".into())));
        };
        for state in states {
            let key = (state.group_id.clone(), state.topic_id, state.partition);
            if stored.get(&key).is_none_or(|old| old.version < state.version) {
                stored.insert(key, state);
            }
        }
        ready(Ok(()))
    }

    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<()> {
        ready((|| {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            if topics.contains_key(&topic.name) {
                return Err(CatalogError::TopicExists(topic.name));
            }
            topics.insert(topic.name.clone(), topic);
            Ok(())
        })())
    }

    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<()> {
        ready((|| {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let name = topics
                .values()
                .find(|t| t.topic_id == topic_id)
                .map(|t| t.name.clone())
                .ok_or(CatalogError::UnknownTopic(topic_id))?;
            topics.remove(&name);
            drop(topics);
            let mut offsets = self.offsets.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            offsets.retain(|(_, topic, _), _| *topic != name);
            drop(offsets);
            // A deleted topic's share-partitions go with it (in Postgres, a
            // foreign key's ON DELETE CASCADE).
            let mut shares = self.share_states.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            shares.retain(|(_, id, _), _| *id != topic_id);
            Ok(())
        })())
    }

    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<()> {
        ready((|| {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let topic =
                topics.values_mut().find(|t| t.topic_id == topic_id).ok_or(CatalogError::UnknownTopic(topic_id))?;
            topic.partition_count = partition_count;
            Ok(())
        })())
    }

    fn set_topic_configs(&self, topic_id: Uuid, configs: BTreeMap<String, String>) -> CatalogFuture<()> {
        ready((|| {
            let mut topics = self.topics.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let topic =
                topics.values_mut().find(|t| t.topic_id == topic_id).ok_or(CatalogError::UnknownTopic(topic_id))?;
            topic.configs = configs;
            Ok(())
        })())
    }

    fn commit_offsets(&self, committed: Vec<CommittedOffset>) -> CatalogFuture<()> {
        ready((|| {
            if self.failing_commits.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(CatalogError::Failed("offset commits are failing (test switch)".into()));
            }
            let mut offsets = self.offsets.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            for o in committed {
                offsets.insert((o.group_id.clone(), o.topic.clone(), o.partition), o);
            }
            Ok(())
        })())
    }

    fn load_group_offsets(&self, group_id: String) -> CatalogFuture<Vec<CommittedOffset>> {
        ready(
            self.offsets
                .lock()
                .map(|o| o.values().filter(|c| c.group_id == group_id).cloned().collect())
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    fn allocate_producer_ids(&self, count: i64) -> CatalogFuture<i64> {
        ready((|| {
            let mut next = self.next_producer_id.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let first = *next;
            *next = first.checked_add(count).ok_or_else(|| CatalogError::Failed("producer ids exhausted".into()))?;
            Ok(first)
        })())
    }

    fn store_transaction(&self, record: TransactionRecord) -> CatalogFuture<()> {
        ready((|| {
            let mut transactions = self.transactions.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            transactions.insert(record.transactional_id.clone(), record);
            Ok(())
        })())
    }

    fn delete_transaction(&self, transactional_id: String) -> CatalogFuture<()> {
        ready(
            self.transactions
                .lock()
                .map(|mut t| {
                    t.remove(&transactional_id);
                })
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    fn complete_transaction(&self, record: TransactionRecord, committed: Vec<CommittedOffset>) -> CatalogFuture<()> {
        ready((|| {
            if self.failing_commits.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(CatalogError::Failed("offset commits are failing (test switch)".into()));
            }
            let mut offsets = self.offsets.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            let mut transactions = self.transactions.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            for o in committed {
                offsets.insert((o.group_id.clone(), o.topic.clone(), o.partition), o);
            }
            transactions.insert(record.transactional_id.clone(), record);
            Ok(())
        })())
    }

    fn scram_credential(&self, username: String) -> CatalogFuture<Option<crate::sasl::scram::ScramCredential>> {
        ready(
            self.scram_credentials
                .lock()
                .map(|c| c.get(&username).cloned())
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    fn scram_verifiers(&self) -> CatalogFuture<Vec<(String, u32)>> {
        ready(
            self.scram_credentials
                .lock()
                .map(|c| c.iter().map(|(role, c)| (role.clone(), c.iterations)).collect())
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    /// A role exists here when it has a credential or an identity.
    fn set_scram_verifier(&self, role: String, verifier: Option<String>) -> CatalogFuture<bool> {
        fn poisoned<T>(_: T) -> CatalogError {
            CatalogError::Failed("poisoned".into())
        }
        let result = (|| {
            let exists = self.identities.lock().map_err(poisoned)?.contains_key(&role);
            let mut credentials = self.scram_credentials.lock().map_err(poisoned)?;
            Ok(match verifier {
                None => credentials.remove(&role).is_some(),
                Some(verifier) => {
                    let credential = crate::sasl::scram::ScramCredential::from_verifier(&verifier)
                        .ok_or_else(|| CatalogError::Failed("not a SCRAM-SHA-256 verifier".into()))?;
                    if !exists && !credentials.contains_key(&role) {
                        return Ok(false);
                    }
                    credentials.insert(role, credential);
                    true
                }
            })
        })();
        ready(result)
    }

    fn identity(&self, role: String) -> CatalogFuture<crate::acl::Identity> {
        ready(
            self.identities
                .lock()
                .map(|i| i.get(&role).cloned().unwrap_or(crate::acl::Identity { role, ..Default::default() }))
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    fn external_login(&self, role: String) -> CatalogFuture<Option<crate::acl::Identity>> {
        let known = self.identities.lock().map(|i| i.get(&role).cloned());
        let has_password = self.scram_credentials.lock().map(|c| c.contains_key(&role)).unwrap_or(false);
        ready(match known {
            Ok(Some(identity)) => Ok(Some(identity)),
            Ok(None) if has_password => Ok(Some(crate::acl::Identity { role, ..Default::default() })),
            Ok(None) => Ok(None),
            Err(_) => Err(CatalogError::Failed("poisoned".into())),
        })
    }

    fn alter_client_quotas(&self, changes: Vec<crate::quota::admin::QuotaChange>) -> CatalogFuture<()> {
        ready((|| {
            let mut quotas = self.client_quotas.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            for change in changes {
                match change.value {
                    Some(value) => quotas.insert((change.entity, change.key), value),
                    None => quotas.remove(&(change.entity, change.key)),
                };
            }
            Ok(())
        })())
    }

    fn create_acls(&self, bindings: Vec<crate::acl::AclBinding>) -> CatalogFuture<()> {
        ready(self.acls.lock().map(|mut a| a.extend(bindings)).map_err(|_| CatalogError::Failed("poisoned".into())))
    }

    fn delete_acls(&self, bindings: Vec<crate::acl::AclBinding>) -> CatalogFuture<()> {
        ready(
            self.acls
                .lock()
                .map(|mut a| {
                    for b in &bindings {
                        a.remove(b);
                    }
                })
                .map_err(|_| CatalogError::Failed("poisoned".into())),
        )
    }

    fn delete_offsets(&self, group_id: String, partitions: Option<Vec<(String, i32)>>) -> CatalogFuture<()> {
        ready((|| {
            let mut offsets = self.offsets.lock().map_err(|_| CatalogError::Failed("poisoned".into()))?;
            offsets.retain(|(group, topic, partition), _| {
                *group != group_id
                    || partitions.as_ref().is_some_and(|p| !p.iter().any(|(t, i)| t == topic && i == partition))
            });
            Ok(())
        })())
    }
}
