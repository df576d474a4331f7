//! A Kafgres broker in-process for the client's tests: it runs on a tokio
//! runtime whose worker threads serve it in the background, while the test
//! thread drives the blocking client.

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use kafgres_client::{Client, ClientConfig, NewRecord, PollWait};
use tempfile::TempDir;

pub const TIMESTAMP_BASE_MS: i64 = 1_700_000_000_000;

pub struct TestBroker {
    runtime: tokio::runtime::Runtime,
    broker: Option<Broker>,
    _dir: TempDir,
}

impl TestBroker {
    pub fn start() -> TestBroker {
        TestBroker::start_with(|_| {})
    }

    /// Starts with settings the test adjusted (authentication, an authorizer...).
    pub fn start_with(adjust: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
        let catalog: Arc<MemoryCatalog> = Arc::default();
        let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
        adjust(&mut config);
        let broker = runtime.block_on(Broker::start(config, catalog.clone(), catalog.topics())).expect("broker starts");
        TestBroker { runtime, broker: Some(broker), _dir: dir }
    }

    pub fn addr(&self) -> SocketAddr {
        self.broker.as_ref().expect("running").local_addr()
    }

    pub fn client(&self) -> Client<PollWait> {
        Client::connect_with(self.addr(), "kafgres-client-tests", PollWait, test_config()).expect("connects")
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            self.runtime.block_on(broker.shutdown());
        }
    }
}

/// Short enough that a hung test fails quickly, long enough for a slow CI.
pub fn test_config() -> ClientConfig {
    ClientConfig { request_timeout: Duration::from_secs(10), ..ClientConfig::default() }
}

/// `count` records `<tag>-k<i>` / `<tag>-v<i>` with two headers (one null);
/// every third value is null.
pub fn records(tag: &str, count: usize) -> Vec<NewRecord> {
    (0..count)
        .map(|i| NewRecord {
            key: Some(format!("{tag}-k{i}").into_bytes()),
            value: if i % 3 == 2 { None } else { Some(format!("{tag}-v{i}").into_bytes()) },
            headers: vec![("trace".into(), Some(format!("t{i}").into_bytes())), ("empty".into(), None)],
            timestamp_ms: TIMESTAMP_BASE_MS + i as i64,
        })
        .collect()
}

/// Asserts that `fetched` are exactly `expected`, stored from `first_offset`.
pub fn assert_records(fetched: &[kafgres_client::Record], expected: &[NewRecord], first_offset: i64) {
    assert_eq!(fetched.len(), expected.len(), "record count");
    for (i, (r, e)) in fetched.iter().zip(expected).enumerate() {
        assert_eq!(r.offset, first_offset + i as i64, "offset of record {i}");
        assert_eq!(r.key.as_deref(), e.key.as_deref(), "key of record {i}");
        assert_eq!(r.value.as_deref(), e.value.as_deref(), "value of record {i}");
        assert_eq!(r.timestamp, e.timestamp_ms, "timestamp of record {i}");
        let headers: Vec<(String, Option<Vec<u8>>)> =
            r.headers.iter().map(|(k, v)| (k.clone(), v.as_ref().map(|v| v.to_vec()))).collect();
        assert_eq!(headers, e.headers, "headers of record {i}");
    }
}
