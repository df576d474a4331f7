//! Kafka's `AclBindingFilter`: what DescribeAcls and DeleteAcls select.

use super::binding::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};

/// A filter over bindings; `None` matches any value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    /// A filter that matches every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// Why Kafka refuses the filter (INVALID_REQUEST), if it does: a field
    /// that is UNKNOWN can match nothing definite.
    pub fn unknown_field(&self) -> Option<&'static str> {
        if self.resource_type == ResourceType::Unknown {
            Some("Resource type is UNKNOWN.")
        } else if self.pattern_type == PatternType::Unknown {
            Some("Resource pattern type is UNKNOWN.")
        } else if self.operation == Operation::Unknown {
            Some("Operation is UNKNOWN.")
        } else if self.permission == Permission::Unknown {
            Some("Permission type is UNKNOWN.")
        } else {
            None
        }
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.matches_pattern(b) && self.matches_entry(b)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != b.resource_type {
            return false;
        }
        let exact_type = self.pattern_type == b.pattern_type;
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match) && !exact_type {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || exact_type {
            return *name == b.resource_name;
        }
        // MATCH: the bindings that apply to a resource of this name.
        match b.pattern_type {
            PatternType::Literal => *name == b.resource_name || b.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&b.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, b: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && (self.operation == Operation::Any || self.operation == b.operation)
            && (self.permission == Permission::Any || self.permission == b.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(pattern_type: PatternType, name: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn match_selects_the_bindings_that_apply_to_a_name() {
        let filter = AclFilter {
            resource_type: ResourceType::Topic,
            resource_name: Some("orders.eu".into()),
            pattern_type: PatternType::Match,
            ..AclFilter::any()
        };
        assert!(filter.matches(&on(PatternType::Literal, "orders.eu")));
        assert!(filter.matches(&on(PatternType::Literal, "*")));
        assert!(filter.matches(&on(PatternType::Prefixed, "orders.")));
        assert!(!filter.matches(&on(PatternType::Prefixed, "orders.us")));
        assert!(!filter.matches(&on(PatternType::Literal, "orders")));
    }

    #[test]
    fn any_and_exact_pattern_types_compare_names() {
        let any = AclFilter { resource_name: Some("orders.".into()), ..AclFilter::any() };
        assert!(any.matches(&on(PatternType::Prefixed, "orders.")));
        assert!(!any.matches(&on(PatternType::Literal, "*")));
        let literal = AclFilter { pattern_type: PatternType::Literal, ..AclFilter::any() };
        assert!(!literal.matches(&on(PatternType::Prefixed, "orders.")));
        let principal = AclFilter { principal: Some("User:bob".into()), ..AclFilter::any() };
        assert!(!principal.matches(&on(PatternType::Literal, "orders")));
        assert!(AclFilter::any().matches(&on(PatternType::Literal, "orders")));
    }
}
