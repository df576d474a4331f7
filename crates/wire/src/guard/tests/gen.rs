//! Value generators shared by the request generators.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::protocol::{Decodable, StrBytes};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

/// Up to this many elements in every generated array (so arrays nest up to 4 x 4 deep).
pub(super) const LIST_LEN_MAX: usize = 4;

/// Short text: mostly ASCII name characters, sometimes any Unicode scalar (multi-byte lengths).
/// (Not a regex strategy: compiling one per strategy dominated the run time.)
pub(super) fn text() -> impl Strategy<Value = StrBytes> {
    const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789._-";
    let name_char = proptest::sample::select(NAME_CHARS).prop_map(char::from);
    vec(prop_oneof![8 => name_char, 1 => any::<char>()], 0..10)
        .prop_map(|chars| StrBytes::from_string(chars.into_iter().collect()))
}

/// Text or null.
pub(super) fn text_or_null() -> impl Strategy<Value = Option<StrBytes>> {
    proptest::option::of(text())
}

/// A name in one of kafka-protocol's newtypes (`TopicName`, `GroupId`, `TransactionalId`).
pub(super) fn name<T: From<StrBytes> + std::fmt::Debug>() -> impl Strategy<Value = T> {
    text().prop_map(T::from)
}

pub(super) fn name_or_null<T: From<StrBytes> + std::fmt::Debug>() -> impl Strategy<Value = Option<T>> {
    proptest::option::of(name::<T>())
}

pub(super) fn blob() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

pub(super) fn blob_or_null() -> impl Strategy<Value = Option<Bytes>> {
    proptest::option::of(blob())
}

/// 0 to [`LIST_LEN_MAX`] elements.
pub(super) fn list<S: Strategy>(element: S) -> impl Strategy<Value = Vec<S::Value>> {
    vec(element, 0..=LIST_LEN_MAX)
}

pub(super) fn list_or_null<S: Strategy>(element: S) -> impl Strategy<Value = Option<Vec<S::Value>>> {
    proptest::option::of(list(element))
}

/// Sixteen random bytes, to be turned into a UUID with [`uuid`].
pub(super) fn uuid_bytes() -> impl Strategy<Value = [u8; 16]> {
    any::<[u8; 16]>()
}

/// A struct holding the UUID made of `bytes` in its `topic_id`: kafka-protocol does not re-export
/// the `uuid` crate, this crate does not depend on it and the crate's `Decoder` trait is private,
/// so a UUID is obtained by decoding a struct that has one (`uuid(b).topic_id`).
pub(super) fn uuid(bytes: [u8; 16]) -> MetadataRequestTopic {
    // MetadataRequestTopic v10: topic_id, name (compact, null), no tagged fields.
    let encoded = [&bytes[..], &[0, 0]].concat();
    MetadataRequestTopic::decode(&mut &encoded[..], 10).expect("a valid MetadataRequestTopic")
}

/// Unknown tagged fields for a flexible version (none otherwise): tags from 100 up, so they
/// never collide with a known tag.
pub(super) fn unknown_tags(flexible: bool) -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    let len_max = if flexible { 3 } else { 0 };
    btree_map(100i32..140, blob(), 0..=len_max)
}
