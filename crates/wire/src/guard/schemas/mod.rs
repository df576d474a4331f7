//! The request schemas, one table per API, written by hand from the `kafka-protocol` 0.18.0
//! decoders (`src/messages/*_request.rs`) and Kafka's message JSON. Each table keeps Kafka's field
//! names and says in which versions each field is on the wire; `versions` is exactly what
//! `kafka-protocol` 0.18.0 can decode for that API.
//!
//! Adding an API: write its structs in the file for its family and add it to [`APIS`]; then, in
//! the tests, a request generator (`tests/requests_*.rs`), a `roundtrip_*` test and a decoder arm
//! (`tests/mod.rs`), its structs in `tests/minimum_sizes.rs`, and a hand-written huge count in
//! `tests/hostile.rs`. The property tests compare the table with the real encoder and decoder at
//! every version; they fail while the roundtrip test, decoder arm or minimum-size entries are
//! missing.

pub(crate) mod admin;
pub(crate) mod data;
pub(crate) mod groups;

use super::schema::ApiSchema;

/// Every API the guard can walk, by API key.
pub(crate) static APIS: &[&ApiSchema] = &[
    &data::PRODUCE,
    &data::FETCH,
    &data::LIST_OFFSETS,
    &data::METADATA,
    &groups::OFFSET_COMMIT,
    &groups::OFFSET_FETCH,
    &admin::FIND_COORDINATOR,
    &groups::JOIN_GROUP,
    &groups::HEARTBEAT,
    &groups::LEAVE_GROUP,
    &groups::SYNC_GROUP,
    &groups::DESCRIBE_GROUPS,
    &groups::LIST_GROUPS,
    &admin::API_VERSIONS,
    &admin::CREATE_TOPICS,
    &admin::DELETE_TOPICS,
    &admin::INIT_PRODUCER_ID,
    &admin::DESCRIBE_CONFIGS,
];

pub(crate) fn find(api_key: i16) -> Option<&'static ApiSchema> {
    APIS.iter().copied().find(|api| api.key == api_key)
}
