//! Pre-decode guard for Kafka request bodies.
//!
//! `kafka-protocol` 0.18.0 sizes vectors from counts read off the wire before it knows the elements
//! exist: its array decoders call `Vec::with_capacity(count)`, and its `Vec<u8>` decoders
//! `vec![0; length]`. A ten-byte frame can ask for hundreds of gigabytes and abort the process (in
//! the Postgres backend that hosts us, the postmaster then restarts the whole cluster). We cannot
//! patch the crate, so every request body is walked here first, with our own description of each
//! API, and refused if it is malformed or if a count cannot possibly be honoured by the bytes left.
//!
//! # The rule
//! A count of `n` elements whose smallest encoding is `m` bytes is impossible when
//! `n > remaining_bytes / m`; it is refused before anything else is read. A string or bytes length
//! must fit in the remaining bytes. Arrays nested in arrays are walked element by element.
//!
//! # What `Ok(())` promises
//! `kafka-protocol` can decode the body without any single allocation larger than a small multiple
//! of the body length: every `Vec` it reserves is at most `remaining_bytes / m` elements. The
//! multiple is the in-memory size of an element over its smallest wire size; it is largest for
//! compact arrays of small structs (e.g. LeaveGroup v4 members, about 40) and is measured by the
//! tests. Frame limits must be set with that factor in mind. `Ok(())` does not promise that decoding
//! succeeds: strings are not checked for UTF-8. Apart from that, the tests check that the guard
//! and the decoder agree both ways.
//!
//! # Unknown APIs
//! An API or version without a schema here is [`GuardError::UnknownApi`]: callers answer it as
//! unsupported and never decode it. [`schema_versions`] says what is covered, so the served-API table
//! can check that it serves nothing the guard cannot walk.
//!
//! The guard never allocates.

mod schema;
mod schemas;
mod walk;

#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::RangeInclusive;

use schema::{ApiSchema, Encoding};

/// Checks a request body (the bytes after the request header) of `api_key` at `api_version`.
/// `Ok(())` means kafka-protocol can decode it without any allocation larger than
/// a small multiple of the body length.
///
/// # Errors
/// [`GuardError::UnknownApi`] if there is no schema for the API and version (answer as
/// unsupported); any other variant if the body is malformed or asks for more than it holds.
pub fn check_request_body(api_key: i16, api_version: i16, body: &[u8]) -> Result<(), GuardError> {
    walk_request_body(api_key, api_version, body).map(|_| ())
}

/// The request versions of `api_key` the guard has a schema for, or `None` if it has none.
pub fn schema_versions(api_key: i16) -> Option<RangeInclusive<i16>> {
    schemas::find(api_key).map(|api| api.versions.min..=api.versions.max)
}

/// Walks the body; returns how many bytes of it the request used (the tests check that valid
/// encodings are used exactly).
fn walk_request_body(api_key: i16, api_version: i16, body: &[u8]) -> Result<usize, GuardError> {
    let api = schemas::find(api_key)
        .filter(|api| api.versions.contains(api_version))
        .ok_or(GuardError::UnknownApi { api_key, api_version })?;
    walk::walk_body(body, api.body, encoding(api, api_version))
}

fn encoding(api: &ApiSchema, version: i16) -> Encoding {
    Encoding { version, flexible: version >= api.flexible_since }
}

/// Where in the schema a check failed: the struct and its field, as named in Kafka's message
/// definitions (`FetchTopic.partitions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPath {
    pub structure: &'static str,
    pub field: &'static str,
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.structure, self.field)
    }
}

/// Why a request body was refused. `offset` is where the offending length, count or value starts,
/// in bytes from the start of the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// No schema for this API or version: answer as unsupported, never decode.
    #[error("no request schema for api key {api_key} version {api_version}")]
    UnknownApi { api_key: i16, api_version: i16 },

    /// An array (or tagged-field section) count that the remaining bytes cannot hold.
    #[error(
        "{field} at byte {offset}: {count} elements of at least {element_bytes_min} bytes \
         cannot fit in the {remaining_bytes} bytes left"
    )]
    ArrayTooLong { field: FieldPath, offset: usize, count: u64, element_bytes_min: usize, remaining_bytes: usize },

    /// The body ends before a value, or a string/bytes length runs past its end.
    #[error("{field} at byte {offset}: needs {needed_bytes} bytes, {remaining_bytes} left")]
    Truncated { field: FieldPath, offset: usize, needed_bytes: u64, remaining_bytes: usize },

    /// A length or count below -1.
    #[error("{field} at byte {offset}: negative length {length}")]
    NegativeLength { field: FieldPath, offset: usize, length: i32 },

    /// Null (-1, or compact 0) where the field cannot be null.
    #[error("{field} at byte {offset}: null in a field that cannot be null")]
    UnexpectedNull { field: FieldPath, offset: usize },

    /// An unsigned varint whose fifth byte has its continuation bit set.
    #[error("{field} at byte {offset}: unsigned varint longer than 5 bytes")]
    VarintTooLong { field: FieldPath, offset: usize },

    /// A known tagged field sent at a version where it does not exist (kafka-protocol rejects it).
    #[error("{field} at byte {offset}: tag {tag} is not valid at version {version}")]
    TagNotValidForVersion { field: FieldPath, offset: usize, tag: u32, version: i16 },
}
