//! Known tagged fields in odd places. Fetch is the only covered API whose decoder reads tagged
//! fields structurally (ClusterId and ReplicaState on the request, ReplicaDirectoryId and
//! HighWatermark on each partition); it ignores their size prefix and refuses a known tag at a
//! version that lacks the field. Random Fetch requests get extra raw tags 0-2, with payloads that
//! are valid encodings of one of those fields (or random bytes), at both levels, and every version
//! is probed: the guard must agree with the decoder (see [`probe`]).
//!
//! The encoder will not write an unknown tag that collides with a known one (it writes unknown
//! tags from 2 up), so the stray tags are encoded under a marker tag number and renumbered in the
//! bytes afterwards.

use bytes::Bytes;
use kafka_protocol::messages::FetchRequest;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use super::gen::text;
use super::{config, encode, probe, requests_data, Confirm};

/// A raw tagged field: a tag that some Fetch struct knows, and a payload.
fn stray_tag() -> impl Strategy<Value = (i32, Bytes)> {
    let payload = prop_oneof![
        // ReplicaDirectoryId: a UUID.
        any::<[u8; 16]>().prop_map(|b| b.to_vec()),
        // HighWatermark: an i64.
        any::<i64>().prop_map(|v| v.to_be_bytes().to_vec()),
        // ClusterId: a compact nullable string.
        proptest::option::of(text()).prop_map(|s| match s {
            None => vec![0],
            Some(s) => [&[u8::try_from(s.len() + 1).expect("short")][..], s.as_bytes()].concat(),
        }),
        // ReplicaState: replica_id, replica_epoch, no tagged fields.
        (any::<i32>(), any::<i64>())
            .prop_map(|(id, epoch)| [&id.to_be_bytes()[..], &epoch.to_be_bytes(), &[0]].concat()),
        // Any struct whose fields are all absent at this version: just an empty tag section.
        Just(vec![0]),
        vec(any::<u8>(), 0..20),
    ];
    (0i32..=2, payload.prop_map(Bytes::from))
}

/// Stray tag `t` is encoded as tag `MARKER_TAG + t`: a four-byte varint that random payloads
/// will not contain by accident.
const MARKER_TAG: i32 = 0x0ABC_DE00;

fn marker_varint(tag: i32) -> [u8; 4] {
    let v = u32::try_from(MARKER_TAG + tag).expect("positive");
    [(v as u8) | 0x80, ((v >> 7) as u8) | 0x80, ((v >> 14) as u8) | 0x80, (v >> 21) as u8]
}

/// Rewrites every marker tag as the stray tag it stands for (a one-byte varint).
fn renumber_markers(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match (0..=2).find(|&t| body[i..].starts_with(&marker_varint(t))) {
            Some(t) => {
                out.push(u8::try_from(t).expect("small"));
                i += 4;
            }
            None => {
                out.push(body[i]);
                i += 1;
            }
        }
    }
    out
}

fn fetch_with_stray_tags(version: i16) -> impl Strategy<Value = FetchRequest> {
    (requests_data::fetch(version), vec(stray_tag(), 0..=2), vec(stray_tag(), 0..=2)).prop_map(
        |(mut request, on_request, on_partitions)| {
            let marked = |(t, payload): &(i32, Bytes)| (MARKER_TAG + t, payload.clone());
            request.unknown_tagged_fields.extend(on_request.iter().map(marked));
            for topic in &mut request.topics {
                for partition in &mut topic.partitions {
                    partition.unknown_tagged_fields.extend(on_partitions.iter().map(marked));
                }
            }
            request
        },
    )
}

#[test]
fn fetch_known_tags_at_every_flexible_version() {
    for version in 12..=18 {
        TestRunner::new(config())
            .run(&fetch_with_stray_tags(version), |request| {
                let body = renumber_markers(&encode(&request, version)?);
                probe(1, version, &body, Confirm::All).map(drop)
            })
            .unwrap_or_else(|failure| panic!("Fetch v{version}: {failure}"));
    }
}
