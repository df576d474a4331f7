//! The authorizer: the bindings in force, indexed for the per-request check,
//! and Kafka's `StandardAuthorizer` decision over them.
//!
//! A decision reads an immutable [`RuleSet`] through an `Arc` taken under a
//! read lock held for a pointer copy only; changes (CreateAcls, DeleteAcls, a
//! reload) build a new set and swap it in, so a check never waits on a writer.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::binding::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};
use super::filter::AclFilter;

/// Who a connection is, for authorization: the Postgres role it
/// authenticated as, the roles it is a member of (directly or not, as
/// `pg_has_role(…, 'MEMBER')` counts them) and whether it is a superuser.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    pub role: String,
    pub member_of: Vec<String>,
    pub superuser: bool,
    /// Whether the connection logged in with a delegation token (Kafka's
    /// `KafkaPrincipal.tokenAuthenticated`): it acts as the token's owner,
    /// but may not create, renew, expire or describe tokens.
    pub token_authenticated: bool,
}

impl Identity {
    /// A connection that did not authenticate (`User:ANONYMOUS`).
    pub fn anonymous() -> Identity {
        Identity { role: "ANONYMOUS".into(), ..Identity::default() }
    }

    fn is(&self, role: &str) -> bool {
        role == WILDCARD || self.role == role || self.member_of.iter().any(|r| r == role)
    }
}

/// The ACL part of a binding, as the index keeps it under its resource pattern.
#[derive(Debug, Clone)]
struct Entry {
    /// The role, or `*`.
    role: String,
    /// `None`: every host.
    host: Option<IpAddr>,
    /// A host that is not an IP address matches no client; kept so that
    /// such a binding is still listed and deletable.
    host_is_unparsable: bool,
    operation: Operation,
    permission: Permission,
}

impl Entry {
    fn applies_to(&self, who: &Identity, from: IpAddr) -> bool {
        !self.host_is_unparsable && self.host.is_none_or(|h| h == from) && who.is(&self.role)
    }
}

/// Index of one resource type's bindings.
#[derive(Debug, Default, Clone)]
struct TypeRules {
    literal: HashMap<String, Vec<Entry>>,
    prefixed: HashMap<String, Vec<Entry>>,
    /// The lengths of the prefixes above, ascending: a name is looked up
    /// only at the lengths some binding has.
    prefix_lengths: Vec<usize>,
}

/// Every binding, and the index the checks use.
#[derive(Debug, Default, Clone)]
pub struct RuleSet {
    bindings: BTreeSet<AclBinding>,
    by_type: HashMap<ResourceType, TypeRules>,
}

impl RuleSet {
    pub fn new(bindings: impl IntoIterator<Item = AclBinding>) -> RuleSet {
        let bindings: BTreeSet<AclBinding> = bindings.into_iter().collect();
        let mut by_type: HashMap<ResourceType, TypeRules> = HashMap::new();
        for b in &bindings {
            let host = (b.host != WILDCARD).then(|| b.host.parse::<IpAddr>());
            let entry = Entry {
                role: b.role().to_owned(),
                host: host.clone().and_then(Result::ok),
                host_is_unparsable: matches!(host, Some(Err(_))),
                operation: b.operation,
                permission: b.permission,
            };
            let rules = by_type.entry(b.resource_type).or_default();
            match b.pattern_type {
                PatternType::Prefixed => rules.prefixed.entry(b.resource_name.clone()).or_default().push(entry),
                _ => rules.literal.entry(b.resource_name.clone()).or_default().push(entry),
            }
        }
        for rules in by_type.values_mut() {
            let lengths: BTreeSet<usize> = rules.prefixed.keys().map(String::len).collect();
            rules.prefix_lengths = lengths.into_iter().collect();
        }
        RuleSet { bindings, by_type }
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// Every entry whose pattern covers `name`.
    fn entries_for<'a>(&'a self, resource_type: ResourceType, name: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        let rules = self.by_type.get(&resource_type);
        let literal = rules.into_iter().flat_map(move |r| {
            let exact = r.literal.get(name).into_iter().flatten();
            let wildcard = (name != WILDCARD).then(|| r.literal.get(WILDCARD)).flatten().into_iter().flatten();
            exact.chain(wildcard)
        });
        let prefixed = rules.into_iter().flat_map(move |r| {
            r.prefix_lengths
                .iter()
                .take_while(move |&&len| len <= name.len())
                .filter(move |&&len| name.is_char_boundary(len))
                .flat_map(move |&len| r.prefixed.get(&name[..len]).into_iter().flatten())
        });
        literal.chain(prefixed)
    }

    /// Kafka's decision: a superuser may do anything; otherwise a DENY that
    /// applies (to the operation itself, or ALL) wins over any ALLOW, and
    /// without an ALLOW that applies (the operation, one that implies it, or
    /// ALL) the answer is no.
    pub fn authorize(
        &self,
        who: &Identity,
        from: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if who.superuser {
            return true;
        }
        let mut allowed = false;
        for e in self.entries_for(resource_type, name) {
            if !e.applies_to(who, from) {
                continue;
            }
            match e.permission {
                Permission::Deny if e.operation == operation || e.operation == Operation::All => return false,
                Permission::Allow if operation.allowed_by().contains(&e.operation) => allowed = true,
                _ => {}
            }
        }
        allowed
    }

    /// Kafka's `authorizeByResourceType`: whether `who` may do `operation`
    /// on at least one resource of the type (InitProducerId for an
    /// idempotent producer asks it of WRITE on topics). A DENY on the
    /// type's wildcard refuses it all.
    pub fn authorize_any(
        &self,
        who: &Identity,
        from: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if who.superuser {
            return true;
        }
        let Some(rules) = self.by_type.get(&resource_type) else {
            return false;
        };
        let denies = |e: &Entry| {
            e.permission == Permission::Deny
                && (e.operation == operation || e.operation == Operation::All)
                && e.applies_to(who, from)
        };
        if rules.literal.get(WILDCARD).into_iter().flatten().any(denies) {
            return false;
        }
        rules.literal.values().chain(rules.prefixed.values()).flatten().any(|e| {
            e.permission == Permission::Allow
                && (e.operation == operation || e.operation == Operation::All)
                && e.applies_to(who, from)
        })
    }

    pub fn matching(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.bindings.iter().filter(|b| filter.matches(b)).cloned().collect()
    }

    pub fn bindings(&self) -> impl Iterator<Item = &AclBinding> {
        self.bindings.iter()
    }
}

/// The broker's authorizer: off (every request allowed, the ACL APIs answer
/// SECURITY_DISABLED) or on, over the bindings of `kafgres.acls`.
#[derive(Debug, Default)]
pub struct Authorizer {
    enabled: AtomicBool,
    rules: RwLock<Arc<RuleSet>>,
    /// Serializes changes, so two concurrent CreateAcls cannot each apply
    /// their bindings to the same old set and lose one another's.
    changing: Mutex<()>,
}

impl Authorizer {
    pub fn new(enabled: bool, bindings: impl IntoIterator<Item = AclBinding>) -> Authorizer {
        Authorizer {
            enabled: AtomicBool::new(enabled),
            rules: RwLock::new(Arc::new(RuleSet::new(bindings))),
            changing: Mutex::new(()),
        }
    }

    /// No authorizer: everything is allowed.
    pub fn disabled() -> Authorizer {
        Authorizer::new(false, [])
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns the authorizer on or off (a settings reload).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    /// The bindings in force now.
    pub fn rules(&self) -> Arc<RuleSet> {
        match self.rules.read() {
            Ok(rules) => Arc::clone(&rules),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces every binding (loaded from the catalog).
    pub fn replace(&self, bindings: impl IntoIterator<Item = AclBinding>) {
        let _changing = self.changing.lock();
        self.install(RuleSet::new(bindings));
    }

    /// Adds bindings (already stored durably).
    pub fn add(&self, added: &[AclBinding]) {
        let _changing = self.changing.lock();
        let current = self.rules();
        self.install(RuleSet::new(current.bindings().cloned().chain(added.iter().cloned())));
    }

    /// Removes bindings (already removed durably).
    pub fn remove(&self, removed: &[AclBinding]) {
        let _changing = self.changing.lock();
        let current = self.rules();
        let removed: BTreeSet<&AclBinding> = removed.iter().collect();
        self.install(RuleSet::new(current.bindings().filter(|b| !removed.contains(b)).cloned()));
    }

    fn install(&self, rules: RuleSet) {
        let rules = Arc::new(rules);
        match self.rules.write() {
            Ok(mut slot) => *slot = rules,
            Err(poisoned) => *poisoned.into_inner() = rules,
        }
    }

    /// Whether `who`, connected from `from`, may do `operation` on the
    /// resource; always while the authorizer is off.
    pub fn authorize(
        &self,
        who: &Identity,
        from: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.enabled() || who.superuser || self.rules().authorize(who, from, operation, resource_type, name)
    }

    /// See [`RuleSet::authorize_any`]; always while the authorizer is off.
    pub fn authorize_any(
        &self,
        who: &Identity,
        from: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        !self.enabled() || self.rules().authorize_any(who, from, operation, resource_type)
    }

    /// KIP-430's authorized operations of a resource: the bit field of the
    /// supported operations `who` may do on it.
    pub fn authorized_operations(&self, who: &Identity, from: IpAddr, resource_type: ResourceType, name: &str) -> i32 {
        let rules = (self.enabled() && !who.superuser).then(|| self.rules());
        resource_type
            .supported_operations()
            .iter()
            .filter(|&&op| rules.as_ref().is_none_or(|r| r.authorize(who, from, op, resource_type, name)))
            .fold(0, |set, op| set | (1 << op.code()))
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));

    fn acl(
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: &str,
        principal: &str,
        host: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        }
    }

    fn topic_acl(pattern: PatternType, name: &str, principal: &str, op: Operation, perm: Permission) -> AclBinding {
        acl(ResourceType::Topic, pattern, name, principal, "*", op, perm)
    }

    fn user(role: &str, member_of: &[&str]) -> Identity {
        Identity {
            role: role.into(),
            member_of: member_of.iter().map(|r| r.to_string()).collect(),
            ..Identity::default()
        }
    }

    fn may(a: &Authorizer, who: &Identity, op: Operation, topic: &str) -> bool {
        a.authorize(who, LOCAL, op, ResourceType::Topic, topic)
    }

    #[test]
    fn nothing_is_allowed_without_an_allow() {
        let a = Authorizer::new(true, []);
        assert!(!may(&a, &user("alice", &[]), Operation::Read, "orders"));
        let superuser = Identity { superuser: true, ..user("postgres", &[]) };
        assert!(may(&a, &superuser, Operation::Delete, "orders"));
        a.set_enabled(false);
        assert!(may(&a, &user("alice", &[]), Operation::Delete, "orders"));
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns() {
        let a = Authorizer::new(
            true,
            [
                topic_acl(PatternType::Literal, "orders", "User:alice", Operation::Read, Permission::Allow),
                topic_acl(PatternType::Prefixed, "eu.", "User:alice", Operation::Write, Permission::Allow),
                topic_acl(PatternType::Literal, "*", "User:bob", Operation::Describe, Permission::Allow),
            ],
        );
        let alice = user("alice", &[]);
        assert!(may(&a, &alice, Operation::Read, "orders"));
        assert!(!may(&a, &alice, Operation::Read, "orders2"));
        assert!(may(&a, &alice, Operation::Write, "eu.orders"));
        assert!(!may(&a, &alice, Operation::Write, "eu"));
        assert!(!may(&a, &alice, Operation::Write, "us.orders"));
        assert!(may(&a, &user("bob", &[]), Operation::Describe, "anything"));
        assert!(!may(&a, &user("bob", &[]), Operation::Read, "anything"));
    }

    #[test]
    fn implied_operations_and_all() {
        let a = Authorizer::new(
            true,
            [
                topic_acl(PatternType::Literal, "t", "User:alice", Operation::Write, Permission::Allow),
                topic_acl(PatternType::Literal, "t", "User:bob", Operation::AlterConfigs, Permission::Allow),
                topic_acl(PatternType::Literal, "t", "User:carol", Operation::All, Permission::Allow),
            ],
        );
        assert!(may(&a, &user("alice", &[]), Operation::Describe, "t"));
        assert!(!may(&a, &user("alice", &[]), Operation::DescribeConfigs, "t"));
        assert!(may(&a, &user("bob", &[]), Operation::DescribeConfigs, "t"));
        assert!(!may(&a, &user("bob", &[]), Operation::Describe, "t"));
        assert!(may(&a, &user("carol", &[]), Operation::Delete, "t"));
    }

    #[test]
    fn deny_wins_and_applies_to_the_operation_or_all() {
        let a = Authorizer::new(
            true,
            [
                topic_acl(PatternType::Prefixed, "", "User:*", Operation::All, Permission::Allow),
                topic_acl(PatternType::Literal, "secret", "User:alice", Operation::Read, Permission::Deny),
                topic_acl(PatternType::Prefixed, "hr.", "User:staff", Operation::All, Permission::Deny),
            ],
        );
        let alice = user("alice", &[]);
        assert!(!may(&a, &alice, Operation::Read, "secret"));
        // A DENY of READ does not deny what READ would imply.
        assert!(may(&a, &alice, Operation::Describe, "secret"));
        assert!(may(&a, &alice, Operation::Read, "hr.pay"));
        assert!(!may(&a, &user("bob", &["staff"]), Operation::Describe, "hr.pay"));
    }

    #[test]
    fn group_roles_grant_to_their_members() {
        let a = Authorizer::new(
            true,
            [topic_acl(PatternType::Literal, "orders", "User:readers", Operation::Read, Permission::Allow)],
        );
        assert!(may(&a, &user("alice", &["readers"]), Operation::Read, "orders"));
        assert!(!may(&a, &user("readers2", &[]), Operation::Read, "orders"));
    }

    #[test]
    fn host_filters() {
        let a = Authorizer::new(
            true,
            [
                acl(
                    ResourceType::Topic,
                    PatternType::Literal,
                    "t",
                    "User:alice",
                    "127.0.0.1",
                    Operation::Read,
                    Permission::Allow,
                ),
                acl(
                    ResourceType::Topic,
                    PatternType::Literal,
                    "t",
                    "User:bob",
                    "not-an-ip",
                    Operation::Read,
                    Permission::Allow,
                ),
            ],
        );
        assert!(a.authorize(&user("alice", &[]), LOCAL, Operation::Read, ResourceType::Topic, "t"));
        assert!(!a.authorize(&user("alice", &[]), OTHER, Operation::Read, ResourceType::Topic, "t"));
        assert!(!a.authorize(&user("bob", &[]), LOCAL, Operation::Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn authorized_operations_follow_the_bindings() {
        let a = Authorizer::new(
            true,
            [topic_acl(PatternType::Literal, "t", "User:alice", Operation::Read, Permission::Allow)],
        );
        let ops = a.authorized_operations(&user("alice", &[]), LOCAL, ResourceType::Topic, "t");
        assert_eq!(ops, (1 << Operation::Read.code()) | (1 << Operation::Describe.code()));
        a.set_enabled(false);
        assert_eq!(a.authorized_operations(&user("alice", &[]), LOCAL, ResourceType::Topic, "t"), 3576);
        assert_eq!(a.authorized_operations(&user("alice", &[]), LOCAL, ResourceType::Group, "g"), 3400);
        assert_eq!(a.authorized_operations(&user("alice", &[]), LOCAL, ResourceType::Cluster, "kafka-cluster"), 8096);
    }

    #[test]
    fn by_resource_type() {
        let a = Authorizer::new(
            true,
            [topic_acl(PatternType::Prefixed, "app.", "User:alice", Operation::Write, Permission::Allow)],
        );
        assert!(a.authorize_any(&user("alice", &[]), LOCAL, Operation::Write, ResourceType::Topic));
        assert!(!a.authorize_any(&user("bob", &[]), LOCAL, Operation::Write, ResourceType::Topic));
        a.add(&[topic_acl(PatternType::Literal, "*", "User:alice", Operation::Write, Permission::Deny)]);
        assert!(!a.authorize_any(&user("alice", &[]), LOCAL, Operation::Write, ResourceType::Topic));
    }

    #[test]
    fn add_remove_and_replace() {
        let a = Authorizer::new(true, []);
        let b = topic_acl(PatternType::Literal, "t", "User:alice", Operation::Read, Permission::Allow);
        a.add(std::slice::from_ref(&b));
        a.add(std::slice::from_ref(&b));
        assert_eq!(a.rules().len(), 1);
        assert!(may(&a, &user("alice", &[]), Operation::Read, "t"));
        a.remove(std::slice::from_ref(&b));
        assert!(!may(&a, &user("alice", &[]), Operation::Read, "t"));
        a.replace([b]);
        assert!(may(&a, &user("alice", &[]), Operation::Read, "t"));
    }
}
