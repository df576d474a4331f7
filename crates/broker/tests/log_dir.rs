//! The log directory at startup: partition directories no topic of the
//! catalog claims are removed, and a directory recorded as another
//! database's is refused without touching it.

mod common;

use std::sync::Arc;

use common::*;
use kafgres_broker::log_dir::LogDirOwner;
use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("log dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What `DROP EXTENSION` and `CREATE EXTENSION` again, or a crash between a
/// topic's catalog delete and its directories' rename, leave: directories
/// whose records no topic can reach. Kafka deletes such stray replicas at
/// startup; so does Kafgres, touching nothing else in the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_directories_no_topic_claims_are_removed_at_startup() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "kept", 1).await;
    create_topic(&mut client, "forgotten", 2).await;
    produce(&mut client, 9, "kept", 0, -1, batch(&records("k", 3))).await;
    produce(&mut client, 9, "forgotten", 1, -1, batch(&records("f", 5))).await;
    let (dir, catalog) = broker.shutdown().await;

    let forgotten = catalog.topics().into_iter().find(|t| t.name == "forgotten").expect("in the catalog");
    kafgres_broker::Catalog::delete_topic(catalog.as_ref(), forgotten.topic_id).await.expect("delete row");
    std::fs::create_dir(dir.path().join("notes")).expect("an operator's directory");
    std::fs::write(dir.path().join("readme-1"), b"an operator's file").expect("file");
    assert!(names_in(dir.path()).contains(&"forgotten-1".to_string()));

    let broker = TestBroker::start_on(dir, catalog).await;
    // Set aside at start, removed in the background just after.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while names_in(broker.dir.path()).iter().any(|n| n.ends_with("-delete")) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        names_in(broker.dir.path()),
        ["kafgres.owner", "kept-0", "notes", "readme-1"],
        "the forgotten topic's directories are gone, nothing else is"
    );
    assert_eq!(broker.log_end("kept", 0), 3, "a claimed partition keeps its records");
    let mut client = broker.client().await;
    create_topic(&mut client, "forgotten", 2).await;
    assert_eq!(broker.log_end("forgotten", 1), 0, "a topic of that name starts empty");
    broker.broker.shutdown().await;
}

/// A broker serving another database (a changed kafgres.database, a copied
/// cluster) would let its topics claim this directory's same-named
/// partitions and remove the rest as strays: it must refuse to start instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_directory_of_another_database_is_refused_and_left_alone() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "mine", 1).await;
    produce(&mut client, 9, "mine", 0, -1, batch(&records("m", 2))).await;
    let (dir, catalog) = broker.shutdown().await;
    let before = names_in(dir.path());

    let other = LogDirOwner { database_oid: 16_384, database: "app".into(), ..LogDirOwner::for_tests() };
    let config = BrokerConfig { log_dir_owner: other, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    let other_catalog = Arc::new(MemoryCatalog::default());
    match Broker::start(config, other_catalog.clone(), other_catalog.snapshot()).await {
        Ok(broker) => {
            broker.shutdown().await;
            panic!("a broker started on another database's log directory");
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("\"tests\" (OID 0)") && text.contains("\"app\" (OID 16384)"), "{text}");
            assert!(text.contains("hint: point kafgres.log_dir"), "{text}");
        }
    }
    assert_eq!(names_in(dir.path()), before, "nothing moved");

    let broker = TestBroker::start_on(dir, catalog).await;
    assert_eq!(broker.log_end("mine", 0), 2, "its own database still finds its records");
    broker.broker.shutdown().await;
}
