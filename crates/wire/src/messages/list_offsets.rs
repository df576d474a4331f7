//! ListOffsets (key 2) to v11. v11 (Kafka 4.4, KIP-1023) only lets a client ask
//! for timestamp -6, the earliest offset not yet uploaded to tiered storage:
//! its request and response are laid out as v10's.

use kafka_protocol::messages::{self as kp, ApiKey};

use super::kit::{request, same_layout};

same_layout!(
    /// A ListOffsets request, v1-v11.
    ListOffsetsRequest(kp::ListOffsetsRequest), max 11, as 10
);
same_layout!(
    /// A ListOffsets response, v1-v11.
    ListOffsetsResponse(kp::ListOffsetsResponse), max 11, as 10
);
request!(ListOffsetsRequest => ListOffsetsResponse, key ApiKey::ListOffsets);
