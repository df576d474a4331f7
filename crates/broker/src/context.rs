//! The services a running broker is made of, and how each handler is given
//! the ones it declares.
//!
//! [`crate::server`] builds one [`BrokerContext`] at start. A handler never
//! sees it: it names the services it uses as its `Services` type (a
//! reference, or a tuple of them) and dispatch [`Pick`]s them out, so what a
//! handler can touch is written in its declaration.

use std::sync::Arc;

use crate::acl::{AclAdmin, Authorizer};
use crate::catalog::Catalog;
use crate::config::BrokerConfig;
use crate::group_service::GroupService;
use crate::producer_ids::ProducerIds;
use crate::topic_admin::TopicAdmin;
use crate::topics::Topics;
use crate::txn::TxnService;

pub struct BrokerContext {
    /// Settings, with the advertised port resolved (a configured 0 is the
    /// port the listener was bound to).
    pub config: Arc<BrokerConfig>,
    /// The port to persistent metadata; handlers reach it only through the
    /// services below, which decide what is stored when.
    pub catalog: Arc<dyn Catalog>,
    pub topics: Arc<Topics>,
    pub topic_admin: TopicAdmin,
    /// The consumer-group coordinator (this broker coordinates every group).
    pub groups: Arc<GroupService>,
    pub producer_ids: Arc<ProducerIds>,
    /// The transaction coordinator.
    pub txns: Arc<TxnService>,
    pub shares: Arc<crate::share::ShareService>,
    /// The ACLs in force; the host replaces them when it reloads.
    pub acls: Arc<Authorizer>,
    /// CreateAcls and DeleteAcls: catalog first, then the authorizer.
    pub acl_admin: AclAdmin,
    /// The client quotas in force and the rates measured against them; the
    /// host replaces the rules when it reloads.
    pub quotas: Arc<crate::quota::ClientQuotas>,
    /// AlterClientQuotas: catalog first, then the quotas.
    pub quota_admin: crate::quota::admin::QuotaAdmin,
    /// The request frames in flight, against `request_memory_bytes_max`
    /// (the connections' concern, not a handler's service).
    pub request_memory: crate::limits::RequestMemory,
    /// How certificate and token subjects become roles; the host replaces
    /// the rules when it reloads.
    pub identities: crate::ident::SharedIdentityRules,
    /// Failed logins by address and role: how long to hold each answer.
    pub failed_logins: crate::limits::FailedLogins,
    /// Dynamic broker configs (AlterConfigs on a BROKER resource): catalog
    /// first, then the settings in force.
    pub broker_configs: crate::dynamic_config::admin::BrokerConfigAdmin,
    /// What clients pushed (KIP-714), per client instance.
    pub telemetry: crate::telemetry::ClientTelemetry,
    /// Delegation tokens (KIP-48): the token APIs and token logins.
    pub delegation_tokens: Arc<crate::delegation::DelegationTokens>,
}

/// What a handler can be given: one service by reference, `()` for none, or
/// a tuple of them.
pub trait Pick<'a> {
    fn pick(ctx: &'a BrokerContext) -> Self;
}

impl Pick<'_> for () {
    fn pick(_: &BrokerContext) -> Self {}
}

macro_rules! services {
    ($($service:ty => $field:ident),* $(,)?) => {
        $(impl<'a> Pick<'a> for &'a $service {
            fn pick(ctx: &'a BrokerContext) -> Self {
                &ctx.$field
            }
        })*
    };
}

services! {
    BrokerConfig => config,
    Topics => topics,
    TopicAdmin => topic_admin,
    GroupService => groups,
    ProducerIds => producer_ids,
    TxnService => txns,
    crate::share::ShareService => shares,
    Authorizer => acls,
    AclAdmin => acl_admin,
    crate::quota::admin::QuotaAdmin => quota_admin,
    Arc<dyn Catalog> => catalog,
    crate::dynamic_config::admin::BrokerConfigAdmin => broker_configs,
    crate::telemetry::ClientTelemetry => telemetry,
    Arc<crate::delegation::DelegationTokens> => delegation_tokens,
}

impl<'a, A: Pick<'a>, B: Pick<'a>> Pick<'a> for (A, B) {
    fn pick(ctx: &'a BrokerContext) -> Self {
        (A::pick(ctx), B::pick(ctx))
    }
}

impl<'a, A: Pick<'a>, B: Pick<'a>, C: Pick<'a>> Pick<'a> for (A, B, C) {
    fn pick(ctx: &'a BrokerContext) -> Self {
        (A::pick(ctx), B::pick(ctx), C::pick(ctx))
    }
}

impl<'a, A: Pick<'a>, B: Pick<'a>, C: Pick<'a>, D: Pick<'a>> Pick<'a> for (A, B, C, D) {
    fn pick(ctx: &'a BrokerContext) -> Self {
        (A::pick(ctx), B::pick(ctx), C::pick(ctx), D::pick(ctx))
    }
}
