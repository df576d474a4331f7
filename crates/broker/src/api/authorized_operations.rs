//! Authorized operations (KIP-430) as Kafka answers them without an
//! authorizer: every operation the resource type supports
//! (`AclEntry.supportedOperations`), as a bit field of `AclOperation` codes.
//! Kafgres has no ACLs, so every client may do everything a resource allows.

/// Kafka's messages for its authorization errors (`Errors.*.message()`),
/// where an answer carries one.
pub const TOPIC_REFUSED: &str = "Topic authorization failed.";
pub const CLUSTER_REFUSED: &str = "Cluster authorization failed.";
pub const GROUP_REFUSED: &str = "Group authorization failed.";
pub const TRANSACTIONAL_ID_REFUSED: &str = "Transactional Id authorization failed.";

/// "Not requested" in Kafka's encoding.
pub const OMITTED: i32 = i32::MIN;

// `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut set = 0i32;
    let mut i = 0;
    while i < operations.len() {
        set |= 1 << operations[i];
        i += 1;
    }
    set
}

pub const TOPIC: i32 = bits(&[READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
pub const GROUP: i32 = bits(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
pub const CLUSTER: i32 =
    bits(&[CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE]);

/// `set` when the request asked for it, else [`OMITTED`].
pub fn if_asked(asked: bool, set: i32) -> i32 {
    if asked {
        set
    } else {
        OMITTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sets_are_kafkas() {
        // What Apache Kafka 4.1 without an authorizer answers.
        assert_eq!((TOPIC, GROUP, CLUSTER), (3576, 3400, 8096));
    }
}
