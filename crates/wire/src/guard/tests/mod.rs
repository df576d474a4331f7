//! Tests of the guard against kafka-protocol 0.18.0 itself.
//!
//! - `roundtrip_*` (one per API, generated from the list in `apis.rs`; every version,
//!   [`CASES_PER_VERSION`] random requests each, from the generators in `requests_*.rs`): the
//!   crate's encoder writes a random valid request; the guard must accept it and use every byte,
//!   and the crate's decoder must read it back to the same bytes. A wrong field, version range,
//!   nullability or flexible threshold in a table fails here. Each case then probes (see
//!   [`probe`]) a few mutated copies of the body and, at [`OFFSETS_PER_CASE`] random offsets, the
//!   strict prefix ending there, a huge count written there (followed by a few bytes) and four
//!   kinds of null written there; one case in eight does so at every offset of its body.
//! - `random_bytes_*`: arbitrary bytes for every API and version, probed the same way.
//! - `tagged.rs`: Fetch's known tagged fields sent at every flexible version, with payloads of
//!   every shape, probed the same way.
//! - `minimum_sizes.rs`: the smallest encoding the guard assumes for each struct is the size of
//!   the crate's encoding of its default value; every array filled with smallest elements is
//!   accepted, decoded, and allocates within [`AMPLIFICATION_MAX`] per body byte.
//! - `hostile*.rs`: hand-written bodies (from the protocol guide, not from the tables, written
//!   with `wire.rs`) with huge counts and lengths for every API, tagged-field corner cases,
//!   nullable structs, nulls and varints.
//!
//! A test-only global allocator (`alloc.rs`) checks that the guard never allocates, measures what
//! decoding allocates, and turns any allocation over 64 MiB during a measurement into an abort
//! rather than an out-of-memory machine.

mod alloc;
mod apis;
mod gen;
mod hostile;
mod hostile_admin;
mod hostile_txn;
mod minimum_sizes;
mod requests_acls;
mod requests_admin;
mod requests_cluster;
mod requests_consumer_groups;
mod requests_data;
mod requests_groups;
mod requests_quotas;
mod requests_replicas;
mod requests_share_groups;
mod requests_streams_groups;
mod requests_telemetry;
mod requests_tokens;
mod requests_topics;
mod requests_txn;
mod requests_users;
mod tagged;
mod wire;

use std::cell::Cell;
use std::fmt::Debug;
use std::ops::RangeInclusive;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestRunner};

use super::{check_request_body, schema, schemas, walk_request_body, GuardError};
use apis::decode_measured;

const CASES_PER_VERSION: u32 = 64;
/// Offsets of a valid body at which every case writes huge counts and nulls...
const OFFSETS_PER_CASE: usize = 8;
/// ... and the share of cases that write them at every offset instead.
const DEEP_CASE_PROBABILITY: f64 = 0.125;
const DEEP_BODY_BYTES_MAX: usize = 256;

/// Decoding a body the guard accepted may make no single allocation larger than this many times
/// the body length (plus [`ALLOCATION_SLACK_BYTES`]). The worst element type is about 40 (an
/// in-memory struct of ~120 bytes whose smallest encoding is 3 bytes).
const AMPLIFICATION_MAX: usize = 48;
const ALLOCATION_SLACK_BYTES: usize = 1024;
/// A refused decode also builds an `anyhow::Error`, with a backtrace when RUST_BACKTRACE is set.
const ERROR_ALLOCATION_BYTES_MAX: usize = 64 << 10;

fn config() -> Config {
    Config {
        cases: CASES_PER_VERSION,
        // Failing seeds go to mod.proptest-regressions next to this file, to be committed.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        source_file: Some(file!()),
        // ChaCha, the default, dominates the run time in unoptimised test builds.
        rng_algorithm: RngAlgorithm::XorShift,
        ..Config::default()
    }
}

fn encode<R: Encodable>(request: &R, version: i16) -> Result<Vec<u8>, TestCaseError> {
    let mut buf = BytesMut::new();
    request
        .encode(&mut buf, version)
        .map_err(|e| TestCaseError::fail(format!("kafka-protocol could not encode: {e:#}")))?;
    Ok(buf.to_vec())
}

fn allocation_bytes_max(body: &[u8]) -> usize {
    AMPLIFICATION_MAX * body.len() + ALLOCATION_SLACK_BYTES
}

/// Runs the guard on arbitrary bytes and checks that its verdict agrees with kafka-protocol's
/// decoder:
/// - the guard never allocates (so it cannot be the thing that aborts);
/// - accepted: the decoder succeeds, or fails only on invalid UTF-8 (which the guard does not
///   check), and makes no allocation beyond [`allocation_bytes_max`] (the test allocator aborts
///   the binary on any allocation over 64 MiB, so an absurd one cannot go unnoticed);
/// - refused for any reason other than an impossible count or an overlong varint: the decoder
///   refuses too, so the guard is never stricter than the crate. Bodies with an impossible count
///   are not decoded: that is the abort we guard against. An overlong varint is accepted by
///   kafka-protocol but refused by Kafka, so the guard may refuse it. With
///   [`Confirm::ExceptTruncated`], truncations are not confirmed either (used where the body was
///   cut on purpose: a refused decode is slow when RUST_BACKTRACE makes anyhow capture one).
fn probe(api_key: i16, version: i16, body: &[u8], confirm: Confirm) -> Result<Option<GuardError>, TestCaseError> {
    let (verdict, guard_allocations) = alloc::measure(|| check_request_body(api_key, version, body));
    prop_assert_eq!(guard_allocations.count, 0, "the guard allocated");
    match &verdict {
        Ok(()) => {
            let (decoded, allocations) = decode_measured(api_key, version, body);
            let mut allowed_bytes = allocation_bytes_max(body);
            if let Err(error) = &decoded {
                prop_assert!(
                    error.contains("utf-8"),
                    "guard accepted a body kafka-protocol refuses ({}): {:02x?}",
                    error,
                    body
                );
                allowed_bytes += ERROR_ALLOCATION_BYTES_MAX;
            }
            prop_assert!(
                allocations.largest_bytes <= allowed_bytes,
                "accepted {} bytes but decoding allocated {} at once: {:02x?}",
                body.len(),
                allocations.largest_bytes,
                body
            );
        }
        Err(GuardError::ArrayTooLong { .. } | GuardError::VarintTooLong { .. }) => {}
        Err(GuardError::Truncated { .. }) if confirm == Confirm::ExceptTruncated => {}
        Err(GuardError::UnknownApi { .. }) => {
            return Err(TestCaseError::fail("covered API reported unknown"));
        }
        Err(refusal) => {
            let (decoded, _) = decode_measured(api_key, version, body);
            prop_assert!(decoded.is_err(), "guard refused ({}) a body kafka-protocol accepts: {:02x?}", refusal, body);
        }
    }
    Ok(verdict.err())
}

/// Which refusals [`probe`] confirms with the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    All,
    ExceptTruncated,
}

/// A few bytes of a body overwritten.
fn mutations() -> impl Strategy<Value = Vec<(Index, u8)>> {
    vec((any::<Index>(), any::<u8>()), 1..=3)
}

/// `body` with `bytes` written at `offset` in place of `replaced` bytes; the rest of the body
/// follows, or only a few bytes of it if `cut`.
fn overwrite(body: &[u8], offset: usize, bytes: &[u8], replaced: usize, cut: bool) -> Vec<u8> {
    let resume = (offset + replaced).min(body.len());
    let end = if cut { (resume + 3).min(body.len()) } else { body.len() };
    [&body[..offset], bytes, &body[resume..end]].concat()
}

/// Huge counts, written at every offset of a valid body and followed by only a few bytes:
/// i32::MAX, and u32::MAX as an unsigned varint (a compact count of u32::MAX - 1).
const HUGE_COUNTS: [(&[u8], usize); 2] = [(&[0x7f, 0xff, 0xff, 0xff], 4), (&[0xff, 0xff, 0xff, 0xff, 0x0f], 1)];

/// Nulls and near-nulls, written at every offset of a valid body with the rest kept: they catch
/// a field whose nullability the tables get wrong (-1 as an i16 and an i32 length, compact null,
/// and -2).
const NULLS: [(&[u8], usize); 4] =
    [(&[0xff, 0xff], 2), (&[0xff, 0xff, 0xff, 0xff], 4), (&[0x00], 1), (&[0xff, 0xfe], 2)];

/// The property test for one API: see the module documentation.
fn roundtrip<R, S>(api_key: i16, versions: RangeInclusive<i16>, requests: impl Fn(i16) -> S)
where
    R: Encodable + Decodable + Debug,
    S: Strategy<Value = R>,
{
    assert_eq!(super::schema_versions(api_key), Some(versions.clone()));
    for version in versions {
        let huge_counts_refused = Cell::new(0usize);
        let deep_cases = Cell::new(0usize);
        let strategy = (
            requests(version),
            mutations(),
            vec(any::<Index>(), OFFSETS_PER_CASE),
            proptest::bool::weighted(DEEP_CASE_PROBABILITY),
        );
        let outcome = TestRunner::new(config()).run(&strategy, |(request, mutations, offsets, deep)| {
            let body = encode(&request, version)?;

            let (used, guard_allocations) = alloc::measure(|| walk_request_body(api_key, version, &body));
            prop_assert_eq!(guard_allocations.count, 0, "the guard allocated");
            prop_assert_eq!(used, Ok(body.len()), "guard on a valid body: {:02x?}", body);
            let mut input = Bytes::from(body.clone());
            let (decoded, allocations) = alloc::measure(|| R::decode(&mut input, version));
            let decoded = decoded.map_err(|e| TestCaseError::fail(format!("kafka-protocol refused: {e:#}")))?;
            prop_assert!(allocations.largest_bytes <= allocation_bytes_max(&body));
            prop_assert_eq!(encode(&decoded, version)?, body.clone(), "re-encoding differs");

            for (index, byte) in mutations {
                let mut mutated = body.clone();
                if !mutated.is_empty() {
                    let at = index.index(mutated.len());
                    mutated[at] = byte;
                }
                probe(api_key, version, &mutated, Confirm::All)?;
            }

            // Every offset in deep cases (of a small body: the cost is quadratic), a sample in
            // the others.
            let offsets: Vec<usize> = if deep && body.len() <= DEEP_BODY_BYTES_MAX {
                deep_cases.set(deep_cases.get() + 1);
                (0..body.len()).collect()
            } else if body.is_empty() {
                Vec::new()
            } else {
                offsets.iter().map(|i| i.index(body.len())).collect()
            };
            for offset in offsets {
                let verdict = probe(api_key, version, &body[..offset], Confirm::ExceptTruncated)?;
                prop_assert!(verdict.is_some(), "accepted a strict prefix of a valid body");
                for (huge, replaced) in HUGE_COUNTS {
                    let hostile = overwrite(&body, offset, huge, replaced, true);
                    if let Some(GuardError::ArrayTooLong { .. }) =
                        probe(api_key, version, &hostile, Confirm::ExceptTruncated)?
                    {
                        huge_counts_refused.set(huge_counts_refused.get() + 1);
                    }
                }
                for (null, replaced) in NULLS {
                    let nulled = overwrite(&body, offset, null, replaced, false);
                    probe(api_key, version, &nulled, Confirm::ExceptTruncated)?;
                }
            }
            Ok(())
        });
        if let Err(failure) = outcome {
            panic!("api key {api_key} v{version}: {failure}");
        }
        if deep_cases.get() > 0 && has_top_level_array(api_key, version) {
            assert!(
                huge_counts_refused.get() > 0,
                "api key {api_key} v{version}: no huge count was refused as ArrayTooLong"
            );
        }
    }
}

fn has_top_level_array(api_key: i16, version: i16) -> bool {
    let api = schemas::find(api_key).expect("covered");
    api.body.fields.iter().any(|f| {
        f.tag.is_none()
            && f.versions.contains(version)
            && matches!(f.kind, schema::Kind::Array(_) | schema::Kind::NullableArray(_))
    })
}

#[test]
fn random_bytes_never_panic_and_accepted_ones_decode_within_limits() {
    for api in schemas::APIS {
        for version in api.versions.min..=api.versions.max {
            let bodies = prop_oneof![
                vec(any::<u8>(), 0..48),
                // Mostly small values: lengths and counts that could almost fit.
                vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(0xff), any::<u8>()], 0..48),
            ];
            TestRunner::new(config())
                .run(&bodies, |body| probe(api.key, version, &body, Confirm::ExceptTruncated).map(drop))
                .unwrap_or_else(|failure| panic!("api key {} v{version}: {failure}", api.key));
        }
    }
}
