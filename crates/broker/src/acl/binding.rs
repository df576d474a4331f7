//! Kafka's ACL vocabulary: resource types, pattern types, operations and
//! permissions with their wire codes and the names `kafka-acls.sh` and the
//! `kafgres.acls` table use, and one binding (Kafka's `AclBinding`).

use std::fmt;

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal => $text:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($variant),*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// From its wire code; `None` for a code Kafka does not define.
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),*
                }
            }

            /// Its name as Kafka prints it (and as `kafgres.acls` stores it).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }

            /// From its name, in any case (Kafka's `fromString`).
            pub fn from_name(name: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(name))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
    }
}

wire_enum! {
    /// Kafka's `PatternType`. Bindings are LITERAL or PREFIXED; ANY and
    /// MATCH exist only in filters.
    PatternType {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Match = 2 => "MATCH",
        Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED",
    }
}

wire_enum! {
    /// Kafka's `AclOperation`.
    Operation {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

wire_enum! {
    /// Kafka's `AclPermissionType`.
    Permission {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

impl Operation {
    /// The operations whose ALLOW also allows this one (Kafka's implied
    /// operations): DESCRIBE comes with READ, WRITE, DELETE and ALTER;
    /// DESCRIBE_CONFIGS with ALTER_CONFIGS. ALL allows everything.
    pub fn allowed_by(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            Describe => &[Describe, Read, Write, Delete, Alter, All],
            DescribeConfigs => &[DescribeConfigs, AlterConfigs, All],
            Read => &[Read, All],
            Write => &[Write, All],
            Create => &[Create, All],
            Delete => &[Delete, All],
            Alter => &[Alter, All],
            ClusterAction => &[ClusterAction, All],
            AlterConfigs => &[AlterConfigs, All],
            IdempotentWrite => &[IdempotentWrite, All],
            CreateTokens => &[CreateTokens, All],
            DescribeTokens => &[DescribeTokens, All],
            TwoPhaseCommit => &[TwoPhaseCommit, All],
            All => &[All],
            Any | Unknown => &[],
        }
    }
}

impl ResourceType {
    /// The operations a resource of this type supports (Kafka's
    /// `AclEntry.supportedOperations`), which authorized operations (KIP-430)
    /// are drawn from.
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => {
                &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe]
            }
            ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any | ResourceType::Unknown => &[],
        }
    }
}

/// The name of the one cluster resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A resource name or host that matches every one.
pub const WILDCARD: &str = "*";
/// The principal of a connection that did not authenticate (Kafka's
/// `KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// One ACL: `permission` for `principal` from `host` to do `operation` on
/// the resources `pattern_type`/`resource_name` selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:<role>`, or `User:*` for every principal.
    pub principal: String,
    /// An IP address as the client connects from, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why a binding cannot be created: INVALID_REQUEST with this message, as
/// Kafka's `AclControlManager.validateNewAcl` refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBinding(pub String);

impl AclBinding {
    /// Checks what Kafka checks before storing a binding.
    pub fn validate(&self) -> Result<(), InvalidBinding> {
        let invalid = |m: &str| Err(InvalidBinding(m.to_owned()));
        match self.resource_type {
            ResourceType::Any | ResourceType::Unknown => return invalid("Invalid resourceType"),
            _ => {}
        }
        match self.pattern_type {
            PatternType::Literal | PatternType::Prefixed => {}
            _ => return invalid("Invalid patternType"),
        }
        match self.operation {
            Operation::Any | Operation::Unknown => return invalid("Invalid operation"),
            _ => {}
        }
        match self.permission {
            Permission::Allow | Permission::Deny => {}
            _ => return invalid("Invalid permissionType"),
        }
        if self.resource_name.is_empty() {
            return invalid("Resource name should not be empty");
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return invalid("The only valid name for the CLUSTER resource is kafka-cluster");
        }
        if self.pattern_type == PatternType::Prefixed && self.resource_name == WILDCARD {
            return invalid("Invalid resource pattern: a PREFIXED pattern may not be the wildcard");
        }
        if self.host.is_empty() {
            return invalid("Invalid host: an empty host; use * for every host");
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                if kind != "User" {
                    return invalid(&format!(
                        "Unsupported principal type {kind:?}: Kafgres principals are Postgres roles, User:<role>"
                    ));
                }
                Ok(())
            }
            _ => invalid(&format!("Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)", self.principal)),
        }
    }

    /// The role a `User:` principal names (`*` for every principal).
    pub fn role(&self) -> &str {
        self.principal.split_once(':').map(|(_, name)| name).unwrap_or("")
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={}) on {}:{}:{}",
            self.principal,
            self.host,
            self.operation,
            self.permission,
            self.resource_type,
            self.pattern_type,
            self.resource_name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn binding(principal: &str, operation: Operation, permission: Permission) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "orders".into(),
            pattern_type: PatternType::Literal,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission,
        }
    }

    #[test]
    fn codes_and_names_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_code(op.code()), Some(*op));
            assert_eq!(Operation::from_name(&op.name().to_lowercase()), Some(*op));
        }
        assert_eq!(Operation::from_code(16), None);
        assert_eq!(ResourceType::from_name("transactional_id"), Some(ResourceType::TransactionalId));
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        let ok = binding("User:alice", Operation::Read, Permission::Allow);
        assert_eq!(ok.validate(), Ok(()));
        let mut b = ok.clone();
        b.operation = Operation::Any;
        assert!(b.validate().is_err());
        let mut b = ok.clone();
        b.principal = "alice".into();
        assert!(b.validate().unwrap_err().0.contains("Could not parse principal"));
        let mut b = ok.clone();
        b.principal = "Group:admins".into();
        assert!(b.validate().is_err());
        let mut b = ok.clone();
        b.resource_type = ResourceType::Cluster;
        assert!(b.validate().is_err());
        b.resource_name = CLUSTER_NAME.into();
        assert_eq!(b.validate(), Ok(()));
        let mut b = ok;
        b.pattern_type = PatternType::Match;
        assert!(b.validate().is_err());
    }
}
