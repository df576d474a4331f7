//! Messages from the data plane to the control plane, and the data plane's
//! [`Catalog`] that sends them.
//!
//! The data plane never blocks a thread on the control plane: it sends on a
//! bounded tokio channel (awaiting when full), writes the eventfd that sits in
//! the worker's WaitEventSet, and awaits a oneshot reply. The main thread
//! drains the channel on each wake-up.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use kafgres_broker::catalog::{Catalog, CatalogError, CatalogFuture, CommittedOffset, TopicRecord, TransactionRecord};
use kafgres_broker::sasl::scram::ScramCredential;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Requests the control plane must run (they need SPI).
#[derive(Debug)]
pub enum ControlRequest {
    CreateTopic {
        topic: TopicRecord,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    DeleteTopic {
        topic_id: Uuid,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    SetPartitionCount {
        topic_id: Uuid,
        partition_count: i32,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Replaces a topic's config overrides (the whole set).
    SetTopicConfigs {
        topic_id: Uuid,
        configs: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Served in batches: every commit queued at a wake-up shares one transaction.
    CommitOffsets {
        offsets: Vec<CommittedOffset>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Deletes a share group's share-partition states.
    DeleteShareGroup {
        group_id: String,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Replaces one BROKER resource's dynamic configs (the whole set).
    SetBrokerConfigs {
        node_id: i32,
        configs: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Stores a delegation token, new or changed.
    StoreDelegationToken {
        token: kafgres_broker::delegation::TokenRecord,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Deletes a delegation token.
    DeleteDelegationToken {
        token_id: String,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Replaces a group's configs (the whole set).
    SetGroupConfigs {
        group_id: String,
        configs: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Replaces share-partition states (one ShareFetch's or ShareAcknowledge's).
    WriteShareStates {
        states: Vec<kafgres_broker::catalog::ShareStateRecord>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    DeleteOffsets {
        group_id: String,
        partitions: Option<Vec<(String, i32)>>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Reads one group's committed offsets back (after a failed write).
    LoadGroupOffsets {
        group_id: String,
        reply: oneshot::Sender<Result<Vec<CommittedOffset>, CatalogError>>,
    },
    /// Reserves `count` producer ids; replies with the first.
    AllocateProducerIds {
        count: i64,
        reply: oneshot::Sender<Result<i64, CatalogError>>,
    },
    /// Reads a role's SCRAM-SHA-256 credential (SASL authentication).
    ScramCredential {
        username: String,
        reply: oneshot::Sender<Result<Option<ScramCredential>, CatalogError>>,
    },
    /// Forgets an expired transactional id.
    DeleteTransaction {
        transactional_id: String,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Lists the roles' SCRAM-SHA-256 verifiers (DescribeUserScramCredentials).
    ScramVerifiers {
        reply: oneshot::Sender<Result<Vec<(String, u32)>, CatalogError>>,
    },
    /// Sets or removes a role's SCRAM-SHA-256 password (AlterUserScramCredentials).
    SetScramVerifier {
        role: String,
        verifier: Option<String>,
        reply: oneshot::Sender<Result<bool, CatalogError>>,
    },
    /// Reads what an authenticated role is to the authorizer.
    Identity {
        role: String,
        reply: oneshot::Sender<Result<kafgres_broker::acl::Identity, CatalogError>>,
    },
    /// Reads whether a TLS client certificate's role may log in, and what it is.
    ExternalLogin {
        role: String,
        reply: oneshot::Sender<Result<Option<kafgres_broker::acl::Identity>, CatalogError>>,
    },
    /// Stores ACL bindings (CreateAcls).
    CreateAcls {
        bindings: Vec<kafgres_broker::acl::AclBinding>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Removes ACL bindings (DeleteAcls).
    DeleteAcls {
        bindings: Vec<kafgres_broker::acl::AclBinding>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Sets and removes client quotas (AlterClientQuotas), in one transaction.
    AlterClientQuotas {
        changes: Vec<kafgres_broker::quota::admin::QuotaChange>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
    /// Stores a transactional id's state; with `offsets`, completes a commit
    /// (the offsets and the state in one transaction).
    StoreTransaction {
        record: TransactionRecord,
        offsets: Vec<CommittedOffset>,
        reply: oneshot::Sender<Result<(), CatalogError>>,
    },
}

/// Most requests queued for the control plane before senders wait.
pub const CONTROL_QUEUE_DEPTH: usize = 16 * 1024;

/// An eventfd: written by any thread, readable in the worker's wait set.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> std::io::Result<EventFd> {
        // SAFETY: eventfd(2) takes no pointers; it only creates a descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned open by eventfd and nothing else
        // holds it, so the OwnedFd is its only owner and closes it once.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the fd readable. Never blocks; a saturated counter is already readable.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: the descriptor is ours and open for as long as `self`; the
        // kernel reads exactly 8 bytes from `one`, a live u64 on the stack.
        // eventfd writes are thread-safe, so any thread may wake. A failure
        // (EAGAIN: the counter is saturated) leaves it readable, as wanted.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Resets the counter after a wake-up.
    pub fn drain(&self) {
        let mut counter: u64 = 0;
        // SAFETY: the descriptor is ours and open for as long as `self`; the
        // kernel writes exactly 8 bytes into `counter`, a live u64 on the
        // stack. Non-blocking: EAGAIN (nothing to drain) is harmless.
        unsafe {
            libc::read(self.0.as_raw_fd(), (&mut counter as *mut u64).cast(), 8);
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The sending side, handed to the data plane.
#[derive(Clone)]
pub struct ControlPlaneCatalog {
    requests: mpsc::Sender<ControlRequest>,
    waker: Arc<EventFd>,
}

impl ControlPlaneCatalog {
    pub fn new(waker: Arc<EventFd>) -> (ControlPlaneCatalog, mpsc::Receiver<ControlRequest>) {
        let (requests, receiver) = mpsc::channel(CONTROL_QUEUE_DEPTH);
        (ControlPlaneCatalog { requests, waker }, receiver)
    }

    /// Enqueues the request now (so requests reach Postgres in call order) and
    /// returns a future for its reply. A full queue is refused at once rather
    /// than waited on: the control plane is behind, and the caller answers
    /// its client with an error it can retry.
    fn call<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, CatalogError>>) -> ControlRequest,
    ) -> CatalogFuture<T> {
        let (reply, answer) = oneshot::channel();
        let queued = self.requests.try_send(make(reply));
        if queued.is_ok() {
            self.waker.wake();
        }
        Box::pin(async move {
            queued.map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => {
                    CatalogError::Unavailable("the control-plane queue is full".into())
                }
                mpsc::error::TrySendError::Closed(_) => {
                    CatalogError::Unavailable("the control plane has stopped".into())
                }
            })?;
            answer.await.map_err(|_| CatalogError::Unavailable("the control plane dropped the request".into()))?
        })
    }
}

impl Catalog for ControlPlaneCatalog {
    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::CreateTopic { topic, reply })
    }

    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteTopic { topic_id, reply })
    }

    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::SetPartitionCount { topic_id, partition_count, reply })
    }

    fn set_topic_configs(
        &self,
        topic_id: Uuid,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::SetTopicConfigs { topic_id, configs, reply })
    }

    fn commit_offsets(&self, offsets: Vec<CommittedOffset>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::CommitOffsets { offsets, reply })
    }

    fn delete_offsets(&self, group_id: String, partitions: Option<Vec<(String, i32)>>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteOffsets { group_id, partitions, reply })
    }

    fn load_group_offsets(&self, group_id: String) -> CatalogFuture<Vec<CommittedOffset>> {
        self.call(move |reply| ControlRequest::LoadGroupOffsets { group_id, reply })
    }

    fn allocate_producer_ids(&self, count: i64) -> CatalogFuture<i64> {
        self.call(move |reply| ControlRequest::AllocateProducerIds { count, reply })
    }

    fn store_transaction(&self, record: TransactionRecord) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::StoreTransaction { record, offsets: Vec::new(), reply })
    }

    fn complete_transaction(&self, record: TransactionRecord, offsets: Vec<CommittedOffset>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::StoreTransaction { record, offsets, reply })
    }

    fn scram_credential(&self, username: String) -> CatalogFuture<Option<ScramCredential>> {
        self.call(move |reply| ControlRequest::ScramCredential { username, reply })
    }

    fn scram_verifiers(&self) -> CatalogFuture<Vec<(String, u32)>> {
        self.call(move |reply| ControlRequest::ScramVerifiers { reply })
    }

    fn delete_transaction(&self, transactional_id: String) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteTransaction { transactional_id, reply })
    }

    fn set_scram_verifier(&self, role: String, verifier: Option<String>) -> CatalogFuture<bool> {
        self.call(move |reply| ControlRequest::SetScramVerifier { role, verifier, reply })
    }

    fn identity(&self, role: String) -> CatalogFuture<kafgres_broker::acl::Identity> {
        self.call(move |reply| ControlRequest::Identity { role, reply })
    }

    fn external_login(&self, role: String) -> CatalogFuture<Option<kafgres_broker::acl::Identity>> {
        self.call(move |reply| ControlRequest::ExternalLogin { role, reply })
    }

    fn create_acls(&self, bindings: Vec<kafgres_broker::acl::AclBinding>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::CreateAcls { bindings, reply })
    }

    fn delete_acls(&self, bindings: Vec<kafgres_broker::acl::AclBinding>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteAcls { bindings, reply })
    }

    fn alter_client_quotas(&self, changes: Vec<kafgres_broker::quota::admin::QuotaChange>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::AlterClientQuotas { changes, reply })
    }

    fn write_share_states(&self, states: Vec<kafgres_broker::catalog::ShareStateRecord>) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::WriteShareStates { states, reply })
    }

    fn set_group_configs(
        &self,
        group_id: String,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::SetGroupConfigs { group_id, configs, reply })
    }

    fn delete_share_group(&self, group_id: String) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteShareGroup { group_id, reply })
    }

    fn set_broker_configs(
        &self,
        node_id: i32,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::SetBrokerConfigs { node_id, configs, reply })
    }

    fn store_delegation_token(&self, token: kafgres_broker::delegation::TokenRecord) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::StoreDelegationToken { token, reply })
    }

    fn delete_delegation_token(&self, token_id: String) -> CatalogFuture<()> {
        self.call(move |reply| ControlRequest::DeleteDelegationToken { token_id, reply })
    }
}

/// A standby's catalog. Its database is read-only and replays the leader's,
/// so the topics its broker copies are kept in memory ([`MemoryCatalog`],
/// fed by the follower); what the broker only reads (a role's SCRAM
/// credential, its memberships) goes to the standby's control plane, which
/// reads the replica of the leader's roles, so clients can log in to a
/// standby's broker (to be sent to the leader) and its SQL functions act as
/// their roles.
pub struct StandbyCatalog {
    memory: kafgres_broker::MemoryCatalog,
    control: ControlPlaneCatalog,
}

impl StandbyCatalog {
    pub fn new(memory: kafgres_broker::MemoryCatalog, control: ControlPlaneCatalog) -> StandbyCatalog {
        StandbyCatalog { memory, control }
    }
}

impl Catalog for StandbyCatalog {
    fn create_topic(&self, topic: TopicRecord) -> CatalogFuture<()> {
        self.memory.create_topic(topic)
    }

    fn delete_topic(&self, topic_id: Uuid) -> CatalogFuture<()> {
        self.memory.delete_topic(topic_id)
    }

    fn set_partition_count(&self, topic_id: Uuid, partition_count: i32) -> CatalogFuture<()> {
        self.memory.set_partition_count(topic_id, partition_count)
    }

    fn set_topic_configs(
        &self,
        topic_id: Uuid,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.memory.set_topic_configs(topic_id, configs)
    }

    fn commit_offsets(&self, offsets: Vec<CommittedOffset>) -> CatalogFuture<()> {
        self.memory.commit_offsets(offsets)
    }

    fn delete_offsets(&self, group_id: String, partitions: Option<Vec<(String, i32)>>) -> CatalogFuture<()> {
        self.memory.delete_offsets(group_id, partitions)
    }

    fn load_group_offsets(&self, group_id: String) -> CatalogFuture<Vec<CommittedOffset>> {
        self.memory.load_group_offsets(group_id)
    }

    fn allocate_producer_ids(&self, count: i64) -> CatalogFuture<i64> {
        self.memory.allocate_producer_ids(count)
    }

    fn store_transaction(&self, record: TransactionRecord) -> CatalogFuture<()> {
        self.memory.store_transaction(record)
    }

    fn complete_transaction(&self, record: TransactionRecord, offsets: Vec<CommittedOffset>) -> CatalogFuture<()> {
        self.memory.complete_transaction(record, offsets)
    }

    fn scram_credential(&self, username: String) -> CatalogFuture<Option<ScramCredential>> {
        self.control.scram_credential(username)
    }

    fn scram_verifiers(&self) -> CatalogFuture<Vec<(String, u32)>> {
        self.control.scram_verifiers()
    }

    fn delete_transaction(&self, transactional_id: String) -> CatalogFuture<()> {
        self.memory.delete_transaction(transactional_id)
    }

    /// A standby's roles are the leader's, read-only (its broker closes
    /// admin connections before this is reached).
    fn set_scram_verifier(&self, _role: String, _verifier: Option<String>) -> CatalogFuture<bool> {
        Box::pin(std::future::ready(Err(CatalogError::Unavailable(
            "this database is a standby: roles change on the primary".into(),
        ))))
    }

    fn identity(&self, role: String) -> CatalogFuture<kafgres_broker::acl::Identity> {
        self.control.identity(role)
    }

    fn external_login(&self, role: String) -> CatalogFuture<Option<kafgres_broker::acl::Identity>> {
        self.control.external_login(role)
    }

    fn create_acls(&self, bindings: Vec<kafgres_broker::acl::AclBinding>) -> CatalogFuture<()> {
        self.memory.create_acls(bindings)
    }

    fn delete_acls(&self, bindings: Vec<kafgres_broker::acl::AclBinding>) -> CatalogFuture<()> {
        self.memory.delete_acls(bindings)
    }

    fn alter_client_quotas(&self, changes: Vec<kafgres_broker::quota::admin::QuotaChange>) -> CatalogFuture<()> {
        self.memory.alter_client_quotas(changes)
    }

    /// A standby's broker serves no share group (the leader's coordinator
    /// does): nothing reaches here but a test's.
    fn write_share_states(&self, states: Vec<kafgres_broker::catalog::ShareStateRecord>) -> CatalogFuture<()> {
        self.memory.write_share_states(states)
    }

    /// A standby's database is read-only: kept in memory, as its topics are.
    fn set_group_configs(
        &self,
        group_id: String,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.memory.set_group_configs(group_id, configs)
    }

    fn delete_share_group(&self, group_id: String) -> CatalogFuture<()> {
        self.memory.delete_share_group(group_id)
    }

    /// A standby's database is read-only (its broker closes admin
    /// connections before this is reached): kept in memory, as its topics
    /// are; the primary's rows reach it with the WAL and apply at its next start.
    fn set_broker_configs(
        &self,
        node_id: i32,
        configs: std::collections::BTreeMap<String, String>,
    ) -> CatalogFuture<()> {
        self.memory.set_broker_configs(node_id, configs)
    }

    /// A standby serves no token API and removes no token (its database is
    /// read-only): kept in memory, should one reach it.
    fn store_delegation_token(&self, token: kafgres_broker::delegation::TokenRecord) -> CatalogFuture<()> {
        self.memory.store_delegation_token(token)
    }

    fn delete_delegation_token(&self, token_id: String) -> CatalogFuture<()> {
        self.memory.delete_delegation_token(token_id)
    }
}
