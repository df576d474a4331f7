//! A standalone broker for trying the data plane without Postgres: the
//! in-memory catalog (topics and committed offsets are lost when it stops)
//! and a temporary log directory, with the extension's default settings.
//!
//!     cargo run -p kafgres-broker --example serve -- 127.0.0.1:29192
//!
//! It prints `listening on <address>` once clients can connect and serves
//! until stdin closes or it gets SIGINT/SIGTERM (the default dispositions:
//! it installs no handler). The conformance suite can run against it with
//! `KAFGRES_BOOTSTRAP=<address>` (tests/conformance/README.md); what differs
//! from the extension is only what the `Catalog` port hides (catalog errors,
//! persistence across restarts).

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen: SocketAddr = std::env::args().nth(1).as_deref().unwrap_or("127.0.0.1:0").parse()?;
    let dir = tempfile::tempdir()?;
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.listen = listen;
    // The extension's GUC defaults where the test settings differ.
    config.group_initial_rebalance_delay_ms = 3000;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let catalog = Arc::new(MemoryCatalog::default());
        let broker = Broker::start(config, catalog.clone(), catalog.snapshot()).await?;
        println!("listening on {}", broker.local_addr());
        // Serve until stdin reaches its end (the parent closed it or exited).
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        });
        let _ = stdin_closed.await;
        broker.shutdown().await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    drop(dir);
    Ok(())
}
