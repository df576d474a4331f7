//! Authorization: Kafka's ACLs, with Postgres roles as principals.
//!
//! Owns the ACL vocabulary ([`binding`]), the filters of DescribeAcls and
//! DeleteAcls ([`filter`]) and the [`Authorizer`] every handler asks before
//! it acts ([`authorizer`]). A principal `User:<role>` is a Postgres role;
//! a binding for a group role applies to its members, and Postgres
//! superusers may do everything. The bindings are stored by the catalog
//! (`kafgres.acls`); this module never reads or writes them there: the
//! ACL APIs store first, then change the authorizer, and the host replaces
//! the whole set when it reloads.

pub mod admin;
pub mod authorizer;
pub mod binding;
pub mod filter;

pub use admin::AclAdmin;
pub use authorizer::{Authorizer, Identity, RuleSet};
pub use binding::{AclBinding, Operation, PatternType, Permission, ResourceType, ANONYMOUS, CLUSTER_NAME, WILDCARD};
pub use filter::AclFilter;
