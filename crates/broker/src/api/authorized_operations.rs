//! KIP-430's authorized operations in answers, and Kafka's messages for its
//! authorization errors. The sets themselves come from the authorizer
//! (`crate::acl::Authorizer::authorized_operations`, through
//! `RequestContext::authorized_operations`): every operation a resource
//! supports while no authorizer is on, as Kafka answers then.

/// "Not requested" in Kafka's encoding.
pub const OMITTED: i32 = i32::MIN;

/// Kafka's messages for its authorization errors (`Errors.*.message()`),
/// where an answer carries one.
pub const TOPIC_REFUSED: &str = "Topic authorization failed.";
pub const CLUSTER_REFUSED: &str = "Cluster authorization failed.";
pub const GROUP_REFUSED: &str = "Group authorization failed.";
pub const TRANSACTIONAL_ID_REFUSED: &str = "Transactional Id authorization failed.";
