//! Idle and stalled connections are closed after `connection_idle_ms_max`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 16];
    match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Some(started.elapsed()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_stalled_connections_are_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig { connection_idle_ms_max: 300, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    let broker = Broker::start(config, Arc::new(MemoryCatalog::default()), vec![]).await.expect("broker");

    // Silent from the start.
    let mut idle = TcpStream::connect(broker.local_addr()).await.expect("connect");
    let waited = closed_within(&mut idle, Duration::from_secs(10)).await.expect("the idle connection is closed");
    assert!(waited >= Duration::from_millis(250), "not before the idle limit ({waited:?})");

    // A request that stops half way holds its slot no longer than the limit.
    let mut stalled = TcpStream::connect(broker.local_addr()).await.expect("connect");
    stalled.write_all(&100i32.to_be_bytes()).await.expect("write");
    stalled.write_all(&[0, 18, 0, 0]).await.expect("write");
    assert!(closed_within(&mut stalled, Duration::from_secs(10)).await.is_some(), "the stalled connection is closed");
    broker.shutdown().await;
}
