//! Kafka 4.4's versions of the messages Kafgres serves, where they go beyond
//! `kafka-protocol` 0.18 (the crate's last release, which stops at Kafka 4.1's
//! versions). Each type implements the crate's traits (`Encodable`,
//! `Decodable`, `Message`, `HeaderVersion`, `Request`) so handlers and tests
//! use it as they use the crate's own; for the versions the crate knows, it
//! delegates to the crate's generated code, and it writes by hand only the new
//! version's layout, from Kafka 4.4.0's message JSON (byte-exact fixtures
//! serialized by Kafka's own classes are in the tests). A version whose layout
//! is the previous one's (Kafka raised it for a change of meaning) is read and
//! written as that one. New fields nested in a message are added at the level
//! they appear, next to the crate's struct for that level.

mod kit;

pub mod api_versions;
pub mod delete_groups;
pub mod describe_log_dirs;
pub mod describe_share_group_offsets;
pub mod list_offsets;
pub mod offset_commit;
pub mod offset_fetch;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod streams_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

pub use api_versions::{ApiVersionsRequest, ApiVersionsResponse};
pub use delete_groups::{DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse};
pub use describe_log_dirs::{DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeLogDirsResult};
pub use describe_share_group_offsets::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition, DescribeShareGroupOffsetsResponseTopic,
};
pub use list_offsets::{ListOffsetsRequest, ListOffsetsResponse};
pub use offset_commit::{OffsetCommitRequest, OffsetCommitResponse};
pub use offset_fetch::OffsetFetchRequest;
pub use share_acknowledge::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
pub use share_fetch::{ShareFetchRequest, ShareFetchResponse};
pub use txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestTopic, TxnOffsetCommitResponse, TxnOffsetCommitResponseTopic,
};
pub use write_txn_markers::{WritableTxnMarker, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

#[cfg(test)]
mod tests;
