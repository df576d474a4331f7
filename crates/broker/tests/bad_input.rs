//! Hostile and broken input: each bad connection is closed, nothing panics
//! and nothing allocates from an untrusted length, and the broker keeps
//! answering. This file holds one test so the panic counter below sees only
//! the broker's panics (tokio would otherwise swallow a panicking connection
//! task and the broker would look healthy).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{
    batch, create_topic, fetch_request, metadata_request, produce_request, raw_frame, records, request_frame, Client,
    TestBroker, TopicRef, IO_TIMEOUT,
};
use kafgres_broker::api::SERVED_APIS;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static PANICS: AtomicUsize = AtomicUsize::new(0);

const FUZZ_SEED: u64 = 0x6b61_6667_7265_7321;
const FUZZ_FRAMES: usize = 200;

/// A frame of `body` under a well-formed header of `key`/`version`.
fn frame_with_body(key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let header_version = ApiKey::try_from(key).map(|k| k.request_header_version(version)).unwrap_or(1);
    raw_frame(key, version, 9, header_version, body)
}

/// Valid requests the fuzzer mutates (none can long-poll: the fetch names a
/// topic with data, so it answers at once).
fn seeds() -> Vec<Vec<u8>> {
    vec![
        request_frame(ApiKey::Metadata, 1, 1, &metadata_request(Some(&["fuzzed"]), true)),
        request_frame(ApiKey::Metadata, 12, 1, &metadata_request(Some(&["fuzzed", "other"]), false)),
        request_frame(ApiKey::Produce, 9, 1, &produce_request("fuzzed", 0, -1, batch(&records("z", 2)))),
        request_frame(ApiKey::Produce, 7, 1, &produce_request("fuzzed", 0, 1, batch(&records("z", 1)))),
        request_frame(ApiKey::Fetch, 11, 1, &fetch_request(TopicRef::Name("fuzzed"), 0, 0, 1 << 20, 0, 1)),
        request_frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default()),
        request_frame(
            ApiKey::CreateTopics,
            7,
            1,
            &CreateTopicsRequest::default().with_topics(vec![common::creatable("fz", 1, 1)]),
        ),
    ]
}

/// Sends `frame` on a fresh connection, half-closes, and waits for the broker
/// to finish with the connection (answer or not, then close).
async fn send_and_drain(addr: std::net::SocketAddr, frame: &[u8]) {
    let mut client = Client::connect(addr).await;
    client.send_raw(frame).await;
    let _ = client.stream.shutdown().await; // half-close: our end is done
    let mut sink = Vec::new();
    let drained = tokio::time::timeout(IO_TIMEOUT, client.stream.read_to_end(&mut sink)).await;
    assert!(drained.is_ok(), "the broker neither answered nor closed for frame {frame:02x?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_keeps_the_broker_up() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let broker = TestBroker::start().await;
    let addr = broker.addr();
    let mut setup = broker.client().await;
    create_topic(&mut setup, "fuzzed", 1).await;
    drop(setup);

    // A length prefix of 2 GiB - 1: refused before any allocation, connection closed.
    let mut huge = Client::connect(addr).await;
    huge.send_raw(&0x7fff_ffffi32.to_be_bytes()).await;
    huge.expect_closed().await;

    // A negative length and one shorter than a request header.
    for prefix in [-1i32, 3] {
        let mut c = Client::connect(addr).await;
        c.send_raw(&prefix.to_be_bytes()).await;
        c.expect_closed().await;
    }

    // Metadata v1 whose topic array claims 0x7fffffff entries in 4 bytes.
    let mut array = Client::connect(addr).await;
    array.send_raw(&frame_with_body(ApiKey::Metadata as i16, 1, &0x7fff_ffffi32.to_be_bytes())).await;
    array.expect_closed().await;

    // A frame cut short: 100 bytes announced, 20 sent, then the client's end closed.
    let mut short = Client::connect(addr).await;
    let mut partial = 100i32.to_be_bytes().to_vec();
    partial.extend_from_slice(&request_frame(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default())[4..]);
    partial.resize(24, 0);
    short.send_raw(&partial).await;
    short.stream.shutdown().await.expect("half-close");
    short.expect_closed().await;

    // A complete frame whose Metadata body is truncated mid-string.
    let whole = request_frame(ApiKey::Metadata, 12, 1, &metadata_request(Some(&["a-long-topic-name"]), true));
    let mut truncated_body = Client::connect(addr).await;
    let cut = &whole[4..whole.len() - 8];
    let mut frame = (cut.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(cut);
    truncated_body.send_raw(&frame).await;
    truncated_body.expect_closed().await;

    // An API key nobody serves, and a served API at an unserved version.
    for (key, version) in [(9999i16, 0i16), (ApiKey::Produce as i16, 2), (ApiKey::Fetch as i16, 99)] {
        let mut c = Client::connect(addr).await;
        c.send_raw(&frame_with_body(key, version, &[0u8; 16])).await;
        c.expect_closed().await;
    }

    // 200 seeded random frames, each on a fresh connection: a third random
    // bytes, a third random bodies under served headers, a third valid
    // requests with a few bytes flipped.
    let mut rng = Rng(FUZZ_SEED);
    let seeds = seeds();
    for _ in 0..FUZZ_FRAMES {
        let frame = match rng.below(3) {
            0 => {
                let len = 8 + rng.below(120) as usize;
                let mut f = (len as i32).to_be_bytes().to_vec();
                f.extend(rng.bytes(len));
                f
            }
            1 => {
                let api = SERVED_APIS[rng.below(SERVED_APIS.len() as u64) as usize];
                let v = api.versions;
                let version = v.accepted_min + rng.below((v.max - v.accepted_min + 1) as u64) as i16;
                let body_len = rng.below(200) as usize;
                frame_with_body(api.key as i16, version, &rng.bytes(body_len))
            }
            _ => {
                let mut f = seeds[rng.below(seeds.len() as u64) as usize].to_vec();
                for _ in 0..1 + rng.below(4) {
                    // Keep the length prefix and api key, so the frame reaches the decoders.
                    let at = 6 + rng.below((f.len() - 6) as u64) as usize;
                    f[at] = rng.next_u64() as u8;
                }
                f
            }
        };
        send_and_drain(addr, &frame).await;
    }

    // After all of that, a fresh connection is served.
    let mut fresh = Client::connect(addr).await;
    let versions = fresh
        .call(
            3,
            &ApiVersionsRequest::default()
                .with_client_software_name("kafgres-tests".into())
                .with_client_software_version("1".into()),
        )
        .await;
    assert_eq!(versions.error_code, 0);
    assert_eq!(versions.api_keys.len(), kafgres_broker::api::served_now(Default::default()).count());
    let metadata = fresh.call(12, &metadata_request(Some(&["fuzzed"]), false)).await;
    assert_eq!(metadata.topics[0].error_code, 0);
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "the broker panicked on bad input (see the output above)");
    broker.broker.shutdown().await;
}

/// xorshift64*: seeded, so a failing input can be replayed.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
